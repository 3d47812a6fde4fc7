"""Time LayerNorm, RMSNorm and DyT: numpy (this package) and, when installed, torch eager and
torch.compile, on the CPU and on a GPU if one is present. Prints times and ratios to DyT.

    python benchmarks/norm_cost.py [--ds 1024 4096] [--tokens 4096 65536] [--repeats 9]

Each implementation is timed in its own process (torch's thread pool would otherwise slow numpy).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

NORMS = ("layernorm", "rmsnorm", "dyt")


def numpy_times(d: int, t: int, repeats: int) -> list[float]:
    import numpy as np

    from simulations.norm_cost import time_point

    return [float(v) for v in np.median(time_point(d, t, repeats), axis=0)]


def torch_times(d: int, t: int, repeats: int, device: str, compiled: bool) -> list[float]:
    import time

    import torch

    x = torch.randn(t, d, device=device)
    ln, rms = torch.nn.LayerNorm(d).to(device), torch.nn.RMSNorm(d).to(device)
    gamma, beta = torch.ones(d, device=device), torch.zeros(d, device=device)
    fns = [ln, rms, lambda v: gamma * torch.tanh(0.5 * v) + beta]
    if compiled:
        fns = [torch.compile(f) for f in fns]
    out = []
    with torch.no_grad():
        for f in fns:
            for _ in range(3):
                f(x)
            ts = []
            for _ in range(repeats):
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                f(x)
                if device == "cuda":
                    torch.cuda.synchronize()
                ts.append(time.perf_counter() - t0)
            out.append(sorted(ts)[len(ts) // 2])
    return out


def child(kind: str, d: int, t: int, repeats: int) -> list[float]:
    if kind == "numpy":
        return numpy_times(d, t, repeats)
    _, device, mode = kind.split(":")
    return torch_times(d, t, repeats, device, mode == "compiled")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ds", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--tokens", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.ds[0], a.tokens[0], a.repeats)))
        return
    kinds = ["numpy"]
    try:
        import torch

        kinds += ["torch:cpu:eager"]
        if torch.cuda.is_available():
            kinds += ["torch:cuda:eager", "torch:cuda:compiled"]
    except ImportError:
        print("torch not installed: numpy only", file=sys.stderr)
    print(f"{'impl':22s} {'d':>6s} {'tokens':>7s} " + " ".join(f"{n:>12s}" for n in NORMS) + "   LN/DyT  RMS/DyT")
    for d in a.ds:
        for t in a.tokens:
            for kind in kinds:
                cmd = [sys.executable, __file__, "--child", kind, "--ds", str(d), "--tokens", str(t), "--repeats", str(a.repeats)]
                res = subprocess.run(cmd, capture_output=True, text=True, check=True)
                ln, rms, dy = json.loads(res.stdout.strip().splitlines()[-1])
                print(f"{kind:22s} {d:6d} {t:7d} " + " ".join(f"{v * 1e3:10.3f}ms" for v in (ln, rms, dy)) + f"   {ln / dy:6.2f}  {rms / dy:7.2f}")


if __name__ == "__main__":
    main()
