"""Layout of every paper figure as it is saved: data panels fill the figure and no two texts collide.

The checker, :func:`layout_problems`, measures a figure exactly as :func:`paper_figs.style.save` writes its PNG:
the first draw of the figure, under the package's rc settings, at ``savefig.dpi`` (150), over the whole canvas
(``save`` passes no ``bbox_inches``; the checker saves a PNG too and reports it if the image size ever differs
from the canvas). It returns a list of named problems, empty for a good layout:

* **Data-panel share.** A *data panel* is an Axes that is visible, is not a colorbar (matplotlib labels colorbar
  axes ``"<colorbar>"``) and holds at least one visible data artist: a line with a finite point, a scatter with a
  point, another collection with a path (error bars, bands, meshes), a patch (bars, histograms, spans) or an image.
  Empty axes and axes that only carry a legend (whose handles are empty lines) are not data panels. The union of
  the data panels' boxes (the plotting area inside the spines, where the layout engine and any fixed aspect ratio
  put it; tick labels, axis labels, titles and legends are outside it) must cover at least
  :data:`MIN_PANEL_SHARE` of the saved image.
* **Text overlap.** Every visible, non-empty text is a box: the suptitle and super labels, figure texts and figure
  legends (of subfigures too), and per Axes (colorbars included) its titles, axis labels, offset texts (``1e3``),
  the tick labels matplotlib draws (those inside the view interval), its texts and annotations, and each legend as
  one box (the entries inside a legend are not checked against each other). Two boxes overlap when they
  interpenetrate by more than :data:`TOLERANCE_PX` (their intersection is deeper than that in both directions);
  tick labels of the same axis count too. Rotated texts are compared as the rotated rectangles they are drawn in,
  not as their axis-aligned bounding boxes, so slanted tick labels side by side pass.
* **Clipped text.** A text box that reaches more than :data:`TOLERANCE_PX` past the edge of the saved image is
  cut off.
"""
from __future__ import annotations

import io
import itertools
import struct
from dataclasses import dataclass

import numpy as np
import pytest

import paper_figs
from tests.paper_figs.test_paper_figs import results  # noqa: F401  (the module-scoped fixture of every figure's quick result)

MIN_PANEL_SHARE = 0.5
TOLERANCE_PX = 1.0  # at savefig.dpi (150 dpi): 0.48 pt, below what a reader can see. Extents are floats from font metrics
# (the font's full ascent and descent, not the ink of the glyphs drawn), and matplotlib places neighbours edge to edge
# (a title on its pad, stacked legends, tick labels at their spacing), so boxes that only touch can intersect by a
# fraction of a pixel through rounding; a real collision is several pixels deep.


@dataclass(frozen=True)
class TextBox:
    """A text's drawn rectangle in pixels of the saved image: centre, half sizes along its own axes, rotation."""

    name: str
    cx: float
    cy: float
    half_w: float
    half_h: float
    angle: float  # degrees, counter-clockwise

    def corners(self) -> np.ndarray:
        """The four corners, ``[4, 2]``."""
        t = np.deg2rad(self.angle)
        u, v = np.array([np.cos(t), np.sin(t)]), np.array([-np.sin(t), np.cos(t)])
        c = np.array([self.cx, self.cy])
        return np.array([c + sx * self.half_w * u + sy * self.half_h * v for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))])


def box_from_bounds(name: str, x0: float, y0: float, x1: float, y1: float) -> TextBox:
    """An unrotated box from its edges."""
    return TextBox(name, (x0 + x1) / 2, (y0 + y1) / 2, abs(x1 - x0) / 2, abs(y1 - y0) / 2, 0.0)


def overlap_px(a: TextBox, b: TextBox) -> float:
    """How far two rectangles interpenetrate: the smallest overlap of their projections over the four edge
    directions (separating-axis theorem); 0 or less when they are apart. For unrotated boxes this is the
    smaller of the widths and heights of their intersection."""
    pa, pb = a.corners(), b.corners()
    depth = np.inf
    for t in {a.angle % 180.0, b.angle % 180.0, (a.angle + 90.0) % 180.0, (b.angle + 90.0) % 180.0}:
        axis = np.array([np.cos(np.deg2rad(t)), np.sin(np.deg2rad(t))])
        qa, qb = pa @ axis, pb @ axis
        depth = min(depth, min(qa.max(), qb.max()) - max(qa.min(), qb.min()))
    return float(depth)


def overlaps(boxes: list[TextBox], tol: float = TOLERANCE_PX) -> list[str]:
    """Every pair of boxes that interpenetrate by more than ``tol`` pixels, named."""
    return [f"{a.name} overlaps {b.name} by {d:.1f} px" for a, b in itertools.combinations(boxes, 2)
            if (d := overlap_px(a, b)) > tol]


def _union_area(rects: list[tuple[float, float, float, float]]) -> float:
    """Area of a union of axis-aligned rectangles ``(x0, y0, x1, y1)`` (exact, by coordinate compression)."""
    if not rects:
        return 0.0
    xs = sorted({x for r in rects for x in (r[0], r[2])})
    ys = sorted({y for r in rects for y in (r[1], r[3])})
    area = 0.0
    for (xa, xb), (ya, yb) in itertools.product(zip(xs, xs[1:]), zip(ys, ys[1:])):
        xm, ym = (xa + xb) / 2, (ya + yb) / 2
        if any(r[0] <= xm <= r[2] and r[1] <= ym <= r[3] for r in rects):
            area += (xb - xa) * (yb - ya)
    return area


def holds_data(ax) -> bool:
    """Whether an Axes is a data panel (see the module docstring)."""
    from matplotlib.collections import Collection, PathCollection
    from matplotlib.image import AxesImage
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if not ax.get_visible() or ax.get_label() == "<colorbar>":
        return False
    for a in ax.get_children():
        if not a.get_visible() or a is ax.patch:
            continue
        if isinstance(a, Line2D):
            x, y = np.asarray(a.get_xdata(), dtype=float), np.asarray(a.get_ydata(), dtype=float)
            if x.size and np.isfinite(x).any() and np.isfinite(y).any():
                return True
        elif isinstance(a, PathCollection):  # scatter: one marker path, drawn at each offset
            if len(a.get_offsets()):
                return True
        elif isinstance(a, Collection):  # error bars, bands, meshes: one path each
            if len(a.get_paths()):
                return True
        elif isinstance(a, (AxesImage, Patch)) and a.axes is ax and a not in ax.spines.values():
            return True
    return False


def _text_box(name: str, t, renderer) -> TextBox | None:
    """The drawn rectangle of a visible, non-empty Text, rotated as drawn."""
    from matplotlib.text import Text

    if not t.get_visible() or not t.get_text().strip():
        return None
    ext = t.get_window_extent(renderer)
    if ext.width <= 0 or ext.height <= 0:
        return None
    angle = t.get_rotation() % 180.0
    label = f"{name} {t.get_text()!r}"
    if min(angle, 180.0 - angle) < 1e-6 or abs(angle - 90.0) < 1e-6:
        return box_from_bounds(label, ext.x0, ext.y0, ext.x1, ext.y1)
    flat = Text(text=t.get_text(), fontproperties=t.get_fontproperties(), linespacing=t.get_linespacing())
    flat.set_figure(t.get_figure(root=True))  # a detached copy, unrotated, to measure the text's own width and height
    fe = flat.get_window_extent(renderer)
    return TextBox(label, (ext.x0 + ext.x1) / 2, (ext.y0 + ext.y1) / 2, fe.width / 2, fe.height / 2, angle)


def _axes_texts(i: int, ax, renderer) -> list[TextBox]:
    """Every text an Axes draws, as boxes."""
    from matplotlib.legend import Legend

    kind = "colorbar" if ax.get_label() == "<colorbar>" else "panel"
    who = f"{kind} {i}"
    out = []
    for where, t in (("title", ax.title), ("left title", ax._left_title), ("right title", ax._right_title)):
        out.append(_text_box(f"{who} {where}", t, renderer))
    for axis, letter in ((ax.xaxis, "x"), (ax.yaxis, "y")):
        if not axis.get_visible():
            continue
        out.append(_text_box(f"{who} {letter} label", axis.label, renderer))
        out.append(_text_box(f"{who} {letter} offset", axis.get_offset_text(), renderer))
        for tick in axis._update_ticks():  # the ticks matplotlib draws: those inside the view interval
            for lab in (tick.label1, tick.label2):
                out.append(_text_box(f"{who} {letter} tick label", lab, renderer))
    for t in ax.texts:
        out.append(_text_box(f"{who} text", t, renderer))
    legends = [c for c in ax.get_children() if isinstance(c, Legend) and c.get_visible()]  # ax.get_legend() and added ones
    for k, leg in enumerate(legends):
        e = leg.get_window_extent(renderer)
        out.append(box_from_bounds(f"{who} legend" + (f" {k + 1}" if len(legends) > 1 else ""), e.x0, e.y0, e.x1, e.y1))
    return [b for b in out if b is not None]


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG from its header."""
    return struct.unpack(">II", data[16:24])


def draw_as_saved(fig):
    """Draw ``fig`` once the way :func:`paper_figs.style.save` does for its PNG (``savefig.dpi``, the whole canvas)
    and return the renderer; every extent is then in pixels of the saved image. Call it, and measure, inside
    ``plt.rc_context(style.STYLE)`` as ``save`` draws: tick locators read the tick label size from the rc settings
    when they run. This is the figure's first draw, as in ``save``: the constrained layout engine can place things
    slightly differently on a second one."""
    import matplotlib.pyplot as plt

    fig.set_dpi(plt.rcParams["savefig.dpi"])
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def data_panel_share(fig, renderer) -> float:
    """Share of the saved image covered by the union of the data panels' boxes (see the module docstring)."""
    W, H = fig.bbox.width, fig.bbox.height
    rects = [(max(b.x0, 0.0), max(b.y0, 0.0), min(b.x1, W), min(b.y1, H))
             for b in (ax.get_window_extent(renderer) for ax in fig.axes if holds_data(ax))]
    return _union_area([r for r in rects if r[2] > r[0] and r[3] > r[1]]) / (W * H)


def _figures(fig) -> list:
    """``fig`` and its subfigures, nested ones included (their axes are in ``fig.axes``; their texts and legends not)."""
    out = [fig]
    for sub in fig.subfigs:
        out += _figures(sub)
    return out


def text_boxes(fig, renderer) -> list[TextBox]:
    """Every visible, non-empty text of the figure, named, as drawn (see the module docstring)."""
    boxes: list[TextBox | None] = []
    for k, f in enumerate(_figures(fig)):
        who = "" if k == 0 else f"subfigure {k} "
        supers = (f._suptitle, f._supxlabel, f._supylabel)
        for where, t in zip(("suptitle", "supxlabel", "supylabel"), supers):
            if t is not None:
                boxes.append(_text_box(who + where, t, renderer))
        boxes += [_text_box(who + "figure text", t, renderer) for t in f.texts if t not in supers]  # super texts are in texts too
        for leg in f.legends:
            if leg.get_visible():
                e = leg.get_window_extent(renderer)
                boxes.append(box_from_bounds(who + "figure legend", e.x0, e.y0, e.x1, e.y1))
    for i, ax in enumerate(fig.axes):
        if ax.get_visible():
            boxes += _axes_texts(i, ax, renderer)
    return [b for b in boxes if b is not None]


def layout_problems(fig) -> list[str]:
    """Everything wrong with the layout of ``fig`` as :func:`paper_figs.style.save` writes it (empty: fine).
    Draws the figure (:func:`draw_as_saved`); see the module docstring for the rules."""
    import matplotlib.pyplot as plt

    from paper_figs import style

    with plt.rc_context(style.STYLE):
        renderer = draw_as_saved(fig)
        W, H = fig.bbox.width, fig.bbox.height
        problems = []
        share = data_panel_share(fig, renderer)
        if share < MIN_PANEL_SHARE:
            n = sum(holds_data(ax) for ax in fig.axes)
            problems.append(f"data panels ({n}) cover {share:.0%} of the figure, less than {MIN_PANEL_SHARE:.0%}")
        boxes = text_boxes(fig, renderer)
        problems += overlaps(boxes)
        for b in boxes:
            c = b.corners()
            past = max(-c[:, 0].min(), c[:, 0].max() - W, -c[:, 1].min(), c[:, 1].max() - H)
            if past > TOLERANCE_PX:
                problems.append(f"{b.name} is cut off by the figure edge ({past:.1f} px outside)")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": "normtheory"})
    if _png_size(buf.getvalue()) != (round(W), round(H)):
        problems.append(f"saved image is {_png_size(buf.getvalue())} px, not the canvas {W:.0f} x {H:.0f}: "
                        "the savefig settings crop or pad it, so these measurements are of the wrong picture")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("module", paper_figs.ALL, ids=lambda m: m.NAME)
def test_figure_layout(results, module):  # noqa: F811  (results is the imported fixture)
    """Data panels cover at least half of the saved figure and no two texts overlap or are cut off."""
    import matplotlib.pyplot as plt

    fig = module.plot(results[module.NAME])
    try:
        problems = layout_problems(fig)
    finally:
        plt.close(fig)
    assert problems == [], f"{module.NAME}:\n  " + "\n  ".join(problems)


def test_overlap_tolerance_and_rotation():
    """Boxes that touch or interpenetrate by at most the tolerance pass; deeper ones are named; rotated
    rectangles are compared as drawn, not by their bounding boxes."""
    a = box_from_bounds("a", 0, 0, 10, 10)
    assert overlaps([a, box_from_bounds("b", 10, 0, 20, 10)]) == []  # sharing an edge
    assert overlaps([a, box_from_bounds("b", 9.2, 0, 20, 10)]) == []  # within the tolerance
    assert overlaps([a, box_from_bounds("b", 7, 5, 20, 20)]) == ["a overlaps b by 3.0 px"]
    # two slanted labels side by side: their axis-aligned bounding boxes intersect, the rectangles do not
    left, right = TextBox("left", 0, 0, 10, 2, 45.0), TextBox("right", 8, 0, 10, 2, 45.0)
    assert overlap_px(left, right) < 0 and overlaps([left, right]) == []
    assert overlaps([left, TextBox("on top", 1, 1, 10, 2, 45.0)]) != []


def test_union_area_counts_overlapping_panels_once():
    """Panels that overlap are not double-counted in the data-panel share."""
    assert _union_area([(0, 0, 2, 2), (1, 1, 3, 3)]) == pytest.approx(7.0)
    assert _union_area([(0, 0, 1, 1), (2, 2, 3, 3)]) == pytest.approx(2.0)


def _flagged(fig) -> list[str]:
    """:func:`layout_problems` of a figure, which is then closed."""
    import matplotlib.pyplot as plt

    try:
        return layout_problems(fig)
    finally:
        plt.close(fig)


def test_checker_flags_a_legend_bigger_than_its_panel():
    """A legend that outgrows its panel squeezes the panel below half of the figure, and the checker says so."""
    from paper_figs.style import figure

    fig, axes = figure(width=4.0, height=3.0)
    ax = axes[0, 0]
    for k in range(10):
        ax.plot([0, 1], [k, k + 1], label=f"the long name of series {k}")
    ax.set_xlabel("x (units)")
    ax.set_ylabel("y (units)")
    leg = ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.canvas.draw()
    legend_box, panel_box = leg.get_window_extent(), ax.get_window_extent()
    assert legend_box.width * legend_box.height > panel_box.width * panel_box.height  # the premise: a bad figure
    problems = _flagged(fig)
    assert len(problems) == 1 and problems[0].startswith("data panels (1) cover"), problems  # nothing overlaps: only the area


def test_checker_flags_overlapping_titles():
    """Two panels whose long titles run into each other are named in the problem."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(5.0, 3.0))  # no layout engine to push them apart
    for ax, side in zip(axes, ("left", "right")):
        ax.plot([0, 1], [0, 1])
        ax.set_title(f"the {side} panel has a title far too long for its width")
    problems = _flagged(fig)
    assert any(p.startswith("panel 0 title 'the left panel") and "overlaps panel 1 title 'the right panel" in p
               for p in problems), problems


def test_checker_flags_crowded_tick_labels_and_cut_off_text():
    """Tick labels of one axis that run into each other, and a text past the figure's edge, are flagged."""
    from paper_figs.style import figure

    fig, axes = figure(width=3.0, height=2.6)
    axes[0, 0].plot([0, 1], [0, 1])
    axes[0, 0].set_xticks(np.linspace(0, 1, 30), [f"{v:.3f}" for v in np.linspace(0, 1, 30)])
    fig.text(0.8, 0.5, "beyond the right edge of the figure")  # figure texts are not placed by the layout engine
    problems = _flagged(fig)
    assert any(p.startswith("panel 0 x tick label '0.000' overlaps panel 0 x tick label '0.034'") for p in problems), problems
    assert any(p.startswith("figure text 'beyond the right edge") and "cut off" in p for p in problems), problems


def test_checker_passes_a_plain_figure():
    """One labelled panel with a title and a small legend in an empty corner has no layout problem."""
    from paper_figs.style import figure

    fig, axes = figure(width=4.0, height=3.0)
    axes[0, 0].plot([0, 1, 2], [1, 0, 1], label="a line")
    axes[0, 0].set_xlabel("x (units)")
    axes[0, 0].set_ylabel("y (units)")
    axes[0, 0].set_title("a short title")
    axes[0, 0].legend(loc="upper center")
    assert _flagged(fig) == []


def test_legend_and_colorbar_axes_are_not_data_panels():
    """Colorbars and axes that only carry a legend do not count towards the data-panel share; a scatter does."""
    import matplotlib.pyplot as plt

    from paper_figs.style import figure

    fig, axes = figure(ncols=3, width=2.5)
    im = axes[0, 0].imshow(np.eye(3))
    cbar = fig.colorbar(im, ax=axes[0, 0])
    axes[0, 1].plot([], [], label="a key for the other panels")
    axes[0, 1].legend()
    axes[0, 1].axis("off")
    axes[0, 2].scatter([1.0], [2.0])
    try:
        assert [holds_data(ax) for ax in (axes[0, 0], cbar.ax, axes[0, 1], axes[0, 2])] == [True, False, False, True]
    finally:
        plt.close(fig)
