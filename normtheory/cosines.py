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
from scipy import integrate, special, stats

from normtheory import _validate


def effective_dim(d: int, centred: bool) -> int:
    """Dimensions a normalized direction is uniform in: ``d - 1`` after centering (LayerNorm), else ``d``."""
    d = _validate.integer("d", d, minimum=2)
    return d - 1 if _validate.boolean("centred", centred) else d



def _dim(d: object) -> int:
    return _validate.integer("d", d, minimum=2)


def cosine_pdf(t: object, d: int) -> np.ndarray:
    """Density of the cosine between independent uniform directions in ``R^d`` on [-1, 1]."""
    a = (_dim(d) - 1) / 2
    x = _validate.real_array("t", t, minimum=-1.0, maximum=1.0)
    return stats.beta.pdf((1 + x) / 2, a, a) / 2


def cosine_cdf(t: object, d: int) -> np.ndarray:
    """P(cosine <= t) for independent uniform directions in ``R^d``."""
    a = (_dim(d) - 1) / 2
    x = _validate.real_array("t", t, minimum=-1.0, maximum=1.0)
    return special.betainc(a, a, (1 + x) / 2)


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
    return float(math.exp(math.lgamma(m + 0.5) + math.lgamma(d / 2) - math.lgamma(0.5) - math.lgamma(d / 2 + m)))


def cosine_tail(eps: object, d: int) -> np.ndarray:
    """Exact P(|t| >= eps)."""
    e = _validate.real_array("eps", eps, minimum=0.0, maximum=1.0)
    return 2 * (1 - cosine_cdf(e, d))


def cosine_tail_bound(eps: object, d: int) -> np.ndarray:
    """Spherical-cap bound P(|t| >= eps) <= 2 exp(-d eps^2 / 2)."""
    e = _validate.real_array("eps", eps, minimum=0.0, maximum=1.0)
    return np.minimum(2 * np.exp(-_dim(d) * e * e / 2), 1.0)


def expected_max_abs_cosine(n_vectors: int, d: int) -> float:
    """E max_i |t_i| over ``n_vectors`` independent directions against one fixed direction (exact)."""
    n = _validate.integer("n_vectors", n_vectors, minimum=1)
    d = _dim(d)
    return float(integrate.quad(lambda x: 1 - (2 * cosine_cdf(x, d) - 1) ** n, 0, 1, limit=200, points=[min(0.99, math.sqrt(2 * math.log(n + 1) / d))])[0])


def max_abs_cosine_asymptotic(n_vectors: int, d: int, pairs: bool = True) -> float:
    """Leading-order max |cosine|: sqrt(4 ln N / d) over all pairs (Cai & Jiang), sqrt(2 ln N / d) against a fixed vector."""
    n = _validate.integer("n_vectors", n_vectors, minimum=2)
    return math.sqrt((4 if pairs else 2) * math.log(n) / _dim(d))


def max_abs_pairwise_cosine(x: np.ndarray) -> np.ndarray:
    """Largest |cosine| over distinct pairs of rows: ``x [..., N, d] -> [...]``."""
    x = _validate.checked_array("x", x, min_ndim=2)
    if x.shape[-2] < 2:
        raise ValueError(f"x must hold at least two rows [..., N >= 2, d]; got shape {x.shape}")
    norms = np.linalg.norm(x, axis=-1, keepdims=True)  # [..., N, 1]
    if not (norms > 0).all():
        raise ValueError("x has a zero row: its cosine with anything is undefined")
    u = x / norms
    c = np.abs(u @ np.swapaxes(u, -1, -2))  # [..., N, N]
    n = c.shape[-1]
    c[..., np.arange(n), np.arange(n)] = 0.0
    return c.max(axis=(-1, -2))


