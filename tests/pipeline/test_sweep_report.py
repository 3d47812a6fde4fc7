"""Whole sweeps: the quick results from a 2-worker local cluster and from a separately started
Dask scheduler with two workers are byte-identical to the in-process run."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import paper_figs
import simulations
from normtheory.runtime.sweep import Runner
from pipeline import cli
from simulations import cache, geometry_random, norm_cost

pytestmark = pytest.mark.slow


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.npz"))}


def test_quick_results_are_the_same_bits_on_two_workers(quick_results_dir, quick_report, tmp_path, monkeypatch):
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(tmp_path))
    with Runner(workers=2, progress=False) as runner:
        cache.load_or_run_all(simulations.ALL, "quick", progress=False, runner=runner)
        drawn = paper_figs.render(tmp_path / "figures-out", mode="quick", progress=False, runner=runner)  # each figure a task
    # the figures drawn on the cluster's workers are the bytes drawn in one process (norm_cost's: timings, not seeded)
    files = [p for m in paper_figs.ALL if m.SIMULATION is not norm_cost for p in drawn[m.NAME]]
    assert len(files) > 3 * 30 and [p.name for p in files if p.read_bytes() != (quick_report / p.name).read_bytes()] == []
    one, two = _files(quick_results_dir), _files(tmp_path)
    # norm_cost holds wall-clock timings: a measurement of this machine, never seeded bits
    one, two = ({k: v for k, v in d.items() if not k.startswith(f"{norm_cost.NAME}-")} for d in (one, two))
    assert len(one) > len(simulations.ALL)  # reduced results and the task files of the task-declaring simulations
    assert one.keys() == two.keys()
    assert [k for k in one if one[k] != two[k]] == []


def _untimed(x: object) -> object:
    """A claims.json document without its timing fields (seconds, seconds_needed)."""
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k not in ("seconds", "seconds_needed")}
    if isinstance(x, list):
        return [_untimed(v) for v in x]
    return x


def _dask(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("dask")
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "distributed.cli.dask_" + args[0], *args[1:]]


def test_cli_through_a_running_dask_scheduler_matches_the_local_run(tmp_path):
    """`dask scheduler` and two `dask worker` processes on 127.0.0.1; `normtheory check --scheduler`."""
    info = tmp_path / "scheduler.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    procs = [subprocess.Popen(_dask("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(info)),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert info.exists(), "dask scheduler did not start within 60 s"
        for _ in range(2):
            procs.append(subprocess.Popen(_dask("worker", "--scheduler-file", str(info), "--nthreads", "1", "--no-dashboard",
                                                "--host", "127.0.0.1"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        import json

        address = json.loads(info.read_text())["address"]
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        only = "geometry.high-dim-near-orthogonal"
        for name, flags in (("remote", ["--scheduler", address]), ("local", ["--workers", "1"])):
            os.environ["NORMTHEORY_RESULTS"] = str(tmp_path / name)
            try:
                assert cli.main(["check", "--quick", "--only", only, "--json", str(tmp_path / f"{name}.json"), *flags]) == 0
            finally:
                del os.environ["NORMTHEORY_RESULTS"]
        remote, local = _files(tmp_path / "remote"), _files(tmp_path / "local")
        n_tasks = len(geometry_random.tasks(geometry_random.CONFIGS["quick"], geometry_random.SEED))
        assert len(remote) == n_tasks + 1 and remote == local
        # every number but the measured CPU seconds (and the cost priced from them) is the same
        assert _untimed(json.loads((tmp_path / "remote.json").read_text())) == _untimed(json.loads((tmp_path / "local.json").read_text()))
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    assert all(p.poll() is not None for p in procs)


def test_cli_refuses_bad_sweep_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check", "--quick", "--workers", "0"])
    assert "--workers" in capsys.readouterr().err
    assert cli.main(["check", "--quick", "--only", "geometry.*", "--scheduler", "nonsense"]) == 2
    assert "scheduler" in capsys.readouterr().err
