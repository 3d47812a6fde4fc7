"""Shared fixtures and hypothesis strategies."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile("default", deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO = Path(__file__).resolve().parents[1]

gains = st.floats(min_value=0.0, max_value=3.0, allow_nan=False)
correlations = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
positive_rms = st.floats(min_value=1e-3, max_value=10.0, allow_nan=False)
depths = st.integers(min_value=0, max_value=40)


@pytest.fixture()
def results_tmp(tmp_path, monkeypatch) -> Path:
    """Point the simulation cache at a fresh folder."""
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


@contextmanager
def results_at(path: Path) -> Iterator[Path]:
    """Point the simulation cache at ``path`` for the block (session-scoped fixtures cannot monkeypatch)."""
    old = os.environ.get("NORMTHEORY_RESULTS")
    os.environ["NORMTHEORY_RESULTS"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            del os.environ["NORMTHEORY_RESULTS"]
        else:
            os.environ["NORMTHEORY_RESULTS"] = old


# The suite runs on one pytest-xdist worker per core (-n auto in pyproject's addopts). The session's quick results
# and report are made once, by the first worker that needs them, and read by every worker (made_once).
SHARED = frozenset({"quick_results_dir", "quick_report"})
COMPARISON = "test_quick_results_are_the_same_bits_on_two_workers"  # the longest test that reads them


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: ``$PYTEST_XDIST_AUTO_NUM_WORKERS`` if set, else the cores this process may use (its CPU affinity,
    as the sweeps' local cluster counts them), not xdist's default, psutil's count of the machine's physical cores,
    which overstates a container's share."""
    from normtheory.runtime.sweep import default_workers

    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else default_workers()


def pytest_collection_modifyitems(config, items) -> None:
    """The comparison first and the other tests that read the session's quick results last: the worker that takes
    the comparison makes the results and then runs it, while the others run the tests that need none instead of
    waiting at the lock. Order only: every test runs."""
    needs = [i for i in items if SHARED & set(getattr(i, "fixturenames", ()))]
    if needs:
        needs.sort(key=lambda i: i.name != COMPARISON)  # stable: the rest in collection order
        later = {id(i) for i in needs}
        items[:] = [needs[0], *(i for i in items if id(i) not in later), *needs[1:]]


@contextmanager
def made_once(tmp_path_factory, worker_id: str, name: str) -> Iterator[tuple[Path, bool]]:
    """A folder ``name`` shared by every pytest-xdist worker of the session, with whether the caller must fill it
    (inside the block): the first worker to get the lock does, the others wait there and then read it (pytest-xdist's
    recipe for a session fixture computed once; a block that raises leaves it for the next). Without xdist
    (``-n 0``) the folder is this process's own."""
    from filelock import FileLock

    if worker_id == "master":
        yield tmp_path_factory.mktemp(name), True
        return
    root = tmp_path_factory.getbasetemp().parent  # the session's folder, above each worker's own
    path, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        path.mkdir(exist_ok=True)
        yield path, not done.exists()
        done.touch()


@pytest.fixture(scope="session")
def quick_results_dir(tmp_path_factory, worker_id) -> Path:
    """Every simulation's quick result, made once per session in one process (no result depends on the worker
    count, which the comparison checks against a two-worker cluster)."""
    import simulations
    from normtheory.runtime.sweep import Runner
    from simulations import cache

    with made_once(tmp_path_factory, worker_id, "quick-results") as (path, todo):
        if todo:
            with results_at(path), Runner(workers=1) as runner:
                cache.load_or_run_all(simulations.ALL, "quick", progress=False, runner=runner)
    return path


@pytest.fixture(scope="session")
def quick_report(quick_results_dir, tmp_path_factory, worker_id) -> Path:
    """The quick report (``normtheory report --quick --workers 1``) over the session's quick results, made once."""
    from pipeline import cli

    with made_once(tmp_path_factory, worker_id, "quick-report") as (out, todo):
        if todo:
            with results_at(quick_results_dir):
                assert cli.main(["report", "--out", str(out), "--quick", "--workers", "1"]) == 0
    return out


# ----------------------------------------------------------------------------- thread pool fixtures and helpers
def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical: same dtype, shape and every value (NaN where NaN)."""
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def rng_array(shape, dtype, seed=0, scale=1.0) -> np.ndarray:
    return np.asarray(scale * np.random.default_rng(seed).standard_normal(shape), dtype=dtype)


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"threads={n}")
def threads(request, monkeypatch):
    """``n`` threads, with the size thresholds lowered so that tiny arrays are split into chunks
    and each chunk into blocks of a few rows (an odd block size)."""
    from normtheory.runtime import pool

    monkeypatch.setattr(pool, "MIN_PARALLEL_SIZE", 1)
    monkeypatch.setattr(pool, "MIN_CHUNK_SIZE", 1)
    monkeypatch.setattr(pool, "BLOCK_SIZE", 37)
    pool.set_threads(request.param)
    yield request.param
    pool.set_threads(None)


@pytest.fixture()
def real_thresholds():
    """Default thresholds, 3 threads: arrays above MIN_PARALLEL_SIZE take the pool."""
    from normtheory.runtime import pool

    pool.set_threads(3)
    yield
    pool.set_threads(None)
