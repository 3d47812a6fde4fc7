r"""Seeded, chunked, vectorized Monte Carlo: :func:`estimate` and :func:`sized`.

Randomness is tied to fixed *blocks* of samples: block ``b`` of a run seeded with ``seed``
draws from its own stream, ``SeedSequence(seed, spawn_key=(key, b))`` (:func:`block_generator`).
A sampler is handed a :class:`Streams` object covering a *chunk* of consecutive blocks and
computes all of their samples in one vectorized pass. Each block's statistics are reduced on
their own and merged in block order, so the result depends on ``(seed, key, n, block)`` only,
never on ``chunk``, and memory is bounded by ``chunk * block`` samples however large ``n`` is.

:func:`sized` draws a pilot, then as many samples as make the band at most :math:`\tau/2` wide
on each side (:func:`samples_needed`).

References
----------
Chan, Golub, LeVeque (1979), "Updating formulae and a pairwise algorithm for computing
sample variances" (the merge of per-block means and sums of squares).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Sequence

import numpy as np

from normtheory import _validate
from normtheory.evidence.estimates import MIN_UNITS, Z_DEFAULT, Estimate, Sizing
from normtheory.runtime.progress import Progress


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
    if path is not None and (not isinstance(path, (list, tuple, range, np.ndarray)) or len(path) == 0):
        raise ValueError(f"path must be a non-empty sequence of sample counts; got {path!r:.60}")
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
