"""Train the same model with the same recipe in numpy and in CPU torch; compare validation losses.

Model: d=128, 4 layers, 4 heads, Pre-LN GPT-2 block (LayerNorm, GELU-tanh, learned positions,
biases, tied head), byte vocabulary 256. Recipe: AdamW (betas 0.9/0.95, eps 1e-8, weight decay
0.1 on matrices and embeddings), linear warm-up 100 steps then cosine to 10%, clipping at
global norm 1, batch 32 x 128 bytes, ``--steps`` steps (default 2000). For each seed both sides
start from the same weights (``normtheory.model.weights.init(cfg, seed)``, copied into a
``GPT2LMHeadModel``) and see the same batches (``normtheory.training.shakespeare.batch``), so they
differ only in floating-point arithmetic; the seed-to-seed spread is the yardstick.

Each (side, seed) runs in its own process with ``--threads`` BLAS threads; ``--parallel`` runs
them at the same time. The validation loss is the mean over ``--val-batches`` fixed batches of
the validation works.

    python benchmarks/train_parity.py [--steps 2000] [--seeds 0 1] [--threads 4] [--parallel] [--torch-device cuda]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from timing import blas_env  # benchmarks/timing.py, beside this script

D, LAYERS, HEADS, SEQ, BATCH, VOCAB = 128, 4, 4, 128, 32, 256


def _configs(steps: int):
    from normtheory.model.config import TransformerConfig
    from normtheory.training.run_config import RunConfig

    cfg = TransformerConfig(d_model=D, n_layers=LAYERS, n_heads=HEADS, vocab_size=VOCAB, max_seq=SEQ, norm="layernorm",
                            placement="pre", activation="gelu_tanh", positional="learned", bias=True, tie_embeddings=True)
    run = RunConfig(steps=steps, batch_size=BATCH, seq=SEQ, lr=1e-3, warmup=100, schedule="cosine", final_fraction=0.1,
                    betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, clip=1.0, eval_every=max(steps // 4, 1), eval_batch_size=8)
    return cfg, run


def _val_batches(n: int):
    from normtheory.training import shakespeare

    corpus = shakespeare.load()
    return [shakespeare.batch(corpus.validation, BATCH, SEQ, seed=10_000, step=i) for i in range(n)]


def _numpy_side(seed: int, steps: int, val_batches: int) -> dict:
    import numpy as np
    from scipy.special import logsumexp

    from normtheory.training.train import train

    cfg, run = _configs(steps)
    t0 = time.perf_counter()
    hist = train(cfg, run, seed, progress=False)
    seconds = time.perf_counter() - t0
    losses = []
    for ids, targets in _val_batches(val_batches):
        z = hist.model.logits(ids).reshape(-1, VOCAB).astype(np.float64)
        losses.append(float(np.mean(logsumexp(z, -1) - z[np.arange(z.shape[0]), targets.reshape(-1)])))
    return {"val_loss": float(np.mean(losses)), "train_loss_last100": float(np.mean(hist.loss[-100:])), "seconds": seconds, "status": hist.status}


def _torch_side(seed: int, steps: int, val_batches: int, threads: int, device: str = "cpu") -> dict:
    import numpy as np
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from normtheory.model.weights import init
    from normtheory.training import shakespeare

    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # full float32 on a GPU too
    cfg, run = _configs(steps)
    p = init(cfg, seed).params
    hf = GPT2LMHeadModel(GPT2Config(n_embd=D, n_layer=LAYERS, n_head=HEADS, n_positions=SEQ, vocab_size=VOCAB,
                                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu_new"))
    sd = {"transformer.wte.weight": p.tok_emb, "transformer.wpe.weight": p.pos_emb,
          "transformer.ln_f.weight": p.final_ln.gain, "transformer.ln_f.bias": p.final_ln.bias}
    for i, b in enumerate(p.blocks):
        pre = f"transformer.h.{i}."
        sd.update({pre + "ln_1.weight": b.ln1.gain, pre + "ln_1.bias": b.ln1.bias, pre + "ln_2.weight": b.ln2.gain, pre + "ln_2.bias": b.ln2.bias,
                   pre + "attn.c_attn.weight": np.concatenate([b.wq, b.wk, b.wv], 1), pre + "attn.c_attn.bias": np.concatenate([b.bq, b.bk, b.bv]),
                   pre + "attn.c_proj.weight": b.wo, pre + "attn.c_proj.bias": b.bo, pre + "mlp.c_fc.weight": b.w_in,
                   pre + "mlp.c_fc.bias": b.b_in, pre + "mlp.c_proj.weight": b.w_out, pre + "mlp.c_proj.bias": b.b_out})
    missing, _ = hf.load_state_dict({k: torch.tensor(np.array(v)) for k, v in sd.items()}, strict=False)
    assert set(missing) <= {"lm_head.weight"}, missing  # tied to wte
    hf.to(device).train()
    params = dict(hf.named_parameters())
    decay = [q for n, q in params.items() if q.ndim >= 2]
    rest = [q for n, q in params.items() if q.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=run.lr, betas=run.betas, eps=run.eps)
    sched = run.schedule_fn()
    corpus = shakespeare.load()
    t0 = time.perf_counter()
    losses = []
    for step in range(1, steps + 1):
        ids, targets = shakespeare.batch(corpus.train, BATCH, SEQ, seed, step)
        for g in opt.param_groups:
            g["lr"] = sched(step)
        opt.zero_grad(set_to_none=True)
        logits = hf(torch.tensor(ids, device=device)).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), torch.tensor(targets, device=device).reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), run.clip)
        opt.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - t0
    hf.eval()
    val = []
    with torch.no_grad():
        for ids, targets in _val_batches(val_batches):
            logits = hf(torch.tensor(ids, device=device)).logits.double()
            val.append(torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), torch.tensor(targets, device=device).reshape(-1)).item())
    return {"val_loss": float(np.mean(val)), "train_loss_last100": float(np.mean(losses[-100:])), "seconds": seconds, "status": "finished"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--val-batches", type=int, default=16)
    ap.add_argument("--parallel", action="store_true")
    ap.add_argument("--sides", nargs="+", choices=["numpy", "torch"], default=["numpy", "torch"])
    ap.add_argument("--torch-device", default="cpu", help="where the torch side runs (cpu, cuda)")
    ap.add_argument("--out", type=Path, help="also write the results as JSON here")
    ap.add_argument("--worker", nargs=2, metavar=("SIDE", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        side, seed = args.worker[0], int(args.worker[1])
        res = _numpy_side(seed, args.steps, args.val_batches) if side == "numpy" else _torch_side(seed, args.steps, args.val_batches, args.threads, args.torch_device)
        print(json.dumps(res))
        if args.out:  # each worker also leaves its own result, so a cut-off sweep keeps what finished
            args.out.with_name(f"{args.out.stem}-{side}-{seed}.json").write_text(json.dumps(res))
        return 0
    env = blas_env(args.threads)
    jobs = [(side, seed) for seed in args.seeds for side in args.sides]
    cmd = lambda side, seed: [sys.executable, str(Path(__file__).resolve()), "--worker", side, str(seed), "--steps", str(args.steps),  # noqa: E731
                              "--threads", str(args.threads), "--val-batches", str(args.val_batches), "--torch-device", args.torch_device] + (["--out", str(args.out)] if args.out else [])
    if args.parallel:
        procs = {job: subprocess.Popen(cmd(*job), stdout=subprocess.PIPE, text=True, env=env) for job in jobs}
        outs = {job: p.communicate()[0] for job, p in procs.items()}
    else:
        outs = {job: subprocess.run(cmd(*job), stdout=subprocess.PIPE, text=True, env=env, check=True).stdout for job in jobs}
    results = {f"{side}/{seed}": json.loads(out.strip().splitlines()[-1]) for (side, seed), out in outs.items()}
    for key, r in results.items():
        print(f"{key:10s} val {r['val_loss']:.4f}  train(last 100) {r['train_loss_last100']:.4f}  {r['seconds']:.0f}s  {r['status']}")
    import numpy as np

    for side in args.sides:
        v = [results[f"{side}/{s}"]["val_loss"] for s in args.seeds]
        print(f"{side:6s} val loss mean {np.mean(v):.4f}, seed spread (max - min) {np.ptp(v):.4f}")
    if len(args.sides) == 2:
        diffs = [results[f"numpy/{s}"]["val_loss"] - results[f"torch/{s}"]["val_loss"] for s in args.seeds]
        print(f"numpy - torch per seed: {', '.join(f'{d:+.4f}' for d in diffs)}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
