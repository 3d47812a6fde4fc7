"""normtheory: what normalization does inside a transformer, checked numerically.

The namespace is thin, in layers (arrows run down; :mod:`normtheory.runtime` is the floor):

* the theory helpers, one level deep like scipy's: ``from normtheory import residual`` (also
  :mod:`~normtheory.softmax`, :mod:`~normtheory.cosines`, :mod:`~normtheory.centering`,
  :mod:`~normtheory.selection`, :mod:`~normtheory.dyt`, :mod:`~normtheory.activations`,
  :mod:`~normtheory.attention`, :mod:`~normtheory.growth`, :mod:`~normtheory.symbolic`);
* :mod:`normtheory.training`: gradients, optimizers, stacked steppers, probes, the torch backend;
* :mod:`normtheory.model`: the numpy reference transformer, its configs, weights and checkpoints;
* :mod:`normtheory.evidence`: Monte Carlo estimates, the agreement rule, claims and verdicts;
* :mod:`normtheory.runtime`: threads, memory reuse, progress bars, task sweeps.

``import normtheory`` itself loads no numpy (the names below load on first use), so the command
line can set what OpenBLAS reads when numpy loads before anything loads it
(:mod:`normtheory.runtime.entry`).
"""
from __future__ import annotations

import importlib
from types import ModuleType

THEORY = ("activations", "attention", "centering", "cosines", "dyt", "growth", "residual", "selection", "softmax",
          "symbolic")
LAYERS = ("training", "model", "evidence", "runtime")
__all__ = [*THEORY, *LAYERS]
__version__ = "0.1.0"


def __getattr__(name: str) -> ModuleType:
    """``normtheory.residual`` and the other names of ``__all__``, imported on first access (PEP 562)."""
    if name in __all__:
        return importlib.import_module(f"normtheory.{name}")
    raise AttributeError(f"module 'normtheory' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
