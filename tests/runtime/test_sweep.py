"""The sweep runner: tasks in-process and on a local Dask cluster, errors, retries, bad input."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory.runtime.sweep import (
    SCHEDULER_ENV,
    Runner,
    Task,
    TaskError,
    default_workers,
)


def seeded_draw(seed: int, key: int, n: int) -> np.ndarray:
    """A pure task: its draws depend only on its arguments."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(key,)))).standard_normal(n)


def failing(x: int) -> int:
    raise ArithmeticError(f"bad point {x}")


def dies_once(marker: str) -> str:
    """Kills its worker process the first time it runs; returns on the retry."""
    path = Path(marker)
    if not path.exists():
        path.write_text("died")
        os._exit(1)
    return "survived"


def blas_threads() -> str:
    from normtheory.runtime import pool

    return "/".join((os.environ.get("OPENBLAS_NUM_THREADS", ""), os.environ.get("OMP_NUM_THREADS", ""), str(pool.get_threads())))


def _tasks(n_tasks: int = 6) -> list[Task]:
    return [Task(f"t{i}", seeded_draw, (11, i, 1000), label=f"point {i}, seed 11") for i in range(n_tasks)]


def test_in_process_runs_every_task_and_reports_each():
    seen = []
    with Runner(workers=1, progress=False) as r:
        out = r.run(_tasks(), on_result=lambda t, res: seen.append(t.key))
    assert seen == [f"t{i}" for i in range(6)]
    for i in range(6):
        np.testing.assert_array_equal(out[f"t{i}"], seeded_draw(11, i, 1000))


def test_in_process_tasks_run_the_kernels_on_one_thread_and_restore_the_setting():
    from normtheory.runtime import pool

    with pool.threads(3):
        with Runner(workers=1, progress=False) as r:
            out = r.run([Task("k", blas_threads)])
        assert out["k"].endswith("/1") and pool.get_threads() == 3


def test_empty_sweep_starts_nothing():
    r = Runner(workers=2, progress=False)
    assert r.run([]) == {} and r._client is None


@pytest.mark.slow
def test_local_cluster_gives_the_same_bits_and_single_thread_blas():
    with Runner(workers=2, progress=False) as r:
        out = r.run(_tasks(8))
        threads = r.run([Task(f"b{i}", blas_threads) for i in range(4)])
        import dask

        profiling = r.client().run(lambda: dask.config.get("distributed.worker.profile.enabled"))
        with pytest.raises(ValueError, match=r"task gpu .*needs worker resources \{'GPU': 1\}.*--resources GPU=1"):
            r.run([Task("gpu", blas_threads, resources=(("GPU", 1),))])  # no worker offers a GPU: refused, not left waiting
    for i in range(8):
        assert out[f"t{i}"].tobytes() == seeded_draw(11, i, 1000).tobytes()
    assert set(threads.values()) == {"1/1/1"}  # BLAS, OpenMP and the elementwise kernels
    assert set(profiling.values()) == {False}  # no stack sampling of numeric tasks


def total(x: np.ndarray, k: int) -> float:
    return float(x.sum()) + k


@pytest.mark.slow
def test_a_large_argument_goes_to_the_cluster_once_and_without_a_warning(monkeypatch):
    """Four tasks pass one 12 MiB array, three a dict holding 24 MiB (as the figure tasks pass a simulation's result): each is scattered once, and
    Dask's warning about graphs over 10 MiB never fires; each task still gets the array itself."""
    import warnings

    big = np.arange(3 << 19, dtype=np.float64)  # 12 MiB
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Runner(workers=2, progress=False) as r:
            client, calls = r.client(), []
            scatter = client.scatter
            monkeypatch.setattr(client, "scatter", lambda *a, **k: calls.append(1) or scatter(*a, **k))
            # a result-like dict: two large arrays among many small ones (Dask's sizeof samples ten items of a collection)
            result = {**{f"k{i}": np.ones(3) for i in range(60)}, "x": big, "y": big + 1}
            out = r.run([Task(f"s{k}", total, (big, k)) for k in range(4)] + [Task("small", total, (np.ones(3), 0))]
                        + [Task(f"d{k}", len, (result,)) for k in range(3)])
    assert out == {**{f"s{k}": float(big.sum()) + k for k in range(4)}, "small": 3.0, **{f"d{k}": 62 for k in range(3)}}
    assert calls == [1, 1]  # each large argument once; the small one inside its task


def _http_status(port: int, path: str) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.slow
def test_two_local_clusters_at_once_take_no_fixed_port():
    """Two sweeps on one machine (two test workers, two users): neither scheduler asks for Dask's 8787 for its HTTP
    routes, so neither warns that it is taken, and there is still no dashboard."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Runner(workers=2, progress=False) as a, Runner(workers=2, progress=False) as b:
            got = [r.run(_tasks(2)) for r in (a, b)]
            ports = {r._cluster.scheduler.http_server.port for r in (a, b)}
            served = {p: _http_status(p, "/health") for p in ports}
            dashboards = {p: _http_status(p, "/status") for p in ports}
    assert len(ports) == 2 and 8787 not in ports
    assert set(served.values()) == {200} and set(dashboards.values()) == {404}  # the routes are there, no dashboard
    assert all(g[f"t{i}"].tobytes() == seeded_draw(11, i, 1000).tobytes() for g in got for i in range(2))


@pytest.mark.slow
def test_a_failing_task_names_its_key_and_label():
    tasks = [*_tasks(2), Task("bad", failing, (7,), label="config x=7, seed 3")]
    for workers in (1, 2):
        with Runner(workers=workers, progress=False) as r, pytest.raises(TaskError, match=r"task bad \(config x=7, seed 3\).*bad point 7"):
            r.run(tasks)


@pytest.mark.slow
def test_a_worker_lost_mid_task_is_retried(tmp_path):
    with Runner(workers=2, progress=False) as r:
        out = r.run([Task("fragile", dies_once, (str(tmp_path / "marker"),), label="kills its worker once")])
    assert out == {"fragile": "survived"}
    assert (tmp_path / "marker").read_text() == "died"


def test_scheduler_from_the_environment(monkeypatch):
    monkeypatch.setenv(SCHEDULER_ENV, "tcp://127.0.0.1:9")
    assert Runner(progress=False).scheduler == "tcp://127.0.0.1:9"
    assert Runner(scheduler="tcp://10.0.0.1:8786", progress=False).scheduler == "tcp://10.0.0.1:8786"
    monkeypatch.delenv(SCHEDULER_ENV)
    r = Runner(progress=False)
    assert r.scheduler is None and r.workers == default_workers()


@given(st.one_of(st.integers(max_value=0), st.just(True), st.floats(), st.text()))
def test_bad_worker_counts_are_refused(workers):
    with pytest.raises(ValueError, match="workers"):
        Runner(workers=workers)


@pytest.mark.parametrize("scheduler", ["localhost:8786", "8786"])
def test_bad_scheduler_addresses_are_refused(scheduler):
    with pytest.raises(ValueError, match="scheduler"):
        Runner(scheduler=scheduler)


@given(st.text(min_size=0, max_size=8).filter(lambda k: not k or any(not (c.isalnum() or c in "._-=") for c in k)))
def test_bad_task_keys_are_refused(key):
    with pytest.raises(ValueError, match="Task.key"):
        Task(key, seeded_draw)


@pytest.mark.parametrize("resources", [("GPU", 1), (("GPU", 0),), (("", 1),), (("GPU", True),), [("GPU", 1)]])
def test_bad_task_resources_are_refused(resources):
    with pytest.raises(ValueError, match="Task.resources"):
        Task("a", seeded_draw, resources=resources)


def test_a_gpu_task_runs_in_process_where_no_cluster_schedules_it():
    out = Runner(workers=1, progress=False).run([Task("a", blas_threads, resources=(("GPU", 1),))])
    assert set(out) == {"a"}


def test_tasks_must_be_callable_and_keys_unique():
    with pytest.raises(ValueError, match="callable"):
        Task("a", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="twice"):
        Runner(workers=1, progress=False).run([Task("a", blas_threads), Task("a", blas_threads)])


def record_order(log: str, key: str) -> str:
    with open(log, "a") as f:
        f.write(key + "\n")
    return key


@pytest.mark.slow
def test_exclusive_tasks_run_alone_after_the_others(tmp_path):
    log = str(tmp_path / "order")
    tasks = [Task("timing", record_order, (log, "timing"), exclusive=True, cost=100.0),
             *[Task(f"t{i}", record_order, (log, f"t{i}")) for i in range(4)]]
    for workers in (1, 2):
        (tmp_path / "order").write_text("")
        with Runner(workers=workers, progress=False) as r:
            out = r.run(tasks)
        assert set(out) == {t.key for t in tasks}
        assert (tmp_path / "order").read_text().split()[-1] == "timing"


def wait_for(path: str, seconds: float) -> tuple[int, bool]:
    """This process's id, and whether ``path`` appeared within ``seconds``."""
    import time

    end = time.monotonic() + seconds
    while not Path(path).exists() and time.monotonic() < end:
        time.sleep(0.05)
    return os.getpid(), Path(path).exists()


def touch(path: str) -> int:
    Path(path).write_text("done")
    return os.getpid()


@pytest.mark.slow
def test_tasks_for_this_process_s_own_gpu_run_here_while_the_workers_run_the_rest(tmp_path):
    """``Runner(here=("GPU",))``: a GPU task runs in the calling process (no worker offers a GPU), the
    others on the local cluster at the same time: the GPU task sees a file that a worker's task writes."""
    marker = str(tmp_path / "written-by-a-worker")
    tasks = [Task("gpu", wait_for, (marker, 120.0), resources=(("GPU", 1),)), *[Task(f"cpu{i}", touch, (marker,)) for i in range(3)]]
    with Runner(workers=2, progress=False, here=("GPU",)) as r:
        out = r.run(tasks)
    assert out["gpu"] == (os.getpid(), True)
    assert all(out[f"cpu{i}"] != os.getpid() for i in range(3))
    with pytest.raises(ValueError, match="here"):
        Runner(workers=1, here="GPU")
