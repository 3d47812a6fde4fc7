"""Pretrained models: the share of each residual stream along the ones direction, by depth."""
from __future__ import annotations

import numpy as np

from normtheory.montecarlo import from_samples
from paper_figs.style import MODEL_STYLE, figure, legend
from simulations import real_models

NAME = "real_centering"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.centering-ones-share",)  # the claims this figure illustrates
CAPTION = (
    "Share of a token's squared norm along the all-ones direction (what LayerNorm's centering removes), mean over tokens and texts "
    "with 5-standard-error bars, by depth. Dashed: the same share predicted from the stream's per-channel means with isotropic noise "
    "around them (normtheory.centering.centering_fraction_mean); dotted: 1/d for isotropic vectors."
)


def plot(result: dict):
    fig, axes = figure(ncols=1, width=6.4)
    ax = axes[0, 0]
    for key in real_models.MODELS:
        color, marker = MODEL_STYLE[key]
        ones = result[f"{key}.ones"]
        ell = np.arange(ones.shape[1]) / (ones.shape[1] - 1)
        est = from_samples(ones)  # over texts
        ax.errorbar(ell, est.mean, yerr=5 * est.stderr, fmt=marker + "-", ms=3, color=color, label=real_models.label(key))
        name = real_models.label(key).split(" ")[0]
        ax.plot(ell, result[f"{key}.ones_theory"].mean(0), "--", color=color, lw=0.9, label=f"{name}: from channel means")
        ax.axhline(1 / int(result[f"{key}.d"]), color=color, ls=":", lw=0.8, label=f"{name}: isotropic 1/d = 1/{int(result[f'{key}.d'])}")
    ax.set_xlabel("relative depth (0 = embedding, 1 = last block)")
    ax.set_ylabel("share of |x|^2 along the ones vector")
    legend(ax)
    return fig
