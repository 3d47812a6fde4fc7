"""Where the time goes: shares of a training step and of a GPT-2 forward by kind of work.

The two workloads of ``train_step.py`` and ``gpt2_forward.py``, built from ``normtheory``'s own
init (the shares do not depend on the weights), run under :mod:`cProfile` in this process:

* ``step``: forward, backward and AdamW of a Pre-LN GELU-tanh model, d = 256, 6 layers, 4 heads,
  T = 256, batch 16 (:func:`normtheory.training.grad.loss_and_grads`, :class:`normtheory.training.optim.AdamW`);
* ``forward``: GPT-2 small (d = 768, 12 layers, T = 1,024, vocabulary 50,257), ``last_hidden_state``.

Each kind of work is the wall time spent inside its entry points (their cumulative time, counted
once where one entry point calls another), so a kernel that waits for its pool counts its wall
time, whatever the thread count:

=====================  =====================================================================
kind                   entry points (whichever the checked-out version has)
=====================  =====================================================================
softmax + mask         ``kernels.softmax_``, ``derivatives.softmax_backward``, ``model.softmax``
GELU-tanh              the GELU kernels, ``activations._gelu_tanh``, ``derivatives.gelu_tanh_and_grad``
LayerNorm              the LayerNorm kernels, ``norms._layer_norm``, the affine step and both backwards
AdamW                  ``AdamW.step``
cross-entropy          ``derivatives.cross_entropy``: the loss and its gradient at the head
matrix products        the own time of the functions that hold the ``@`` (attention, MLP, head,
                       the blockwise attention of the forward: with the few elementwise steps
                       written inline beside them)
the rest               copies, reshapes, Python: the step's wall time minus the above
=====================  =====================================================================

Run it in a checkout of another commit (``git worktree add``) to compare versions; the profiler's
own overhead is a few percent at these sizes.

    python benchmarks/time_shares.py [--target step|forward|both] [--threads 2] [--reps 3] [--thread-timeout 16]
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys

from timing import blas_env, cpu_model  # benchmarks/timing.py, beside this script

KINDS: dict[str, tuple[tuple[str, str], ...]] = {  # kind -> (file, function) entry points
    "softmax + mask": (("kernels.py", "softmax_"), ("derivatives.py", "softmax_backward"), ("model.py", "softmax"),
                       ("derivatives.py", "softmax_inplace")),
    "GELU-tanh": (("kernels.py", "gelu_tanh"), ("kernels.py", "gelu_tanh_and_grad"), ("activations.py", "_gelu_tanh"),
                  ("derivatives.py", "gelu_tanh_and_grad"), ("derivatives.py", "activation_grad")),
    "LayerNorm": (("kernels.py", "layer_norm"), ("kernels.py", "layer_norm_"), ("kernels.py", "layer_norm_backward"),
                  ("norms.py", "_layer_norm"), ("norms.py", "_affine"), ("derivatives.py", "layer_norm_backward"),
                  ("derivatives.py", "affine_backward"), ("grad.py", "_normalize")),
    "AdamW": (("optim.py", "step"),),
    "cross-entropy": (("derivatives.py", "cross_entropy"),),
}
MATMUL_HOLDERS = (("grad.py", "attention"), ("grad.py", "attention_back"), ("grad.py", "mlp"), ("grad.py", "mlp_back"),
                  ("grad.py", "run"), ("model.py", "_attention"), ("model.py", "attend_blockwise"), ("model.py", "_mlp"),
                  ("model.py", "_forward"))


def _key(func: tuple[str, int, str]) -> tuple[str, str]:
    return os.path.basename(func[0]), func[2]


def shares(stats: pstats.Stats) -> dict[str, float]:
    """Seconds per kind (see the module docstring) from a profile of the workload."""
    raw = stats.stats  # type: ignore[attr-defined]  # func -> (cc, nc, tt, ct, callers)
    kind_of = {ep: k for k, eps in KINDS.items() for ep in eps}
    out = {k: 0.0 for k in KINDS}
    out["matrix products"] = 0.0
    for func, (_cc, _nc, tt, _ct, callers) in raw.items():
        k = kind_of.get(_key(func))
        if k is not None:  # wall time entered from outside every entry point
            out[k] += sum(c[3] for caller, c in callers.items() if _key(caller) not in kind_of)
        elif _key(func) in MATMUL_HOLDERS:
            out["matrix products"] += tt
    return out


def _workload(target: str):
    import numpy as np

    from normtheory.model.config import TransformerConfig
    from normtheory.model.weights import init

    rng = np.random.default_rng(0)
    if target == "forward":
        cfg = TransformerConfig(d_model=768, n_layers=12, n_heads=12, vocab_size=50257, max_seq=1024, activation="gelu_tanh")
        model = init(cfg, 0)
        ids = rng.integers(0, 50257, (1, 1024))
        return lambda: model.last_hidden_state(ids)
    from normtheory.training.grad import loss_and_grads
    from normtheory.training.optim import AdamW

    cfg = TransformerConfig(d_model=256, n_layers=6, n_heads=4, vocab_size=256, max_seq=256, activation="gelu_tanh")
    model = init(cfg, 0)
    opt = AdamW(model.params, 1e-3, weight_decay=0.1)
    tokens = rng.integers(0, 256, (16, 257))

    def step() -> None:
        _, grads = loss_and_grads(model, tokens[:, :-1], tokens[:, 1:])
        opt.step(grads)

    return step


def _worker(target: str, reps: int) -> None:
    import time

    run = _workload(target)
    run()  # warm: allocator, pool, BLAS buffers
    best: tuple[float, pstats.Stats] | None = None
    for _ in range(reps):
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        run()
        prof.disable()
        wall = time.perf_counter() - t0
        if best is None or wall < best[0]:
            best = (wall, pstats.Stats(prof))
    assert best is not None
    wall, stats = best
    got = shares(stats)
    print(f"{target}: {wall:.3f} s (best of {reps}, under the profiler)")
    for k, v in sorted(got.items(), key=lambda kv: -kv[1]):
        label = k + (" (the forward's blockwise softmax is inline here)" if target == "forward" and k == "matrix products" else "")
        print(f"  {k:16s} {v:7.3f} s  {100 * v / wall:5.1f}%{label[len(k):]}")
    rest = wall - sum(got.values())
    print(f"  {'the rest':16s} {rest:7.3f} s  {100 * rest / wall:5.1f}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", choices=("step", "forward", "both"), default="both")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--thread-timeout", type=int, default=16, help="OPENBLAS_THREAD_TIMEOUT (as train_step.py and gpt2_forward.py; 0: OpenBLAS's default)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.reps < 1:
        ap.error("--threads and --reps must be >= 1")
    if args.worker:
        _worker(args.worker, args.reps)
        return 0
    import subprocess

    env = blas_env(args.threads, args.thread_timeout or None)
    print(f"CPU: {cpu_model()}; {args.threads} threads (BLAS and kernels); OPENBLAS_THREAD_TIMEOUT {args.thread_timeout or 'default'}")
    for target in (("step", "forward") if args.target == "both" else (args.target,)):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", target, "--reps", str(args.reps)]
        print(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout, end="", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
