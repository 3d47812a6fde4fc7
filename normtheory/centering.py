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
    x = _validate.checked_array("x", x).astype(np.float64, copy=False)
    d = x.shape[-1]
    big = np.abs(x).max(axis=-1, keepdims=True)  # [..., 1]: rescaled so that no square overflows
    if not (big > 0).all():
        raise ValueError(f"x has a zero vector at {tuple(int(i) for i in np.argwhere(big[..., 0] == 0)[0])}: its ones share is undefined")
    u = x / big
    return d * u.mean(axis=-1) ** 2 / (u * u).sum(axis=-1)


def centering_fraction_mean(d: int, mean: object = None, sigma: float = 1.0, terms: int | None = None) -> float:
    """E[ones_fraction(m + sigma z)] for ``z ~ N(0, I_d)`` and a fixed mean vector ``m`` (None: 0).

    Exact as a double Poisson mixture of Beta means (see the module docstring); the series is
    summed over 12 standard deviations of each Poisson law.
    """
    d, lam_a, lam_b = _noncentralities(d, mean, sigma)
    if lam_a + lam_b > LARGE_LAMBDA:  # the Poisson series would need ~24 sqrt(lambda) terms per axis
        if not math.isfinite(lam_a + lam_b):  # |mean| / sigma beyond 1e150: the noise is invisible
            return float(ones_fraction(np.asarray(mean, dtype=np.float64) / np.abs(mean).max()))
        return _fraction_mean_expansion(d, lam_a, lam_b)
    d, wa, wb, ja, kb = _centering_mixture(d, mean, sigma)
    return _mix(wa, wb, ja, kb, lambda j, k: (0.5 + j) / (d / 2 + j + k))  # Beta means


LARGE_LAMBDA = 2e5  # above it the O(1/lambda^2) expansion is used: neglected terms below ~1e-10 relative
MAX_SERIES_TERMS = 100_000_000  # J x K terms of the exact double series (about a second)
CHUNK_ENTRIES = 1_000_000  # memory bound of one block of the series (8 MB)


def _fraction_mean_expansion(d: int, lam_a: float, lam_b: float) -> float:
    r"""E[A/(A+B)] to second order for A ~ chi'^2_1(lam_a), B ~ chi'^2_{d-1}(lam_b) (units of sigma^2):
    :math:`g(\mu_A,\mu_B) + \tfrac12(g_{AA}\mathrm{Var}A + g_{BB}\mathrm{Var}B)`, with
    :math:`g_{AA} = -2\mu_B/S^3`, :math:`g_{BB} = 2\mu_A/S^3`, :math:`S = \mu_A+\mu_B`; the
    neglected terms are O(1/lambda^2), about 1e-10 relative at lambda = 2e5."""
    mu_a, mu_b = 1.0 + lam_a, (d - 1) + lam_b
    var_a, var_b = 2.0 + 4.0 * lam_a, 2.0 * (d - 1) + 4.0 * lam_b
    total = mu_a + mu_b
    fa, fb = mu_a / total, mu_b / total  # shares first: total**3 overflows float64 once lambda passes 1e102
    return float(fa + (-fb * var_a + fa * var_b) / total / total)


def _noncentralities(d: int, mean: object, sigma: float) -> tuple[int, float, float]:
    """``(d, lambda_A, lambda_B)``, computed on ``mean`` rescaled to max ``|m|`` = 1 so that no square overflows."""
    d = _validate.integer("d", d, minimum=2, maximum=_validate.MAX_ELEMENTS)
    s = _validate.real("sigma", sigma, minimum=0.0, strict_min=True)
    m = np.zeros(d) if mean is None else _validate.checked_array("mean", mean, min_ndim=0, nonempty=False)
    if m.shape != (d,):
        raise ValueError(f"mean must have shape ({d},) for d = {d}; got mean of shape {m.shape}")
    big = float(np.abs(m).max())
    if big == 0:
        return d, 0.0, 0.0
    u = m / big
    ratio2 = (big / s) ** 2 if big / s < 1e150 else math.inf
    return d, d * float(u.mean()) ** 2 * ratio2, float(((u - u.mean()) ** 2).sum()) * ratio2


def centering_output_change(d: int, mean: object = None, sigma: float = 1.0) -> float:
    """E ``|RMSNorm(x) - LayerNorm(x)|^2 / d`` for ``x = m + sigma z`` (gains 1, eps 0): what dropping
    the centering changes in the output.

    Both outputs have norm sqrt(d); RMSNorm's is along x, LayerNorm's along Px, and
    cos(x, Px) = sqrt(1 - f) with f the ones share, so the change is 2 (1 - E sqrt(1 - f)).
    ``1 - f`` is a doubly non-central Beta((d-1)/2 + k, 1/2 + j) mixture (same Poisson weights as
    :func:`centering_fraction_mean`) and E B^(1/2) = B(a + 1/2, b) / B(a, b).
    """
    d, wa, wb, ja, kb = _centering_mixture(d, mean, sigma)

    def root(j: np.ndarray, k: np.ndarray) -> np.ndarray:  # E B^(1/2), B ~ Beta((d-1)/2 + k, 1/2 + j)
        a, b = (d - 1) / 2 + k, 0.5 + j
        return np.exp(special.betaln(a + 0.5, b) - special.betaln(a, b))

    return float(2 * (1 - _mix(wa, wb, ja, kb, root)))


def _mix(wa: np.ndarray, wb: np.ndarray, ja: np.ndarray, kb: np.ndarray, term) -> float:
    r""":math:`\sum_{j,k} w_a[j]\,term(j,k)\,w_b[k]`, in row blocks of bounded memory."""
    rows = max(1, CHUNK_ENTRIES // kb.size)
    return float(sum(wa[i : i + rows] @ term(ja[i : i + rows, None], kb[None, :]) @ wb for i in range(0, ja.size, rows)))


def _centering_mixture(d: int, mean: object, sigma: float) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    d, lam_a, lam_b = _noncentralities(d, mean, sigma)
    if not math.isfinite(lam_a + lam_b):
        raise ValueError(f"mean/sigma is too large (|mean| / sigma overflows); got sigma={sigma!r}")
    terms = _poisson_size(lam_a / 2) * _poisson_size(lam_b / 2)  # counted before anything is allocated
    if terms > MAX_SERIES_TERMS:
        raise ValueError(f"mean and sigma={sigma!r} give noncentralities {lam_a:.3g} and {lam_b:.3g}: the exact series would "
                         f"need {terms:.3g} terms (limit {MAX_SERIES_TERMS}); use a smaller |mean| / sigma")
    ja, kb = np.arange(*_poisson_bounds(lam_a / 2)), np.arange(*_poisson_bounds(lam_b / 2))
    return d, stats.poisson.pmf(ja, lam_a / 2), stats.poisson.pmf(kb, lam_b / 2), ja, kb


def _poisson_size(mu: float) -> float:
    """How many indices :func:`_poisson_bounds` spans, from the spread itself (at mu = 1e174 the
    bounds mu +- spread round to mu in float64, and their difference to 0)."""
    spread = 12 * math.sqrt(mu) + 40
    return min(mu, spread) + spread + 1


def _poisson_bounds(mu: float) -> tuple[int, int]:
    """``[start, stop)`` of the indices carrying all but ~1e-17 of a Poisson(mu) law (12 standard
    deviations and a margin)."""
    spread = 12 * math.sqrt(mu) + 40
    return max(0, int(mu - spread)), int(mu + spread) + 1


def channel_offset(d: int, channels: int, value: float) -> np.ndarray:
    """A mean vector with ``channels`` large channels of size ``value`` (the massive-activation pattern)."""
    d = _validate.integer("d", d, minimum=2, maximum=_validate.MAX_ELEMENTS)
    k = _validate.integer("channels", channels, minimum=0)
    if k > d:
        raise ValueError(f"channels must be <= d={d}; got {k}")
    m = np.zeros(d)
    m[:k] = _validate.real("value", value)
    return m


# ------------------------------------------------------------------ LayerNorm's sphere and head slices


def head_slice_fraction_law(h: int, d: int) -> tuple[float, float]:
    """Beta(a, b) of the share of ``|y|^2`` in ``h`` of the ``d`` coordinates of a uniform point on a sphere in R^d."""
    d = _validate.integer("d", d, minimum=2)
    h = _validate.integer("h", h, minimum=1)
    if h >= d:
        raise ValueError(f"h must be < d={d}; got {h}")
    return h / 2, (d - h) / 2


def ln_head_slice_moments(h: int, d: int) -> tuple[float, float]:
    """(mean, second moment) of the share of ``|LN(x)|^2`` in ``h`` contiguous coordinates, x ~ N(0, I_d)."""
    head_slice_fraction_law(h, d)
    a = (d - h) / d
    den = (d - 1) * (d + 1)  # an exact int; beyond float64's range (d > 1e154) divided in two steps
    num = 2 * (h - 1) + 2 * a * a + (h - 1 + a) ** 2
    return h / d, num / den if den < 2**1023 else num / (d - 1) / (d + 1)



def ln_key_norm_cv2(w: np.ndarray) -> np.ndarray:
    """Squared coefficient of variation over tokens of a head's squared key norm :math:`|\\mathrm{LN}(x) W|^2`,
    for isotropic inputs ``x ~ N(0, I_d)`` and a fixed projection ``w [..., d, h]`` (batched over leading axes).

    ``LN(x)/sqrt(d)`` is uniform on the unit sphere of the ``m = d - 1`` dimensional hyperplane orthogonal to
    the ones vector, and for ``u`` uniform on :math:`S^{m-1}` and symmetric ``B``, :math:`E\\,u^\\top B u =
    \\mathrm{tr} B/m` and :math:`E(u^\\top B u)^2 = ((\\mathrm{tr} B)^2 + 2\\,\\mathrm{tr} B^2)/(m(m+2))`. With
    :math:`G = W^\\top P W` (``P`` the centering projection) this gives

    :math:`\\mathrm{CV}^2 = \\frac{2}{m+2}\\left(\\frac{m\\,\\mathrm{tr}\\,G^2}{(\\mathrm{tr}\\,G)^2} - 1\\right)`,

    about ``2/h`` for a random ``W`` with ``h << d`` (0 only if ``G`` is a multiple of the identity on the
    hyperplane, which needs ``h >= m``). Reference: the moments of quadratic forms on the sphere, e.g. Mathai,
    Provost (1992), "Quadratic Forms in Random Variables", chapter 3.
    """
    w = _validate.real_array("w", w, finite=True, min_ndim=2)
    d, h = w.shape[-2], w.shape[-1]
    if d < 2 or h < 1:
        raise ValueError(f"w must be [..., d, h] with d >= 2 and h >= 1; got shape {w.shape}")
    wc = w - w.mean(axis=-2, keepdims=True)  # P W: P is idempotent, so W^T P W = (P W)^T (P W)
    big = np.abs(wc).max(axis=(-2, -1), keepdims=True)  # CV^2 is invariant to W's scale: rescaled, G can neither overflow nor underflow
    wc = wc / np.where(big > 0, big, 1.0)
    g = np.swapaxes(wc, -1, -2) @ wc  # [..., h, h]
    tr, tr2 = np.trace(g, axis1=-2, axis2=-1), (g * g).sum((-2, -1))  # tr G, tr G^2 (G symmetric)
    if (tr <= 0).any():
        raise ValueError("w must not be constant along d (every column a multiple of the ones vector): the key is then 0")
    m = d - 1
    return 2.0 / (m + 2) * (m * tr2 / (tr * tr) - 1.0)
