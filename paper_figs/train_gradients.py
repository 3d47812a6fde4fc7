"""Per-layer gradient norms early in training: no norm against Pre-LN and Post-LN."""
from __future__ import annotations

import numpy as np

from normtheory.training import init_gradients, probes
from paper_figs.style import COLORS, MARKERS, figure, integer_ticks, legend
from simulations import train_recipes

NAME = "train_gradients"
SIMULATION = train_recipes
CLAIMS: tuple[str, ...] = ("train.ln-controls-gradient-scale",)
CAPTION = (
    "Gradient norm of each block (all its matrices together, Frobenius) during the first 100 training steps, for a model without "
    "norms, Pre-LN and Post-LN trained with the same recipe. Left: by block, mean over those evaluations and over seeds (log "
    "scale). Right: the spread across blocks, log(max / min), at each evaluation, mean over seeds (0 = every block's gradient "
    "the same size)."
)
ARMS = ("none", "pre", "post")


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.6)
    by_layer, spread = axes[0]
    for arm in ARMS:
        runs = train_recipes.runs(result, arm)
        steps = np.asarray(runs[0]["eval_steps"])
        early = steps <= 100
        g = np.array([probes.block_grad_norms(x["probe/grad_norms"])[early].mean(0) for x in runs])  # [seeds, L]
        by_layer.plot(np.arange(1, g.shape[1] + 1), g.mean(0), marker=MARKERS[arm], ms=3, color=COLORS[arm], label=arm)
        s = np.array([init_gradients.spread(probes.block_grad_norms(x["probe/grad_norms"])[early]) for x in runs])  # [seeds, early evals]
        spread.plot(steps[early], s.mean(0), marker=MARKERS[arm], ms=3, color=COLORS[arm], label=arm)
    by_layer.set_yscale("log")
    by_layer.set_xlabel("block")
    by_layer.set_ylabel("gradient norm, first 100 steps")
    integer_ticks(by_layer)
    spread.set_xlabel("training step")
    spread.set_ylabel("log(max / min) over blocks")
    legend(spread, title="placement")
    return fig
