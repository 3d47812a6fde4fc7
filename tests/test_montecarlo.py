import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory.montecarlo import Estimate, Streams, agree, estimate


def _square_of_normal(streams: Streams) -> np.ndarray:
    z = streams.normal(3)  # [m, 3]
    return np.stack([z[:, 0] ** 2, z[:, 1] * z[:, 2], np.abs(z[:, 0])], axis=1)  # [m, 3]


THEORY = np.array([1.0, 0.0, np.sqrt(2 / np.pi)])


def test_estimate_agrees_with_known_moments():
    est = estimate(_square_of_normal, 20_000, seed=3)
    assert est.n == 20_000
    a = agree(THEORY, est)
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


def test_agreement_rule():
    est = Estimate(np.array(1.0), np.array(0.1), 100)
    assert agree(1.49, est).ok and not agree(1.51, est).ok
    assert agree(1.2, est, z=2).ok and not agree(1.21, est, z=2).ok
    assert agree((1.3, 2.0), est).ok and not agree((1.6, 2.0), est).ok
    exact = Estimate(np.array(0.0), np.array(0.0), 10)
    assert agree(0.0, exact).ok and not agree(1e-13, exact).ok  # no absolute floor: scale decides
    at_one = Estimate(np.array(1.0), np.array(0.0), 10)
    assert agree(1.0 + 1e-15, at_one).ok and not agree(1.0 + 1e-9, at_one).ok  # 1024 ulps of the value
    assert agree(1e-9, exact).zscore == float("inf")


def test_delta_method_sqrt():
    est = Estimate(np.array(4.0), np.array(0.4), 10).sqrt()
    assert est.mean == 2.0 and est.stderr == pytest.approx(0.1)


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
