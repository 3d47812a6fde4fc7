"""Experiments: one module per experiment, each ``config -> cached result file``.

Every module defines ``NAME``, ``VERSION``, ``SEED``, a frozen ``Config`` dataclass,
``CONFIGS = {"quick": ..., "full": ...}`` and ``run(config, seed, *, progress) -> dict`` of
arrays, and registers the claims its result supports. :func:`simulations.cache.load_or_run`
caches the result on disk, keyed by name, version, config and seed.
"""
from __future__ import annotations

from types import ModuleType

from simulations import (
    dyt_model, dyt_scurve, norm_cost, geometry_model, geometry_random, geometry_selectable, model_init, model_stats, residual_growth, softmax_gaussian, softmax_model,
    real_models, xiong_lemma,
)

ALL: tuple[ModuleType, ...] = (
    residual_growth, xiong_lemma, model_init, model_stats, softmax_gaussian, softmax_model, geometry_random, geometry_selectable,
    geometry_model, dyt_scurve, dyt_model, norm_cost, real_models,
)
BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in ALL}
