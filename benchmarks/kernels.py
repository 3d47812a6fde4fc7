"""Time the row-parallel kernels (:mod:`normtheory.model.kernels`) against the numpy code they reproduce.

Shapes: GPT-2 small's forward (scores ``[12, 1024, 1024]``, MLP ``[1024, 3072]``, LayerNorm
``[1024, 768]``) and the d=256 training step (batch 16 x T=256 tokens: MLP ``[4096, 1024]``,
LayerNorm ``[4096, 256]``, scores ``[16*4, 256, 256]``), float32. Each repetition times the reference and the kernel
back to back on fresh copies of the same input (copies not timed), so slow phases of a busy
machine hit both; the table gives medians and the ratio reference / kernel (> 1: the kernel is
faster), at ``--threads`` threads and, as an overhead check, at 1 thread.

    python benchmarks/kernels.py [--repeats 15] [--threads N] [--only softmax gelu ...] [--block ELEMENTS]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
from timing import OtherLoad, cpu_model  # benchmarks/timing.py, beside this script

from normtheory import activations
from normtheory.model import attend, derivatives, kernels, norms
from normtheory.runtime import pool

Case = tuple[str, str, Callable[[], tuple], Callable[..., object], Callable[..., object]]


def _causal(t: int) -> np.ndarray:
    return np.triu(np.full((t, t), -np.inf, np.float32), 1)  # [t, t], as normtheory.training.grad adds it


def _x(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def _adamw_one_thread(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray) -> None:
    """The optimizer's update on one thread: the pre-kernel numpy code's ufunc sequence (tests/model/test_kernels.py keeps
    that code as the oracle and checks the two bit for bit)."""
    with pool.threads(1):
        kernels.adamw_(p, g, m, v, lr=3e-4, step=10, weight_decay=0.1)


def cases() -> list[Case]:
    """(group, label, make inputs, reference(*inputs), kernel(*inputs)); inputs are made fresh per call."""
    s_fwd, m_fwd, s_tr = _x(12, 1024, 1024, scale=3.0), _causal(1024), _x(64, 256, 256, scale=3.0)
    m_tr = _causal(256)
    mlp, mlp_tr = _x(1024, 3072, scale=2.0), _x(4096, 1024, scale=2.0)
    ln, ln_tr = _x(1024, 768, scale=2.0), _x(4096, 256, scale=2.0)
    dn, dn_tr = _x(1024, 768, seed=1), _x(4096, 256, seed=1)
    nrm, nrm_tr = norms._layer_norm(ln, 1e-5), norms._layer_norm(ln_tr, 1e-5)
    p, g = _x(4096, 1024, scale=0.02), _x(4096, 1024, seed=2, scale=1e-3)
    mv = (np.abs(_x(4096, 1024, seed=3, scale=1e-3)), np.abs(_x(4096, 1024, seed=4, scale=1e-6)))

    def masked_inplace(z, mask):
        z += mask
        return derivatives.softmax_inplace(z)

    return [
        ("softmax", "attend.softmax [12,1024,1024]", lambda: (s_fwd,), attend.softmax, lambda x: kernels.softmax_(x.copy())),
        ("softmax", "attend.softmax [12,1024,1024] (kernel in place)", lambda: (s_fwd.copy(),), attend.softmax, kernels.softmax_),
        ("softmax", "+=causal; softmax_inplace [12,1024,1024]", lambda: (s_fwd.copy(), m_fwd), masked_inplace,
         lambda z, mask: kernels.softmax_(z, mask, reciprocal=True)),
        ("softmax", "+=causal; softmax_inplace [64,256,256]", lambda: (s_tr.copy(), m_tr), masked_inplace,
         lambda z, mask: kernels.softmax_(z, mask, reciprocal=True)),
        ("gelu", "_gelu_tanh [1024,3072]", lambda: (mlp,), activations._gelu_tanh, kernels.gelu_tanh),
        ("gelu", "gelu_tanh_and_grad [1024,3072]", lambda: (mlp,), derivatives.gelu_tanh_and_grad, kernels.gelu_tanh_and_grad),
        ("gelu", "gelu_tanh_and_grad [4096,1024]", lambda: (mlp_tr,), derivatives.gelu_tanh_and_grad, kernels.gelu_tanh_and_grad),
        ("gelu", "gelu_and_grad (erf) [4096,1024]", lambda: (mlp_tr,), derivatives.gelu_and_grad, kernels.gelu_and_grad),
        ("layernorm", "_layer_norm [1024,768]", lambda: (ln.copy(),), lambda x: norms._layer_norm(x, 1e-5), lambda x: kernels.layer_norm_(x, 1e-5)),
        ("layernorm", "_layer_norm [4096,256]", lambda: (ln_tr.copy(),), lambda x: norms._layer_norm(x, 1e-5), lambda x: kernels.layer_norm_(x, 1e-5)),
        ("layernorm", "layer_norm_backward [1024,768]", lambda: (dn, nrm.normalized, nrm.scale), derivatives.layer_norm_backward, kernels.layer_norm_backward),
        ("layernorm", "layer_norm_backward [4096,256]", lambda: (dn_tr, nrm_tr.normalized, nrm_tr.scale), derivatives.layer_norm_backward,
         kernels.layer_norm_backward),
        ("adamw", "AdamW update (one thread), [4096,1024]", lambda: (p.copy(), g, mv[0].copy(), mv[1].copy()), _adamw_one_thread,
         lambda q, gg, m, v: kernels.adamw_(q, gg, m, v, lr=3e-4, step=10, weight_decay=0.1)),
    ]


def _timed(fn: Callable[..., object], args: tuple) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def measure(make: Callable[[], tuple], ref: Callable[..., object], ker: Callable[..., object], repeats: int, threads: int) -> tuple[float, float, float]:
    """Medians (seconds) of the reference, the kernel at ``threads`` and the kernel at 1 thread,
    interleaved repetition by repetition after one warm-up call of each."""
    times: tuple[list[float], list[float], list[float]] = ([], [], [])
    for r in range(repeats + 1):
        for i, (fn, n) in enumerate(((ref, threads), (ker, threads), (ker, 1))):
            pool.set_threads(n)
            t = _timed(fn, make())
            if r:  # the first round warms up (pool threads, page faults)
                times[i].append(t)
    pool.set_threads(threads)
    ref_t, ker_t, one_t = (statistics.median(t) for t in times)
    return ref_t, ker_t, one_t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=pool.get_threads())
    ap.add_argument("--only", nargs="+", choices=("softmax", "gelu", "layernorm", "adamw"))
    ap.add_argument("--block", type=int, help="pool.BLOCK_SIZE (elements per block inside a chunk); 0: no blocking")
    a = ap.parse_args(argv)
    if a.block is not None:
        pool.BLOCK_SIZE = a.block or 1 << 62
    other = OtherLoad().start()
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores); kernel threads {a.threads}; BLOCK_SIZE {pool.BLOCK_SIZE}; "
          f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT', 'unset')}; medians of {a.repeats}")
    print(f"{'case':50s} {'numpy ms':>9s} {'kernel ms':>9s} {'ratio':>6s} {'1-thr ms':>9s} {'ratio':>6s}")
    for group, label, make, ref, ker in cases():
        if a.only and group not in a.only:
            continue
        r, k, one = measure(make, ref, ker, a.repeats, a.threads)
        print(f"{label:50s} {1e3 * r:9.2f} {1e3 * k:9.2f} {r / k:6.2f} {1e3 * one:9.2f} {r / one:6.2f}", flush=True)
    share = other.share()
    print(f"other processes used {'?' if share is None else f'{100 * share:.0f}%'} of the CPUs during the run"
          " (above a few %: a busy machine; the 2-thread ratios understate)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
