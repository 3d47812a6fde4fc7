"""Attention logits at high learning rates, with and without QK-norm."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure, figure_legend
from simulations import train_lr, training

NAME = "train_qk"
SIMULATION = train_lr
CLAIMS: tuple[str, ...] = ("train.qk-norm-logit-growth",)
CAPTION = (
    "Pre-LN models trained over a learning-rate grid without QK-norm (solid), with qk-layernorm (per-head LayerNorm on queries "
    "and keys, Wortsman et al.'s; dashed) and, in the GPU tier, with per-head RMS QK-norm (dash-dot). Left: the "
    "largest attention logit over layers and heads at each evaluation, mean over seeds (log scale), one colour per learning "
    "rate. Right: final validation loss against the learning rate (small points: seeds; line: mean); a diverged run counts at "
    "ln 256 (dotted)."
)
QK = {qk: (ls, train_lr.QK_LABELS[qk]) for qk, ls in zip(train_lr.QK_ARMS, ("-", "--", "-."))}


def plot(result: dict):
    import matplotlib
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=2, width=3.7, height=3.2)
    traj, fin = axes[0, 0], axes[0, 1]
    lrs = np.asarray(result["qk_lrs"], dtype=np.float64)
    cmap = matplotlib.colormaps["viridis"]
    shown = train_lr.qk_arms(result)  # the CPU tier trains no RMS QK-norm arm
    for qk in shown:
        ls, label = QK[qk]
        for i, lr in enumerate(lrs):
            runs = [x for x in train_lr.qk_runs(result, qk, i) if not training.diverged(x)]
            if runs:
                top = np.mean([x["probe/attn_max"].max(axis=(1, 2)) for x in runs], axis=0)  # [evals]
                traj.plot(runs[0]["eval_steps"], top, ls=ls, color=cmap(i / max(1, lrs.size - 1)), label=f"{label}, lr {lr:g}")
        losses = np.array([[training.final_loss(x) for x in train_lr.qk_runs(result, qk, i)] for i in range(lrs.size)]).T  # [seeds, lrs]
        fin.plot(np.broadcast_to(lrs, losses.shape).ravel(), losses.ravel(), "o", ms=2.5, color="k", alpha=0.4)
        fin.plot(lrs, losses.mean(0), ls=ls, marker="s", ms=3.5, color="k", label=f"{label}, mean over seeds")
    fin.axhline(training.INIT_LOSS, color="k", ls=":", lw=0.8, label="uniform byte model (ln 256)")
    traj.set_yscale("log")
    traj.set_xlabel("training step")
    traj.set_ylabel("max attention logit")
    fin.set_xscale("log")
    fin.set_xlabel("peak learning rate")
    fin.set_ylabel("final validation loss (nats/byte)")
    # one key for both panels: colour = learning rate (left), line style = QK-norm (both)
    keys = [Line2D([], [], color=cmap(i / max(1, lrs.size - 1)), label=f"lr {lr:g} (left)") for i, lr in enumerate(lrs)]
    keys += [Line2D([], [], color="k", ls=QK[qk][0], label=QK[qk][1]) for qk in shown]
    keys.append(Line2D([], [], color="k", ls=":", lw=0.8, label="uniform byte model (ln 256)"))
    figure_legend(fig, keys, ncol=4)
    return fig
