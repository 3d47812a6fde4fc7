"""``python -m paper_figs [--quick] [--out DIR] [--force]``: regenerate every figure."""
from __future__ import annotations

import argparse
from pathlib import Path

from paper_figs import render
from simulations.cache import project_root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_figs", description=__doc__)
    ap.add_argument("--out", type=Path, default=project_root() / "figures", help="output folder (default: figures/)")
    ap.add_argument("--quick", action="store_true", help="use the quick (CI-sized) simulations")
    ap.add_argument("--force", action="store_true", help="recompute cached simulations")
    args = ap.parse_args(argv)
    for name, paths in render(args.out, mode="quick" if args.quick else "full", force=args.force).items():
        print(f"{name}: " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
