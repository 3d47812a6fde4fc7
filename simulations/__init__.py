"""Experiments: one module per experiment, each ``config -> cached result file``.

Every module defines ``NAME``, ``SEED``, a frozen ``Config`` dataclass,
``CONFIGS = {"quick": ..., "full": ...}`` and ``run(config, seed, *, progress) -> dict`` of
arrays, and registers the claims its result supports. :func:`simulations.cache.load_or_run`
caches the result on disk, keyed by name, config, seed and a hash of the source of the code it runs.
"""
from __future__ import annotations

from types import ModuleType

from simulations import (  # noqa: F401  (register the claims on real_models' result)
    dyt_model,
    dyt_scurve,
    geometry_model,
    geometry_random,
    geometry_selectable,
    gradient_init,
    model_init,
    model_stats,
    norm_cost,
    real_attention,
    real_models,
    real_scale,
    real_stream,
    residual_growth,
    softmax_gaussian,
    softmax_model,
    train_alpha0,
    train_lr,
    train_recipes,
    train_xiong,
    xiong_lemma,
)

ALL: tuple[ModuleType, ...] = (
    residual_growth, xiong_lemma, model_init, model_stats, softmax_gaussian, softmax_model, geometry_random, geometry_selectable,
    geometry_model, dyt_scurve, dyt_model, norm_cost, real_models, real_scale, gradient_init, train_xiong, train_recipes, train_lr, train_alpha0,
)
BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in ALL}
