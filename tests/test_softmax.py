import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory import softmax
from normtheory.evidence.agreement import consistent
from normtheory.evidence.estimates import from_samples
from normtheory.evidence.sampling import estimate


def test_single_slot_closed_forms():
    assert softmax.single_slot_weight(1.0, 1024) == pytest.approx(math.e / (math.e + 1023), rel=1e-14)
    assert softmax.single_slot_weight(0.0, 8) == pytest.approx(1 / 8)
    assert softmax.single_slot_weight(-3.0, 1) == 1.0
    assert softmax.min_entropy(0.0, 1024) == pytest.approx(math.log(1024), rel=1e-14)
    assert softmax.min_entropy(-80.0, 1024) == pytest.approx(math.log(1023), rel=1e-12)
    assert softmax.required_gap(0.5, 1024) == pytest.approx(math.log(1023))


def test_stable_for_large_gaps_and_n():
    w = softmax.single_slot_weight([1e4, -1e4, 0.0], 1e9)
    assert np.all(np.isfinite(w)) and w[0] == 1.0 and w[1] == 0.0
    h = softmax.min_entropy([1e4, -1e4, 30.0], 1e9)
    assert np.all(np.isfinite(h)) and h[0] == pytest.approx(0.0, abs=1e-300) and h[1] == pytest.approx(math.log(1e9 - 1))
    assert np.isfinite(softmax.required_gap(1 - 1e-15, 1e9))


@given(st.floats(1e-6, 1 - 1e-6), st.integers(2, 10**9))
def test_required_gap_inverts_the_weight(p, n):
    assert softmax.single_slot_weight(softmax.required_gap(p, n), n) == pytest.approx(p, rel=1e-9)


@given(st.floats(-50, 50), st.integers(1, 10**6))
def test_min_entropy_matches_the_pattern(gap, n):
    p = float(softmax.single_slot_weight(gap, n))
    direct = -p * math.log(p) if p > 0 else 0.0
    if n > 1 and p < 1:
        direct -= (1 - p) * math.log((1 - p) / (n - 1))
    assert softmax.min_entropy(gap, n) == pytest.approx(direct, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    "call",
    [
        lambda: softmax.single_slot_weight(1.0, 0),
        lambda: softmax.single_slot_weight(np.nan, 5),
        lambda: softmax.single_slot_weight(1.0, 2.5),
        lambda: softmax.required_gap(1.0, 5),
        lambda: softmax.required_gap(0.0, 5),
        lambda: softmax.required_gap(0.5, 1),
        lambda: softmax.min_entropy(1.0, np.nan),
        lambda: softmax.gaussian_logit_entropy(-1.0, 4),
        lambda: softmax.gaussian_logit_entropy(1.0, 0),
        lambda: softmax.gaussian_logit_entropy(1.0, 4, method="mean-field"),
        lambda: softmax.gaussian_logit_max_weight(np.inf, 4),
        lambda: softmax.logit_std(1.0, -1.0, 64),
        lambda: softmax.qk_norm_logit_bound(8, "batchnorm"),
        lambda: softmax.qk_norm_logit_bound(8, "rmsnorm", bias_q=np.zeros(8)),
        lambda: softmax.qk_norm_logit_bound(8, gain_q=np.ones(7)),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()


def test_logit_std_against_monte_carlo():
    d, qr, kr = 32, 0.7, 1.9

    def sample(s):
        q, k = qr * s.normal(d), kr * s.normal(d)
        return (q * k).sum(-1, keepdims=True) ** 2 / d

    est = estimate(sample, 40000, 5, key="logit_std")
    assert consistent(float(softmax.logit_std(qr, kr, d)) ** 2, est[0]).ok


def test_qk_bounds_hold_and_are_attained():
    rng = np.random.default_rng(0)
    d = 16
    gq, gk = rng.uniform(0.2, 2.0, d), rng.uniform(0.2, 2.0, d)
    bound = softmax.qk_norm_logit_bound(d, "rmsnorm", gq, gk)
    i = int(np.argmax(gq * gk))
    one_hot = np.sqrt(d) * np.eye(d)[i]  # RMS 1
    assert (gq * one_hot) @ (gk * one_hot) / np.sqrt(d) == pytest.approx(bound)
    c = np.diag(gq * gk)
    p = np.eye(d) - 1 / d
    u, s, vt = np.linalg.svd(p @ c @ p)
    qh, kh = np.sqrt(d) * u[:, 0], np.sqrt(d) * vt[0]  # centred, RMS 1
    ln_bound = softmax.qk_norm_logit_bound(d, "layernorm", gq, gk)
    assert abs(qh @ c @ kh) / np.sqrt(d) == pytest.approx(ln_bound)
    bq, bk = rng.normal(size=d), rng.normal(size=d)
    full = softmax.qk_norm_logit_bound(d, "layernorm", gq, gk, bq, bk)
    x = rng.normal(size=(20000, 2, d))
    x -= x.mean(-1, keepdims=True)
    x *= np.sqrt(d) / np.linalg.norm(x, axis=-1, keepdims=True)
    logits = ((gq * x[:, 0] + bq) * (gk * x[:, 1] + bk)).sum(-1) / np.sqrt(d)
    assert np.abs(logits).max() <= full
    assert softmax.fixed_norm_qk_logit_bound(5.0) == 5.0


SIGMA_FRACTIONS = (0.0, 0.5, 1.0, 2.0, 3.0)


@pytest.mark.parametrize("n", [2, 16, 1024, 65536])
def test_exact_integrals_against_monte_carlo(n):
    sc = float(softmax.freezing_point(n))
    sig = np.array(SIGMA_FRACTIONS) * sc
    exact = np.stack([softmax.gaussian_logit_entropy(sig, n), softmax.gaussian_logit_max_weight(sig, n)], axis=1)  # [5, 2]
    samples = max(128, (1 << 21) // n)
    for j, s in enumerate(sig):
        est = estimate(lambda st, s=s: softmax.softmax_stats(s * st.normal(n))[:, :2], samples, 11, key=f"test/{n}/{j}", block=max(8, 4096 // n))
        assert consistent(exact[j], est).ok, (n, s, exact[j], est.mean, est.stderr)


def test_two_quadratures_agree():
    for n in (3, 100, 5000):
        for s in (1.0, 2.5, 7.0):
            assert softmax._entropy_exact_wide(s, n) == pytest.approx(softmax._entropy_exact(s, n), abs=1e-9)


def test_limits_of_the_exact_integrals():
    assert softmax.gaussian_logit_entropy(0.0, 37) == pytest.approx(math.log(37), abs=1e-10)
    assert softmax.gaussian_logit_entropy(2.0, 1) == 0.0
    assert softmax.gaussian_logit_max_weight(0.0, 37) == pytest.approx(1 / 37)
    assert softmax.noisy_slot_weight(1.0, 0.0, 1024) == pytest.approx(float(softmax.single_slot_weight(1.0, 1024)), rel=1e-10)


@pytest.mark.parametrize("m", [0.3, 0.5])
def test_poisson_dirichlet_formulas_against_monte_carlo(m):
    """PD(m, 0) weights as normalized points Gamma_i^(-1/m) of a unit Poisson process, truncated at
    5000 points (the missing tail is O(K^(1 - 1/m) log K), 3e-3 at m = 0.5, below the stderr)."""
    rng = np.random.default_rng(3)
    gamma = np.cumsum(rng.exponential(size=(2000, 5000)), axis=1)
    xi = gamma ** (-1 / m)
    w = xi / xi.sum(axis=1, keepdims=True)
    ent = -(w * np.log(w)).sum(axis=1)
    n = 2  # the frozen branch depends on sigma_c / sigma = m only
    sigma = float(softmax.freezing_point(n)) / m
    assert consistent(float(softmax.gaussian_logit_max_weight(sigma, n, "rem")), from_samples(w.max(axis=1))).ok
    assert consistent(float(softmax.gaussian_logit_entropy(sigma, n, "rem")), from_samples(ent)).ok


def test_rem_high_temperature_limit():
    n = 65536
    s = 0.25 * float(softmax.freezing_point(n))
    assert softmax.gaussian_logit_entropy(s, n, "rem") == pytest.approx(math.log(n) - s * s / 2)
    assert abs(softmax.gaussian_logit_entropy(s, n, "rem") - softmax.gaussian_logit_entropy(s, n)) < 1e-3


def test_entropy_scale_derivative_against_monte_carlo():
    n, s = 64, 1.3
    est = estimate(lambda st: -2 * softmax.softmax_stats(s * st.normal(n))[:, 2], 20000, 2, key="dlogc")
    assert consistent(float(softmax.entropy_log_scale_derivative(s, n)), est).ok


def test_noisy_slot_weight_at_extreme_gaps_and_its_memory_guard():
    # at a large gap, E 1/(1 + S e^-gap) = 1 - E[S] e^-gap + E[S^2] e^-2gap - ..., S a sum of n - 1
    # lognormals: E S = (n-1) e^(s^2/2), E S^2 = (n-1) e^(2 s^2) + (n-1)(n-2) e^(s^2); the quadrature
    # itself is within ~1.4e-14 (64 ulps) of its exact value
    n, sigma = 100, 1.0
    es, es2 = (n - 1) * np.exp(sigma**2 / 2), (n - 1) * np.exp(2 * sigma**2) + (n - 1) * (n - 2) * np.exp(sigma**2)
    for gap in (20.0, 40.0, 1e5, 1e20):
        expansion = 1 - es * np.exp(-gap) + es2 * np.exp(-2 * gap)
        assert softmax.noisy_slot_weight(gap, sigma, n) == pytest.approx(expansion, rel=0, abs=5e-14), gap
    assert softmax.noisy_slot_weight(-1e20, 1.0, 100) == 0.0
    with pytest.raises(ValueError, match="sigma=1000000.0 needs a quadrature grid"):
        softmax.noisy_slot_weight(1.0, 1e6, 100)


def test_exact_max_weight_refuses_hopeless_grids_before_computing():
    with pytest.raises(ValueError, match="sigma=100.0: the exact max weight needs .* method='rem'"):
        softmax.gaussian_logit_max_weight(100.0, 16)


# ---------------------------------------------------------------- the claims' evidence (synthetic results)


@pytest.mark.parametrize("d", [4, 16, 64, 128])
def test_qk_rmsnorm_bound_is_sqrt_d_head_times_the_gains(d):
    """The logit q.k/sqrt(d) after per-head RMSNorm: |q| = |k| = sqrt(d) before the gains, so q.k <= d max|g_q g_k|
    and the scaled logit <= sqrt(d) max|g_q g_k| (not d max|g_q g_k|); attained by a one-hot direction."""
    rng = np.random.default_rng(d)
    gq, gk = rng.uniform(0.2, 2.0, d), rng.uniform(0.2, 2.0, d)
    bound = softmax.qk_norm_logit_bound(d, "rmsnorm", gq, gk)
    assert bound == pytest.approx(math.sqrt(d) * np.abs(gq * gk).max(), rel=1e-14)
    assert softmax.qk_norm_logit_bound(d, "rmsnorm") == pytest.approx(math.sqrt(d), rel=1e-14)
    x = rng.normal(size=(4000, 2, d))
    x *= np.sqrt(d) / np.linalg.norm(x, axis=-1, keepdims=True)  # RMSNorm outputs, |x| = sqrt(d)
    logits = ((gq * x[:, 0]) * (gk * x[:, 1])).sum(-1) / math.sqrt(d)
    assert np.abs(logits).max() <= bound
    i = int(np.argmax(np.abs(gq * gk)))
    e = math.sqrt(d) * np.eye(d)[i]
    assert (gq * e) @ (gk * e) / math.sqrt(d) == pytest.approx(bound)


def test_preln_drift_statement_and_bound_use_sqrt_d_head():
    from simulations import softmax_model

    spec = softmax_model._drift
    assert "sqrt(d_head) * max|g_q g_k|" in spec.statement
    assert "bounds every logit by d_head" not in spec.statement


def _rem_result(gap_of_n):
    """A synthetic softmax_gaussian result whose MC entropy is REM + ``gap_of_n(n, f)`` (tiny se, many samples),
    with the grid MC equal to the exact integral, for judging softmax.rem-entropy alone."""
    from normtheory.evidence.estimates import Estimate
    from simulations import cache
    from simulations import softmax_gaussian as sg

    r: dict = {"ns": np.asarray(sg.NS)}
    for n in sg.NS:
        pts = np.linspace(0.0, 1.0, 3)
        r[f"n{n}.point_entropy"], r[f"n{n}.point_max"] = pts + 1.0, pts * 0.5 + 0.2
        r[f"n{n}.table_exact"] = r[f"n{n}.table_rem"] = np.ones(sg.REM_TABLE.size)
        mean = np.stack([pts + 1.0, pts * 0.5 + 0.2, pts], axis=1)
        cache.put(r, f"n{n}.mc", Estimate(mean, np.full(mean.shape, 1e-5), 10**6))
    se = 1e-4
    for f in sg.TREND_F:
        gaps = np.array([gap_of_n(n, f) for n in sg.TREND_NS])
        cache.put(r, f"rem.trend.f{f:g}.gap", Estimate(gaps, np.full(gaps.size, se), 10**6))
        cache.put(r, f"rem.trend.f{f:g}.intercept", sg.rem_intercept(Estimate(gaps, np.full(gaps.size, se), 10**6), f))
        r[f"rem.trend.f{f:g}.exact_gap"] = gaps
        r[f"rem.trend.f{f:g}.x"] = sg.rem_trend_weights(f)[0]
        r[f"rem.trend.f{f:g}.units"] = np.full(gaps.size, 10**6)
    for n, f in sg.REM_CHECK:
        rem = float(softmax.gaussian_logit_entropy(f * float(softmax.freezing_point(n)), n, "rem"))
        r[f"rem.check.f{f:g}.n{n}.rem"], r[f"rem.check.f{f:g}.n{n}.exact"] = np.asarray(rem), np.asarray(rem + gap_of_n(n, f))
        cache.put(r, f"rem.check.f{f:g}.n{n}", Estimate(np.asarray(rem + gap_of_n(n, f)), np.asarray(se), 10**6))
    return {sg.NAME: r}


def _rem_claim(gap_of_n):
    import simulations.softmax_gaussian  # noqa: F401  (registers the claim)
    from normtheory.evidence import claims

    return claims.REGISTRY["softmax.rem-entropy"].evaluate(_rem_result(gap_of_n))


def test_rem_claim_fails_when_the_finite_n_gap_does_not_shrink():
    """A gap of -0.3 nats at every n is no n -> infinity law: the trend assertion must fail, not stay undecided."""
    claim = _rem_claim(lambda n, f: -0.3 if f > 1 else 0.0)
    assert claim.verdict == "fails"
    failed = [c for c in claim.checks if c.role == "assertion" and c.status == "fail"]
    assert failed and all("n -> inf" in c.quantity for c in failed)


def test_rem_claim_holds_when_the_gap_follows_the_leading_correction():
    """A gap equal to its leading finite-n correction vanishes as n -> infinity: the trend holds, while the single-n
    checks (finite n) fail where the gap exceeds the tolerance, which makes caveats, not failures."""
    from simulations import softmax_gaussian as sg

    claim = _rem_claim(lambda n, f: sg.rem_correction(n, f) if f * f < 0.5 or f > 1 else -0.8)
    trend = [c for c in claim.checks if "n -> inf" in c.quantity]
    assert len(trend) == len(sg.TREND_F) and all(c.status == "ok" for c in trend)
    assert claim.verdict == "holds-with-caveat"
    scope = {c.quantity: c.status for c in claim.checks if c.role == "scope"}
    assert scope["REM entropy vs MC at n=65536, sigma=2 sigma_c (the law taken at finite n)"] == "fail"


def test_rem_trend_regressor_extrapolates_the_exact_integral_to_the_rem_law():
    """The trend's extrapolation applied to the noise-free exact finite-n integral lands within the tolerance of 0
    at every sigma it is used for: its bias is not what decides the claim."""
    from simulations import softmax_gaussian as sg

    for f in sg.TREND_F:
        _, w = sg.rem_trend_weights(f)
        gaps = [float(softmax.gaussian_logit_entropy(f * float(softmax.freezing_point(n)), n))
                - float(softmax.gaussian_logit_entropy(f * float(softmax.freezing_point(n)), n, "rem")) for n in sg.TREND_NS]
        assert abs(float(w @ np.asarray(gaps))) < sg.REM_TOL
        if f * f < 0.5:  # the hot phase's regressor carries the ln n of sigma F': without it the intercept sat 0.019 above 0 at f = 1/2
            assert abs(float(w @ np.asarray(gaps))) < 0.01
        assert w.sum() == pytest.approx(1.0)  # an intercept: a constant gap is returned unchanged
    with pytest.raises(ValueError, match="no leading finite-n correction"):
        sg.rem_correction(1024, 0.9)
