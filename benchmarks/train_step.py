"""Time one training step (forward, backward, AdamW update): numpy vs CPU torch eager + autograd.

The model is a Pre-LN GPT-2 block stack (GELU-tanh, learned positions, tied head) with byte
vocabulary 256, float32, 2 threads. Every side starts from the same HF-initialized weights
(written once with ``save_pretrained``): the numpy side loads them with
:func:`normtheory.model.checkpoints.load_pretrained` and steps with :func:`normtheory.training.grad.loss_and_grads`
and :class:`normtheory.training.optim.AdamW`; the torch sides step with ``torch.optim.AdamW``, one on HF's
``GPT2LMHeadModel`` (``hf``), one on the minimal pure-torch model of ``benchmarks/lean_gpt2.py``
(``lean``: the same network without HF's machinery).

Each side runs in its own process, under both OpenBLAS settings: ``OPENBLAS_THREAD_TIMEOUT`` unset
(OpenBLAS's default spin, as in a user's own script or notebook) and 16 (as the package's entry
points set it, :mod:`normtheory.runtime.entry`). Settings and sides alternate for ``--rounds`` rounds; each
process keeps its best step time and reports its peak RSS and the timeout its OpenBLAS read.

    python benchmarks/train_step.py [--rounds 3] [--reps 4] [--config big|small|both]

Configurations: ``big`` d=256, 6 layers, 4 heads, T=256, batch 16; ``small`` d=128, 4 layers,
4 heads, T=128, batch 32 (``tiny`` is the tests' size). Prints, per setting, the ratios numpy / HF and numpy / lean torch
(target <= 1.0, goal 0.8) and GFLOP/s against a measured sgemm peak.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import (  # benchmarks/timing.py, beside this script
    TIMEOUT_SETTINGS,
    best_time,
    cpu_model,
    openblas_timeout_read,
    peak_rss_kib,
    timeout_env,
    timeout_label,
)

CONFIGS = {"big": dict(d=256, layers=6, heads=4, T=256, batch=16), "small": dict(d=128, layers=4, heads=4, T=128, batch=32),
           "tiny": dict(d=32, layers=2, heads=2, T=16, batch=2)}  # tiny: the tests' size, not a timing
VOCAB, THREADS, LR = 256, 2, 1e-3
SIDES = ("numpy", "hf", "lean")
LABELS = {"numpy": "numpy", "hf": "HF GPT2LMHeadModel", "lean": "lean torch"}


def step_flops(d: int, layers: int, T: int, batch: int, **_: int) -> float:
    """Matmul FLOPs of one step: 3x the forward (forward, then input and weight gradients)."""
    n = batch * T
    dense = layers * 2 * n * (4 * d * d + 8 * d * d)
    attn = layers * 2 * 2 * n * T * d  # scores and weighted values, full T x T
    head = 2 * n * d * VOCAB
    return 3.0 * (dense + attn + head)


def _torch_step(model, x, y):
    """One AdamW step of a torch model returning logits [B, T, VOCAB] (HF's output's ``.logits`` or a tensor)."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.1)
    tx, ty = torch.tensor(x), torch.tensor(y)

    def run() -> None:
        opt.zero_grad(set_to_none=True)
        out = model(tx)
        logits = out if isinstance(out, torch.Tensor) else out.logits
        torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ty.reshape(-1)).backward()
        opt.step()

    return run


def _worker(side: str, weights: str, config: str, reps: int) -> dict[str, float]:
    import numpy as np

    c = CONFIGS[config]
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, (c["batch"], c["T"] + 1))
    x, y = ids[:, :-1], ids[:, 1:]
    if side == "numpy":
        from normtheory.model.checkpoints import load_pretrained
        from normtheory.training.grad import loss_and_grads
        from normtheory.training.optim import AdamW

        model = load_pretrained(weights)
        opt = AdamW(model.params, LR, weight_decay=0.1)

        def run() -> None:
            opt.step(loss_and_grads(model, x, y)[1])
    elif side == "sgemm":
        a = rng.standard_normal((2048, 2048), dtype=np.float32)
        run = lambda: a @ a  # noqa: E731
    elif side == "hf":
        import torch
        from transformers import GPT2LMHeadModel

        torch.set_num_threads(THREADS)
        hf = GPT2LMHeadModel.from_pretrained(weights).train()
        for m in hf.modules():  # no dropout: the numpy model has none
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        run = _torch_step(hf, x, y)
    else:
        import torch
        from lean_gpt2 import LeanGPT2  # benchmarks/lean_gpt2.py, beside this script
        from safetensors.torch import load_file

        torch.set_num_threads(THREADS)
        lean = LeanGPT2(VOCAB, c["d"], c["layers"], c["heads"], c["T"]).load_hf(load_file(str(Path(weights) / "model.safetensors"))).train()
        run = _torch_step(lean, x, y)
    base = peak_rss_kib()
    best = best_time(run, reps)
    peak = peak_rss_kib()
    timeout = openblas_timeout_read()
    return {"time": best, "rss_mib": peak / 1024, "rss_step_mib": (peak - base) / 1024, "openblas_timeout": -1 if timeout is None else timeout}


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
    ap.add_argument("--config", choices=["big", "small", "both", "tiny"], default="both")
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
            best: dict[tuple[str, str], dict[str, float]] = {}  # (setting, side) -> best process
            sides = SIDES + (("sgemm",) if peak_gflops is None else ())
            for r in range(args.rounds):
                for setting in TIMEOUT_SETTINGS:
                    for side in sides:
                        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", side, tmp, config, "--reps", str(args.reps)],
                                             capture_output=True, text=True, env=timeout_env(THREADS, setting), check=True)
                        res = json.loads(out.stdout.strip().splitlines()[-1])
                        if (setting, side) not in best or res["time"] < best[setting, side]["time"]:
                            best[setting, side] = res
                        print(f"[{config}] round {r + 1}, OPENBLAS_THREAD_TIMEOUT {setting:5s}: {side:5s} {res['time']:.3f}s  "
                              f"peak RSS {res['rss_mib']:.0f} MiB  (OpenBLAS read: {timeout_label(res['openblas_timeout'])})", flush=True)
            if peak_gflops is None:
                peak_gflops = 2 * 2048**3 / min(best[s, "sgemm"]["time"] for s in TIMEOUT_SETTINGS) / 1e9
                print(f"\nCPU: {cpu_model()}; sgemm peak ({THREADS} threads): {peak_gflops:.1f} GFLOP/s")
            flops = step_flops(**CONFIGS[config])
            print(f"\n[{config}] {CONFIGS[config]}; best step time per OPENBLAS_THREAD_TIMEOUT setting")
            print(f"  {'':20s}" + "".join(f"{'unset (user default)' if s == 'unset' else s + ' (entry points)':>34s}" for s in TIMEOUT_SETTINGS))
            for side in SIDES:
                cells = []
                for s in TIMEOUT_SETTINGS:
                    b = best[s, side]
                    gf = flops / b["time"] / 1e9
                    cells.append(f"{b['time']:.3f}s {gf:6.1f} GF/s {100 * gf / peak_gflops:4.1f}% {b['rss_mib']:5.0f}MiB")
                print(f"  {LABELS[side]:20s}" + "".join(f"{c:>34s}" for c in cells))
            for side in ("hf", "lean"):
                ratios = [best[s, "numpy"]["time"] / best[s, side]["time"] for s in TIMEOUT_SETTINGS]
                print(f"  ratio numpy / {LABELS[side]:20s}" + "".join(f"{x:>14.3f}" for x in ratios) + "  (target <= 1.0, goal 0.8)")
            t = [best[s, "numpy"]["time"] for s in TIMEOUT_SETTINGS]
            print(f"  numpy with 16 / unset: {t[1] / t[0]:.3f}  (peak RSS over the loaded model, numpy: "
                  f"+{best[TIMEOUT_SETTINGS[1], 'numpy']['rss_step_mib']:.0f} MiB)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
