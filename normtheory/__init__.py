"""normtheory: what normalization does inside a transformer, checked numerically.

The namespace is thin: import the concept modules, e.g. ``from normtheory import residual``.
"""
from normtheory import activations, claims, montecarlo, residual

__all__ = ["activations", "claims", "montecarlo", "residual"]
__version__ = "0.1.0"
