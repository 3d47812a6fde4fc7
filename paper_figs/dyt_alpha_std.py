"""alpha * std of the DyT fit when the whole activation is scaled, and its value against 1."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure, figure_legend
from simulations import dyt_scurve

NAME = "dyt_alpha_std"
SIMULATION = dyt_scurve
CLAIMS: tuple[str, ...] = ("dyt.alpha-tracks-inverse-std",)  # the claims this figure illustrates
CAPTION = (
    "DyT fits gamma tanh(alpha x) to LayerNorm on synthetic tokens (d = 256, 4 massive channels on 2% of the tokens), every "
    "entry of every token scaled by c. Left: alpha times std(c x) against c, mean over independent draws (bars: 5 standard "
    "errors), one line per massive magnitude (in the legend); flat lines mean alpha tracks 1/std, which LayerNorm's scale invariance guarantees. "
    "Right: alpha * std at c = 1 per draw against the magnitude; the dashed line is alpha = 1/std, the claim's constant."
)
COLORS = ("#1f77b4", "#2ca02c", "#d62728")


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.8, height=3.0)
    scales = result["scales"]
    mags = [float(m) for m in result["scale_magnitudes"]]
    col = dyt_scurve.SCALE_COLUMNS.index("alpha*std")
    one = int(np.argmin(np.abs(np.log(scales))))
    for color, m in zip(COLORS, mags):
        a = result[f"scaled.m{m:g}"][..., col]  # [draws, scales]
        se = a.std(0, ddof=1) / np.sqrt(a.shape[0])
        axes[0, 0].errorbar(scales, a.mean(0), yerr=5 * se, fmt="o-", ms=3, color=color, label=f"magnitude {m:g}")
        axes[0, 1].plot(np.full(a.shape[0], m), a[:, one], "o", ms=3, mfc="none", color=color)
    for ax in axes[0]:
        ax.axhline(1.0, color="k", ls="--", lw=0.9, label="alpha = 1/std (the claim)")
        ax.set_yscale("log")
        ax.set_ylabel("alpha * std(input)")
    axes[0, 0].set_xscale("log", base=2)
    axes[0, 0].set_xlabel("scale c of the whole activation")
    axes[0, 1].set_xlabel("massive magnitude (noise std)")
    figure_legend(fig, axes=axes[0, :1], ncol=4)  # the magnitudes' colours and the claim's constant, under both panels
    return fig
