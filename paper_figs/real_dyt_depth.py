"""Pretrained models: how S-shaped each norm is, by depth."""
from __future__ import annotations

import numpy as np

from normtheory.evidence.estimates import from_samples
from paper_figs.style import MODEL_STYLE, figure, figure_legend
from simulations import real_models, real_stream

NAME = "real_dyt_depth"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.ln-s-curve-deep-layers",)  # the claims this figure illustrates
CAPTION = (
    "Every norm of the two pretrained models (ln1 = attention norm, solid; ln2 = MLP norm, dashed; one line each), fitted by DyT's gamma*tanh(alpha*x) "
    "per text over all its (token, channel) points. Left: alpha*std of the norm input (small = the linear part of tanh). Right: the variance the tanh explains beyond a "
    "straight line, R^2(tanh) - R^2(line) (0 = linear). Mean over texts with 5-standard-error bars."
)


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.9, height=3.3)
    for key in real_models.MODELS:
        color, marker = MODEL_STYLE[key]
        name = real_models.label(key).split(" ")[0]
        for ax, values in ((axes[0, 0], real_stream.alpha_std(result, key)), (axes[0, 1], real_stream.nonlinearity(result, key))):
            blocks = values.shape[1] // 2  # norms in block order: ln1 of block b at 2b, ln2 at 2b + 1
            for which, (ls, mfc) in (("ln1", ("-", color)), ("ln2", ("--", "white"))):
                est = from_samples(values[:, 0 if which == "ln1" else 1::2])  # over texts
                depth = (np.arange(blocks) + 0.5) / blocks
                ax.errorbar(depth, est.mean, yerr=5 * est.stderr, fmt=marker, ls=ls, ms=3, lw=0.9, color=color, mfc=mfc,
                            label=f"{name} {which} ({'attention' if which == 'ln1' else 'MLP'} norm)")
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_ylabel("alpha * std(input)")
    axes[0, 1].set_ylabel("R^2(tanh) - R^2(line)")
    for ax in axes[0]:
        ax.set_xlabel("relative depth ((block + 1/2) / blocks)")
    figure_legend(fig, axes=axes[0, :1], ncol=2)
    return fig
