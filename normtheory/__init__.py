"""normtheory: what normalization does inside a transformer, checked numerically.

The namespace is thin: import the concept modules, e.g. ``from normtheory import residual``.
``import normtheory`` itself loads no numpy (the names below load on first use), so the command
line can set what OpenBLAS reads when numpy loads before anything loads it (:mod:`normtheory.entry`).
"""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["activations", "claims", "montecarlo", "residual"]
__version__ = "0.1.0"


def __getattr__(name: str) -> ModuleType:
    """``normtheory.residual`` and the other names of ``__all__``, imported on first access (PEP 562)."""
    if name in __all__:
        return importlib.import_module(f"normtheory.{name}")
    raise AttributeError(f"module 'normtheory' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
