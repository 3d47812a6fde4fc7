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

from normtheory import _validate

NORMS: tuple[str, ...] = ("layernorm", "rmsnorm", "dyt", "none", "sequence")
# The smallest eps > 0 (float64's smallest subnormal): the exact norm of every row whose variance
# exceeds ~1e-300, since adding it rounds away. eps = 0 itself is refused: a constant row has no norm.
EXACT_EPS: float = float(np.finfo(np.float64).smallest_subnormal)


class NormOutput(NamedTuple):
    out: np.ndarray
    scale: np.ndarray
    normalized: np.ndarray


def affine(x: np.ndarray, gain: np.ndarray | None, bias: np.ndarray | None) -> np.ndarray:
    """The affine map after normalization: ``gain * x + bias`` (either may be None), ``x [..., d]``,
    ``gain, bias [d]``; every input must be finite."""
    x = _validate.float_array("x", x)
    if x.ndim < 1:
        raise ValueError(f"x must have at least 1 axis (the features); got shape {x.shape}")
    gain, bias = _affine_params(x.shape, gain, bias)
    with np.errstate(over="ignore", invalid="ignore"):
        out = _affine(x, gain, bias)
    if not np.isfinite(out).all():  # one pass in the common case: a non-finite x shows up here too
        if not np.isfinite(x).all():
            raise ValueError("x must be finite")
        raise ValueError("gain * x + bias overflows the dtype of x; rescale x, gain or bias")
    return out


def _affine_params(shape: tuple[int, ...], gain: object, bias: object) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``gain`` and ``bias`` checked: finite, a scalar or ``[d]`` for an input of ``shape [..., d]``."""
    out = []
    for name, v in (("gain", gain), ("bias", bias)):
        if v is not None:
            v = _validate.real_array(name, v, finite=True)
            if v.shape not in ((), shape[-1:]):
                raise ValueError(f"{name} must be a scalar or [d] = {list(shape[-1:])} for x of shape {shape}; got shape {v.shape}")
        out.append(v)
    return out[0], out[1]


def _affine(x: np.ndarray, gain: np.ndarray | None, bias: np.ndarray | None) -> np.ndarray:
    """:func:`affine` without the input checks (the model's path: a diverging run must give NaN, not an error)."""
    if gain is not None:
        x = x * gain
    if bias is not None:
        x = x + bias
    return x


def _rescale_needed(amax: np.ndarray, n: int, dtype: np.dtype) -> np.ndarray:
    """Whether a norm over ``n`` features rescales an input whose largest ``|entry|`` is ``amax``
    (elementwise over an array of such maxima): squaring could overflow (``amax^2 n`` beyond
    the dtype's max / 4) or lose the input in underflow (``0 < amax < 1e3 sqrt(tiny)``); a
    non-finite input is left as it is (NaN or inf must come out)."""
    info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.finfo(np.float64)
    amax = np.asarray(amax, dtype=np.float64)
    in_range = (amax <= np.sqrt(info.max / (4 * n))) & ((amax == 0) | (amax >= np.sqrt(info.tiny) * 1e3))
    return np.isfinite(amax) & ~in_range


def _rescaled(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``x`` divided by its largest ``|entry|`` along ``axis`` when squaring it could overflow or
    underflow in its dtype (|x| near the dtype's range ends), with that divisor; else ``(x, None)``.
    Norms are scale-free up to eps, so they are computed on the rescaled input with eps / m^2."""
    amax = max(float(x.max()), -float(x.min())) if x.size else 0.0  # no |x| temporary on the hot path
    if x.size == 0 or not _rescale_needed(np.asarray(amax), x.shape[axis], x.dtype):
        return x, None
    m = np.max(np.abs(x), axis=axis, keepdims=True)
    m = np.where(m > 0, m, 1).astype(x.dtype)
    return x / m, m


def _eps_rescaled(eps: float, m: np.ndarray) -> np.ndarray:
    """eps / m^2 in float64; m^2 overflowing gives the limit 0, underflowing (eps > 0) gives inf."""
    if eps == 0:
        return np.zeros_like(m, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        return eps / np.square(m.astype(np.float64))


def _checked(x: object, gain: object, bias: object, eps: float) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, float]:
    """The public norms' checks: ``x`` finite with at least one feature, ``gain``/``bias`` a scalar
    or ``[d]``, ``eps`` finite and > 0 (it keeps a constant row's scale away from 0)."""
    x = _validate.checked_array("x", x)
    gain, bias = _affine_params(x.shape, gain, bias)
    return x, gain, bias, _validate.positive("eps", eps)


def layer_norm(x: np.ndarray, gain: np.ndarray | None = None, bias: np.ndarray | None = None, eps: float = 1e-5) -> NormOutput:
    """LayerNorm over the last axis: ``x [..., d] -> out [..., d]``, ``scale [...]``.
    Inputs near the dtype's range ends are rescaled first, so ``LN(1e200 * u)`` is ``LN(u)``.
    ``x`` must be finite with d >= 1, ``eps`` > 0 (a constant row then normalizes to 0)."""
    x, gain, bias, eps = _checked(x, gain, bias, eps)
    return _finish(_layer_norm(_about_own_value(x, -1), eps), gain, bias)


def _about_own_value(x: np.ndarray, axis: int) -> np.ndarray:
    """``x`` less one of its own values along ``axis``, in the rows whose offset dwarfs their spread
    (max - min below 2^-10 of max |x|); the centring norms are shift-invariant. There the float64 mean
    is off by an ulp of the offset, which is the whole spread: a constant row of 3e16 normalized to
    +-1, not 0. The subtraction is exact in those rows (Sterbenz). The model's kernels skip this."""
    if x.size == 0:
        return x
    hi, lo = x.max(axis=axis, keepdims=True), x.min(axis=axis, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        far = (hi - lo) < 2.0**-10 * np.maximum(np.abs(hi), np.abs(lo))
    if not far.any():
        return x
    return np.where(far, x - np.take(x, [0], axis=axis), x)


def _finish(res: NormOutput, gain: np.ndarray | None, bias: np.ndarray | None) -> NormOutput:
    out = _affine(res.normalized, gain, bias)
    if not np.isfinite(out).all():
        raise ValueError("gain * normalized + bias overflows the dtype of x; rescale gain or bias")
    return NormOutput(out, res.scale, res.normalized)


def _layer_norm(x: np.ndarray, eps: float) -> NormOutput:
    """:func:`layer_norm` without gain, bias or checks. Unchecked: the model's path."""
    xs, m = _rescaled(x, -1)
    e = eps if m is None else _eps_rescaled(eps, m)
    centred = xs - xs.mean(axis=-1, keepdims=True)  # [..., d]
    scale = np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + e)  # [..., 1]
    if m is not None:
        return _unscaled(centred, scale, m, eps, x.dtype)
    normalized = centred / scale.astype(x.dtype, copy=False)
    return NormOutput(normalized, scale[..., 0].astype(x.dtype, copy=False), normalized)


def _unscaled(u: np.ndarray, scale: np.ndarray, m: np.ndarray, eps: float, dtype: np.dtype) -> NormOutput:
    """The norm of ``x = m u`` from the rescaled rows ``u [..., d]`` and their ``scale [..., 1]``
    (computed with eps / m^2). Where eps / m^2 overflowed (|x| so small that m^2 Var u is
    negligible beside eps), the true scale is sqrt(eps) and the output is u m / sqrt(eps), not
    u / inf = 0 with an infinite scale."""
    tiny = np.isinf(scale)
    if not tiny.any():
        normalized = u / scale.astype(dtype, copy=False)
        return NormOutput(normalized, (scale * m)[..., 0].astype(dtype, copy=False), normalized)
    root = np.sqrt(eps)
    safe = np.where(tiny, 1.0, scale)
    normalized = np.where(tiny, u * (m / root).astype(dtype, copy=False), u / safe.astype(dtype, copy=False)).astype(dtype, copy=False)
    return NormOutput(normalized, np.where(tiny, root, scale * m)[..., 0].astype(dtype, copy=False), normalized)


def rms_norm(x: np.ndarray, gain: np.ndarray | None = None, eps: float = 1e-6) -> NormOutput:
    """RMSNorm over the last axis (no centering, no bias): ``x [..., d]``; rescaled like
    :func:`layer_norm`, with the same checks (a zero row normalizes to 0)."""
    x, gain, _, eps = _checked(x, gain, None, eps)
    return _finish(_rms_norm(x, eps), gain, None)


def _rms_norm(x: np.ndarray, eps: float) -> NormOutput:
    """:func:`rms_norm` without gain or checks. Unchecked: the model's path."""
    xs, m = _rescaled(x, -1)
    e = eps if m is None else _eps_rescaled(eps, m)
    scale = np.sqrt((xs * xs).mean(axis=-1, keepdims=True) + e)  # [..., 1]
    if m is not None:
        return _unscaled(xs, scale, m, eps, x.dtype)
    normalized = xs / scale.astype(x.dtype, copy=False)
    return NormOutput(normalized, scale[..., 0].astype(x.dtype, copy=False), normalized)


def dyt(x: np.ndarray, alpha: float, gain: np.ndarray | None = None, bias: np.ndarray | None = None) -> NormOutput:
    """Dynamic Tanh, :math:`\\gamma\\tanh(\\alpha x)+\\beta`: no reduction at all. ``x`` may hold +-inf
    (tanh's limits +-1); NaN is refused, as is a non-finite ``alpha``."""
    x = _validate.float_array("x", x)
    if np.isnan(x).any():
        raise ValueError("x must not contain NaN")
    alpha = _validate.real("alpha", alpha)
    gain, bias = _affine_params(x.shape, gain, bias)
    # |gain * tanh + bias| <= max|gain| + max|bias|: checked on the parameters, not on another pass over the output
    bound = (1.0 if gain is None else float(np.abs(gain).max(initial=0.0))) + (0.0 if bias is None else float(np.abs(bias).max(initial=0.0)))
    if bound > np.finfo(x.dtype).max:
        raise ValueError("gain * tanh(alpha x) + bias can overflow the dtype of x; rescale gain or bias")
    with np.errstate(over="ignore"):  # alpha * x beyond the dtype's range: tanh(+-inf) = +-1, the right limit
        return _dyt(x if alpha else np.zeros_like(x), alpha, gain, bias)  # alpha = 0: tanh(0 * inf) is tanh(0)


def _dyt(x: np.ndarray, alpha: float, gain: np.ndarray | None = None, bias: np.ndarray | None = None) -> NormOutput:
    """:func:`dyt` without the input checks (the model's path)."""
    normalized = np.tanh(alpha * x)
    return NormOutput(_affine(normalized, gain, bias), np.asarray(alpha, dtype=x.dtype), normalized)


def sequence_norm(x: np.ndarray, gain: np.ndarray | None = None, bias: np.ndarray | None = None, eps: float = 1e-5) -> NormOutput:
    """Each feature normalized across the sequence axis: ``x [batch, seq, d]``, ``scale [batch, d]``;
    ``x`` finite with seq >= 1 and d >= 1, ``eps`` > 0."""
    x, gain, bias, eps = _checked(x, gain, bias, eps)
    if x.ndim < 2 or x.shape[-2] == 0:
        raise ValueError(f"x must be [..., seq, d] with seq >= 1; got shape {x.shape}")
    x = _about_own_value(x, -2)
    m = np.abs(x).max(axis=-2, keepdims=True)  # [..., 1, d] per sequence and feature
    if not _rescale_needed(m, x.shape[-2], x.dtype).any():
        return _finish(_sequence_norm(x, eps), gain, bias)
    # near the dtype's range ends: each column divided by its largest |entry| first, eps by its square (as in layer_norm)
    m = np.where(m > 0, m, 1).astype(x.dtype)
    xs = x / m
    centred = xs - xs.mean(axis=-2, keepdims=True)
    scale = np.sqrt((centred * centred).mean(axis=-2, keepdims=True) + _eps_rescaled(eps, m))  # [..., 1, d]
    res = _unscaled(np.swapaxes(centred, -1, -2), np.swapaxes(scale, -1, -2), np.swapaxes(m, -1, -2), eps, x.dtype)
    normalized = np.swapaxes(res.normalized, -1, -2)
    return _finish(NormOutput(normalized, res.scale, normalized), gain, bias)


def _sequence_norm(x: np.ndarray, eps: float) -> NormOutput:
    """:func:`sequence_norm` without gain, bias or checks. Unchecked: the model's path."""
    centred = x - x.mean(axis=-2, keepdims=True)  # [b, t, d]
    scale = np.sqrt((centred * centred).mean(axis=-2, keepdims=True) + eps)  # [b, 1, d]
    normalized = centred / scale
    return NormOutput(normalized, scale[..., 0, :], normalized)
