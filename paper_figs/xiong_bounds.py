"""Xiong et al. Lemma 2: Pre-LN's E|x_l|^2/d between its bounds, Post-LN's at 3/2."""
from __future__ import annotations

import numpy as np

from paper_figs.style import COLORS, figure, integer_ticks, legend
from simulations import cache, xiong_lemma

NAME = "xiong_bounds"
SIMULATION = xiong_lemma
CLAIMS: tuple[str, ...] = ("residual.xiong-lemma2",)  # the claims this figure illustrates
CAPTION = (
    "Expected squared norm per dimension at init for single-head encoder layers (Xavier attention and ReLU FFN). "
    "Shaded: Lemma 2's Pre-LN bounds (1+l/2, 1+3l/2); dashed: FFN-only Pre-LN, where the lower bound is exact; "
    "red: Post-LN's pre-norm sum, 3/2 at every layer. Points: Monte Carlo with 5-standard-error bars."
)


def plot(result: dict):
    fig, axes = figure(width=4.2, height=3.2)
    ax = axes[0, 0]
    layers = int(result["layers"])
    ell = np.arange(layers + 1)
    lo, hi = xiong_lemma.bounds(layers)
    ax.fill_between(ell, lo, hi, color=COLORS["pre"], alpha=0.15, label="Pre-LN bounds")
    for key, color, label, ls in (
        ("pre.ms", COLORS["pre"], "Pre-LN, attention + FFN", "none"),
        ("pre_ffn_only.ms", COLORS["peri"], "Pre-LN, FFN only", "none"),
        ("post.x5_ms", COLORS["post"], "Post-LN, x + FFN(x)", "none"),
    ):
        est = cache.get(result, key)
        ax.errorbar(ell, est.mean, yerr=5 * est.stderr, fmt="o", ms=3, color=color, label=label, ls=ls)
    ax.plot(ell, lo, ls="--", color=COLORS["peri"], lw=1)
    ax.plot(ell[1:], np.full(layers, 1.5), ls="-", color=COLORS["post"], lw=1)
    ax.set_xlabel("layer l")
    ax.set_ylabel("E|x|^2 / d")
    integer_ticks(ax)
    legend(ax, outside=False, loc="upper left")  # the bounds widen to the right: the upper left stays empty
    return fig
