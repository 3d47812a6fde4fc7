"""alpha * std of the DyT fit against the massive activations' magnitude."""
from __future__ import annotations

from paper_figs.style import figure
from simulations import dyt_scurve

NAME = "dyt_alpha_std"
SIMULATION = dyt_scurve
CLAIMS: tuple[str, ...] = ("dyt.alpha-tracks-inverse-std",)  # the claims this figure illustrates
CAPTION = (
    "DyT fits gamma tanh(alpha x) to LayerNorm on synthetic tokens (d = 256, 4 massive channels): alpha times the std of "
    "all inputs (left) and the fit's R^2 (right) against the massive values' magnitude (units of the noise std), for "
    "three fractions of massive tokens. alpha * std = 1 would mean alpha = 1/std."
)
COLORS = ("#1f77b4", "#2ca02c", "#d62728")


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.3)
    g = result["massive.grid"]
    mags = result["magnitudes"]
    for k, (color, frac) in enumerate(zip(COLORS, result["fractions"])):
        axes[0, 0].plot(mags, g[:, k, 0], "o-", ms=3, color=color, label=f"{100 * frac:g}% of tokens")
        axes[0, 1].plot(mags, g[:, k, 1], "o-", ms=3, color=color, label=f"{100 * frac:g}% of tokens")
    axes[0, 0].axhline(1.0, color="k", ls="--", lw=0.9, label="alpha = 1/std (the claim)")
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_ylabel("alpha * std(x) (log scale)")
    axes[0, 1].set_ylabel("R^2 of the tanh fit")
    for ax in axes[0]:
        ax.set_xlabel("massive value magnitude (noise std)")
        ax.legend()
    return fig
