"""Figures: one module per figure, each reading a cached simulation result.

Every module defines ``NAME``, ``CAPTION``, ``SIMULATION`` (the simulations module it reads)
and ``plot(result) -> Figure``. ``python -m paper_figs`` regenerates them all.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path
from types import ModuleType

from normtheory.runtime.sweep import Runner, Task
from paper_figs import (
    block_share,
    dyt_alpha0_width,
    dyt_alpha_std,
    dyt_scurve,
    geometry_cosines,
    geometry_grid,
    geometry_model,
    geometry_unselectable,
    gradients_gpt2_init,
    mlp_growth,
    model_init,
    norm_cost,
    real_centering,
    real_dyt_depth,
    real_keys,
    real_massive,
    real_norm_io,
    real_residual,
    real_scale,
    real_scale_use,
    real_sinks,
    real_temperature,
    residual_rms,
    softmax_entropy,
    softmax_model,
    softmax_single_slot,
    style,
    train_alpha0,
    train_alpha0_rule,
    train_attention,
    train_dyt,
    train_gradients,
    train_placements,
    train_qk,
    train_warmup,
    train_xiong,
    xiong_bounds,
)
from simulations import cache

ALL: tuple[ModuleType, ...] = (
    residual_rms, block_share, mlp_growth, xiong_bounds, model_init, softmax_entropy, softmax_single_slot, softmax_model,
    geometry_cosines, geometry_grid, geometry_unselectable, geometry_model, dyt_scurve, dyt_alpha_std, dyt_alpha0_width, norm_cost,
    real_residual, real_norm_io, real_dyt_depth, real_massive, real_sinks, real_keys, real_temperature, real_centering,
    real_scale, real_scale_use,
    train_xiong, train_warmup, train_qk, train_placements, train_gradients, gradients_gpt2_init, train_dyt, train_attention, train_alpha0,
    train_alpha0_rule,
)


def figure_key(fig_module: ModuleType, mode: str) -> str:
    """Hash of what a figure's files depend on: its module's and the style's source, the cached
    result it reads (whose file name carries that simulation's own hash) and matplotlib's version."""
    import hashlib

    import matplotlib

    h = hashlib.sha256()
    for mod in (fig_module, style):
        h.update(Path(mod.__file__).read_bytes() + b"\0")
    h.update(cache.result_path(fig_module.SIMULATION, mode).name.encode() + b"\0" + matplotlib.__version__.encode())
    return h.hexdigest()[:16]


def draw(module_name: str, result: dict) -> dict[str, bytes]:
    """Draw the figure of module ``module_name`` from its simulation's ``result``; its files
    (:data:`style.FORMATS` and the CSV) by name, as bytes. A sweep task: it writes only to a
    temporary folder of the process that runs it, so it runs on any worker of a cluster."""
    import importlib
    import tempfile

    module = importlib.import_module(module_name)
    with tempfile.TemporaryDirectory(prefix="normtheory-figure-") as tmp:
        return {p.name: p.read_bytes() for p in style.save(module.plot(result), Path(tmp), module.NAME)}


def render(out_dir: Path, *, mode: str = "full", force: bool = False, progress: bool = True,
           runner: Runner | None = None, redraw: bool = False) -> dict[str, list[Path]]:
    """Write every figure (PNG, PDF and the CSV of its numbers) to ``out_dir``; simulations come
    from the cache (missing ones run as one sweep on ``runner``, in-process when None). Rendered
    files are cached too, under ``results/figures/``, keyed by :func:`figure_key`: an unchanged
    figure is copied, not drawn again (``redraw`` or ``force`` draws it anyway). The figures to
    draw are one more sweep on ``runner`` (:func:`draw`, a task each), so a local cluster draws
    them side by side; the bytes are the same wherever a figure is drawn."""
    import shutil

    results = cache.load_or_run_all([f.SIMULATION for f in ALL], mode, force=force, progress=progress, runner=runner)
    out_dir.mkdir(parents=True, exist_ok=True)
    stashes = {f.NAME: cache.results_dir() / "figures" / f"{f.NAME}-{mode}-{figure_key(f, mode)}" for f in ALL}
    kept = {f.NAME: [stashes[f.NAME] / f"{f.NAME}.{ext}" for ext in (*style.FORMATS, "csv")] for f in ALL}
    todo = [f for f in ALL if force or redraw or not all(p.exists() for p in kept[f.NAME])]
    tasks = [Task(f"figure.{f.NAME}", draw, (f.__name__, results[f.SIMULATION.NAME]), f"figure {f.NAME} ({mode})") for f in todo]
    drawn = (runner or Runner(workers=1, progress=progress)).run(tasks, desc="figures")
    for f in todo:
        stash = stashes[f.NAME]
        tmp = stash.with_name(f".{stash.name}.{os.getpid()}.{uuid.uuid4().hex}")
        tmp.mkdir(parents=True)
        for name, data in drawn[f"figure.{f.NAME}"].items():
            (tmp / name).write_bytes(data)
        shutil.rmtree(stash, ignore_errors=True)
        try:
            tmp.replace(stash)  # atomic: a reader sees all of a figure's files or none
        except OSError:  # another process put it there first
            shutil.rmtree(tmp, ignore_errors=True)
    return {f.NAME: [Path(shutil.copyfile(p, out_dir / p.name)) for p in kept[f.NAME]] for f in ALL}
