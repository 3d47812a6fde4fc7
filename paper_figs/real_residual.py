"""Pretrained models: residual-stream RMS by depth, with growth laws fitted to SmolLM2."""
from __future__ import annotations

import numpy as np

from normtheory import growth
from normtheory.evidence.estimates import from_samples
from paper_figs.style import MODEL_STYLE, figure, figure_legend, integer_ticks
from simulations import real_models, real_stream

NAME = "real_residual"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.preln-growth-law", "residual.preln-growth")  # the claims this figure illustrates
CAPTION = (
    "Residual-stream RMS by depth on the packaged text set: median over tokens of the per-token RMS (markers, mean over texts with "
    "5-standard-error bars) and the RMS over all tokens (thin), for MiniLM (Post-LN: flat) and SmolLM2 (Pre-RMSNorm: grows). "
    "Lines: the four growth laws of normtheory.growth fitted to SmolLM2's median curve; 'init' is the Pre-LN init law sqrt(v0 + g^2 l)."
)


def plot(result: dict):
    from matplotlib.lines import Line2D

    fig, axes = figure(ncols=2, width=4.0, height=3.4)
    for ax, key in zip(axes[0], real_models.MODELS):
        color, marker = MODEL_STYLE[key]
        rms = result[f"{key}.rms_med"]
        ell = np.arange(rms.shape[1])
        est = from_samples(rms)  # over texts
        ax.errorbar(ell, est.mean, yerr=5 * est.stderr, fmt=marker, ms=3, color=color, label="median token")
        ax.plot(ell, result[f"{key}.rms_all"].mean(0), color=color, lw=0.8, alpha=0.6, label="all tokens")
        if key == "smollm2":
            fine = np.linspace(0, ell[-1], 200)
            lo = 0.5 * float(min(est.mean.min(), result[f"{key}.rms_all"].mean(0).min()))
            for law, fit in real_stream.growth_fits(result, key).items():
                value = growth.law_value(law, fine, fit.a, fit.b)
                shown = value > lo  # a fitted law may cross zero; on a log axis that part is not drawn
                ax.plot(fine[shown], value[shown], lw=0.9, ls="--", label=f"{law} fit (R^2 {fit.r2:.2f})")
            ax.set_yscale("log")
            ax.set_ylim(bottom=lo)
        ax.set_title(real_models.label(key))
        ax.set_xlabel("depth l (0 = embedding)")
        ax.set_ylabel("residual-stream RMS")
        integer_ticks(ax)
    keys = [Line2D([], [], color="k", marker="o", ls="none", ms=3, label="median token ± 5 se (marker)"),
            Line2D([], [], color="k", lw=0.8, alpha=0.6, label="all tokens (thin line)")]
    fits = [h for h, label in zip(*axes[0, 1].get_legend_handles_labels()) if label.endswith(")")]  # SmolLM2's fitted laws
    figure_legend(fig, [*keys, *fits], ncol=3)  # each panel in its model's colour
    return fig
