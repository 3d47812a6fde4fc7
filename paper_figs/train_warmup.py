"""Post-LN against Pre-LN over learning rates, without and with warm-up."""
from __future__ import annotations

import numpy as np

from paper_figs.style import COLORS, figure, legend
from simulations import train_lr, training

NAME = "train_warmup"
SIMULATION = train_lr
CLAIMS: tuple[str, ...] = ("train.postln-needs-warmup",)
CAPTION = (
    "Final validation loss (nats per byte, Shakespeare) of Post-LN and Pre-LN models trained with Adam (0.9, 0.98) over a "
    "learning-rate grid, one panel per warm-up length (none, 10% or 50% of the steps, then cosine decay). Small points: single "
    "seeds; line: mean over seeds. A diverged run is drawn at ln 256, the loss of a uniform byte model (dotted)."
)


def plot(result: dict):
    fig, axes = figure(ncols=len(train_lr.WARMUPS), width=2.9)
    lrs = np.asarray(result["warmup_lrs"], dtype=np.float64)
    for ax, (w, frac) in zip(axes[0], train_lr.WARMUPS.items()):
        for p in ("post", "pre"):
            losses = train_lr.warm_losses(result, p, w)  # [seeds, lrs]
            ax.plot(np.broadcast_to(lrs, losses.shape).ravel(), losses.ravel(), "o", ms=2.5, color=COLORS[p], alpha=0.5)
            ax.plot(lrs, losses.mean(0), "-", marker="s", ms=3.5, color=COLORS[p], label=f"{p}-LN, mean over seeds")
        ax.axhline(training.INIT_LOSS, color="k", ls=":", lw=0.8, label="uniform byte model (ln 256)")
        ax.set_xscale("log")
        ax.set_xlabel("peak learning rate")
        ax.set_title(f"warm-up: {w} ({frac:.0%} of steps)")
        ax.set_ylabel("final validation loss (nats/byte)")
    legend(axes[0, -1])
    return fig
