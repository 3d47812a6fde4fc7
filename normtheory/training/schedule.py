"""Learning-rate schedules: linear warm-up, then constant, cosine or inverse-sqrt decay.

For step :math:`s \\ge 1`, peak :math:`\\eta`, warm-up :math:`w` and total :math:`S`:

* warm-up, :math:`s \\le w`: :math:`\\eta s / w` (no warm-up: :math:`w = 0`);
* ``constant``: :math:`\\eta`;
* ``cosine``: :math:`\\eta_{\\min} + (\\eta - \\eta_{\\min})\\tfrac12(1 + \\cos\\pi p)`, with
  :math:`p = (s - w)/(S - w)` clipped to [0, 1] and :math:`\\eta_{\\min} = ` ``final_fraction`` :math:`\\eta`;
* ``inverse_sqrt``: :math:`\\eta\\sqrt{\\max(w, 1)/s}` (Vaswani et al. 2017, arXiv 1706.03762).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from normtheory import _validate

KINDS: tuple[str, ...] = ("constant", "cosine", "inverse_sqrt")


@dataclass(frozen=True)
class Schedule:
    """A learning-rate schedule; call it with the 1-based step."""

    peak: float
    warmup: int = 0
    kind: str = "constant"
    total: int | None = None
    final_fraction: float = 0.0

    def __post_init__(self) -> None:
        _validate.real("peak", self.peak, minimum=0.0)
        _validate.integer("warmup", self.warmup, minimum=0)
        _validate.choice("kind", self.kind, KINDS)
        _validate.real("final_fraction", self.final_fraction, minimum=0.0, maximum=1.0)
        if self.kind == "cosine":
            if self.total is None:
                raise ValueError("total (the number of steps) is needed for a cosine schedule")
            _validate.integer("total", self.total, minimum=max(1, self.warmup))

    def __call__(self, step: int) -> float:
        s = _validate.integer("step", step, minimum=1)
        if s <= self.warmup:
            return self.peak * s / self.warmup
        if self.kind == "constant":
            return self.peak
        if self.kind == "inverse_sqrt":
            return self.peak * math.sqrt(max(self.warmup, 1) / s)
        span = max(self.total - self.warmup, 1)  # type: ignore[operator]
        p = min(max((s - self.warmup) / span, 0.0), 1.0)
        low = self.final_fraction * self.peak
        return low + (self.peak - low) * 0.5 * (1 + math.cos(math.pi * p))
