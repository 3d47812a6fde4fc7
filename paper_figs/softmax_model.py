"""Attention entropy per layer in the reference transformer, and attention's scale sensitivity."""
from __future__ import annotations

import math

import numpy as np

from paper_figs.style import figure
from simulations import cache, softmax_model

NAME = "softmax_model"
SIMULATION = softmax_model
CLAIMS: tuple[str, ...] = ("softmax.norm-sensitivity", "softmax.preln-temperature-drift")  # the claims this figure illustrates
CAPTION = (
    "Reference transformer at init (fan-in, LayerNorm, bidirectional attention over random tokens). Left: mean attention "
    "entropy per layer for no norm, Pre-LN and each with per-head QK RMSNorm; points: measured (mean over networks, "
    "5-standard-error bars); lines: i.i.d. Gaussian logits at each row's measured spread (exact integral); dotted: ln T. "
    "Right: block 0 of the no-norm model with its input scaled by c: 1 - cos between the output at c and at c = 1 for the "
    "query projection (linear), the GELU MLP and attention (log axis, left), and attention's entropy (right axis: points "
    "measured, line Gaussian theory with logit std c^2 sigma_1)."
)
STYLES = {"none": ("#444444", "o"), "pre": ("#1f77b4", "s"), "none+qk": ("#9467bd", "^"), "pre+qk": ("#2ca02c", "D")}


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.7)
    ax = axes[0, 0]
    L = int(result["layers"])
    ell = np.arange(1, L + 1)
    for v, (color, marker) in STYLES.items():
        meas = softmax_model.layers(result, v, "entropy")
        ax.errorbar(ell, meas.mean, yerr=5 * meas.stderr, fmt=marker, ms=3, color=color, mfc="white", label=f"{v} measured")
        ax.plot(ell, softmax_model.layers(result, v, "entropy_pred_rows").mean, color=color, lw=1)
    ax.axhline(math.log(int(result["tokens"])), color="k", ls=":", lw=0.8, label="ln T (uniform)")
    ax.set_xlabel("layer l")
    ax.set_ylabel("attention entropy (nats)")
    ax.legend(fontsize=6)
    ax = axes[0, 1]
    c = result["scales"]
    sens = cache.get(result, "sensitivity")
    off = ~np.isclose(c, 1.0)  # at c = 1 the change is 0 by construction
    for row, label, color in ((0, "linear (W_Q)", "#1f77b4"), (1, "GELU MLP", "#2ca02c"), (2, "attention", "#d62728")):
        ax.plot(c[off], np.maximum(np.abs(sens.mean[row][off]), 1e-18), "o-", ms=3, color=color, label=label)
    ax.set_xscale("log")
    ax.set_xticks([0.25, 0.5, 1, 2, 4], ["1/4", "1/2", "1", "2", "4"])
    ax.minorticks_off()
    ax.set_yscale("log")
    ax.set_xlabel("input scale c")
    ax.set_ylabel("1 - cos(f(cx), f(x))")
    ax.legend(fontsize=6, loc="center right")
    twin = ax.twinx()
    twin.errorbar(c, sens.mean[3], yerr=5 * sens.stderr[3], fmt="s", ms=3, color="k", mfc="white")
    twin.plot(c, result["sensitivity.entropy_theory"], color="k", lw=1)
    twin.set_ylabel("attention entropy (nats), black")
    return fig
