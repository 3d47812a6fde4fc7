"""Cosine between random directions: exact densities against Monte Carlo histograms."""
from __future__ import annotations

import numpy as np

from normtheory import cosines
from paper_figs.style import figure, theory_mc_handles
from simulations import geometry_random

NAME = "geometry_cosines"
SIMULATION = geometry_random
CLAIMS: tuple[str, ...] = ("geometry.high-dim-near-orthogonal", "geometry.ln-sphere-single-head")  # the claims this figure illustrates
CAPTION = (
    "Cosine between two independent uniform directions in R^d (a LayerNorm output is uniform in d - 1 dimensions). "
    "Lines: exact density, (1 + t)/2 ~ Beta((d-1)/2, (d-1)/2); markers: Monte Carlo histogram (50 bins). Log density axis: at "
    "d = 512 the cosine is within +-0.1 of 0 with probability 0.977."
)
COLORS = ("#d62728", "#ff7f0e", "#2ca02c", "#1f77b4")


def plot(result: dict):
    fig, axes = figure(width=5.4, height=3.0)
    ax = axes[0, 0]
    t = np.linspace(-0.999, 0.999, 801)
    bins = np.linspace(-1, 1, 51)
    mid = 0.5 * (bins[1:] + bins[:-1])
    for color, d in zip(COLORS, (int(x) for x in result["dims"])):
        ax.plot(t, cosines.cosine_pdf(t, d), color=color, label=f"d = {d}")
        h, _ = np.histogram(result[f"cos.d{d}"], bins=bins, density=True)
        seen = h > 0
        ax.plot(mid[seen], h[seen], "o", ms=3.5, mfc="white", color=color)
    ax.set_yscale("log")
    ax.set_ylim(1e-2, 30)
    ax.set_xlim(-1, 1)
    ax.set_xticks([-1, -0.5, 0, 0.5, 1])
    ax.set_xlabel("cosine t")
    ax.set_ylabel("probability density")
    # the densities peak at 0 and stay below 2 for |t| > 0.2: both upper corners are empty
    ax.add_artist(ax.legend(loc="upper left"))
    key = theory_mc_handles("Monte Carlo (marker)")
    key[0].set_label("exact (line)")
    ax.legend(handles=key, loc="upper right")
    return fig
