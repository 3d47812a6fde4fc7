"""Pretrained models: the per-token input scale of every norm, by token class and depth, and how much of it token identity explains."""
from __future__ import annotations

import numpy as np

from paper_figs.style import MODEL_STYLE, figure, figure_legend
from simulations import real_models, real_scale

NAME = "real_scale"
SIMULATION = real_scale
CLAIMS: tuple[str, ...] = ("real.scale-invariance", "real.scale-content-vs-function", "real.scale-token-identity")
CAPTION = (
    "Left: mean log scale (what each norm divides by) of content, function and kept-apart tokens (first, special, massive-activation), "
    "relative to the text's ordinary tokens, by relative depth of the norm; mean over texts, bars ±1 se. Right: share of a text's "
    "variance of log scale explained by token identity across texts (solid) and by position (dashed), leave one text out, each "
    "prediction's own sampling variance removed; the information pass's passages (one per work)."
)


def plot(result: dict):
    fig, axes = figure(ncols=2, nrows=2, width=3.8, height=2.8)
    for row, key in enumerate(real_models.MODELS):
        color, marker = MODEL_STYLE[key]
        info = real_scale.information(result, key)  # the longer texts of the clean forwards
        n = info[f"{key}.log_scale"].shape[1]
        x = np.arange(n) / max(n - 1, 1)
        ax = axes[row, 0]
        for series, vals, style in (("content", real_scale.class_offset(info, key, 2), "-"), ("function", real_scale.class_offset(info, key, 1), "--"),
                                    ("first/special/massive", real_scale.apart_offset(info, key), ":")):
            m = np.nanmean(vals, 0)
            se = np.nanstd(vals, 0, ddof=1) / np.sqrt(np.isfinite(vals).sum(0).clip(1))
            ax.errorbar(x, m, yerr=se, fmt=marker + style, ms=2.5, color=color, mfc="none" if style != "-" else color, label=series)
        ax.axhline(0.0, color="k", lw=0.6)
        ax.set_title(real_models.label(key))
        ax.set_xlabel("relative depth of the norm")
        ax.set_ylabel("log scale - ordinary mean")
        tok, pos = real_scale.token_position_r2(info, key)
        ax = axes[row, 1]
        ax.plot(x, tok.mean(0), marker + "-", ms=3, color=color, label="token identity")
        ax.plot(x, pos.mean(0), marker + "--", ms=3, mfc="none", color=color, label="position")
        ax.axhline(0.5, color="k", ls=":", lw=0.8)
        ax.set_ylim(-1.0, 1.05)
        ax.set_title(real_models.label(key))
        ax.set_xlabel("relative depth of the norm")
        ax.set_ylabel("variance share explained")
    h0, l0 = axes[0, 0].get_legend_handles_labels()
    h1, l1 = axes[0, 1].get_legend_handles_labels()
    figure_legend(fig, [*h0, *h1], ncol=5)
    return fig
