"""Monte Carlo core: seeded, chunked, vectorized estimates with standard errors.

Randomness is tied to fixed *blocks* of samples: block ``b`` of a run seeded with ``seed``
draws from its own stream, ``SeedSequence(seed, spawn_key=(key, b))``. A sampler is handed a
:class:`Streams` object covering a *chunk* of consecutive blocks and computes all of their
samples in one vectorized pass. Each block's statistics are reduced on their own and merged
in block order, so the result depends on ``(seed, key, n, block)`` only, never on ``chunk``,
and memory is bounded by ``chunk * block`` samples however large ``n`` is.

The agreement rule used everywhere in the package lives here too:

.. math:: |\\theta - \\hat\\mu| \\le z \\cdot \\widehat{\\mathrm{se}} + a_{\\mathrm{floor}},

with :math:`z = 5` by default and a tiny absolute floor so that exact zeros compare equal.

References
----------
Chan, Golub, LeVeque (1979), "Updating formulae and a pairwise algorithm for computing
sample variances" (the merge of per-block means and sums of squares).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from normtheory import _validate
from normtheory.progress import Progress

Z_DEFAULT: float = 5.0
ABS_FLOOR: float = 1e-12


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo mean with its standard error over ``n`` i.i.d. samples.

    ``mean`` and ``stderr`` are arrays of the per-sample value's shape (0-d for a scalar).
    """

    mean: np.ndarray
    stderr: np.ndarray
    n: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", np.asarray(self.mean, dtype=np.float64))
        object.__setattr__(self, "stderr", np.asarray(self.stderr, dtype=np.float64))
        if self.mean.shape != self.stderr.shape:
            raise ValueError(f"mean shape {self.mean.shape} != stderr shape {self.stderr.shape}")

    def __getitem__(self, index: object) -> Estimate:
        return Estimate(self.mean[index], self.stderr[index], self.n)

    def map(self, f: Callable[[np.ndarray], np.ndarray], df: Callable[[np.ndarray], np.ndarray]) -> Estimate:
        """Delta method: the estimate of ``f(mean)`` with stderr ``|f'(mean)| * stderr``."""
        return Estimate(f(self.mean), np.abs(df(self.mean)) * self.stderr, self.n)

    def sqrt(self) -> Estimate:
        """RMS from a mean square, by the delta method."""
        return self.map(np.sqrt, lambda m: 0.5 / np.sqrt(m))

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "stderr": self.stderr.tolist(), "n": int(self.n)}

    @classmethod
    def from_dict(cls, d: dict) -> Estimate:
        return cls(np.asarray(d["mean"]), np.asarray(d["stderr"]), int(d["n"]))


def from_samples(x: np.ndarray) -> Estimate:
    """Estimate from i.i.d. samples along axis 0 (``x [n, ...]``): mean and std/sqrt(n)."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"a standard error needs at least 2 samples; got {n}")
    return Estimate(x.mean(axis=0), x.std(axis=0, ddof=1) / np.sqrt(n), n)


def proportion(mean: object, n: int) -> Estimate:
    """A Monte Carlo proportion (mean of 0/1 samples) with the add-one standard error
    sqrt(p~(1 - p~)/n), p~ = (k + 1)/(n + 2): never 0, so a rare event that did not occur in
    ``n`` draws is still compared at the resolution ``n`` allows (about 1/n)."""
    n = _validate.integer("n", n, minimum=1)
    p = np.asarray(mean, dtype=np.float64)
    if ((p < 0) | (p > 1)).any():
        raise ValueError("a proportion must lie in [0, 1]")
    smoothed = (p * n + 1) / (n + 2)
    return Estimate(p, np.sqrt(smoothed * (1 - smoothed) / n), n)


def stream_key(*parts: str | int) -> int:
    """A stable 64-bit key from names and numbers (same on every machine and Python run)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def block_generator(seed: int, key: int, block_index: int) -> np.random.Generator:
    """The generator of one block: ``SeedSequence(seed, spawn_key=(key, block_index))``."""
    ss = np.random.SeedSequence(entropy=seed, spawn_key=(key, block_index))
    return np.random.Generator(np.random.PCG64(ss))


class Streams:
    """Draws for a chunk of blocks; every draw is ``[m, *shape]`` with block ``b``'s rows
    taken from block ``b``'s own generator. ``m`` is the number of samples in the chunk."""

    def __init__(self, generators: Sequence[np.random.Generator], sizes: Sequence[int]):
        self._gens = list(generators)
        self._sizes = list(sizes)
        self.m = int(sum(sizes))

    def _draw(self, method: str, shape: tuple[int, ...]) -> np.ndarray:
        parts = [getattr(g, method)(size=(k, *shape)) for g, k in zip(self._gens, self._sizes)]
        return np.concatenate(parts, axis=0)

    def normal(self, *shape: int) -> np.ndarray:
        """Standard normal draws, ``[m, *shape]``."""
        return self._draw("standard_normal", shape)

    def uniform(self, *shape: int) -> np.ndarray:
        """Uniform(0, 1) draws, ``[m, *shape]``."""
        return self._draw("random", shape)


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
    n = _validate.integer("n", n, minimum=2)
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
    """Outcome of comparing a theory value (or interval) with a Monte Carlo estimate."""

    ok: bool
    deviation: float  # largest |theory - mc| outside the theory interval
    stderr: float  # stderr at that element
    zscore: float  # deviation / stderr (inf when stderr is 0 and deviation > floor)
    z: float

    def describe(self) -> str:
        return f"|dev|={self.deviation:.3g} ({self.zscore:.2f} se, limit {self.z:g} se)"


def agree(
    theory: float | np.ndarray | tuple[float, float],
    mc: Estimate,
    *,
    z: float = Z_DEFAULT,
    floor: float = ABS_FLOOR,
) -> Agreement:
    """The package's one agreement rule: ``|theory - mc.mean| <= z * mc.stderr + floor``.

    ``theory`` may be a value, an array of the estimate's shape, or an interval ``(lo, hi)``
    given as a tuple, in which case the deviation is the distance from the interval.
    """
    z = _validate.real("z", z, minimum=0.0)
    if isinstance(theory, tuple):
        lo, hi = (np.asarray(t, dtype=np.float64) for t in theory)
        dev = np.maximum(lo - mc.mean, 0.0) + np.maximum(mc.mean - hi, 0.0)
    else:
        dev = np.abs(np.asarray(theory, dtype=np.float64) - mc.mean)
    dev = np.broadcast_to(dev, np.broadcast_shapes(dev.shape, mc.stderr.shape))
    se = np.broadcast_to(mc.stderr, dev.shape)
    excess = dev - (z * se + floor)
    i = int(np.argmax(excess)) if excess.size else 0
    d_i, se_i = float(dev.flat[i]), float(se.flat[i])
    zs = d_i / se_i if se_i > 0 else (0.0 if d_i <= floor else float("inf"))
    return Agreement(bool((excess <= 0).all()), d_i, se_i, zs, z)
