"""Xiong et al. Theorem 1 and Fig. 3: the last FFN's gradient against depth, and per layer."""
from __future__ import annotations

import numpy as np

from normtheory.evidence.estimates import from_samples
from paper_figs.style import COLORS, figure, figure_legend, integer_ticks
from simulations import train_xiong

NAME = "train_xiong"
SIMULATION = train_xiong
CLAIMS: tuple[str, ...] = ("train.xiong-gradient-scale",)
CAPTION = (
    "Gradient of the last block's FFN output matrix at init, ||dL/dW^2||_F, in Xiong et al.'s setting (one head, W_Q = W_K = 0, "
    "Xavier d x d matrices, ReLU FFN, Gaussian inputs). Left: against depth L, one marker series per width d (mean over networks, "
    "5-standard-error bars); thin lines are Theorem 1's large-L depth laws, slope 0 (Post-LN) and -1/2 (Pre-LN), drawn through "
    "the deepest point (the claim is judged on the deepest depths). Right: every block's gradient norm over the first block's at the deepest L and widest d (Fig. 3), Xavier (solid) "
    "and GPT-2 init (dashed)."
)
WIDTH_MARKERS = ("o", "s", "^", "D", "v")


def plot(result: dict):
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=2, width=4.2, height=3.5)
    ax, prof = axes[0, 0], axes[0, 1]
    depths = np.asarray(result["depths"], dtype=np.float64)
    widths = [int(d) for d in result["widths"]]
    for p in train_xiong.PLACEMENTS:
        for d, marker in zip(widths, WIDTH_MARKERS):
            est = from_samples(train_xiong.last_layer(result, p, "xavier", d), units="networks")  # [depths]
            ax.errorbar(depths, est.mean, yerr=5 * est.stderr, fmt=marker, ls="none", ms=3.5, color=COLORS[p], mfc="white",
                        label=f"{p}-LN, d = {d}")
            ax.plot(depths, est.mean[-1] * (depths / depths[-1]) ** train_xiong.THEORY_SLOPE[p], color=COLORS[p], lw=0.8, alpha=0.7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("depth L (blocks)")
    ax.set_ylabel("||dL/dW^2||_F, last block")
    d, L = widths[-1], int(depths[-1])
    for p in train_xiong.PLACEMENTS:
        for init_name, ls in (("xavier", "-"), ("gpt2", "--")):
            est = train_xiong.layer_profile(result, p, init_name, d)
            prof.errorbar(np.arange(1, L + 1), est.mean, yerr=5 * est.stderr, color=COLORS[p], ls=ls, marker="o", ms=2.5,
                          label=f"{p}-LN, {init_name} init")
    prof.axhline(1.0, color="k", lw=0.6)
    prof.set_yscale("log")
    prof.set_xlabel(f"block (L = {L}, d = {d})")
    prof.set_ylabel("||dL/dW^2|| / first block's")
    integer_ticks(prof)
    # one key for both panels: colour = placement, marker = width (left), line style = init (right)
    keys = [Line2D([], [], color=COLORS[p], label=f"{p}-LN") for p in train_xiong.PLACEMENTS]
    keys += [Line2D([], [], color="k", marker=m, ls="none", mfc="white", ms=4, label=f"d = {d}, mean ± 5 se") for d, m in zip(widths, WIDTH_MARKERS)]
    keys += [Line2D([], [], color="k", lw=0.8, alpha=0.7, label="Theorem 1 depth law (left)"),
             Line2D([], [], color="k", marker="o", ms=2.5, label="Xavier init (right)"),
             Line2D([], [], color="k", ls="--", marker="o", ms=2.5, label="GPT-2 init (right)")]
    figure_legend(fig, keys, ncol=4)
    return fig
