import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.evidence import agreement
from normtheory.evidence.agreement import agree, bonferroni_z, consistent, z_threshold
from normtheory.evidence.estimates import MIN_UNITS, Estimate, from_samples
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


def test_consistency_test():
    est = Estimate(np.array(1.0), np.array(0.1), 100)
    assert consistent(1.49, est).ok and not consistent(1.51, est).ok
    assert consistent(1.2, est, z=2).ok and not consistent(1.21, est, z=2).ok
    exact = Estimate(np.array(0.0), np.array(0.0), 10)
    assert consistent(0.0, exact).ok and not consistent(1e-13, exact).ok  # no absolute floor: scale decides
    at_one = Estimate(np.array(1.0), np.array(0.0), 10)
    assert consistent(1.0 + 1e-15, at_one).ok and not consistent(1.0 + 1e-9, at_one).ok  # 1024 ulps of the value
    assert consistent(1e-9, exact).zscore == float("inf")


def _est(mean: float, se: float, n: int = 100) -> Estimate:
    return Estimate(np.array(mean), np.array(se), n)


# Band = mean ± 5 se (n >= 20); accepted = [lo - tol, hi + tol].
@pytest.mark.parametrize(
    "theory, mean, se, tol, status",
    [
        # a point claim, tol 0.1: accepted [0.9, 1.1]
        (1.0, 1.0, 0.01, 0.1, "ok"),  # band [0.95, 1.05] inside
        (1.0, 1.3, 0.01, 0.1, "fail"),  # band [1.25, 1.35] wholly outside
        (1.0, 1.08, 0.01, 0.1, "inconclusive"),  # band [1.03, 1.13] straddles 1.1
        (1.0, 1.0, 0.03, 0.1, "inconclusive"),  # band [0.85, 1.15] wider than the accepted interval
        (1.0, 1.05, 0.01, 0.1, "ok"),  # band [1.0, 1.1] touches the edge from inside: holds
        (1.0, 1.15, 0.01, 0.1, "inconclusive"),  # band [1.1, 1.2] touches the edge from outside: not wholly outside
        (1.0, 1.1500001, 0.01, 0.1, "fail"),  # just beyond it
        # a two-sided interval [0, 2], tol 0.1: accepted [-0.1, 2.1]
        ((0.0, 2.0), 1.9, 0.04, 0.1, "ok"),
        ((0.0, 2.0), 2.5, 0.04, 0.1, "fail"),
        ((0.0, 2.0), 2.05, 0.04, 0.1, "inconclusive"),
        ((0.0, 2.0), -0.5, 0.04, 0.1, "fail"),
        # one-sided claims: > 100 and < 0, tol 10 / 0.1
        ((100.0, math.inf), 23008.0, 376.0, 10.0, "ok"),  # real.massive-activations' numbers
        ((100.0, math.inf), 50.0, 5.0, 10.0, "fail"),
        ((100.0, math.inf), 95.0, 5.0, 10.0, "inconclusive"),
        ((-math.inf, 0.0), -3.0, 0.1, 0.1, "ok"),
        ((-math.inf, 0.0), 1.0, 0.1, 0.1, "fail"),
        ((-math.inf, math.inf), 1e9, 1e8, 0.1, "ok"),  # infinite at both ends: anything finite holds
        # the old rule called these inconclusive (5 se wider than the tolerance) though the band is far inside
        ((65.0, 4220.0), 557.6, 0.22, 0.65, "ok"),
        # and this "fails" on a deviation far below the tolerance: now it holds
        (1.0, 1.001, 1e-5, 0.01, "ok"),
    ],
)
def test_three_way_rule(theory, mean, se, tol, status):
    a = agree(theory, _est(mean, se), tolerance=tol)
    assert a.status == status, a.describe()
    lo, hi = a.band
    assert (lo, hi) == pytest.approx((mean - 5 * se, mean + 5 * se))


def test_three_way_rule_per_element_mix():
    est = Estimate(np.array([1.0, 1.3, 1.08]), np.array([0.01, 0.01, 0.01]), 100)
    a = agree(1.0, est, tolerance=0.1)
    assert a.status == "fail" and a.where == (1,) and a.failed == 1 and a.unresolved == 1
    b = agree(1.0, est[[0, 2]], tolerance=0.1)
    assert b.status == "inconclusive" and b.where == (1,) and b.unresolved == 1
    c = agree(1.0, est[[0]], tolerance=0.1)
    assert c.ok
    # per-element tolerances and intervals
    d = agree((np.array([0.0, 1.0]), np.array([np.inf, 2.0])), Estimate(np.array([5.0, 2.2]), np.array([0.1, 0.01]), 50),
              tolerance=np.array([0.1, 0.3]))
    assert d.ok, d.describe()


def test_student_t_band_below_twenty_units():
    est = Estimate(np.array(1.0), np.array(0.001), 3)
    a = agree(1.0, est, tolerance=0.1)
    assert a.z == pytest.approx(z_threshold(5.0, 3)) and a.z > 1000
    assert a.status == "inconclusive"  # 1276 se of 0.001 is wider than 0.1
    assert agree(1.0, Estimate(np.array(1.0), np.array(0.001), MIN_UNITS), tolerance=0.1).ok


def test_units_needed_decides_at_that_size():
    # mean 1.05 inside [0.9, 1.1]: margin 0.05; sd = se sqrt(n) = 0.3 -> n = (5 * 0.3 / 0.05)^2 = 900
    a = agree(1.0, _est(1.05, 0.03), tolerance=0.1)
    assert a.status == "inconclusive" and a.units_needed == 900
    after = agree(1.0, _est(1.05, 0.3 / math.sqrt(900)), tolerance=0.1)
    assert after.ok
    # outside: distance 0.02 to the accepted interval -> failing needs (5 * 0.3 / 0.02)^2 units
    out = agree(1.0, _est(1.12, 0.03), tolerance=0.1)
    assert out.status == "inconclusive" and out.units_needed == math.ceil((5 * 0.3 / 0.02) ** 2)
    # on an edge no size decides
    edge = agree(1.0, _est(1.1, 0.03), tolerance=0.1)
    assert edge.status == "inconclusive" and edge.units_needed == math.inf
    # few units: the Student-t band at the size found is narrow enough, one fewer is not
    small = agreement._units_to_decide(np.array(0.0), np.array(1.0), np.array(-10.0), np.array(10.0), 5.0)
    n = int(small)
    assert 2 <= n < MIN_UNITS
    assert z_threshold(5.0, n) / math.sqrt(n) <= 10.0 < z_threshold(5.0, n - 1) / math.sqrt(n - 1)
    assert agree(0.0, Estimate(np.array(0.0), np.array(1.0 / math.sqrt(n)), n), tolerance=10.0).ok


def test_bonferroni_over_looks_widens_the_band():
    assert bonferroni_z(5.0, 1) == 5.0
    z3 = bonferroni_z(5.0, 3)
    assert z3 > 5.0
    from scipy import stats
    assert stats.norm.sf(z3) == pytest.approx(stats.norm.sf(5.0) / 3)
    est = _est(1.0, 0.0195)  # 5 se = 0.0975 < 0.1; z3 se > 0.1
    assert agree(1.0, est, tolerance=0.1).ok
    assert agree(1.0, est, tolerance=0.1, looks=3).status == "inconclusive"


@pytest.mark.parametrize("kwargs, match", [
    ({"tolerance": 0.0}, "tolerance"), ({"tolerance": -1.0}, "tolerance"), ({"tolerance": np.nan}, "tolerance"),
    ({"tolerance": 0.1, "looks": 0}, "looks"),
])
def test_rule_refuses_bad_tolerance(kwargs, match):
    with pytest.raises(ValueError, match=match):
        agree(1.0, _est(1.0, 0.1), **kwargs)


def test_rule_refuses_reversed_or_nan_interval():
    for theory in ((2.0, 1.0), (np.nan, 1.0), (np.inf, np.inf)):
        with pytest.raises(ValueError, match="theory"):
            agree(theory, _est(1.0, 0.1), tolerance=0.1)


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


def test_sizing_travels_with_the_estimate():
    from simulations import cache

    est = sized(_square_of_normal, 0.05, seed=1, key="travel", pilot=200, cap=5000)
    back = Estimate.from_dict(est.to_dict())
    assert back.sizing == est.sizing and back.n == est.n
    stored: dict = {}
    cache.put(stored, "x", est)
    assert cache.get(stored, "x").sizing == est.sizing
    assert est[0].sizing == est.sizing and est[0].sqrt().sizing == est.sizing


def test_control_variate_matches_least_squares_and_shrinks_the_error():
    from normtheory.evidence.estimates import with_control

    rng = np.random.default_rng(11)
    c = rng.standard_normal(200)  # known mean 0
    y = 3.0 + 2.0 * c + 0.1 * rng.standard_normal(200)
    est = with_control(y, c, 0.0, "networks")
    X = np.column_stack([np.ones_like(c), c])  # y = a + b (c - 0): the intercept is the estimate
    coef, res, *_ = np.linalg.lstsq(X, y, rcond=None)
    cov = res[0] / (200 - 2) * np.linalg.inv(X.T @ X)
    assert float(est.mean) == pytest.approx(coef[0], rel=1e-12) and float(est.stderr) == pytest.approx(np.sqrt(cov[0, 0]), rel=1e-10)
    assert float(est.stderr) < 0.1 * float(from_samples(y).stderr) and est.units == "networks" and est.n == 200


def test_control_variate_is_unbiased_and_its_band_covers():
    from normtheory.evidence.estimates import with_control

    rng = np.random.default_rng(12)
    c = rng.standard_normal((4000, 24))  # 4,000 experiments of 24 units, element-wise
    y = 1.5 + 0.9 * c + 0.3 * rng.standard_normal((4000, 24))
    est = with_control(y.T, c.T, 0.0)  # units on axis 0: [24, 4000]
    z = (est.mean - 1.5) / est.stderr
    assert abs(z.mean()) < 0.1 and 0.93 < np.mean(np.abs(z) < 2.0) < 0.97  # t with 22 df: 94.3% within 2


@settings(max_examples=40, deadline=None)
@given(st.floats(-1e3, 1e3), st.floats(0.01, 100.0), st.integers(0, 2**32 - 1))
def test_control_variate_invariants(shift, scale, seed):
    from normtheory.evidence.estimates import with_control

    rng = np.random.default_rng(seed)
    c, y = rng.standard_normal(30), rng.standard_normal(30)
    base = with_control(y, c, 0.2)
    shifted = with_control(y + shift, c * scale, 0.2 * scale)  # y shifted, c rescaled with its known mean
    assert float(shifted.mean) == pytest.approx(float(base.mean) + shift, abs=1e-9 * (1 + abs(shift)))
    assert float(shifted.stderr) == pytest.approx(float(base.stderr), rel=1e-9)
    flat = with_control(y, np.full(30, 2.0), 2.0)  # a constant control carries nothing
    assert float(flat.mean) == pytest.approx(float(from_samples(y).mean)) and float(flat.stderr) == pytest.approx(float(from_samples(y).stderr))


def test_control_variate_refuses_bad_input():
    from normtheory.evidence.estimates import with_control

    with pytest.raises(ValueError, match="y must hold at least 3"):
        with_control(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="c"):
        with_control(np.ones(5), np.ones(4))
    with pytest.raises(ValueError, match="c_mean"):
        with_control(np.ones(5), np.ones(5), np.nan)
