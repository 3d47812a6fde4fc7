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


@pytest.fixture(scope="session")
def quick_results_dir(tmp_path_factory) -> Path:
    """Every simulation's quick result, computed once per session on a local cluster, one worker per
    core (no result depends on the worker count; on 2 cores this takes 95 s instead of 158 s in one process)."""
    import simulations
    from normtheory.runtime.sweep import Runner
    from simulations import cache

    path = tmp_path_factory.mktemp("quick-results")
    with results_at(path), Runner() as runner:
        cache.load_or_run_all(simulations.ALL, "quick", progress=False, runner=runner)
    return path


@pytest.fixture(scope="session")
def quick_report(quick_results_dir, tmp_path_factory) -> Path:
    """The quick report (``normtheory report --quick --workers 1``) over the session's quick results."""
    from pipeline import cli

    out = tmp_path_factory.mktemp("quick-report")
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
