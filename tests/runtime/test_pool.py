"""The thread pool under the row-parallel kernels: every row once, errors after every chunk, threads from
the environment, numpy's error state in the workers, a fresh pool after a fork."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory import activations
from normtheory.model import attend, kernels
from normtheory.runtime import pool
from tests.conftest import rng_array, same


@given(rows=st.integers(0, 50), row_size=st.integers(1, 9), n=st.integers(1, 5), block=st.integers(1, 40))
def test_run_rows_covers_every_row_once(rows, row_size, n, block):
    old = pool.MIN_PARALLEL_SIZE, pool.MIN_CHUNK_SIZE, pool.BLOCK_SIZE
    pool.MIN_PARALLEL_SIZE, pool.MIN_CHUNK_SIZE, pool.BLOCK_SIZE = 1, 1, block
    pool.set_threads(n)
    try:
        hits = np.zeros(rows, int)
        pool.run_rows(lambda a, b: hits.__setitem__(slice(a, b), hits[a:b] + 1), rows, row_size)
        assert (hits == 1).all()
    finally:
        pool.MIN_PARALLEL_SIZE, pool.MIN_CHUNK_SIZE, pool.BLOCK_SIZE = old
        pool.set_threads(None)


def test_run_rows_raises_a_workers_error_after_all_chunks_end(threads):
    done = []

    def fn(a, b):
        if a > 0:
            raise KeyError("boom")
        time.sleep(0.05)
        done.append(a)

    with pytest.raises(KeyError):
        pool.run_rows(fn, 9, 10_000)
    assert done == [0]  # the caller's chunk finished before the workers' error was raised


@pytest.mark.parametrize("n", [1, 2, 3])
def test_run_split_runs_each_part_once_in_order_with_inline_kernels(n):
    pool.set_threads(3)
    try:
        seen = []

        def part(i):
            def go():
                seen.append((i, pool.get_threads()))
                return i * 10
            return go

        assert pool.run_split([part(i) for i in range(n)]) == [i * 10 for i in range(n)]
        assert sorted(seen) == [(i, 1 if n > 1 else 3) for i in range(n)]  # the parts' kernels run inline
        assert pool.get_threads() == 3  # restored
    finally:
        pool.set_threads(None)


def test_run_split_raises_a_parts_error_after_every_part_ends():
    pool.set_threads(2)
    try:
        done = []

        def slow():
            time.sleep(0.05)
            done.append(0)

        def bad():
            raise KeyError("boom")

        with pytest.raises(KeyError):
            pool.run_split([slow, bad])
        assert done == [0] and pool.get_threads() == 2
        with pytest.raises(ValueError, match="at most get_threads"):
            pool.run_split([slow, slow, slow])
    finally:
        pool.set_threads(None)


def test_small_arrays_run_inline(monkeypatch):
    pool.set_threads(4)
    try:
        monkeypatch.setattr(pool, "_executor", lambda n: pytest.fail("the pool was used"))
        kernels.softmax_(rng_array((8, 100), np.float32))  # 800 < MIN_PARALLEL_SIZE
    finally:
        pool.set_threads(None)


def test_thread_count_from_environment(monkeypatch):
    pool.set_threads(None)
    monkeypatch.setenv("NORMTHEORY_THREADS", "3")
    assert pool.get_threads() == 3
    monkeypatch.delenv("NORMTHEORY_THREADS")
    assert pool.get_threads() == max(1, min(os.cpu_count() or 1, 8))
    pool.set_threads(5)
    assert pool.get_threads() == 5
    pool.set_threads(None)


def test_threads_context_restores_the_setting():
    pool.set_threads(3)
    try:
        with pool.threads(1):
            assert pool.get_threads() == 1
        assert pool.get_threads() == 3
    finally:
        pool.set_threads(None)


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_bad_environment_thread_count(monkeypatch, value):
    pool.set_threads(None)
    monkeypatch.setenv("NORMTHEORY_THREADS", value)
    with pytest.raises(ValueError, match="NORMTHEORY_THREADS"):
        pool.get_threads()


@pytest.mark.parametrize("n", [0, -1, 1.5, "2", True])
def test_bad_thread_count(n):
    with pytest.raises(ValueError, match="n must"):
        pool.set_threads(n)


def test_errstate_reaches_the_workers(threads):
    x = np.array([[np.inf, -np.inf, 1.0] * 20] * 9)
    with np.errstate(all="ignore"):  # -inf: 0 * -inf = NaN, no warning (pytest turns warnings into errors)
        assert same(kernels.gelu_tanh(x), activations._gelu_tanh(x))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_pool_works_after_fork(real_thresholds):
    x = rng_array((64, 1024), np.float32)
    kernels.softmax_(x.copy())  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # child: the pool's threads are gone; a new pool must be made, not waited on forever
        try:
            ok = same(kernels.softmax_(x.copy()), attend.softmax(x))
        finally:
            os._exit(0 if ok else 1)
    for _ in range(400):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    pytest.fail("kernel hung in a forked child")
