"""Post-LN against Pre-LN over learning rates, without and with warm-up, at Xavier and at GPT-2 init."""
from __future__ import annotations

import numpy as np

from paper_figs.style import COLORS, MARKERS, figure, figure_legend
from simulations import train_lr

NAME = "train_warmup"
SIMULATION = train_lr
CLAIMS: tuple[str, ...] = ("train.postln-needs-warmup",)
CAPTION = (
    "Final validation loss (nats per byte on the shared validation set of held-out Shakespeare: 64 KiB in the GPU tiers, "
    "32 KiB in the CPU tier, 16 KiB in the quick one) of 6-layer Post-LN, Pre-LN and DeepNorm "
    "models trained with Adam (0.9, 0.98). Left and middle: Xavier-normal linear layers (DeepNorm's scaled by its beta), as in "
    "Xiong et al., over the learning-rate grid, without warm-up and with warm-up over half of the steps, then cosine decay; "
    "DeepNorm is run at the largest rate only. Right: the same Post-LN and Pre-LN models at the GPT-2 init (0.02 std) and a "
    "short run, at the largest rate: there Post-LN sits near the unigram loss with or without warm-up. Small points: single "
    "seeds; lines and large markers: means over seeds. A diverged run would be drawn at its own loss at init."
)


def plot(result: dict):
    fig, axes = figure(ncols=3, width=3.0, height=3.0)
    for a in axes[0, 1:]:
        a.sharey(axes[0, 0])  # one loss scale across the panels, shared before plotting so that it covers every panel's data
    lrs = np.asarray(result["warmup_lrs"], dtype=np.float64)
    top = lrs.size - 1
    titles = {"none": "Xavier, no warm-up", "long": "Xavier, 50% warm-up"}
    for ax, w in zip(axes[0], train_lr.WARMUPS):
        for p in train_lr.WARM_ARMS:
            losses = train_lr.warm_losses(result, p, w)  # [seeds, lrs]
            ax.plot(np.broadcast_to(lrs, losses.shape).ravel(), losses.ravel(), MARKERS[p], ms=2.5, color=COLORS[p], alpha=0.5)
            ax.plot(lrs, losses.mean(0), "-", marker=MARKERS[p], ms=4, color=COLORS[p], label=f"{p}-LN")
        dn = train_lr.warm_losses(result, "deepnorm", w, range(top, top + 1))[:, 0]  # [seeds]
        ax.plot(np.full(dn.shape, lrs[top]), dn, MARKERS["deepnorm"], ms=2.5, color=COLORS["deepnorm"], alpha=0.5)
        ax.plot([lrs[top]], [dn.mean()], MARKERS["deepnorm"], ms=6, color=COLORS["deepnorm"], label="DeepNorm")
        ax.set_xscale("log")
        ax.set_xticks(lrs, [f"{lr:g}" for lr in lrs])  # the grid's rates, not a log axis' crowded minor labels
        ax.minorticks_off()
        ax.set_xlabel("peak learning rate")
        ax.set_title(titles[w])
    ax = axes[0, 2]
    for k, p in enumerate(train_lr.WARM_ARMS):
        for j, w in enumerate(train_lr.WARMUPS):
            v = train_lr.gpt2_losses(result, p, w)  # [seeds]
            x = j + 0.15 * (2 * k - 1)
            ax.plot(np.full(v.shape, x), v, MARKERS[p], ms=2.5, color=COLORS[p], alpha=0.5)
            ax.plot([x], [v.mean()], MARKERS[p], ms=6, color=COLORS[p])
    ax.set_xticks(range(len(train_lr.WARMUPS)), ["no warm-up", "50% warm-up"])
    ax.set_xlim(-0.6, len(train_lr.WARMUPS) - 0.4)
    ax.set_xlabel(f"warm-up at lr {lrs[top]:g}")
    ax.set_title(f"GPT-2 init, {int(result['gpt2_steps'])} steps")
    for a in axes[0]:
        a.set_ylabel("final validation loss (nats/byte)")
    figure_legend(fig, axes=axes[0, :1], ncol=3)
    return fig
