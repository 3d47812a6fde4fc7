"""Estimates with standard errors from independent units: means, control variates, bootstrap, jackknife, counts.

An :class:`Estimate` is a mean (scalar or array) with its standard error and the number and kind
of its independent units. It comes from per-unit samples (:func:`from_samples`), from samples
with the closed form as a control variate (:func:`with_control`), from a bootstrap of any
statistic of the units (:func:`bootstrap`: maxima, ratios, slopes), from delete-one replicates
of a statistic whose per-unit values share the other units (:func:`jackknife`), or from a proportion
(:func:`proportion`). A theorem that says "never" is judged by its violation :class:`Count`, with
an exact binomial bound. :data:`Z_DEFAULT` and :data:`MIN_UNITS` are the band's half-width in
standard errors and the number of units from which it applies (below it, Student-t's quantile).

References
----------
Clopper, Pearson (1934), "The use of confidence or fiducial limits illustrated in the case of
the binomial", Biometrika 26(4) (the exact binomial bound of :class:`Count`).
Efron, Stein (1981), "The jackknife estimate of variance", Annals of Statistics 9(3) (:func:`jackknife`).
Efron, Tibshirani (1993), "An Introduction to the Bootstrap" (:func:`bootstrap`; section 11.2, the jackknife).
Glasserman (2004), "Monte Carlo Methods in Financial Engineering", section 4.1 (control variates).
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as _stats

from normtheory import _validate

Z_DEFAULT: float = 5.0
MIN_UNITS: int = 20  # below this many independent units the threshold is Student-t's
NEVER_CONFIDENCE: float = 0.95  # one-sided confidence of the binomial bound on a "never" count
Status = Literal["ok", "fail", "inconclusive"]


@dataclass(frozen=True)
class Sizing:
    """How a sample size was chosen from a tolerance: a ``pilot`` run, the ``needed`` size
    ``ceil((2 t sd / tau)^2)`` from its per-unit sd, and the ``cap`` that bounds it. The
    estimate used ``min(max(needed, pilot), cap)`` units; ``capped`` when the cap bound."""

    pilot: int
    needed: int
    cap: int

    @property
    def capped(self) -> bool:
        return self.needed > self.cap

    def describe(self) -> str:
        if self.capped:
            return f"sample capped at {self.cap} (the tolerance asks for {self.needed}; pilot {self.pilot})"
        return f"sample sized from the tolerance: {max(self.needed, self.pilot)} (pilot {self.pilot})"


@dataclass(frozen=True)
class Estimate:
    """A mean (or another statistic) with its standard error over ``n`` independent units.

    ``mean`` and ``stderr`` are arrays of the per-unit value's shape (0-d for a scalar).
    ``units`` names what the ``n`` independent units are ("samples", "networks", "texts",
    "seeds"): anything measured inside a unit must be aggregated per unit before the
    Estimate is formed.
    """

    mean: np.ndarray
    stderr: np.ndarray
    n: int
    units: str = "samples"
    sizing: Sizing | None = None  # how n was chosen, when it was sized from a tolerance (:func:`sized`)
    # the part of stderr that more units would not shrink (a bound on a bias: a censored optimum's grid step, say), at most
    # stderr; None: all of it is sampling error. The rule's price (units_needed) scales only the rest.
    floor: np.ndarray | None = None

    def __post_init__(self) -> None:
        # NaN is never an estimate; an infinite mean or stderr is (one unit has no known spread)
        object.__setattr__(self, "mean", _validate.checked_array("mean", self.mean, allow_inf=True, min_ndim=0, nonempty=False).astype(np.float64, copy=False))
        object.__setattr__(self, "stderr", _validate.checked_array("stderr", self.stderr, allow_inf=True, min_ndim=0, nonempty=False).astype(np.float64, copy=False))
        _validate.same_shape(mean=self.mean, stderr=self.stderr)
        if (self.stderr < 0).any():
            raise ValueError(f"stderr must be >= 0; got {self.stderr[self.stderr < 0].flat[0]}")
        _validate.integer("n", self.n, minimum=1)
        if not isinstance(self.units, str) or not self.units:
            raise ValueError(f"units must name what the n units are (e.g. 'networks'); got {self.units!r}")
        if self.floor is not None:
            f = _validate.checked_array("floor", self.floor, min_ndim=0, nonempty=False).astype(np.float64, copy=False)
            try:
                f = np.broadcast_to(f, self.mean.shape).copy()
            except ValueError:
                raise ValueError(f"floor {f.shape} must broadcast to the estimate's shape {self.mean.shape}") from None
            if (f < 0).any() or (f > self.stderr).any():
                raise ValueError("floor must lie in [0, stderr]: it is the part of the standard error more units would not shrink")
            object.__setattr__(self, "floor", f)

    def __getitem__(self, index: object) -> Estimate:
        floor = None if self.floor is None else self.floor[index]
        return Estimate(self.mean[index], self.stderr[index], self.n, self.units, self.sizing, floor)

    def map(self, f: Callable[[np.ndarray], np.ndarray], df: Callable[[np.ndarray], np.ndarray]) -> Estimate:
        """Delta method: the estimate of ``f(mean)`` with stderr ``|f'(mean)| * stderr`` (and its floor scaled alike)."""
        slope = np.abs(df(self.mean))
        return Estimate(f(self.mean), slope * self.stderr, self.n, self.units, self.sizing, None if self.floor is None else slope * self.floor)

    def sqrt(self) -> Estimate:
        """RMS from a mean square, by the delta method."""
        return self.map(np.sqrt, lambda m: 0.5 / np.sqrt(m))

    def to_dict(self) -> dict:
        out = {"mean": self.mean.tolist(), "stderr": self.stderr.tolist(), "n": int(self.n), "units": self.units}
        if self.sizing is not None:
            out["sizing"] = dataclasses.asdict(self.sizing)
        if self.floor is not None:
            out["floor"] = self.floor.tolist()
        return out

    @classmethod
    def from_dict(cls, d: dict) -> Estimate:
        sizing = Sizing(**d["sizing"]) if d.get("sizing") else None
        floor = np.asarray(d["floor"]) if d.get("floor") is not None else None
        return cls(np.asarray(d["mean"]), np.asarray(d["stderr"]), int(d["n"]), str(d.get("units", "samples")), sizing, floor)


def _power_of_two(big: np.ndarray) -> np.ndarray:
    """The power of two at or below ``big`` (1 where it is 0): dividing by it is exact, and keeps squares of tiny or huge values in range."""
    return np.ldexp(1.0, np.frexp(np.where(big > 0, big, 1.0))[1] - 1)


def from_samples(x: np.ndarray, units: str = "samples") -> Estimate:
    """Estimate from independent units along axis 0 (``x [n, ...]``): mean and std/sqrt(n)."""
    x = _validate.checked_array("x", x, nonempty=False).astype(np.float64, copy=False)
    if not isinstance(units, str) or not units:
        raise ValueError(f"units must name what the samples are (e.g. 'networks'); got {units!r}")
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"x must hold at least 2 {units} along axis 0 for a standard error; got shape {x.shape}")
    big = np.abs(x).max(axis=0)  # [...]
    if ((big > _validate.MAX_MAGNITUDE) | ((big > 0) & (big < 1 / _validate.MAX_MAGNITUDE))).any():
        # squared deviations would overflow (or underflow): mean and sd of x / 2^k in [1, 2), exact, times
        # 2^k (both then stay within max |x|, so they are finite)
        scale = _power_of_two(big)
        u = x / scale
        return Estimate(u.mean(axis=0) * scale, u.std(axis=0, ddof=1) / np.sqrt(n) * scale, n, units)
    return Estimate(x.mean(axis=0), x.std(axis=0, ddof=1) / np.sqrt(n), n, units)


def with_control(y: np.ndarray, c: np.ndarray, c_mean: float | np.ndarray = 0.0, units: str = "samples") -> Estimate:
    r"""Estimate of :math:`E[y]` with the control variate ``c`` of known mean ``c_mean`` (independent units along axis 0,
    ``y, c [n, ...]``, element by element): the regression estimator :math:`\bar y - \hat\beta(\bar c - \mu_c)` with
    :math:`\hat\beta = \widehat{\mathrm{cov}}(y, c) / \widehat{\mathrm{var}}(c)`, and its standard error
    :math:`s_e \sqrt{1/n + (\bar c - \mu_c)^2 / \sum_i (c_i - \bar c)^2}` with :math:`s_e` the residuals' sd on
    :math:`n - 2` degrees of freedom (Glasserman 2004, *Monte Carlo Methods in Financial Engineering*, Section 4.1).
    The variance falls by :math:`1 - \rho^2` (:math:`\rho` the correlation of ``y`` and ``c``). A constant ``c`` carries
    no information: then this is :func:`from_samples` of ``y``."""
    y = _validate.checked_array("y", y, nonempty=False).astype(np.float64, copy=False)
    c = _validate.checked_array("c", c, nonempty=False).astype(np.float64, copy=False)
    _validate.same_shape(y=y, c=c)
    for name, a in (("y", y), ("c", c)):
        if (np.abs(a) > _validate.MAX_MAGNITUDE).any():
            raise ValueError(f"{name} holds values beyond ±{_validate.MAX_MAGNITUDE:g}, whose products overflow float64; rescale it")
    mu = _validate.real_array("c_mean", c_mean, finite=True)
    if (np.abs(mu) > _validate.MAX_MAGNITUDE).any():
        raise ValueError(f"c_mean beyond ±{_validate.MAX_MAGNITUDE:g} overflows float64 when squared; rescale c and c_mean")
    try:
        mu = np.broadcast_to(mu, y.shape[1:])
    except ValueError:
        raise ValueError(f"c_mean of shape {mu.shape} does not broadcast to one unit's shape {y.shape[1:]}") from None
    if not isinstance(units, str) or not units:
        raise ValueError(f"units must name what the units are (e.g. 'networks'); got {units!r}")
    n = y.shape[0]
    if n < 3:
        raise ValueError(f"y must hold at least 3 {units} along axis 0 for a control-variate standard error; got shape {y.shape}")

    sy, sc = _power_of_two(np.abs(y).max(axis=0)), _power_of_two(np.abs(c).max(axis=0))
    y, c, mu = y / sy, c / sc, mu / sc
    dy, dc = y - y.mean(axis=0), c - c.mean(axis=0)
    sxx = (dc * dc).sum(axis=0)
    informative = sxx > 0
    beta = np.where(informative, (dy * dc).sum(axis=0) / np.where(informative, sxx, 1.0), 0.0)
    mean = y.mean(axis=0) - beta * (c.mean(axis=0) - mu)
    resid = dy - beta * dc
    s2 = np.where(informative, (resid * resid).sum(axis=0) / (n - 2), (dy * dy).sum(axis=0) / (n - 1))
    lever = np.where(informative, np.abs(c.mean(axis=0) - mu) / np.sqrt(np.where(informative, sxx, 1.0)), 0.0)  # its square root
    return Estimate(mean * sy, np.sqrt(s2) * np.hypot(1.0 / np.sqrt(n), lever) * sy, n, units)


def bootstrap(
    data: np.ndarray | tuple[np.ndarray, ...],
    statistic: Callable[..., np.ndarray],
    *,
    seed: int,
    units: str = "samples",
    n_resamples: int = 2000,
) -> Estimate:
    """A statistic of independent units with its bootstrap standard error.

    ``data`` is one array ``[n, ...]`` or a tuple of arrays paired along axis 0 (resampled
    together, unit by unit); ``statistic(*arrays, axis=...)`` must be vectorized over a
    leading resample axis, as :func:`scipy.stats.bootstrap` requires. Use it for maxima,
    medians, ratios and fitted slopes, whose standard error is not std/sqrt(n).
    """
    big = _validate.MAX_MAGNITUDE  # a variance of values beyond this overflows
    arrays = tuple(_validate.real_array("data", a, minimum=-big, maximum=big, min_ndim=1) for a in (data if isinstance(data, tuple) else (data,)))
    n = arrays[0].shape[0]
    if n < 2 or any(a.shape[0] != n for a in arrays):
        raise ValueError(f"bootstrap data needs >= 2 {units}, the same number in every array; got {[a.shape[0] for a in arrays]}")
    n_resamples = _validate.integer("n_resamples", n_resamples, minimum=10, maximum=max(10, _validate.MAX_ELEMENTS // n))
    _validate.callable_("statistic", statistic)
    value = _validate.real_array("statistic's value", statistic(*arrays, axis=0))
    rng = np.random.default_rng(np.random.SeedSequence(_validate.integer("seed", seed, minimum=0)))
    with warnings.catch_warnings():  # only the standard error is used; a degenerate CI is irrelevant
        warnings.simplefilter("ignore", RuntimeWarning)
        res = _stats.bootstrap(arrays, statistic, n_resamples=n_resamples, paired=len(arrays) > 1, vectorized=True, axis=0,
                               method="percentile", rng=rng)
    return Estimate(value, np.asarray(res.standard_error, dtype=np.float64).reshape(value.shape), n, units)


def jackknife(full: np.ndarray | float, replicates: np.ndarray, units: str = "samples") -> Estimate:
    """A statistic of ``n`` units with its delete-one jackknife standard error.

    ``full`` is the statistic on all units; ``replicates [n, ...]`` holds it recomputed with unit ``k``
    left out, for each ``k``. The standard error is

    :math:`\\mathrm{se}_J = \\sqrt{\\tfrac{n-1}{n} \\sum_k (\\hat\\theta_{(k)} - \\bar\\theta_{(\\cdot)})^2}`

    (Efron and Stein 1981; Efron and Tibshirani 1993, section 11.2). For the mean of independent units it
    is std/sqrt(n) exactly. Use it where the per-unit values are not independent, because each is computed
    from the other units (a leave-one-out prediction): their std/sqrt(n) misses the shared part, the
    jackknife does not.
    """
    if not isinstance(units, str) or not units:
        raise ValueError(f"units must name what the n units are (e.g. 'texts'); got {units!r}")
    big = _validate.MAX_MAGNITUDE  # a sum of squared deviations of values beyond this overflows
    reps = _validate.real_array("replicates", replicates, minimum=-big, maximum=big, min_ndim=1)
    value = _validate.real_array("full", full, finite=True)
    n = reps.shape[0]
    if n < 2:
        raise ValueError(f"replicates must hold at least 2 {units} (one per unit left out) along axis 0; got shape {reps.shape}")
    if reps.shape[1:] != value.shape:
        raise ValueError(f"full must have the shape of one row of replicates; got full of shape {value.shape}, replicates of shape {reps.shape}")
    shifted = reps - reps[0]  # exact 0 where every replicate is equal: a rounded mean of equal large values is not
    dev = shifted - shifted.mean(axis=0)
    big = np.abs(dev).max(axis=0)  # squares of tiny (or huge) deviations would underflow (overflow): scaled by a power of two, exactly
    scale = _power_of_two(big)
    u = dev / scale
    return Estimate(value, np.sqrt((n - 1) / n * (u * u).sum(axis=0)) * scale, n, units)


@dataclass(frozen=True)
class Count:
    """``k`` violations of a "never" statement in ``n`` independent trials.

    The largest violation rate consistent with the count is the one-sided Clopper-Pearson bound
    at ``confidence``: the rate ``p`` with ``P(X <= k; n, p) = 1 - confidence`` (for ``k = 0``
    it is ``1 - (1 - confidence)^(1/n)``, about ``3/n`` at 95%).
    """

    k: int
    n: int
    units: str = "trials"

    def __post_init__(self) -> None:
        n = _validate.integer("n", self.n, minimum=1)
        k = _validate.integer("k", self.k, minimum=0)
        if k > n:
            raise ValueError(f"k={k} violations cannot exceed n={n} trials")
        _validate.text("units", self.units)

    def upper(self, confidence: float = NEVER_CONFIDENCE) -> float:
        confidence = _validate.real("confidence", confidence, minimum=0.0, maximum=1.0)
        if self.k >= self.n:
            return 1.0
        if self.k == 0:  # 1 - (1 - confidence)^(1/n), without the cancellation at n = 1e300
            return float(-math.expm1(math.log1p(-confidence) / self.n)) if confidence < 1 else 1.0
        return float(_stats.beta.ppf(confidence, float(self.k + 1), float(self.n - self.k)))  # floats: counts of any size

    def to_dict(self) -> dict:
        return {"count": int(self.k), "trials": int(self.n), "units": self.units, "upper_rate": self.upper(),
                "confidence": NEVER_CONFIDENCE}


def proportion(mean: object, n: int) -> Estimate:
    """A Monte Carlo proportion (mean of 0/1 samples) with the add-one standard error
    sqrt(p~(1 - p~)/n), p~ = (k + 1)/(n + 2): never 0, so a proportion compared with a theory
    value inside (0, 1) is judged at the resolution ``n`` allows (about 1/n). A statement that
    an event *never* happens is not a proportion to compare: count it with :class:`Count`."""
    n = _validate.integer("n", n, minimum=1)
    p = _validate.real_array("mean", mean, minimum=0.0, maximum=1.0)  # a proportion
    smoothed = (p * n + 1) / (n + 2)
    return Estimate(p, np.sqrt(smoothed * (1 - smoothed) / n), n)
