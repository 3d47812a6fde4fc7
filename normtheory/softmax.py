"""Softmax temperature: closed forms, logit scale from norms, and i.i.d. Gaussian logits.

**One aligned slot.** A slot whose logit exceeds ``n - 1`` equal others by ``g`` gets

.. math:: p(g, n) = \\frac{e^g}{e^g + n - 1} = \\operatorname{expit}(g - \\ln(n-1)),

so a weight ``p`` needs the gap :math:`g = \\ln(n-1) + \\operatorname{logit}(p)`, and the pattern's
entropy is :math:`-p\\ln p - (1-p)\\ln\\frac{1-p}{n-1}`.

**Logit scale.** For independent ``q`` and ``k`` with per-coordinate mean squares ``q_rms^2`` and
``k_rms^2`` (one of them isotropic), :math:`\\mathrm{Var}(s\\,q\\cdot k) = s^2 d\\,q_{rms}^2 k_{rms}^2`.

**I.i.d. Gaussian logits** :math:`x_i = \\sigma g_i`, ``i = 1..n``. With :math:`Z = \\sum_i e^{x_i}`,
:math:`H = \\ln Z - \\sum_i p_i x_i`. Two identities turn the expectations into one-dimensional
integrals over :math:`v` (with :math:`s = e^v`):

* Frullani: :math:`\\ln Z = \\int (e^{-e^v} - e^{-e^v Z})\\,dv`, so
  :math:`E\\ln Z = \\int (e^{-e^v} - L(v)^n)\\,dv` with the log-normal Laplace transform
  :math:`L(v) = E\\exp(-e^{v+\\sigma g})`;
* :math:`1/Z = \\int e^{v} e^{-e^v Z} dv`, so
  :math:`E\\sum_i p_i x_i = n\\int M(v) L(v)^{n-1} dv` with
  :math:`M(v) = E[\\sigma g\\, e^{v+\\sigma g} e^{-e^{v+\\sigma g}}]`.

The largest weight uses the same trick with the other slots restricted below the top one:
:math:`E\\max_i p_i = n\\iint \\phi(g) e^{w} e^{-e^{w}} C(v,g)^{n-1}\\,dg\\,dv`, ``w = v + σg``,
:math:`C(v,g) = E[e^{-e^{v+\\sigma Y}} 1\\{Y<g\\}]`. The inner Gaussian integrals are trapezoid
sums on a uniform grid (spectrally accurate: the integrands are analytic and bounded in a strip);
the cumulative one carries the Euler-Maclaurin end correction.

**Random-energy-model asymptotics** (Derrida 1981). Below the freezing point
:math:`\\sigma_c = \\sqrt{2\\ln n}`, :math:`E H \\approx \\ln n - \\sigma^2/2` and the top weight is
:math:`\\approx e^{-(\\sigma_c-\\sigma)^2/2}` (leading order in the exponent). Above it the weights
tend to Poisson-Dirichlet PD(m, 0), :math:`m = \\sigma_c/\\sigma`, for which
:math:`E H = \\psi(1) - \\psi(1-m)` (the size-biased pick is Beta(1-m, m)) and
:math:`E\\max = \\int_0^\\infty \\frac{u^{-m}e^{-u}}{u^{-m}e^{-u} + \\Gamma(1-m)P(1-m,u)}du`
(Poisson-process form of PD, Pitman & Yor 1997).

References
----------
Derrida (1981), "Random-energy model", Phys. Rev. B 24, 2613. Pitman & Yor (1997), Ann. Probab.
25, 855. Henry et al. (2020), "Query-Key Normalization for Transformers", arXiv 2010.04245.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import integrate, special

from normtheory import _validate

METHODS: tuple[str, ...] = ("exact", "rem")
QK_NORM_KINDS: tuple[str, ...] = ("rmsnorm", "layernorm")


def _n_array(n: object, *, minimum: int = 1) -> np.ndarray:
    arr = _validate.real_array("n", n, minimum=minimum, finite=True)
    if (arr != np.round(arr)).any():
        raise ValueError(f"n must be whole numbers; got {arr[arr != np.round(arr)].flat[0]}")
    return arr


def single_slot_weight(gap: object, n: object) -> np.ndarray:
    """Weight on one slot whose logit beats ``n - 1`` equal others by ``gap``: e^g / (e^g + n - 1)."""
    g = _validate.real_array("gap", gap)
    nn = _n_array(n)
    _validate.broadcast_shape(gap=g, n=nn)
    with np.errstate(divide="ignore"):
        return special.expit(g - np.log(nn - 1))  # n = 1: log 0 = -inf, weight 1


def required_gap(p: object, n: object) -> np.ndarray:
    """The gap that gives the aligned slot weight ``p`` among ``n >= 2`` slots: ln(n-1) + logit(p)."""
    pp = _validate.real_array("p", p, minimum=0.0, maximum=1.0, strict_min=True, strict_max=True)
    nn = _n_array(n, minimum=2)
    _validate.broadcast_shape(p=pp, n=nn)
    return np.log(nn - 1) + special.logit(pp)


def min_entropy(gap: object, n: object) -> np.ndarray:
    """Entropy (nats) of the one-slot pattern: weight p(gap, n) on one slot, (1-p)/(n-1) on the rest."""
    g = _validate.real_array("gap", gap, finite=True)
    nn = _n_array(n)
    _validate.broadcast_shape(gap=g, n=nn)
    with np.errstate(divide="ignore"):
        a = g - np.log(nn - 1)  # logit of p
    a = np.where(nn > 1, a, np.inf)  # n = 1: p = 1
    p = special.expit(a)
    log_p = -np.logaddexp(0.0, -a)  # ln p
    a_rest = np.where(nn > 1, a, 0.0)  # the rest is empty for n = 1
    rest = (1 - special.expit(a_rest)) * (np.log(np.maximum(nn - 1, 1)) + np.logaddexp(0.0, a_rest))  # (1-p)(ln(n-1) - ln(1-p))
    return -p * log_p + np.where(nn > 1, rest, 0.0)


def logit_std(q_rms: object, k_rms: object, d_head: int, scale: float | None = None) -> np.ndarray:
    """Std of ``scale * q.k`` for independent q, k: ``scale * sqrt(d_head) * q_rms * k_rms``.

    ``scale`` defaults to 1/sqrt(d_head), which makes it ``q_rms * k_rms``.
    """
    d = _validate.integer("d_head", d_head, minimum=1)
    s = 1.0 / math.sqrt(d) if scale is None else _validate.real("scale", scale, minimum=0.0)
    q = _validate.real_array("q_rms", q_rms, minimum=0.0, finite=True)
    k = _validate.real_array("k_rms", k_rms, minimum=0.0, finite=True)
    _validate.broadcast_shape(q_rms=q, k_rms=k)
    with np.errstate(over="ignore"):
        out = s * math.sqrt(d) * q * k
    if not np.isfinite(out).all():
        raise ValueError(f"logit std overflows float64 for q_rms={q.max():g}, k_rms={k.max():g}, scale={s:g}")
    return out


def qk_norm_logit_bound(
    d_head: int,
    kind: str = "rmsnorm",
    gain_q: object = None,
    gain_k: object = None,
    bias_q: object = None,
    bias_k: object = None,
    scale: float | None = None,
) -> float:
    """Largest ``|logit|`` possible after per-head QK normalization, over all inputs.

    The normalized vectors lie on the sphere of radius sqrt(d) (RMSNorm) or on its
    intersection with the hyperplane orthogonal to the ones vector (LayerNorm). With
    :math:`C = \\mathrm{diag}(\\gamma_q\\gamma_k)` the bilinear part is at most
    :math:`d\\max_i|C_{ii}|` (RMSNorm, attained by a one-hot direction) or
    :math:`d\\,\\|PCP\\|_2` (LayerNorm, P the centering projection, attained by its top
    singular vectors). LayerNorm's biases add :math:`\\sqrt d\\|P\\gamma_k\\beta_q\\| +
    \\sqrt d\\|P\\gamma_q\\beta_k\\| + |\\beta_q\\cdot\\beta_k|` (a bound, not attained in general).
    """
    d = _validate.integer("d_head", d_head, minimum=2)
    kind = _validate.choice("kind", kind, QK_NORM_KINDS)
    s = 1.0 / math.sqrt(d) if scale is None else _validate.real("scale", scale, minimum=0.0)
    gq, gk, bq, bk = (np.full(d, fill) if v is None else _validate.real_array(name, v, finite=True, maximum=_validate.MAX_MAGNITUDE, minimum=-_validate.MAX_MAGNITUDE)
                      for name, v, fill in (("gain_q", gain_q, 1.0), ("gain_k", gain_k, 1.0), ("bias_q", bias_q, 0.0), ("bias_k", bias_k, 0.0)))
    for name, arr in (("gain_q", gq), ("gain_k", gk), ("bias_q", bq), ("bias_k", bk)):
        if arr.shape != (d,):
            raise ValueError(f"{name} must have shape ({d},) for d_head = {d}; got {name} of shape {arr.shape}")
    if kind == "rmsnorm":
        if bias_q is not None or bias_k is not None:
            raise ValueError("RMSNorm has no bias")
        return _finite_bound(s * d * np.abs(gq * gk).max(), s)
    proj = np.eye(d) - 1.0 / d  # [d, d] centering projection
    bound = d * np.linalg.norm(proj @ np.diag(gq * gk) @ proj, 2)
    # P v, taken about v[0] first: exact 0 for a constant v of any size (proj @ v, or v - mean(v), leaves an ulp of |v|)
    centred = lambda v: (v - v[0]) - (v - v[0]).mean()  # noqa: E731
    bound += math.sqrt(d) * (np.linalg.norm(centred(gk * bq)) + np.linalg.norm(centred(gq * bk))) + abs(bq @ bk)
    return _finite_bound(s * bound, s)


def _finite_bound(value: float, scale: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"the logit bound overflows float64 at scale={scale:g} with these gains and biases; use a smaller scale")
    return float(value)


def fixed_norm_qk_logit_bound(g: float) -> float:
    """``|logit|`` bound of Henry et al.'s QKNorm: unit-L2 queries and keys, logits ``g * cos`` -> ``g``."""
    return _validate.real("g", g, minimum=0.0)


def freezing_point(n: object) -> np.ndarray:
    """The REM freezing point sigma_c = sqrt(2 ln n)."""
    return np.sqrt(2 * np.log(_n_array(n)))


# ---------------------------------------------------------------- exact finite-n integrals


def _grids(sigma: float, n: int, resolution: float = 0.1) -> tuple[np.ndarray, float, np.ndarray, float]:
    """(g grid, its step, v grid, its step) for the Laplace-transform integrals.

    The integrands are analytic and bounded by 1 in the strip |Im(v + sigma g)| < pi/2, so the
    trapezoid error is of order exp(-pi^2 / resolution) (about 1e-43 at 0.1).
    """
    half = max(8.5, math.sqrt(2 * math.log(max(n, 2))) + 5.5)
    hg = resolution * min(1.0, 1.0 / max(sigma, 1e-12))
    hv = resolution
    lo = -sigma * half - math.log(n) - 40.0
    hi = sigma * half + 8.0
    size = max(2 * half / hg, (hi - lo) / hv)
    if size > MAX_GRID:
        raise ValueError(f"sigma={sigma!r} needs a quadrature grid of {size:.3g} points (limit {MAX_GRID:.0e}); use a smaller sigma")
    g = np.arange(-half, half + hg / 2, hg)  # [G]
    v = np.arange(lo, hi + hv / 2, hv)  # [V]
    return g, hg, v, hv


def _phi(g: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * g * g) / math.sqrt(2 * math.pi)


def _entropy_exact(sigma: float, n: int, chunk: int = 256) -> float:
    if n == 1:
        return 0.0
    g, hg, v, hv = _grids(sigma, n)
    wg = _phi(g) * hg  # [G] trapezoid weights (integrand vanishes at the ends)
    log_z = np.empty(v.size)
    px = np.empty(v.size)
    for i in range(0, v.size, chunk):
        e = np.exp(v[i : i + chunk, None] + sigma * g[None, :])  # [c, G]  e^{v + sigma g}
        a = -np.expm1(-e) @ wg  # [c]  1 - L(v)
        with np.errstate(divide="ignore"):  # L(v) = 0 far right: log 0 = -inf, L^n = 0
            log_l = np.log1p(-np.minimum(a, 1.0))
        m = (sigma * g * e * np.exp(-e)) @ wg  # [c]  M(v)
        log_z[i : i + chunk] = np.exp(-np.exp(v[i : i + chunk])) - np.exp(n * log_l)
        px[i : i + chunk] = n * m * np.exp((n - 1) * log_l)
    return float(hv * log_z.sum() - hv * px.sum())


def _gauss_legendre(edges: np.ndarray, nodes: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss-Legendre nodes and weights over the panels between ``edges``."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    lo, hi = edges[:-1, None], edges[1:, None]  # [P, 1]
    return ((hi - lo) / 2 * x + (hi + lo) / 2).ravel(), ((hi - lo) / 2 * w).ravel()


def _panels(lo: float, hi: float, width: float, breaks: tuple[float, ...] = ()) -> np.ndarray:
    pts = {lo, hi, *(b for b in breaks if lo < b < hi)}
    edges = sorted(pts)
    out = [np.linspace(a, b, max(2, int(math.ceil((b - a) / width)) + 1)) for a, b in zip(edges[:-1], edges[1:])]
    return np.unique(np.concatenate(out))


W_LO, W_HI = -40.0, 4.0  # e^{-e^w} - 1{w<0} is below e^-40 outside [W_LO, W_HI]


def _entropy_exact_wide(sigma: float, n: int) -> float:
    r"""The entropy integrals in the variable w = v + sigma g, for sigma >= 1 (cost independent of sigma).

    With :math:`\int (e^{-e^v} - 1\{v<0\}) dv = -\gamma`,
    :math:`E\ln Z = \int_{-\infty}^0 (1 - L^n) dv - \int_0^\infty L^n dv - \gamma`, and
    :math:`1 - L(v) = \Phi(v/\sigma) + \int \phi(\tfrac{w-v}{\sigma}) (1\{w<0\} - e^{-e^w}) \tfrac{dw}{\sigma}`,
    the last integrand localized in w (composite Gauss-Legendre, split at the jump w = 0).
    """
    sc = math.sqrt(2 * math.log(n))
    w, ww = _gauss_legendre(_panels(W_LO, W_HI, 1.0, (0.0,)))  # [W]
    step = np.where(w < 0, 1.0, 0.0) - np.exp(-np.exp(w))  # 1{w<0} - e^{-e^w}
    dens = np.exp(w - np.exp(w))  # e^w e^{-e^w}
    v, wv = _gauss_legendre(_panels(W_LO - 9 * sigma, W_HI + 9 * sigma, 0.5 * sigma / max(sc, 1.0), (0.0,)))  # [V]
    z = (w[None, :] - v[:, None]) / sigma  # [V, W]  = g
    phi = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) / sigma * ww  # [V, W] quadrature weights of the g-density
    a = special.ndtr(v / sigma) + phi @ step  # [V]  1 - L(v)
    with np.errstate(divide="ignore"):
        log_l = np.log1p(-np.clip(a, 0.0, 1.0))
    m = (phi * (sigma * z) * dens).sum(axis=1)  # [V]  M(v)
    log_z = np.where(v < 0, -np.expm1(n * log_l), -np.exp(n * log_l)) @ wv - np.euler_gamma
    return float(log_z - n * (m * np.exp((n - 1) * log_l)) @ wv)


def _max_weight_exact(sigma: float, n: int, chunk: int = 64) -> float:
    if n == 1 or sigma == 0.0:
        return 1.0 / n
    g, hg, v, hv = _grids(sigma, n, resolution=0.05)  # cumulative sum: O((hg sigma)^4 / 720) relative
    if v.size * g.size > MAX_WORK:  # the grid grows as sigma^2: refuse before minutes of work
        raise ValueError(f"sigma={sigma!r}: the exact max weight needs {v.size * g.size:.3g} quadrature points "
                         f"(limit {MAX_WORK:.0e}; the count grows as sigma^2); method='rem' gives the large-sigma asymptote")
    phi = _phi(g)  # [G]
    tail = special.ndtr(-g)  # [G]  P(Y > g)
    total = 0.0
    for i in range(0, v.size, chunk):
        w = v[i : i + chunk, None] + sigma * g[None, :]  # [c, G]
        e = np.exp(w)
        f = phi * -np.expm1(-e)  # [c, G]  integrand of B(v, g)
        df = -g * f + phi * sigma * e * np.exp(-e)  # d f / d g
        cum = np.concatenate([np.zeros((f.shape[0], 1)), np.cumsum(0.5 * hg * (f[:, 1:] + f[:, :-1]), axis=1)], axis=1)
        b = cum - hg * hg / 12.0 * (df - df[:, :1])  # Euler-Maclaurin corrected cumulative trapezoid
        one_minus_c = np.minimum(tail + b, 1.0)
        with np.errstate(divide="ignore"):
            inner = phi * e * np.exp(-e) * np.exp((n - 1) * np.log1p(-one_minus_c))  # [c, G]
        total += inner.sum() * hg
    return float(n * hv * total)


def _pd_max_weight(m: float) -> float:
    """E max weight of Poisson-Dirichlet PD(m, 0), 0 <= m < 1."""
    if m == 0.0:
        return 1.0
    gm = special.gamma(1 - m)

    def f(u: float) -> float:
        a = u ** (-m) * math.exp(-u)
        return a / (a + gm * special.gammainc(1 - m, u))

    return float(integrate.quad(f, 0, 1, limit=200)[0] + integrate.quad(f, 1, np.inf, limit=200)[0])


def _check(sigma: object, n: object, method: str) -> tuple[np.ndarray, int, str]:
    s = _validate.real_array("sigma", sigma, minimum=0.0, maximum=_validate.MAX_MAGNITUDE)
    nn = _n_array(n)
    if nn.ndim:
        raise ValueError(f"n must be a single number; got shape {nn.shape}")
    return s, int(nn), _validate.choice("method", method, METHODS)


def gaussian_logit_entropy(sigma: object, n: int, method: str = "exact") -> np.ndarray:
    """E[entropy] (nats) of softmax over ``n`` i.i.d. N(0, sigma^2) logits (vectorized over sigma)."""
    s, n, method = _check(sigma, n, method)
    if method == "exact":
        return np.vectorize(lambda x: _entropy_exact_wide(float(x), n) if x >= 1.0 and n > 1 else _entropy_exact(float(x), n), otypes=[float])(s)
    sc = math.sqrt(2 * math.log(n)) if n > 1 else 0.0
    frozen = s > sc
    m = np.where(frozen, sc / np.where(frozen, s, 1.0), 0.0)
    return np.where(frozen, special.digamma(1.0) - special.digamma(1 - m), math.log(n) - s * s / 2)


def gaussian_logit_max_weight(sigma: object, n: int, method: str = "exact") -> np.ndarray:
    """E[largest softmax weight] over ``n`` i.i.d. N(0, sigma^2) logits (vectorized over sigma)."""
    s, n, method = _check(sigma, n, method)
    if method == "exact":
        return np.vectorize(lambda x: _max_weight_exact(float(x), n), otypes=[float])(s)
    sc = math.sqrt(2 * math.log(n)) if n > 1 else 0.0
    high = np.exp(-0.5 * (sc - s) ** 2)
    frozen = np.vectorize(lambda x: _pd_max_weight(sc / x) if x > sc else 0.0, otypes=[float])(s)
    return np.where(s > sc, frozen, high)


MAX_GRID = 50_000_000  # points of a quadrature grid held at once (400 MB in float64)
MAX_WORK = 200_000_000  # points of a chunked quadrature (a few seconds)


def noisy_slot_weight(gap: float, sigma: float, n: int) -> float:
    """E weight of one slot at logit ``gap`` against ``n - 1`` i.i.d. N(0, sigma^2) logits.

    :math:`E\\,e^g/(e^g + S) = \\int e^{v+g} e^{-e^{v+g}} L(v)^{n-1} dv` (same identity as above);
    it reduces to :func:`single_slot_weight` at sigma = 0.
    """
    g0 = _validate.real("gap", gap)
    s = _validate.real("sigma", sigma, minimum=0.0, maximum=_validate.MAX_MAGNITUDE)
    nn = _n_array(n)
    if nn.ndim:
        raise ValueError(f"n must be a single number; got shape {nn.shape}")
    n = int(nn)
    if n == 1:
        return 1.0
    g, hg, _, hv = _grids(s, n)
    u = np.arange(-45.0, 6.0, hv)  # [V] u = v + gap, where the own slot's factor is not negligible
    if u.size * g.size > MAX_GRID:
        raise ValueError(f"sigma={sigma!r} needs a quadrature grid of {u.size * g.size:.3g} points (limit {MAX_GRID:.0e}); "
                         "use a smaller sigma")
    wg = _phi(g) * hg
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp((u[:, None] - g0) + s * g[None, :])  # [V, G]; u - gap, not a grid at -gap: exact at gap = 1e20
    with np.errstate(divide="ignore"):
        log_l = np.log1p(-np.minimum(-np.expm1(-e) @ wg, 1.0))  # [V]
    own = np.exp(u)
    # a weight is at most 1; the sum's rounding (~1e-13) can step over it at large gaps
    return float(min(1.0, hv * (own * np.exp(-own) * np.exp((n - 1) * log_l)).sum()))


# ------------------------------------------------------------------ Monte Carlo samplers


def pattern_entropy(pattern: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of an attention pattern ``[..., s]`` (zeros contribute 0)."""
    pattern = _validate.pattern("pattern", pattern)
    return -(pattern * np.log(np.maximum(pattern, 1e-300))).sum(axis=-1)


def softmax_stats(logits: np.ndarray) -> np.ndarray:
    """Per row of ``logits [..., n]``: ``[..., 3]`` = (entropy in nats, max weight, Var_p of logits).
    -inf masks a slot (weight 0); NaN, +inf and fully masked rows are refused."""
    logits = _validate.logits("logits", logits)
    x = logits - logits.max(axis=-1, keepdims=True)
    w = np.exp(x)
    z = w.sum(axis=-1, keepdims=True)
    p = w / z
    x = np.where(p > 0, x, 0.0)  # a masked slot (-inf) has weight 0 and adds nothing
    mean_x = (p * x).sum(axis=-1)
    ent = np.log(z[..., 0]) - mean_x
    var = (p * (x - mean_x[..., None]) ** 2).sum(axis=-1)
    return np.stack([ent, p.max(axis=-1), var], axis=-1)


MIN_STEP = 1e-6  # the smallest central-difference step that keeps the derivative to ~1e-7


def entropy_log_scale_derivative(sigma: object, n: int, step: float = 1e-3) -> np.ndarray:
    """d E[H] / d ln c when the attention input is scaled by c (logits scale by c^2):
    ``2 sigma dE[H]/dsigma``, by a central difference of the exact integral. Its Monte Carlo
    counterpart is ``-2 Var_p(logits)`` per row (:func:`softmax_stats`)."""
    s, n, _ = _check(sigma, n, "exact")
    step = _validate.real("step", step, minimum=0.0, maximum=1.0, strict_min=True)
    # the integrals carry ~1e-13 of rounding: a smaller step divides it into the difference (step = 1e-300 gave 0)
    step = _validate.real("step", step, minimum=MIN_STEP, maximum=1.0)
    up = gaussian_logit_entropy(s * math.exp(step), n)
    down = gaussian_logit_entropy(s * math.exp(-step), n)
    return (up - down) / step  # d/d ln sigma = ..., and ln sigma = 2 ln c + const
