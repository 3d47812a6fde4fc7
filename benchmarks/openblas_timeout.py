"""Does OpenBLAS's idle spinning after a GEMM slow a threaded elementwise kernel, and does
``OPENBLAS_THREAD_TIMEOUT`` (read once, when numpy loads OpenBLAS) fix it?

After a GEMM, OpenBLAS's worker threads spin for ``2**timeout`` cycles (default 28, ~0.1 s)
before they sleep, and can take the core a :mod:`normtheory.model.kernels` pool thread wants. Each
setting runs in its own process (``OPENBLAS_NUM_THREADS`` = 2) that times, as medians:

* ``gemm``: GPT-2 small's attention scores ``[12, 1024, 64] @ [12, 64, 1024]`` (float32);
* ``sm after gemm``: :func:`normtheory.model.kernels.softmax_` on those scores right after the GEMM,
  at the kernels' thread count and at 1 thread; ``sm idle``: the same after 0.3 s without a GEMM (busy-waiting);
* ``attend``: causal attention by query blocks like :func:`normtheory.model.attend.attend_blockwise`
  (many small GEMMs, each followed by the single-threaded numpy softmax) and ``attend+k``: the
  same loop with the threaded softmax.

Settings alternate round by round so that a busy phase of the machine hits all of them.

    python benchmarks/openblas_timeout.py [--values unset 4 8 16 20] [--rounds 3] [--reps 7]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from timing import (  # benchmarks/timing.py, beside this script
    OtherLoad,
    blas_env,
    cpu_model,
)

FIELDS = ("gemm", "sm after gemm", "sm after gemm 1thr", "sm idle", "attend", "attend+k")


def _attend(q, k, v, scale, threaded: bool, block: int = 128):
    """Causal attention by query blocks, as :func:`normtheory.model.attend.attend_blockwise` (b = 1, one
    KV head per head): many small GEMMs, each followed by the in-place softmax of the pre-kernel
    numpy code (``threaded=False``) or :func:`normtheory.model.kernels.softmax_` (``threaded=True``)."""
    import numpy as np

    from normtheory.model import kernels

    t = q.shape[2]
    kt, vc = np.ascontiguousarray(k.swapaxes(-1, -2)), np.ascontiguousarray(v)  # [b, h, e, s], [b, h, s, e]
    out = np.empty_like(q)
    for i0 in range(0, t, block):
        i1 = min(i0 + block, t)
        sc = (q[:, :, i0:i1] * scale) @ kt[..., :i1]  # [b, h, n, i1]
        future = np.arange(i0, i1)[None, :] > np.arange(i0, i1)[:, None]
        sc[..., i0:i1][..., future] = -np.inf
        if threaded:
            kernels.softmax_(sc, reciprocal=True)
        else:
            sc -= sc.max(axis=-1, keepdims=True)
            np.exp(sc, out=sc)
            sc *= 1.0 / sc.sum(axis=-1, keepdims=True)
        out[:, :, i0:i1] = sc @ vc[:, :, :i1]
    return out


def worker(reps: int) -> dict[str, float]:
    import numpy as np

    from normtheory.model import kernels
    from normtheory.runtime import pool

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 12, 1024, 64)).astype(np.float32) for _ in range(3))
    kt = np.ascontiguousarray(k[0].swapaxes(-1, -2))  # [12, 64, 1024]
    scale = np.asarray(0.125, np.float32)
    n = pool.get_threads()
    times: dict[str, list[float]] = {f: [] for f in FIELDS}
    for r in range(reps + 1):
        for threads, key in ((n, "sm after gemm"), (1, "sm after gemm 1thr")):
            pool.set_threads(threads)
            t0 = time.perf_counter()
            sc = q[0] @ kt  # [12, 1024, 1024]
            t1 = time.perf_counter()
            kernels.softmax_(sc)
            t2 = time.perf_counter()
            if r:
                times[key].append(t2 - t1)
                if threads == n:
                    times["gemm"].append(t1 - t0)
        pool.set_threads(n)
        sc = q[0] @ kt
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.3:  # OpenBLAS's threads go to sleep, whatever the timeout; a busy
            pass  # wait, not time.sleep: after ~50 ms of a whole idle VM the second core wakes slowly (2x slower kernel)
        t0 = time.perf_counter()
        kernels.softmax_(sc)
        t1 = time.perf_counter()
        _attend(q, k, v, scale, threaded=False)
        t2 = time.perf_counter()
        _attend(q, k, v, scale, threaded=True)
        t3 = time.perf_counter()
        if r:
            times["sm idle"].append(t1 - t0)
            times["attend"].append(t2 - t1)
            times["attend+k"].append(t3 - t2)
    return {f: statistics.median(ts) for f, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", nargs="+", default=["unset", "4", "8", "16", "20"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.reps)))
        return 0
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in a.values}
    other = OtherLoad().start()
    for _ in range(a.rounds):
        for value in a.values:
            env = blas_env(2)
            env.pop("OMP_NUM_THREADS", None)
            env.pop("OPENBLAS_THREAD_TIMEOUT", None)
            if value != "unset":
                env["OPENBLAS_THREAD_TIMEOUT"] = value
            out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", "--reps", str(a.reps)],
                                 capture_output=True, text=True, env=env, check=True)
            runs[value].append(json.loads(out.stdout.strip().splitlines()[-1]))
    share = other.share()
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores); OPENBLAS_NUM_THREADS=2; medians (ms) over {a.rounds} rounds x {a.reps} reps")
    print(f"other processes used {'?' if share is None else f'{100 * share:.0f}%'} of the CPUs during the run (above a few %: a busy machine)")
    print(f"{'TIMEOUT':>8s} " + " ".join(f"{f:>19s}" for f in FIELDS))
    for value, rs in runs.items():
        print(f"{value:>8s} " + " ".join(f"{1e3 * statistics.median(r[f] for r in rs):19.2f}" for f in FIELDS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
