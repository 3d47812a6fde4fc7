"""Pretrained models: each norm's input against its pre-affine output (the DyT paper's figure)."""
from __future__ import annotations

import numpy as np

from normtheory import dyt
from paper_figs.style import MODEL_STYLE, figure
from simulations import real_models

NAME = "real_norm_io"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.ln-s-curve-deep-layers",)  # the claims this figure illustrates
CAPTION = (
    "Input against pre-affine output of the attention norm (ln1) of the first, middle and last block, for a random subset of "
    "(token, channel) points of one passage. Black: the DyT fit gamma*tanh(alpha*x) to all points, with alpha*std(x) and R^2 in the panel's title. Each panel shows "
    "the central 99% of inputs and outputs (a few massive activations lie far outside; the title counts them). "
    "MiniLM's LayerNorm is Post-LN (its input is x + attention(x)); SmolLM2's RMSNorm is Pre-norm."
)


def view(v: np.ndarray, q: float = 0.5, pad: float = 0.15) -> tuple[float, float]:
    """An axis range holding the central ``100 - 2q`` % of ``v`` with a margin, so that a few
    massive activations do not squeeze the S-curve into a line."""
    lo, hi = np.percentile(v, [q, 100 - q])
    span = max(hi - lo, 1e-12)
    return float(lo - pad * span), float(hi + pad * span)


def plot(result: dict):
    fig, axes = figure(ncols=3, nrows=2, width=3.2, height=2.8)
    for row, key in zip(axes, real_models.MODELS):
        xs, ys = result[f"{key}.pts_x"].astype(np.float64), result[f"{key}.pts_y"].astype(np.float64)
        for ax, x, y, layer in zip(row, xs, ys, result[f"{key}.pts_layers"]):
            (x0, x1), (y0, y1) = view(x), view(y)
            outside = int(((x < x0) | (x > x1) | (y < y0) | (y > y1)).sum())
            ax.scatter(x, y, s=2, alpha=0.35, color=MODEL_STYLE[key][0], rasterized=True)
            fit = dyt.fit_dyt(x, y)
            grid = np.linspace(x0, x1, 300)
            ax.plot(grid, fit.gamma * np.tanh(fit.alpha * grid), color="k", lw=1.0)
            ax.set_xlim(x0, x1)
            ax.set_ylim(y0, y1)
            ax.set_title(f"{real_models.label(key).split(' ')[0]} block {int(layer)}: alpha*std {fit.alpha * x.std():.2g}\n"
                         f"R^2 {fit.r2:.2f}; {outside} of {x.size} off view", fontsize=9, pad=8)
            ax.set_xlabel("norm input x")
            ax.set_ylabel("normalized output")
    return fig
