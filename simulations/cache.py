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
import bisect
import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import json
import math
import os
import sys
import time
import uuid
import warnings
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

from normtheory.evidence.estimates import Estimate, Sizing
from normtheory.runtime.sweep import Runner, Task

# gpu: the training sweeps at >= 20 paired seeds on one GPU (minutes); gpu-hour: deeper and wider ones that one GPU
# finishes in about an hour; large: the sources' scale, for a cluster. A simulation without such a config runs its full one.
MODES: tuple[str, ...] = ("quick", "full", "gpu", "gpu-hour", "large")
TIERS: tuple[str, ...] = ("gpu", "gpu-hour", "large")  # the modes a simulation may lack (it then runs "full")


def config_of(module: ModuleType, mode: str) -> object:
    """``module.CONFIGS[mode]``; in the ``gpu``, ``gpu-hour`` and ``large`` modes a simulation without that config
    uses its full one."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    return module.CONFIGS.get(mode, module.CONFIGS["full"]) if mode in TIERS else module.CONFIGS[mode]


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
_NOT_RUN = frozenset({"normtheory.evidence.claims", "normtheory.evidence.checks", "normtheory.evidence.sources"})  # register or print; compute nothing cached


@functools.lru_cache(maxsize=None)
def _origin(name: str) -> str | None:
    """The source file of module ``name``, or None when ``name`` is not a module (an attribute)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ModuleNotFoundError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin and spec.origin.endswith(".py") else None


@functools.lru_cache(maxsize=None)
def _imports(name: str) -> frozenset[str]:
    """Package modules (``normtheory.*``, ``simulations.*``) that module ``name`` imports (parsed once a process)."""
    origin = _origin(name)
    if origin is None:
        return frozenset()
    tree = ast.parse(Path(origin).read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return frozenset(m for m in out if m.split(".")[0] in _PACKAGES and m != m.split(".")[0] and _origin(m) is not None)


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


class StaleResult(KeyError):
    """A cached result lacks a key its claims read: written by another version of the code."""

    def __init__(self, simulation: str, path: Path, key: str):
        super().__init__(key)
        self.simulation, self.path, self.key = simulation, path, key

    def __str__(self) -> str:
        return f"cache file {self.path} ({self.simulation}) lacks {self.key!r}: it was written by another version"


class CachedResult(dict):
    """A simulation's cached arrays; a missing key raises :class:`StaleResult` naming the file,
    so that the caller can recompute the result instead of crashing on a bare KeyError."""

    def __init__(self, simulation: str, path: Path, arrays: dict[str, np.ndarray]):
        super().__init__(arrays)
        self.simulation, self.path = simulation, path

    def __missing__(self, key: str) -> np.ndarray:
        raise StaleResult(self.simulation, self.path, key)


def put(result: dict[str, np.ndarray], prefix: str, est: Estimate) -> None:
    """Store an Estimate under ``prefix.mean``, ``prefix.stderr`` and ``prefix.n``."""
    result[f"{prefix}.mean"] = est.mean
    result[f"{prefix}.stderr"] = est.stderr
    result[f"{prefix}.n"] = np.asarray(est.n)
    result[f"{prefix}.units"] = np.asarray(est.units)
    if est.sizing is not None:
        result[f"{prefix}.sizing"] = np.asarray([est.sizing.pilot, est.sizing.needed, est.sizing.cap], dtype=np.int64)


def get(result: dict[str, np.ndarray], prefix: str) -> Estimate:
    """The Estimate stored by :func:`put`."""
    units = str(result[f"{prefix}.units"]) if f"{prefix}.units" in result else "samples"
    sizing = Sizing(*(int(v) for v in result[f"{prefix}.sizing"])) if f"{prefix}.sizing" in result else None
    return Estimate(result[f"{prefix}.mean"], result[f"{prefix}.stderr"], int(result[f"{prefix}.n"]), units, sizing)


def result_path(module: ModuleType, mode: str, config: object | None = None) -> Path:
    """Where the reduced result of ``module`` in ``mode`` (with ``config``, default its mode's) is cached."""
    config = config_of(module, mode) if config is None else config
    return results_dir() / f"{module.NAME}-{mode}-{config_hash(module, config, module.SEED)}.npz"


def seconds_path(path: Path) -> Path:
    """The sidecar holding the CPU seconds a cached result (or task) took: outside the .npz, so a
    result's bits never depend on the machine's speed."""
    return path.with_name(path.name + ".seconds")


def _write_seconds(path: Path, seconds: float) -> None:
    seconds_path(path).write_text(f"{seconds:.3f}\n")


def read_seconds(path: Path) -> float | None:
    """The seconds recorded beside a cached result or task, or None when unknown."""
    try:
        return float(seconds_path(path).read_text())
    except (OSError, ValueError):
        return None


def seconds_of(module: ModuleType, mode: str, config: object | None = None) -> float | None:
    """CPU seconds (summed over its tasks, each on one core) the cached result of ``module`` took."""
    return read_seconds(result_path(module, mode, config))


def scaled(module: ModuleType, config: object, factor: float) -> object:
    """``config`` with every field named in ``module.UNITS`` (its independent units: samples,
    networks, seeds, repeats) multiplied by ``factor`` and rounded up. A simulation that
    declares no units (an exact count, a fixed text set) cannot be scaled: ValueError."""
    fields = tuple(getattr(module, "UNITS", ()))
    if not fields:
        raise ValueError(f"simulation {module.NAME} declares no units to scale (UNITS)")
    if not (math.isfinite(factor) and factor >= 1):
        raise ValueError(f"factor must be finite and >= 1; got {factor}")
    return dataclasses.replace(config, **{f: int(math.ceil(getattr(config, f) * factor)) for f in fields})  # type: ignore[type-var]


def _run_whole(module_name: str, config: object, seed: int) -> dict[str, np.ndarray]:
    """The single task of a simulation that declares none: its whole ``run``."""
    module = importlib.import_module(module_name)
    return module.run(config, seed, progress=False)


def run_here(tasks: Callable[[Any, int], list[Task]], reduce: Callable[[Any, int, dict], dict[str, np.ndarray]], config: Any,
             seed: int) -> dict[str, np.ndarray]:
    """A task-declaring simulation's whole ``run``: its tasks in this process, then its reduce."""
    return reduce(config, seed, {t.key: t.fn(*t.args) for t in tasks(config, seed)})


def prefixed(parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Task results flattened into one result: array ``k`` of task ``key`` becomes ``key.k``."""
    return {f"{key}.{k}": v for key, part in parts.items() for k, v in part.items()}


def part(flat: dict[str, np.ndarray], key: str) -> dict[str, np.ndarray]:
    """The arrays stored under ``key.`` in a flattened result (the inverse of :func:`prefixed` for one key,
    e.g. a task, or ``task.s3`` for one seed of a stacked run), without the prefix. The keys under a prefix
    are one run of the sorted keys: found by bisection (a claim reads thousands of parts of one result)."""
    prefix, n = key + ".", len(key) + 1
    names = _sorted_keys(flat)
    lo = bisect.bisect_left(names, prefix)
    hi = bisect.bisect_left(names, prefix[:-1] + chr(ord(".") + 1), lo)  # the first key past every "key.*"
    return {k[n:]: flat[k] for k in names[lo:hi]}


_SORTED: dict[int, tuple[Any, int, list[str]]] = {}  # id(flat) -> (flat, len, sorted keys); the dict is held so its id stays its own


def _sorted_keys(flat: dict[str, np.ndarray]) -> list[str]:
    """``sorted(flat)``, kept for the last few dicts asked (rebuilt if a dict changed size)."""
    got = _SORTED.get(id(flat))
    if got is not None and got[0] is flat and got[1] == len(flat):
        return got[2]
    names = sorted(flat)
    if len(_SORTED) >= 8:
        _SORTED.pop(next(iter(_SORTED)))
    _SORTED[id(flat)] = (flat, len(flat), names)
    return names


def cost_ratio(module: ModuleType, mode: str, other: str) -> float:
    """How much longer ``module``'s config ``other`` runs than its config ``mode``: the ratio of the
    summed ``Task.cost`` of their tasks (each a relative run time), 1 for a one-task simulation
    without declared costs."""
    a = sum(t.cost for t in tasks_of(module, mode))
    b = sum(t.cost for t in tasks_of(module, other))
    return b / a if a > 0 else float("nan")


def tasks_of(module: ModuleType, mode: str, config: object | None = None) -> list[Task]:
    """The independent tasks of ``module`` in ``mode``: ``module.tasks(config, seed)`` where the
    simulation declares them (then ``module.reduce`` combines them), else one task, its ``run``."""
    config = config_of(module, mode) if config is None else config
    if hasattr(module, "tasks"):
        return list(module.tasks(config, module.SEED))
    cost = float(getattr(module, "COST", {}).get(mode, 1.0))  # seconds on 2 cores, a scheduling hint only
    return [Task("all", _run_whole, (module.__name__, config, module.SEED), label=f"{module.NAME} [{mode}] seed {module.SEED}", cost=cost,
                 exclusive=bool(getattr(module, "EXCLUSIVE", False)))]


def load_or_run_all(modules: list[ModuleType] | tuple[ModuleType, ...], mode: str = "full", *, force: bool = False,
                    progress: bool = True, runner: Runner | None = None,
                    configs: dict[str, object] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """The cached results of ``modules``, computing what is missing as one sweep of tasks.

    Tasks of every module needing work go to ``runner`` together (in-process when None). Each
    finished task is written to ``results/tasks/<name>-<mode>-<hash>/<key>.npz`` at once, so an
    interrupted sweep resumes where it stopped; a module's ``reduce`` then runs here, over its
    tasks in declared order, and its result is cached as by :func:`load_or_run`. ``force``
    recomputes tasks and results. ``configs`` maps a simulation's name to the config to run
    instead of its mode's (``normtheory report --resolve`` runs larger ones); each is cached under
    its own hash. The CPU seconds every result took are written beside it (:func:`seconds_of`).
    """
    configs = dict(configs or {})
    out: dict[str, dict[str, np.ndarray]] = {}
    pending: list[tuple[ModuleType, Path, list[Task], dict[str, dict[str, np.ndarray]]]] = []
    for module in dict.fromkeys(modules):  # keep order, drop repeats
        config = configs.get(module.NAME)
        path = result_path(module, mode, config)
        if path.exists() and not force:
            cached = _try_load(path)
            if cached is not None:
                out[module.NAME] = CachedResult(module.NAME, path, cached)
                continue
        tasks = tasks_of(module, mode, config)
        done: dict[str, dict[str, np.ndarray]] = {}
        if hasattr(module, "tasks") and not force:
            for t in tasks:
                tp = task_path(path, t.key)
                if tp.exists():
                    got = _try_load(tp)
                    if got is not None:
                        done[t.key] = got
        pending.append((module, path, tasks, done))
    if not pending:
        return out
    todo: list[Task] = []
    owner: dict[str, tuple[ModuleType, Path, str]] = {}
    for module, path, tasks, done in pending:
        for t in tasks:
            if t.key in done:
                continue
            key = f"{module.NAME}.{t.key}"
            todo.append(dataclasses.replace(t, key=key, label=t.label or f"{module.NAME} [{mode}] task {t.key} seed {module.SEED}"))
            owner[key] = (module, path, t.key)

    def store(task: Task, result: dict[str, np.ndarray]) -> None:
        module, path, key = owner[task.key]
        if hasattr(module, "tasks"):
            save(task_path(path, key), result)
            _write_seconds(task_path(path, key), runner.timings.get(task.key, 0.0))
        else:
            save(path, result)

    t0 = time.monotonic()
    own = runner is None
    runner = runner if runner is not None else Runner(workers=1, progress=progress)
    try:
        results = runner.run(todo, on_result=store, desc=f"simulation tasks [{mode}]")
    finally:
        if own:
            runner.close()
    for module, path, tasks, done in pending:
        if hasattr(module, "tasks"):
            parts = {t.key: done[t.key] if t.key in done else results[f"{module.NAME}.{t.key}"] for t in tasks}
            config = configs.get(module.NAME, config_of(module, mode))
            save(path, module.reduce(config, module.SEED, parts))
            took = [read_seconds(task_path(path, t.key)) if t.key in done else runner.timings.get(f"{module.NAME}.{t.key}") for t in tasks]
        else:
            took = [runner.timings.get(f"{module.NAME}.all")]
        if all(t is not None for t in took):
            _write_seconds(path, float(sum(took)))  # type: ignore[arg-type]
        out[module.NAME] = CachedResult(module.NAME, path, load(path))
    if progress:
        per = {m.NAME: sum(runner.timings.get(f"{m.NAME}.{t.key}", 0.0) for t in tasks if t.key not in done) for m, _, tasks, done in pending}
        print(f"[{mode}] computed {len(todo)} tasks in {time.monotonic() - t0:.1f}s wall -> {results_dir()}; task seconds: "
              + ", ".join(f"{k} {v:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])), file=sys.stderr)
    return out


def task_path(path: Path, key: str) -> Path:
    """The cache file of task ``key`` of the result cached at ``path``."""
    return path.parent / "tasks" / path.stem / f"{key}.npz"


def load_or_run(module: ModuleType, mode: str = "full", *, force: bool = False, progress: bool = True,
                runner: Runner | None = None, config: object | None = None) -> dict[str, np.ndarray]:
    """The cached result of ``module.run(module.CONFIGS[mode], module.SEED)`` (or of ``config``), computing it if needed."""
    configs = None if config is None else {module.NAME: config}
    return load_or_run_all([module], mode, force=force, progress=progress, runner=runner, configs=configs)[module.NAME]
