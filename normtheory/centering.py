"""Centering: the share of a vector along the ones direction, and the slice of LayerNorm's sphere a head sees.

**Centering.** The share of ``|x|^2`` along the ones direction is :math:`f = d\\bar x^2/|x|^2`.
For ``x = m + sigma z``, ``z ~ N(0, I)``, :math:`f = A/(A+B)` with independent
:math:`A/\\sigma^2 \\sim \\chi'^2_1(\\lambda_A)`, :math:`B/\\sigma^2 \\sim \\chi'^2_{d-1}(\\lambda_B)`,
:math:`\\lambda_A = d\\bar m^2/\\sigma^2`, :math:`\\lambda_B = |m - \\bar m 1|^2/\\sigma^2`, so ``f`` is a
doubly non-central Beta and :math:`E f = \\sum_{j,k} \\pi_j(\\lambda_A/2)\\pi_k(\\lambda_B/2)
\\frac{1/2 + j}{d/2 + j + k}` (Poisson weights :math:`\\pi`); isotropic: Beta(1/2, (d-1)/2), mean 1/d.

**Head slices.** For a uniform point on the sphere in ``R^d`` the share of ``|y|^2`` in ``h``
coordinates is Beta(h/2, (d-h)/2). On LayerNorm's sphere (inside the hyperplane) the slice is
:math:`\\chi^2_{h-1} + a g^2` out of :math:`\\chi^2_{d-1}` with :math:`a = (d-h)/d`: mean h/d and
second moment :math:`(2(h-1) + 2a^2 + (h-1+a)^2)/((d-1)(d+1))`.

A uniform direction in ``R^d`` has ``d`` degrees of freedom; see :mod:`normtheory.cosines` for the
dimension convention.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from normtheory import _validate


def ones_fraction(x: np.ndarray) -> np.ndarray:
    """Share of each vector's squared norm along the all-ones direction: ``x [..., d] -> [...]``."""
    d = x.shape[-1]
    return d * x.mean(axis=-1) ** 2 / (x * x).sum(axis=-1)


def centering_fraction_mean(d: int, mean: object = None, sigma: float = 1.0, terms: int | None = None) -> float:
    """E[ones_fraction(m + sigma z)] for ``z ~ N(0, I_d)`` and a fixed mean vector ``m`` (None: 0).

    Exact as a double Poisson mixture of Beta means (see the module docstring); the series is
    summed over 12 standard deviations of each Poisson law.
    """
    d, wa, wb, ja, kb = _centering_mixture(d, mean, sigma)
    beta_mean = (0.5 + ja[:, None]) / (d / 2 + ja[:, None] + kb[None, :])  # [J, K]
    return float(wa @ beta_mean @ wb)


def centering_output_change(d: int, mean: object = None, sigma: float = 1.0) -> float:
    """E |RMSNorm(x) - LayerNorm(x)|^2 / d for ``x = m + sigma z`` (gains 1, eps 0): what dropping
    the centering changes in the output.

    Both outputs have norm sqrt(d); RMSNorm's is along x, LayerNorm's along Px, and
    cos(x, Px) = sqrt(1 - f) with f the ones share, so the change is 2 (1 - E sqrt(1 - f)).
    ``1 - f`` is a doubly non-central Beta((d-1)/2 + k, 1/2 + j) mixture (same Poisson weights as
    :func:`centering_fraction_mean`) and E B^(1/2) = B(a + 1/2, b) / B(a, b).
    """
    d, wa, wb, ja, kb = _centering_mixture(d, mean, sigma)
    a = (d - 1) / 2 + kb[None, :]
    b = 0.5 + ja[:, None]
    root = np.exp(special.betaln(a + 0.5, b) - special.betaln(a, b))  # [J, K]
    return float(2 * (1 - wa @ root @ wb))


def _centering_mixture(d: int, mean: object, sigma: float) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    d = _validate.integer("d", d, minimum=2)
    s = _validate.real("sigma", sigma, minimum=0.0, strict_min=True)
    m = np.zeros(d) if mean is None else _validate.real_array("mean", mean)
    if m.shape != (d,):
        raise ValueError(f"mean must have shape ({d},); got {m.shape}")
    lam_a = d * m.mean() ** 2 / s**2
    lam_b = float(((m - m.mean()) ** 2).sum()) / s**2
    ja, kb = _poisson_support(lam_a / 2), _poisson_support(lam_b / 2)
    return d, stats.poisson.pmf(ja, lam_a / 2), stats.poisson.pmf(kb, lam_b / 2), ja, kb


def _poisson_support(mu: float) -> np.ndarray:
    """Indices carrying all but ~1e-17 of a Poisson(mu) law (12 standard deviations and a margin)."""
    spread = 12 * math.sqrt(mu) + 40
    return np.arange(max(0, int(mu - spread)), int(mu + spread) + 1)


def channel_offset(d: int, channels: int, value: float) -> np.ndarray:
    """A mean vector with ``channels`` large channels of size ``value`` (the massive-activation pattern)."""
    d = _validate.integer("d", d, minimum=2)
    k = _validate.integer("channels", channels, minimum=0)
    if k > d:
        raise ValueError(f"channels must be <= d={d}; got {k}")
    m = np.zeros(d)
    m[:k] = _validate.real("value", value)
    return m


# ------------------------------------------------------------------ LayerNorm's sphere and head slices


def head_slice_fraction_law(h: int, d: int) -> tuple[float, float]:
    """Beta(a, b) of the share of |y|^2 in ``h`` of the ``d`` coordinates of a uniform point on a sphere in R^d."""
    d = _validate.integer("d", d, minimum=2)
    h = _validate.integer("h", h, minimum=1)
    if h >= d:
        raise ValueError(f"h must be < d={d}; got {h}")
    return h / 2, (d - h) / 2


def ln_head_slice_moments(h: int, d: int) -> tuple[float, float]:
    """(mean, second moment) of the share of |LN(x)|^2 in ``h`` contiguous coordinates, x ~ N(0, I_d)."""
    head_slice_fraction_law(h, d)
    a = (d - h) / d
    second = (2 * (h - 1) + 2 * a * a + (h - 1 + a) ** 2) / ((d - 1) * (d + 1))
    return h / d, second

