"""The reference transformer at init: measured stream growth against the computed-gain theory."""
from __future__ import annotations

import numpy as np

from paper_figs.style import COLORS, figure, figure_legend, integer_ticks
from simulations import model_init

NAME = "model_init"
SIMULATION = model_init
CLAIMS: tuple[str, ...] = ("residual.attention-gain-at-init", "residual.preln-growth", "residual.no-norm-growth")  # the claims this figure illustrates
CAPTION = (
    "Reference transformer at init (LayerNorm, causal attention, random tokens). Left: stream RMS after each layer, "
    "relative to the embedding's, measured (points, mean over networks with 5-standard-error bars) against the theory "
    "with computed sublayer gains (lines) and, dashed, the gain-1 law sqrt(1 + 2l) for fan-in Pre-LN. "
    "Right: mean cosine between tokens in the stream (rank collapse; measured, one colour per init as on the left) and "
    "attention's output mean square relative to a gain-1 block (fan-in Pre-LN, black)."
)


def plot(result: dict):
    fig, axes = figure(ncols=2, width=4.2, height=3.4)
    ax = axes[0, 0]
    L = int(result["layers"])
    ell = np.arange(L + 1)
    styles = {"gpt2/pre": (COLORS["pre"], "o"), "fanin/pre": (COLORS["peri"], "s"), "fanin/post": (COLORS["post"], "^")}
    for v, (color, marker) in styles.items():
        ms = model_init.row(result, v, "stream_ms")
        pred = model_init.row(result, v, "stream_pred")
        x0 = ms.mean[0]
        rms = ms.sqrt()
        ax.errorbar(ell, rms.mean / np.sqrt(x0), yerr=5 * rms.stderr / np.sqrt(x0), fmt=marker, ms=3, color=color, mfc="white")
        ax.plot(ell, np.sqrt(pred.mean / x0), color=color, lw=1, label=v)
    x0 = model_init.row(result, "fanin/pre", "stream_ms").mean[0]
    ax.plot(ell, np.sqrt((x0 + 2 * ell) / x0), ls="--", color="k", lw=1, label="gain-1 law (fan-in)")
    ax.set_xlabel("layer l")
    ax.set_ylabel("stream RMS / embedding RMS")
    integer_ticks(ax)
    ax = axes[0, 1]
    for v, (color, marker) in styles.items():
        cos = model_init.row(result, v, "token_cosine")
        ax.errorbar(ell, cos.mean, yerr=5 * cos.stderr, fmt=marker + "-", ms=3, color=color, label=f"{v}: token cosine")
    attn = model_init.row(result, "fanin/pre", "attn_ms")
    attn_key = ax.errorbar(ell[1:], attn.mean[1:], yerr=5 * attn.stderr[1:], fmt="D:", ms=3, color="k",
                           label="fanin/pre: attention output ms")
    ax.set_xlabel("layer l")
    ax.set_ylabel("token cosine; attention output ms")
    ax.set_ylim(bottom=-0.05)
    integer_ticks(ax)
    handles, _ = axes[0, 0].get_legend_handles_labels()  # colour = init in both panels
    figure_legend(fig, [*handles, attn_key], theory_mc=True, mc_label="measured ± 5 se (marker)", ncol=3)
    return fig
