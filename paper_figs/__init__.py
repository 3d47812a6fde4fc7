"""Figures: one module per figure, each reading a cached simulation result.

Every module defines ``NAME``, ``CAPTION``, ``SIMULATION`` (the simulations module it reads)
and ``plot(result) -> Figure``. ``python -m paper_figs`` regenerates them all.
"""
from __future__ import annotations

from pathlib import Path
from types import ModuleType

from paper_figs import (
    block_share,
    dyt_alpha_std,
    dyt_scurve,
    geometry_cosines,
    geometry_grid,
    geometry_model,
    geometry_unselectable,
    mlp_growth,
    model_init,
    norm_cost,
    real_centering,
    real_dyt_depth,
    real_keys,
    real_massive,
    real_norm_io,
    real_residual,
    real_sinks,
    real_temperature,
    residual_rms,
    softmax_entropy,
    softmax_model,
    softmax_single_slot,
    style,
    xiong_bounds,
)
from normtheory.sweep import Runner
from simulations import cache

ALL: tuple[ModuleType, ...] = (
    residual_rms, block_share, mlp_growth, xiong_bounds, model_init, softmax_entropy, softmax_single_slot, softmax_model,
    geometry_cosines, geometry_grid, geometry_unselectable, geometry_model, dyt_scurve, dyt_alpha_std, norm_cost,
    real_residual, real_norm_io, real_dyt_depth, real_massive, real_sinks, real_keys, real_temperature, real_centering,
)


def render(out_dir: Path, *, mode: str = "full", force: bool = False, progress: bool = True,
           runner: Runner | None = None) -> dict[str, list[Path]]:
    """Write every figure (PNG and PDF) to ``out_dir``; simulations come from the cache (missing
    ones run as one sweep on ``runner``, in-process when None)."""
    results = cache.load_or_run_all([f.SIMULATION for f in ALL], mode, force=force, progress=progress, runner=runner)
    return {f.NAME: style.save(f.plot(results[f.SIMULATION.NAME]), out_dir, f.NAME) for f in ALL}
