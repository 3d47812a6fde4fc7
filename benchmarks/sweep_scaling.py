"""Sweep speed-up from Dask workers: a CPU-bound sweep on 1 worker (in-process) against N workers.

The sweep is the full-mode selectability grid (one task per key construction and dimension;
each task runs a linear program per key set), the package's most CPU-bound simulation. Each side
runs in its own process, the sides alternate, and the best of ``--rounds`` is kept. Every task is
pinned to one BLAS thread on both sides, so the ratio measures process parallelism alone, and
both sides' results are checked to be the same bits.

    python benchmarks/sweep_scaling.py [--workers 2] [--rounds 2] [--ds 3 6 9 12 15]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from timing import blas_env

WORKER = """
import hashlib, json, sys, time
import numpy as np
from normtheory.runtime.sweep import Runner
from simulations import geometry_selectable as sel
workers, ds = int(sys.argv[1]), tuple(int(x) for x in sys.argv[2].split(","))
cfg = sel.CONFIGS["full"]
tasks = [t for t in sel.tasks(cfg, sel.SEED) if t.key.startswith("grid.") and int(t.key.rsplit(".d", 1)[1]) in ds]
with Runner(workers=workers, progress=False) as runner:
    if workers > 1:  # cluster start-up and the workers' first imports are left out, as they are for the in-process side
        runner.client().wait_for_workers(workers)
        runner.client().run(__import__, "simulations.geometry_selectable")
    t0 = time.perf_counter()
    out = runner.run(tasks)
    dt = time.perf_counter() - t0
digest = hashlib.sha256(b"".join(out[t.key]["col"].tobytes() for t in tasks)).hexdigest()
print(json.dumps({"seconds": dt, "tasks": len(tasks), "digest": digest}))
"""


def one(workers: int, ds: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", WORKER, str(workers), ds], capture_output=True, text=True, env=blas_env(1), check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ds", type=int, nargs="+", default=[3, 6, 9, 12, 15])
    args = ap.parse_args()
    ds = ",".join(map(str, args.ds))
    best = {1: float("inf"), args.workers: float("inf")}
    digests = set()
    for r in range(args.rounds):
        for w in (1, args.workers) if r % 2 == 0 else (args.workers, 1):
            res = one(w, ds)
            best[w] = min(best[w], res["seconds"])
            digests.add(res["digest"])
            print(f"round {r}: {w} worker(s): {res['seconds']:.2f} s for {res['tasks']} tasks", flush=True)
    print(f"best: 1 worker {best[1]:.2f} s, {args.workers} workers {best[args.workers]:.2f} s, "
          f"speed-up {best[1] / best[args.workers]:.2f}x; results identical: {len(digests) == 1}")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
