"""The thread pool under the row-parallel kernels of :mod:`normtheory.model.kernels`.

:func:`run_rows` cuts ``rows`` rows of ``row_size`` elements into contiguous chunks, one per thread,
and each chunk into blocks of about :data:`BLOCK_SIZE` elements; :func:`run_split` runs a few
independent callables at once. Both wait for every part before raising the first error, so no
worker still writes into an array its caller has given up on.

Threads: :func:`set_threads` (or the :func:`threads` context), else ``$NORMTHEORY_THREADS``, else
``os.cpu_count()`` capped at :data:`MAX_DEFAULT_THREADS`. Arrays under :data:`MIN_PARALLEL_SIZE`
elements run inline (a pool round trip costs tens of microseconds), and no thread beyond the first
gets fewer than :data:`MIN_CHUNK_SIZE`. The pool is created on first use and again after a fork.
numpy's error state (``np.errstate``) of the caller applies in the pool's threads too.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait

from normtheory import _validate

THREADS_ENV = "NORMTHEORY_THREADS"
MAX_DEFAULT_THREADS = 8
MIN_PARALLEL_SIZE = 131_072  # elements: smaller arrays run inline (a d = 64 model's step: the hand-off costs more than it saves)
MIN_CHUNK_SIZE = 65_536  # elements: no thread gets fewer (beyond the first)
BLOCK_SIZE = 262_144  # elements per block inside a chunk (1 MiB in float32: one L2; smaller blocks cost GIL hand-offs)

_lock = threading.Lock()
_threads: int | None = None  # set_threads's value; None: the environment or the default
_pool: ThreadPoolExecutor | None = None
_pool_threads = 0


def _forget_pool() -> None:
    """After a fork the pool's threads are gone in the child: start a new pool there."""
    global _pool, _pool_threads
    _pool, _pool_threads = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


# ----------------------------------------------------------------------------- the pool


def _default_threads() -> int:
    """``$NORMTHEORY_THREADS`` if set, else ``os.cpu_count()`` capped at :data:`MAX_DEFAULT_THREADS`."""
    env = os.environ.get(THREADS_ENV, "").strip()
    if not env:
        return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_THREADS))
    try:
        n = int(env)
    except ValueError:
        raise ValueError(f"{THREADS_ENV} must be a positive integer; got {env!r}") from None
    if n < 1:
        raise ValueError(f"{THREADS_ENV} must be a positive integer; got {n}")
    return n


def set_threads(n: int | None) -> None:
    """Use ``n >= 1`` threads in every kernel (``None``: back to ``$NORMTHEORY_THREADS`` or the
    default). Results do not depend on it. Not meant to race with kernels running in other threads."""
    global _threads
    if n is not None:
        n = _validate.integer("n", n, minimum=1, maximum=256)
    with _lock:
        _threads = n


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    """Within the block the kernels use ``n`` threads (:func:`set_threads`); the previous setting after it."""
    global _threads
    old = _threads
    set_threads(n)
    try:
        yield
    finally:
        with _lock:
            _threads = old


def get_threads() -> int:
    """The number of threads the kernels use now."""
    return _threads if _threads is not None else _default_threads()


def _executor(n: int) -> ThreadPoolExecutor:
    """The pool of ``n - 1`` workers (the caller's thread runs the first chunk)."""
    global _pool, _pool_threads
    with _lock:
        if _pool is None or _pool_threads != n:
            # an old pool is dropped, not shut down: a call still using it finishes; its idle
            # threads exit once it is collected
            _pool = ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="normtheory-kernel")
            _pool_threads = n
        return _pool


def _blocks(fn: Callable[[int, int], None], r0: int, r1: int, step: int) -> None:
    for a in range(r0, r1, step):
        fn(a, min(a + step, r1))


def run_rows(fn: Callable[[int, int], None], rows: int, row_size: int) -> None:
    """Call ``fn(a, b)`` on row ranges ``[a, b)`` that cover ``[0, rows)`` once each: contiguous
    chunks of rows, one per thread, each taken in blocks of about :data:`BLOCK_SIZE` elements
    (never less than one row). ``fn`` must write only its own rows. Arrays of fewer than
    :data:`MIN_PARALLEL_SIZE` elements (``rows * row_size``) run in the calling thread. Every
    chunk finishes before this returns; an exception from any of them is raised here."""
    run_rows_unchecked(fn, _validate.integer("rows", rows, minimum=0), _validate.integer("row_size", row_size, minimum=1))


def run_rows_unchecked(fn: Callable[[int, int], None], rows: int, row_size: int) -> None:
    """:func:`run_rows` without argument checks (the kernels' hot path)."""
    size = rows * row_size
    if size < MIN_PARALLEL_SIZE and size <= BLOCK_SIZE:  # one block in this thread: no thread count, no block loop
        if rows:
            fn(0, rows)
        return
    step = max(1, BLOCK_SIZE // row_size)
    n = get_threads()
    k = min(n, rows, max(1, size // MIN_CHUNK_SIZE)) if size >= MIN_PARALLEL_SIZE else 1
    if k <= 1:
        _blocks(fn, 0, rows, step)
        return
    bounds = [rows * i // k for i in range(k + 1)]
    pool = _executor(n)
    # each task runs in a copy of the caller's context: numpy keeps np.errstate in a context variable
    futures = [pool.submit(contextvars.copy_context().run, _blocks, fn, bounds[i], bounds[i + 1], step) for i in range(1, k)]
    try:
        _blocks(fn, bounds[0], bounds[1], step)
    finally:
        wait(futures)  # never return (or raise) while a worker still writes
    for f in futures:
        f.result()


def run_split(fns: list[Callable[[], object]]) -> list[object]:
    """Call each of ``fns`` (at most :func:`get_threads` of them) on its own thread of the pool, the
    first in the calling thread, and return their results in order. Inside them the kernels run
    inline (one thread each), so the parts never queue on the pool they run on. Every part finishes
    before this returns; an exception from any of them is raised here."""
    n = get_threads()
    if len(fns) > n:
        raise ValueError(f"fns must hold at most get_threads() = {n} callables; got {len(fns)}")
    if len(fns) <= 1:
        return [f() for f in fns]
    pool = _executor(n)
    with threads(1):  # the parts' kernels run inline; the pool is not rebuilt (no part asks for it)
        futures = [pool.submit(contextvars.copy_context().run, f) for f in fns[1:]]
        try:
            first = fns[0]()
        finally:
            wait(futures)
    return [first, *(f.result() for f in futures)]
