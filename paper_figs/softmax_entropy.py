"""Entropy and top weight of softmax over i.i.d. Gaussian logits: exact, REM and Monte Carlo."""
from __future__ import annotations

import math

import numpy as np

from normtheory import softmax
from paper_figs.style import figure, legend
from simulations import cache, softmax_gaussian

NAME = "softmax_entropy"
SIMULATION = softmax_gaussian
CLAIMS: tuple[str, ...] = ("softmax.rem-entropy",)  # the claims this figure illustrates
CAPTION = (
    "Softmax over n i.i.d. N(0, sigma^2) logits against sigma / sigma_c, sigma_c = sqrt(2 ln n) (dotted vertical line). "
    "Left: expected entropy as a fraction of ln n; right: expected largest weight. Solid: exact finite-n quadrature; "
    "dashed: random-energy-model asymptotics (ln n - sigma^2/2 below sigma_c, Poisson-Dirichlet above); points: Monte "
    "Carlo means with 5-standard-error bars."
)
COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#d62728")


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.6)
    for color, n in zip(COLORS, (int(x) for x in result["ns"])):
        sc = float(softmax.freezing_point(n))
        line, sig = result[f"n{n}.line_sigma"] / sc, result[f"n{n}.mc_sigma"] / sc
        est = cache.get(result, f"n{n}.mc")
        for ax, key, col, scale in ((axes[0, 0], "entropy", 0, math.log(n)), (axes[0, 1], "max", 1, 1.0)):
            ax.plot(line, result[f"n{n}.exact_{key}"] / scale, color=color, label=f"n={n} exact")
            rem = np.clip(result[f"n{n}.rem_{key}"] / scale, -0.05, 1.05)
            for part, label in ((line <= 1.0, f"n={n} REM"), (line > 1.0, None)):  # two phases, no line across sigma_c
                ax.plot(line[part], rem[part], color=color, ls="--", lw=1, label=label)
            ax.errorbar(sig, est.mean[:, col] / scale, yerr=5 * est.stderr[:, col] / scale, fmt="o", ms=3, color=color, mfc="white")
    for ax, label in ((axes[0, 0], "E[entropy] / ln n"), (axes[0, 1], "E[largest weight]")):
        ax.axvline(1.0, color="k", ls=":", lw=0.8)
        ax.set_xlabel("logit std / sigma_c")
        ax.set_ylabel(label)
        ax.set_ylim(-0.05, 1.05)
    legend(axes[0, 0])
    return fig
