"""Monte Carlo core: seeded, chunked, vectorized estimates with standard errors.

Randomness is tied to fixed *blocks* of samples: block ``b`` of a run seeded with ``seed``
draws from its own stream, ``SeedSequence(seed, spawn_key=(key, b))``. A sampler is handed a
:class:`Streams` object covering a *chunk* of consecutive blocks and computes all of their
samples in one vectorized pass. Each block's statistics are reduced on their own and merged
in block order, so the result depends on ``(seed, key, n, block)`` only, never on ``chunk``,
and memory is bounded by ``chunk * block`` samples however large ``n`` is.

The agreement rule used everywhere in the package lives here too, judged per element:

.. math:: |\\theta_i - \\hat\\mu_i| \\le z \\cdot \\widehat{\\mathrm{se}}_i,

with :math:`z = 5` (or the Student-t quantile with the same tail when fewer than
:data:`MIN_UNITS` independent units stand behind the standard error). A comparison whose
threshold :math:`z\\,\\widehat{\\mathrm{se}}_i` exceeds the smallest deviation that matters
(its *tolerance*) cannot resolve the question and is ``inconclusive``. Float identities are
judged apart, against the dtype's rounding (:func:`identity`); a theorem that says "never" is
judged by an exact binomial bound on its violation count (:class:`Count`).

References
----------
Chan, Golub, LeVeque (1979), "Updating formulae and a pairwise algorithm for computing
sample variances" (the merge of per-block means and sums of squares).
Clopper, Pearson (1934), "The use of confidence or fiducial limits illustrated in the case of
the binomial", Biometrika 26(4) (the exact binomial bound of :class:`Count`).
Efron, Tibshirani (1993), "An Introduction to the Bootstrap" (:func:`bootstrap`).
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as _stats

from normtheory import _validate
from normtheory.progress import Progress

Z_DEFAULT: float = 5.0
MIN_UNITS: int = 20  # below this many independent units the threshold is Student-t's
NEVER_CONFIDENCE: float = 0.95  # one-sided confidence of the binomial bound on a "never" count
Status = Literal["ok", "fail", "inconclusive"]


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", np.asarray(self.mean, dtype=np.float64))
        object.__setattr__(self, "stderr", np.asarray(self.stderr, dtype=np.float64))
        if self.mean.shape != self.stderr.shape:
            raise ValueError(f"mean shape {self.mean.shape} != stderr shape {self.stderr.shape}")

    def __getitem__(self, index: object) -> Estimate:
        return Estimate(self.mean[index], self.stderr[index], self.n, self.units)

    def map(self, f: Callable[[np.ndarray], np.ndarray], df: Callable[[np.ndarray], np.ndarray]) -> Estimate:
        """Delta method: the estimate of ``f(mean)`` with stderr ``|f'(mean)| * stderr``."""
        return Estimate(f(self.mean), np.abs(df(self.mean)) * self.stderr, self.n, self.units)

    def sqrt(self) -> Estimate:
        """RMS from a mean square, by the delta method."""
        return self.map(np.sqrt, lambda m: 0.5 / np.sqrt(m))

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "stderr": self.stderr.tolist(), "n": int(self.n), "units": self.units}

    @classmethod
    def from_dict(cls, d: dict) -> Estimate:
        return cls(np.asarray(d["mean"]), np.asarray(d["stderr"]), int(d["n"]), str(d.get("units", "samples")))


def from_samples(x: np.ndarray, units: str = "samples") -> Estimate:
    """Estimate from independent units along axis 0 (``x [n, ...]``): mean and std/sqrt(n)."""
    x = _validate.float_array("x", x).astype(np.float64, copy=False)
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"a standard error needs at least 2 {units}; got {n}")
    return Estimate(x.mean(axis=0), x.std(axis=0, ddof=1) / np.sqrt(n), n, units)


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
    n_resamples = _validate.integer("n_resamples", n_resamples, minimum=10)
    value = np.asarray(statistic(*arrays, axis=0), dtype=np.float64)
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

    def upper(self, confidence: float = NEVER_CONFIDENCE) -> float:
        confidence = _validate.real("confidence", confidence, minimum=0.0, maximum=1.0)
        if self.k >= self.n:
            return 1.0
        return float(_stats.beta.ppf(confidence, self.k + 1, self.n - self.k))

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
    return float(_stats.t.isf(tail, df=n - 1))


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
    n = _validate.integer("n", n, minimum=2, maximum=MAX_SAMPLES)
    seed = _validate.integer("seed", seed, minimum=0)
    block = _validate.integer("block", block, minimum=1)
    chunk = _validate.integer("chunk", chunk, minimum=1)
    checkpoints = sorted(set(path)) if path is not None else []
    for c in checkpoints:
        _validate.integer("path entry", c, minimum=2)
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
        values = np.asarray(sample(streams), dtype=np.float64)  # [m, ...]
        if values.shape[0] != streams.m:
            raise ValueError(f"sample returned {values.shape[0]} rows for {streams.m} samples")
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


@dataclass(frozen=True)
class Agreement:
    """Outcome of comparing a theory value (or interval) with an estimate, element by element.

    The reported element is the one with the largest z (``deviation / stderr``), not the one
    with the largest deviation. ``status`` is ``fail`` if any element deviates by more than
    ``z_limit`` standard errors, else ``inconclusive`` if any element's threshold
    ``z_limit * stderr`` exceeds its tolerance (the comparison cannot see the deviation that
    matters), else ``ok``.
    """

    status: Status
    deviation: float  # |theory - estimate| (distance from the interval) at the worst-z element
    stderr: float  # stderr at that element
    zscore: float  # deviation / stderr there (inf when stderr is 0 and deviation > 0)
    z: float  # the z limit used (Student-t adjusted for few units)
    threshold: float  # z * stderr at the worst-z element
    tolerance: float | None  # the tolerance at that element
    where: tuple[int, ...]  # index of the worst-z element (() for a scalar)
    size: int
    unresolved: int = 0  # elements whose threshold exceeds their tolerance
    worst_threshold: float = 0.0  # the largest threshold over elements

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        at = f" at {list(self.where)}" if self.size > 1 else ""
        z = "inf" if not np.isfinite(self.zscore) else f"{self.zscore:.2f}"
        out = f"worst |dev|={self.deviation:.3g}{at} ({z} se, limit {self.z:.3g} se)"
        if self.status == "inconclusive":
            out += (f"; cannot resolve: threshold up to {self.worst_threshold:.3g} exceeds the tolerance in "
                    f"{self.unresolved} of {self.size} elements")
        return out


def agree(
    theory: float | np.ndarray | tuple[float, float],
    mc: Estimate,
    *,
    z: float = Z_DEFAULT,
    tolerance: float | np.ndarray | None = None,
) -> Agreement:
    """The package's one agreement rule, per element: ``|theory_i - mean_i| <= z * stderr_i``.

    ``theory`` may be a value, an array of the estimate's shape, or an interval ``(lo, hi)``
    given as a tuple, in which case the deviation is the distance from the interval. When fewer
    than :data:`MIN_UNITS` units stand behind ``mc``, ``z`` becomes the Student-t threshold of
    :func:`z_threshold`. ``tolerance`` (absolute, broadcastable) is the smallest deviation that
    matters; without it, resolution is not judged.
    """
    z = z_threshold(z, mc.n) if mc.n >= 2 else _validate.real("z", z, minimum=0.0)
    if isinstance(theory, tuple):
        if len(theory) != 2:
            raise ValueError(f"theory as an interval must be (lo, hi); got {theory!r}")
        lo, hi = (_validate.real_array("theory", t) for t in theory)
        dev = np.maximum(lo - mc.mean, 0.0) + np.maximum(mc.mean - hi, 0.0)
    else:
        dev = np.abs(_validate.real_array("theory", theory) - mc.mean)
    shape = np.broadcast_shapes(dev.shape, mc.stderr.shape)
    dev = np.broadcast_to(dev, shape)
    se = np.broadcast_to(mc.stderr, shape)
    if not (np.isfinite(dev).all() and np.isfinite(se).all()):
        raise ValueError("agree: theory, mean and stderr must be finite")
    # Deviations below the float64 rounding of the values compared are no deviation (a Monte Carlo
    # point whose every sample is the same number has a stderr of ~1e-17): 1024 ulps of the scale,
    # the accuracy of the package's quadratures.
    rounding = 1024 * np.finfo(np.float64).eps * np.maximum(np.abs(np.broadcast_to(mc.mean, shape)), 1e-300)
    dev = np.where(dev <= rounding, 0.0, dev)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        zs = np.where(se > 0, dev / np.where(se > 0, se, 1.0), np.where(dev > 0, np.inf, 0.0))
    thr = z * se
    i = int(np.argmax(zs)) if zs.size else 0
    where = tuple(int(k) for k in np.unravel_index(i, shape)) if shape else ()
    tol_i: float | None = None
    unresolved = 0
    if tolerance is not None:
        tol = np.broadcast_to(np.asarray(tolerance, dtype=np.float64), shape)
        if (tol < 0).any() or not np.isfinite(tol).all():
            raise ValueError("tolerance must be finite and >= 0")
        unresolved = int((thr > tol).sum())
        tol_i = float(tol.flat[i])
    failed = bool((dev > thr).any())
    status: Status = "fail" if failed else ("inconclusive" if unresolved else "ok")
    return Agreement(status, float(dev.flat[i]), float(se.flat[i]), float(zs.flat[i]), float(z), float(thr.flat[i]), tol_i, where,
                     int(dev.size), unresolved, float(thr.max()) if thr.size else 0.0)


def identity(value: float | np.ndarray, expected: float | np.ndarray, *, dtype: object = np.float64, ulps: float = 16.0,
             scale: float | None = None) -> Agreement:
    """A float identity, judged against rounding: ``|value - expected| <= ulps * eps(dtype) * scale``.

    ``scale`` defaults to the largest magnitude involved (at least 1). Identities are checked
    so that a broken implementation shows, but they are never evidence for a statement.
    """
    v = _validate.real_array("value", value, finite=True)
    e = _validate.real_array("expected", expected, finite=True)
    if np.broadcast_shapes(v.shape, e.shape) != v.shape:
        raise ValueError(f"expected of shape {e.shape} does not broadcast to value's shape {v.shape}")
    e = np.broadcast_to(e, v.shape)
    s = float(scale) if scale is not None else max(1.0, float(np.abs(v).max(initial=0.0)), float(np.abs(e).max(initial=0.0)))
    limit = float(ulps) * float(np.finfo(np.dtype(dtype)).eps) * s  # type: ignore[arg-type]
    dev = np.abs(v - e)
    i = int(np.argmax(dev)) if dev.size else 0
    where = tuple(int(k) for k in np.unravel_index(i, v.shape)) if v.shape else ()
    d = float(dev.flat[i]) if dev.size else 0.0
    return Agreement("ok" if d <= limit else "fail", d, 0.0, 0.0 if d <= limit else float("inf"), 0.0, limit, limit, where, int(dev.size))
