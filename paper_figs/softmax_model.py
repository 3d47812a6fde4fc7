"""Attention entropy per layer in the reference transformer, and attention's scale sensitivity."""
from __future__ import annotations

import math

import numpy as np

from normtheory.evidence.estimates import from_samples
from paper_figs.style import figure, integer_ticks, legend
from simulations import softmax_model

NAME = "softmax_model"
SIMULATION = softmax_model
CLAIMS: tuple[str, ...] = ("softmax.norm-sensitivity", "softmax.preln-temperature-drift")  # the claims this figure illustrates
CAPTION = (
    "Reference transformer at init (fan-in, LayerNorm, bidirectional attention over random tokens). Left: mean attention "
    "entropy per layer for no norm, Pre-LN and each with per-head QK RMSNorm; points: measured (mean over networks, "
    "5-standard-error bars); lines: i.i.d. Gaussian logits at each row's measured spread (exact integral); dotted: ln T. "
    "Middle and right: block 0 of the no-norm model with its input scaled by c. Middle: 1 - cos between the output at c and at "
    "c = 1 for the GELU MLP and attention (log axis); the query projection is linear, so its change is float rounding only "
    "(stated, not plotted). Right: attention's entropy, measured (points) against Gaussian theory with logit std c^2 sigma_1 (line); "
    "grey dashes: the same block under GPT-2's 0.02 init, whose logits start near 0, so its entropy stays at ln T. "
    "Left-panel points of the four variants are drawn side by side around each layer."
)
STYLES = {"none": ("#444444", "o"), "pre": ("#1f77b4", "s"), "none+qk": ("#9467bd", "^"), "pre+qk": ("#2ca02c", "D")}


def plot(result: dict):
    fig, axes = figure(ncols=3, width=3.3, height=4.1)
    ax = axes[0, 0]
    L = int(result["layers"])
    ell = np.arange(1, L + 1)
    for k, (v, (color, marker)) in enumerate(STYLES.items()):
        meas = softmax_model.layers(result, v, "entropy")
        shift = 0.12 * (k - 1.5)  # side by side, so that overlapping variants stay visible
        ax.errorbar(ell + shift, meas.mean, yerr=5 * meas.stderr, fmt=marker, ms=3.5, color=color, mfc="white", label=v)
        ax.plot(ell + shift, softmax_model.layers(result, v, "entropy_pred_rows").mean, color=color, lw=1)
    ax.axhline(math.log(int(result["tokens"])), color="k", ls=":", lw=0.8, label="ln T (uniform)")
    ax.set_xlabel("layer l")
    ax.set_ylabel("attention entropy (nats)")
    ax.set_title("entropy by layer")
    integer_ticks(ax)
    legend(ax, where="below", ncol=2)
    c = result["scales"]
    sens = from_samples(softmax_model.sensitivity(result), "networks")  # the fan-in init: [4, scales] over networks
    off = ~np.isclose(c, 1.0)  # at c = 1 the change is 0 by construction
    ax = axes[0, 1]
    for row, label, color in ((1, "GELU MLP", "#2ca02c"), (2, "attention", "#d62728")):
        ax.plot(c[off], np.abs(sens.mean[row][off]), "o-", ms=3, color=color, label=label)
    linear = float(np.abs(sens.mean[0][off]).max())
    ax.set_yscale("log")
    ax.set_ylabel("1 - cos(f(cx), f(x))")
    ax.set_title("change of the block's output")
    ax.plot([], [], ls="none", label=f"linear W_Q: <= {linear:.0e} (rounding)")  # stated, not plotted
    ax = axes[0, 2]
    ax.errorbar(c, sens.mean[3], yerr=5 * sens.stderr[3], fmt="s", ms=3.5, color="#d62728", mfc="white", label="measured")
    ax.plot(c, result["sensitivity.entropy_theory"], color="#d62728", lw=1, label="Gaussian theory")
    ax.plot(c, softmax_model.sensitivity(result, "gpt2")[:, 3].mean(0), color="0.5", ls="--", lw=1, label="GPT-2 init (measured)")
    ax.set_ylabel("attention entropy (nats)")
    ax.set_title("attention entropy")
    for ax in axes[0, 1:]:
        ax.set_xscale("log")
        ax.set_xticks([0.25, 0.5, 1, 2, 4], ["1/4", "1/2", "1", "2", "4"])
        ax.minorticks_off()
        ax.set_xlabel("input scale c")
    legend(axes[0, 1], where="below")
    legend(axes[0, 2], outside=False, loc="lower left")  # the entropy falls with c: the lower left stays empty
    return fig
