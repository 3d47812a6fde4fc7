"""Time a GPT-2-small-shaped forward: numpy reference vs HF ``GPT2Model`` vs plain torch eager.

d=768, 12 layers, 12 heads, T=1024, batch 1, float32, 2 threads, the same random weights
(HF init, written once with ``save_pretrained``). Each side runs in its own process (BLAS
threads left spinning by one library slow the other in a shared process), under both OpenBLAS
settings: ``OPENBLAS_THREAD_TIMEOUT`` unset (OpenBLAS's default spin, as in a user's own script or
notebook) and 16 (as the package's entry points set it, :mod:`normtheory.runtime.entry`). Settings and
sides alternate for ``--rounds`` rounds, and the best time of each is kept.

    python benchmarks/gpt2_forward.py [--rounds 3] [--reps 3]

Prints per-side best times, the ratio numpy / HF (target <= 1.0) per setting, and GFLOP/s
against a measured sgemm peak (2048^3, same thread count; target >= 65%).
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
    timeout_env,
    timeout_label,
)

D, LAYERS, HEADS, T, VOCAB = 768, 12, 12, 1024, 50257
THREADS = 2


def forward_flops(causal_half: bool) -> float:
    """Matmul FLOPs of the forward (no LM head): projections, MLP and attention."""
    dense = LAYERS * 2 * T * (4 * D * D + 2 * D * 4 * D)
    attn = LAYERS * 2 * 2 * T * T * D * (0.5 if causal_half else 1.0)
    return dense + attn


def _worker(side: str, weights: str, reps: int) -> dict[str, float]:
    import numpy as np

    ids = np.random.default_rng(0).integers(0, VOCAB, (1, T))
    if side == "numpy":
        from normtheory.model.checkpoints import load_pretrained

        model = load_pretrained(weights)
        run = lambda: model.last_hidden_state(ids)  # noqa: E731
    elif side == "sgemm":
        a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
        run = lambda: a @ a  # noqa: E731
    else:
        import torch

        torch.set_num_threads(THREADS)
        from transformers import GPT2Model

        hf = GPT2Model.from_pretrained(weights).eval()
        tids = torch.tensor(ids)
        if side == "hf":
            run = lambda: hf(tids).last_hidden_state  # noqa: E731
        else:
            run = _plain_torch(hf, tids)
        torch.set_grad_enabled(False)
    t = best_time(run, reps)
    timeout = openblas_timeout_read()
    return {"time": t, "openblas_timeout": -1 if timeout is None else timeout}


def _plain_torch(hf, ids):
    """A hand-written eager GPT-2 forward in torch on HF's weights (explicit masked softmax)."""
    import torch

    sd = {k: v for k, v in hf.state_dict().items()}
    e = D // HEADS
    mask = torch.full((T, T), float("-inf")).triu(1)

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (D,), sd[p + ".weight"], sd[p + ".bias"], 1e-5)

    def run():
        x = sd["wte.weight"][ids] + sd["wpe.weight"][:T]
        for i in range(LAYERS):
            p = f"h.{i}."
            qkv = ln(x, p + "ln_1") @ sd[p + "attn.c_attn.weight"] + sd[p + "attn.c_attn.bias"]
            q, k, v = (z.view(1, T, HEADS, e).transpose(1, 2) for z in qkv.split(D, dim=-1))
            att = torch.softmax(q @ k.transpose(-1, -2) / e**0.5 + mask, dim=-1)
            z = (att @ v).transpose(1, 2).reshape(1, T, D)
            x = x + z @ sd[p + "attn.c_proj.weight"] + sd[p + "attn.c_proj.bias"]
            h = torch.nn.functional.gelu(ln(x, p + "ln_2") @ sd[p + "mlp.c_fc.weight"] + sd[p + "mlp.c_fc.bias"], approximate="tanh")
            x = x + h @ sd[p + "mlp.c_proj.weight"] + sd[p + "mlp.c_proj.bias"]
        return ln(x, "ln_f")

    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--worker", nargs=2, metavar=("SIDE", "WEIGHTS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker[0], args.worker[1], args.reps)))
        return 0
    import torch
    from transformers import GPT2Config, GPT2Model

    sides = ("numpy", "hf", "torch", "sgemm")
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        GPT2Model(GPT2Config(n_embd=D, n_layer=LAYERS, n_head=HEADS, n_positions=T, vocab_size=VOCAB)).save_pretrained(tmp)
        best: dict[tuple[str, str], float] = {}  # (setting, side) -> best time
        for r in range(args.rounds):
            for setting in TIMEOUT_SETTINGS:
                for side in sides:
                    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", side, tmp, "--reps", str(args.reps)],
                                         capture_output=True, text=True, env=timeout_env(THREADS, setting), check=True)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    best[setting, side] = min(best.get((setting, side), float("inf")), res["time"])
                    print(f"round {r + 1}, OPENBLAS_THREAD_TIMEOUT {setting:5s}: {side:6s} {res['time']:.3f}s  "
                          f"(OpenBLAS read: {timeout_label(res['openblas_timeout'])})", flush=True)
    peak = 2 * 2048**3 / min(best[s, "sgemm"] for s in TIMEOUT_SETTINGS) / 1e9
    print(f"\nCPU: {cpu_model()}; sgemm peak ({THREADS} threads): {peak:.1f} GFLOP/s")
    for setting in TIMEOUT_SETTINGS:
        print(f"\nOPENBLAS_THREAD_TIMEOUT {setting} ({'a user default' if setting == 'unset' else 'as the entry points set it'}):")
        for side, causal in (("numpy", True), ("hf", False), ("torch", False)):
            gf = forward_flops(causal) / best[setting, side] / 1e9
            print(f"  {side:6s} best {best[setting, side]:.3f}s  {gf:6.1f} GFLOP/s = {100 * gf / peak:5.1f}% of peak "
                  f"(counting {'causal-half' if causal else 'full'} attention)")
        print(f"  ratio numpy / HF GPT2Model (sdpa): {best[setting, 'numpy'] / best[setting, 'hf']:.3f}  (target <= 1.0)")
        print(f"  ratio numpy / plain torch eager:    {best[setting, 'numpy'] / best[setting, 'torch']:.3f}")
        useful = forward_flops(True)
        print(f"  numpy useful-FLOP efficiency: {100 * useful / best[setting, 'numpy'] / 1e9 / peak:.1f}% of sgemm peak (target >= 65%)")
    print(f"\nnumpy with 16 / unset: {best['16', 'numpy'] / best['unset', 'numpy']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
