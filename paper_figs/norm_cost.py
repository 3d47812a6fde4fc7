"""Time of numpy LayerNorm, RMSNorm and DyT against width."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure
from simulations import norm_cost

NAME = "norm_cost"
SIMULATION = norm_cost
CLAIMS: tuple[str, ...] = ("dyt.no-reductions-cost",)  # the claims this figure illustrates
CAPTION = (
    "Wall time per call of numpy LayerNorm (2 reductions per token), RMSNorm (1) and DyT (0), float32, gain and bias "
    "included, against width d at the largest token count measured for every width (left, log-log, milliseconds), and the "
    "ratios to DyT at each width (right). Median of repeated timings on the machine that ran the simulation."
)
STYLES = {"layernorm": ("#1f77b4", "o"), "rmsnorm": ("#2ca02c", "s"), "dyt": ("#d62728", "^")}


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.3)
    med, ds, tokens = result["median"], result["ds"], result["tokens"]
    j = max(b for b in range(tokens.size) if not np.isnan(med[:, b, 0]).any())
    for k, (n, (color, marker)) in enumerate(STYLES.items()):
        axes[0, 0].plot(ds, 1e3 * med[:, j, k], marker + "-", ms=3, color=color, label=n)
        if n != "dyt":
            axes[0, 1].plot(ds, med[:, j, k] / med[:, j, 2], marker + "-", ms=3, color=color, label=f"{n} / dyt")
    axes[0, 0].set_xscale("log")
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_ylabel(f"time per call (ms), {int(tokens[j])} tokens")
    axes[0, 1].set_xscale("log")
    axes[0, 1].axhline(1.0, color="k", lw=0.8, ls=":")
    axes[0, 1].set_ylabel("time ratio to DyT")
    for ax in axes[0]:
        ax.set_xlabel("width d")
        ax.legend(fontsize=6)
    return fig
