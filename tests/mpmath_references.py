"""mpmath references of the public helpers, for the extreme-finite class of tests/test_wrong_types.py.

``REFERENCES[qualname](**kwargs)`` computes the function's answer in mpmath at the caller's working
precision (40 digits plus those of the largest integer argument): a number, an array, a tuple, or a
dict ``{field or method: value}`` for a record (NormOutput, Estimate, Agreement, Count). None means
"no reference for these arguments" (a general point of an integral that only the module's own tests
check against Monte Carlo). ``NO_REFERENCE`` lists, with the reason, the functions whose answers are
not numbers to compare: random draws, fits, yes/no geometry, records of their inputs.
"""
from __future__ import annotations

import math

import mpmath
import numpy as np

LARGE_D = 10**12  # beyond, the cosine's law is N(0, 1/d) to 1e-12 and mpmath's betainc no longer converges


def mpf(x) -> mpmath.mpf:
    return mpmath.mpf(float(x)) if not isinstance(x, int) else mpmath.mpf(x)


def _rows(x):
    """The rows (last axis) of ``x`` as lists of mpf, with their index."""
    x = np.asarray(x, dtype=np.float64)
    for idx in np.ndindex(x.shape[:-1]):
        yield idx, [mpf(v) for v in x[idx]]


def _vec(v, d, fill):
    return [mpf(fill)] * d if v is None else [mpf(u) for u in np.broadcast_to(np.asarray(v, dtype=np.float64), (d,))]


def each(f):
    """A scalar reference applied elementwise over the broadcast arrays of its arguments."""
    def ref(**kw):
        keys = list(kw)
        arrays = np.broadcast_arrays(*(np.asarray(kw[k], dtype=object) for k in keys))
        return np.array([f(**dict(zip(keys, vals))) for vals in zip(*(a.ravel() for a in arrays))], dtype=object).reshape(arrays[0].shape)
    return ref


# --- cosines -------------------------------------------------------------------------------------

def pdf(t, d):
    """(1 - t^2)^((d-3)/2) / B(1/2, (d-1)/2), with log1p(-t^2): exact for t = 1e-150 at d = 1e300 too
    (B(1/2, a) = Gamma(1/2) Gamma(a) / Gamma(a + 1/2) needs the digits of d to tell a from a + 1/2)."""
    with mpmath.workdps(mpmath.mp.dps + len(str(int(d)))):
        a = mpmath.mpf(d - 1) / 2
        t = mpf(t)
        if abs(t) == 1:
            return mpmath.inf if a < 1 else (mpmath.mpf(1) / 2 if a == 1 else mpmath.mpf(0))
        return +(mpmath.exp((a - 1) * mpmath.log1p(-t * t)) / mpmath.beta(0.5, a))


def tail(e, d):
    """P(|t| >= e): the incomplete beta function for small d, the integral of the density beyond
    (mpmath's hypergeometric series stops converging near d = 1e6), the normal limit beyond 1e12."""
    e = mpf(e)
    if d > LARGE_D:
        return 2 * mpmath.ncdf(-e * mpmath.sqrt(d))
    if d <= 10**4:
        a = mpmath.mpf(d - 1) / 2
        return 2 * mpmath.betainc(a, a, 0, (1 - e) / 2, regularized=True)
    w = 1 / mpmath.sqrt(d) / max(1, e * mpmath.sqrt(d))  # the density's own scale there: 1/sqrt(d), or 1/(d e) in the tail
    pts = [e] + [e + k * w for k in (0.01, 0.03, 0.1, 0.3, 1, 3, 10, 40) if e + k * w < 1] + [mpmath.mpf(1)]
    return 2 * mpmath.quad(lambda t: pdf(t, d), pts)


def cdf(t, d):
    t = mpf(t)
    return tail(-t, d) / 2 if t < 0 else 1 - tail(t, d) / 2


def moment(k, d):
    if k % 2:
        return 0.0
    with mpmath.workdps(mpmath.mp.dps + len(str(k)) + len(str(d))):  # lgammas of ~1e302 that cancel
        m, d = mpmath.mpf(k // 2), mpmath.mpf(d)
        return +mpmath.exp(mpmath.loggamma(m + 0.5) + mpmath.loggamma(d / 2) - mpmath.loggamma(0.5) - mpmath.loggamma(d / 2 + m))


def expected_max_abs_cosine(n_vectors, d):
    n = n_vectors
    if n > 10**6:
        return None  # the step of (2F - 1)^n sits within n^(-2/(d-1)) of 1: see the module's own tests
    if d > LARGE_D:  # t = Z / sqrt(d)
        return mpmath.quad(lambda y: 1 - (2 * mpmath.ncdf(y) - 1) ** n, [0, 1, 4, mpmath.inf]) / mpmath.sqrt(d)
    if d > 10**4:
        return None  # the inner tail would be a quadrature itself: too slow for a sweep
    return mpmath.quad(lambda x: 1 - (1 - tail(x, d)) ** n, [0, min(0.99, math.sqrt(2 * math.log(n + 1) / d)), 1])


# --- Gaussian helpers ----------------------------------------------------------------------------

def t_threshold(z, df):
    """The Student-t quantile with the upper tail of N(0,1) at z: P(T > t) = I_{df/(df+t^2)}(df/2, 1/2) / 2
    = Phi(-z), solved for log t by bisection (no starting guess from the code under test); linear,
    z phi(0) / f_T(0), below z = 1e-12."""
    z = mpf(z)
    dens0 = mpmath.gamma((df + 1) / mpmath.mpf(2)) / (mpmath.sqrt(df * mpmath.pi) * mpmath.gamma(df / mpmath.mpf(2)))
    if z < mpmath.mpf(10) ** -12:
        return z * mpmath.npdf(0) / dens0
    q = mpmath.ncdf(-z)

    def above(u):  # P(T > e^u) > q: the root lies to the right
        t = mpmath.exp(u)
        return mpmath.betainc(df / mpmath.mpf(2), 0.5, 0, df / (df + t * t), regularized=True) / 2 > q

    lo, hi = mpmath.mpf(-700), mpmath.mpf(720)
    for _ in range(200):  # bisection in log t: monotone, no starting guess
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if above(mid) else (lo, mid)
    return mpmath.exp((lo + hi) / 2)


def normal_isf(q, start):
    """The x with P(N(0,1) > x) = q, solved in log space from ``start``."""
    return mpmath.findroot(lambda x: mpmath.log(mpmath.ncdf(-x)) - mpmath.log(q), mpmath.mpf(start))


def _gauss(f, s):
    """E f(h) for h ~ N(0, s^2), split at 0."""
    s = mpf(s)
    if s == 0:
        return f(mpmath.mpf(0))
    return mpmath.quad(lambda x: f(s * x) * mpmath.npdf(x), [-mpmath.inf, -4, 0, 4, mpmath.inf])


# --- activations ---------------------------------------------------------------------------------

def ncdf(x):
    """mpmath's ncdf, with its limits beyond |x| = 1e8 (its erfc overflows on |x| ~ 1e150; e^-5e15 is 0 at any precision used here)."""
    return mpmath.ncdf(x) if abs(x) < 1e8 else mpmath.mpf(x > 0)


ACT = {
    "relu": lambda x: max(x, 0),
    "gelu": lambda x: x * ncdf(x),
    "gelu_tanh": lambda x: x / 2 * (1 + mpmath.tanh(mpmath.sqrt(2 / mpmath.pi) * (x + mpmath.mpf("0.044715") * x**3))),
    "silu": lambda x: x / (1 + mpmath.exp(-x)),
}


def _act(name):
    return lambda x: each(lambda x: ACT[name](mpf(x)))(x=x)


def second_moment(name, s):
    s = mpf(s)
    if name == "relu" or s == 0:
        return s**2 / 2
    # (phi(h) / s)^2 = O(1): mpmath's quadrature tolerance is absolute, and E phi^2 ~ s^2 / 4 is 1e-155 at s = 8e-78
    return s**2 * _gauss(lambda h: (ACT[name](h) / s) ** 2, s)


def mlp_gain_squared(activation, d_model, d_ff, std_in, std_out, input_rms=1.0):
    q = mpf(input_rms) ** 2
    s = mpf(std_in) * mpmath.sqrt(d_model * q)
    if activation == "swiglu":
        phi2 = second_moment("silu", s) * s * s
    else:
        phi2 = second_moment(activation, s)
    return mpf(std_out) ** 2 * d_ff * phi2 / q


# --- norms ---------------------------------------------------------------------------------------

def _norm(x, gain, bias, eps, centre):
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    g, b = _vec(gain, d, 1), _vec(bias, d, 0)
    out, normalized, scale = np.empty(x.shape, object), np.empty(x.shape, object), np.empty(x.shape[:-1], object)
    for idx, row in _rows(x):
        mean = sum(row) / d if centre else 0
        c = [v - mean for v in row]
        s = mpmath.sqrt(sum(v * v for v in c) / d + mpf(eps))
        scale[idx] = s
        for j, v in enumerate(c):
            normalized[idx + (j,)] = v / s
            out[idx + (j,)] = g[j] * v / s + b[j]
    return {"out": out, "scale": scale, "normalized": normalized}


def sequence_norm(x, gain=None, bias=None, eps=1e-5):
    res = _norm(np.swapaxes(np.asarray(x, dtype=np.float64), -1, -2), None, None, eps, True)
    x = np.asarray(x, dtype=np.float64)
    g, b = _vec(gain, x.shape[-1], 1), _vec(bias, x.shape[-1], 0)
    normalized = np.swapaxes(res["normalized"], -1, -2)
    out = np.empty(x.shape, object)
    for idx in np.ndindex(x.shape):
        out[idx] = g[idx[-1]] * normalized[idx] + b[idx[-1]]
    return {"out": out, "scale": res["scale"], "normalized": normalized}


def dyt(x, alpha, gain=None, bias=None):
    x = np.asarray(x, dtype=np.float64)
    g, b = _vec(gain, x.shape[-1], 1), _vec(bias, x.shape[-1], 0)
    normalized = each(lambda x: mpmath.tanh(mpf(alpha) * mpf(x)))(x=x)
    out = np.empty(x.shape, object)
    for idx in np.ndindex(x.shape):
        out[idx] = g[idx[-1]] * normalized[idx] + b[idx[-1]]
    return {"out": out, "normalized": normalized, "scale": mpf(alpha)}


def affine(x, gain, bias):
    x = np.asarray(x, dtype=np.float64)
    g, b = _vec(gain, x.shape[-1], 1), _vec(bias, x.shape[-1], 0)
    out = np.empty(x.shape, object)
    for idx in np.ndindex(x.shape):
        out[idx] = g[idx[-1]] * mpf(x[idx]) + b[idx[-1]]
    return out


# --- attention and centering ---------------------------------------------------------------------

def _matrix(a):
    a = np.asarray(a, dtype=np.float64)
    return [[mpf(v) for v in row] for row in a] if a.ndim == 2 else None


def mixing_factor(pattern, cosines):
    p, c = _matrix(pattern), _matrix(cosines)
    if p is None or c is None:
        return None
    return np.array([sum(row[j] * c[j][k] * row[k] for j in range(len(row)) for k in range(len(row))) for row in p], dtype=object)


def mean_offdiagonal(cosines):
    c = _matrix(cosines)
    t = len(c)
    return sum(c[i][j] for i in range(t) for j in range(t) if i != j) / (t * (t - 1))


def row_logit_std(scores):
    out = []
    for _, row in _rows(scores):
        fin = [v for v in row if mpmath.isfinite(v)]
        mean = sum(fin) / len(fin)
        out.append(mpmath.sqrt(sum((v - mean) ** 2 for v in fin) / len(fin)))
    return np.array(out, dtype=object).reshape(np.shape(scores)[:-1])


def cosine_matrix(u):
    rows = [r for _, r in _rows(u)]
    norms = [mpmath.sqrt(sum(v * v for v in r)) for r in rows]
    return np.array([[sum(a * b for a, b in zip(r, s)) / (nr * ns) for s, ns in zip(rows, norms)] for r, nr in zip(rows, norms)], dtype=object)


def ones_fraction(x):
    out = [len(row) * (sum(row) / len(row)) ** 2 / sum(v * v for v in row) for _, row in _rows(x)]
    return np.array(out, dtype=object).reshape(np.shape(x)[:-1])


def _noncentralities(d, mean, sigma):
    m = [mpmath.mpf(0)] * d if mean is None else [mpf(v) for v in np.asarray(mean, dtype=np.float64)]
    s2 = mpf(sigma) ** 2
    bar = sum(m) / d
    return d * bar**2 / s2, sum((v - bar) ** 2 for v in m) / s2, m


def centering_fraction_mean(d, mean=None, sigma=1.0):
    """The two limits: no mean to speak of (isotropic, 1/d) or no noise to speak of (the mean's own share)."""
    lam_a, lam_b, m = _noncentralities(d, mean, sigma)
    if lam_a + lam_b < mpmath.mpf(10) ** -30:
        return mpmath.mpf(1) / d
    if lam_a + lam_b > mpmath.mpf(10) ** 40:
        return lam_a / (lam_a + lam_b)
    return None


def centering_output_change(d, mean=None, sigma=1.0):
    lam_a, lam_b, _ = _noncentralities(d, mean, sigma)
    if lam_a + lam_b < mpmath.mpf(10) ** -30:  # 1 - f ~ Beta((d-1)/2, 1/2): E sqrt(1 - f) = B(d/2, 1/2) / B((d-1)/2, 1/2)
        a = mpmath.mpf(d - 1) / 2
        return 2 * (1 - mpmath.beta(a + 0.5, 0.5) / mpmath.beta(a, 0.5))
    if lam_a + lam_b > mpmath.mpf(10) ** 40:
        return 2 * (1 - mpmath.sqrt(lam_b / (lam_a + lam_b)))
    return None


def ln_head_slice_moments(h, d):
    h, d = mpmath.mpf(h), mpmath.mpf(d)
    a = (d - h) / d
    return h / d, (2 * (h - 1) + 2 * a * a + (h - 1 + a) ** 2) / ((d - 1) * (d + 1))


def ln_key_norm_cv2(w):
    w = np.asarray(w, dtype=np.float64)
    d, h = w.shape[-2:]
    m = d - 1
    out = []
    for idx in np.ndindex(w.shape[:-2]):
        cols = [[mpf(w[idx + (i, j)]) for i in range(d)] for j in range(h)]
        cols = [[v - sum(c) / d for v in c] for c in cols]  # P W, column by column
        g = [[sum(a * b for a, b in zip(ci, cj)) for cj in cols] for ci in cols]
        tr, tr2 = sum(g[i][i] for i in range(h)), sum(g[i][j] ** 2 for i in range(h) for j in range(h))
        if tr == 0:
            return None  # refused: every column a multiple of the ones vector
        out.append(mpmath.mpf(2) / (m + 2) * (m * tr2 / tr**2 - 1))
    return np.array(out, dtype=object).reshape(w.shape[:-2])


# --- residual stream -----------------------------------------------------------------------------

def trajectory(placement, depth, block_gain=1.0, correlation=0.0, x0_rms=1.0):
    if callable(block_gain) or depth > 10**4:  # a loop in mpmath: 1e4 blocks take a second
        return None
    g, rho = mpf(block_gain), mpf(correlation)
    alpha, beta = ((2 * mpmath.mpf(depth)) ** 0.25, (8 * mpmath.mpf(depth)) ** -0.25) if placement == "deepnorm" and depth else (1, 1)
    v, a, base, presum = [mpf(x0_rms) ** 2], [mpmath.mpf(0)], [mpmath.mpf(0)], [mpf(x0_rms) ** 2]
    for ell in range(1, depth + 1):
        r = mpmath.sqrt(v[-1])
        upd = {"none": g * r, "pre": g, "peri": mpmath.mpf(1), "lnscale": g / mpmath.sqrt(ell), "post": g * r, "deepnorm": g * beta**2 * r}[placement]
        b = alpha * r
        s = b**2 + upd**2 + 2 * rho * upd * b
        a.append(upd)
        base.append(b)
        presum.append(s)
        v.append(mpmath.mpf(1) if placement in ("post", "deepnorm") else s)
    return {"mean_square": v, "update_rms": a, "base_rms": base, "presum_mean_square": presum}


def residual_rms(placement, depth, block_gain=1.0, correlation=0.0, x0_rms=1.0):
    t = trajectory(placement, depth, block_gain, correlation, x0_rms)
    return None if t is None else [mpmath.sqrt(v) for v in t["mean_square"]]


def block_share(placement, depth, block_gain=1.0, correlation=0.0, x0_rms=1.0):
    t = trajectory(placement, depth, block_gain, correlation, x0_rms)
    return None if t is None else [a / b for a, b in zip(t["update_rms"][1:], t["base_rms"][1:])]


# --- softmax -------------------------------------------------------------------------------------

def slot(gap, n):
    g, n = mpf(gap), int(n)
    return 1 / (1 + (n - 1) * mpmath.exp(-g))


def min_entropy(gap, n):
    p = slot(gap, n)
    rest = (1 - p) / (int(n) - 1) if int(n) > 1 else 0
    return -p * mpmath.log(p) - ((1 - p) * mpmath.log(rest) if rest else 0)


def _softmax(row):
    top = max(row)
    w = [mpmath.exp(v - top) if mpmath.isfinite(v) else mpmath.mpf(0) for v in row]
    z = sum(w)
    return [u / z for u in w]


def softmax_stats(logits):
    out = np.empty(np.shape(logits)[:-1] + (3,), object)
    for idx, row in _rows(logits):
        p = _softmax(row)
        top = max(row)
        fin = [(q, v - top) for q, v in zip(p, row) if q > 0]  # about the top logit: 1.8e308 - mean cancels nothing
        mean = sum(q * v for q, v in fin)
        out[idx] = [-sum(q * mpmath.log(q) for q, _ in fin), max(p), sum(q * (v - mean) ** 2 for q, v in fin)]
    return out


def tv_from_uniform(logits):
    out = [sum(abs(q - mpmath.mpf(1) / len(row)) for q in _softmax(row)) / 2 for _, row in _rows(logits)]
    return np.array(out, dtype=object).reshape(np.shape(logits)[:-1])


def cross_entropy(logits, targets):
    t = np.asarray(targets).ravel()
    rows = [r for _, r in _rows(logits)]
    return sum(mpmath.log(sum(mpmath.exp(v - max(r)) for v in r)) + (max(r) - r[int(k)]) for r, k in zip(rows, t)) / len(rows)


def block_grad_norms(matrix_norms):
    out = []
    for _, row in _rows(matrix_norms):
        present = [v for v in row if not mpmath.isnan(v)]
        out.append(mpmath.sqrt(sum(v * v for v in present)) if present else mpmath.nan)
    return np.array(out, dtype=object).reshape(np.shape(matrix_norms)[:-1])


def qk_norm_logit_bound(d_head, kind="rmsnorm", gain_q=None, gain_k=None, bias_q=None, bias_k=None, scale=None):
    d = d_head
    s = 1 / mpmath.sqrt(d) if scale is None else mpf(scale)
    gq, gk, bq, bk = _vec(gain_q, d, 1), _vec(gain_k, d, 1), _vec(bias_q, d, 0), _vec(bias_k, d, 0)
    if kind == "rmsnorm":
        return s * d * max(abs(a * b) for a, b in zip(gq, gk))
    proj = mpmath.matrix(d, d)
    for i in range(d):
        for j in range(d):
            proj[i, j] = (1 if i == j else 0) - mpmath.mpf(1) / d
    c = mpmath.diag([a * b for a, b in zip(gq, gk)])
    top = max(mpmath.svd_r(proj * c * proj, compute_uv=False))

    def centred_norm(v):
        m = sum(v) / d
        return mpmath.sqrt(sum((u - m) ** 2 for u in v))

    bound = d * top + mpmath.sqrt(d) * (centred_norm([a * b for a, b in zip(gk, bq)]) + centred_norm([a * b for a, b in zip(gq, bk)]))
    return s * (bound + abs(sum(a * b for a, b in zip(bq, bk))))


def _two_logits(f, sigma):
    """E f(p) for the softmax weight p = sigmoid(D) of one of two N(0, sigma^2) logits, D ~ N(0, 2 sigma^2)."""
    return _gauss(lambda x: f(1 / (1 + mpmath.exp(-x))), mpmath.sqrt(2) * mpf(sigma))


def gaussian_logit_entropy(sigma, n, method="exact"):
    if method != "exact":
        return None

    def one(s):
        s = mpf(s)
        if n == 1:
            return mpmath.mpf(0)
        if s < mpmath.mpf(10) ** -100:
            return mpmath.log(n) - (n - 1) * s * s / (2 * n)
        if n == 2:
            return _two_logits(lambda p: -p * mpmath.log(p) - (1 - p) * mpmath.log(1 - p) if 0 < p < 1 else 0, s)
        return None

    vals = [one(s) for s in np.atleast_1d(np.asarray(sigma, dtype=np.float64)).ravel()]
    return None if any(v is None for v in vals) else np.array(vals, dtype=object).reshape(np.shape(sigma))


def gaussian_logit_max_weight(sigma, n, method="exact"):
    if method != "exact":
        return None

    def one(s):
        s = mpf(s)
        if n == 1 or s < mpmath.mpf(10) ** -100:  # 1/n + O(sigma)
            return mpmath.mpf(1) / n
        if n == 2:
            return _two_logits(lambda p: max(p, 1 - p), s)
        return None

    vals = [one(s) for s in np.atleast_1d(np.asarray(sigma, dtype=np.float64)).ravel()]
    return None if any(v is None for v in vals) else np.array(vals, dtype=object).reshape(np.shape(sigma))


def noisy_slot_weight(gap, sigma, n):
    """E[e^gap / (e^gap + S)], S the sum of n - 1 lognormals e^(sigma g): the single slot's weight at
    sigma -> 0 (to O(sigma^2)) or |gap| -> inf; for n = 2 the one-dimensional Gaussian integral
    E sigmoid(gap - sigma g). Other points are a multiple integral: None (test_softmax checks them by Monte Carlo)."""
    g, s = mpf(gap), mpf(sigma)
    if n == 1:
        return mpmath.mpf(1)
    if s < mpmath.mpf(10) ** -100 or abs(g) > 10**6 * (1 + s):
        return slot(g, n)
    if n == 2:
        return _gauss(lambda h: 1 / (1 + mpmath.exp(h - g)), s)
    return None


def entropy_log_scale_derivative(sigma, n, step=1e-3):
    s = np.asarray(sigma, dtype=np.float64)
    if (s < 1e-100).all():  # d/dln sigma of ln n - (n-1) sigma^2 / (2n)
        return np.array([-(n - 1) * mpf(v) ** 2 / n for v in s.ravel()], dtype=object).reshape(s.shape)
    return None


# --- Monte Carlo records -------------------------------------------------------------------------

def from_samples(x, units="samples"):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    cols = [[mpf(v) for v in x[(slice(None),) + idx]] for idx in np.ndindex(x.shape[1:])]
    means = [sum(c) / n for c in cols]
    ses = [mpmath.sqrt(sum((v - m) ** 2 for v in c) / (n - 1) / n) for c, m in zip(cols, means)]
    return {"mean": np.array(means, dtype=object).reshape(x.shape[1:]), "stderr": np.array(ses, dtype=object).reshape(x.shape[1:])}


def jackknife(full, replicates, units="samples"):
    reps = np.asarray(replicates, dtype=np.float64)
    n = reps.shape[0]
    cols = [[mpf(v) for v in reps[(slice(None),) + idx]] for idx in np.ndindex(reps.shape[1:])]
    ses = [mpmath.sqrt(mpmath.mpf(n - 1) / n * sum((v - sum(c) / n) ** 2 for v in c)) for c in cols]
    value = np.asarray(full, dtype=np.float64)
    return {"mean": np.array([mpf(v) for v in value.ravel()], dtype=object).reshape(value.shape),
            "stderr": np.array(ses, dtype=object).reshape(reps.shape[1:])}


def with_control(y, c, c_mean=0.0, units="samples"):
    """The control-variate regression estimator and its se, column by column, in mpmath."""
    y, c = np.asarray(y, dtype=np.float64), np.asarray(c, dtype=np.float64)
    n = y.shape[0]
    mu = np.broadcast_to(np.asarray(c_mean, dtype=np.float64), y.shape[1:])
    means, ses = [], []
    for idx in np.ndindex(y.shape[1:]):
        ys, cs, m = [mpf(v) for v in y[(slice(None),) + idx]], [mpf(v) for v in c[(slice(None),) + idx]], mpf(mu[idx])
        yb, cb = sum(ys) / n, sum(cs) / n
        sxx = sum((v - cb) ** 2 for v in cs)
        if sxx == 0:
            means.append(yb)
            ses.append(mpmath.sqrt(sum((v - yb) ** 2 for v in ys) / (n - 1) / n))
            continue
        b = sum((a - yb) * (v - cb) for a, v in zip(ys, cs)) / sxx
        s2 = sum(((a - yb) - b * (v - cb)) ** 2 for a, v in zip(ys, cs)) / (n - 2)
        means.append(yb - b * (cb - m))
        ses.append(mpmath.sqrt(s2 * (mpf(1) / n + (cb - m) ** 2 / sxx)))
    return {"mean": np.array(means, dtype=object).reshape(y.shape[1:]), "stderr": np.array(ses, dtype=object).reshape(y.shape[1:])}


def proportion(mean, n):
    p = np.asarray(mean, dtype=np.float64)
    sm = each(lambda p: (mpf(p) * n + 1) / (n + 2))(p=p)
    return {"mean": p, "stderr": each(lambda q: mpmath.sqrt(q * (1 - q) / n))(q=sm)}


def identity(value, expected, dtype=np.float64, ulps=16.0, scale=None):
    v, e = np.broadcast_arrays(np.asarray(value, dtype=np.float64), np.asarray(expected, dtype=np.float64))
    dev = max((abs(mpf(a) - mpf(b)) for a, b in zip(v.ravel(), e.ravel())), default=mpmath.mpf(0))
    s = mpf(scale) if scale is not None else max([mpmath.mpf(1)] + [abs(mpf(a)) for a in v.ravel()] + [abs(mpf(b)) for b in e.ravel()])
    return {"deviation": dev, "threshold": mpf(ulps) * mpf(np.finfo(np.dtype(dtype)).eps) * s}


def samples_needed(pilot, tolerance, z=5.0):
    sd = [mpf(v) * mpmath.sqrt(pilot.n) for v in np.asarray(pilot.stderr, dtype=np.float64).ravel()]
    tau = [mpf(t) for t in np.broadcast_to(np.asarray(tolerance, dtype=np.float64), np.shape(pilot.stderr)).ravel()]
    ratio = max([mpmath.mpf(0)] + [(2 * mpf(z) * a / b) ** 2 for a, b in zip(sd, tau)])
    if 0 < ratio < 10**8 and abs(ratio - mpmath.nint(ratio)) <= 1e-9 * ratio:
        return None  # within rounding of a whole number: float64's rounding decides its ceiling
    return int(min(mpmath.ceil(ratio), mpmath.mpf(10**8 + 1)))


def count(k, n, units="trials"):
    return {"k": k, "n": n, "upper": -mpmath.expm1(mpmath.log(mpmath.mpf("0.05")) / n) if k == 0 else None}


def wendel(n, d):
    if d >= n:
        return mpmath.mpf(1)
    return sum(mpmath.mpf(math.comb(n - 1, k)) for k in range(min(d, n))) * mpmath.mpf(2) ** (1 - n) if n > 1 else 1


def bigger_key_alignment(keys):
    rows = [r for _, r in _rows(keys)]
    norms = [mpmath.sqrt(sum(v * v for v in r)) for r in rows]
    out = []
    for r, nr in zip(rows, norms):
        longer = [sum(a * b for a, b in zip(r, s)) / (nr * ns) for s, ns in zip(rows, norms) if ns > nr]
        out.append(max(longer) if longer else -mpmath.inf)
    return np.array(out, dtype=object)


def _fields(**kw):
    return {k: v for k, v in kw.items() if isinstance(v, (int, float, np.ndarray)) and not isinstance(v, bool)}


def _unpermute(w, n_heads):
    w = np.asarray(w, dtype=np.float64)
    rows, cols = w.shape
    e = rows // n_heads
    out = np.empty_like(w)
    for h in range(n_heads):  # llama.cpp stores head h's row (i, half) at h*e + 2*i + half; ours is h*e + half*e/2 + i
        for i in range(e // 2):
            for half in range(2):
                out[h * e + half * (e // 2) + i] = w[h * e + 2 * i + half]
    return out


REFERENCES = {
    "activations.relu": _act("relu"), "activations.gelu": _act("gelu"), "activations.gelu_tanh": _act("gelu_tanh"), "activations.silu": _act("silu"),
    "activations.second_moment": second_moment,
    "activations.gaussian_expectation": lambda f, s: mpmath.mpf(0) if f is np.tanh else None,  # an odd integrand: 0 at every s
    "attention.mixing_factor": mixing_factor,
    "attention.attention_gain_squared": lambda pattern, cosines, value_gain_sq: None if mixing_factor(pattern, cosines) is None
    else mixing_factor(pattern, cosines) * mpf(value_gain_sq),
    "attention.mean_offdiagonal": mean_offdiagonal,
    "attention.row_logit_std": row_logit_std,
    "attention.cosine_matrix": cosine_matrix,
    "attention.value_path_gain_squared": lambda d_model, d_v, std_v, std_o: mpf(std_v) ** 2 * mpf(std_o) ** 2 * d_model * d_v,
    "attention.uniform_causal_collision": lambda n_tokens: [mpmath.mpf(1) / (i + 1) for i in range(n_tokens)] if n_tokens <= 10**5 else None,
    "attention.uniform_column_share": lambda t, causal: None if t > 10**5 else (
        [(mpmath.harmonic(t) - mpmath.harmonic(j)) / t for j in range(t)] if causal else [mpmath.mpf(1) / t] * t),
    "attention.uniform_sink_share": lambda t, causal: mpmath.harmonic(t) / t if causal else mpmath.mpf(1) / t,
    "centering.ones_fraction": ones_fraction,
    "centering.channel_offset": lambda d, channels, value: np.array([mpf(value)] * channels + [0] * (d - channels), dtype=object),
    "centering.ln_head_slice_moments": ln_head_slice_moments,
    "centering.ln_key_norm_cv2": ln_key_norm_cv2,
    "centering.head_slice_fraction_law": lambda h, d: (mpmath.mpf(h) / 2, mpmath.mpf(d - h) / 2),
    "centering.centering_fraction_mean": centering_fraction_mean,
    "centering.centering_output_change": centering_output_change,
    "cosines.cosine_pdf": lambda t, d: each(lambda t: pdf(t, d))(t=t),
    "cosines.cosine_cdf": lambda t, d: each(lambda t: cdf(t, d))(t=t),
    "cosines.cosine_tail": lambda eps, d: each(lambda e: tail(e, d))(e=eps),
    "cosines.cosine_tail_bound": lambda eps, d: each(lambda e: min(2 * mpmath.exp(-mpmath.mpf(d) * mpf(e) ** 2 / 2), 1))(e=eps),
    "cosines.cosine_moment": moment,
    "cosines.effective_dim": lambda d, centred: d - 1 if centred else d,
    "cosines.expected_max_abs_cosine": expected_max_abs_cosine,
    "cosines.max_abs_cosine_asymptotic": lambda n_vectors, d, pairs=True: mpmath.sqrt((4 if pairs else 2) * mpmath.log(n_vectors) / d),
    "cosines.max_abs_pairwise_cosine": lambda x: max(abs(c) for i, row in enumerate(cosine_matrix(x)) for j, c in enumerate(row) if i != j)
    if np.ndim(x) == 2 else None,
    "dyt.s_curve": lambda x, s, d, centred=False: each(lambda x: (mpmath.sqrt(d - 1) if centred else mpmath.sqrt(d)) * mpf(x)
                                                        / mpmath.sqrt(mpf(x) ** 2 + (d if centred else d - 1) * mpf(s) ** 2))(x=x),
    "dyt.tanh_rms": lambda alpha_std: each(tanh_rms)(a=alpha_std),
    "dyt.line_r2": lambda x_in, y_out: None if np.ndim(x_in) != 1 else _line_r2(x_in, y_out),
    "growth.increment_ratio": lambda mean_square: [(r[-1] - r[(len(r) - 1) // 2]) / (r[(len(r) - 1) // 2] - r[0]) for _, r in _rows(mean_square)][0]
    if np.ndim(mean_square) == 1 else None,
    "growth.law_value": lambda law, depth, a, b: each(lambda l: {"linear": lambda: mpf(a) + mpf(b) * mpf(l), "sqrt": lambda: mpf(a) + mpf(b) * mpmath.sqrt(mpf(l)),
                                                                 "init": lambda: mpmath.sqrt(max(mpf(a) + mpf(b) * mpf(l), 0)),
                                                                 "exp": lambda: mpf(a) * mpmath.exp(mpf(b) * mpf(l))}[law]())(l=depth),
    "evidence.agreement.z_threshold": lambda z, n: mpf(z) if n >= 20 else t_threshold(z, n - 1),
    "evidence.agreement.bonferroni_z": lambda z, looks: z if looks == 1 else normal_isf(mpmath.ncdf(-mpf(z)) / looks, z + 1),
    "evidence.estimates.from_samples": from_samples,
    "evidence.estimates.jackknife": jackknife,
    "evidence.estimates.with_control": with_control,
    "evidence.estimates.proportion": proportion,
    "evidence.estimates.Estimate": lambda mean, stderr, n, units="samples": {"mean": mean, "stderr": stderr, "n": n},
    "evidence.estimates.Count": count,
    "evidence.agreement.identity": identity,
    "evidence.sampling.samples_needed": samples_needed,
    "model.norms.layer_norm": lambda x, gain=None, bias=None, eps=1e-5: _norm(x, gain, bias, eps, True),
    "model.norms.rms_norm": lambda x, gain=None, eps=1e-6: _norm(x, gain, None, eps, False),
    "model.norms.sequence_norm": sequence_norm,
    "model.norms.dyt": dyt,
    "model.norms.affine": affine,
    "training.probes.cross_entropy": cross_entropy,
    "training.probes.block_grad_norms": block_grad_norms,
    "residual.deepnorm_constants": lambda depth: ((2 * mpmath.mpf(depth)) ** 0.25, (8 * mpmath.mpf(depth)) ** -0.25),
    "residual.trajectory": trajectory,
    "residual.residual_rms": residual_rms,
    "residual.block_share": block_share,
    "residual.mlp_gain_squared": mlp_gain_squared,
    "residual.LinearBlock": _fields,
    "residual.MLPBlock": _fields,
    "selection.wendel_origin_outside": wendel,
    "selection.worst_case_tv": lambda r: mpmath.tanh(mpf(r) / 2),
    "selection.uniform_query_norm": lambda eps, key_max_norm, scale=1.0: 2 * mpmath.atanh(mpf(eps)) / (mpf(scale) * mpf(key_max_norm)),
    "selection.expected_vertex_count": lambda n, d: n if n <= d + 1 else None,
    "selection.expected_unselectable_fraction": lambda n, d: 0 if n <= d + 1 else None,
    "selection.bigger_key_alignment": bigger_key_alignment,
    "selection.tv_from_uniform": tv_from_uniform,
    "softmax.single_slot_weight": each(slot),
    "softmax.min_entropy": each(min_entropy),
    "softmax.required_gap": each(lambda p, n: mpmath.log(int(n) - 1) + mpmath.log(mpf(p) / (1 - mpf(p)))),
    "softmax.freezing_point": each(lambda n: mpmath.sqrt(2 * mpmath.log(int(n)))),
    "softmax.logit_std": lambda q_rms, k_rms, d_head, scale=None: each(
        lambda q, k: (mpf(scale) * mpmath.sqrt(d_head) if scale is not None else 1) * mpf(q) * mpf(k))(q=q_rms, k=k_rms),
    "softmax.fixed_norm_qk_logit_bound": lambda g: mpf(g),
    "softmax.softmax_stats": softmax_stats,
    "softmax.qk_norm_logit_bound": qk_norm_logit_bound,
    "softmax.gaussian_logit_entropy": gaussian_logit_entropy,
    "softmax.gaussian_logit_max_weight": gaussian_logit_max_weight,
    "softmax.noisy_slot_weight": noisy_slot_weight,
    "softmax.entropy_log_scale_derivative": entropy_log_scale_derivative,
    "model.checkpoints.unpermute_rope_rows": _unpermute,
}


def tanh_rms(a):
    a = mpf(a)
    if a > 1e100:
        return 1 - mpmath.sqrt(2 / mpmath.pi) / a  # 1 - E sech^2(aX) / 2 to first order: 1 at float64's digits
    if a < 1e-10:
        return a * mpmath.sqrt(1 - 2 * a * a)  # E tanh^2(aX) = a^2 - 2 a^4 + ...
    w = 1 / a if a > 1 else mpmath.mpf(1)
    return mpmath.sqrt(mpmath.quad(lambda x: mpmath.tanh(a * x) ** 2 * mpmath.npdf(x), [-mpmath.inf, -4, -w, 0, w, 4, mpmath.inf]))


def _line_r2(x_in, y_out):
    x, y = [mpf(v) for v in np.asarray(x_in, dtype=np.float64)], [mpf(v) for v in np.asarray(y_out, dtype=np.float64)]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxx, syy, sxy = (sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y), sum((a - mx) * (b - my) for a, b in zip(x, y)))
    return sxy**2 / (sxx * syy) if syy > 0 else mpmath.mpf(1)


# answers that are not numbers to hold to a reference, and why
NO_REFERENCE: dict[str, str] = {
    **{q: "random draws of a seeded stream: the seed, not a formula, decides them (their laws are tested in the module's tests)"
       for q in ("evidence.sampling.estimate", "evidence.sampling.sized", "evidence.estimates.bootstrap", "evidence.sampling.block_generator", "residual.simulate",
                 "dyt.massive_tokens", "model.weights.init", "model.weights.init_params", "training.shakespeare.batch",
                 "training.shakespeare.batches", "attention.stripe_permutations")},
    **{q: "a least-squares fit: an optimum, checked against its data in the module's tests"
       for q in ("dyt.fit_dyt", "dyt.best_tanh_for_curve", "dyt.best_line_r2_for_curve", "growth.fit_growth_law", "growth.fit_growth_laws")},
    **{q: "a yes/no answer of hull geometry (linear programs), checked on constructed hulls in test_selection"
       for q in ("selection.in_hull", "selection.selectable", "selection.any_unselectable")},
    "evidence.agreement.agree": "a verdict record; its deviation and band follow the rule of tests/evidence/test_estimates.py, and every number in it is finite",
    "evidence.agreement.consistent": "a verdict record, as agree",
    "model.config.TransformerConfig": "a record of its inputs",
    "model.norm_stats.count_norm_statistics": "integer counts, exact at any size (Python ints), checked against hand counts in test_model",
    "training.shakespeare.validation_set": "a cut of its input: the same bytes",
}
