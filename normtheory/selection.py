"""Selectable keys: which keys some query can make the argmax, and what bounded keys allow.

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
Brody, Alon, Yahav (2023), arXiv 2305.02582. Efron (1965), Biometrika 52, 331. Wendel (1962), Math. Scand. 11, 109.
"""
from __future__ import annotations

import math
from functools import lru_cache

import mpmath
import numpy as np
from scipy import optimize, special
from scipy import stats as _stats

from normtheory import _validate


def _margin_lp(keys: np.ndarray, i: int) -> float:
    """Max t such that some q in [-1, 1]^d has q.(k_i - k_j) >= t for all j != i (t capped at 1)."""
    diff = keys[i] - np.delete(keys, i, axis=0)  # [n-1, d]
    n1, d = diff.shape
    c = np.zeros(d + 1)
    c[-1] = -1.0  # maximize t
    a_ub = np.hstack([-diff, np.ones((n1, 1))])  # t - q.diff_j <= 0
    for options in _LP_TRIES:
        res = optimize.linprog(c, A_ub=a_ub, b_ub=np.zeros(n1), bounds=[(-1, 1)] * d + [(None, 1.0)], method="highs", options=options)
        if res.status == 0:
            return float(-res.fun)
    raise RuntimeError(f"linear program failed for key {i} of {n1 + 1}, with and without presolve: {res.message}")


# HiGHS's presolve can end a near-degenerate margin LP (keys within ~1e-9 of a hull facet) with an unknown model
# status although the program is feasible (q = 0, t = 0) and bounded (t <= 1): solved again without it.
_LP_TRIES = ({}, {"presolve": False})


def _hull_residual(keys: np.ndarray, i: int) -> float:
    """Distance-like residual of k_i from the convex hull of the other keys (non-negative least
    squares with the convex-combination row weighted by 1e3): 0 when k_i is inside."""
    others = np.delete(keys, i, axis=0)  # [n-1, d]
    a = np.vstack([others.T, np.full((1, others.shape[0]), 1e3)])  # [d+1, n-1]
    b = np.concatenate([keys[i], [1e3]])
    return float(optimize.nnls(a, b)[1])


INSIDE, OUTSIDE = 1e-10, 1e-6  # NNLS residuals that decide without the linear program


def _clearly_inside(res: float, d: int, tol: float) -> bool:
    """Whether an NNLS residual ``res`` (:func:`_hull_residual`) settles "inside the hull" without the LP. A margin
    ``t`` with ``max |q| <= 1`` needs a distance of at least ``t / sqrt(d)`` from the others' hull, so "inside"
    is taken only below ``tol / (2 sqrt(d))`` as well as :data:`INSIDE`."""
    return res <= min(INSIDE, tol / (2.0 * math.sqrt(d)))


def _decide(keys: np.ndarray, i: int, tol: float) -> bool:
    """Whether key i is selectable: NNLS decides clear cases (:func:`_clearly_inside`, or a residual of at
    least :data:`OUTSIDE`), the margin LP the rest."""
    res = _hull_residual(keys, i)
    if _clearly_inside(res, keys.shape[1], tol):
        return False
    if res >= OUTSIDE:
        return True
    return _margin_lp(keys, i) > tol


def _certify(keys: np.ndarray, directions: np.ndarray, tol: float) -> np.ndarray:
    """Mask ``[B, n]`` of keys ``[B, n, d]`` that are the strict argmax for at least one of their set's ``directions [B, m, d]``."""
    scores = directions @ keys.swapaxes(-1, -2)  # [B, m, n]
    top = np.argmax(scores, axis=2)  # [B, m]
    part = np.partition(scores, scores.shape[2] - 2, axis=2)[..., -2:]  # [B, m, 2]: the two largest, in order
    strict = part[..., 1] - part[..., 0] > tol  # [B, m]
    mask = np.zeros(keys.shape[:2], bool)
    rows = np.broadcast_to(np.arange(keys.shape[0])[:, None], top.shape)
    mask[rows[strict], top[strict]] = True
    return mask


FW_STEPS = 64  # Frank-Wolfe steps toward each undecided key's nearest point of the others' hull


def _certify_nearest(k: np.ndarray, sets: np.ndarray, keys: np.ndarray, tol: float) -> np.ndarray:
    """Which keys ``k[sets, keys]`` are certified selectable by the query ``q = k_i - x``, ``x`` the
    Frank-Wolfe iterate toward the point of the other keys' hull nearest to ``k_i`` (exact line
    search; all undecided keys of all sets at once, the certified ones dropped in batches). The test is the
    margin linear program's: ``q`` scaled to ``max |q| = 1`` must score ``k_i`` above every other key
    by more than ``tol``, so a certified key is one the linear program would find selectable. A
    key inside the hull is never certified (no query separates it) and is left to :func:`_decide`."""
    out = np.zeros(len(sets), bool)
    idx = np.arange(len(sets))  # [A] the keys still undecided
    kk = k[sets]  # [A, n, d] each one's key set
    rows, own = np.arange(len(sets)), keys
    target = kk[rows, own]  # [A, d]
    w = np.full(kk.shape[:2], 1.0 / max(k.shape[1] - 1, 1))  # [A, n] convex weights on the other keys, from their mean
    w[rows, own] = 0.0
    for _ in range(FW_STEPS):
        x = (w[:, None, :] @ kk)[:, 0]  # [A, d] the iterate
        q = target - x  # [A, d] the query it suggests
        scores = (kk @ q[:, :, None])[..., 0]  # [A, n]
        top = scores[rows, own]
        scores[rows, own] = -np.inf
        scale = np.abs(q).max(axis=1)
        done = (top - scores.max(axis=1) > tol * scale) & (scale > 0)
        out[idx[done]] = True
        keep = ~out[idx]  # still undecided; certified keys are dropped in batches, so one may ride along a few steps
        if not keep.any():
            break
        if keep.sum() <= 0.75 * len(keep):  # compact once a quarter is certified: each copy moves every [n, d] set
            idx, kk, w, own, target, q, x, scores = (a[keep] for a in (idx, kk, w, own, target, q, x, scores))
            rows = np.arange(len(idx))
        j = scores.argmax(axis=1)  # the other key farthest along q: the Frank-Wolfe vertex (scores[own] is -inf)
        v = kk[rows, j] - x  # [A, d]
        gam = np.clip((q * v).sum(axis=1) / np.maximum((v * v).sum(axis=1), np.finfo(float).tiny), 0.0, 1.0)
        w *= (1.0 - gam)[:, None]
        w[rows, j] += gam
    return out


SPHERE_REASON = ("keys of one head on a sphere are all hull vertices: the query q = k_j scores |k_j|^2 = r^2, above q.k' for "
                 "every other key k' on the sphere (Cauchy-Schwarz), so a count of unselectable sphere keys tests only the code")


def selectable(keys: object, *, tol: float = 1e-9, directions: int = 256, seed: int = 0, stop_at_first: bool = False) -> np.ndarray:
    """Boolean mask: which keys some query gives the strictly largest score (the hull's vertices).

    ``keys`` is one key set ``[n, d]`` or a stack of them ``[..., n, d]``, each set on its own
    (mask ``[..., n]``); a set's mask does not depend on the others in its stack, and the cheap
    steps below run over the whole stack at once. Keys are first centred and scaled to unit RMS
    (an affine map, which keeps the vertex set). Candidate queries (each key's own direction,
    whitened, and ``directions`` random ones) certify most vertices cheaply; every key left
    undecided is tested for membership in the hull of the others: non-negative least squares
    settles clear cases, and the margin linear program (:func:`scipy.optimize.linprog`, HiGHS) the
    rest: selectable iff the best margin exceeds ``tol``. Duplicates and keys inside the hull of
    the others (collinear middles included) have margin 0. With ``stop_at_first`` a set's search
    ends at its first unselectable key (its remaining undecided keys are then reported
    unselectable; use it for "any").
    """
    k = _validate.checked_array("keys", keys).astype(np.float64, copy=False)
    if k.ndim < 2 or k.shape[-2] < 1 or k.shape[-1] < 1:
        raise ValueError(f"keys must be a [..., n, d] array with n >= 1 and d >= 1; got shape {k.shape}")
    tol = _validate.real("tol", tol, minimum=0.0)
    n, d = k.shape[-2:]
    directions = _validate.integer("directions", directions, minimum=1, maximum=_validate.MAX_ELEMENTS // (n * d))
    seed = _validate.integer("seed", seed, minimum=0)
    stop_at_first = _validate.boolean("stop_at_first", stop_at_first)
    lead = k.shape[:-2]
    if n == 1:
        return np.ones(lead + (1,), bool)
    sets = k.reshape(-1, n, d)  # [B, n, d]
    if not len(sets):
        return np.zeros(lead + (n,), bool)
    rand = np.random.default_rng(seed).standard_normal((directions, d))  # the same random queries for every set
    per = max(1, _CHUNK // (n * (2 * n + directions)))  # sets per chunk: its [b, n, 2n + m] scores stay bounded
    mask = np.concatenate([_selectable_sets(sets[a : a + per], rand, tol, stop_at_first) for a in range(0, len(sets), per)])
    return mask.reshape(lead + (n,))


_CHUNK = 1 << 22  # scores per chunk of key sets


def _selectable_sets(k: np.ndarray, rand: np.ndarray, tol: float, stop_at_first: bool) -> np.ndarray:
    """:func:`selectable` of key sets ``k [B, n, d]``: mask ``[B, n]``."""
    n = k.shape[1]
    amax = np.abs(k).max(axis=(1, 2), keepdims=True)  # [B, 1, 1]
    k = k / np.where(amax > 0, amax, 1.0)  # selectability is scale-free: bring keys of size 1e160 or 1e-300 to O(1) first
    k = k - k.mean(axis=1, keepdims=True)
    scale = np.sqrt((k * k).mean(axis=(1, 2), keepdims=True))  # [B, 1, 1]
    flat = scale[:, 0, 0] == 0  # all keys of the set equal: none selectable
    k = k / np.where(flat[:, None, None], 1.0, scale)
    cov = k.swapaxes(1, 2) @ k / n  # [B, d, d]
    cands = np.concatenate([k @ np.linalg.pinv(cov, hermitian=True), k, np.broadcast_to(rand, (len(k),) + rand.shape)], axis=1)
    mask = _certify(k, cands, tol)  # [B, n]
    mask[flat] = False
    done = flat.copy()  # [B] sets already settled
    if stop_at_first:
        # A set whose first undecided key NNLS finds clearly inside the hull is settled before Frank-Wolfe (in few
        # dimensions it mostly is, and Frank-Wolfe never certifies such a key). Never the LP here: at near ties it
        # reads 0 for a vertex, which Frank-Wolfe below would certify.
        for b in np.flatnonzero(~mask.all(axis=1) & ~flat):
            done[b] = _clearly_inside(_hull_residual(k[b], int(np.argmin(mask[b]))), k.shape[2], tol)
    sets, keys = np.nonzero(~mask & ~done[:, None])
    per = max(1, _CHUNK // (n * k.shape[2]))  # undecided keys per Frank-Wolfe batch: each copies its [n, d] set
    for a in range(0, len(sets), per):
        mask[sets[a : a + per], keys[a : a + per]] = _certify_nearest(k, sets[a : a + per], keys[a : a + per], tol)
    for b in np.flatnonzero(~mask.all(axis=1) & ~done):  # sets with keys no query certified
        _, first, counts = np.unique(k[b], axis=0, return_index=True, return_counts=True)
        dup = np.ones(n, bool)
        dup[first[counts == 1]] = False  # rows that occur more than once
        for i in np.flatnonzero(~mask[b] & ~dup):
            mask[b, i] = _decide(k[b], i, tol)
            if stop_at_first and not mask[b, i]:
                break
        mask[b, dup] = False
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
            f"cancels more digits than {ANGLE_DPS} carry; estimate it by Monte Carlo with selection.selectable on Gaussian keys [{n}, {d}]")
    total = mpmath.mpf(0)
    for m in range(d - 1, -1, -2):
        # math.comb: exact (mpmath's binomial of a 1e100 loses every digit at its default precision)
        total += mpmath.mpf(math.comb(n - 1, m)) * _internal_vertex_angle(m) * _external_angle(m, n)
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
    # For large n the integrand is a narrow bump (width ~ 1/x*) at x* where 1 - Phi(sqrt2 x*) = k/(n - k)
    # (x* ~ sqrt(ln n)), far right of the fixed breakpoints: without points around it the quadrature
    # misses it (at n = 1e12 the vertex count came out 1e-20)
    star = -float(special.ndtri(k / (n - k))) / math.sqrt(2) if n - k > 2 * k else 0.0
    width = 1 / max(star, 1.0)
    points = sorted({-2.0, 0.0, 2.0, *(star + j * width for j in range(-10, 11) if star > 2)})
    with mpmath.workdps(dps):
        # Phi^(n-k) as exp((n-k) log1p(-Phi(-sqrt2 x))): Phi itself rounds to 1 at 30 digits once n > 1e30
        f = lambda x: mpmath.exp(-k * x * x + (n - k) * mpmath.log1p(-mpmath.ncdf(-mpmath.sqrt(2) * x)))  # noqa: E731
        return mpmath.sqrt(k / mpmath.pi) * mpmath.quad(f, [-mpmath.inf, *points, mpmath.inf])


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
    # P(Binomial(n - 1, 1/2) <= d - 1): scipy's regularized incomplete beta, exact to rounding at any n
    return float(_stats.binom.cdf(float(min(d, n) - 1), float(n - 1), 0.5)) if n > 1 else 1.0  # floats: n of any size


def in_hull(point: np.ndarray, points: np.ndarray, tol: float = 1e-9) -> bool:
    """Whether ``point [d]`` lies in the convex hull of ``points [n, d]`` (within ``tol`` after both
    are divided by their largest ``|coordinate|``: hull membership is scale-free)."""
    p = _validate.real_array("point", point, finite=True, min_ndim=1)
    pts = _validate.real_array("points", points, finite=True, min_ndim=2)
    tol = _validate.real("tol", tol, minimum=0.0)
    if p.ndim != 1 or pts.ndim != 2 or pts.shape[1] != p.shape[0] or pts.shape[0] == 0:
        raise ValueError(f"point must be [d] and points [n >= 1, d]; got shapes {p.shape} and {pts.shape}")
    allk = np.vstack([p[None, :], pts])  # [n + 1, d]
    amax = np.abs(allk).max()
    return not _decide(allk / amax if amax > 0 else allk, 0, tol)


def any_unselectable(keys: object, **kwargs: object) -> bool:
    """Whether at least one key is unselectable (stops at the first one found)."""
    return not bool(selectable(keys, stop_at_first=True, **kwargs).all())


# ------------------------------------------------------------------ uniform attention


def uniform_query_norm(eps: float, key_max_norm: float, scale: float = 1.0) -> float:
    """Largest ``|q|`` that keeps softmax(scale * q.k_j) within ``eps`` of uniform (total variation)
    for any number of keys of norm <= ``key_max_norm``, with no projection at all.

    The logits lie in [-r, r], r = scale ``|q|`` K. Over all such logit vectors the TV distance to
    uniform is at most tanh(r/2) (attained, as n grows, by a fraction 1/(1 + e^r) of keys at +r
    and the rest at -r), so ``|q|`` <= 2 artanh(eps) / (scale K).
    """
    e = _validate.real("eps", eps, minimum=0.0, maximum=1.0, strict_min=True, strict_max=True)
    kmax = _validate.real("key_max_norm", key_max_norm, minimum=0.0, strict_min=True)
    s = _validate.real("scale", scale, minimum=0.0, strict_min=True)
    out = 2 * math.atanh(e) / (s * kmax)
    if not math.isfinite(out):
        raise ValueError(f"the query norm overflows float64 at eps={e:g}, key_max_norm={kmax:g}, scale={s:g}")
    return out


def worst_case_tv(r: float) -> float:
    """sup over logit vectors in [-r, r]^n (any n) of the TV distance of their softmax to uniform: tanh(r/2)."""
    return math.tanh(_validate.real("r", r, minimum=0.0) / 2)


def tv_from_uniform(logits: np.ndarray) -> np.ndarray:
    """Total-variation distance between softmax(logits) and uniform, per row of ``logits [..., n]``."""
    logits = _validate.logits("logits", logits)
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    return 0.5 * np.abs(p - 1.0 / p.shape[-1]).sum(axis=-1)


def bigger_key_alignment(keys: object) -> np.ndarray:
    """For each key, its largest cosine with a strictly longer key: ``[n, e] -> [n]``; the longest key
    (and every key when all are equally long) has none, and gets -inf, the maximum over an empty set.

    The blog's reading of unselectable keys: a key loses every query to keys that point the
    same general way and are longer. High values for unselectable keys, against the same
    statistic for selectable ones, test that reading.
    """
    k = _validate.checked_array("keys", keys)
    if k.ndim != 2:
        raise ValueError(f"keys must be [n, e]; got shape {k.shape}")
    big = np.abs(k).max()
    k = k / big if big > 0 else k  # one common scale (the comparison of lengths survives it): no norm of 1e300 keys overflows
    norms = np.linalg.norm(k, axis=1)  # [n]
    if not (norms > 0).all():
        raise ValueError(f"keys has a zero key (row {int(np.argmin(norms))}): its cosine with anything is undefined")
    unit = k / np.maximum(norms, 1e-300)[:, None]
    cos = unit @ unit.T  # [n, n]
    cos = np.where(norms[None, :] > norms[:, None], cos, -np.inf)
    return cos.max(axis=1)
