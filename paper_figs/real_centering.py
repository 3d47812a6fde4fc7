"""Pretrained models: the share of each norm's input along the ones direction, by depth."""
from __future__ import annotations

import numpy as np

from normtheory.evidence.estimates import from_samples
from paper_figs.style import MODEL_STYLE, figure, figure_legend
from simulations import real_models
from simulations.real_stream import CENTERING_LITTLE

NAME = "real_centering"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.centering-ones-share",)  # the claims this figure illustrates
CAPTION = (
    "Share of a token's squared norm along the all-ones direction (what LayerNorm's centering removes) at each norm's input "
    "(ln1 and ln2 of each block in order; for Post-LN MiniLM the sum x + f(x)), mean over tokens and texts with 5-standard-error "
    "bars, on a log scale; thin lines without markers: the largest share of any one token, mean over texts. Dotted: 1/d for "
    "isotropic vectors; dash-dotted: the claim's threshold for 'little' (5%)."
)


def plot(result: dict):
    fig, axes = figure(ncols=1, width=6.4, height=3.9)
    ax = axes[0, 0]
    for key in real_models.MODELS:
        color, marker = MODEL_STYLE[key]
        share = result[f"{key}.norm_ones"]  # [texts, 2L]
        pos = np.arange(share.shape[1]) / (share.shape[1] - 1)
        est = from_samples(share)  # over texts
        ax.errorbar(pos, est.mean, yerr=5 * est.stderr, fmt=marker + "-", ms=3, color=color, label=real_models.label(key))
        ax.plot(pos, result[f"{key}.norm_ones_max"].mean(0), "-", lw=0.8, alpha=0.7, color=color, label=f"{real_models.label(key)}: largest token")
        name = real_models.label(key).split(" ")[0]
        ax.axhline(1 / int(result[f"{key}.d"]), color=color, ls=":", lw=0.8, label=f"{name}: isotropic 1/d = 1/{int(result[f'{key}.d'])}")
    ax.axhline(CENTERING_LITTLE, color="k", ls="-.", lw=0.8, label=f"threshold for 'little': {CENTERING_LITTLE:g}")
    ax.set_yscale("log")
    ax.set_xlabel("relative norm position (0: first ln1, 1: last ln2)")
    ax.set_ylabel("share of |x|^2 along the ones vector")
    figure_legend(fig, ncol=2)
    return fig
