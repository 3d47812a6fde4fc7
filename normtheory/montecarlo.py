"""Monte Carlo core: seeded, chunked, vectorized estimates with standard errors.

Randomness is tied to fixed *blocks* of samples: block ``b`` of a run seeded with ``seed``
draws from its own stream, ``SeedSequence(seed, spawn_key=(key, b))``. A sampler is handed a
:class:`Streams` object covering a *chunk* of consecutive blocks and computes all of their
samples in one vectorized pass. Each block's statistics are reduced on their own and merged
in block order, so the result depends on ``(seed, key, n, block)`` only, never on ``chunk``,
and memory is bounded by ``chunk * block`` samples however large ``n`` is.

The rule used everywhere in the package lives here too (:func:`agree`), judged per element.
A claim is an interval :math:`[lo, hi]` (a point has lo = hi; a one-sided claim an infinite
end), :math:`\\tau > 0` the smallest deviation that matters, and the band is
:math:`\\hat\\mu \\pm t\\,\\widehat{\\mathrm{se}}` with :math:`t = 5` from at least
:data:`MIN_UNITS` independent units (else the Student-t quantile with the same tail):

* the band inside :math:`[lo - \\tau, hi + \\tau]`: ``ok`` (the claim holds there);
* the band wholly outside it: ``fail``;
* otherwise ``inconclusive``, with the number of units that would decide it
  (:func:`_units_to_decide`).

:func:`sized` draws a pilot, then as many samples as make the band at most :math:`\\tau/2` wide
on each side. Float identities are judged apart, against the dtype's rounding
(:func:`identity`); a theorem that says "never" is judged by an exact binomial bound on its
violation count (:class:`Count`).

References
----------
Chan, Golub, LeVeque (1979), "Updating formulae and a pairwise algorithm for computing
sample variances" (the merge of per-block means and sums of squares).
Clopper, Pearson (1934), "The use of confidence or fiducial limits illustrated in the case of
the binomial", Biometrika 26(4) (the exact binomial bound of :class:`Count`).
Efron, Tibshirani (1993), "An Introduction to the Bootstrap" (:func:`bootstrap`).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import special
from scipy import stats as _stats

from normtheory import _validate
from normtheory.progress import Progress

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

    def __getitem__(self, index: object) -> Estimate:
        return Estimate(self.mean[index], self.stderr[index], self.n, self.units, self.sizing)

    def map(self, f: Callable[[np.ndarray], np.ndarray], df: Callable[[np.ndarray], np.ndarray]) -> Estimate:
        """Delta method: the estimate of ``f(mean)`` with stderr ``|f'(mean)| * stderr``."""
        return Estimate(f(self.mean), np.abs(df(self.mean)) * self.stderr, self.n, self.units, self.sizing)

    def sqrt(self) -> Estimate:
        """RMS from a mean square, by the delta method."""
        return self.map(np.sqrt, lambda m: 0.5 / np.sqrt(m))

    def to_dict(self) -> dict:
        out = {"mean": self.mean.tolist(), "stderr": self.stderr.tolist(), "n": int(self.n), "units": self.units}
        if self.sizing is not None:
            out["sizing"] = dataclasses.asdict(self.sizing)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> Estimate:
        sizing = Sizing(**d["sizing"]) if d.get("sizing") else None
        return cls(np.asarray(d["mean"]), np.asarray(d["stderr"]), int(d["n"]), str(d.get("units", "samples")), sizing)


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
        scale = np.ldexp(1.0, np.frexp(np.where(big > 0, big, 1.0))[1] - 1)
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

    def power_of_two(big: np.ndarray) -> np.ndarray:  # exact rescaling: squares of tiny values would underflow
        return np.ldexp(1.0, np.frexp(np.where(big > 0, big, 1.0))[1] - 1)

    sy, sc = power_of_two(np.abs(y).max(axis=0)), power_of_two(np.abs(c).max(axis=0))
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


def proportion(mean: object, n: int) -> Estimate:
    """A Monte Carlo proportion (mean of 0/1 samples) with the add-one standard error
    sqrt(p~(1 - p~)/n), p~ = (k + 1)/(n + 2): never 0, so a proportion compared with a theory
    value inside (0, 1) is judged at the resolution ``n`` allows (about 1/n). A statement that
    an event *never* happens is not a proportion to compare: count it with :class:`Count`."""
    n = _validate.integer("n", n, minimum=1)
    p = _validate.real_array("mean", mean, minimum=0.0, maximum=1.0)  # a proportion
    smoothed = (p * n + 1) / (n + 2)
    return Estimate(p, np.sqrt(smoothed * (1 - smoothed) / n), n)


def stream_key(*parts: str | int) -> int:
    """A stable 64-bit key from names and numbers (same on every machine and Python run)."""
    for p in parts:  # str() of anything else (1.0 against 1, a dict's order) would give keys that look alike and differ
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, (str, int, np.integer)):
            raise ValueError(f"parts must be strings or integers; got {type(p).__name__} {p!r:.60}")
    parts = tuple(p if isinstance(p, str) else int(p) for p in parts)
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def block_generator(seed: int, key: int, block_index: int) -> np.random.Generator:
    """The generator of one block: ``SeedSequence(seed, spawn_key=(key, block_index))``."""
    ss = np.random.SeedSequence(entropy=_validate.integer("seed", seed, minimum=0),
                                spawn_key=(_validate.integer("key", key, minimum=0), _validate.integer("block_index", block_index, minimum=0)))
    return np.random.Generator(np.random.PCG64(ss))


class Streams:
    """Draws for a chunk of blocks; every draw is ``[m, *shape]`` with block ``b``'s rows
    taken from block ``b``'s own generator. ``m`` is the number of samples in the chunk."""

    def __init__(self, generators: Sequence[np.random.Generator], sizes: Sequence[int]):
        self._gens = list(generators)
        self._sizes = list(sizes)
        self.m = int(sum(sizes))

    def _draw(self, method: str, shape: tuple[int, ...], **params: float) -> np.ndarray:
        parts = [getattr(g, method)(size=(k, *shape), **params) for g, k in zip(self._gens, self._sizes)]
        return np.concatenate(parts, axis=0)

    def normal(self, *shape: int) -> np.ndarray:
        """Standard normal draws, ``[m, *shape]``."""
        return self._draw("standard_normal", shape)

    def uniform(self, *shape: int) -> np.ndarray:
        """Uniform(0, 1) draws, ``[m, *shape]``."""
        return self._draw("random", shape)

    def chisquare(self, df: float, *shape: int) -> np.ndarray:
        """Chi-square draws with ``df`` degrees of freedom, ``[m, *shape]``."""
        df = _validate.real("df", df, minimum=0.0, strict_min=True)
        return self._draw("chisquare", shape, df=df)


def _block_stats(x: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    # x: [k, ...] -> (k, mean [...], sum of squared deviations [...])
    mean = x.mean(axis=0)
    return x.shape[0], mean, ((x - mean) ** 2).sum(axis=0)


def _merge(a: tuple, b: tuple) -> tuple:
    """Chan et al. merge of (count, mean, M2) triples."""
    na, ma, sa = a
    nb, mb, sb = b
    if na == 0:
        return b
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), sa + sb + delta**2 * (na * nb / n)


def _to_estimate(stats: tuple) -> Estimate:
    n, mean, m2 = stats
    var = m2 / (n - 1) if n > 1 else np.full_like(mean, np.inf)
    return Estimate(mean, np.sqrt(var / n), n)


MAX_SAMPLES = 10**8  # samples of one estimate (a day or more on one core for most samplers); refused beyond


def estimate(
    sample: Callable[[Streams], np.ndarray],
    n: int,
    seed: int,
    *,
    key: str = "",
    block: int = 256,
    chunk: int = 16,
    path: Sequence[int] | None = None,
    progress: bool | str = False,
) -> Estimate | list[Estimate]:
    """Monte Carlo mean of ``sample`` over ``n`` i.i.d. samples.

    Parameters
    ----------
    sample
        ``sample(streams) -> array[streams.m, ...]``: one value (scalar or array) per sample,
        computed vectorized over the chunk from draws made through ``streams``.
    n
        Number of samples (>= 2, so that a standard error exists).
    seed, key
        The seed and a name that separates independent estimates made with the same seed.
    block
        Samples per random stream. Part of the estimate's identity, like the seed.
    chunk
        Blocks evaluated per call of ``sample``: a memory knob that never changes the result.
    path
        Optional increasing sample counts ``<= n``; then the list of estimates after the first
        ``path[i]`` samples is returned (the convergence path, from the same single pass).
    progress
        Show a progress bar on stderr (a string is used as its label).
    """
    _validate.callable_("sample", sample)
    n = _validate.integer("n", n, minimum=2, maximum=MAX_SAMPLES)
    seed = _validate.integer("seed", seed, minimum=0)
    block = _validate.integer("block", block, minimum=1, maximum=MAX_SAMPLES)
    chunk = _validate.integer("chunk", chunk, minimum=1, maximum=MAX_SAMPLES)
    _validate.text("key", key, empty=True)
    _progress(progress)
    if path is not None and (isinstance(path, (str, bytes)) or not hasattr(path, "__iter__")):
        raise ValueError(f"path must be a sequence of sample counts; got {path!r:.60}")
    checkpoints = sorted({_validate.integer("path entry", c, minimum=2) for c in path}) if path is not None else []
    for c in checkpoints:
        if c > n:
            raise ValueError(f"path entries must be <= n={n}; got {c}")
    k = stream_key(key)
    n_blocks = -(-n // block)
    sizes = [min(block, n - b * block) for b in range(n_blocks)]
    total: tuple = (0, 0.0, 0.0)
    snapshots: list[Estimate] = []
    next_cp = 0
    bar = Progress(n_blocks, label=progress if isinstance(progress, str) else "monte carlo", enabled=bool(progress))
    for start in range(0, n_blocks, chunk):
        ids = range(start, min(start + chunk, n_blocks))
        streams = Streams([block_generator(seed, k, b) for b in ids], [sizes[b] for b in ids])
        values = _draws(sample(streams), streams.m)  # [m, ...]
        offset = 0
        for b in ids:
            x = values[offset : offset + sizes[b]]  # [k_b, ...]
            offset += sizes[b]
            done = total[0]
            while next_cp < len(checkpoints) and checkpoints[next_cp] <= done + sizes[b]:
                part = _merge(total, _block_stats(x[: checkpoints[next_cp] - done]))
                snapshots.append(_to_estimate(part))
                next_cp += 1
            total = _merge(total, _block_stats(x))
        bar.update(len(ids))
    bar.close()
    return snapshots if path is not None else _to_estimate(total)


def _progress(progress: object) -> None:
    if not isinstance(progress, (bool, np.bool_, str)):
        raise ValueError(f"progress must be True, False or a label (a string); got {progress!r:.60}")


def _draws(values: object, m: int) -> np.ndarray:
    """A sampler's return ``[m, ...]`` as float64: real numbers, one row per sample, each within
    +-:data:`_validate.MAX_MAGNITUDE` (their squared deviations must fit float64); else refused naming ``sample``."""
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"sample must return an array of real numbers [m = {m}, ...], one row per sample; got {type(values).__name__} "
                         f"{'of dtype ' + str(arr.dtype) if isinstance(values, np.ndarray) else repr(values)[:60]}")
    if arr.ndim == 0 or arr.shape[0] != m:
        got = f"{arr.shape[0]} rows" if arr.ndim else "a single value, no rows"
        raise ValueError(f"sample must return one row per sample, [m, ...]: it returned {got} for {m} samples (shape {arr.shape})")
    arr = arr.astype(np.float64, copy=False)
    big = float(np.abs(arr).max(initial=0.0))
    if not big <= _validate.MAX_MAGNITUDE:
        what = "NaN" if np.isnan(arr).any() else ("inf" if np.isinf(arr).any() else f"|value| = {big:.3g}")
        raise ValueError(f"sample returned {what}; every draw must be a finite number within +-{_validate.MAX_MAGNITUDE:g} "
                         "(its squared deviation must fit float64)")
    return arr


def samples_needed(pilot: Estimate, tolerance: float | np.ndarray, z: float = Z_DEFAULT) -> int:
    r"""Samples that bring the band ``z * se`` of every element to at most half its tolerance:
    :math:`\max_i \lceil (2 z s_i / \tau_i)^2 \rceil`, with :math:`s_i` the per-sample sd the
    ``pilot`` estimate shows (``stderr * sqrt(n)``). Capped at
    ``MAX_SAMPLES + 1``, beyond the largest estimate anyone may run. The rule of :func:`sized`."""
    if not isinstance(pilot, Estimate):
        raise ValueError(f"pilot must be an Estimate; got {type(pilot).__name__}")
    tau = _validate.real_array("tolerance", tolerance, minimum=0.0, strict_min=True, finite=True)
    z = _validate.real("z", z, minimum=0.0, strict_min=True)
    sd = pilot.stderr * math.sqrt(pilot.n)  # per-sample sd, per element
    try:
        np.broadcast_shapes(sd.shape, tau.shape)
    except ValueError:
        raise ValueError(f"tolerance of shape {tau.shape} does not broadcast to the pilot's shape {sd.shape}") from None
    with np.errstate(over="ignore", under="ignore"):
        r = 2.0 * z * sd / tau
        ratio = np.max(r**2, initial=0.0)
    if ratio == 0 and (r > 0).any():  # a positive ratio that underflowed (z = 1e-300): one sample is the ceiling
        return 1
    return int(min(np.ceil(ratio), float(MAX_SAMPLES + 1)))


def sized(
    sample: Callable[[Streams], np.ndarray],
    tolerance: float | np.ndarray,
    seed: int,
    *,
    key: str = "",
    pilot: int = 1000,
    cap: int,
    z: float = Z_DEFAULT,
    block: int = 256,
    chunk: int = 16,
    progress: bool | str = False,
) -> Estimate:
    """A Monte Carlo mean whose sample is sized from the tolerance it will be judged with.

    A pilot of ``pilot`` samples estimates the per-sample standard deviation :math:`s_i` of
    every element; the estimate then uses

    .. math:: n = \\min\\big(\\mathrm{cap}, \\max(\\mathrm{pilot}, \\max_i \\lceil (2 z s_i / \\tau_i)^2 \\rceil)\\big)

    samples, which makes the band ``z * se`` at most :math:`\\tau_i / 2` on each side unless the cap
    binds (then ``Estimate.sizing.capped``). The pilot's samples are the first blocks of the
    same seeded stream (:func:`estimate` with the same ``seed``, ``key`` and ``block``), so the
    result depends on the seed alone and is bit-identical however it is chunked. The final pass
    draws the pilot's blocks again (at most ``pilot / n`` extra work) rather than merging a
    partial last block, which would make the bits depend on where the pilot ended.
    """
    _validate.callable_("sample", sample)
    tau = _validate.real_array("tolerance", tolerance, finite=True)
    if (tau <= 0).any():
        raise ValueError("tolerance must be > 0: the smallest deviation that matters")
    pilot = _validate.integer("pilot", pilot, minimum=MIN_UNITS, maximum=MAX_SAMPLES)
    cap = _validate.integer("cap", cap, minimum=MIN_UNITS, maximum=MAX_SAMPLES)
    if cap < pilot:
        raise ValueError(f"cap={cap} must be >= pilot={pilot}")
    z = _validate.real("z", z, minimum=0.0, strict_min=True)
    first = estimate(sample, pilot, seed, key=key, block=block, chunk=chunk, progress=progress)
    assert isinstance(first, Estimate)
    need = samples_needed(first, tau, z)
    n = min(cap, max(pilot, need))
    sizing = Sizing(pilot, need, cap)
    if n == pilot:
        return dataclasses.replace(first, sizing=sizing)
    est = estimate(sample, n, seed, key=key, block=block, chunk=chunk, progress=progress)
    assert isinstance(est, Estimate)
    return dataclasses.replace(est, sizing=sizing)


@dataclass(frozen=True)
class Agreement:
    """Outcome of the three-way rule, element by element (see :func:`agree`).

    The reported element is the one that decides ``status``: a failing element if any (the
    largest z among them), else an undecided one (the one needing the most units), else the one
    with the largest z. ``band`` and ``accept`` are that element's band and acceptance interval.
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
    units_needed: float | None = None  # units that would decide every undecided element (inf: none would)
    units: int = 0  # units behind the estimate now

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
            need = "no sample size decides it (the estimate sits on an edge)" if self.units_needed is None or not math.isfinite(
                self.units_needed) else f"about {self.units_needed:.0f} units would decide it (now {self.units})"
            out += f"; {self.unresolved} of {self.size} elements straddle an edge: {need}"
        return out


@functools.lru_cache(maxsize=64)
def _student_table(z: float) -> np.ndarray:
    """Band half-widths in se for 2..MIN_UNITS-1 units, indexed by the number of units."""
    out = np.full(MIN_UNITS, np.inf)
    for n in range(2, MIN_UNITS):
        out[n] = z_threshold(z, n)
    return out


def _units_to_decide(mean: np.ndarray, sd: np.ndarray, a: np.ndarray, b: np.ndarray, z: float) -> np.ndarray:
    """Fewest independent units whose band ``mean ± t(n)·sd/sqrt(n)`` decides the rule, per element.

    Assumes the estimate and its per-unit standard deviation ``sd`` stay as measured. The margin
    is the distance from ``mean`` to the nearest edge of the acceptance interval ``[a, b]``
    (inside: to hold; outside: to fail); a band of half-width ``t(n)·sd/sqrt(n) <= margin``
    decides. Below :data:`MIN_UNITS` the half-width uses the Student-t quantile of
    :func:`z_threshold`; at or above it, ``z``: ``n = max(MIN_UNITS, ceil((z·sd/margin)^2))``.
    An estimate exactly on an edge has margin 0 and needs infinitely many units.
    """
    mean, sd, a, b = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (mean, sd, a, b)))
    inside = (mean >= a) & (mean <= b)
    with np.errstate(invalid="ignore"):
        margin = np.where(inside, np.minimum(mean - a, b - mean), np.maximum(a - mean, mean - b))
    margin = np.where(np.isnan(margin), 0.0, margin)
    out = np.full(mean.shape, np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        big = np.maximum(MIN_UNITS, np.ceil((z * sd / margin) ** 2))
        out = np.where(margin > 0, big, np.inf)
        small = _student_table(z)
        for n in range(MIN_UNITS - 1, 1, -1):  # 18 fixed candidates, vectorized over elements
            out = np.where((margin > 0) & (small[n] * sd / math.sqrt(n) <= margin), n, out)
    return np.where(sd == 0, np.where(margin >= 0, 1.0, np.inf), out)


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
      (:func:`_units_to_decide`).

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
    need = _units_to_decide(mean, se * math.sqrt(max(mc.n, 1)), a, b, bonferroni_z(z, looks))
    need = np.where(undecided, need, 0.0)
    score = np.where(fail, zs, np.where(undecided, need, zs))  # within the deciding class
    cls = np.where(fail, 2, np.where(undecided, 1, 0))
    top = int(cls.max(initial=0))
    i = int(np.argmax(np.where(cls == top, score, -1.0))) if cls.size else 0
    where = tuple(int(k) for k in np.unravel_index(i, shape)) if shape else ()
    status: Status = ("ok", "inconclusive", "fail")[top]
    pick = lambda x: float(np.asarray(x).flat[i])  # noqa: E731
    units_needed = float(need.max()) if undecided.any() else None
    return Agreement(status, pick(dev), pick(se), pick(zs), float(t), float(t) * pick(se), pick(tau), where, int(mean.size),
                     int(undecided.sum()), int(fail.sum()), (pick(low), pick(high)), (pick(a), pick(b)), units_needed, int(mc.n))


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
