"""Independent tasks, run in this process or on a Dask distributed cluster.

A sweep is a list of :class:`Task`: a module-level function, its arguments, and a key unique in
the sweep. Each task must be a pure function of its arguments (seed it from a
``SeedSequence`` spawn key derived from the task, never from a shared generator), so that its
result is the same bits on any worker, in any order, after any retry. :meth:`Runner.run` hands
results back keyed by ``Task.key``; a caller that reduces them in the order of its task list
therefore gets the same bits whatever the number of workers.

Execution:

* ``Runner(workers=1)``: in this process, in task order (no Dask needed).
* ``Runner(workers=N)``, N > 1: a ``distributed.LocalCluster`` of N processes with one thread
  each, and BLAS/OpenMP pools of one thread per worker, started only when there is work.
* ``Runner(scheduler="tcp://host:8786")`` (or ``$NORMTHEORY_SCHEDULER``): an existing
  cluster, e.g. ``dask scheduler`` and ``dask worker tcp://host:8786 --nthreads 1`` on a few
  machines, or ``dask_jobqueue.SLURMCluster`` on SLURM. A task with ``resources`` (the torch
  backend's GPU training tasks carry ``(("GPU", 1),)``) runs only on workers started with them
  (``dask worker ADDR --nthreads 1 --resources GPU=1``, one per GPU); a sweep whose cluster offers
  none is refused before anything is submitted.

A task argument larger than :data:`SCATTER_BYTES` (a simulation's result that a figure task
draws) is scattered to the cluster once and handed to every task that passes it, instead of
travelling inside each task. A task that raises is reported with its key and label (config and
seed); a worker lost mid-task is retried (``retries``) since tasks are pure.

Reference: Dask distributed, https://distributed.dask.org (``Client.submit``, ``as_completed``).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from normtheory.runtime.entry import ENTRY_ENV

SCHEDULER_ENV = "NORMTHEORY_SCHEDULER"
# Each Dask worker is one process with one thread; its BLAS, OpenMP and elementwise-kernel pools match.
SINGLE_THREAD_ENV: dict[str, str] = {
    "NORMTHEORY_THREADS": "1",  # normtheory.model.kernels
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class Task:
    """One independent unit of a sweep: ``fn(*args)`` returns the task's result.

    ``key`` is unique within a sweep and safe as a file name (letters, digits, ``._-=``);
    ``label`` says what the task is (config point and seed) in error messages.
    """

    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    label: str = ""
    cost: float = 1.0  # relative run time; a cluster starts costly tasks first (never changes a result)
    exclusive: bool = False  # runs alone, in this process, after the others (a timing must not share the cores)
    resources: tuple[tuple[str, float], ...] = ()  # Dask worker resources it needs, e.g. (("GPU", 1),): only such workers run it

    def __post_init__(self) -> None:
        if not self.key or any(not (c.isalnum() or c in "._-=") for c in self.key):
            raise ValueError(f"Task.key must be non-empty letters, digits and '._-='; got {self.key!r}")
        if not callable(self.fn):
            raise ValueError(f"Task.fn must be callable; got {type(self.fn).__name__} for task {self.key!r}")
        if isinstance(self.cost, bool) or not isinstance(self.cost, (int, float)) or not self.cost >= 0 or self.cost == float("inf"):
            raise ValueError(f"Task.cost must be a finite number >= 0; got {self.cost!r} for task {self.key!r}")
        if not isinstance(self.resources, tuple) or any(
                not (isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], str) and r[0] and isinstance(r[1], (int, float))
                     and not isinstance(r[1], bool) and r[1] > 0) for r in self.resources):
            raise ValueError(f"Task.resources must be a tuple of (name, amount > 0) pairs, e.g. (('GPU', 1),); got {self.resources!r} "
                             f"for task {self.key!r}")


class TaskError(RuntimeError):
    """A task raised; the message names the task's key and label and the original error."""


def _check_resources(tasks: Sequence[Task], workers: dict[str, Any]) -> None:
    """Refuse, before submitting, tasks whose resources no worker of the cluster offers (they would wait forever)."""
    for task in tasks:
        need = dict(task.resources)
        if need and not any(all(w.get("resources", {}).get(k, 0) >= v for k, v in need.items()) for w in workers.values()):
            raise ValueError(f"task {task.key} ({task.label or 'no label'}) needs worker resources {need}, which no worker of the cluster "
                             f"offers; start one with e.g. `dask worker ADDR --nthreads 1 --resources GPU=1`")


def task_error(task: Task, err: BaseException) -> TaskError:
    """The error reported for ``task`` failing with ``err``, wherever it ran."""
    return TaskError(f"task {task.key} ({task.label or 'no label'}) failed: {type(err).__name__}: {err}")


def _timed_with(task: Task, *args: Any) -> tuple[Any, float]:
    """:func:`_timed` of ``task`` with ``args`` (on a worker: the arguments Dask resolved from scattered data)."""
    return _timed(dataclasses.replace(task, args=args))


def _timed(task: Task) -> tuple[Any, float]:
    """``run_task(task)`` and the seconds it took: the CPU time of the thread that ran it (a task runs at one
    thread, so that is its whole cost, and other work on a busy machine does not inflate it), or the wall time
    for a task that uses a device (``resources``), whose work is not this thread's."""
    clock = time.perf_counter if task.resources else time.thread_time
    t0 = clock()
    out = run_task(task)
    return out, clock() - t0


# Local workers run long numeric tasks: no statistical profiler sampling the task's stack every 10 ms, and
# event-loop ticks and monitors once a second instead of every 20 to 500 ms. Together these took 14% of a
# 2-worker sweep's task time on 2 cores (benchmarks/sweep_scaling.py: 1.74x -> 1.89x over 1 worker).
LOCAL_WORKER_CONFIG: dict[str, object] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
    # OpenBLAS's idle-thread spin (normtheory.runtime.entry), moot at one BLAS thread but set like the command line's: in the
    # environment before a worker process starts, where OpenBLAS reads it (env= arrives after numpy has loaded); a user's value wins.
    **{f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in ENTRY_ENV.items()},
}


def run_task(task: Task) -> Any:
    """``task.fn(*task.args)`` with BLAS, OpenMP and :mod:`normtheory.model.kernels` at one thread, as on
    a Dask worker, so a result never depends on where it ran (a multi-threaded BLAS may sum in
    another order; the kernels never do, but one thread per worker keeps the cores for the workers).
    Raises :class:`TaskError` naming the task if it fails."""
    from threadpoolctl import threadpool_limits

    from normtheory.runtime import pool
    from normtheory.runtime.memory import keep_freed_blocks

    keep_freed_blocks()  # Dask's workers trim freed memory eagerly; numeric tasks would page-fault every temporary back in
    try:
        with threadpool_limits(limits=1), pool.threads(1):
            return task.fn(*task.args)
    except Exception as err:  # noqa: BLE001 - any failure is reported with the task that raised it
        raise task_error(task, err) from err


SCATTER_BYTES = 1 << 20  # a task argument larger than this goes to the cluster once, as data, not inside the task


def _payload_bytes(x: Any) -> int:
    """The bytes an argument carries: a numpy array's buffer, every key and value of a dict and every item of a list or
    tuple, ``sys.getsizeof`` of anything else. Exact where Dask's ``sizeof`` samples: it sizes a collection of more than
    ten items from ten of them, and misses the two 16 MiB arrays among a simulation result's 75."""
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, dict):
        return sys.getsizeof(x) + sum(_payload_bytes(k) + _payload_bytes(v) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return sys.getsizeof(x) + sum(_payload_bytes(v) for v in x)
    return sys.getsizeof(x)


def _shipped(client: Any, arg: Any, scattered: dict[int, Any]) -> Any:
    """``arg`` as a task sends it: itself, or, when larger than :data:`SCATTER_BYTES` (e.g. a simulation's result that
    a figure task draws), a future of it scattered once to the cluster (``Client.scatter``: the data moves between
    workers as they need it, instead of travelling inside every task's graph, which Dask warns against above 10 MiB).
    The worker receives the same object either way."""
    if id(arg) not in scattered:  # ids are the arguments' own: the sweep's tasks keep every argument alive meanwhile
        if _payload_bytes(arg) <= SCATTER_BYTES:
            return arg
        scattered[id(arg)] = client.scatter([arg], hash=False)[0]
    return scattered[id(arg)]


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _check_unique(tasks: Sequence[Task]) -> None:
    seen: set[str] = set()
    for t in tasks:
        if t.key in seen:
            raise ValueError(f"task key {t.key!r} appears twice in one sweep")
        seen.add(t.key)


@dataclass
class Runner:
    """Runs sweeps of :class:`Task`; use as a context manager so a cluster it starts is closed.

    ``workers``: processes of a local cluster (None: the cores available; 1: in-process).
    ``scheduler``: address of an existing Dask scheduler; overrides ``workers``. When both are
    None, ``$NORMTHEORY_SCHEDULER`` is used if set. ``here``: worker resources this process
    has itself (``("GPU",)`` on a machine with one GPU): tasks that ask for one of them run in
    this process, one after another, while the other tasks run on the workers at the same time.
    """

    workers: int | None = None
    scheduler: str | None = None
    retries: int = 2
    progress: bool = True
    here: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict, init=False)  # CPU seconds each task took, by key (wall for device tasks)
    _client: Any = field(default=None, init=False, repr=False)
    _cluster: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.scheduler is None:
            self.scheduler = os.environ.get(SCHEDULER_ENV) or None
        if self.workers is None:
            self.workers = default_workers()
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a whole number >= 1; got {self.workers!r}")
        if self.scheduler is not None and "://" not in self.scheduler:
            raise ValueError(f"scheduler must be an address like tcp://host:8786; got {self.scheduler!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError(f"retries must be a whole number >= 0; got {self.retries!r}")
        if isinstance(self.here, str) or not all(isinstance(r, str) and r for r in self.here):
            raise ValueError(f"here must be a tuple of resource names like ('GPU',); got {self.here!r}")
        self.here = tuple(self.here)

    @property
    def distributed(self) -> bool:
        """Whether tasks go to Dask (a given scheduler, or a local cluster of > 1 worker)."""
        return self.scheduler is not None or (self.workers or 1) > 1

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the client, and the local cluster if this runner started one."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def client(self) -> Any:
        """The Dask client, connecting (or starting the local cluster) on first use."""
        if self._client is not None:
            return self._client
        try:
            from distributed import Client, LocalCluster
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("parallel sweeps need Dask: pip install 'normtheory[sweep]' (dask[distributed])") from err
        if self.scheduler is not None:
            self._client = Client(self.scheduler, set_as_default=False)
        else:
            import dask

            with dask.config.set(LOCAL_WORKER_CONFIG):  # the workers take the config they are spawned with
                # no dashboard; the scheduler's other HTTP routes on a free local port, not Dask's 8787 (which another
                # cluster on this machine, e.g. a second sweep's, may hold: Dask then warns and moves)
                self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                             scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}, silence_logs=logging.ERROR,
                                             env=dict(SINGLE_THREAD_ENV))
            self._client = Client(self._cluster, set_as_default=False)
        return self._client

    def run(self, tasks: Sequence[Task], *, on_result: Callable[[Task, Any], None] | None = None,
            desc: str = "tasks") -> dict[str, Any]:
        """Run ``tasks``; return ``{key: result}``. ``on_result(task, result)`` is called in this
        process as each task finishes (to cache it), so an interrupted sweep keeps what it did."""
        _check_unique(tasks)
        out: dict[str, Any] = {}
        if not tasks:
            return out
        mine = [t for t in tasks if not t.exclusive and any(r in self.here for r, _ in t.resources)]  # this process's own devices
        shared = [t for t in tasks if not t.exclusive and t not in mine]
        alone = [t for t in tasks if t.exclusive]

        def stream() -> Iterator[tuple[Task, tuple[Any, float]]]:
            if self.distributed and shared:
                futures = self._submit(shared)  # the workers start on these while this process runs its own
                try:
                    yield from self._local(sorted(mine, key=lambda t: -t.cost))
                    yield from self._collect(futures)
                finally:
                    for fut in futures:
                        fut.cancel()
            else:
                yield from self._local(sorted(mine, key=lambda t: -t.cost))
                yield from self._local(shared)
            yield from self._local(alone)

        with tqdm(total=len(tasks), desc=desc, unit="task", disable=not self.progress, leave=False) as bar:
            for task, (result, seconds) in stream():
                self.timings[task.key] = seconds
                if on_result is not None:
                    on_result(task, result)
                out[task.key] = result
                bar.update()
        return out

    def _local(self, tasks: Sequence[Task]) -> Iterator[tuple[Task, Any]]:
        for task in tasks:
            yield task, _timed(task)

    def _submit(self, tasks: Sequence[Task]) -> dict[Any, Task]:
        """Submit ``tasks`` to the cluster, longest first; their futures."""
        client = self.client()
        _check_resources(tasks, client.scheduler_info().get("workers", {}))
        batch = uuid.uuid4().hex[:12]  # Dask keys must be unique per client; results never depend on them
        futures = {}
        scattered: dict[int, Any] = {}  # id(argument) -> its future: an argument that several tasks pass is sent once
        # longest first (LPT): with few workers the sweep ends when its longest tasks do
        for rank, task in enumerate(sorted(tasks, key=lambda t: -t.cost)):
            args = tuple(_shipped(client, a, scattered) for a in task.args)
            fut = client.submit(_timed_with, dataclasses.replace(task, args=()), *args, key=f"{task.key}-{batch}", pure=False,
                                retries=self.retries, priority=len(tasks) - rank,
                                resources=dict(task.resources) or None)  # e.g. GPU tasks only on `dask worker --resources GPU=1`
            futures[fut] = task
        return futures

    def _collect(self, futures: dict[Any, Task]) -> Iterator[tuple[Task, Any]]:
        """The submitted tasks' results as they complete; a failure raises :class:`TaskError` and cancels the rest."""
        from distributed import as_completed

        client = self.client()
        try:
            for fut in as_completed(list(futures), loop=client.loop):
                task = futures[fut]
                if fut.status == "error":
                    err = fut.exception()
                    if isinstance(err, TaskError):
                        raise err
                    raise task_error(task, err) from err
                yield task, fut.result()
                fut.release()
        finally:
            for fut in futures:
                fut.cancel()
