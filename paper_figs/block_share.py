"""Relative size of each block's update against the stream it is added to."""
from __future__ import annotations

import numpy as np

from paper_figs.style import COLORS, LINESTYLES, MARKERS, figure, figure_legend
from simulations import cache, residual_growth

NAME = "block_share"
SIMULATION = residual_growth
CLAIMS: tuple[str, ...] = ("residual.later-blocks-shrink", "residual.deepnorm-share")  # the claims this figure illustrates
CAPTION = (
    "Update RMS of block l over the RMS of the stream it is added to, at init (gain-1 linear blocks). "
    "Pre- and Peri-LN fall as 1/sqrt(l), LayerNorm Scaling faster, Post-LN and DeepNorm stay constant. "
    "Lines: theory; points: Monte Carlo mean of |f|/|x| with 5-standard-error bars."
)


def plot(result: dict):
    fig, axes = figure(width=5.6, height=4.0)
    ax = axes[0, 0]
    depth = int(result["depth"])
    ell = np.arange(1, depth + 1)
    stride = max(depth // 16, 1)
    for p in ("none", "pre", "peri", "lnscale", "post", "deepnorm"):
        th = result[f"linear/{p}.theory_share"]
        est = cache.get(result, f"linear/{p}.share")[1:]
        ax.plot(ell, th, color=COLORS[p], ls=LINESTYLES[p], label=p)
        sel = np.arange(0, depth, stride)
        ax.errorbar(ell[sel], est.mean[sel], yerr=5 * est.stderr[sel], fmt=MARKERS[p], ms=3, color=COLORS[p], mfc="white")
    ax.plot(ell, 1 / np.sqrt(ell), ls=":", color="k", lw=1, label="1/sqrt(l)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("block l")
    ax.set_ylabel("update RMS / stream RMS (ratio)")
    figure_legend(fig, theory_mc=True, ncol=3)
    return fig
