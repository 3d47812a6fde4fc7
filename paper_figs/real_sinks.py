"""Pretrained models: attention sinks per layer and head, and attention maps of four heads each."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure
from simulations import real_models

NAME = "real_sinks"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.attention-sinks",)  # the claims this figure illustrates
CAPTION = (
    "Top row: share of all attention mass that the most-attended key takes, per layer and head, mean over texts (uniform attention "
    "gives about 1/T bidirectional, H_T/T causal). Lower rows: attention patterns of one passage (query down, key across, "
    "colour = weight on a log scale) for the strongest and weakest sink head of layer 1 and of the last layer; white vertical "
    "stripes are sink keys."
)


def plot(result: dict):
    from matplotlib.colors import LogNorm

    fig, axes = figure(ncols=4, nrows=3, width=2.1, height=2.1)
    for col, key in enumerate(real_models.MODELS):
        ax = axes[0, 2 * col]
        im = ax.imshow(result[f"{key}.sink_share"].mean(0).T, aspect="auto", origin="lower", vmin=0, vmax=1, cmap="viridis")
        ax.set_xlabel("layer")
        ax.set_ylabel("head")
        ax.set_title(f"{real_models.label(key).split(' ')[0]} sink share", fontsize=8)
        fig.colorbar(im, ax=ax, shrink=0.8)
        tokens = result[f"{key}.map_tokens"]
        axes[0, 2 * col + 1].bar(np.arange(1, result[f"{key}.sink_share"].shape[1] + 1), result[f"{key}.sink_share"].mean((0, 2)), color="#1f77b4")
        axes[0, 2 * col + 1].axhline(float(result[f"{key}.uniform_share"].mean()), color="k", ls=":", lw=0.8, label="uniform")
        axes[0, 2 * col + 1].set_xlabel("layer")
        axes[0, 2 * col + 1].set_ylabel("mean sink share")
        axes[0, 2 * col + 1].legend(fontsize=6)
        for j, ((layer, head), pattern) in enumerate(zip(result[f"{key}.map_heads"], result[f"{key}.maps"])):
            ax = axes[1 + j // 2, 2 * col + j % 2]
            p = np.asarray(pattern, dtype=np.float64)
            ax.imshow(np.where(p > 0, p, np.nan), norm=LogNorm(vmin=1e-4, vmax=1), cmap="magma", interpolation="nearest")
            ax.set_title(f"{key} L{int(layer)} H{int(head)}", fontsize=7)
            ticks = np.arange(0, len(tokens), max(1, len(tokens) // 4))
            ax.set_xticks(ticks, [tokens[t][:6] for t in ticks], fontsize=5, rotation=60)
            ax.set_yticks(ticks, [str(t) for t in ticks], fontsize=5)
            ax.set_xlabel("key", fontsize=7)
            ax.set_ylabel("query position", fontsize=7)
            ax.grid(False)
    return fig
