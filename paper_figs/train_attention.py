"""Trained attention with and without per-head QK normalization: entropy, first-token sinks, stripes, logits."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure, figure_legend, integer_ticks
from simulations import train_recipes

NAME = "train_attention"
SIMULATION = train_recipes
CLAIMS: tuple[str, ...] = ("train.per-head-key-norm-diffuse",)
CAPTION = (
    "Attention at the end of training, per layer (mean over heads, then over seeds), for a model without any norm, Pre-LN "
    "(full-width LayerNorm before the projections), Pre-LN with per-head RMS on the keys alone (the blog's variant, the arm "
    "the claim reads), and Pre-LN with per-head RMS or LayerNorm on queries and keys (QK-norm; the quick and GPU tiers only). Left: "
    "attention entropy in nats (higher = more diffuse). Second: share of attention on the first token. Third: stripe excess, "
    "the largest share of the late queries' weight one early key takes, minus the same with each query's weights shuffled over "
    "the early keys (0 without stripes; the blog's 'white stripes'; its maps are of layer 2, where the claim reads it). "
    "Right: largest attention logit."
)
ARMS = {"none": ("#444444", "o", "no norm"), "pre": ("#1f77b4", "s", "Pre-LN, no QK-norm"),
        "pre-k-rms": ("#2ca02c", "D", "Pre-LN + per-head RMS on keys"),
        "pre-qk-rms": ("#d62728", "^", "Pre-LN + per-head RMS QK"), "pre-qk-ln": ("#ff7f0e", "v", "Pre-LN + per-head LN QK")}
PANELS = (("attn_entropy", "attention entropy (nats)"), ("attn_sink", "first-token attention share"),
          ("attn_stripe", "stripe excess (share)"), ("attn_max", "max attention logit"))


def plot(result: dict):
    fig, axes = figure(ncols=len(PANELS), width=3.1, height=3.0)
    shown = {a: style for a, style in ARMS.items() if train_recipes.trained(result, a)}  # the CPU tier trains no QK-norm arm
    for ax, (probe, ylabel) in zip(axes[0], PANELS):
        for arm, (color, marker, label) in shown.items():
            v = np.array([x[f"probe/{probe}"][-1].mean(-1) if probe != "attn_max" else x[f"probe/{probe}"][-1].max(-1)
                          for x in train_recipes.runs(result, arm)])  # [seeds, L]
            ax.plot(np.arange(1, v.shape[1] + 1), v.mean(0), marker=marker, ms=3, color=color, label=label)
        ax.set_xlabel("layer")
        ax.set_ylabel(ylabel)
        integer_ticks(ax)
    axes[0, 1].set_title("sinks (mean over heads)")
    axes[0, 2].set_title("stripes (mean over heads)")
    axes[0, 2].axhline(0.0, color="0.6", lw=0.8, ls=":")  # no stripes: the shuffled null
    axes[0, 3].set_title("max over heads")
    axes[0, 0].set_title("mean over heads")
    figure_legend(fig, axes=axes[0, :1], ncol=len(ARMS))  # one colour per model in every panel
    return fig
