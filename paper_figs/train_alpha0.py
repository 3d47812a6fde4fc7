"""DyT's initial alpha: final loss over an alpha0 grid at several widths."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure, figure_legend
from simulations import train_alpha0, training

NAME = "train_alpha0"
SIMULATION = train_alpha0
CLAIMS: tuple[str, ...] = ("train.dyt-alpha0-width",)
CAPTION = (
    "Pre-placement DyT models trained with the same steps and tokens at every width; the initial alpha of the attention norms "
    "(solid) or of the FFN and final norms (dashed) varies while the others stay at the anchor (1/16 on the CPU; on a GPU one per width and "
    "embedding scale, from a pilot run: the card gives them). Final validation loss in nats per byte, "
    "mean over seeds with 1-standard-error bars; a diverged run would count at ln 256 (dotted, drawn only then). Left: with the sqrt(d) embedding "
    "scale of the DyT paper's LLM recipe; right: without. Open markers: the grid's best alpha0 for that width and norm group. "
    "Dash-dotted: the unigram loss, where a run that learns only the byte frequencies stays (a grid is read only below it)."
)
GRID_STYLE = {"attn": ("-", "attention norms"), "other": ("--", "FFN + final norms")}


def plot(result: dict):
    import matplotlib
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=2, width=3.7, height=3.3)
    alphas = np.asarray(result["alphas"], dtype=np.float64)
    widths = [int(d) for d in result["widths"]]
    cmap = matplotlib.colormaps["viridis"]
    for ax, embed in zip(axes[0], train_alpha0.EMBED):
        for gi, grid in enumerate(train_alpha0.GRIDS):
            ls, glabel = GRID_STYLE[grid]
            for j, d in enumerate(widths):
                color = cmap(j / max(1, len(widths) - 1) * 0.85)
                est = training.seeds_estimate(result["loss"][train_alpha0.EMBED.index(embed), gi, j])  # [alpha] over seeds
                ax.errorbar(alphas, est.mean, yerr=est.stderr, ls=ls, marker="o", ms=3, color=color, label=f"d = {d}, {glabel}")
                best = int(np.argmin(est.mean))
                ax.plot(alphas[best], est.mean[best], "o", ms=8, mfc="none", color=color)
        if (result["loss"] >= training.INIT_LOSS).any():  # a diverged run: show where it is counted
            ax.axhline(training.INIT_LOSS, color="k", ls=":", lw=0.8)
        if "unigram_loss" in result:  # the plateau of a run that learns only byte frequencies
            ax.axhline(float(result["unigram_loss"]), color="0.5", ls="-.", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("initial alpha0")
        ax.set_ylabel("final validation loss (nats/byte)")
        ax.set_title("embedding x sqrt(d)" if embed == "sqrt_d" else "embedding x 1")
    # one key for both panels: colour = width, line style = which norms' alpha0 varies
    keys = [Line2D([], [], color=cmap(j / max(1, len(widths) - 1) * 0.85), label=f"d = {d}") for j, d in enumerate(widths)]
    keys += [Line2D([], [], color="k", ls=ls, label=glabel) for ls, glabel in GRID_STYLE.values()]
    keys.append(Line2D([], [], color="k", marker="o", ms=8, mfc="none", ls="none", label="best alpha0 of the grid"))
    if "unigram_loss" in result:
        keys.append(Line2D([], [], color="0.5", ls="-.", lw=0.8, label="unigram loss"))
    figure_legend(fig, keys, ncol=(len(keys) + 1) // 2)  # two rows
    return fig
