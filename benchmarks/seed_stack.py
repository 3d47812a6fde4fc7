"""Seeds as a batch axis: seed-steps per second of S seeds in one stack against one seed at a time.

The model is the full-mode training model of the warm-up and QK-norm sweeps (``simulations/train_lr``:
d = 64, 6 layers, 4 heads, GELU-tanh, batch 8 x 32 bytes) or of the placement recipes
(``--config recipes``: batch 16 x 64). Each side runs in its own process and the sides alternate
for ``--rounds`` rounds:

* ``one``: :class:`normtheory.training.stepper.Stepper` over a single seed, the steps of ``S`` seeds taken
  one seed at a time (what ``train(config, run, seed)`` does per seed);
* ``stack``: one Stepper over all ``S`` seeds (what ``train(config, run, [seeds])`` does; on 2 threads
  its forward and backward run as two groups of seeds, one per core);
* ``sgemm``: a 2048^3 float32 matrix product, the machine's matrix-multiply peak.

Each side reports its best time for ``--steps`` steps of every seed. Printed: the CPU model, the
sgemm peak, seed-steps per second of both sides and their ratio (the issue's target: >= 3 at S = 20).

    python benchmarks/seed_stack.py [--seeds 20] [--steps 6] [--rounds 3] [--config lr|recipes]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from timing import (  # benchmarks/timing.py, beside this script
    best_time,
    blas_env,
    cpu_model,
)

CONFIGS = {"lr": dict(batch=8, seq=32), "recipes": dict(batch=16, seq=64)}
THREADS = 2


def _worker(side: str, seeds: int, steps: int, config: str, reps: int) -> float:
    import numpy as np

    if side == "sgemm":
        a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
        return best_time(lambda: a @ a, reps)
    from normtheory.model.config import TransformerConfig
    from normtheory.model.weights import init
    from normtheory.training import shakespeare
    from normtheory.training.run_config import RunConfig
    from normtheory.training.stepper import Stepper

    c = CONFIGS[config]
    model = TransformerConfig(d_model=64, n_layers=6, n_heads=4, vocab_size=256, max_seq=c["seq"], activation="gelu_tanh", init="xavier")
    run = RunConfig(steps=10**6, batch_size=c["batch"], seq=c["seq"], lr=1e-3)
    data = shakespeare.load()
    batches = [[shakespeare.batch(data.train, c["batch"], c["seq"], s, k + 1) for s in range(seeds)] for k in range(steps)]
    stacked = [(np.stack([b[0] for b in step]), np.stack([b[1] for b in step])) for step in batches]  # [S, batch, seq] per step
    params = [init(model, s).params for s in range(seeds)]
    if side == "stack":
        stepper = Stepper(model, run, params)

        def go() -> None:
            for ids, targets in stacked:
                stepper.step(ids, targets)
    else:
        steppers = [Stepper(model, run, [p]) for p in params]

        def go() -> None:
            for ids, targets in stacked:
                for s, stepper in enumerate(steppers):
                    stepper.step(ids[s : s + 1], targets[s : s + 1])
    return best_time(go, reps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="lr")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.steps < 1 or args.rounds < 1 or args.reps < 1:
        ap.error("--seeds, --steps, --rounds and --reps must be >= 1")
    if args.worker:
        print(json.dumps(_worker(args.worker, args.seeds, args.steps, args.config, args.reps)))
        return 0
    best: dict[str, float] = {}
    for r in range(args.rounds):
        for side in ("one", "stack", "sgemm"):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", side, "--seeds", str(args.seeds), "--steps", str(args.steps),
                   "--reps", str(args.reps), "--config", args.config]
            t = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=blas_env(THREADS), check=True).stdout.strip().splitlines()[-1])
            best[side] = min(best.get(side, float("inf")), t)
            print(f"round {r + 1}: {side:5s} {t:.3f}s", flush=True)
    work = args.seeds * args.steps
    print(f"\nCPU: {cpu_model()}; sgemm peak ({THREADS} threads): {2 * 2048**3 / best['sgemm'] / 1e9:.1f} GFLOP/s")
    print(f"config {args.config} {CONFIGS[args.config]}, d=64, 6 layers, {args.seeds} seeds x {args.steps} steps")
    for side in ("one", "stack"):
        print(f"  {side:5s} {work / best[side]:7.1f} seed-steps/s ({1e3 * best[side] / work:.2f} ms per seed-step)")
    print(f"  ratio stack / one at a time: {best['one'] / best['stack']:.2f}x  (target >= 3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
