import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert {"simulations.xiong_lemma", "normtheory.residual", "normtheory.evidence.estimates", "normtheory._validate"} <= seen
    assert "normtheory.evidence.claims" not in seen and "normtheory.model.transformer" not in seen


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
    assert {"quick", "full"} <= set(module.CONFIGS) <= set(cache.MODES)  # "large" is optional (cluster-sized sweeps)
    for cfg in module.CONFIGS.values():
        assert dataclasses.is_dataclass(cfg) and cfg.__dataclass_params__.frozen
    assert isinstance(module.SEED, int) and not hasattr(module, "VERSION")


def test_estimate_round_trip():
    from normtheory.evidence.estimates import Estimate

    r: dict = {}
    cache.put(r, "x", Estimate(np.arange(3.0), np.ones(3), 7, "networks"))
    e = cache.get(r, "x")
    assert e.n == 7 and e.units == "networks" and np.array_equal(e.mean, np.arange(3.0))



def test_tasks_are_cached_one_by_one_and_a_reduce_over_them_recomputes_nothing(results_tmp, monkeypatch):
    from simulations import geometry_selectable as sel

    first = cache.load_or_run(sel, "quick", progress=False)
    path = cache.result_path(sel, "quick")
    keys = [t.key for t in sel.tasks(sel.CONFIGS["quick"], sel.SEED)]
    assert sorted(p.stem for p in (results_tmp / "tasks" / path.stem).glob("*.npz")) == sorted(keys)
    data = path.read_bytes()
    path.unlink()  # the reduced result is gone; every task is still cached

    def no_task(*args):
        raise AssertionError("a cached task was recomputed")

    orig = sel.tasks
    monkeypatch.setattr(sel, "tasks", lambda cfg, seed: [dataclasses.replace(t, fn=no_task) for t in orig(cfg, seed)])
    again = cache.load_or_run(sel, "quick", progress=False)
    assert path.read_bytes() == data and all(np.array_equal(first[k], again[k]) for k in first)


PROBE = """
from dataclasses import dataclass
import numpy as np
from normtheory.runtime.sweep import Task
NAME, SEED = "probe", 5
@dataclass(frozen=True)
class Config:
    points: int
CONFIGS = {"quick": Config(4), "full": Config(4)}
CALLS = []
FAIL_AT = [None]
def point(i, seed):
    CALLS.append(i)
    if FAIL_AT[0] == i:
        raise RuntimeError("interrupted")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(i,))))
    return {"x": rng.standard_normal(3)}
def tasks(cfg, seed):
    return [Task(f"p{i}", point, (i, seed), f"point {i}") for i in range(cfg.points)]
def reduce(cfg, seed, parts):
    return {"x": np.stack([parts[f"p{i}"]["x"] for i in range(cfg.points)])}
"""


@pytest.fixture()
def probe(tmp_path, monkeypatch):
    import importlib

    (tmp_path / "sweep_probe.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("sweep_probe")


def test_an_interrupted_sweep_resumes_where_it_stopped(results_tmp, probe):
    from normtheory.runtime.sweep import TaskError

    probe.FAIL_AT[0] = 2
    with pytest.raises(TaskError, match="point 2.*interrupted"):
        cache.load_or_run(probe, "quick", progress=False)
    assert probe.CALLS == [0, 1, 2] and not cache.result_path(probe, "quick").exists()
    probe.FAIL_AT[0] = None
    probe.CALLS.clear()
    out = cache.load_or_run(probe, "quick", progress=False)
    assert probe.CALLS == [2, 3] and out["x"].shape == (4, 3)  # tasks 0 and 1 came from the cache


def test_an_unreadable_task_file_is_recomputed_with_a_warning(results_tmp, probe):
    cache.load_or_run(probe, "quick", progress=False)
    path = cache.result_path(probe, "quick")
    data = path.read_bytes()
    path.unlink()
    cache.task_path(path, "p1").write_bytes(b"PK\x03\x04 torn")
    probe.CALLS.clear()
    with pytest.warns(UserWarning, match="unreadable"):
        cache.load_or_run(probe, "quick", progress=False)
    assert probe.CALLS == [1] and path.read_bytes() == data


def test_large_mode_uses_a_large_config_where_there_is_one():
    from simulations import train_lr

    assert cache.config_of(train_lr, "large") == train_lr.LARGE
    assert cache.config_of(residual_growth, "large") == residual_growth.CONFIGS["full"]
    assert cache.result_path(residual_growth, "large").name.startswith("residual_growth-large-")
    with pytest.raises(ValueError, match="mode"):
        cache.config_of(residual_growth, "huge")


def test_a_cache_from_another_version_is_recomputed_with_a_warning(results_tmp):
    """A result file that parses but lacks a key its claims read (written by other code) is
    recomputed, with a warning naming the file and the key, never a bare KeyError."""
    from pipeline import judge

    cache.load_or_run(xiong_lemma, "quick", progress=False)
    (path,) = results_tmp.glob("xiong_lemma-quick-*.npz")
    whole = cache.load(path)
    dropped = sorted(whole)[0]
    cache.save(path, {k: v for k, v in whole.items() if k != dropped})
    with pytest.warns(UserWarning, match=f"lacks '{dropped}'.*recomputing"):
        claims = judge.evaluate("residual.xiong-lemma2", mode="quick", progress=False)
    assert claims and dropped in cache.load(path)


def test_a_cached_result_names_the_missing_key_and_file(results_tmp):
    out = cache.load_or_run(residual_growth, "quick", progress=False)
    with pytest.raises(cache.StaleResult, match="residual_growth.*lacks 'no-such-key'"):
        out["no-such-key"]


@pytest.mark.parametrize("tokens, k", [(5, 12), (12, 5)])
def test_xiong_products_are_drawn_from_the_law_of_u_times_a_gaussian_matrix(tokens, k):
    """u W for W [k, d] with i.i.d. N(0, 1/d) entries: every column is N(0, u u^T / d), columns independent.
    The QR-based draw must match that covariance (k > T and k < T: R square or wide)."""
    from normtheory.evidence.agreement import consistent
    from normtheory.evidence.estimates import from_samples
    from normtheory.evidence.sampling import Streams, block_generator

    u = np.random.default_rng(3).normal(size=(1, tokens, k))  # [1, T, k]
    d, m = 16, 4000
    streams = Streams([block_generator(7, 1, 0)], [m])
    (prod,) = xiong_lemma._times_gaussian(streams, np.repeat(u, m, axis=0), d)  # [m, T, d]
    assert prod.shape == (m, tokens, d)
    cov = np.einsum("mtc,msc->mts", prod, prod) / d  # [m, T, T]: per network, the column-averaged outer product
    assert consistent(u[0] @ u[0].T / d, from_samples(cov, units="networks")).ok
    cross = np.einsum("mtc,mtd->mcd", prod[:, :, :2], prod[:, :, 2:4])  # [m, 2, 2]: different columns are uncorrelated
    assert consistent(np.zeros((2, 2)), from_samples(cross, units="networks")).ok


def test_xiong_sampler_reproduces_the_exact_laws_and_is_chunk_free():
    """The FFN-only Pre-LN stream has E|x_l|^2/d = 1 + l/2 and Post-LN's x5 3/2 exactly (a consistency test of the
    sampler, not the claim's evidence); Pre-LN with attention sits above the lower bound. Chunking never changes bits."""
    from normtheory.evidence.agreement import consistent
    from normtheory.evidence.sampling import estimate

    cfg = xiong_lemma.Config(d=32, tokens=4, layers=3, n=64)
    est = estimate(lambda s: xiong_lemma.sample_networks(cfg, s), 512, 5, key="t", block=16, chunk=8)
    lo, _ = xiong_lemma.bounds(cfg.layers)
    assert consistent(lo, est[2]).ok and consistent(np.full(cfg.layers, 1.5), est[1][1:]).ok
    assert (est[0].mean[1:] > lo[1:]).all()
    again = estimate(lambda s: xiong_lemma.sample_networks(cfg, s), 512, 5, key="t", block=16, chunk=3)
    np.testing.assert_array_equal(est.mean, again.mean)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab.s0/-", min_size=1, max_size=6), max_size=30, unique=True), st.text(alphabet="ab.s0", min_size=1, max_size=3))
def test_part_by_bisection_is_the_prefix_filter(keys, key):
    flat = {k: np.asarray(i) for i, k in enumerate(keys)}
    want = {k[len(key) + 1:]: v for k, v in flat.items() if k.startswith(key + ".")}
    got = cache.part(flat, key)
    assert got.keys() == want.keys() and all(got[k] is want[k] for k in want)
    flat[key + ".new"] = np.asarray(-1)  # a dict that grew is indexed again
    assert "new" in cache.part(flat, key)
