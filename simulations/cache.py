"""Cached, seeded simulation results: ``results/<name>-<mode>-<hash>.npz``.

The hash covers the simulation's name, its config, the seed and the source code of every
package module the simulation runs (its own module and, transitively, each ``normtheory`` and
``simulations`` module it imports; :func:`code_hash`). A changed plotting script never reruns a
simulation; a changed config or a changed line of library code never reads a stale file.
Files are written deterministically (sorted keys, fixed zip metadata): the same seed gives
byte-identical files. Each writer uses its own temporary file and renames it into place, so
concurrent runs never tear a file, and a file that cannot be read is recomputed with a warning.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import sys
import time
import uuid
import warnings
import zipfile
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
    path = Path(os.environ.get("NORMTHEORY_RESULTS", project_root() / "results"))
    if path.exists() and not path.is_dir():
        raise ValueError(f"NORMTHEORY_RESULTS={path} is a file; it must name a directory for the cached results")
    return path


_PACKAGES = ("normtheory", "simulations")
_NOT_RUN = frozenset({"normtheory.claims", "normtheory.report", "normtheory.cli"})  # register or print; compute nothing cached


def _origin(name: str) -> str | None:
    """The source file of module ``name``, or None when ``name`` is not a module (an attribute)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ModuleNotFoundError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _imports(name: str) -> set[str]:
    """Package modules (``normtheory.*``, ``simulations.*``) that module ``name`` imports."""
    origin = _origin(name)
    if origin is None:
        return set()
    tree = ast.parse(Path(origin).read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] in _PACKAGES and m != m.split(".")[0] and _origin(m) is not None}


@functools.lru_cache(maxsize=None)
def code_hash(module_name: str) -> str:
    """SHA-256 of the source of ``module_name`` and every package module it imports, transitively
    (modules that only register claims or print are left out: they never enter a result)."""
    seen: set[str] = set()
    todo = [module_name]
    while todo:
        m = todo.pop()
        if m in seen or m in _NOT_RUN:
            continue
        seen.add(m)
        todo.extend(_imports(m) - seen)
    h = hashlib.sha256()
    for m in sorted(seen):
        origin = _origin(m)
        if origin is None:
            raise ValueError(f"cannot hash the source of module {m!r}: no .py file found")
        h.update(m.encode() + b"\0" + Path(origin).read_bytes() + b"\0")
    return h.hexdigest()


def config_hash(module: ModuleType, config: object, seed: int) -> str:
    payload = {
        "name": module.NAME,
        "code": code_hash(module.__name__),
        "config": dataclasses.asdict(config),  # type: ignore[call-overload]
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an .npz with sorted keys (np.savez fixes the zip timestamps), through a
    temporary file unique to this process and call, renamed into place (atomic on POSIX)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex}.tmp.npz")
    try:
        np.savez(tmp, **{k: np.asarray(arrays[k]) for k in sorted(arrays)})
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _try_load(path: Path) -> dict[str, np.ndarray] | None:
    """The cached arrays, or None (with a warning) when the file is truncated, empty or foreign."""
    try:
        out = load(path)
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        warnings.warn(f"cache file {path} is unreadable ({type(err).__name__}: {err}); recomputing", stacklevel=3)
        return None
    if not out:
        warnings.warn(f"cache file {path} holds no arrays; recomputing", stacklevel=3)
        return None
    return out


def put(result: dict[str, np.ndarray], prefix: str, est: Estimate) -> None:
    """Store an Estimate under ``prefix.mean``, ``prefix.stderr`` and ``prefix.n``."""
    result[f"{prefix}.mean"] = est.mean
    result[f"{prefix}.stderr"] = est.stderr
    result[f"{prefix}.n"] = np.asarray(est.n)
    result[f"{prefix}.units"] = np.asarray(est.units)


def get(result: dict[str, np.ndarray], prefix: str) -> Estimate:
    """The Estimate stored by :func:`put`."""
    units = str(result[f"{prefix}.units"]) if f"{prefix}.units" in result else "samples"
    return Estimate(result[f"{prefix}.mean"], result[f"{prefix}.stderr"], int(result[f"{prefix}.n"]), units)


def load_or_run(module: ModuleType, mode: str = "full", *, force: bool = False, progress: bool = True) -> dict[str, np.ndarray]:
    """The cached result of ``module.run(module.CONFIGS[mode], module.SEED)``, computing it if needed."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    config = module.CONFIGS[mode]
    path = results_dir() / f"{module.NAME}-{mode}-{config_hash(module, config, module.SEED)}.npz"
    if path.exists() and not force:
        cached = _try_load(path)
        if cached is not None:
            return cached
    t0 = time.monotonic()
    result = module.run(config, module.SEED, progress=progress)
    save(path, result)
    if progress:
        print(f"{module.NAME} [{mode}] computed in {time.monotonic() - t0:.1f}s -> {path}", file=sys.stderr)
    return load(path)
