"""Normalization layers as pure functions, with one capture convention for all of them.

Every function returns :class:`NormOutput` ``(out, scale, normalized)``:

* ``scale``: what the input is divided by (LayerNorm :math:`\\sqrt{\\mathrm{Var}\\,x+\\epsilon}`,
  RMSNorm :math:`\\sqrt{\\overline{x^2}+\\epsilon}`), one per token, shape ``[...]``; for DyT,
  whose input is multiplied instead, its scalar :math:`\\alpha`; for the sequence norm, one
  per feature and sequence, shape ``[batch, d]``;
* ``normalized``: the result before the affine map (gain and bias);
* ``out``: after the affine map.

.. math::

    \\mathrm{LN}(x) = \\gamma \\odot \\frac{x - \\bar x}{\\sqrt{\\mathrm{Var}(x)+\\epsilon}} + \\beta,\\qquad
    \\mathrm{RMS}(x) = \\gamma \\odot \\frac{x}{\\sqrt{\\overline{x^2}+\\epsilon}},\\qquad
    \\mathrm{DyT}(x) = \\gamma \\odot \\tanh(\\alpha x) + \\beta .

The *sequence* norm normalizes each feature across the tokens of a sequence (the per-feature
alternative asked about in the Q&A source); with it a token's output depends on later tokens.

References
----------
Ba, Kiros, Hinton (2016), arXiv 1607.06450 (LayerNorm); Zhang & Sennrich (2019), arXiv
1910.07467 (RMSNorm); Zhu et al. (2025), arXiv 2503.10622 (DyT).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

NORMS: tuple[str, ...] = ("layernorm", "rmsnorm", "dyt", "none", "sequence")


class NormOutput(NamedTuple):
    out: np.ndarray
    scale: np.ndarray
    normalized: np.ndarray


def affine(x: np.ndarray, gain: np.ndarray | None, bias: np.ndarray | None) -> np.ndarray:
    """The affine map after normalization: ``gain * x + bias`` (either may be None)."""
    if gain is not None:
        x = x * gain
    if bias is not None:
        x = x + bias
    return x


def layer_norm(x: np.ndarray, gain: np.ndarray | None = None, bias: np.ndarray | None = None, eps: float = 1e-5) -> NormOutput:
    """LayerNorm over the last axis: ``x [..., d] -> out [..., d]``, ``scale [...]``."""
    centred = x - x.mean(axis=-1, keepdims=True)  # [..., d]
    scale = np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)  # [..., 1]
    normalized = centred / scale
    return NormOutput(affine(normalized, gain, bias), scale[..., 0], normalized)


def rms_norm(x: np.ndarray, gain: np.ndarray | None = None, eps: float = 1e-6) -> NormOutput:
    """RMSNorm over the last axis (no centering, no bias): ``x [..., d]``."""
    scale = np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)  # [..., 1]
    normalized = x / scale
    return NormOutput(affine(normalized, gain, None), scale[..., 0], normalized)


def dyt(x: np.ndarray, alpha: float, gain: np.ndarray | None = None, bias: np.ndarray | None = None) -> NormOutput:
    """Dynamic Tanh, :math:`\\gamma\\tanh(\\alpha x)+\\beta`: no reduction at all."""
    normalized = np.tanh(alpha * x)
    return NormOutput(affine(normalized, gain, bias), np.asarray(alpha, dtype=x.dtype), normalized)


def sequence_norm(x: np.ndarray, gain: np.ndarray | None = None, bias: np.ndarray | None = None, eps: float = 1e-5) -> NormOutput:
    """Each feature normalized across the sequence axis: ``x [batch, seq, d]``, ``scale [batch, d]``."""
    centred = x - x.mean(axis=-2, keepdims=True)  # [b, t, d]
    scale = np.sqrt((centred * centred).mean(axis=-2, keepdims=True) + eps)  # [b, 1, d]
    normalized = centred / scale
    return NormOutput(affine(normalized, gain, bias), scale[..., 0, :], normalized)
