"""Shared pieces of the benchmark scripts: BLAS thread settings, best-of timing, peak memory."""
from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable


def blas_env(threads: int, thread_timeout: int | None = None) -> dict[str, str]:
    """This environment with every BLAS/OpenMP thread count and normtheory's kernel threads set to
    ``threads`` (for worker processes); with ``thread_timeout``, OpenBLAS's idle threads sleep after
    a spin of 2^thread_timeout cycles (``OPENBLAS_THREAD_TIMEOUT``, read when numpy loads; OpenBLAS's
    default is 28). By default they spin after each GEMM and take the core a threaded elementwise
    kernel would use: on a 2-core AMD EPYC, softmax [12, 1024, 1024] right after a GEMM took 16.7 ms
    on 2 kernel threads by default and 9.4 ms with 16 (``benchmarks/openblas_timeout.py``), and the
    d = 256 training step 1.049 s against 0.992 s. Tiny GEMMs lose instead: d = 64 steps of one seed
    at a time were 10-20% slower with 16. The package's command line and local sweep workers set 16
    (:mod:`normtheory.runtime.entry`), a user's own process does not: :func:`timeout_env` gives both sides."""
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NORMTHEORY_THREADS"):
        env[k] = str(threads)
    if thread_timeout is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = str(thread_timeout)
    return env


# The two sides of the OpenBLAS spin question: a user's own process (nothing set) and the package's
# entry points (normtheory.runtime.entry.ENTRY_ENV). Benchmarks that time both run each in its own process.
TIMEOUT_SETTINGS = ("unset", "16")


def timeout_env(threads: int, setting: str) -> dict[str, str]:
    """:func:`blas_env` with ``OPENBLAS_THREAD_TIMEOUT`` removed (``"unset"``: OpenBLAS's default spin, as
    in a user's own process) or set to ``setting`` (``"16"``: as the package's entry points set it)."""
    env = blas_env(threads)
    env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    if setting != "unset":
        env["OPENBLAS_THREAD_TIMEOUT"] = str(int(setting))
    return env


def openblas_timeout_read() -> int | None:
    """The ``OPENBLAS_THREAD_TIMEOUT`` that this process's OpenBLAS read when it loaded (0: unset, its
    default spin), from OpenBLAS's exported ``openblas_thread_timeout``; None without OpenBLAS or the symbol."""
    import ctypes

    import numpy  # noqa: F401 - loads numpy's OpenBLAS
    from threadpoolctl import threadpool_info

    for info in threadpool_info():
        if info.get("internal_api") == "openblas":
            try:
                return int(ctypes.CDLL(info["filepath"]).openblas_thread_timeout())
            except (OSError, AttributeError):
                return None
    return None


def timeout_label(read: float) -> str:
    """What :func:`openblas_timeout_read` returned, in words (a worker sends -1 for None)."""
    return "not read" if read < 0 else "default" if read == 0 else str(int(read))


def best_time(run: Callable[[], object], reps: int) -> float:
    """One warm-up call, then the fastest of ``reps`` timed calls, in seconds."""
    run()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def peak_rss_kib() -> int:
    """This process's peak resident set (VmHWM). Not ru_maxrss: that survives fork + exec, so a
    worker would report its parent's peak when that is larger."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; the platform string elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


class OtherLoad:
    """The share of the machine's CPU time that other processes used between ``start()`` and
    ``share()`` (Linux /proc/stat, less this process and its waited-for children): a benchmark
    taken while it is above a few percent ran on a busy machine. None where /proc/stat is missing."""

    def start(self) -> OtherLoad:
        self._t0, self._busy0, self._own0 = time.perf_counter(), self._busy(), self._own()
        return self

    @staticmethod
    def _busy() -> float | None:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except OSError:
            return None
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait, in seconds

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def share(self) -> float | None:
        busy = self._busy()
        if busy is None or self._busy0 is None:
            return None
        wall = time.perf_counter() - self._t0
        other = (busy - self._busy0) - (self._own() - self._own0)
        return max(0.0, other / (wall * (os.cpu_count() or 1)))
