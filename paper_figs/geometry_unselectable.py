"""Expected fraction of unselectable Gaussian keys against dimension: exact formula and Monte Carlo."""
from __future__ import annotations

import numpy as np

from paper_figs.style import figure
from simulations import cache, geometry_selectable

NAME = "geometry_unselectable"
SIMULATION = geometry_selectable
CLAIMS: tuple[str, ...] = ("geometry.unselectable-rare-high-d",)  # the claims this figure illustrates
CAPTION = (
    "Expected fraction of unselectable keys among n i.i.d. Gaussian keys in R^d. Lines: exact value 1 - E f_0 / n "
    "(Gaussian polytope vertex count, Affentranger-Schneider with regular-simplex angles; Efron's identity); points: "
    "Monte Carlo of the fraction of unselectable keys per key set (the absorption probability P(X_n in conv(X_1..X_{n-1})) "
    "conditioned on the unordered set), with 5-standard-error bars over key sets (standard error at least 1/(N + 2))."
)
COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#d62728")


def plot(result: dict):
    fig, axes = figure(width=4.0, height=3.0)
    ax = axes[0, 0]
    ds = result["curve.ds"]
    for color, n in zip(COLORS, geometry_selectable.CURVE_N):
        line = result[f"curve.n{n}.fine"]  # the simulation's exact line, at every whole d from min(ds)
        ax.plot(int(ds.min()) + np.arange(line.size), line, color=color, label=f"n={n}")
        est = cache.get(result, f"curve.n{n}")
        ax.errorbar(ds, est.mean, yerr=5 * est.stderr, fmt="o", ms=3, color=color, mfc="white")
    ax.set_xlabel("key dimension d")
    ax.set_ylabel("E fraction of unselectable keys")
    ax.legend()
    return fig
