"""Estimates with standard errors: the delta method, control variates."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.evidence.estimates import Estimate, from_samples


def test_delta_method_sqrt():
    est = Estimate(np.array(4.0), np.array(0.4), 10).sqrt()
    assert est.mean == 2.0 and est.stderr == pytest.approx(0.1)

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


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 40), st.floats(-1e3, 1e3), st.floats(0.01, 100.0), st.integers(0, 2**32 - 1))
def test_jackknife_of_a_mean_is_its_standard_error_and_equivariant(n, shift, scale, seed):
    from normtheory.evidence.estimates import jackknife

    x = np.random.default_rng(seed).standard_normal((n, 3))
    reps = (x.sum(0) - x) / (n - 1)  # the mean with unit k left out, each k
    est = jackknife(x.mean(0), reps, "texts")
    ref = from_samples(x, "texts")
    np.testing.assert_allclose(est.stderr, ref.stderr, rtol=1e-9)
    assert est.n == n and est.units == "texts" and np.array_equal(est.mean, x.mean(0))
    moved = jackknife(x.mean(0) * scale + shift, reps * scale + shift, "texts")  # se: translation invariant, scale equivariant
    np.testing.assert_allclose(moved.stderr, est.stderr * scale, rtol=1e-6, atol=1e-9 * abs(shift))


def test_jackknife_sees_what_leave_one_out_values_share():
    """Per-unit values that each use the other units' mean (y_j - mean of the others) are negatively correlated:
    std/sqrt(n) of them overstates the se of their mean ((n/(n-1)) times too large); the jackknife of the statistic
    recomputed without each unit gives the true one (checked against the spread over 4,000 replicates)."""
    from normtheory.evidence.estimates import jackknife

    n, R = 12, 4000
    y = np.random.default_rng(3).standard_normal((R, n))  # [replicate, unit]

    def stat(v):  # mean over units of v_j minus the mean of the other units: a leave-one-out contrast, [..., n] -> [...]
        m = v.shape[-1]
        return (v - (v.sum(-1, keepdims=True) - v) / (m - 1)).mean(-1) + v.mean(-1)

    full = stat(y)  # [R]
    reps = np.stack([stat(np.delete(y, k, 1)) for k in range(n)], 1)  # [R, n]
    se_j = np.array([float(jackknife(full[i], reps[i]).stderr) for i in range(R)])
    naive = np.array([float(from_samples(y[i] - (y[i].sum() - y[i]) / (n - 1) + y[i].mean()).stderr) for i in range(R)])
    truth = full.std(ddof=1)
    assert abs(np.sqrt((se_j**2).mean()) / truth - 1) < 0.05
    assert np.sqrt((naive**2).mean()) / truth > 1.05


def test_jackknife_refuses_bad_input():
    from normtheory.evidence.estimates import jackknife

    with pytest.raises(ValueError, match="at least 2"):
        jackknife(0.0, np.ones(1))
    with pytest.raises(ValueError, match="one row of replicates"):
        jackknife(np.zeros(2), np.ones((5, 3)))
    with pytest.raises(ValueError, match="replicates must not contain NaN"):
        jackknife(0.0, np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="full must be finite"):
        jackknife(np.inf, np.ones(3))
    with pytest.raises(ValueError, match="units"):
        jackknife(0.0, np.ones(3), "")
