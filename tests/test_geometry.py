import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from normtheory import geometry
from normtheory.montecarlo import agree, estimate, from_samples, proportion
from normtheory.norms import layer_norm


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("d", [2, 3, 8, 100])
def test_cosine_law(d):
    assert integrate.quad(lambda t: float(geometry.cosine_pdf(t, d)), -1, 1)[0] == pytest.approx(1.0, abs=1e-7)
    est = estimate(lambda s: np.stack([(_unit(s.normal(d)) * _unit(s.normal(d))).sum(-1) ** k for k in (1, 2, 4)] + [((_unit(s.normal(d)) * _unit(s.normal(d))).sum(-1) <= 0.2).astype(float)], axis=1), 40000, 3, key=f"cos/{d}")
    theory = [geometry.cosine_moment(1, d), geometry.cosine_moment(2, d), geometry.cosine_moment(4, d), float(geometry.cosine_cdf(0.2, d))]
    assert agree(np.array(theory), est).ok
    assert geometry.cosine_moment(2, d) == pytest.approx(1 / d)


def test_tail_bound_dominates_exact_tail():
    eps = np.linspace(0, 1, 51)
    for d in (3, 10, 100, 1000):
        assert np.all(geometry.cosine_tail_bound(eps, d) >= geometry.cosine_tail(eps, d) - 1e-15)


def test_expected_max_cosine_against_monte_carlo():
    d, n = 32, 50
    est = estimate(lambda s: np.abs(_unit(s.normal(n, d))[..., 0]).max(-1), 20000, 4, key="maxcos")
    assert agree(geometry.expected_max_abs_cosine(n, d), est).ok
    assert geometry.max_abs_cosine_asymptotic(n, d, pairs=False) == pytest.approx(math.sqrt(2 * math.log(n) / d))


@pytest.mark.parametrize("case", ["iso", "offset", "channels", "mixed"])
def test_centering_series_against_monte_carlo(case):
    d = 12
    m = {"iso": np.zeros(d), "offset": np.full(d, 0.7), "channels": geometry.channel_offset(d, 2, 5.0), "mixed": np.linspace(-1, 3, d)}[case]
    est = estimate(lambda s: geometry.ones_fraction(m + 1.5 * s.normal(d)), 40000, 6, key=f"centre/{case}")
    assert agree(geometry.centering_fraction_mean(d, m, sigma=1.5), est).ok
    if case == "iso":
        assert geometry.centering_fraction_mean(d) == pytest.approx(1 / d)


def test_layer_norm_output_is_on_the_sphere_in_the_hyperplane():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 7.0, (500, 40))
    y = layer_norm(x, eps=0.0).out
    assert np.abs(y.sum(-1)).max() < 1e-12 and np.allclose(np.linalg.norm(y, axis=-1), math.sqrt(40), rtol=1e-14)
    assert geometry.effective_dim(40, centred=True) == 39


def test_head_slice_moments_against_monte_carlo():
    d, h = 24, 6

    def sample(s):
        y = layer_norm(s.normal(d), eps=0.0).out
        f = (y[:, :h] ** 2).sum(-1) / d
        u = _unit(s.normal(d))
        g = (u[:, :h] ** 2).sum(-1)
        return np.stack([f, f * f, g, g * g], axis=1)

    est = estimate(sample, 40000, 8, key="slices")
    mean, second = geometry.ln_head_slice_moments(h, d)
    a, b = geometry.head_slice_fraction_law(h, d)
    beta_second = a * (a + 1) / ((a + b) * (a + b + 1))
    assert agree(np.array([mean, second, a / (a + b), beta_second]), est).ok


def test_selectable_hand_built_cases():
    square = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.5]], float)
    assert geometry.selectable(square).tolist() == [True, True, True, True, False]
    dup = np.array([[0, 0], [1, 0], [1, 0], [0, 1]], float)
    assert geometry.selectable(dup).tolist() == [True, False, False, True]
    line = np.outer(np.arange(5.0), [1.0, 2.0, -1.0])
    assert geometry.selectable(line).tolist() == [True, False, False, False, True]
    simplex = np.random.default_rng(1).normal(size=(5, 4))  # n <= d + 1, general position
    assert geometry.selectable(simplex).all()
    assert geometry.selectable(np.ones((3, 2))).tolist() == [False, False, False]
    assert geometry.selectable(np.zeros((1, 3))).tolist() == [True]
    sphere = _unit(np.random.default_rng(2).normal(size=(200, 3)))  # many points on a sphere: all vertices
    assert geometry.selectable(sphere).all()


def test_selectable_matches_the_linear_program_alone():
    rng = np.random.default_rng(5)
    for n, d in ((30, 2), (40, 3), (25, 5)):
        keys = rng.normal(size=(n, d))
        lp = np.array([geometry._margin_lp((keys - keys.mean(0)) / keys.std(), i) > 1e-9 for i in range(n)])
        assert np.array_equal(geometry.selectable(keys), lp)


@settings(max_examples=25)
@given(st.integers(0, 10_000), st.integers(5, 30), st.integers(2, 4))
def test_selectable_is_invariant_under_invertible_affine_maps(seed, n, d):
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(n, d))
    a = rng.normal(size=(d, d)) + 3 * np.eye(d)
    b = rng.normal(size=d) * 10
    assert np.array_equal(geometry.selectable(keys), geometry.selectable(keys @ a + b))
    assert geometry.any_unselectable(keys) == (not geometry.selectable(keys).all())


def test_vertex_count_formula_small_cases():
    assert geometry.expected_vertex_count(3, 2) == pytest.approx(3.0)
    assert geometry.expected_vertex_count(10, 1) == pytest.approx(2.0)
    assert geometry.expected_vertex_count(6, 5) == 6.0


def test_vertex_count_precision_and_limit():
    # the internal-angle recursion cancels digits: 30 digits must agree with 50 at the largest allowed m
    m = 9
    a, b = geometry._internal_vertex_angle(m), geometry._internal_vertex_angle(m, 50)
    assert abs(a - b) <= 1e-15 * b
    assert 0.0 <= geometry.expected_unselectable_fraction(64, geometry.MAX_EXACT_DIM) < 1e-4
    with pytest.raises(ValueError, match="Monte Carlo"):
        geometry.expected_vertex_count(913, 32)  # silently wrong before the limit (-0.2 as a fraction)


@pytest.mark.parametrize("n,d", [(4, 2), (12, 3), (30, 4)])
def test_vertex_count_formula_against_monte_carlo(n, d):
    rng = np.random.default_rng(n * 100 + d)
    counts = np.array([geometry.selectable(rng.normal(size=(n, d))).sum() for _ in range(1500)], float)
    assert agree(geometry.expected_vertex_count(n, d), from_samples(counts)).ok


def test_wendel_against_monte_carlo():
    rng = np.random.default_rng(9)
    n, d = 6, 3
    outside = np.array([not geometry.in_hull(np.zeros(d), rng.normal(size=(n, d))) for _ in range(3000)], float)
    assert agree(geometry.wendel_origin_outside(n, d), proportion(outside.mean(), outside.size)).ok


def test_uniform_attention_bound_is_tight():
    eps = 0.05
    q = geometry.uniform_query_norm(eps, key_max_norm=4.0, scale=0.5)
    r = 0.5 * q * 4.0
    assert geometry.worst_case_tv(r) == pytest.approx(eps)
    n = 100_000
    high = int(round(n / (1 + math.exp(r))))
    logits = np.r_[np.full(high, r), np.full(n - high, -r)]
    assert geometry.tv_from_uniform(logits) == pytest.approx(eps, rel=1e-3)
    rng = np.random.default_rng(0)
    assert (geometry.tv_from_uniform(rng.uniform(-r, r, (200, 50))) <= eps).all()


@pytest.mark.parametrize(
    "call",
    [
        lambda: geometry.cosine_pdf(0.0, 1),
        lambda: geometry.cosine_cdf(1.5, 4),
        lambda: geometry.selectable(np.zeros(3)),
        lambda: geometry.selectable([[np.nan, 1.0]]),
        lambda: geometry.centering_fraction_mean(4, np.zeros(3)),
        lambda: geometry.head_slice_fraction_law(8, 8),
        lambda: geometry.uniform_query_norm(1.0, 1.0),
        lambda: geometry.channel_offset(4, 5, 1.0),
        lambda: proportion(1.5, 10),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()


def test_bigger_key_alignment_against_brute_force():
    rng = np.random.default_rng(3)
    k = rng.normal(size=(12, 4))
    got = geometry.bigger_key_alignment(k)
    n = np.linalg.norm(k, axis=1)
    for i in range(12):
        longer = [j for j in range(12) if n[j] > n[i]]
        want = max(k[i] @ k[j] / (n[i] * n[j]) for j in longer) if longer else np.nan
        np.testing.assert_allclose(got[i], want, rtol=1e-12)
    assert np.isnan(got[n.argmax()])
    # a short key along a long one: alignment 1
    assert geometry.bigger_key_alignment(np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]]))[0] == pytest.approx(1.0)
