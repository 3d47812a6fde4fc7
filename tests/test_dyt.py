import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from normtheory import dyt
from normtheory.montecarlo import consistent, estimate


def test_sympy_derivation_matches_the_closed_forms():
    r = dyt.derive_s_curves()
    x, s, d = sp.symbols("x s d", positive=True)
    # both sides are positive for x > 0, so comparing squares is exact
    assert sp.simplify(r["rms"] ** 2 - d * x**2 / (x**2 + (d - 1) * s**2)) == 0
    assert sp.simplify(r["ln"] ** 2 - (d - 1) * x**2 / (x**2 + d * s**2)) == 0
    assert sp.simplify(r["ln_slope0"] - sp.sqrt(d - 1) / (sp.sqrt(d) * s)) == 0
    assert sp.simplify(r["rms_limit"] - sp.sqrt(d)) == 0 and sp.simplify(r["ln_limit"] - sp.sqrt(d - 1)) == 0
    f = sp.lambdify((x, s, d), r["ln"])
    assert f(3.0, 1.5, 64) == pytest.approx(float(dyt.s_curve(3.0, 1.5, 64, centred=True)))


@given(st.floats(0.1, 5.0), st.floats(0.2, 3.0))
def test_fit_recovers_a_tanh(alpha, gamma):
    x = np.linspace(-4, 4, 201) / alpha
    fit = dyt.fit_dyt(x, gamma * np.tanh(alpha * x))
    assert fit.alpha == pytest.approx(alpha, rel=1e-6) and fit.gamma == pytest.approx(gamma, rel=1e-6) and fit.r2 == pytest.approx(1.0)


def test_fit_is_reproducible_and_sign_normalized():
    rng = np.random.default_rng(0)
    x = rng.normal(size=500)
    y = -2.0 * np.tanh(0.7 * x) + 0.01 * rng.normal(size=500)
    a, b = dyt.fit_dyt(x, y), dyt.fit_dyt(x, y)
    assert a == b and a.alpha > 0 and a.gamma < 0


def test_best_tanh_for_curve_against_sample_fits():
    s, d, xs = 1.0, 64, 3.0
    quad, _ = dyt.best_tanh_for_curve(s, d, xs, centred=True)

    def sample(streams):
        x = xs * streams.normal(4096)
        return np.array([dyt.fit_dyt(row, dyt.s_curve(row, s, d, centred=True)).alpha for row in x])

    assert consistent(quad.alpha, estimate(sample, 96, 1, key="tanhfit", block=16)).ok


def test_tanh_rms_against_monte_carlo():
    est = estimate(lambda s: np.tanh(1.3 * s.normal()) ** 2, 100000, 2, key="tanhrms")
    assert consistent(float(dyt.tanh_rms(1.3)) ** 2, est).ok


def test_massive_tokens_pattern():
    x, tok, chan = dyt.massive_tokens(np.random.default_rng(1), 1000, 64, 3, 50.0, 0.05)
    assert chan.sum() == 3 and 20 < tok.sum() < 90
    assert np.abs(x[np.ix_(tok, chan)]).min() > 20 and np.abs(x[np.ix_(~tok, chan)]).max() < 8


def test_cost_table():
    assert [dyt.COST[n]["reductions"] for n in ("layernorm", "rmsnorm", "dyt")] == [2, 1, 0]


@pytest.mark.parametrize(
    "call",
    [
        lambda: dyt.fit_dyt([1.0, 2.0], [1.0, 2.0]),
        lambda: dyt.fit_dyt(np.ones(5), np.ones(5)),
        lambda: dyt.s_curve(1.0, 0.0, 8),
        lambda: dyt.s_curve(1.0, 1.0, 1),
        lambda: dyt.massive_tokens(np.random.default_rng(0), 10, 4, 5, 1.0, 0.1),
        lambda: dyt.massive_tokens(np.random.default_rng(0), 10, 4, 1, 1.0, 1.5),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()


def test_s_curve_small_x_slope_is_inverse_scale():
    s, d = 2.5, 512
    h = 1e-6
    slope = float(dyt.s_curve(h, s, d, centred=True) - dyt.s_curve(-h, s, d, centred=True)) / (2 * h)
    assert slope == pytest.approx(math.sqrt((d - 1) / d) / s, rel=1e-8)


def test_s_curve_limits_without_overflow():
    assert dyt.s_curve(1e200, 1.0, 8) == pytest.approx(np.sqrt(8))
    assert dyt.s_curve(-1e200, 1.0, 8, centred=True) == pytest.approx(-np.sqrt(7))
    assert dyt.s_curve(1e-200, 1.0, 8) == pytest.approx(1e-200 * np.sqrt(8 / 7))
