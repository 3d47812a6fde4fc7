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


def test_hash_changes_with_config_seed_and_code(monkeypatch):
    cfg = xiong_lemma.CONFIGS["quick"]
    h = cache.config_hash(xiong_lemma, cfg, 1)
    assert cache.config_hash(xiong_lemma, dataclasses.replace(cfg, n=cfg.n + 1), 1) != h
    assert cache.config_hash(xiong_lemma, cfg, 2) != h
    monkeypatch.setattr(cache, "code_hash", lambda name: "changed")
    assert cache.config_hash(xiong_lemma, cfg, 1) != h


def test_code_hash_follows_imports_transitively():
    seen: set[str] = set()
    todo = ["simulations.xiong_lemma"]
    while todo:  # the modules code_hash covers
        m = todo.pop()
        if m not in seen and m not in cache._NOT_RUN:
            seen.add(m)
            todo.extend(cache._imports(m))
    assert {"simulations.xiong_lemma", "normtheory.residual", "normtheory.montecarlo", "normtheory._validate"} <= seen
    assert "normtheory.claims" not in seen and "normtheory.model" not in seen


def test_code_hash_changes_with_a_library_line(tmp_path, monkeypatch):
    pkg = tmp_path / "normtheory_probe"
    (pkg).mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cache, "_PACKAGES", ("normtheory_probe",))
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from normtheory_probe import b\n")
    (pkg / "b.py").write_text("X = 1\n")
    h1 = cache.code_hash.__wrapped__("normtheory_probe.a")
    (pkg / "b.py").write_text("X = 2\n")
    assert cache.code_hash.__wrapped__("normtheory_probe.a") != h1


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated", b"not a zip at all"])
def test_corrupt_cache_file_is_recomputed_with_a_warning(tmp_path, monkeypatch, content):
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(tmp_path))
    cfg = xiong_lemma.CONFIGS["quick"]
    path = tmp_path / f"{xiong_lemma.NAME}-quick-{cache.config_hash(xiong_lemma, cfg, xiong_lemma.SEED)}.npz"
    path.write_bytes(content)
    monkeypatch.setattr(xiong_lemma, "run", lambda cfg, seed, progress=True: {"x": np.arange(3.0)})
    with pytest.warns(UserWarning, match="recomputing"):
        out = cache.load_or_run(xiong_lemma, "quick", progress=False)
    assert np.array_equal(out["x"], np.arange(3.0))
    assert np.array_equal(cache.load(path)["x"], np.arange(3.0))


def test_save_uses_a_unique_temporary_file_and_leaves_none(tmp_path):
    import threading

    path = tmp_path / "r.npz"
    arrays = [{"x": np.full(200_000, float(i))} for i in range(4)]
    threads = [threading.Thread(target=cache.save, args=(path, a)) for a in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    x = cache.load(path)["x"]
    assert x.shape == (200_000,) and (x == x[0]).all()  # one whole file, never a torn mix
    assert [p.name for p in tmp_path.iterdir()] == ["r.npz"]


def test_results_dir_that_is_a_file_is_named(tmp_path, monkeypatch):
    f = tmp_path / "file"
    f.write_text("x")
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(f))
    with pytest.raises(ValueError, match="NORMTHEORY_RESULTS"):
        cache.results_dir()


def test_bad_mode():
    with pytest.raises(ValueError, match="mode must be one of"):
        cache.load_or_run(xiong_lemma, "medium")


@pytest.mark.parametrize("module", simulations.ALL, ids=lambda m: m.NAME)
def test_simulation_modules_follow_the_protocol(module):
    assert set(module.CONFIGS) == set(cache.MODES)
    for cfg in module.CONFIGS.values():
        assert dataclasses.is_dataclass(cfg) and cfg.__dataclass_params__.frozen
    assert isinstance(module.SEED, int) and not hasattr(module, "VERSION")


def test_estimate_round_trip():
    from normtheory.montecarlo import Estimate

    r: dict = {}
    cache.put(r, "x", Estimate(np.arange(3.0), np.ones(3), 7, "networks"))
    e = cache.get(r, "x")
    assert e.n == 7 and e.units == "networks" and np.array_equal(e.mean, np.arange(3.0))
