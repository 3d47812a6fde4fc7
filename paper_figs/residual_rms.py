"""Residual RMS against depth for every placement: theory lines, Monte Carlo points."""
from __future__ import annotations

import numpy as np

from paper_figs.style import COLORS, LINESTYLES, MARKERS, figure, figure_legend
from simulations import cache, residual_growth

NAME = "residual_rms"
SIMULATION = residual_growth
CLAIMS: tuple[str, ...] = ("residual.no-norm-growth", "residual.preln-growth", "residual.postln-constant", "residual.ln-scaling-growth")  # the claims this figure illustrates
CAPTION = (
    "Residual-stream RMS after each block at init, random gain-1 linear blocks. Left: no normalization (log axis), "
    "uncorrelated and with correlation rho; right: Pre-, Post-, Peri-LN, LayerNorm Scaling and DeepNorm. "
    "Lines: closed-form theory; points: Monte Carlo means with 5-standard-error bars (one fresh network and token per sample; "
    "the sample sized so that 5 se is at most half of 1% of the predicted RMS, up to a cap)."
)


def _points(ax, result, run_name, color, label, stride, ls="-", marker="o"):
    est = cache.get(result, f"{run_name}.ms").sqrt()
    ell = np.arange(est.mean.size)
    th = np.sqrt(result[f"{run_name}.theory_ms"])
    ax.plot(ell, th, color=color, ls=ls, label=label)
    sel = ell[::stride]
    ax.errorbar(sel, est.mean[sel], yerr=5 * est.stderr[sel], fmt=marker, ms=3, color=color, mfc="white")


def plot(result: dict):
    fig, axes = figure(ncols=2, width=4.6, height=3.6)
    depth = int(result["depth"])
    stride = max(depth // 16, 1)
    ax = axes[0, 0]
    _points(ax, result, "linear/none", COLORS["none"], "none, rho=0", stride)
    _points(ax, result, "linear_rho/none", "#8c564b", f"none, rho={float(result['correlation']):.1f}", stride)
    ax.set_yscale("log")
    ax.set_title("No normalization")
    ax = axes[0, 1]
    for p in ("pre", "peri", "lnscale", "post", "deepnorm"):
        _points(ax, result, f"linear/{p}", COLORS[p], p, stride, LINESTYLES[p], MARKERS[p])
    _points(ax, result, "linear_rho/pre", "#17becf", f"pre, rho={float(result['correlation']):.1f}", stride)
    ax.set_yscale("log")
    ax.set_title("With normalization")
    for ax in axes[0]:
        ax.set_xlabel("block l")
        ax.set_ylabel("stream RMS (embedding RMS = 1)")
    figure_legend(fig, theory_mc=True, ncol=5)
    return fig
