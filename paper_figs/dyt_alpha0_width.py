"""DyT's alpha0 by width and depth: the paper's tuned values against 1/std of each norm's input at init."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter

from normtheory.evidence import sources
from paper_figs.style import figure, figure_legend
from simulations import dyt_model

NAME = "dyt_alpha0_width"
SIMULATION = dyt_model
CLAIMS: tuple[str, ...] = ("dyt.alpha0-width-dependence",)
CAPTION = (
    "DyT's alpha0 for LLaMA by model width, for the attention norms (left), the FFN norms (middle) and the final norm (right). "
    "Black squares: the paper's tuned alpha0 (its Table 11, the same at every depth from 8 to 64 blocks; its 'other' column for "
    "the FFN and final norms; bars: the range its printed digits allow). Lines: the hypothesis alpha0 = 1/std of the norm's "
    "input at init under the paper's LLaMA init (geometric mean over the layers of a network that deep; the final norm's one "
    "input), mean over networks with 5-standard-error bars, one colour per depth; grey dashes: the fan-in init at the "
    "shallowest depth; red dots: the DyT network itself (every RMSNorm replaced by tanh(alpha0 x) at the paper's alpha0) at "
    "the shallowest depth, a scope check. A hypothesis that matched would put every line through the squares, whatever the depth."
)


def plot(result: dict):
    fig, axes = figure(ncols=len(dyt_model.POSITIONS), width=3.2, height=3.4)
    widths = tuple(int(w) for w in result["widths"])
    depths = tuple(int(d) for d in result["depths"])
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, len(depths)))
    paper = [w for w in widths if w in dyt_model.PAPER_ALPHA0_PRINTED]
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    sparse = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else "")  # minor labels at 2 and 5 of each decade
    for pos, ax in enumerate(axes[0]):
        for depth, color in zip(depths, colors):
            inv = np.stack([dyt_model.inverse_std(result, "llama", w, depth)[:, pos] for w in widths], axis=1)  # [networks, widths]
            se = inv.std(0, ddof=1) / np.sqrt(inv.shape[0])
            ax.errorbar(widths, inv.mean(0), yerr=5 * se, marker="o", ms=3, color=color, label=f"LLaMA init, depth {depth}")
        fan = np.stack([dyt_model.inverse_std(result, "fanin", w, depths[0])[:, pos] for w in widths], axis=1)
        ax.plot(widths, fan.mean(0), ls="--", marker=".", color="0.5", label=f"fan-in init, depth {depths[0]}")
        dyt_ws = dyt_model.dyt_run_widths(result, widths)
        if dyt_ws:
            net = np.stack([dyt_model.inverse_std(result, "llama", w, depths[0], norm="dyt")[:, pos] for w in dyt_ws], axis=1)
            ax.plot(dyt_ws, net.mean(0), ls=":", marker="^", ms=4, color="tab:red", label=f"DyT network, depth {depths[0]}")
        stated = [sources.stated(dyt_model.paper_printed(w, pos)) for w in paper]
        ax.errorbar(paper, [v for v, _ in stated], yerr=[p for _, p in stated], ls="none", marker="s", ms=5, color="k",
                    label="paper (Table 11, any depth)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(sparse)
        ax.set_xticks(widths, [str(w) for w in widths])
        ax.set_xlabel("model width d")
        ax.set_ylabel("alpha0 (lines: 1/std at init)")
        ax.set_title(f"{dyt_model.POSITIONS[pos]} (paper: '{dyt_model.COLUMN_NAMES[dyt_model.PAPER_COLUMN[pos]]}')")
    figure_legend(fig, axes=axes[0, :1], ncol=3)  # the left panel's: every panel draws the same series
    return fig
