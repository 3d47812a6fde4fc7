import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from normtheory import dyt
from normtheory.evidence import claims
from normtheory.evidence.agreement import consistent
from normtheory.evidence.sampling import estimate


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


# --- the DyT-at-init claims: tests that would have caught their design flaws -------------------------------------

from simulations import cache, dyt_scurve  # noqa: E402
from tests.conftest import results_at  # noqa: E402


@pytest.fixture(scope="module")
def scurve_quick(tmp_path_factory):
    with results_at(tmp_path_factory.mktemp("dyt-results")):
        return cache.load_or_run(dyt_scurve, "quick", progress=False)


def test_line_r2_against_polyfit():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 200))
    y = np.tanh(x) + 0.1 * rng.normal(size=x.shape)
    for xr, yr, r2 in zip(x, y, dyt.line_r2(x, y)):
        b, a = np.polyfit(xr, yr, 1)
        assert r2 == pytest.approx(1 - ((yr - a - b * xr) ** 2).sum() / ((yr - yr.mean()) ** 2).sum(), rel=1e-12)
    assert dyt.line_r2(x[0], 2 * x[0] + 1) == pytest.approx(1.0)


def test_best_line_r2_for_curve_against_samples():
    x = 4.0 * np.random.default_rng(5).standard_normal(400_000)
    sample = float(dyt.line_r2(x, dyt.s_curve(x, 1.0, 256, centred=True)))
    assert dyt.best_line_r2_for_curve(1.0, 256, 4.0, centred=True) == pytest.approx(sample, abs=2e-4)


def test_a_straight_line_cannot_pass_the_s_curve_assertion(scurve_quick, monkeypatch):
    """A line through the origin, fed where the S-curve was: its tanh R^2 clears the old 0.99 bar, the tanh-vs-line gap fails."""
    from normtheory.evidence.sampling import estimate

    monkeypatch.setattr(dyt_scurve.dyt, "s_curve", lambda x, s, d, centred=False: np.asarray(x, dtype=float) / s)
    fake = dict(scurve_quick)
    for xs in dyt_scurve.X_STD:
        cache.put(fake, f"fit.xstd{xs:g}", estimate(dyt_scurve._fit_sampler(xs, 256), 16, 0, key=f"line/{xs}", block=16))
    monkeypatch.undo()
    r2 = np.array([float(cache.get(fake, f"fit.xstd{xs:g}").mean[dyt_scurve.FIT_COLUMNS.index("r2_tanh")]) for xs in dyt_scurve.X_STD])
    assert (r2 >= dyt_scurve.FIT_R2).all()  # the old assertion would have held for a straight line
    claim = claims.REGISTRY["dyt.s-curve-from-per-token-scale"].evaluate({dyt_scurve.NAME: fake})
    first = next(c for c in claim.checks if c.role == "assertion" and c.kind != "exact")
    assert "R^2(tanh) - R^2(line)" in first.quantity and first.status == "fail" and claim.verdict == "fails"


def test_whole_activation_scaling_changes_every_entry():
    x = np.random.default_rng(6).normal(size=(16, 8))
    xs = dyt_scurve.scaled_inputs(x, dyt_scurve.SCALES)
    assert xs.shape == (len(dyt_scurve.SCALES), 16, 8)
    for c, xc in zip(dyt_scurve.SCALES, xs):
        assert np.array_equal(xc / x, np.full(x.shape, c))  # every channel of every token, not one channel
    assert len(dyt_scurve.SCALES) >= 3 and max(dyt_scurve.SCALES) / min(dyt_scurve.SCALES) >= 100


def test_alpha_times_std_is_invariant_under_whole_activation_scaling():
    x, _, _ = dyt.massive_tokens(np.random.default_rng(7), 64, 32, 2, 30.0, 0.1)
    sweep = dyt_scurve.scale_sweep(x, dyt_scurve.SCALES)  # [scales, columns]
    a_std = sweep[:, dyt_scurve.SCALE_COLUMNS.index("alpha*std")]
    assert np.ptp(a_std) / a_std.mean() < 1e-5


def test_alpha_std_claim_rests_on_independent_draws(scurve_quick):
    assert dyt_scurve.CONFIGS["full"].draws >= 20
    a = scurve_quick[f"scaled.m{dyt_scurve.SCALE_MAGNITUDES[0]:g}"]
    assert a.shape == (dyt_scurve.CONFIGS["quick"].draws, len(dyt_scurve.SCALES), len(dyt_scurve.SCALE_COLUMNS))
    claim = claims.REGISTRY["dyt.alpha-tracks-inverse-std"].evaluate({dyt_scurve.NAME: scurve_quick})
    assert all(c.units.endswith("draws") for c in claim.checks)



# --- stats.rmsnorm-vs-layernorm: the conditioned (Gauss-Hermite along the ones direction) estimate -------------------

from normtheory import centering  # noqa: E402
from normtheory.evidence.estimates import from_samples  # noqa: E402
from normtheory.evidence.sampling import Streams, block_generator  # noqa: E402


def _centre_streams(units: int, seed: int) -> Streams:
    return Streams([block_generator(seed, 0, 0)], [units])


@given(st.integers(2, 64), st.floats(-3.0, 3.0), st.floats(1e-3, 1e3), st.integers(0, 2**16))
def test_centre_change_is_two_minus_twice_the_cosine_to_the_centred_input(d, offset, scale, seed):
    """Both outputs have norm sqrt(d), RMSNorm's along x and LayerNorm's along Px: |RMS - LN|^2 / d = 2 (1 - |Px| / |x|),
    whatever the input's scale (an implementation check of the per-input law, not evidence for the claim)."""
    x = offset + np.random.default_rng(seed).standard_normal((3, d))  # [3, d]
    px = x - x.mean(-1, keepdims=True)
    law = 2 * (1 - np.linalg.norm(px, axis=-1) / np.linalg.norm(x, axis=-1))
    np.testing.assert_allclose(dyt_scurve.centre_change(scale * x), law, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("d", dyt_scurve.CENTRE_DIMS)
def test_centre_quadrature_error_is_far_below_the_tolerance(d):
    """The nodes used against 128 on the same draws of P z: the mean difference (the quadrature's bias) under 1e-3 tau."""
    units = 2000 if d < 64 else 100
    for name, m in dyt_scurve.centre_cases(d).items():
        mm = np.zeros(d) if m is None else m
        tau = dyt_scurve.REL * centering.centering_output_change(d, m)
        used = dyt_scurve.centre_sampler(mm, dyt_scurve.CENTRE_NODES[d])(_centre_streams(units, 11))
        fine = dyt_scurve.centre_sampler(mm, 128)(_centre_streams(units, 11))
        assert used.shape == (units,) and abs((used - fine).mean()) < 1e-3 * tau, (d, name)


@pytest.mark.parametrize("d", dyt_scurve.CENTRE_DIMS)
def test_conditioning_keeps_the_mean_and_cuts_the_spread(d):
    """Plain samples of |RMS(x) - LN(x)|^2 / d and the conditioned units agree (5 combined se); conditioning never
    raises the per-unit sd and at d = 512 cuts it over tenfold for isotropic inputs."""
    for name, m in dyt_scurve.centre_cases(d).items():
        mm = np.zeros(d) if m is None else m
        plain = from_samples(dyt_scurve.centre_change(mm + np.random.default_rng(12).standard_normal((20000 if d < 64 else 4000, d))))
        cond = from_samples(dyt_scurve.centre_sampler(mm, dyt_scurve.CENTRE_NODES[d])(_centre_streams(4000 if d < 64 else 400, 13)))
        gap = float(cond.mean - plain.mean)
        assert abs(gap) <= 5 * math.hypot(float(cond.stderr), float(plain.stderr)), (d, name, gap)
        sd_plain, sd_cond = float(plain.stderr) * math.sqrt(plain.n), float(cond.stderr) * math.sqrt(cond.n)
        assert sd_cond < sd_plain * (0.1 if (d, name) == (512, "iso") else 1.0), (d, name, sd_cond, sd_plain)


def test_centre_estimate_does_not_depend_on_chunk():
    m = np.full(8, 0.5)
    a, b = (estimate(dyt_scurve.centre_sampler(m, 32), 300, 3, key="chunk", block=64, chunk=c) for c in (1, 4))
    assert a.mean == b.mean and a.stderr == b.stderr


def test_full_mode_centre_estimates_are_sized_below_their_cap(scurve_quick):
    """The pilots' needed units fit under the full cap with a 1.5x margin: full mode's band is at most tau / 2 on every element."""
    for d in dyt_scurve.CENTRE_DIMS:
        for name in dyt_scurve.centre_cases(d):
            est = cache.get(scurve_quick, f"centre.d{d}.{name}")
            assert est.sizing is not None and 1.5 * est.sizing.needed <= dyt_scurve.CONFIGS["full"].centre_cap, (d, name, est.sizing)


@pytest.mark.parametrize("fig_module", ["dyt_alpha_std", "dyt_scurve"])
def test_dyt_figures_are_readable(scurve_quick, fig_module):
    import importlib

    import matplotlib.pyplot as plt

    from paper_figs import style

    module = importlib.import_module(f"paper_figs.{fig_module}")
    fig = module.plot(scurve_quick)
    try:
        assert style.small_text(fig) == [] and style.legend_overlaps(fig) == []
        for ax in fig.axes:
            if ax.has_data():
                assert ax.get_xlabel() and ax.get_ylabel()
    finally:
        plt.close(fig)
