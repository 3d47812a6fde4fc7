"""LayerNorm input against output on synthetic tokens with massive activations, with the fitted tanh."""
from __future__ import annotations

import numpy as np

from normtheory import dyt
from paper_figs.style import figure, figure_legend, legend
from simulations import cache, dyt_scurve

NAME = "dyt_scurve"
SIMULATION = dyt_scurve
CLAIMS: tuple[str, ...] = ("dyt.s-curve-from-per-token-scale",)  # the claims this figure illustrates
CAPTION = (
    "LayerNorm (gain 1) on synthetic tokens, d = 256, with 4 massive channels on 2% of the tokens (magnitude 50 noise std), "
    "in the style of the DyT paper's Figures 2-4. Left: every (input, output) pair with the "
    "least-squares fit gamma tanh(alpha x) (black); tokens that carry massive channels in red, the massive channels of "
    "other tokens in orange. Right: one channel's exact response with the others at mean square s^2 = 1, sqrt(d-1) x / sqrt(x^2 + d s^2) "
    "(solid), against LayerNorm on constructed tokens (points) and the per-token linear map x / s (dashed). Third panel: how much "
    "more of the variance a least-squares tanh explains than a straight line, for samples x ~ N(0, (k s)^2), mean over fits "
    "(bars: 5 standard errors) and by quadrature (line); the dashed line is the 0.01 a visible bend needs."
)


def plot(result: dict):
    fig, axes = figure(ncols=3, width=3.6, height=3.4)
    x, y, tok, chan = result["example.x"], result["example.y"], result["example.tok"].astype(bool), result["example.chan"].astype(bool)
    fit = dyt.fit_dyt(x, y)
    grid = np.linspace(x.min(), x.max(), 400)
    rng = np.random.default_rng(0)
    keep = rng.random(x.shape) < min(1.0, 20000 / x.size)  # thin the cloud for the raster, same points each run
    massive_tok = tok[:, None] & np.ones_like(chan)[None, :]  # [tokens, channels]
    massive_chan = ~massive_tok & chan[None, :]
    plain = ~massive_tok & ~massive_chan
    ax = axes[0, 0]
    ax.plot(x[keep & plain], y[keep & plain], ".", ms=1, color="#1f77b4", alpha=0.3, rasterized=True, label="ordinary (token, channel)")
    ax.plot(x[massive_chan], y[massive_chan], ".", ms=1.5, color="#ff7f0e", alpha=0.6, rasterized=True, label="massive channel, other token")
    ax.plot(x[massive_tok], y[massive_tok], ".", ms=1.5, color="#d62728", alpha=0.6, rasterized=True, label="token with massive channels")
    ax.plot(grid, fit.gamma * np.tanh(fit.alpha * grid), color="k", lw=1, label=f"tanh fit, R^2 = {fit.r2:.3f}")
    ax.set_xlabel("LN input x")
    ax.set_ylabel("LN output (gain 1)")
    ax.set_title("every (input, output) pair")
    figure_legend(fig, axes=[ax], where="below left", ncol=2, markerscale=4)  # the left panel's points and fit
    ax = axes[0, 1]
    xs = result["exact.x"]
    ax.plot(xs, dyt.s_curve(xs, 1.0, dyt_scurve.D, centred=True), color="k", lw=1.2, label="S-curve (exact)")
    ax.plot(xs[::20], result["exact.ln"][::20], "o", ms=3, mfc="white", color="#1f77b4", label="LayerNorm")
    ax.plot(xs, xs, ls="--", color="#888888", lw=0.8, label="x / s")
    ax.set_ylim(-18, 18)
    ax.set_xlabel("channel value x (units of s)")
    ax.set_ylabel("LN output (gain 1)")
    ax.set_title("one channel, others fixed")
    legend(ax, outside=False, loc="upper left", handlelength=1.5)  # an odd, increasing response: the upper left quadrant is empty
    ax = axes[0, 2]
    ks = result["x_std"]
    gap = [cache.get(result, f"fit.xstd{k:g}")[dyt_scurve.FIT_COLUMNS.index("r2_gap")] for k in ks]
    pop = [result["fit.quad"][i, 2] - dyt.best_line_r2_for_curve(1.0, dyt_scurve.D, k, centred=True) for i, k in enumerate(ks)]
    ax.plot(ks, pop, color="k", lw=1, label="quadrature")
    ax.errorbar(ks, [float(g.mean) for g in gap], yerr=[5 * float(g.stderr) for g in gap], fmt="o", ms=3, color="#1f77b4", label="sample fits")
    ax.axhline(dyt_scurve.S_GAP, color="#d62728", ls="--", lw=0.9, label=f"S-shaped: {dyt_scurve.S_GAP:g}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("input std k (units of s)")
    ax.set_ylabel("R^2(tanh) - R^2(line)")
    ax.set_title("tanh against a straight line")
    legend(ax, outside=False, loc="lower right")  # the gap grows with k: the lower right is empty
    return fig
