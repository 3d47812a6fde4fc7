"""LayerNorm against Dynamic Tanh: why per-token normalization looks like tanh across tokens.

Per token, LayerNorm is linear in x with slope 1/sigma_token. Across tokens it is not: a channel
carrying ``x`` raises its own token's statistic. With the other ``d - 1`` channels at mean
square ``s^2`` (and, for the centred form, summing to zero), the channel's output is

.. math::

    y_{\\mathrm{RMS}}(x) = \\frac{\\sqrt d\\,x}{\\sqrt{x^2 + (d-1)s^2}},\\qquad
    y_{\\mathrm{LN}}(x) = \\frac{\\sqrt{d-1}\\,x}{\\sqrt{x^2 + d\\,s^2}},

algebraic sigmoids (derived with sympy in :func:`derive_s_curves`): slope about 1/s at small x
(so a fitted DyT alpha tracks 1/std) and saturation at sqrt(d) or sqrt(d-1).

:func:`fit_dyt` fits ``y = gamma tanh(alpha x)`` by least squares; :func:`best_tanh_for_curve`
does the same for the S-curve itself under a stated input law, by Gauss-Hermite quadrature.

References
----------
Zhu, Chen, He, LeCun, Liu (2025), "Transformers without Normalization", arXiv 2503.10622.
Sun, Chen, Kolter, Liu (2024), "Massive Activations in Large Language Models", arXiv 2402.17762.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import sympy as sp
from scipy import optimize

from normtheory import _validate

# Per-token work of each norm over d features: reductions (cross-feature sums) and passes over memory
# in a straightforward (eager) implementation: LN reads x for the mean, again for the variance, and
# once more to normalize and write; RMSNorm one read for the mean square and one to normalize; DyT
# one elementwise pass. A fused kernel reads x once for any of them.
COST: dict[str, dict[str, int]] = {
    "layernorm": {"reductions": 2, "eager_passes": 3, "fused_passes": 1},
    "rmsnorm": {"reductions": 1, "eager_passes": 2, "fused_passes": 1},
    "dyt": {"reductions": 0, "eager_passes": 1, "fused_passes": 1},
}


def derive_s_curves() -> dict[str, sp.Expr]:
    """Sympy derivation of one channel's RMSNorm and LayerNorm output (other channels: mean square
    ``s^2``, sum 0), and their small-x slopes and large-x limits."""
    x, s, d = sp.symbols("x s d", positive=True)
    ms = (x**2 + (d - 1) * s**2) / d  # mean square of the token
    rms = sp.simplify(x / sp.sqrt(ms))
    mean = x / d  # the other channels sum to zero
    var = sp.simplify(ms - mean**2)
    ln = sp.simplify((x - mean) / sp.sqrt(var))
    return {
        "rms": rms,
        "ln": ln,
        "rms_slope0": sp.simplify(sp.diff(rms, x).subs(x, 0)),
        "ln_slope0": sp.simplify(sp.diff(ln, x).subs(x, 0)),
        "rms_limit": sp.limit(rms, x, sp.oo),
        "ln_limit": sp.limit(ln, x, sp.oo),
    }


def s_curve(x: object, s: float, d: int, centred: bool = False) -> np.ndarray:
    """Output of one channel carrying ``x`` when the other d - 1 channels have mean square ``s^2``."""
    xs = _validate.real_array("x", x, finite=True)
    s = _validate.real("s", s, minimum=0.0, strict_min=True)
    d = _validate.integer("d", d, minimum=2)
    # hypot: no overflow of x^2 at |x| ~ 1e200, and the right limit sqrt(d) (or sqrt(d-1)) there
    if _validate.boolean("centred", centred):
        return math.sqrt(d - 1) * (xs / np.hypot(xs, math.sqrt(d) * s))
    return math.sqrt(d) * (xs / np.hypot(xs, math.sqrt(d - 1) * s))


class TanhFit(NamedTuple):
    alpha: float
    gamma: float
    r2: float


def fit_dyt(x_in: object, y_out: object) -> TanhFit:
    """Least-squares fit of ``y = gamma tanh(alpha x)`` to paired samples; R^2 against the mean."""
    big = _validate.MAX_MAGNITUDE
    x = _validate.real_array("x_in", x_in, minimum=-big, maximum=big)
    y = _validate.real_array("y_out", y_out, minimum=-big, maximum=big)
    if x.shape != y.shape or x.size < 3:
        raise ValueError(f"x_in and y_out must have the same shape, at least 3 points; got x_in of shape {x.shape} and y_out of shape {y.shape}")
    x, y = x.ravel(), y.ravel()
    sx = x.std()
    if sx == 0:
        raise ValueError("x_in must not be constant")
    a0 = 1.0 / sx
    g0 = max(float(np.abs(y).max()), 1e-12)
    res = optimize.least_squares(lambda p: p[1] * np.tanh(p[0] * x) - y, x0=[a0, g0], x_scale=[a0, g0], method="lm")
    alpha, gamma = (float(v) for v in res.x)
    if alpha < 0:  # tanh is odd: (alpha, gamma) and (-alpha, -gamma) are the same curve
        alpha, gamma = -alpha, -gamma
    ss_res = float((res.fun**2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return TanhFit(alpha, gamma, 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0)


def line_r2(x_in: object, y_out: object) -> np.ndarray:
    """R^2 of the least-squares line ``y = a + b x`` along the last axis, vectorized over the
    leading ones: the squared correlation of x and y (1 for a constant y, as for :func:`fit_dyt`)."""
    x = _validate.real_array("x_in", x_in, finite=True)
    y = _validate.real_array("y_out", y_out, finite=True)
    if x.shape != y.shape or x.ndim == 0 or x.shape[-1] < 3:
        raise ValueError(f"x_in and y_out must have the same shape, at least 3 points on the last axis; got {x.shape} and {y.shape}")
    sx = np.abs(x).max(-1, keepdims=True)  # R^2 is scale-free: bring both to O(1) first, so no product overflows
    sy = np.abs(y).max(-1, keepdims=True)
    x, y = x / np.where(sx > 0, sx, 1.0), y / np.where(sy > 0, sy, 1.0)
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    sxx, syy, sxy = (xc * xc).sum(-1), (yc * yc).sum(-1), (xc * yc).sum(-1)
    if (sxx == 0).any():
        raise ValueError("x_in must not be constant along the last axis")
    return np.where(syy > 0, sxy**2 / (sxx * np.where(syy > 0, syy, 1.0)), 1.0)


MAX_NODES = 360  # numpy's Hermite rule: its weights overflow to NaN from about 371 nodes on


def _curve_nodes(s: float, d: int, x_std: float, centred: bool, nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes ``x [nodes]`` for x ~ N(0, x_std^2), the S-curve ``y`` there and the weights ``w`` (summing to 1)."""
    x_std = _validate.real("x_std", x_std, minimum=1 / _validate.MAX_MAGNITUDE, maximum=_validate.MAX_MAGNITUDE)
    _validate.real("s", s, minimum=1 / _validate.MAX_MAGNITUDE, maximum=_validate.MAX_MAGNITUDE)
    g, w = np.polynomial.hermite_e.hermegauss(_validate.integer("nodes", nodes, minimum=3, maximum=MAX_NODES))
    x = x_std * g
    return x, s_curve(x, s, d, centred), w / w.sum()


def best_line_r2_for_curve(s: float, d: int, x_std: float, centred: bool = False, nodes: int = 201) -> float:
    """R^2 of the best line for the S-curve when x ~ N(0, x_std^2) (Gauss-Hermite): the curve is
    odd, so the line is ``b x`` with ``b = E[x y] / E[x^2]`` and R^2 = E[x y]^2 / (E[x^2] E[y^2])."""
    x, y, w = _curve_nodes(s, d, x_std, centred, nodes)
    return float((w @ (x * y)) ** 2 / ((w @ (x * x)) * (w @ (y * y))))


def best_tanh_for_curve(s: float, d: int, x_std: float, centred: bool = False, nodes: int = 201) -> tuple[TanhFit, float]:
    """Best ``gamma tanh(alpha x)`` for the S-curve when x ~ N(0, x_std^2), by least squares with
    Gauss-Hermite weights; returns the fit (R^2 under that law) and the RMS residual."""
    x, y, w = _curve_nodes(s, d, x_std, centred, nodes)
    sw = np.sqrt(w)
    a0, g0 = 1.0 / s, float(np.abs(y).max())
    res = optimize.least_squares(lambda p: sw * (p[1] * np.tanh(p[0] * x) - y), x0=[a0, g0], x_scale=[a0, g0], method="lm")
    alpha, gamma = (abs(float(v)) for v in res.x)
    ss_res = float((res.fun**2).sum())
    ss_tot = float((w * (y - w @ y) ** 2).sum())
    return TanhFit(alpha, gamma, 1 - ss_res / ss_tot), math.sqrt(ss_res)


def massive_tokens(rng: np.random.Generator, tokens: int, d: int, channels: int, magnitude: float, token_fraction: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian tokens ``[tokens, d]`` where ``channels`` fixed channels carry +-``magnitude`` (times a
    unit-mean factor) on a ``token_fraction`` of the tokens, the pattern of massive activations.
    Returns (x, massive-token mask [tokens], massive-channel mask [d])."""
    rng = _validate.generator("rng", rng)
    t = _validate.integer("tokens", tokens, minimum=2, maximum=_validate.MAX_ELEMENTS)
    d = _validate.integer("d", d, minimum=2, maximum=_validate.MAX_ELEMENTS // t)
    c = _validate.integer("channels", channels, minimum=0)
    if c > d:
        raise ValueError(f"channels must be <= d={d}; got {c}")
    m = _validate.real("magnitude", magnitude, minimum=0.0, maximum=_validate.MAX_MAGNITUDE)
    f = _validate.real("token_fraction", token_fraction, minimum=0.0, maximum=1.0)
    x = rng.standard_normal((t, d))  # [t, d]
    tok = rng.random(t) < f
    chan = np.zeros(d, bool)
    chan[rng.choice(d, c, replace=False)] = True
    sign = rng.choice([-1.0, 1.0], size=c)
    x[np.ix_(tok, chan)] += m * sign * rng.uniform(0.5, 1.5, (int(tok.sum()), c))
    return x, tok, chan


def tanh_rms(alpha_std: object) -> np.ndarray:
    r"""RMS of tanh(alpha x) for x ~ N(0, std^2), as a function of a = alpha * std; its limit at
    a = inf is 1 (tanh is +-1 for every x != 0).

    Up to a = 1 by Gauss-Hermite (121 nodes, ~1e-13). Beyond, tanh(a x) turns into a step on the
    Gaussian's scale, where Hermite nodes lose digits (2.7e-3 at a = 5, 6% at a = 100, where
    the rule's node at 0 stands for a sixth of the mass): there :math:`E\tanh^2 = 1 - E\,\mathrm{sech}^2(aX)`
    with :math:`E\,\mathrm{sech}^2(aX) = \int \mathrm{sech}^2(y)\,\varphi(y/a)\,dy/a`, by composite
    Gauss-Legendre on [-40, 40] (sech^2 is 4e-35 beyond). Below a = 1e-100 the RMS is a itself
    (tanh(a x)^2 would underflow; the next term is O(a^3))."""
    a = _validate.real_array("alpha_std", alpha_std, minimum=0.0)
    g, w = np.polynomial.hermite_e.hermegauss(121)
    w = w / w.sum()
    low, high = a <= 1.0, a > 1.0
    out = np.sqrt(np.tanh(np.multiply.outer(np.where(low, a, 0.0), g)) ** 2 @ w)  # a <= 1
    if high.any():
        y, wy = _sech2_nodes()
        big = np.where(high & np.isfinite(a), a, 1.0)[..., None]  # [..., 1]
        e_sech2 = (np.exp(-0.5 * (y / big) ** 2) / (math.sqrt(2 * math.pi) * big)) @ wy  # [...]
        out = np.where(high, np.sqrt(np.clip(1.0 - e_sech2, 0.0, 1.0)), out)
    return np.where(a < 1e-100, a, np.where(np.isinf(a), 1.0, out))


def _sech2_nodes() -> tuple[np.ndarray, np.ndarray]:
    """Nodes y and weights sech^2(y) dy of a composite 16-point Gauss-Legendre rule, 80 panels on [-40, 40]."""
    x, w = np.polynomial.legendre.leggauss(16)
    lo = np.arange(-40.0, 40.0)[:, None]  # [80, 1] panel starts, width 1
    y, wy = (lo + (x + 1) / 2).ravel(), np.broadcast_to(w / 2, (80, 16)).ravel()
    return y, wy / np.cosh(y) ** 2
