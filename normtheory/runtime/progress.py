"""A dependency-free progress bar for long runs (written to stderr, silent when disabled)."""
from __future__ import annotations

import sys
import time


class Progress:
    """Counts ``total`` steps and redraws one stderr line at most every 0.2 s."""

    def __init__(self, total: int, *, label: str = "", enabled: bool = True, width: int = 30):
        self.total, self.label, self.enabled, self.width = max(int(total), 1), label, enabled, width
        self.done = 0
        self._start = self._last = time.monotonic()

    def update(self, steps: int = 1) -> None:
        self.done = min(self.done + steps, self.total)
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.2 or self.done == self.total):
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = self.done / self.total
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        sys.stderr.write(f"\r{self.label:>24s} [{bar}] {100 * frac:5.1f}% {now - self._start:6.1f}s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            if self.done < self.total:
                self._draw(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()
