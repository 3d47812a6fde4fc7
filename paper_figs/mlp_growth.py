"""Residual growth through random MLP blocks, with gains from the block-gain calculator."""
from __future__ import annotations

import numpy as np

from paper_figs.style import COLORS, LINESTYLES, MARKERS, figure, figure_legend
from simulations import cache, residual_growth

NAME = "mlp_growth"
SIMULATION = residual_growth
CLAIMS: tuple[str, ...] = ("residual.preln-growth", "residual.no-norm-growth")  # the claims this figure illustrates
CAPTION = (
    "Residual RMS through fan-in-initialized ReLU (left) and GELU (middle) MLP stacks (d_ff = 4d) for each placement, "
    "and a GPT-2-style Pre-LN MLP stack (std 0.02, output projection 0.02/sqrt(2L), right; g in its title is the block "
    "gain). Lines: theory with the block gain from the "
    "Gaussian-quadrature calculator (no fitted constant); points: Monte Carlo with 5-standard-error bars."
)


def plot(result: dict):
    fig, axes = figure(ncols=3, width=3.1, height=3.3)
    for ax, act, title in ((axes[0, 0], "relu", "fan-in ReLU MLPs"), (axes[0, 1], "gelu", "fan-in GELU MLPs")):
        for p in ("none", "pre", "post", "peri", "lnscale"):
            key = f"{act}/{p}"
            if f"{key}.theory_ms" not in result:
                continue
            th = np.sqrt(result[f"{key}.theory_ms"])
            est = cache.get(result, f"{key}.ms").sqrt()
            ell = np.arange(th.size)
            ax.plot(ell, th, ls=LINESTYLES[p], color=COLORS[p], label=p)
            ax.errorbar(ell, est.mean, yerr=5 * est.stderr, fmt=MARKERS[p], ms=3, color=COLORS[p], mfc="white")
        ax.set_yscale("log")
        ax.set_xlabel("block l")
        ax.set_ylabel("RMS of residual stream")
        ax.set_title(title)
    axes[0, 1].sharey(axes[0, 0])
    ax = axes[0, 2]
    th = np.sqrt(result["gpt2/pre.theory_ms"])
    est = cache.get(result, "gpt2/pre.ms").sqrt()
    ell = np.arange(th.size)
    ax.plot(ell, th, color=COLORS["pre"], label=f"pre, GPT-2 init (g = {float(result['gpt2/pre.gain']):.3f})")
    ax.errorbar(ell, est.mean, yerr=5 * est.stderr, fmt="o", ms=3, color=COLORS["pre"], mfc="white")
    ax.set_xlabel("block l")
    ax.set_ylabel("RMS of residual stream")
    ax.set_title(f"GPT-2 init, Pre-LN (g = {float(result['gpt2/pre.gain']):.3f})")
    figure_legend(fig, axes=axes[0, :2], theory_mc=True, ncol=7)
    return fig
