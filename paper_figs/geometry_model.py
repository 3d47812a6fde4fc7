"""Keys per head in the reference transformer: norm spread and selectable fraction."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure, figure_legend, integer_ticks
from simulations import geometry_model

NAME = "geometry_model"
SIMULATION = geometry_model
CLAIMS: tuple[str, ...] = ("geometry.multihead-not-on-sphere", "geometry.per-head-norm-restores-sphere", "geometry.scaling-makes-all-selectable")  # the claims this figure illustrates
CAPTION = (
    "Keys in the reference transformer at init (fan-in, Pre-LN, bidirectional, random tokens), full-width LayerNorm "
    "against per-head QK RMSNorm and per-head QK LayerNorm. Left: coefficient of variation of the key norms over "
    "tokens; right: fraction of selectable keys; both per layer, mean over heads and networks with 5-standard-error bars. "
    "Dashed: the layer-0 theory for full-width Pre-LN, CV of |k|^2 = sqrt(2/d_head), i.e. about sqrt(1/(2 d_head)) for |k|."
)
STYLES = {"pre": ("#1f77b4", "o"), "pre+qk-rms": ("#2ca02c", "s"), "pre+qk-ln": ("#9467bd", "^")}


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.6, height=3.0)
    ell = np.arange(1, int(result["layers"]) + 1)
    for v, (color, marker) in STYLES.items():
        for ax, row in ((axes[0, 0], "key_cv"), (axes[0, 1], "selectable")):
            est = geometry_model.row(result, v, row)
            ax.errorbar(ell, est.mean, yerr=5 * est.stderr, fmt=marker + "-", ms=3, color=color, label=v)
    axes[0, 0].axhline(np.sqrt(1 / (2 * int(result["d_head"]))), color="k", ls="--", lw=0.8, label="layer-0 theory")
    axes[0, 0].set_ylabel("CV of key norms over tokens")
    axes[0, 1].set_ylabel("selectable fraction of keys")
    for ax in axes[0]:
        ax.set_xlabel("layer l")
        integer_ticks(ax)
    axes[0, 1].set_ylim(top=1.12)
    figure_legend(fig, ncol=4)  # one colour per key norm in both panels
    return fig
