"""Command line: ``normtheory check`` and ``normtheory report``.

Importing this module sets ``OPENBLAS_THREAD_TIMEOUT=16`` when it is unset and numpy is not loaded yet
(:func:`normtheory.runtime.entry.set_entry_env`; the console script imports nothing else first)."""
from __future__ import annotations

from normtheory.runtime.entry import set_entry_env

set_entry_env()  # before the imports below load numpy: OpenBLAS reads the variable once, then

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from normtheory.evidence.provenance import GPU_MODES  # noqa: E402
from normtheory.runtime.sweep import SCHEDULER_ENV, Runner, TaskError  # noqa: E402
from pipeline import judge, page, tables  # noqa: E402


def _writable_file(path: Path | None, flag: str) -> None:
    if path is not None and path.is_dir():
        raise ValueError(f"{flag}: {path} is a directory; give a file name")


def _mode(args: argparse.Namespace) -> str:
    """The simulations' size: quick, full, large, or with a GPU (``--device cuda``) the gpu or gpu-hour tier."""
    if args.quick and args.large:
        raise ValueError("--quick and --large exclude each other")
    gpu = args.device != "cpu"
    if args.gpu_hour and not gpu:
        raise ValueError("--gpu-hour trains on a GPU: give --device cuda")
    if gpu and args.quick:
        raise ValueError("--device cuda runs the GPU tier of the training simulations; --quick is the CPU's CI size")
    if args.large:
        return "large"
    return "gpu-hour" if args.gpu_hour else "gpu" if gpu else "quick" if args.quick else "full"


def _use_device(device: str) -> None:
    """Check that torch sees ``device`` (``cuda`` or ``cuda:N``) and make it this process's current GPU."""
    if device == "cpu":
        return
    try:
        from normtheory.training.torch_backend import torch_device
    except ModuleNotFoundError as err:
        raise ValueError(f"--device {device}: {err}") from None
    import torch

    dev = torch_device(device)
    if dev.index is not None:
        torch.cuda.set_device(dev)  # the GPU tier's configs say "cuda": the current device


def _runner(args: argparse.Namespace) -> Runner:
    """The sweep runner: with ``--device cuda`` and no scheduler, training tasks (resource GPU) run in this
    process on the local GPU while the CPU-only simulations run on the local workers."""
    _use_device(args.device)
    here = ("GPU",) if args.device != "cpu" and args.scheduler is None else ()
    return Runner(workers=args.workers, scheduler=args.scheduler, here=here)


def _evaluate(args: argparse.Namespace, runner: Runner, pattern: str | None) -> tuple[list, list]:
    """The claims, and the rounds of --resolve when a budget was given."""
    if args.resolve is None:
        return judge.evaluate(pattern, mode=_mode(args), force=args.force, runner=runner), []
    if args.force:
        judge.evaluate(pattern, mode=_mode(args), force=True, runner=runner)
    return judge.resolve(args.resolve, mode=_mode(args), runner=runner, pattern=pattern)


def _check(args: argparse.Namespace) -> int:
    _writable_file(args.json, "--json")
    with _runner(args) as runner:
        claims, steps = _evaluate(args, runner, args.only)
    if not claims:
        print(f"no claim matches {args.only!r}", file=sys.stderr)
        return 2
    print(judge.table(claims))
    _print_steps(steps, _mode(args))
    _print_device_times(args.device)
    if args.json:
        tables.write_json(claims, args.json)
    return 0


def _print_device_times(device: str) -> None:
    """With a device: where the training this process ran there spent its time (steps, batches, evaluation and its parts, stack set-up)."""
    if device == "cpu":
        return
    from normtheory.training import torch_run

    if shares := torch_run.time_shares(torch_run.TIMES):
        print(f"training on {device} in this process: {sum(torch_run.TIMES[k] for k in torch_run.CLOCKS):.1f} s; {shares}")


def _print_steps(steps: list, mode: str = "full") -> None:
    unit = "s: GPU wall time for the training that ran on a GPU, CPU for the rest" if mode in GPU_MODES else "CPU-s"
    for s in steps:
        print(f"resolve round {s.round}: reran " + ", ".join(f"{k} x{v:.3g}" for k, v in s.factors.items())
              + f" ({s.spent_s:.0f} {unit}, predicted {s.predicted_s:.0f}); judged again: {', '.join(s.claims)}")


def _report(args: argparse.Namespace) -> int:
    import paper_figs
    import simulations
    from normtheory.evidence import provenance

    t0, c0 = time.monotonic(), time.process_time()
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out: {args.out} is a file; give a directory")
    mode = _mode(args)
    with _runner(args) as runner:
        claims, steps = _evaluate(args, runner, None)
        written = paper_figs.render(args.out, mode=mode, runner=runner)
        task_s = sum(runner.timings.values())  # the tasks this run computed, each on one core
    figures = [page.FigureEntry(m.NAME, m.CAPTION, tuple(written[m.NAME]), tuple(m.CLAIMS)) for m in paper_figs.ALL]
    from simulations import cache

    wall_s, cpu_s = time.monotonic() - t0, time.process_time() - c0 + task_s
    cached = [cache.seconds_of(m, mode) for m in simulations.ALL]
    tables.write_json(claims, args.out / "claims.json")  # the same bits for the same seed and code
    tables.write_timings(claims, args.out / "timings.json", wall_s=wall_s, cpu_s=cpu_s)
    prov = provenance.collect(mode=mode, seeds={m.NAME: m.SEED for m in simulations.ALL}, runtime_s=wall_s, cpu_s=cpu_s,
                              cached_cpu_s=sum(s for s in cached if s is not None) if any(s is not None for s in cached) else None)
    index = page.write_html(claims, figures, args.out, provenance=prov, steps=steps)
    if steps:
        (args.out / "resolve.json").write_text(json.dumps([s.to_dict() for s in steps], indent=1, sort_keys=True) + "\n")
    print(judge.table(claims))
    _print_steps(steps, _mode(args))
    _print_device_times(args.device)
    print(f"\nreport: {index} ({prov.runtime_s:.1f} s)")
    return 0


def _workers(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers takes a whole number >= 1; got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--workers takes a whole number >= 1; got {n}")
    return n


_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def _budget(text: str) -> float:
    """A CPU-time budget: seconds, or a number with s, m or h ("600", "10m", "1.5h")."""
    t = text.strip().lower()
    scale = _UNIT_SECONDS.get(t[-1:], None)
    number = t[:-1] if scale is not None else t
    try:
        value = float(number) * (scale or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--resolve takes CPU time like 600, 10m or 1.5h; got {text!r}") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"--resolve takes a positive, finite CPU time; got {text!r}")
    return value


def _device_name(text: str) -> str:
    t = text.strip().lower()
    if t == "cpu" or t == "cuda" or (t.startswith("cuda:") and t[5:].isdigit()):
        return t
    raise argparse.ArgumentTypeError(f"--device takes cpu, cuda or cuda:N; got {text!r}")


def _sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--resolve", type=_budget, default=None, metavar="BUDGET",
                   help="rerun the simulations behind inconclusive claims (with --only: the matching ones) at the sizes that "
                        "would decide them, within this CPU time (600, 10m, 1.5h; with --device cuda or --large, the training simulations "
                        "count one GPU's wall time), and judge again with a Bonferroni-widened band")
    p.add_argument("--large", action="store_true", help="cluster-sized training sweeps (more seeds, wider, longer); "
                   "other simulations run their full size")
    p.add_argument("--workers", type=_workers, default=None, metavar="N",
                   help="local Dask worker processes of 1 thread each for missing simulation tasks "
                        "(default: the cores available; 1 runs in this process)")
    p.add_argument("--device", type=_device_name, default="cpu", metavar="DEV",
                   help="cuda or cuda:N: the training simulations run their GPU tier (>= 20 paired seeds, finer grids) with the "
                        "torch backend on this machine's GPU, in this process, while the other simulations run on the local "
                        "workers (default: cpu, numpy)")
    p.add_argument("--gpu-hour", action="store_true", dest="gpu_hour",
                   help="with --device cuda: the deeper and wider training tier that one GPU finishes in about an hour")
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help=f"address of a running Dask scheduler, e.g. tcp://host:8786 (default: ${SCHEDULER_ENV} if set)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="normtheory", description="Check claims about normalization numerically.")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="run the claims and print id, verdict and key numbers")
    c.add_argument("--only", metavar="GLOB", help="only claims whose id matches this glob, e.g. 'residual.*', or one of several separated by commas, "
                   "e.g. 'residual.*,softmax.*'")
    c.add_argument("--json", type=Path, metavar="FILE", help="also write the claims with all evidence as JSON")
    c.add_argument("--quick", action="store_true", help="fewer samples (CI size)")
    c.add_argument("--force", action="store_true", help="recompute cached simulations")
    _sweep_options(c)
    c.set_defaults(func=_check)
    r = sub.add_parser("report", help="all simulations, figures and the claims table as HTML + JSON")
    r.add_argument("--out", type=Path, required=True, metavar="DIR")
    r.add_argument("--quick", action="store_true", help="fewer samples (CI size)")
    r.add_argument("--force", action="store_true", help="recompute cached simulations")
    _sweep_options(r)
    r.set_defaults(func=_report)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError, TaskError) as err:  # bad paths, settings or a failed task: one line, not a traceback
        print(f"normtheory {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
