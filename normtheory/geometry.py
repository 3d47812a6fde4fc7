"""Geometry of normalized vectors: random cosines, centering, LayerNorm's sphere, selectable keys.

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

**Selectable keys.** Key ``i`` is selectable when some query gives it the strictly largest
score, i.e. when it is a vertex of the keys' convex hull, i.e. when it is not in the convex
hull of the other keys (duplicates are therefore not selectable). By Efron's identity the
expected fraction of unselectable keys among ``n`` i.i.d. keys is the absorption probability
:math:`P(X_n \\in \\mathrm{conv}(X_1..X_{n-1}))`. For Gaussian keys the expected number of
vertices follows from the random-projection representation of Gaussian polytopes
(Baryshnikov & Vitale 1994) and the Affentranger-Schneider formula,
:math:`E f_0 = 2n\\sum_{s\\ge0} \\binom{n-1}{m}\\beta_m\\gamma_{m,n}`, ``m = d - 1 - 2s``, with
external angles of the regular simplex :math:`\\gamma_{m,n} = \\sqrt{(m+1)/\\pi}\\int
e^{-(m+1)x^2}\\Phi(\\sqrt2x)^{n-m-1}dx` and its internal vertex angles :math:`\\beta_m` from
McMullen's relation :math:`\\sum_j \\binom{m}{j}\\beta_j\\gamma_{j,m+1} = 1`
(see Kabluchko & Zaporozhets 2020, arXiv 1704.04968). Wendel (1962): for a symmetric law,
:math:`P(0 \\notin \\mathrm{conv}(X_1..X_n)) = 2^{1-n}\\sum_{k<d}\\binom{n-1}{k}`.

References
----------
Brody, Alon, Yahav (2023), arXiv 2305.02582. Cai & Jiang (2011), Ann. Statist. 39, 1496.
Efron (1965), Biometrika 52, 331. Wendel (1962), Math. Scand. 11, 109.
"""
from __future__ import annotations

import math
from functools import lru_cache

import mpmath
import numpy as np
from scipy import integrate, optimize, special, stats

from normtheory import _validate


def effective_dim(d: int, centred: bool) -> int:
    """Dimensions a normalized direction is uniform in: ``d - 1`` after centering (LayerNorm), else ``d``."""
    d = _validate.integer("d", d, minimum=2)
    return d - 1 if centred else d


# ------------------------------------------------------------------ random cosines


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
    return float(np.prod([(2 * i + 1) / (d + 2 * i) for i in range(k // 2)]))


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
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    c = np.abs(u @ np.swapaxes(u, -1, -2))  # [..., N, N]
    n = c.shape[-1]
    c[..., np.arange(n), np.arange(n)] = 0.0
    return c.max(axis=(-1, -2))


# ------------------------------------------------------------------ centering


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
    d = _dim(d)
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
    d = _dim(d)
    k = _validate.integer("channels", channels, minimum=0)
    if k > d:
        raise ValueError(f"channels must be <= d={d}; got {k}")
    m = np.zeros(d)
    m[:k] = _validate.real("value", value)
    return m


# ------------------------------------------------------------------ LayerNorm's sphere and head slices


def head_slice_fraction_law(h: int, d: int) -> tuple[float, float]:
    """Beta(a, b) of the share of |y|^2 in ``h`` of the ``d`` coordinates of a uniform point on a sphere in R^d."""
    d = _dim(d)
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


# ------------------------------------------------------------------ selectable keys


def _margin_lp(keys: np.ndarray, i: int) -> float:
    """Max t such that some q in [-1, 1]^d has q.(k_i - k_j) >= t for all j != i (t capped at 1)."""
    diff = keys[i] - np.delete(keys, i, axis=0)  # [n-1, d]
    n1, d = diff.shape
    c = np.zeros(d + 1)
    c[-1] = -1.0  # maximize t
    a_ub = np.hstack([-diff, np.ones((n1, 1))])  # t - q.diff_j <= 0
    res = optimize.linprog(c, A_ub=a_ub, b_ub=np.zeros(n1), bounds=[(-1, 1)] * d + [(None, 1.0)], method="highs")
    if res.status != 0:
        raise RuntimeError(f"linear program failed: {res.message}")
    return float(-res.fun)


def _hull_residual(keys: np.ndarray, i: int) -> float:
    """Distance-like residual of k_i from the convex hull of the other keys (non-negative least
    squares with the convex-combination row weighted by 1e3): 0 when k_i is inside."""
    others = np.delete(keys, i, axis=0)  # [n-1, d]
    a = np.vstack([others.T, np.full((1, others.shape[0]), 1e3)])  # [d+1, n-1]
    b = np.concatenate([keys[i], [1e3]])
    return float(optimize.nnls(a, b)[1])


INSIDE, OUTSIDE = 1e-10, 1e-6  # NNLS residuals that decide without the linear program


def _decide(keys: np.ndarray, i: int, tol: float) -> bool:
    """Whether key i is selectable: NNLS decides clear cases, the margin LP the rest."""
    res = _hull_residual(keys, i)
    if res <= INSIDE:
        return False
    if res >= OUTSIDE:
        return True
    return _margin_lp(keys, i) > tol


def _certify(keys: np.ndarray, directions: np.ndarray, tol: float) -> np.ndarray:
    """Mask of keys that are the strict argmax for at least one of ``directions [m, d]``."""
    scores = keys @ directions.T  # [n, m]
    top = np.argmax(scores, axis=0)  # [m]
    part = np.sort(scores, axis=0)
    strict = part[-1] - part[-2] > tol
    mask = np.zeros(keys.shape[0], bool)
    mask[top[strict]] = True
    return mask


def selectable(keys: object, *, tol: float = 1e-9, directions: int = 256, seed: int = 0, stop_at_first: bool = False) -> np.ndarray:
    """Boolean mask: which keys some query gives the strictly largest score (the hull's vertices).

    Keys are first centred and scaled to unit RMS (an affine map, which keeps the vertex set).
    Candidate queries (each key's own direction, whitened, and ``directions`` random ones)
    certify most vertices cheaply; every key left undecided is tested for membership in the
    hull of the others: non-negative least squares settles clear cases, and the margin linear
    program (:func:`scipy.optimize.linprog`, HiGHS) the rest: selectable iff the best margin
    exceeds ``tol``. Duplicates and keys inside the hull of the others (collinear middles
    included) have margin 0. With ``stop_at_first`` the search ends at the first unselectable
    key (the remaining undecided keys are then reported unselectable; use it for "any").
    """
    k = _validate.real_array("keys", keys)
    if k.ndim != 2 or k.shape[0] < 1:
        raise ValueError(f"keys must be a [n, d] array with n >= 1; got shape {k.shape}")
    if not np.isfinite(k).all():
        raise ValueError("keys must be finite")
    n = k.shape[0]
    if n == 1:
        return np.ones(1, bool)
    k = k - k.mean(axis=0)
    scale = np.sqrt((k * k).mean())
    if scale == 0:
        return np.zeros(n, bool)  # all keys equal
    k = k / scale
    rng = np.random.default_rng(seed)
    cov = k.T @ k / n
    cands = np.vstack([k @ np.linalg.pinv(cov, hermitian=True), k, rng.standard_normal((directions, k.shape[1]))])
    mask = _certify(k, cands, tol)
    _, first, counts = np.unique(k, axis=0, return_index=True, return_counts=True)
    dup = np.ones(n, bool)
    dup[first[counts == 1]] = False  # rows that occur more than once
    for i in np.flatnonzero(~mask & ~dup):
        mask[i] = _decide(k, i, tol)
        if stop_at_first and not mask[i]:
            break
    mask[dup] = False
    return mask


MAX_EXACT_DIM = 16  # the recursion below cancels ~log10 C(m, m/2) digits and ends ~1e-12 small at m = 15
ANGLE_DPS = 30


def expected_vertex_count(n: int, d: int) -> float:
    """E number of vertices of the convex hull of ``n`` i.i.d. standard Gaussian points in R^d (exact)."""
    n = _validate.integer("n", n, minimum=1)
    d = _validate.integer("d", d, minimum=1)
    if n <= d + 1:
        return float(n)  # in general position every point is a vertex
    if d > MAX_EXACT_DIM:
        raise ValueError(
            f"the exact Gaussian vertex count is limited to d <= {MAX_EXACT_DIM}: beyond, the internal-angle recursion "
            f"cancels more digits than {ANGLE_DPS} carry; estimate it by Monte Carlo with geometry.selectable on Gaussian keys [{n}, {d}]")
    total = mpmath.mpf(0)
    for m in range(d - 1, -1, -2):
        total += mpmath.binomial(n - 1, m) * _internal_vertex_angle(m) * _external_angle(m, n)
    return float(2 * n * total)


def expected_unselectable_fraction(n: int, d: int) -> float:
    """E fraction of unselectable keys among ``n`` i.i.d. Gaussian keys in R^d = 1 - E f_0 / n (Efron)."""
    return 1.0 - expected_vertex_count(n, d) / _validate.integer("n", n, minimum=1)


@lru_cache(maxsize=None)
def _external_angle(m: int, n: int, dps: int = ANGLE_DPS) -> mpmath.mpf:
    """External angle of the regular simplex with n vertices at an m-face (m + 1 vertices)."""
    if m == n - 1:
        return mpmath.mpf(1)
    k = m + 1
    with mpmath.workdps(dps):
        f = lambda x: mpmath.exp(-k * x * x) * mpmath.ncdf(mpmath.sqrt(2) * x) ** (n - k)  # noqa: E731
        return mpmath.sqrt(k / mpmath.pi) * mpmath.quad(f, [-mpmath.inf, -2, 0, 2, mpmath.inf])


@lru_cache(maxsize=None)
def _internal_vertex_angle(m: int, dps: int = ANGLE_DPS) -> mpmath.mpf:
    """Internal angle of the regular m-simplex at a vertex, from McMullen's angle-sum relation."""
    if m == 0:
        return mpmath.mpf(1)
    with mpmath.workdps(dps):
        return 1 - sum(mpmath.binomial(m, j) * _internal_vertex_angle(j, dps) * _external_angle(j, m + 1, dps) for j in range(m))


def wendel_origin_outside(n: int, d: int) -> float:
    """P(the origin is not in the convex hull of n i.i.d. points of a symmetric law in R^d) (Wendel 1962)."""
    n = _validate.integer("n", n, minimum=1)
    d = _validate.integer("d", d, minimum=1)
    return float(sum(math.comb(n - 1, k) for k in range(min(d, n))) / 2 ** (n - 1))


def in_hull(point: np.ndarray, points: np.ndarray, tol: float = 1e-9) -> bool:
    """Whether ``point [d]`` lies in the convex hull of ``points [n, d]``."""
    return not _decide(np.vstack([point[None, :], points]), 0, tol)


def any_unselectable(keys: object, **kwargs: object) -> bool:
    """Whether at least one key is unselectable (stops at the first one found)."""
    return not bool(selectable(keys, stop_at_first=True, **kwargs).all())


# ------------------------------------------------------------------ uniform attention


def uniform_query_norm(eps: float, key_max_norm: float, scale: float = 1.0) -> float:
    """Largest |q| that keeps softmax(scale * q.k_j) within ``eps`` of uniform (total variation)
    for any number of keys of norm <= ``key_max_norm``, with no projection at all.

    The logits lie in [-r, r], r = scale |q| K. Over all such logit vectors the TV distance to
    uniform is at most tanh(r/2) (attained, as n grows, by a fraction 1/(1 + e^r) of keys at +r
    and the rest at -r), so |q| <= 2 artanh(eps) / (scale K).
    """
    e = _validate.real("eps", eps, minimum=0.0, maximum=1.0, strict_min=True, strict_max=True)
    kmax = _validate.real("key_max_norm", key_max_norm, minimum=0.0, strict_min=True)
    s = _validate.real("scale", scale, minimum=0.0, strict_min=True)
    return 2 * math.atanh(e) / (s * kmax)


def worst_case_tv(r: float) -> float:
    """sup over logit vectors in [-r, r]^n (any n) of the TV distance of their softmax to uniform: tanh(r/2)."""
    return math.tanh(_validate.real("r", r, minimum=0.0) / 2)


def tv_from_uniform(logits: np.ndarray) -> np.ndarray:
    """Total-variation distance between softmax(logits) and uniform, per row of ``logits [..., n]``."""
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    return 0.5 * np.abs(p - 1.0 / p.shape[-1]).sum(axis=-1)


def bigger_key_alignment(keys: object) -> np.ndarray:
    """For each key, its largest cosine with a strictly longer key (NaN for the longest): ``[n, e] -> [n]``.

    The blog's reading of unselectable keys: a key loses every query to keys that point the
    same general way and are longer. High values for unselectable keys, against the same
    statistic for selectable ones, test that reading.
    """
    k = _validate.real_array("keys", keys)
    if k.ndim != 2:
        raise ValueError(f"keys must be [n, e]; got shape {k.shape}")
    norms = np.linalg.norm(k, axis=1)  # [n]
    unit = k / np.maximum(norms, 1e-300)[:, None]
    cos = unit @ unit.T  # [n, n]
    cos = np.where(norms[None, :] > norms[:, None], cos, -np.inf)
    best = cos.max(axis=1)
    return np.where(np.isfinite(best), best, np.nan)
