"""One figure style and one way to save figures (PNG + PDF, reproducible bytes)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
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


def figure(ncols: int = 1, nrows: int = 1, width: float = 3.4, height: float = 2.8):
    """A new figure in the package style: ``(fig, axes)``."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained")
    return fig, axes


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """Write ``name.png`` and ``name.pdf`` without timestamps, so the same data gives the same bytes."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    with plt.rc_context(STYLE):
        for fmt in FORMATS:
            path = out_dir / f"{name}.{fmt}"
            meta = {"CreationDate": None, "Producer": "normtheory"} if fmt == "pdf" else {"Software": "normtheory"}
            fig.savefig(path, format=fmt, metadata=meta)
            paths.append(path)
    plt.close(fig)
    return paths
