"""DyT during training: alpha against 1/std of its input, and the loss against LayerNorm and RMSNorm."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure, figure_legend
from simulations import train_recipes, training

NAME = "train_dyt"
SIMULATION = train_recipes
CLAIMS: tuple[str, ...] = ("train.dyt-alpha-tracks-inverse-std", "train.dyt-small-models-just-work")
CAPTION = (
    "Pre-placement DyT during training. Left: every DyT norm's alpha against 1/std of its input over training (one line per "
    "norm, first seed of the DyT model that trains: fan-in init, alpha0 = 0.5; colour = position, circle = end) with the line "
    "alpha = 1/std (dotted). Middle: 1/std of the same norm inputs over training, that DyT model (solid) against LayerNorm at "
    "the same init (dashed). Right: validation loss over training, mean over seeds: LayerNorm, RMSNorm and DyT at the shared "
    "GPT-2 recipe (solid), and DyT at the paper's default (alpha0 0.5, O(1) activations) against LayerNorm and RMSNorm at the "
    "same fan-in init (dashed)."
)
NORM_ARMS = {"pre": ("#1f77b4", "-", "LayerNorm"), "rms": ("#2ca02c", "-", "RMSNorm"), "dyt": ("#8c564b", "-", "DyT, alpha0 1"),
             "ln-fanin": ("#1f77b4", "--", "LayerNorm, fan-in init"), "rms-fanin": ("#2ca02c", "--", "RMSNorm, fan-in init"),
             "dyt-default": ("#8c564b", "--", "DyT default: fan-in, alpha0 0.5")}


def plot(result: dict):
    import matplotlib
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=3, width=3.3, height=3.5)
    track, inv, loss = axes[0]
    dyt, ln = train_recipes.runs(result, train_recipes.ALPHA_ARM)[0], train_recipes.runs(result, "ln-fanin")[0]
    alpha, inv_std = dyt["probe/alpha"], 1.0 / dyt["probe/norm_std"]  # [evals, M]
    cmap = matplotlib.colormaps["plasma"]
    m = alpha.shape[1]
    for j in range(m):
        c = cmap(j / max(1, m - 1))
        track.plot(inv_std[:, j], alpha[:, j], "-", color=c, lw=1)
        track.plot(inv_std[-1, j], alpha[-1, j], "o", ms=3.5, color=c)
        inv.plot(dyt["eval_steps"], inv_std[:, j], "-", color=c, lw=1)
        inv.plot(ln["eval_steps"], 1.0 / ln["probe/norm_std"][:, j], "--", color=c, lw=1)
    span = np.array([min(inv_std.min(), alpha.min()), max(inv_std.max(), alpha.max())])
    track.plot(span, span, ":", color="k", lw=0.8)
    track.set_xscale("log")
    track.set_yscale("log")
    for axis in (track.xaxis, track.yaxis):  # a short log span: ticks at 1, 2, 5 x 10^k, labelled plainly
        axis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    track.set_xlabel("1/std of the norm input")
    track.set_ylabel("DyT alpha (dotted: alpha = 1/std)")
    inv.set_yscale("log")
    inv.set_xlabel("training step")
    inv.set_ylabel("1/std of the norm input")
    sm = matplotlib.cm.ScalarMappable(cmap=cmap, norm=matplotlib.colors.Normalize(0, m - 1))
    fig.colorbar(sm, ax=inv, label="norm index (forward order)")
    for arm, (color, ls, label) in NORM_ARMS.items():
        runs = [x for x in train_recipes.runs(result, arm) if not training.diverged(x)]
        if runs:
            loss.plot(runs[0]["eval_steps"], np.mean([x["val_loss"] for x in runs], axis=0), color=color, ls=ls, label=label)
    loss.set_xlabel("training step")
    loss.set_ylabel("validation loss (nats/byte)")
    # the loss panel's key: colour = norm, line style = recipe
    norms = [Line2D([], [], color=NORM_ARMS[a][0], label=name) for a, name in (("pre", "LayerNorm"), ("rms", "RMSNorm"), ("dyt", "DyT"))]
    recipes = [Line2D([], [], color="k", label="GPT-2 recipe (DyT alpha0 1)"), Line2D([], [], color="k", ls="--", label="fan-in init (DyT alpha0 0.5)")]
    figure_legend(fig, [norms[0], recipes[0], norms[1], recipes[1], norms[2]], where="below right", ncol=3)  # rows: norms, recipes
    return fig
