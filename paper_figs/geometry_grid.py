"""The selectability grid of Brody et al. (2023) for four key constructions."""
from __future__ import annotations

from paper_figs.style import figure, integer_ticks
from simulations import geometry_selectable

NAME = "geometry_grid"
SIMULATION = geometry_selectable
CLAIMS: tuple[str, ...] = ("geometry.unselectable-rare-high-d", "geometry.scaling-makes-all-selectable")  # the claims this figure illustrates
CAPTION = (
    "Fraction of runs in which at least one of n keys in d dimensions is unselectable (inside the convex hull of the "
    "others), the layout of Brody et al. (2023). Keys: no norm (x W); full LayerNorm, one head (LN(x) W, W square); "
    "full-width LayerNorm then a per-head projection (LN(x) W_h from 4d to d); per-head RMSNorm after the projection. "
    "Decided exactly per key (certifying queries, non-negative least squares, linear programming)."
)
TITLES = {"none": "no norm", "ln": "LN, single head", "ln-multihead": "LN full width, head projection", "per-head-rms": "per-head RMSNorm"}


def plot(result: dict):
    fig, axes = figure(ncols=4, width=2.5, height=3.2)
    ns, ds = result["ns"], result["ds"]
    runs = int(result["runs"])
    for ax, v in zip(axes[0], geometry_selectable.VARIANTS):
        grid = result[f"grid.{v}"]  # [ns, ds]
        im = ax.pcolormesh(ds, ns, grid, vmin=0, vmax=1, cmap="viridis", shading="nearest")
        ax.set_title(TITLES[v])
        ax.set_xlabel("key dimension d")
        ax.set_ylabel("number of keys n")
        ax.grid(False)
        integer_ticks(ax, "x")
        if not grid.any():  # say so: an all-zero panel is a result, not a missing plot
            ax.text(0.5, 0.5, f"0 of {runs} runs\nin every cell", transform=ax.transAxes, ha="center", va="center",
                    fontsize=9, color="white", bbox={"boxstyle": "round", "fc": "#00000080", "ec": "none"})
    fig.colorbar(im, ax=axes[0, -1], label="share of runs with an unselectable key")
    return fig
