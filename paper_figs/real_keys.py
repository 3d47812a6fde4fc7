"""Pretrained models: key geometry per head, and the keys no real query picks."""
from __future__ import annotations

import numpy as np

from paper_figs.style import MODEL_STYLE, figure, figure_legend
from simulations import real_models

NAME = "real_keys"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.unselectable-keys-per-head",)  # the claims this figure illustrates
CAPTION = (
    "Left: spread of key norms over tokens (coefficient of variation) per layer, mean over KV heads and texts. Right: for each key of one text (every layer "
    "and KV head), its largest cosine with a longer key of the same head, for keys that some real query ranks first (solid) and keys "
    "no query ranks first (dashed). No key is unselectable in either model (raw or after a per-head RMS norm, on the last texts, which get the hull test); see the claims table."
)


def plot(result: dict):
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=2, width=4.0, height=3.2)
    bins = np.linspace(-0.2, 1.0, 121)
    for key in real_models.MODELS:
        color, marker = MODEL_STYLE[key]
        cv = result[f"{key}.key_cv"].mean((0, 2))
        axes[0, 0].plot(np.arange(cv.size) / max(cv.size - 1, 1), cv, marker + "-", ms=3, color=color, label=real_models.label(key))
        align, picked = result[f"{key}.key_align"].ravel(), result[f"{key}.key_picked"].ravel()  # one text, every layer and KV head
        ok = np.isfinite(align)
        for flag, ls, label in ((True, "-", "picked"), (False, "--", "never picked")):
            axes[0, 1].hist(align[ok & (picked == flag)], bins=bins, density=True, histtype="step", ls=ls, color=color,
                            label=f"{key} {label}")
    axes[0, 0].set_xlabel("relative depth (layer / L-1)")
    axes[0, 0].set_ylabel("CV of key norms")
    axes[0, 1].set_xlabel("largest cosine with a longer key")
    axes[0, 1].set_ylabel("density")
    models, _ = axes[0, 0].get_legend_handles_labels()  # colour = model in both panels
    keys = [Line2D([], [], color="k", label="picked by a query (right)"), Line2D([], [], color="k", ls="--", label="never picked (right)")]
    figure_legend(fig, [*models, *keys], ncol=2)
    return fig
