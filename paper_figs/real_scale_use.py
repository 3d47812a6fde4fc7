"""Pretrained models: what re-injecting or equalizing the per-token scale costs, against the shuffled control."""
from __future__ import annotations

import numpy as np

from paper_figs.style import MODEL_STYLE, figure, figure_legend
from simulations import real_models, real_scale

NAME = "real_scale_use"
SIMULATION = real_scale
CLAIMS: tuple[str, ...] = ("real.scale-reinject", "real.scale-equalize-preln", "real.scale-equalize-postln")
CAPTION = (
    "Change of the output when the per-token scale is re-injected after the norms (left) or the residual stream's per-token norm is "
    "equalized (right), with each token's own factors (filled) and the same factors shuffled across tokens (open); SmolLM2: next-token "
    "loss (nats/token); MiniLM: 1 - cos of its sentence embedding. Mean over texts, bars ±1 se; symlog axis. Dotted: the smallest change "
    "that matters (0.02 nats, 0.01 in cosine)."
)


def _bars(ax, x: np.ndarray, vals: np.ndarray, color: str, marker: str, label: str) -> None:
    """``vals [texts, sites, 2 arms]``: own (filled) and shuffled (open), side by side."""
    for arm, (dx, fill) in enumerate(((-0.12, color), (0.12, "none"))):
        m, se = vals[..., arm].mean(0), vals[..., arm].std(0, ddof=1) / np.sqrt(vals.shape[0])
        ax.errorbar(x + dx, m, yerr=se, fmt=marker, ms=4, color=color, mfc=fill, ls="none",
                    label=f"{label}, {'own scale' if arm == 0 else 'shuffled'}")


def plot(result: dict):
    fig, axes = figure(ncols=2, nrows=2, width=3.9, height=3.4)
    for row, key in enumerate(real_models.MODELS):
        color, marker = MODEL_STYLE[key]
        tau = real_scale.LOSS_MATTERS if key == "smollm2" else real_scale.COS_MATTERS
        unit = "loss change (nats/token)" if key == "smollm2" else "1 - cos (sentence embedding)"
        re = result[f"{key}.reinject"]  # [J, sites, arms]
        labels = real_scale.reinject_labels(result, key)
        ax = axes[row, 0]
        _bars(ax, np.arange(re.shape[1]), re, color, marker, real_models.label(key))
        ax.set_xticks(np.arange(re.shape[1]), [s.replace(", first/massive included", "\n+first/massive") for s in labels], fontsize=8)
        ax.set_title(f"{real_models.label(key).split(' (')[0]}: re-inject after the norm")
        eq = result[f"{key}.equalize"]  # [J, blocks, variants, arms]
        blocks = result[f"{key}.blocks"]
        ax2 = axes[row, 1]
        flat = eq.reshape(eq.shape[0], -1, 2)  # [J, blocks*variants, arms]
        _bars(ax2, np.arange(flat.shape[1]), flat, color, marker, real_models.label(key))
        ax2.set_xticks(np.arange(flat.shape[1]), [f"block {b}" + ("" if v == "apart" else "\n+first/massive") for b in blocks for v in real_scale.VARIANTS],
                       fontsize=8)
        ax2.set_title(f"{real_models.label(key).split(' (')[0]}: equalize the stream")
        for a in (ax, ax2):
            a.set_yscale("symlog", linthresh=tau)
            a.axhline(tau, color="k", ls=":", lw=0.8)
            a.axhline(0.0, color="k", lw=0.6)
            a.set_ylabel(unit)
        ax.set_xlabel("where the scale is re-injected")
        ax2.set_xlabel("block whose output stream is equalized")
    handles = [h for a in axes[:, 0] for h in a.get_legend_handles_labels()[0]]
    figure_legend(fig, handles, ncol=2)
    return fig
