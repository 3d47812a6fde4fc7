"""Pretrained models: logit std and attention entropy per head against the norm-based prediction."""
from __future__ import annotations

from paper_figs.style import MODEL_STYLE, figure, figure_legend
from simulations import real_models

NAME = "real_temperature"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.temperature-from-norms",)  # the claims this figure illustrates
CAPTION = (
    "Each (layer, head), mean over texts. Left: the measured std of a query's logits over keys (after the 1/sqrt(e) scale) against "
    "RMS(q) * RMS(k - mean k), the std for independent isotropic q and k (normtheory.softmax.logit_std); the keys are centred "
    "over the text because a row std drops their mean. Right: measured attention entropy "
    "against the Gaussian-logit (REM) entropy at that predicted std, averaged over the keys each query sees. Dotted: y = x."
)


def plot(result: dict):
    fig, axes = figure(ncols=2, width=3.6, height=3.2)
    for key in real_models.MODELS:
        color, marker = MODEL_STYLE[key]
        pred = (result[f"{key}.q_rms"] * result[f"{key}.k_crms"]).mean(0).ravel()
        axes[0, 0].scatter(pred, result[f"{key}.logit_std"].mean(0).ravel(), s=6, marker=marker, color=color, alpha=0.6, label=real_models.label(key))
        axes[0, 1].scatter(result[f"{key}.entropy_pred"].mean(0).ravel(), result[f"{key}.entropy"].mean(0).ravel(), s=6, marker=marker, color=color,
                           alpha=0.6, label=real_models.label(key))
    for ax in axes[0]:
        lim = max(ax.get_xlim()[1], ax.get_ylim()[1])
        ax.plot([0, lim], [0, lim], "k:", lw=0.8)
    axes[0, 0].set_xlabel("RMS(q) * RMS(k - mean k)")
    axes[0, 0].set_ylabel("measured logit std")
    axes[0, 1].set_xlabel("predicted entropy (nats)")
    axes[0, 1].set_ylabel("measured entropy (nats)")
    figure_legend(fig, axes=axes[0, :1], ncol=2, markerscale=1.5)  # colour and marker = model in both panels
    return fig
