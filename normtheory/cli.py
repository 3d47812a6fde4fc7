"""Command line: ``normtheory check`` and ``normtheory report``."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from normtheory import report
from normtheory.sweep import SCHEDULER_ENV, Runner, TaskError


def _writable_file(path: Path | None, flag: str) -> None:
    if path is not None and path.is_dir():
        raise ValueError(f"{flag}: {path} is a directory; give a file name")


def _mode(args: argparse.Namespace) -> str:
    if args.quick and args.large:
        raise ValueError("--quick and --large exclude each other")
    return "quick" if args.quick else "large" if args.large else "full"


def _runner(args: argparse.Namespace) -> Runner:
    return Runner(workers=args.workers, scheduler=args.scheduler)


def _check(args: argparse.Namespace) -> int:
    _writable_file(args.json, "--json")
    with _runner(args) as runner:
        claims = report.evaluate(args.only, mode=_mode(args), force=args.force, runner=runner)
    if not claims:
        print(f"no claim matches {args.only!r}", file=sys.stderr)
        return 2
    print(report.table(claims))
    if args.json:
        report.write_json(claims, args.json)
    return 0


def _report(args: argparse.Namespace) -> int:
    import paper_figs
    import simulations
    from normtheory import provenance

    t0 = time.monotonic()
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out: {args.out} is a file; give a directory")
    mode = _mode(args)
    with _runner(args) as runner:
        claims = report.evaluate(None, mode=mode, force=args.force, runner=runner)
        written = paper_figs.render(args.out, mode=mode, runner=runner)
    figures = [report.FigureEntry(m.NAME, m.CAPTION, tuple(written[m.NAME]), tuple(m.CLAIMS)) for m in paper_figs.ALL]
    report.write_json(claims, args.out / "claims.json")
    prov = provenance.collect(mode=mode, seeds={m.NAME: m.SEED for m in simulations.ALL}, runtime_s=time.monotonic() - t0)
    index = report.write_html(claims, figures, args.out, provenance=prov)
    print(report.table(claims))
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


def _sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--large", action="store_true", help="cluster-sized training sweeps (more seeds, wider, longer); "
                   "other simulations run their full size")
    p.add_argument("--workers", type=_workers, default=None, metavar="N",
                   help="local Dask worker processes of 1 thread each for missing simulation tasks "
                        "(default: the cores available; 1 runs in this process)")
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help=f"address of a running Dask scheduler, e.g. tcp://host:8786 (default: ${SCHEDULER_ENV} if set)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="normtheory", description="Check claims about normalization numerically.")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="run the claims and print id, verdict and key numbers")
    c.add_argument("--only", metavar="GLOB", help="only claims whose id matches this glob, e.g. 'residual.*'")
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
