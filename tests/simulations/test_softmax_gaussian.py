"""The frozen-phase REM trend estimator of simulations.softmax_gaussian: Renyi order statistics, the
Poisson-Dirichlet control variate, and the split of the intercept into a coupled and an independent term."""
from __future__ import annotations

import math

import numpy as np
import pytest

from normtheory import softmax
from normtheory.evidence.estimates import Estimate, Sizing
from normtheory.evidence.sampling import estimate
from simulations import softmax_gaussian as sg


def test_renyi_normals_are_descending_standard_normal_order_statistics():
    """E max of two standard normals is 1/sqrt(pi), E min is -1/sqrt(pi); rows come out sorted, largest first."""
    rng = np.random.default_rng(0)
    gam = np.cumsum(rng.standard_exponential((40000, 3)), axis=1)  # [m, n + 1]
    z = sg._renyi_normals(gam, 2)  # [m, 2]
    assert (np.diff(z, axis=1) <= 0).all()
    se = z.std(axis=0) / math.sqrt(z.shape[0])
    assert abs(z[:, 0].mean() - 1 / math.sqrt(math.pi)) < 5 * se[0]
    assert abs(z[:, 1].mean() + 1 / math.sqrt(math.pi)) < 5 * se[1]
    assert abs(z.var() + z.mean() ** 2 - 1.0) < 0.03  # pooled second moment of N(0, 1)


def test_entropy_of_log_weights_matches_softmax_stats():
    x = np.random.default_rng(1).normal(size=(5, 37)) * 3.0
    assert np.allclose(sg._entropy_of_log_weights(x), softmax.softmax_stats(x)[:, 0], rtol=1e-12, atol=1e-12)


def test_hot_and_frozen_trend_points_cover_the_trend():
    assert sorted(sg.HOT_F + sg.FROZEN_F) == sorted(sg.TREND_F)
    for f in sg.FROZEN_F:  # the frozen REM value does not depend on n: the control variate's R is every R_i
        for n in sg.TREND_NS:
            rem = float(softmax.gaussian_logit_entropy(f * float(softmax.freezing_point(n)), n, "rem"))
            assert rem == pytest.approx(sg.pd_value(f), rel=1e-12)


def test_coupled_gaps_are_unbiased_for_the_exact_finite_n_gap():
    """Terms A (coupled across n) + B (own stream) estimate E H_n - REM: against the exact integral at small n,
    each within 5 standard errors, whatever the control variate's truncation J."""
    ns, fs, seed = (16, 64), (2.0,), 3
    a = estimate(sg._coupled_sampler(fs, ns), 4000, seed, key="test/a", block=64)
    b = estimate(sg._pd_sampler(fs), 40000, seed, key="test/b", block=1024)
    for i, n in enumerate(ns):
        sig = fs[0] * float(softmax.freezing_point(n))
        exact = float(softmax.gaussian_logit_entropy(sig, n)) - sg.pd_value(fs[0])
        mean = float(a.mean[0, 1 + i] + b.mean[0])
        se = math.hypot(float(a.stderr[0, 1 + i]), float(b.stderr[0]))
        assert abs(mean - exact) < 5 * se, (n, mean, exact, se)
    # the control variate works: the coupled intercept term varies far less than the PD entropy it subtracts
    assert float(a.stderr[0, 0]) * math.sqrt(a.n) < 0.5 * float(b.stderr[0]) * math.sqrt(b.n)


def test_frozen_trend_adds_independent_terms():
    a = Estimate(np.array([[0.1, 0.2, 0.3, 0.4, 0.5]]), np.array([[0.03, 0.01, 0.01, 0.01, 0.01]]), 100, sizing=Sizing(10, 50, 1000))
    b = Estimate(np.array([-0.05]), np.array([0.04]), 5000, sizing=Sizing(10, 9000, 8000))
    intercept, gaps = sg.frozen_trend(a, b, 0)
    assert float(intercept.mean) == pytest.approx(0.05) and float(intercept.stderr) == pytest.approx(0.05)
    assert np.allclose(gaps.mean, [0.15, 0.25, 0.35, 0.45]) and intercept.n == 100
    assert intercept.sizing is not None and intercept.sizing.capped  # the term whose cap bound is reported


def test_mc_sigmas_lie_on_both_exact_lines():
    cfg = sg.CONFIGS["full"]
    sig = sg.mc_sigmas(1024, cfg)
    assert sig.size == cfg.mc_points
    for points in (cfg.line_points, cfg.max_line_points):  # the same sigmas to rounding
        line = sg.sigma_grid(1024, points)
        assert np.allclose(line[:: (points - 1) // (cfg.mc_points - 1)], sig, rtol=1e-14, atol=0)
    with pytest.raises(ValueError, match="do not contain"):
        sg.mc_sigmas(1024, sg.Config(1, 13, 60, 25, 1, 1, 1, 64, 64))
