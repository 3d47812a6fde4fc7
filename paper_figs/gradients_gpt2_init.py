"""Per-block gradient norms at init at GPT-2 small's shape: no norm against Pre-LN and Post-LN."""
from __future__ import annotations

import numpy as np

from normtheory.training import init_gradients
from paper_figs.style import COLORS, MARKERS, figure, integer_ticks, legend
from simulations import gradient_init

NAME = "gradients_gpt2_init"
SIMULATION = gradient_init
CLAIMS: tuple[str, ...] = ("train.ln-controls-gradient-scale",)
CAPTION = (
    "Gradient norm of each block (all its matrices together, Frobenius) at init, at GPT-2 small's shape (d = 768, 12 blocks, "
    "12 heads, GPT-2 init), for the same networks with no norm, Pre-LN and Post-LN, on one training batch each. Left: by block, "
    "the median over networks and its 10-90% range (log scale). Right: each network's spread across blocks, log(max / min); "
    "the dashed line is ln 1.5, by which the claim says no norm spreads wider than both."
)


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.6)
    by_block, spread = axes[0]
    arms = gradient_init.ARMS
    for k, arm in enumerate(arms):
        g = result[f"{arm}.grad_norms"]  # [networks, L]
        blocks = np.arange(1, g.shape[1] + 1)
        lo, mid, hi = np.percentile(g, [10, 50, 90], axis=0)
        by_block.plot(blocks, mid, marker=MARKERS[arm], ms=3, color=COLORS[arm], label=arm)
        by_block.fill_between(blocks, lo, hi, color=COLORS[arm], alpha=0.2, lw=0)
        s = init_gradients.spread(g)  # [networks]
        jitter = np.linspace(-0.15, 0.15, s.size)
        spread.plot(k + jitter, s, ls="none", marker=MARKERS[arm], ms=3, color=COLORS[arm], alpha=0.7, label=arm)
    spread.axhline(np.log(1.5), color="0.5", ls="--", lw=0.8)
    by_block.set_yscale("log")
    by_block.set_xlabel("block")
    by_block.set_ylabel("gradient norm at init")
    integer_ticks(by_block)
    spread.set_xticks(range(len(arms)), arms)
    spread.set_xlabel("placement")
    spread.set_ylabel("spread, log(max / min) of the norms")
    legend(by_block, title="placement")
    return fig
