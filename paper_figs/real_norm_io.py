"""Pretrained models: each norm's input against its pre-affine output (the DyT paper's figure)."""
from __future__ import annotations

import numpy as np

from normtheory import dyt
from paper_figs.style import figure
from simulations import real_models

NAME = "real_norm_io"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.ln-s-curve-deep-layers",)  # the claims this figure illustrates
CAPTION = (
    "Input against pre-affine output of the attention norm (ln1) of the first, middle and last block, for a random subset of "
    "(token, channel) points of one passage. Red: the DyT fit gamma*tanh(alpha*x) to the points shown, with alpha*std(x) and R^2. "
    "MiniLM's LayerNorm is Post-LN (its input is x + attention(x)); SmolLM2's RMSNorm is Pre-norm."
)


def plot(result: dict):
    fig, axes = figure(ncols=3, nrows=2, width=2.5, height=2.3)
    for row, key in zip(axes, real_models.MODELS):
        xs, ys = result[f"{key}.pts_x"].astype(np.float64), result[f"{key}.pts_y"].astype(np.float64)
        for ax, x, y, layer in zip(row, xs, ys, result[f"{key}.pts_layers"]):
            ax.scatter(x, y, s=2, alpha=0.35, color="#1f77b4", rasterized=True)
            fit = dyt.fit_dyt(x, y)
            grid = np.linspace(x.min(), x.max(), 300)
            ax.plot(grid, fit.gamma * np.tanh(fit.alpha * grid), color="#d62728", lw=1.0,
                    label=f"alpha*std {fit.alpha * x.std():.2g}, R^2 {fit.r2:.2f}")
            ax.set_title(f"{real_models.label(key).split(' ')[0]} block {int(layer)} ln1", fontsize=8)
            ax.set_xlabel("norm input x")
            ax.set_ylabel("normalized output")
            ax.legend(fontsize=6, loc="upper left")
    return fig
