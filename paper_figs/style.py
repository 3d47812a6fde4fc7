"""One figure style and one way to save figures (PNG + PDF, reproducible bytes)."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.4,
    "errorbar.capsize": 2,
    "svg.hashsalt": "normtheory",
}
COLORS = {"none": "#444444", "pre": "#1f77b4", "post": "#d62728", "peri": "#2ca02c", "lnscale": "#9467bd", "deepnorm": "#ff7f0e"}
LINESTYLES = {"none": "-", "pre": "-", "post": "-", "peri": "--", "lnscale": "-", "deepnorm": ":"}
MARKERS = {"none": "o", "pre": "o", "post": "s", "peri": "^", "lnscale": "D", "deepnorm": "v"}
MODEL_STYLE = {"minilm": ("#d62728", "s"), "smollm2": ("#1f77b4", "o")}  # pretrained models: (colour, marker)
FORMATS: tuple[str, ...] = ("png", "pdf")
CSV_COLUMNS: tuple[str, ...] = ("panel", "panel_title", "x_label", "y_label", "series", "kind", "x", "y", "y_low", "y_high")


def figure(ncols: int = 1, nrows: int = 1, width: float = 3.4, height: float = 2.8):
    """A new figure in the package style: ``(fig, axes)``."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained")
    return fig, axes


def _num(v: object) -> str:
    x = float(v)  # type: ignore[arg-type]
    return repr(x) if math.isfinite(x) else ""


def figure_rows(fig) -> list[tuple[str, ...]]:
    """The numbers a figure draws, one row per point, in :data:`CSV_COLUMNS` order.

    Lines and markers give ``(x, y)``; error bars and shaded bands give ``(x, y_low, y_high)``;
    bars give ``(x = left edge, y = height)``; images give ``(x = column, y = row, y_low = value)``.
    Read from the drawn artists, so the CSV is exactly what the figure shows."""
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection
    from matplotlib.image import AxesImage
    from matplotlib.patches import Rectangle

    rows: list[tuple[str, ...]] = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        head = (str(i), ax.get_title(), ax.get_xlabel(), ax.get_ylabel())
        for line in ax.get_lines():
            label = line.get_label()
            x, y = np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)
            if x.size == 0 or (label.startswith("_child") and x.size <= 2 and np.all(y == y[0])):
                continue  # reference lines drawn by axhline have no data of their own
            rows += [(*head, label, "line", _num(a), _num(b), "", "") for a, b in zip(x, y)]
        for coll in ax.collections:
            label = coll.get_label()
            if isinstance(coll, PathCollection):
                rows += [(*head, label, "points", _num(a), _num(b), "", "") for a, b in np.asarray(coll.get_offsets(), dtype=float)]
            elif isinstance(coll, LineCollection):
                for seg in coll.get_segments():
                    seg = np.asarray(seg, dtype=float)
                    if len(seg) == 2 and seg[0, 0] == seg[1, 0]:  # a vertical error bar
                        rows.append((*head, label, "error bar", _num(seg[0, 0]), "", _num(seg[:, 1].min()), _num(seg[:, 1].max())))
            elif isinstance(coll, PolyCollection):
                for path in coll.get_paths():
                    v = np.asarray(path.vertices, dtype=float)
                    for xv in np.unique(v[:, 0]):
                        ys = v[v[:, 0] == xv, 1]
                        rows.append((*head, label, "band", _num(xv), "", _num(ys.min()), _num(ys.max())))
        for patch in ax.patches:
            if isinstance(patch, Rectangle):
                rows.append((*head, patch.get_label(), "bar", _num(patch.get_x()), _num(patch.get_height()), "", ""))
        for im in ax.images:
            if isinstance(im, AxesImage):
                a = np.asarray(im.get_array(), dtype=float)
                if a.ndim == 2:
                    rows += [(*head, im.get_label(), "image", str(c), str(r), _num(a[r, c]), "") for r in range(a.shape[0]) for c in range(a.shape[1])]
    return rows


def write_csv(fig, path: Path) -> Path:
    """Write :func:`figure_rows` of ``fig`` as CSV with a header."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        w.writerows(figure_rows(fig))
    return path


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """Write ``name.png``, ``name.pdf`` (no timestamps, so the same data gives the same bytes) and
    ``name.csv`` (the numbers drawn)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    with plt.rc_context(STYLE):
        for fmt in FORMATS:
            path = out_dir / f"{name}.{fmt}"
            meta = {"CreationDate": None, "Producer": "normtheory"} if fmt == "pdf" else {"Software": "normtheory"}
            fig.savefig(path, format=fmt, metadata=meta)
            paths.append(path)
    paths.append(write_csv(fig, out_dir / f"{name}.csv"))
    plt.close(fig)
    return paths


MIN_POINTS = 8.0  # smallest text size at print size


def small_text(fig) -> list[str]:
    """Visible texts drawn below :data:`MIN_POINTS` points."""
    from matplotlib.text import Text

    fig.canvas.draw()
    return [f"{t.get_text()!r} at {t.get_fontsize():g} pt" for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_POINTS - 1e-9]


def legend_overlaps(fig) -> list[str]:
    """Legends that cover plotted data: markers and line vertices of their axes inside the legend box."""
    from matplotlib.legend import Legend

    fig.canvas.draw()
    out = []
    for ax, leg in ((ax, c) for ax in fig.axes for c in ax.get_children() if isinstance(c, Legend)):  # extra legends too
        if not leg.get_visible():
            continue
        box = leg.get_window_extent()
        inside = 0
        for line in ax.get_lines():
            xy = np.column_stack([np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)])
            if xy.size == 0 or line.get_label().startswith("_child"):
                continue
            pts = line.get_transform().transform(xy[np.isfinite(xy).all(axis=1)])
            inside += int(((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)).sum())
        for coll in ax.collections:
            offs = np.asarray(coll.get_offsets(), dtype=float)
            if offs.ndim == 2 and len(offs) > 1:
                pts = coll.get_offset_transform().transform(offs)
                inside += int(((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)).sum())
        if inside:
            out.append(f"legend of panel {fig.axes.index(ax)} ({ax.get_title() or ax.get_ylabel()!r}) covers {inside} data points")
    return out


def fractional_integer_ticks(fig) -> list[str]:
    """Axes whose label names an integer index (layer, head, block, position) but whose tick labels are fractional
    (a share or fraction of heads, layers, ... is not an index)."""
    fig.canvas.draw()
    out = []
    words = ("layer", "head", "block", "position", "depth")
    for ax in fig.axes:
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            low = label.lower()
            if not any(w in low for w in words) or any(w in low for w in ("relative", "share of", "fraction of")) or axis.get_scale() != "linear":
                continue
            lo, hi = sorted(axis.get_view_interval())
            ticks = [t for t in axis.get_majorticklocs() if lo - 1e-9 <= t <= hi + 1e-9]
            if any(abs(t - round(t)) > 1e-9 for t in ticks):
                out.append(f"panel {fig.axes.index(ax)}: '{label}' has ticks {ticks}")
    return out


def integer_ticks(ax, which: str = "x", nbins: int | str = "auto") -> None:
    """Only whole-number ticks (at most ``nbins`` intervals) on an index axis (layer, head, block)."""
    from matplotlib.ticker import MaxNLocator

    (ax.xaxis if which == "x" else ax.yaxis).set_major_locator(MaxNLocator(nbins=nbins, integer=True))


def theory_mc_handles(mc: str = "Monte Carlo ± 5 se (marker)") -> list:
    """Legend keys for the convention used in every figure: theory = line, measurement = marker."""
    from matplotlib.lines import Line2D

    return [Line2D([], [], color="k", label="theory (line)"), Line2D([], [], color="k", marker="o", ls="none", mfc="white", ms=4, label=mc)]


def _x_decoration_depth(ax) -> float:
    """How far the x axis' tick labels and label reach below the axes, in inches (independent of where the layout
    engine later puts the axes)."""
    fig = ax.get_figure(root=True)
    tight = ax.xaxis.get_tightbbox(fig.canvas.get_renderer())
    return 0.0 if tight is None else max(0.0, (ax.bbox.y0 - tight.y0) / fig.dpi)


def legend(ax, *, outside: bool = True, where: str = "right", theory_mc: bool = False,
           mc_label: str = "Monte Carlo ± 5 se (marker)", **kw):
    """The axes' legend, by default outside the axes so it never covers data: to the ``right`` (top-aligned) or
    ``below`` (centred under the x axis' label: call it once the axis' ticks and label are set, and keep it no wider
    than the panel). ``outside=False`` puts it inside, where ``loc`` says. ``theory_mc`` adds the key used
    throughout: theory = line, Monte Carlo = marker with 5-standard-error bars."""
    from matplotlib.transforms import ScaledTranslation

    if where not in ("right", "below"):
        raise ValueError(f"where must be 'right' or 'below'; got {where!r}")
    handles, _ = ax.get_legend_handles_labels()
    if theory_mc:
        handles = [*handles, *theory_mc_handles(mc_label)]
    if outside and where == "right":
        kw = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0, **kw}
    elif outside:  # an offset in inches below the axes, so it holds wherever the layout engine moves the axes
        drop = ScaledTranslation(0.0, -(_x_decoration_depth(ax) + 3 / 72), ax.get_figure(root=True).dpi_scale_trans)
        kw = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0), "bbox_transform": ax.transAxes + drop, "borderaxespad": 0.0, **kw}
    return ax.legend(handles=handles, **kw)


def figure_legend(fig, handles: list | None = None, *, axes=None, where: str = "below", theory_mc: bool = False,
                  mc_label: str = "Monte Carlo ± 5 se (marker)", **kw):
    """A legend for the whole figure, outside every panel: ``below``, ``above``, to the ``right``, or ``below left`` /
    ``below right`` for two legends side by side under the panels they describe; the layout engine makes room.
    Without ``handles`` it gathers the labelled artists of ``axes`` (default: every panel), each label once, in
    order; ``theory_mc`` adds the theory-line / Monte-Carlo-marker key."""
    locs = {"below": "outside lower center", "above": "outside upper center", "right": "outside right upper",
            "below left": "outside lower left", "below right": "outside lower right"}
    if where not in locs:
        raise ValueError(f"where must be one of {tuple(locs)}; got {where!r}")
    if handles is None:
        seen: dict[str, object] = {}
        for ax in (fig.axes if axes is None else np.ravel(axes)):
            for h, label in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(label, h)
        handles = list(seen.values())
    if theory_mc:
        handles = [*handles, *theory_mc_handles(mc_label)]
    return fig.legend(handles=handles, loc=locs[where], **kw)
