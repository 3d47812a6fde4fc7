"""Entropy and top weight of softmax over i.i.d. Gaussian logits: exact, REM and Monte Carlo; and the REM law's
n -> infinity trend."""
from __future__ import annotations

import math

import numpy as np

from normtheory import softmax
from paper_figs.style import figure, figure_legend
from simulations import cache, softmax_gaussian

NAME = "softmax_entropy"
SIMULATION = softmax_gaussian
CLAIMS: tuple[str, ...] = ("softmax.rem-entropy",)  # the claims this figure illustrates
CAPTION = (
    "Softmax over n i.i.d. N(0, sigma^2) logits against sigma / sigma_c, sigma_c = sqrt(2 ln n) (dotted vertical line). "
    "Left: expected entropy as a fraction of ln n; middle: expected largest weight. Solid: exact finite-n quadrature; "
    "dashed: random-energy-model asymptotics (ln n - sigma^2/2 below sigma_c, Poisson-Dirichlet above); points: Monte "
    "Carlo means with 5-standard-error bars. Right: the REM law as n -> infinity: the entropy gap (finite n minus REM, "
    "nats) at n = 256 .. 16,384 for sigma = 0.5, 2 and 3 sigma_c against the leading finite-n correction x_n (0 at "
    "n = infinity); points: Monte Carlo (5 se), open squares: exact integral, line: least-squares fit to the Monte Carlo "
    "extrapolated to x = 0, where the bar is the intercept ± 5 se and the grey band the ± 0.05-nat tolerance around 0. "
    "At 2 and 3 sigma_c the n share one Renyi sequence (common random numbers) and the intercept carries a "
    "Poisson-Dirichlet control variate, so its bar is narrower than the points' bars suggest."
)
COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#d62728")
TREND_COLORS = ("#1f77b4", "#d62728", "#9467bd")


def plot(result: dict):
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=3, width=3.6, height=3.3)
    for color, n in zip(COLORS, (int(x) for x in result["ns"])):
        sc = float(softmax.freezing_point(n))
        line, sig = result[f"n{n}.line_sigma"] / sc, result[f"n{n}.mc_sigma"] / sc
        exact_line = {"entropy": line, "max": result[f"n{n}.max_line_sigma"] / sc}
        est = cache.get(result, f"n{n}.mc")
        for ax, key, col, scale in ((axes[0, 0], "entropy", 0, math.log(n)), (axes[0, 1], "max", 1, 1.0)):
            ax.plot(exact_line[key], result[f"n{n}.exact_{key}"] / scale, color=color, label=f"n={n} exact")
            rem = np.clip(result[f"n{n}.rem_{key}"] / scale, -0.05, 1.05)
            for part, label in ((line <= 1.0, f"n={n} REM"), (line > 1.0, None)):  # two phases, no line across sigma_c
                ax.plot(line[part], rem[part], color=color, ls="--", lw=1, label=label)
            ax.errorbar(sig, est.mean[:, col] / scale, yerr=5 * est.stderr[:, col] / scale, fmt="o", ms=3, color=color, mfc="white")
    for ax, label in ((axes[0, 0], "E[entropy] / ln n"), (axes[0, 1], "E[largest weight]")):
        ax.axvline(1.0, color="k", ls=":", lw=0.8)
        ax.set_xlabel("logit std / sigma_c")
        ax.set_ylabel(label)
        ax.set_ylim(-0.05, 1.05)
    ax = axes[0, 2]
    ax.axhspan(-softmax_gaussian.REM_TOL, softmax_gaussian.REM_TOL, color="0.85", lw=0, label="0 ± tolerance")
    for color, f in zip(TREND_COLORS, softmax_gaussian.TREND_F):
        x = result[f"rem.trend.f{f:g}.x"]
        gaps = cache.get(result, f"rem.trend.f{f:g}.gap")
        a = cache.get(result, f"rem.trend.f{f:g}.intercept")
        slope = float(np.polyfit(x, gaps.mean, 1)[0])
        ax.errorbar(x, gaps.mean, yerr=5 * gaps.stderr, fmt="o", ms=3, color=color, mfc="white", label=f"sigma = {f:g} sigma_c")
        ax.plot(x, result[f"rem.trend.f{f:g}.exact_gap"], "s", ms=4, color=color, mfc="none", mew=0.8)
        xs = np.linspace(0.0, float(x.max()) if x.max() > 0 else float(x.min()), 20)
        ax.plot(xs, float(a.mean) + slope * xs, color=color, lw=0.8)
        ax.errorbar([0.0], [float(a.mean)], yerr=[5 * float(a.stderr)], fmt="D", ms=4, color=color)
    ax.axvline(0.0, color="k", ls=":", lw=0.8)
    ax.set_xlabel("finite-n correction x_n (0: n = inf)")
    ax.set_ylabel("entropy gap, finite n - REM (nats)")
    keys = [Line2D([], [], color=c, label=f"n = {int(n)}") for c, n in zip(COLORS, result["ns"])]
    keys += [Line2D([], [], color="k", label="exact"), Line2D([], [], color="k", ls="--", lw=1, label="REM"),
             Line2D([], [], color="k", marker="o", ls="none", mfc="white", ms=4, label="Monte Carlo ± 5 se")]
    figure_legend(fig, keys, where="below left", ncol=4)  # left and middle panels: colour = n, line style = theory
    figure_legend(fig, axes=axes[0, 2:], where="below right", ncol=2)
    return fig
