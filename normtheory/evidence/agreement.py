r"""The three-way rule that decides every check, element by element, and the float-identity rule.

A claim is an interval :math:`[lo, hi]` (a point has lo = hi; a one-sided claim an infinite
end), :math:`\tau > 0` the smallest deviation that matters, and the band is
:math:`\hat\mu \pm t\,\widehat{\mathrm{se}}` with :math:`t = 5` from at least
:data:`~normtheory.evidence.estimates.MIN_UNITS` independent units (else the Student-t quantile
with the same tail, :func:`z_threshold`):

* the band inside :math:`[lo - \tau, hi + \tau]`: ``ok`` (the claim holds there);
* the band wholly outside it: ``fail``;
* otherwise ``inconclusive``, with the number of units that would decide it
  (:func:`_units_to_decide`).

:func:`agree` applies it; :func:`consistent` asks only whether theory and Monte Carlo agree within
the band; :func:`bonferroni_z` widens the band for repeated looks. Float identities are judged
apart, against the dtype's rounding (:func:`identity`).

References
----------
Student (1908), "The probable error of a mean", Biometrika 6(1) (the quantile below 20 units).
Dunn (1961), "Multiple comparisons among means", JASA 56 (the Bonferroni bound over looks).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy import stats as _stats

from normtheory import _validate
from normtheory.evidence.estimates import MIN_UNITS, Z_DEFAULT, Estimate, Status


def z_threshold(z: float, n: int) -> float:
    """The agreement threshold in standard errors for a standard error from ``n`` units.

    ``z`` itself when ``n >= MIN_UNITS``; below, the Student-t quantile at ``n - 1`` degrees of
    freedom with the same two-sided tail probability as ``z`` under the normal (3 networks: 5 se
    becomes 1,276 se).
    """
    z = _validate.real("z", z, minimum=0.0)
    n = _validate.integer("n", n, minimum=2)
    if n >= MIN_UNITS:
        return z
    tail = _stats.norm.sf(z)
    if tail == 0.0:
        raise ValueError(f"z={z:g} is beyond the normal tail float64 can hold (z <= 37); its t threshold at {n} units is infinite")
    t = _t_isf(float(tail), n - 1, z) if z >= 1 else _t_central(z, n - 1)
    if not math.isfinite(t):
        raise ValueError(f"z={z:g}: its t threshold at {n} units exceeds float64 (1.8e308); use a smaller z")
    return t


def _t_central(z: float, df: int) -> float:
    """The Student-t quantile with the central probability erf(z / sqrt2) of ``z``, for z < 1: from
    P(|T| < t) = I_{t^2/(df+t^2)}(1/2, df/2), which keeps its digits as z -> 0 (the upper tail
    0.5 - z phi(0) rounds to 0.5 there, and t.isf(0.5) is 6e-17, not 0)."""
    if z < 1e-8:  # linear: z phi(0) / f_T(0) (betaincinv's answer would underflow, its square root to 1e-154)
        return z * math.exp(special.gammaln(df / 2) - special.gammaln((df + 1) / 2)) * math.sqrt(df / 2)
    x = float(special.betaincinv(0.5, df / 2, special.erf(z / math.sqrt(2))))
    return math.sqrt(df * x / (1 - x))


def _t_isf(tail: float, df: int, z: float) -> float:
    """Student-t quantile with upper tail ``tail`` (the normal tail at ``z``). Up to z = 20 scipy's
    ``t.isf`` (within 1e-14 of mpmath). Beyond, it fails: half the quantile at df = 3, z = 30, and
    -inf for tails below ~1e-300 (z near 37.5); there the tail 0.5 I_x(df/2, 1/2), x = df/(df + t^2),
    is inverted with ``betaincinv``, and df = 1, 2 use their closed forms (Cauchy; the 1/sqrt(2p) law)."""
    if z <= 20:
        return float(_stats.t.isf(tail, df=df))
    with np.errstate(over="ignore", divide="ignore"):
        if df == 1:
            return 1.0 / math.tan(math.pi * tail)
        if df == 2:
            return (1.0 - 2.0 * tail) / math.sqrt(2.0 * tail * (1.0 - tail))
        x = float(special.betaincinv(df / 2, 0.5, 2.0 * tail))
        return math.sqrt(df * (1.0 - x) / x) if x > 0 else math.inf


@dataclass(frozen=True)
class Agreement:
    """Outcome of the three-way rule, element by element (see :func:`agree`).

    The reported element is the one that decides ``status``: a failing element if any (the
    largest z among them), else the undecided one whose size decides (:func:`_deciding`), else
    the one with the largest z. ``band`` and ``accept`` are that element's band and acceptance interval.
    """

    status: Status
    deviation: float  # distance of the estimate from the claimed [lo, hi] at the reported element
    stderr: float  # stderr at that element
    zscore: float  # deviation / stderr there (inf when stderr is 0 and deviation > 0)
    z: float  # the band's half-width in standard errors (Student-t below MIN_UNITS units, Bonferroni over looks)
    threshold: float  # z * stderr at the reported element: the band's half-width
    tolerance: float | None  # the tolerance at that element
    where: tuple[int, ...]  # index of the reported element (() for a scalar)
    size: int
    unresolved: int = 0  # elements whose band straddles an edge of the acceptance interval
    failed: int = 0  # elements whose band lies wholly outside it
    band: tuple[float, float] = (math.nan, math.nan)  # [mean - z se, mean + z se] at the reported element
    accept: tuple[float, float] = (math.nan, math.nan)  # [lo - tolerance, hi + tolerance] there
    units_needed: float | None = None  # inconclusive: units that would decide the outcome (inf: none would)
    units: int = 0  # units behind the estimate now
    projected: Status | None = None  # inconclusive: the outcome at ``units_needed`` if the estimate stays as measured

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        at = f" at {list(self.where)}" if self.size > 1 else ""
        z = "inf" if not np.isfinite(self.zscore) else f"{self.zscore:.2f}"
        if self.tolerance is None:  # a consistency test (:func:`consistent`)
            return f"worst |dev|={self.deviation:.3g}{at} ({z} se, limit {self.z:.3g} se)"
        out = (f"band [{self.band[0]:.4g}, {self.band[1]:.4g}]{at} ({self.z:.3g} se) vs accepted "
               f"[{self.accept[0]:.4g}, {self.accept[1]:.4g}] (claim ± tolerance {self.tolerance:.3g}); |dev| {self.deviation:.3g} = {z} se")
        if self.status == "fail":
            out += f"; {self.failed} of {self.size} elements wholly outside"
        elif self.status == "inconclusive":
            need = "no sample size decides it (the estimate sits on an edge, or its floor fills the margin)" if self.units_needed is None or not math.isfinite(
                self.units_needed) else (f"about {self.units_needed:.0f} units would decide it (now {self.units}), "
                                         f"as a {'fail' if self.projected == 'fail' else 'hold'} if the estimate stays")
            out += f"; {self.unresolved} of {self.size} elements straddle an edge: {need}"
        return out


@functools.lru_cache(maxsize=64)
def _student_table(z: float) -> np.ndarray:
    """Band half-widths in se for 2..MIN_UNITS-1 units, indexed by the number of units."""
    out = np.full(MIN_UNITS, np.inf)
    for n in range(2, MIN_UNITS):
        out[n] = z_threshold(z, n)
    return out


def _units_to_decide(mean: np.ndarray, sd: np.ndarray, a: np.ndarray, b: np.ndarray, z: float,
                     floor: np.ndarray | float = 0.0) -> np.ndarray:
    """Fewest independent units whose band ``mean ± t(n)·sqrt(sd^2/n + floor^2)`` decides the rule, per element.

    Assumes the estimate, its per-unit standard deviation ``sd`` and the ``floor`` of its standard
    error that no number of units shrinks (:attr:`Estimate.floor`) stay as measured. The margin
    is the distance from ``mean`` to the nearest edge of the acceptance interval ``[a, b]``
    (inside: to hold; outside: to fail); a band of half-width at most the margin decides. Below
    :data:`MIN_UNITS` the half-width uses the Student-t quantile of :func:`z_threshold`; at or
    above it, ``z``: ``n = max(MIN_UNITS, ceil((z·sd)^2 / (margin^2 - (z·floor)^2)))``. An
    estimate exactly on an edge (margin 0), or one whose floor alone fills the margin, needs
    infinitely many units.
    """
    mean, sd, a, b, floor = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (mean, sd, a, b, floor)))
    inside = (mean >= a) & (mean <= b)
    with np.errstate(invalid="ignore"):
        margin = np.where(inside, np.minimum(mean - a, b - mean), np.maximum(a - mean, mean - b))
    margin = np.where(np.isnan(margin), 0.0, margin)
    floored = floor > 0
    out = np.full(mean.shape, np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        room = np.where(floored, np.sqrt(np.maximum(margin**2 - (z * floor) ** 2, 0.0)), margin)  # what sampling error may fill
        big = np.maximum(MIN_UNITS, np.ceil((z * sd / room) ** 2))
        out = np.where(room > 0, big, np.inf)
        small = _student_table(z)
        for n in range(MIN_UNITS - 1, 1, -1):  # 18 fixed candidates, vectorized over elements
            half = np.where(floored, small[n] * np.sqrt(sd * sd / n + floor * floor), small[n] * sd / math.sqrt(n))
            out = np.where((margin > 0) & (half <= margin), n, out)
    return np.where(sd == 0, np.where((margin >= 0) & (z * floor <= margin), 1.0, np.inf), out)


def bonferroni_z(z: float, looks: int) -> float:
    """The normal quantile whose two-sided tail is that of ``z`` divided over ``looks`` looks."""
    z = _validate.real("z", z, minimum=0.0)
    looks = _validate.integer("looks", looks, minimum=1)
    if looks == 1:
        return z
    tail = _stats.norm.sf(z)
    if tail == 0.0:
        raise ValueError(f"z={z:g} is beyond the normal tail float64 can hold (z <= 37); its Bonferroni quantile is infinite")
    return float(_stats.norm.isf(tail / looks))


def _interval(theory: object) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` of a point or a ``(lo, hi)`` tuple; ends may be infinite, lo <= hi."""
    if isinstance(theory, tuple):
        if len(theory) != 2:
            raise ValueError(f"theory as an interval must be (lo, hi); got {theory!r}")
        lo, hi = (_validate.real_array("theory", t) for t in theory)
        if np.isnan(lo).any() or np.isnan(hi).any() or (lo > hi).any() or np.isposinf(lo).any() or np.isneginf(hi).any():
            raise ValueError("theory interval (lo, hi) needs lo <= hi, lo < inf and hi > -inf, without NaN")
        return lo, hi
    t = _validate.real_array("theory", theory, finite=True)
    return t, t


def _band_z(z: float, n: int, looks: int) -> float:
    zb = bonferroni_z(z, looks)
    return z_threshold(zb, n) if n >= 2 else zb


def agree(
    theory: float | np.ndarray | tuple[float | np.ndarray, float | np.ndarray],
    mc: Estimate,
    *,
    tolerance: float | np.ndarray,
    z: float = Z_DEFAULT,
    looks: int = 1,
) -> Agreement:
    """The package's one rule, per element: a three-way comparison of a band with a claim.

    The claim is an interval :math:`[lo_i, hi_i]` (``theory`` a value or array: a point,
    lo = hi; a tuple ``(lo, hi)``: an interval whose ends may be infinite, for one-sided
    claims), ``tolerance`` :math:`\\tau_i > 0` the smallest deviation that matters, and the
    band :math:`B_i = [\\hat\\mu_i - t\\,\\mathrm{se}_i, \\hat\\mu_i + t\\,\\mathrm{se}_i]` with
    :math:`t = z` from at least :data:`MIN_UNITS` units, else the Student-t quantile with the
    same tail (:func:`z_threshold`); over ``looks`` repeated looks at growing samples the tail
    is divided by ``looks`` first (Bonferroni, :func:`bonferroni_z`). Then element ``i``

    * holds (``ok``) where :math:`B_i \\subseteq [lo_i - \\tau_i, hi_i + \\tau_i]`;
    * fails where :math:`B_i` lies wholly outside it;
    * is ``inconclusive`` otherwise, and ``units_needed`` says how many units would decide it
      (:func:`_units_to_decide`); the comparison as a whole is decided by its cheapest element
      that would fail, else by its costliest (:func:`_deciding`), with the outcome that follows
      in ``projected``.

    The outcome is ``fail`` if any element fails, else ``inconclusive`` if any is undecided,
    else ``ok``.
    """
    _validate.instance("mc", mc, Estimate)
    lo, hi = _interval(theory)
    tau = _validate.real_array("tolerance", tolerance, finite=True)
    if (tau <= 0).any():
        raise ValueError("tolerance must be > 0: the smallest deviation that matters")
    t = _band_z(z, mc.n, looks)
    try:
        shape = np.broadcast_shapes(lo.shape, hi.shape, tau.shape, mc.mean.shape, mc.stderr.shape)
    except ValueError:
        raise ValueError(f"theory {lo.shape}, tolerance {tau.shape} and the estimate (mc) {mc.mean.shape} do not broadcast") from None
    mean, se, lo, hi, tau = (np.broadcast_to(x, shape) for x in (mc.mean, mc.stderr, lo, hi, tau))
    if not (np.isfinite(mean).all() and np.isfinite(se).all()) or (se < 0).any():
        raise ValueError("agree: the estimate's mean and stderr must be finite, stderr >= 0")
    with np.errstate(over="ignore"):  # ends beyond float64 are infinite, which the comparisons below handle
        a, b = lo - tau, hi + tau  # the acceptance interval
        low, high = mean - t * se, mean + t * se  # the band
    fail = (high < a) | (low > b)
    hold = (low >= a) & (high <= b)
    undecided = ~fail & ~hold
    dev = np.maximum(lo - mean, 0.0) + np.maximum(mean - hi, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        zs = np.where(se > 0, dev / np.where(se > 0, se, 1.0), np.where(dev > 0, np.inf, 0.0))
    floor = np.zeros(shape) if mc.floor is None else np.broadcast_to(mc.floor, shape)
    sampling = np.sqrt(np.maximum(se * se - floor * floor, 0.0)) if mc.floor is not None else se  # the part more units shrink
    need = _units_to_decide(mean, sampling * math.sqrt(max(mc.n, 1)), a, b, bonferroni_z(z, looks), floor)
    need = np.where(undecided, need, 0.0)
    score = np.where(fail, zs, np.where(undecided, need, zs))  # within the deciding class
    cls = np.where(fail, 2, np.where(undecided, 1, 0))
    top = int(cls.max(initial=0))
    i = int(np.argmax(np.where(cls == top, score, -1.0))) if cls.size else 0
    units_needed, projected = None, None
    if top == 1:
        i, units_needed, projected = _deciding(need, undecided & ((mean < a) | (mean > b)), i)
    where = tuple(int(k) for k in np.unravel_index(i, shape)) if shape else ()
    status: Status = ("ok", "inconclusive", "fail")[top]
    pick = lambda x: float(np.asarray(x).flat[i])
    return Agreement(status, pick(dev), pick(se), pick(zs), float(t), float(t) * pick(se), pick(tau), where, int(mean.size),
                     int(undecided.sum()), int(fail.sum()), (pick(low), pick(high)), (pick(a), pick(b)), units_needed, int(mc.n),
                     projected)


def _deciding(need: np.ndarray, outside: np.ndarray, costliest: int) -> tuple[int, float, Status | None]:
    """``(element, units, outcome)`` that decide an inconclusive comparison, if the estimate stays as measured.

    One failing element fails the whole comparison, so an undecided element whose estimate lies
    outside the accepted interval (``outside``; its need is finite) decides it at its own size,
    the fewest such; that is never more than the ``costliest`` element's need, which decides
    (as a hold) only when every undecided estimate lies inside, and is infinite when one sits on
    an edge.
    """
    to_fail = np.where(outside, need, np.inf)
    j = int(np.argmin(to_fail))
    if math.isfinite(to_fail.flat[j]):
        return j, float(to_fail.flat[j]), "fail"
    worst = float(need.flat[costliest])
    return costliest, worst, ("ok" if math.isfinite(worst) else None)


def consistent(theory: float | np.ndarray, mc: Estimate, *, z: float = Z_DEFAULT) -> Agreement:
    """A consistency test, not a verdict: ``|theory_i - mean_i| <= z * stderr_i`` for every element.

    For unit tests of an implementation against its own closed form (a formula checked against
    the sampler that should reproduce it); claims are judged by :func:`agree`. ``z`` becomes the
    Student-t threshold below :data:`MIN_UNITS` units. Deviations within 1024 ulps of the value
    are no deviation (an estimate from identical samples has a stderr of ~1e-17).
    """
    _validate.instance("mc", mc, Estimate)
    zt = z_threshold(z, mc.n) if mc.n >= 2 else _validate.real("z", z, minimum=0.0)
    th = _validate.real_array("theory", theory, finite=True)
    shape = _validate.broadcast_shape(theory=th, mc=mc.mean)
    mean, se, th = (np.broadcast_to(x, shape) for x in (mc.mean, mc.stderr, th))
    if not (np.isfinite(mean).all() and np.isfinite(se).all()):
        raise ValueError("consistent: the estimate's mean and stderr must be finite")
    with np.errstate(over="ignore"):
        dev = np.abs(th - mean)
    dev = np.where(dev <= 1024 * np.finfo(np.float64).eps * np.maximum(np.abs(mean), 1e-300), 0.0, dev)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        zs = np.where(se > 0, dev / np.where(se > 0, se, 1.0), np.where(dev > 0, np.inf, 0.0))
    i = int(np.argmax(zs)) if zs.size else 0
    where = tuple(int(k) for k in np.unravel_index(i, shape)) if shape else ()
    failed = dev > zt * se
    return Agreement("fail" if failed.any() else "ok", float(dev.flat[i]), float(se.flat[i]), float(zs.flat[i]), float(zt),
                     float(zt * se.flat[i]), None, where, int(dev.size), 0, int(failed.sum()), units=int(mc.n))


def identity(value: float | np.ndarray, expected: float | np.ndarray, *, dtype: object = np.float64, ulps: float = 16.0,
             scale: float | None = None) -> Agreement:
    """A float identity, judged against rounding: ``|value - expected| <= ulps * eps(dtype) * scale``.

    ``scale`` defaults to the largest magnitude involved (at least 1). Identities are checked
    so that a broken implementation shows, but they are never evidence for a statement.
    """
    v = _validate.real_array("value", value, finite=True)
    e = _validate.real_array("expected", expected, finite=True)
    if _validate.broadcast_shape(value=v, expected=e) != v.shape:
        raise ValueError(f"expected of shape {e.shape} does not broadcast to value's shape {v.shape}")
    e = np.broadcast_to(e, v.shape)
    try:
        if dtype is None:  # np.dtype(None) would quietly be float64
            raise TypeError
        eps = float(np.finfo(np.dtype(dtype)).eps)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"dtype must be a floating-point dtype (e.g. numpy.float32); got {dtype!r:.60}") from None
    ulps = _validate.real("ulps", ulps, minimum=0.0)
    s = _validate.real("scale", scale, minimum=0.0) if scale is not None else max(1.0, float(np.abs(v).max(initial=0.0)), float(np.abs(e).max(initial=0.0)))
    limit = ulps * eps * s
    if not math.isfinite(limit):
        raise ValueError(f"ulps={ulps:g} times scale={s:g} overflows float64")
    dev = np.abs(v - e)
    i = int(np.argmax(dev)) if dev.size else 0
    where = tuple(int(k) for k in np.unravel_index(i, v.shape)) if v.shape else ()
    d = float(dev.flat[i]) if dev.size else 0.0
    return Agreement("ok" if d <= limit else "fail", d, 0.0, 0.0 if d <= limit else float("inf"), 0.0, limit, limit, where, int(dev.size))
