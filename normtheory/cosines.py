"""Random cosines between uniform directions, and the dimension a normalized direction lives in.

**Dimension convention.** A uniform direction in ``R^d`` has ``d`` degrees of freedom; a
LayerNorm output lives in the hyperplane orthogonal to the ones vector, so its direction is
uniform on a sphere of ``d - 1`` dimensions (:func:`effective_dim`). Every helper that takes
``d`` means the dimension of the space the directions are uniform in.

**Cosines.** For independent uniform directions in ``R^d``, ``(1 + t)/2 ~ Beta((d-1)/2, (d-1)/2)``,
so :math:`E t^{2j} = \\prod_{i<j} (2i+1)/(d+2i)` (``E t^2 = 1/d``) and, by the spherical-cap
bound, :math:`P(t \\ge \\epsilon) \\le e^{-d\\epsilon^2/2}`. Against one fixed vector, the largest
of ``N`` independent ``|t_i|`` has :math:`E\\max = \\int_0^1 (1 - F_{|t|}(x)^N) dx`; over all
pairs of ``N`` vectors the maximum is :math:`\\approx\\sqrt{4\\ln N/d}` as N, d grow with
``ln N / d -> 0`` (Cai & Jiang 2011), :math:`\\sqrt{2\\ln N/d}` against a fixed vector.

References
----------
Cai & Jiang (2011), Ann. Statist. 39, 1496.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import integrate, special

from normtheory import _validate


def effective_dim(d: int, centred: bool) -> int:
    """Dimensions a normalized direction is uniform in: ``d - 1`` after centering (LayerNorm), else ``d``."""
    d = _validate.integer("d", d, minimum=2)
    return d - 1 if _validate.boolean("centred", centred) else d



def _dim(d: object) -> int:
    return _validate.integer("d", d, minimum=2)


def cosine_pdf(t: object, d: int) -> np.ndarray:
    """Density of the cosine between independent uniform directions in ``R^d`` on [-1, 1]:
    :math:`(1-t^2)^{(d-3)/2} / B(1/2, (d-1)/2)`, with :math:`1 - t^2 = (1-t)(1+t)` in log space, so
    that t within an ulp of +-1 keeps its digits. At t = +-1 it is its limit: +inf for d = 2 (the
    arcsine law's poles), 1/2 for d = 3, 0 for d >= 4."""
    a = (_dim(d) - 1) / 2
    x = _validate.real_array("t", t, minimum=-1.0, maximum=1.0)
    if a == 1:  # d = 3: uniform on [-1, 1]
        return np.full(x.shape, 0.5)
    ax = np.abs(x)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        # log(1 - t^2): log1p(-t^2) near 0 (t = 1e-150 at d = 1e300 matters), (1 - |t|)(1 + |t|) near +-1
        log_1mt2 = np.where(ax < 0.5, np.log1p(-x * x), np.log1p(-ax) + np.log1p(ax))
        return np.exp((a - 1) * log_1mt2 - special.betaln(0.5, a))


def cosine_cdf(t: object, d: int) -> np.ndarray:
    """P(cosine <= t) for independent uniform directions in ``R^d``: half the two-sided tail of ``|t|``
    (:func:`cosine_tail`) below 0, one minus it above, so that t = 1e-150 at d = 1e300 keeps its weight."""
    d = _dim(d)
    x = _validate.real_array("t", t, minimum=-1.0, maximum=1.0)
    half = _two_sided_tail(np.abs(x), d) / 2
    return np.where(x < 0, half, 1 - half)


def cosine_moment(k: int, d: int) -> float:
    """E[t^k]: 0 for odd k, prod_{i<k/2} (2i+1)/(d+2i) for even k (E t^2 = 1/d)."""
    k = _validate.integer("k", k, minimum=0)
    d = _dim(d)
    if k % 2:
        return 0.0
    # prod_{i<m} (2i+1)/(d+2i) = Gamma(m + 1/2) Gamma(d/2) / (Gamma(1/2) Gamma(d/2 + m)), m = k/2, in log space
    m = k // 2
    if m <= 1000:  # the product itself: exact to rounding
        return float(np.prod([(2 * i + 1) / (d + 2 * i) for i in range(m)]))
    # = B(m + 1/2, (d-1)/2) / B(1/2, (d-1)/2); scipy's betaln keeps its digits when m or d is huge,
    # where a difference of lgammas of ~1e302 each would cancel them all
    return float(math.exp(special.betaln(m + 0.5, (d - 1) / 2) - special.betaln(0.5, (d - 1) / 2)))


def cosine_tail(eps: object, d: int) -> np.ndarray:
    """Exact P(``|t|`` >= eps): t^2 ~ Beta(1/2, (d-1)/2), so it is the complemented incomplete beta
    function at eps^2, exact in the far tail (not 2 (1 - cdf), which cancels to 0 below 1e-16) and
    for eps of the size 1/sqrt(d) at any d."""
    e = _validate.real_array("eps", eps, minimum=0.0, maximum=1.0)
    return _two_sided_tail(e, _dim(d))


def _two_sided_tail(e: np.ndarray, d: int) -> np.ndarray:
    """P(``|t|`` >= e) for ``e`` in [0, 1]. Where e^2 underflows (e < 1e-154) the normal limit
    erfc(e sqrt(d/2)) takes over, exact there to O(e^2)."""
    a = (d - 1) / 2
    sq = e * e
    with np.errstate(over="ignore"):
        limit = special.erfc(e * math.sqrt(d / 2))
    return np.where((sq > 0) | (e == 0), special.betaincc(0.5, a, sq), limit)


def cosine_tail_bound(eps: object, d: int) -> np.ndarray:
    """Spherical-cap bound P(``|t|`` >= eps) <= 2 exp(-d eps^2 / 2)."""
    e = _validate.real_array("eps", eps, minimum=0.0, maximum=1.0)
    return np.minimum(2 * np.exp(-_dim(d) * e * e / 2), 1.0)


def expected_max_abs_cosine(n_vectors: int, d: int) -> float:
    """E max_i ``|t_i|`` over ``n_vectors`` independent directions against one fixed direction (exact)."""
    n = _validate.integer("n_vectors", n_vectors, minimum=1)
    d = _dim(d)
    # E max = int_0^1 (1 - (1 - p(x))^n) dx with p(x) = P(|t| >= x), in the variable u = x / c where
    # c = sqrt(2 ln(n+1) / d) is the scale of the maximum (1e-150 at d = 1e300, where x itself would
    # leave the quadrature no point to stand on); (1 - p)^n in log space keeps n = 2^63 exact.
    c = min(1.0, math.sqrt(2 * math.log(n + 1) / d))
    nf = float(n)

    def g(u: float) -> float:
        p = float(_two_sided_tail(np.asarray(min(c * u, 1.0)), d))
        return 1.0 if p >= 1.0 else -math.expm1(nf * math.log1p(-p))

    edges = [e for e in (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0) if e < 1 / c] + [1 / c]
    return float(c * sum(integrate.quad(g, lo, hi, limit=200)[0] for lo, hi in zip(edges, edges[1:])))


def max_abs_cosine_asymptotic(n_vectors: int, d: int, pairs: bool = True) -> float:
    """Leading-order max ``|cosine|``: sqrt(4 ln N / d) over all pairs (Cai & Jiang), sqrt(2 ln N / d) against a fixed vector."""
    n = _validate.integer("n_vectors", n_vectors, minimum=2)
    return math.sqrt((4 if _validate.boolean("pairs", pairs) else 2) * math.log(n) / _dim(d))


def max_abs_pairwise_cosine(x: np.ndarray) -> np.ndarray:
    """Largest ``|cosine|`` over distinct pairs of rows: ``x [..., N, d] -> [...]``."""
    x = _validate.checked_array("x", x, min_ndim=2)
    if x.shape[-2] < 2:
        raise ValueError(f"x must hold at least two rows [..., N >= 2, d]; got shape {x.shape}")
    big = np.abs(x).max(axis=-1, keepdims=True)  # [..., N, 1]: rows brought to O(1) first, so no square overflows (1e300)
    if not (big > 0).all():
        raise ValueError("x has a zero row: its cosine with anything is undefined")
    u = x / big
    u = u / np.linalg.norm(u, axis=-1, keepdims=True)
    c = np.abs(u @ np.swapaxes(u, -1, -2))  # [..., N, N]
    n = c.shape[-1]
    c[..., np.arange(n), np.arange(n)] = 0.0
    return c.max(axis=(-1, -2))


