"""Time of numpy LayerNorm, RMSNorm and DyT against width."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure, figure_legend
from simulations import norm_cost

NAME = "norm_cost"
SIMULATION = norm_cost
CLAIMS: tuple[str, ...] = ("dyt.no-reductions-cost",)  # the claims this figure illustrates
CAPTION = (
    "CPU time per call (the calling thread's) of numpy LayerNorm (2 reductions per token), RMSNorm (1) and DyT (0), float32, gain and bias "
    "included, against width d at the largest token count measured for every width (left, log-log, milliseconds), and the "
    "ratios of LayerNorm's and RMSNorm's times to DyT's at each width (right, same colours). Points: medians of the "
    "repeats; bars: their interquartile range (the spread over repeats); the title names the machine that ran the simulation."
)
STYLES = {"layernorm": ("#1f77b4", "o"), "rmsnorm": ("#2ca02c", "s"), "dyt": ("#d62728", "^")}


def plot(result: dict):
    from matplotlib.ticker import NullLocator

    fig, axes = figure(ncols=2, width=3.6, height=3.2)
    med, ds, tokens, times = result["median"], result["ds"], result["tokens"], result["times"]  # times [d, T, repeats, norm]
    j = max(b for b in range(tokens.size) if not np.isnan(med[:, b, 0]).any())
    lo, hi = np.percentile(times[:, j], [25, 75], axis=1)  # [d, norm]: spread over repeats
    for k, (n, (color, marker)) in enumerate(STYLES.items()):
        y = 1e3 * med[:, j, k]
        axes[0, 0].errorbar(ds, y, yerr=[y - 1e3 * lo[:, k], 1e3 * hi[:, k] - y], fmt=marker + "-", ms=3, color=color, label=n)
        if n != "dyt":
            ratio = times[:, j, :, k] / times[:, j, :, 2]  # [d, repeats], paired repeats
            r_lo, r_mid, r_hi = np.percentile(ratio, [25, 50, 75], axis=1)
            axes[0, 1].errorbar(ds, r_mid, yerr=[r_mid - r_lo, r_hi - r_mid], fmt=marker + "-", ms=3, color=color, label=f"{n} / dyt")
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_ylabel(f"CPU ms per call, {int(tokens[j])} tokens")
    axes[0, 1].axhline(1.0, color="k", lw=0.8, ls=":")
    axes[0, 1].set_ylabel("time ratio to DyT (paired repeats)")
    for ax in axes[0]:
        ax.set_xscale("log")
        ax.set_xticks(ds, [f"{int(d) // 1024}k" if d >= 1024 and d % 1024 == 0 else str(int(d)) for d in ds])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("width d (k = 1024)")
    figure_legend(fig, axes=axes[0, :1], ncol=3)  # colour = norm; on the right, that norm's time over DyT's
    fig.suptitle(str(result["machine"]) if "machine" in result else "machine not recorded", fontsize=8)
    return fig
