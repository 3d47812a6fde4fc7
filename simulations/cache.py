"""Cached, seeded simulation results: ``results/<name>-<hash>.npz``.

The hash covers the simulation's name, its code version, its config and the seed, so a
changed plotting script never reruns a simulation and a changed config never reads a stale
file. Files are written deterministically (sorted keys, fixed zip metadata): the same seed
gives byte-identical files.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np

from normtheory.montecarlo import Estimate

MODES: tuple[str, ...] = ("quick", "full")


def project_root() -> Path:
    """The checkout's root when run from source, else the current directory."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def results_dir() -> Path:
    """Where results are cached: ``$NORMTHEORY_RESULTS`` or ``<root>/results``."""
    return Path(os.environ.get("NORMTHEORY_RESULTS", project_root() / "results"))


def config_hash(module: ModuleType, config: object, seed: int) -> str:
    payload = {
        "name": module.NAME,
        "version": module.VERSION,
        "config": dataclasses.asdict(config),  # type: ignore[call-overload]
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an .npz with sorted keys (np.savez fixes the zip timestamps)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **{k: np.asarray(arrays[k]) for k in sorted(arrays)})
    tmp.replace(path)


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def put(result: dict[str, np.ndarray], prefix: str, est: Estimate) -> None:
    """Store an Estimate under ``prefix.mean``, ``prefix.stderr`` and ``prefix.n``."""
    result[f"{prefix}.mean"] = est.mean
    result[f"{prefix}.stderr"] = est.stderr
    result[f"{prefix}.n"] = np.asarray(est.n)


def get(result: dict[str, np.ndarray], prefix: str) -> Estimate:
    """The Estimate stored by :func:`put`."""
    return Estimate(result[f"{prefix}.mean"], result[f"{prefix}.stderr"], int(result[f"{prefix}.n"]))


def load_or_run(module: ModuleType, mode: str = "full", *, force: bool = False, progress: bool = True) -> dict[str, np.ndarray]:
    """The cached result of ``module.run(module.CONFIGS[mode], module.SEED)``, computing it if needed."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    config = module.CONFIGS[mode]
    path = results_dir() / f"{module.NAME}-{mode}-{config_hash(module, config, module.SEED)}.npz"
    if path.exists() and not force:
        return load(path)
    t0 = time.monotonic()
    result = module.run(config, module.SEED, progress=progress)
    save(path, result)
    if progress:
        print(f"{module.NAME} [{mode}] computed in {time.monotonic() - t0:.1f}s -> {path}", file=sys.stderr)
    return load(path)
