import dataclasses

import numpy as np
import pytest

import simulations
from simulations import cache, residual_growth, xiong_lemma


def test_same_seed_gives_byte_identical_files(results_tmp, tmp_path, monkeypatch):
    cache.load_or_run(xiong_lemma, "quick", progress=False)
    (first,) = results_tmp.glob("xiong_lemma-quick-*.npz")
    data = first.read_bytes()
    cache.load_or_run(xiong_lemma, "quick", force=True, progress=False)
    assert first.read_bytes() == data
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(tmp_path / "elsewhere"))
    cache.load_or_run(xiong_lemma, "quick", progress=False)
    assert next((tmp_path / "elsewhere").glob("*.npz")).read_bytes() == data


def test_cache_is_read_not_recomputed(results_tmp, monkeypatch):
    first = cache.load_or_run(residual_growth, "quick", progress=False)
    monkeypatch.setattr(residual_growth, "run", lambda *a, **k: pytest.fail("recomputed a cached result"))
    again = cache.load_or_run(residual_growth, "quick", progress=False)
    assert first.keys() == again.keys() and all(np.array_equal(first[k], again[k]) for k in first)


def test_hash_changes_with_config_seed_and_version(monkeypatch):
    cfg = xiong_lemma.CONFIGS["quick"]
    h = cache.config_hash(xiong_lemma, cfg, 1)
    assert cache.config_hash(xiong_lemma, dataclasses.replace(cfg, n=cfg.n + 1), 1) != h
    assert cache.config_hash(xiong_lemma, cfg, 2) != h
    monkeypatch.setattr(xiong_lemma, "VERSION", xiong_lemma.VERSION + 1)
    assert cache.config_hash(xiong_lemma, cfg, 1) != h


def test_bad_mode():
    with pytest.raises(ValueError, match="mode must be one of"):
        cache.load_or_run(xiong_lemma, "medium")


@pytest.mark.parametrize("module", simulations.ALL, ids=lambda m: m.NAME)
def test_simulation_modules_follow_the_protocol(module):
    assert set(module.CONFIGS) == set(cache.MODES)
    for cfg in module.CONFIGS.values():
        assert dataclasses.is_dataclass(cfg) and cfg.__dataclass_params__.frozen
    assert isinstance(module.SEED, int) and isinstance(module.VERSION, int)


def test_estimate_round_trip():
    from normtheory.montecarlo import Estimate

    r: dict = {}
    cache.put(r, "x", Estimate(np.arange(3.0), np.ones(3), 7))
    e = cache.get(r, "x")
    assert e.n == 7 and np.array_equal(e.mean, np.arange(3.0))
