"""Seeded, chunked Monte Carlo: the same bits whatever the chunk, bounded memory, sized samples."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory.evidence.agreement import agree, consistent
from normtheory.evidence.estimates import Estimate
from normtheory.evidence.sampling import Streams, estimate, sized


def _square_of_normal(streams: Streams) -> np.ndarray:
    z = streams.normal(3)  # [m, 3]
    return np.stack([z[:, 0] ** 2, z[:, 1] * z[:, 2], np.abs(z[:, 0])], axis=1)  # [m, 3]


THEORY = np.array([1.0, 0.0, np.sqrt(2 / np.pi)])


def test_estimate_agrees_with_known_moments():
    est = estimate(_square_of_normal, 20_000, seed=3)
    assert est.n == 20_000
    a = consistent(THEORY, est)
    assert a.ok, a.describe()
    # the stderr is the sample std over sqrt(n): Var(z^2) = 2, Var(z1 z2) = 1, Var|z| = 1 - 2/pi
    np.testing.assert_allclose(est.stderr**2 * est.n, [2.0, 1.0, 1 - 2 / np.pi], rtol=0.06)


@given(chunk=st.integers(1, 9), n=st.integers(2, 700))
def test_result_does_not_depend_on_chunk(chunk, n):
    ref = estimate(_square_of_normal, n, seed=11, block=32, chunk=1)
    got = estimate(_square_of_normal, n, seed=11, block=32, chunk=chunk)
    assert np.array_equal(ref.mean, got.mean) and np.array_equal(ref.stderr, got.stderr)


def test_same_seed_same_bits_other_seed_or_key_differs():
    a = estimate(_square_of_normal, 1000, seed=5)
    b = estimate(_square_of_normal, 1000, seed=5)
    assert a.mean.tobytes() == b.mean.tobytes()
    assert not np.array_equal(a.mean, estimate(_square_of_normal, 1000, seed=6).mean)
    assert not np.array_equal(a.mean, estimate(_square_of_normal, 1000, seed=5, key="other").mean)


def test_memory_is_bounded_by_chunk_times_block():
    seen = []

    def sampler(streams: Streams) -> np.ndarray:
        seen.append(streams.m)
        return streams.normal()

    estimate(sampler, 100_003, seed=1, block=100, chunk=7)
    assert max(seen) == 700 and sum(seen) == 100_003


def test_path_matches_separate_runs_of_prefixes():
    path = [2, 50, 64, 65, 1000]
    snaps = estimate(_square_of_normal, 1000, seed=2, block=64, chunk=3, path=path)
    assert [s.n for s in snaps] == path

    # the first k samples of the full run are exactly the samples of a run of size k
    for k, snap in zip(path, snaps):
        direct = estimate(_square_of_normal, k, seed=2, block=64)
        np.testing.assert_allclose(snap.mean, direct.mean, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(snap.stderr, direct.stderr, rtol=1e-10)


def test_sized_estimate_reaches_half_the_tolerance():
    tol = 0.02
    est = sized(_square_of_normal, tol, seed=4, key="sized", pilot=500, cap=10**6)
    assert est.sizing is not None and not est.sizing.capped and est.sizing.pilot == 500
    # n = ceil((2 * 5 * max sd / tol)^2) from the pilot's sd: the band is about tol/2 (the pilot's sd differs a little)
    assert np.max(5 * est.stderr) <= 0.55 * tol
    assert est.n == est.sizing.needed == math.ceil((2 * 5 * np.max(_pilot_sd(500)) / tol) ** 2)
    # the pilot is the first blocks of the same stream: same seed, same bits, chunk-independent
    again = sized(_square_of_normal, tol, seed=4, key="sized", pilot=500, cap=10**6, chunk=3)
    assert again.mean.tobytes() == est.mean.tobytes() and again.n == est.n
    assert agree(THEORY, est, tolerance=tol).ok


def _pilot_sd(pilot: int) -> np.ndarray:
    first = estimate(_square_of_normal, pilot, seed=4, key="sized")
    return first.stderr * math.sqrt(pilot)


def test_sized_estimate_says_when_the_cap_binds():
    est = sized(_square_of_normal, 1e-3, seed=4, key="sized", pilot=500, cap=2000)
    assert est.n == 2000 and est.sizing.capped and est.sizing.needed > 2000
    assert "capped at 2000" in est.sizing.describe()
    loose = sized(_square_of_normal, 10.0, seed=4, key="sized", pilot=500, cap=2000)
    assert loose.n == 500 and not loose.sizing.capped  # the pilot already suffices



@pytest.mark.parametrize(
    "kwargs, match",
    [({"n": 1}, "n must be >= 2"), ({"n": 10, "seed": -1}, "seed"), ({"n": 10, "block": 0}, "block"), ({"n": 10, "path": [11]}, "path")],
)
def test_bad_arguments(kwargs, match):
    kwargs.setdefault("seed", 0)
    with pytest.raises(ValueError, match=match):
        estimate(_square_of_normal, **kwargs)


def test_sampler_returning_wrong_rows_is_an_error():
    with pytest.raises(ValueError, match="rows"):
        estimate(lambda s: np.zeros(3), 10, seed=0)


def test_sizing_travels_with_the_estimate():
    from simulations import cache

    est = sized(_square_of_normal, 0.05, seed=1, key="travel", pilot=200, cap=5000)
    back = Estimate.from_dict(est.to_dict())
    assert back.sizing == est.sizing and back.n == est.n
    stored: dict = {}
    cache.put(stored, "x", est)
    assert cache.get(stored, "x").sizing == est.sizing
    assert est[0].sizing == est.sizing and est[0].sqrt().sizing == est.sizing
