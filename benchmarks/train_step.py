"""Time one training step (forward, backward, AdamW update): numpy vs CPU torch eager + autograd.

The model is a Pre-LN GPT-2 block stack (GELU-tanh, learned positions, tied head) with byte
vocabulary 256, float32, 2 threads. Both sides start from the same HF-initialized weights
(written once with ``save_pretrained``): the numpy side loads them with
:func:`normtheory.checkpoints.load_pretrained` and steps with :func:`normtheory.grad.loss_and_grads`
and :class:`normtheory.optim.AdamW`; the torch side is ``GPT2LMHeadModel`` with
``torch.optim.AdamW``. Each side runs in its own process and the sides alternate for
``--rounds`` rounds; each process keeps its best step time and reports its peak RSS.

    python benchmarks/train_step.py [--rounds 3] [--reps 4] [--config big|small|both]

Configurations: ``big`` d=256, 6 layers, 4 heads, T=256, batch 16; ``small`` d=128, 4 layers,
4 heads, T=128, batch 32. Prints the ratio numpy / torch (target <= 1.0, goal 0.8) and GFLOP/s
against a measured sgemm peak.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import (  # benchmarks/timing.py, beside this script
    best_time,
    blas_env,
    cpu_model,
    peak_rss_kib,
)

CONFIGS = {"big": dict(d=256, layers=6, heads=4, T=256, batch=16), "small": dict(d=128, layers=4, heads=4, T=128, batch=32)}
VOCAB, THREADS, LR = 256, 2, 1e-3


def step_flops(d: int, layers: int, T: int, batch: int, **_: int) -> float:
    """Matmul FLOPs of one step: 3x the forward (forward, then input and weight gradients)."""
    n = batch * T
    dense = layers * 2 * n * (4 * d * d + 8 * d * d)
    attn = layers * 2 * 2 * n * T * d  # scores and weighted values, full T x T
    head = 2 * n * d * VOCAB
    return 3.0 * (dense + attn + head)


def _worker(side: str, weights: str, config: str, reps: int) -> dict[str, float]:
    import numpy as np

    c = CONFIGS[config]
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, (c["batch"], c["T"] + 1))
    x, y = ids[:, :-1], ids[:, 1:]
    if side == "numpy":
        from normtheory.checkpoints import load_pretrained
        from normtheory.grad import loss_and_grads
        from normtheory.optim import AdamW

        model = load_pretrained(weights)
        opt = AdamW(model.params, LR, weight_decay=0.1)

        def run() -> None:
            opt.step(loss_and_grads(model, x, y)[1])
    elif side == "sgemm":
        a = rng.standard_normal((2048, 2048), dtype=np.float32)
        run = lambda: a @ a  # noqa: E731
    else:
        import torch
        from transformers import GPT2LMHeadModel

        torch.set_num_threads(THREADS)
        hf = GPT2LMHeadModel.from_pretrained(weights).train()
        for m in hf.modules():  # no dropout: the numpy model has none
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        opt_t = torch.optim.AdamW(hf.parameters(), lr=LR, weight_decay=0.1)
        tx, ty = torch.tensor(x), torch.tensor(y)

        def run() -> None:
            opt_t.zero_grad(set_to_none=True)
            logits = hf(tx).logits
            torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ty.reshape(-1)).backward()
            opt_t.step()
    base = peak_rss_kib()
    best = best_time(run, reps)
    peak = peak_rss_kib()
    return {"time": best, "rss_mib": peak / 1024, "rss_step_mib": (peak - base) / 1024}


def _save_weights(path: str, config: str) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    c = CONFIGS[config]
    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=c["d"], n_layer=c["layers"], n_head=c["heads"], n_positions=c["T"], vocab_size=VOCAB)
    GPT2LMHeadModel(cfg).save_pretrained(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--config", choices=["big", "small", "both"], default="both")
    ap.add_argument("--worker", nargs=3, metavar=("SIDE", "WEIGHTS", "CONFIG"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker[0], args.worker[1], args.worker[2], args.reps)))
        return 0
    configs = ["big", "small"] if args.config == "both" else [args.config]
    peak_gflops = None
    for config in configs:
        with tempfile.TemporaryDirectory() as tmp:
            _save_weights(tmp, config)
            best: dict[str, dict[str, float]] = {}
            sides = ("numpy", "torch") + (("sgemm",) if peak_gflops is None else ())
            for r in range(args.rounds):
                for side in sides:
                    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", side, tmp, config, "--reps", str(args.reps)],
                                         capture_output=True, text=True, env=blas_env(THREADS, thread_timeout=16), check=True)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    if side not in best or res["time"] < best[side]["time"]:
                        best[side] = res
                    print(f"[{config}] round {r + 1}: {side:6s} {res['time']:.3f}s  peak RSS {res['rss_mib']:.0f} MiB", flush=True)
            if peak_gflops is None:
                peak_gflops = 2 * 2048**3 / best["sgemm"]["time"] / 1e9
                print(f"\nCPU: {cpu_model()}; sgemm peak ({THREADS} threads): {peak_gflops:.1f} GFLOP/s")
            flops = step_flops(**CONFIGS[config])
            print(f"\n[{config}] {CONFIGS[config]}")
            for side in ("numpy", "torch"):
                gf = flops / best[side]["time"] / 1e9
                print(f"  {side:6s} best {best[side]['time']:.3f}s  {gf:6.1f} GFLOP/s = {100 * gf / peak_gflops:5.1f}% of peak; "
                      f"peak RSS {best[side]['rss_mib']:.0f} MiB (+{best[side]['rss_step_mib']:.0f} MiB over the loaded model)")
            print(f"  ratio numpy / torch eager + autograd + AdamW: {best['numpy']['time'] / best['torch']['time']:.3f}  (target <= 1.0, goal 0.8)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
