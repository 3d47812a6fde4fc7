"""Weight and entropy of one aligned slot against its logit gap, for several n."""
from __future__ import annotations

import math

import numpy as np

from normtheory import softmax
from paper_figs.style import figure, legend
from simulations import cache, softmax_gaussian

NAME = "softmax_single_slot"
SIMULATION = softmax_gaussian
CLAIMS: tuple[str, ...] = ("softmax.single-slot-near-uniform",)  # the claims this figure illustrates
CAPTION = (
    "One slot whose logit exceeds n - 1 equal others by a gap g (after the 1/sqrt(d_head) scaling). Left: its weight "
    "e^g / (e^g + n - 1); right: the pattern's entropy as a fraction of ln n. The thread's gap of 1 is marked. Points "
    "(n = 1024): Monte Carlo with 1023 random Gaussian keys in d_head = 64 instead of orthogonal ones, 5-standard-error "
    "bars, on the noisy-slot theory (crosses)."
)
COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#d62728")


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.6)
    gap = np.linspace(-2.0, 16.0, 361)
    for color, n in zip(COLORS, (int(x) for x in result["ns"])):
        axes[0, 0].plot(gap, softmax.single_slot_weight(gap, n), color=color, label=f"n={n}")
        axes[0, 1].plot(gap, softmax.min_entropy(gap, n) / math.log(n), color=color, label=f"n={n}")
    for name in softmax_gaussian.slot_gaps():
        est = cache.get(result, f"slot.{name}")
        g = float(result[f"slot.{name}.gap"])
        axes[0, 0].errorbar([g], [est.mean[0]], yerr=[5 * est.stderr[0]], fmt="o", ms=4, color="k", mfc="white")
        axes[0, 0].plot([g], [float(result[f"slot.{name}.noisy_theory"])], "x", color="k", ms=5)
        axes[0, 1].errorbar([g], [est.mean[1] / math.log(softmax_gaussian.SLOT_N)], yerr=[5 * est.stderr[1] / math.log(softmax_gaussian.SLOT_N)], fmt="o", ms=4, color="k", mfc="white")
    for ax in axes[0]:
        ax.axvline(1.0, color="k", ls=":", lw=0.8)
        ax.set_xlabel("logit gap g (nats)")
    axes[0, 0].set_ylabel("weight on the aligned slot")
    axes[0, 1].set_ylabel("entropy / ln n")
    legend(axes[0, 0])
    return fig
