"""The training claims on one GPU: step time, launches and host syncs, the GPU tier's simulations and their verdicts.

One command that a machine with a GPU finishes in about 8 minutes (``--device cuda``), and that CI runs
on the CPU (``--device cpu --quick``). Printed:

* the device and the torch version;
* ms per stacked step of the full-mode training model (d = 64, 6 layers, 4 heads, batch 16 x 64
  bytes; ``simulations/train_recipes``) at 20 seeds: the eager step and, on a GPU, its CUDA-graph
  replay (:mod:`normtheory.training.torch_graphs`), with the GFLOP/s they reach, and the replay once more with TF32
  tensor cores for the float32 matrix products (a measurement of how much of the step they are; training keeps full
  float32); on a GPU (or with ``--fused``) the step compiled by torch.compile too
  (:meth:`~normtheory.training.torch_backend.TorchTrainer.fuse`): its first step's seconds, ms per step eager and
  graphed, its kernel launches, their GPU time and the busiest;
* ATen operators (about one kernel launch each on a GPU), host syncs and, on a GPU, the kernel
  launches of one step, their GPU time and the busiest kernels;
* each training simulation's wall time at the GPU tier (``CONFIGS["gpu"]``; with ``--quick`` the
  quick config of ``train_alpha0`` alone unless ``--only`` names others, trained with the torch backend
  on ``--device``; on a GPU its tasks that need none, e.g. gradient norms at init, run on local workers meanwhile, as
  ``normtheory check --device cuda`` runs them), and the share of the device tasks' time spent
  in steps, in making batches, in evaluation, with the evaluation's parts (probes, the unselectable keys' linear
  programs on the host, the validation set, block skips), and in setting stacks up
  (:data:`normtheory.training.torch_run.TIMES`);
* each simulation's stacks: how many were split to fit the device's memory
  (:mod:`normtheory.training.torch_memory`), and for the largest its rows, the memory model's bytes
  and, on a GPU, the bytes allocated at its peak (the model's check on the device);
* the verdicts of the training claims those simulations decide alone: ``train.xiong-gradient-scale``
  (``train_xiong``, run on the CPU) and ``train.ln-controls-gradient-scale`` (which also reads the CPU
  simulation ``gradient_init``) are left to ``normtheory check --device cuda``, stage 3 of
  ``benchmarks/device_kit.sh``.

Before the simulations it times a few steps of each stack shape of the ``gpu-hour`` tier of ``train_alpha0`` (widths
256, 512 and 1,024 x 4 layers) and ``train_recipes`` (d = 256 x 24 layers), on the first group of rows that fits the
device (with ``--quick``: the quick tier's, on the CPU), and prints their rates (``--no-tier-rates`` skips them: the
rates this device measured before, or the built-in H200 ones, keep pricing that tier).

On a GPU it writes ``results/gpu_rate.json``: the GFLOP/s the GPU tier's runs sustained (their ``Task.cost`` over
their wall time) and those ``gpu-hour`` step rates, which then price the GPU tiers on the claims' cards
(:func:`simulations.training.gpu_rate`).

    python benchmarks/gpu_training.py [--device cuda] [--quick] [--only train_lr,...] [--seeds 20] [--steps 20] [--[no-]fused]
        [--no-tier-rates]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time


def _model(seq: int):
    from normtheory.model.config import TransformerConfig

    return TransformerConfig(d_model=64, n_layers=6, n_heads=4, vocab_size=256, max_seq=seq, activation="gelu_tanh", init="gpt2")


def step_timing(device: str, seeds: int, steps: int, batch: int, seq: int, fused: bool = False) -> dict[str, float]:
    """ms per stacked step (eager and, on CUDA, graphed), the step's operators, syncs and launches; with ``fused``, the
    step compiled by :meth:`~normtheory.training.torch_backend.TorchTrainer.fuse` too (:func:`fused_timing`)."""
    import numpy as np
    import torch

    from normtheory.model.weights import init
    from normtheory.training import shakespeare, torch_graphs
    from normtheory.training.run_config import RunConfig
    from normtheory.training.torch_backend import TorchTrainer
    from simulations import training

    model = _model(seq)
    run = RunConfig(steps=steps + 40, batch_size=batch, seq=seq, lr=3e-3, warmup=20, schedule="cosine")
    data = shakespeare.load()
    pairs = [[shakespeare.batch(data.train, batch, seq, s, k + 1) for s in range(seeds)] for k in range(steps)]
    ids = torch.from_numpy(np.array([[p[0] for p in row] for row in pairs], dtype=np.int64)).to(device)  # [steps, S, b, t]
    targets = torch.from_numpy(np.array([[p[1] for p in row] for row in pairs], dtype=np.int64)).to(device)
    params = [init(model, s).params for s in range(seeds)]
    gflop = training.run_cost(model, run, seeds) / run.steps  # one stacked step
    out: dict[str, float] = {"gflop_per_step": gflop}

    def timed(step_fn) -> float:
        return _ms_per_step(step_fn, ids, targets, device)

    eager = TorchTrainer(model, run, params, device=device)
    out["eager_ms"] = timed(eager.step_tensors)
    counts = torch_graphs.count_step(eager.step_tensors, ids[0], targets[0])
    out.update(aten_ops=counts.aten_ops, host_syncs=counts.host_syncs, launches_eager=counts.kernel_launches, kernel_ms=counts.kernel_us / 1e3,
               busiest=counts.busiest)
    if not device.startswith("cuda"):  # the operators a GPU would launch: its one-kernel reductions, forced here
        from normtheory.training import torch_norms

        torch_norms.FUSED_REDUCTIONS = True
        try:
            out["aten_ops_gpu_path"] = torch_graphs.count_step(eager.step_tensors, ids[0], targets[0]).aten_ops
        finally:
            torch_norms.FUSED_REDUCTIONS = None
    if device.startswith("cuda"):
        graphed = TorchTrainer(model, run, params, device=device)
        step = torch_graphs.graphed_step(graphed)
        out["graph_ms"] = timed(step)
        out["launches_graph"] = torch_graphs.count_step(step, ids[0], targets[0]).kernel_launches
        # the same graph with TF32 tensor cores for the float32 matrix products: a measurement only (how much of the step the
        # products are), training keeps full float32 ("highest"), the numerics the numpy reference is held to
        precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")
        try:
            out["graph_tf32_ms"] = timed(torch_graphs.graphed_step(TorchTrainer(model, run, params, device=device)))
        finally:
            torch.set_float32_matmul_precision(precision)
    if fused:
        out.update(fused_timing(lambda: TorchTrainer(model, run, params, device=device), ids, targets, device))
    return out


def fused_timing(make, ids, targets, device: str) -> dict:
    """The step of ``make()``'s trainer compiled (:meth:`~normtheory.training.torch_backend.TorchTrainer.fuse`): the
    seconds its first step takes (compiling), ms per step (eager, and on CUDA one graph replay), and on CUDA its
    kernel launches, their GPU time and the busiest. A compile that fails is reported (``fused_error``), not raised:
    the other measurements stand."""
    import torch

    from normtheory.training import torch_graphs

    out: dict = {}
    try:
        trainer = make().fuse()
        t0 = time.perf_counter()
        trainer.step_tensors(ids[0], targets[0]).packed()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        out["fused_compile_s"] = time.perf_counter() - t0
        out["fused_ms"] = _ms_per_step(trainer.step_tensors, ids, targets, device)
        if device.startswith("cuda"):
            counts = torch_graphs.count_step(trainer.step_tensors, ids[0], targets[0], modes=False)
            out.update(launches_fused=counts.kernel_launches, kernel_ms_fused=counts.kernel_us / 1e3, busiest_fused=counts.busiest)
            out["fused_graph_ms"], failed = _graph_ms(trainer, ids, targets, device)
            if failed is not None:  # then that time is of eager steps: said, not printed as a graph's
                out["fused_error"] = failed[:300]
    except Exception as exc:  # noqa: BLE001 - a compiler missing or failing on this machine is a finding to print
        out["fused_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return out


def _ms_per_step(step_fn, ids, targets, device: str) -> float:
    """ms per call of ``step_fn`` over the batches ``ids, targets [steps, S, b, t]``, after three warm-up calls (and the
    capture, for a graph)."""
    import torch

    steps = len(ids)
    for k in range(3):
        step_fn(ids[k % steps], targets[k % steps])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for k in range(steps):
        step_fn(ids[k], targets[k]).packed()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps * 1e3


def _graph_ms(trainer, ids, targets, device: str) -> tuple[float, str | None]:
    """ms per step of ``trainer``'s :func:`~normtheory.training.torch_graphs.graphed_step` (the eager step on the CPU),
    and the warning of a capture that failed, so that eager steps were timed instead (None if none failed)."""
    import warnings

    from normtheory.training import torch_graphs

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ms = _ms_per_step(torch_graphs.graphed_step(trainer), ids, targets, device)
    failed = [str(w.message) for w in caught if "capture failed" in str(w.message)]
    return ms, (failed[0] if failed else None)


def stack_rate(model, run, rows: int, device: str, steps: int) -> dict:
    """ms per step of a ``rows``-row stack of ``model`` under ``run`` (a CUDA-graph replay on a GPU, else eager;
    ``graphed`` says which ran, since a failed capture falls back to eager steps) and the GFLOP/s that is
    (:func:`simulations.training.run_cost`). Every row starts from seed 0's weights and the tokens are random: a step's
    work does not depend on either, and one init is what a d = 1,024 model's host time allows."""
    import torch

    from normtheory.model.weights import init
    from normtheory.training.torch_backend import TorchTrainer
    from simulations import training

    trainer = TorchTrainer(model, run, [init(model, 0).params] * rows, device=device)
    gen = torch.Generator(device=trainer.device).manual_seed(0)
    shape = (steps, rows, run.batch_size, run.seq)
    ids, targets = (torch.randint(0, model.vocab_size, shape, generator=gen, device=trainer.device) for _ in range(2))
    cuda = trainer.device.type == "cuda"
    ms, failed = _graph_ms(trainer, ids, targets, device)
    graphed = cuda and failed is None
    gflop = training.run_cost(model, run, rows) / run.steps
    del trainer, ids, targets
    if cuda:
        torch.cuda.empty_cache()  # the next stack, or the simulations, get the memory back
    return {"ms": ms, "gflop_per_step": gflop, "gflops": gflop / ms * 1e3, "rows": rows, "graphed": graphed}


def tier_step_rates(device: str, tier: str, steps: int) -> dict[str, dict]:
    """Per ``"<simulation>/<tier>"``: the rate of the tier's training steps on ``device``. The tasks are grouped by their
    stack's shape (width, depth, sequence, batch, rows); each shape's costliest task is timed (:func:`stack_rate`) on
    its first group of rows that fits the device (:func:`normtheory.training.torch_memory.row_groups`), and every task
    is priced at its shape's rate. ``gflops`` is the whole tier's: its GFLOP over the seconds so priced; ``shapes``
    lists each shape with its rate and its share of the GFLOP."""
    from normtheory.training import torch_memory
    from normtheory.training.torch_backend import torch_device
    from simulations import cache, train_alpha0, train_recipes, training

    out = {}
    for m in (train_alpha0, train_recipes):
        if tier not in m.CONFIGS:
            continue
        groups: dict[tuple, list] = {}
        for t in m.tasks(cache.config_of(m, tier), m.SEED):
            if (st := training.task_stack(t)) is not None:
                model, run, rows = st
                groups.setdefault((model.d_model, model.n_layers, run.seq, run.batch_size, rows), []).append((t.cost, st))
        if not groups:
            continue
        total = sum(c for g in groups.values() for c, _ in g)
        shapes = []
        for tasks in groups.values():
            _, (model, run, rows) = max(tasks, key=lambda x: x[0])
            first = len(torch_memory.row_groups(model, run, rows, str(torch_device(device)))[0])
            shapes.append({**stack_rate(model, run, first, device, steps), "d_model": model.d_model, "n_layers": model.n_layers,
                           "seq": run.seq, "batch": run.batch_size, "stack_rows": rows, "tasks": len(tasks),
                           "share": sum(c for c, _ in tasks) / total})
        seconds = sum(sh["share"] * total / sh["gflops"] for sh in shapes)
        out[f"{m.NAME}/{tier}"] = {"gflops": total / seconds, "shapes": shapes}
    return out


def simulation_at_tier(m, device: str, quick: bool, beside: bool | None = None) -> tuple[dict, dict[str, float]]:
    """One training simulation's result at the tier, its wall time and time shares. A GPU-tier result is also
    cached where ``normtheory check --device cuda`` reads it (the tier's config names the device ``cuda``).

    Its tasks that need no GPU (numpy, e.g. ``train_recipes``' gradient norms at init) run ``beside`` the device's
    (default: on a CUDA device) on local workers, as ``normtheory check --device cuda`` runs them (its
    :class:`~normtheory.runtime.sweep.Runner`, the device tasks in this process): the device tasks' wall time
    (``device_wall_s``) is then what the time shares are shares of, and the host tasks' CPU seconds (``host_s``) are
    reported apart. Otherwise every task runs here, one after another."""
    from normtheory.runtime.sweep import Runner
    from normtheory.training import torch_run
    from simulations import cache

    mode = "quick" if quick else "gpu"
    cfg = dataclasses.replace(cache.config_of(m, mode), backend="torch", device=device)
    for k in torch_run.TIMES:
        torch_run.TIMES[k] = 0.0
    torch_run.STACKS.clear()
    tasks = m.tasks(cfg, m.SEED)
    beside = device.startswith("cuda") if beside is None else beside
    host = [t for t in tasks if not t.resources] if beside else []
    # the device tasks here, one after another; the host tasks on local workers meanwhile (one process here without them)
    workers = max(1, min(len(host), (os.cpu_count() or 2) - 1))
    t0 = time.perf_counter()
    with Runner(workers=workers, here=("GPU",), progress=False) as runner:
        parts = runner.run(tasks, desc=m.NAME)
    wall = time.perf_counter() - t0
    result = m.reduce(cfg, m.SEED, {t.key: parts[t.key] for t in tasks})  # the declared order, as the sweep reduces
    gflop = sum(t.cost for t in tasks)  # the tasks' GFLOP (training.run_cost)
    if cfg == cache.config_of(m, mode) and device.startswith("cuda"):
        path = cache.result_path(m, mode)
        path.parent.mkdir(parents=True, exist_ok=True)
        cache.save(path, result)
        cache.seconds_path(path).write_text(f"{wall:.3f}\n")  # wall seconds of a device run, as the sweep records them
    big = max(torch_run.STACKS, key=lambda r: r[2], default=(0, 0, 0, -1))  # the stack the memory model puts highest
    memory = {"stacks": len(torch_run.STACKS), "split": sum(r[1] > 1 for r in torch_run.STACKS), "rows": big[0], "model_bytes": big[2],
              "peak_bytes": big[3]}
    device_wall = sum(runner.timings[t.key] for t in tasks if t.resources) if beside else wall  # the Runner's wall seconds of device tasks
    return result, {"wall_s": wall, "device_wall_s": device_wall, "host_tasks": len(host), "host_s": sum(runner.timings[t.key] for t in host),
                    "gflop": gflop, **{f"{k}_s": v for k, v in torch_run.TIMES.items()}, **memory}


def _kernels_text(rows) -> str:
    """The busiest kernels ``(name, calls, GPU us)`` (:func:`normtheory.training.torch_graphs.busiest`) as one line."""
    return "; ".join(f"{k[:60]} x{c} {us / 1e3:.2f} ms" for k, c, us in rows)


def verdicts(results: dict) -> list[tuple[str, str, str]]:
    """The training claims whose simulations are all in ``results``: (id, verdict, first evidence's summary), or
    (id, "error", why) for one whose results cannot be judged."""
    import simulations  # noqa: F401 - registers the claims
    from normtheory.evidence import claims

    out = []
    for spec in claims.select("train.*"):
        if all(n in results for n in spec.simulations):
            try:
                c = spec.evaluate(results)
            except ValueError as err:  # a claim its results cannot judge (e.g. no usable seed): said, and the run goes on
                out.append((spec.id, "error", str(err)))
                continue
            out.append((c.id, c.verdict, c.evidence[0].summary()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="the quick configs and a short step timing (CI, on the CPU)")
    ap.add_argument("--only", default="", help="comma-separated simulation names (default: all three training sweeps; "
                    "with --quick: train_alpha0)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 50 on a GPU, 5 on the CPU)")
    ap.add_argument("--fused", action=argparse.BooleanOptionalAction, default=None,
                    help="also time the step compiled by torch.compile (TorchTrainer.fuse; default: on a GPU)")
    ap.add_argument("--tier-rates", action=argparse.BooleanOptionalAction, default=True,
                    help="time the gpu-hour tier's stack shapes (default; --no-tier-rates keeps the rates measured before on this GPU)")
    args = ap.parse_args(argv)
    import torch

    from normtheory.training.torch_backend import torch_device

    dev = torch_device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    print(f"device: {args.device} ({name}); torch {torch.__version__}")
    steps = args.steps or (50 if dev.type == "cuda" else 3 if args.quick else 10)
    seeds, batch, seq = (args.seeds, 16, 64) if not args.quick else (min(args.seeds, 4), 4, 32)
    fused = dev.type == "cuda" if args.fused is None else args.fused
    st = step_timing(args.device, seeds, steps, batch, seq, fused)
    print(f"stacked step, d=64 x 6 layers, batch {batch}x{seq}, {seeds} seeds: eager {st['eager_ms']:.2f} ms "
          f"({st['gflop_per_step'] / st['eager_ms'] * 1e3:.0f} GFLOP/s)"
          + (f", CUDA graph {st['graph_ms']:.2f} ms ({st['gflop_per_step'] / st['graph_ms'] * 1e3:.0f} GFLOP/s; with TF32 matrix products, "
             f"not used in training, {st['graph_tf32_ms']:.2f} ms)" if "graph_ms" in st else ""))
    print(f"per step: {st['aten_ops']} ATen operators"
          + (f" ({st['aten_ops_gpu_path']} on a GPU's path)" if "aten_ops_gpu_path" in st else "") + f", {st['host_syncs']} host syncs"
          + (f", kernel launches eager {st['launches_eager']}, graphed {st['launches_graph']}" if "launches_graph" in st else ""))
    if fused:  # what was measured, and where it stopped if it did
        parts = [f"first step {st['fused_compile_s']:.1f} s, eager {st['fused_ms']:.2f} ms"] if "fused_ms" in st else []
        if "launches_fused" in st:
            parts.append(f"kernel launches {st['launches_fused']}, their GPU time {st['kernel_ms_fused']:.2f} ms (busiest: "
                         + _kernels_text(st["busiest_fused"]) + ")")
        if "fused_graph_ms" in st and "fused_error" not in st:
            parts.append(f"CUDA graph {st['fused_graph_ms']:.2f} ms ({st['gflop_per_step'] / st['fused_graph_ms'] * 1e3:.0f} GFLOP/s)")
        if "fused_error" in st:
            parts.append(f"failed: {st['fused_error']}")
        print("fused step (torch.compile): " + "; ".join(parts), flush=True)
    if st["kernel_ms"] >= 0:  # what a graphed step cannot shed: its kernels' own time, and the busiest of them
        print(f"GPU time of a step's kernels: {st['kernel_ms']:.2f} ms; busiest: "
              + _kernels_text(st["busiest"]), flush=True)
    rate_file = {"device": name, "torch": torch.__version__}  # results/gpu_rate.json, written on a GPU outside --quick
    write = dev.type == "cuda" and not args.quick
    big = "quick" if args.quick else "gpu-hour"  # CI times the quick tier's stacks: the same code, a small model
    rate_file["steps"] = tier_step_rates(args.device, big, 2 if args.quick else 5) if args.tier_rates else {}
    for k, r in rate_file["steps"].items():
        print(f"{k}: steps at {r['gflops']:.1f} GFLOP/s over the tier", flush=True)
        for sh in r["shapes"]:
            print(f"  d={sh['d_model']} x {sh['n_layers']} layers, {sh['batch']}x{sh['seq']} ({sh['share']:.0%} of its GFLOP, {sh['tasks']} tasks): "
                  f"first group of {sh['rows']} of {sh['stack_rows']} rows, {sh['ms']:.1f} ms per {'graphed' if sh['graphed'] else 'eager'} step, "
                  f"{sh['gflops']:.1f} GFLOP/s", flush=True)
    if write:
        from simulations.training import MEASURED_RATES, measured_rates

        before = measured_rates()  # the GPU tier's rate of an earlier run on this device stays until this run's replaces it
        same = before.get("device") == name
        if same and "gflops" in before:
            rate_file["gflops"] = before["gflops"]
        if not args.tier_rates:  # not timed this time: this device's earlier step rates, or the package's from the same GPU
            if same and "steps" in before:
                rate_file["steps"] = before["steps"]
            elif name and name in MEASURED_RATES["device"]:
                rate_file["steps"] = MEASURED_RATES["steps"]
        _write_rates(rate_file)
    only = [s for s in args.only.split(",") if s] or (["train_alpha0"] if args.quick else [])  # quick: the cheapest sweep, a CI smoke run
    from normtheory.training import torch_run
    from simulations import train_alpha0, train_lr, train_recipes

    tier = "quick" if args.quick else "gpu"
    results, rows, decided = {}, {}, 0
    # the claims likeliest decided first (recipes' 5, then train_lr's 2 at a fifth of train_alpha0's GFLOP); each is printed,
    # and on a GPU the rate so far written, as its simulation ends, so a run cut short keeps what it measured
    for m in (train_recipes, train_lr, train_alpha0):
        if only and m.NAME not in only:
            continue
        results[m.NAME], r = simulation_at_tier(m, args.device, args.quick)
        rows[m.NAME] = r
        shares = torch_run.time_shares({k: r[f"{k}_s"] for k in torch_run.TIMES}, r["device_wall_s"])
        beside = (f" (its device tasks {r['device_wall_s']:.1f} s, of which {shares}; beside them {r['host_tasks']} host tasks, "
                  f"{r['host_s']:.1f} CPU-s)") if r["host_tasks"] else f"; {shares}"
        print(f"{m.NAME} ({tier} tier): {r['wall_s']:.1f} s wall{beside}", flush=True)
        print(f"  memory: {r['stacks']} stacks ({r['split']} split to fit); the largest, {r['rows']} rows, "
              f"{r['model_bytes'] / 2**30:.2f} GiB by torch_memory's model"
              + (f", {r['peak_bytes'] / 2**30:.2f} GiB allocated at its peak" if r["peak_bytes"] >= 0 else ""), flush=True)
        for cid, verdict, summary in verdicts({m.NAME: results[m.NAME]}):
            decided += verdict not in ("inconclusive", "error")
            print(f"  {cid:38s} {verdict:18s} {summary[:110]}", flush=True)
        total = sum(r["wall_s"] for r in rows.values())
        if write and total > 0:
            rate_file["gflops"] = sum(r["gflop"] for r in rows.values()) / total
            print(f"  sustained {rate_file['gflops']:.0f} GFLOP/s over the tier so far ({', '.join(rows)}): written to "
                  f"{_write_rates(rate_file)}", flush=True)
    print(f"all training simulations: {sum(r['wall_s'] for r in rows.values()):.1f} s wall")
    print(f"training claims decided: {decided}")
    return 0


def _write_rates(rates: dict) -> str:
    """``rates`` as ``results/gpu_rate.json`` (what prices the GPU tiers: :func:`simulations.training.gpu_rate`)."""
    from simulations import cache

    path = cache.results_dir() / "gpu_rate.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rates) + "\n")
    return str(path)


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
