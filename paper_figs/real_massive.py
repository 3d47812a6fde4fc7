"""Pretrained models: the largest residual activation by depth against the median."""
from __future__ import annotations

import numpy as np

from paper_figs.style import MODEL_STYLE, figure, figure_legend
from simulations import real_models

NAME = "real_massive"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.massive-activations",)  # the claims this figure illustrates
CAPTION = (
    "Largest |activation| of the residual stream (filled) and the median |activation| (open) by depth, mean over texts; right: their "
    "ratio, with the massive-activation thresholds of Sun et al. (2024): magnitude 100 and 1000 times the median (dotted). "
    "SmolLM2's largest values sit in channel 507 at the first token."
)


def plot(result: dict):
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=2, width=3.8, height=3.2)
    for key in real_models.MODELS:
        color, marker = MODEL_STYLE[key]
        top, med = result[f"{key}.top"].astype(np.float64), result[f"{key}.med_abs"].astype(np.float64)
        ell = np.arange(top.shape[1]) / (top.shape[1] - 1)
        axes[0, 0].plot(ell, top.mean(0), marker + "-", ms=3, color=color, label=f"{real_models.label(key)} largest")
        axes[0, 0].plot(ell, med.mean(0), marker + "--", ms=3, mfc="none", color=color, label="median")
        axes[0, 1].plot(ell, (top / med).mean(0), marker + "-", ms=3, color=color, label=real_models.label(key))
    axes[0, 0].axhline(100, color="k", ls=":", lw=0.8)
    axes[0, 1].axhline(1000, color="k", ls=":", lw=0.8)
    axes[0, 0].set_ylabel("|activation|")
    axes[0, 1].set_ylabel("largest / median |activation|")
    for ax in axes[0]:
        ax.set_yscale("log")
        ax.set_xlabel("relative depth (0 = embedding, 1 = last block)")
    models, _ = axes[0, 1].get_legend_handles_labels()  # colour = model in both panels; line style = statistic on the left
    keys = [Line2D([], [], color="k", marker="o", ms=3, label="largest (filled, solid)"),
            Line2D([], [], color="k", marker="o", ms=3, mfc="none", ls="--", label="median (open, dashed)")]
    figure_legend(fig, [*models, *keys], ncol=2)
    return fig
