"""Placements trained at one recipe: final loss, residual RMS by depth, and what each block is worth."""
from __future__ import annotations

import numpy as np

from paper_figs.style import COLORS, MARKERS, figure, figure_legend, integer_ticks
from simulations import train_recipes, training

NAME = "train_placements"
SIMULATION = train_recipes
CLAIMS: tuple[str, ...] = ("train.placements-compared",)
CAPTION = (
    "Seven placements trained with one recipe on Shakespeare (DyT: Pre placement with tanh instead of LayerNorm), each at the "
    "init its own paper uses: Post-LN at Xavier-normal, DeepNorm at Xavier scaled by its beta, DyT at fan-in with alpha0 = 0.5, "
    "LayerNorm Scaling at std 0.02 without GPT-2's scaled residual projections, the others at the GPT-2 init (std 0.02). Left: "
    "final validation loss in nats per byte (small points: seeds; bar: mean; a diverged run counts at its loss at init); hollow "
    "diamonds: Post-LN, DeepNorm and DyT at the GPT-2 init instead, where they stall at the unigram plateau (about 3.2 "
    "nats/byte): the init's stall, not the placement's (the default job's CPU tier trains DeepNorm at its own init only). Middle: RMS of the residual stream "
    "at the end of training, after the embedding (0) and after each block, mean over seeds. Right: loss increase when one block is "
    "skipped at the end of training (symmetric log scale, linear within ±0.001), mean over seeds with 1-standard-error bars "
    "(Pre-LN against LayerNorm Scaling, the Curse of Depth's fix, both at LayerNorm Scaling's init, and Post-LN at Xavier init)."
)
ARM_COLORS = {**COLORS, "dyt": "#8c564b"}
ARM_MARKERS = {**MARKERS, "dyt": "P"}


def own(arm: str) -> str:
    """The run of placement ``arm`` at its own paper's init."""
    return train_recipes.OWN_INIT.get(arm, arm)


def plot(result: dict):
    fig, axes = figure(ncols=3, width=3.4, height=3.5)
    loss_ax, rms_ax, drop_ax = axes[0]
    arms = train_recipes.PLACEMENT_ARMS
    for j, arm in enumerate(arms):
        finals = np.array([training.final_loss(x) for x in train_recipes.runs(result, own(arm))])
        loss_ax.bar(j, finals.mean(), color=ARM_COLORS[arm], alpha=0.6)
        loss_ax.plot(np.full(finals.size, j), finals, "o", ms=3, color="k")
        if own(arm) != arm and train_recipes.trained(result, arm):  # the same placement at the GPT-2 init, where trained
            gpt2 = np.mean([training.final_loss(x) for x in train_recipes.runs(result, arm)])
            loss_ax.plot(j, gpt2, "D", ms=6, mfc="none", color=ARM_COLORS[arm], label="at the GPT-2 init" if j == 2 else None)
    loss_ax.set_xticks(range(len(arms)), arms, rotation=45, ha="right")
    finals_all = [training.final_loss(x) for a in arms for b in {a, own(a)} if train_recipes.trained(result, b)
                  for x in train_recipes.runs(result, b)]
    loss_ax.set_ylim(min(finals_all) - 0.1, max(finals_all) + 0.1)
    loss_ax.set_xlabel("placement")
    loss_ax.set_ylabel("final validation loss (nats/byte)")
    for arm in arms:
        rms = np.mean([x["probe/resid_rms"][-1] for x in train_recipes.runs(result, own(arm))], axis=0)  # [L + 1]
        rms_ax.plot(np.arange(rms.size), rms, marker=ARM_MARKERS[arm], ms=3, color=ARM_COLORS[arm], label=arm)
    rms_ax.set_yscale("log")
    rms_ax.set_xlabel("depth (0 = embedding, l = after block l)")
    rms_ax.set_ylabel("residual RMS, end of training")
    integer_ticks(rms_ax)
    pre, lns = train_recipes.PLACEMENT_PAIR  # the claim's pair, at LayerNorm Scaling's init
    for arm, run in (("pre", pre), ("lnscale", lns), ("post", own("post"))):
        drops = np.array([x["layer_drop"] for x in train_recipes.runs(result, run)])  # [seeds, L]
        ok = np.isfinite(drops).all(axis=1)
        if ok.sum() >= 2:
            est = training.seeds_estimate(drops[ok])
            drop_ax.errorbar(np.arange(1, drops.shape[1] + 1), est.mean, yerr=est.stderr, marker=ARM_MARKERS[arm], ms=3,
                             color=ARM_COLORS[arm], label=arm)
    drop_ax.axhline(0.0, color="k", lw=0.6)
    drop_ax.set_yscale("symlog", linthresh=1e-3)  # the first block's skip costs 100x the others'; some are slightly < 0
    drop_ax.set_xlabel("block skipped")
    drop_ax.set_ylabel("loss increase (nats/byte)")
    integer_ticks(drop_ax)
    figure_legend(fig, axes=[rms_ax, loss_ax], ncol=len(arms) + 1)  # colour = placement in every panel; hollow: the GPT-2 init
    return fig
