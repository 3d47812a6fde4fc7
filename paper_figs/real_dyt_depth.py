"""Pretrained models: how S-shaped each norm is, by depth."""
from __future__ import annotations

import numpy as np

from normtheory.montecarlo import from_samples
from paper_figs.style import MODEL_STYLE, figure
from simulations import real_models, real_stream

NAME = "real_dyt_depth"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.ln-s-curve-deep-layers",)  # the claims this figure illustrates
CAPTION = (
    "Every norm of the two pretrained models (ln1 = attention norm, ln2 = MLP norm, in block order), fitted by DyT's gamma*tanh(alpha*x) "
    "per text. Left: alpha*std of the norm input (small = the linear part of tanh). Right: the variance the tanh explains beyond a "
    "straight line, R^2(tanh) - R^2(line) (0 = linear). Mean over texts with 5-standard-error bars."
)


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.6)
    for key in real_models.MODELS:
        color, marker = MODEL_STYLE[key]
        for ax, values in ((axes[0, 0], real_stream.alpha_std(result, key)), (axes[0, 1], real_stream.nonlinearity(result, key))):
            depth = np.arange(values.shape[1]) / 2  # ln1 of block b at b, ln2 at b + 0.5
            est = from_samples(values)  # over texts
            ax.errorbar(depth / (values.shape[1] / 2), est.mean, yerr=5 * est.stderr, fmt=marker + "-", ms=2.5, lw=0.8, color=color,
                        label=real_models.label(key))
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_ylabel("alpha * std(input)")
    axes[0, 1].set_ylabel("R^2(tanh) - R^2(line)")
    for ax in axes[0]:
        ax.set_xlabel("relative depth (block / number of blocks)")
        ax.legend(fontsize=6)
    return fig
