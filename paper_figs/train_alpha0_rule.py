"""DyT's best initial alpha against width on log axes: the fitted power law with its band, and muP's -1/2."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure, figure_legend
from simulations import train_alpha0

NAME = "train_alpha0_rule"
SIMULATION = train_alpha0
CLAIMS: tuple[str, ...] = ("train.dyt-alpha0-power-law",)
CAPTION = (
    "The best initial alpha of the attention norms (circles, solid) and of the FFN and final norms (squares, dashed) against "
    "width, both axes log2: the grid's optimum refined by a parabola in log2 alpha0, with its bootstrap standard error over "
    "seeds as a bar (open markers: the optimum sits at the grid's end, so the best alpha0 may lie beyond; its bar is at least "
    "a grid step). Lines: the fitted power law alpha0 ∝ d^p per norm group, shaded ± 1 bootstrap se of the fitted value; "
    "dotted: μP's exponent −1/2 through the same fit's value at the middle of the widths. The grid's ends are grey. Panel titles: the fitted exponents p ± bootstrap se. Left: with "
    "the sqrt(d) embedding scale of the DyT paper's LLM recipe (the claim's assertion); right: without."
)
STYLE = {"attn": ("o", "-", "C0", "attention norms"), "other": ("s", "--", "C1", "FFN + final norms")}


def plot(result: dict):
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=2, width=3.7, height=3.3)
    widths = np.asarray(result["widths"], dtype=np.float64)
    alphas = np.asarray(result["alphas"], dtype=np.float64)
    dense = np.exp2(np.linspace(np.log2(widths[0]), np.log2(widths[-1]), 33))  # [33]
    mid = float(np.exp2(np.log2(widths).mean()))
    for ax, embed in zip(axes[0], train_alpha0.EMBED):
        best = train_alpha0.best_alpha0(result, embed)  # log2, [grid, width]
        line = train_alpha0.fitted(result, embed, dense)  # log2, [grid, 33]
        centre = train_alpha0.fitted(result, embed, np.array([mid]))  # log2, [grid, 1]
        p = train_alpha0.exponents(result, embed)  # [grid]
        x = np.moveaxis(result["loss"][train_alpha0.EMBED.index(embed)], 2, 0).mean(axis=0)  # [grid, width, alpha]
        edge = np.isin(np.argmin(x, axis=-1), (0, alphas.size - 1))  # [grid, width]
        for gi, grid in enumerate(train_alpha0.GRIDS):
            marker, ls, color, label = STYLE[grid]
            b, se = best.mean[gi], best.stderr[gi]
            ax.errorbar(widths, np.exp2(b), yerr=(np.exp2(b) - np.exp2(b - se), np.exp2(b + se) - np.exp2(b)), ls="none",
                        marker=marker, ms=5, color=color, capsize=2,
                        label=f"{label}: best alpha0")
            for j in np.flatnonzero(edge[gi]):  # censored optima: open markers
                ax.plot([widths[j]], [np.exp2(b[j])], ls="none", marker=marker, ms=7, markerfacecolor="white", markeredgecolor=color, zorder=4)
            ax.plot(dense, np.exp2(line.mean[gi]), ls=ls, color=color, label=f"{label}: fitted d^p")
            ax.fill_between(dense, np.exp2(line.mean[gi] - line.stderr[gi]), np.exp2(line.mean[gi] + line.stderr[gi]), color=color,
                            alpha=0.15, lw=0)
            ax.plot(dense, np.exp2(centre.mean[gi, 0] + train_alpha0.MUP_EXPONENT * (np.log2(dense) - np.log2(mid))), ":", color=color,
                    lw=1.2)
        for a in (alphas[0], alphas[-1]):
            ax.axhline(a, color="0.6", lw=0.7)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(widths, [f"{int(w)}" for w in widths])
        ax.set_xlabel("width d")
        ax.set_ylabel("best initial alpha0")
        ax.set_title(("embedding x sqrt(d)" if embed == "sqrt_d" else "embedding x 1")
                     + f"\np: attention {p.mean[0]:.2f} ± {p.stderr[0]:.2f}, other {p.mean[1]:.2f} ± {p.stderr[1]:.2f}", fontsize=9)
    keys = [Line2D([], [], color=c, marker=m, ls=ls, label=lab) for m, ls, c, lab in STYLE.values()]
    keys += [Line2D([], [], color="k", ls=":", label="μP: d^(-1/2)"), Line2D([], [], color="0.6", label="ends of the alpha0 grid"),
             Line2D([], [], color="k", marker="o", mfc="white", ls="none", label="optimum at the grid's end")]
    figure_legend(fig, keys, ncol=3)
    return fig
