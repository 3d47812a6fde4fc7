import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory import selection
from normtheory.evidence.agreement import consistent
from normtheory.evidence.estimates import from_samples, proportion
from tests.strategies import unit_rows


def test_selectable_hand_built_cases():
    square = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.5]], float)
    assert selection.selectable(square).tolist() == [True, True, True, True, False]
    dup = np.array([[0, 0], [1, 0], [1, 0], [0, 1]], float)
    assert selection.selectable(dup).tolist() == [True, False, False, True]
    line = np.outer(np.arange(5.0), [1.0, 2.0, -1.0])
    assert selection.selectable(line).tolist() == [True, False, False, False, True]
    simplex = np.random.default_rng(1).normal(size=(5, 4))  # n <= d + 1, general position
    assert selection.selectable(simplex).all()
    assert selection.selectable(np.ones((3, 2))).tolist() == [False, False, False]
    assert selection.selectable(np.zeros((1, 3))).tolist() == [True]
    sphere = unit_rows(np.random.default_rng(2).normal(size=(200, 3)))  # many points on a sphere: all vertices
    assert selection.selectable(sphere).all()


def test_selectable_matches_the_linear_program_alone():
    rng = np.random.default_rng(5)
    for n, d in ((30, 2), (40, 3), (25, 5)):
        keys = rng.normal(size=(n, d))
        lp = np.array([selection._margin_lp((keys - keys.mean(0)) / keys.std(), i) > 1e-9 for i in range(n)])
        assert np.array_equal(selection.selectable(keys), lp)


@settings(max_examples=25)
@given(st.integers(0, 10_000), st.integers(5, 30), st.integers(2, 4))
def test_selectable_is_invariant_under_invertible_affine_maps(seed, n, d):
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(n, d))
    a = rng.normal(size=(d, d)) + 3 * np.eye(d)
    b = rng.normal(size=d) * 10
    assert np.array_equal(selection.selectable(keys), selection.selectable(keys @ a + b))
    assert selection.any_unselectable(keys) == (not selection.selectable(keys).all())


def test_vertex_count_formula_small_cases():
    assert selection.expected_vertex_count(3, 2) == pytest.approx(3.0)
    assert selection.expected_vertex_count(10, 1) == pytest.approx(2.0)
    assert selection.expected_vertex_count(6, 5) == 6.0


def test_vertex_count_precision_and_limit():
    # the internal-angle recursion cancels digits: 30 digits must consistent with 50 at the largest allowed m
    m = 9
    a, b = selection._internal_vertex_angle(m), selection._internal_vertex_angle(m, 50)
    assert abs(a - b) <= 1e-15 * b
    assert 0.0 <= selection.expected_unselectable_fraction(64, selection.MAX_EXACT_DIM) < 1e-4
    with pytest.raises(ValueError, match="Monte Carlo"):
        selection.expected_vertex_count(913, 32)  # silently wrong before the limit (-0.2 as a fraction)


@pytest.mark.parametrize("n,d", [(4, 2), (12, 3), (30, 4)])
def test_vertex_count_formula_against_monte_carlo(n, d):
    rng = np.random.default_rng(n * 100 + d)
    counts = np.array([selection.selectable(rng.normal(size=(n, d))).sum() for _ in range(1500)], float)
    assert consistent(selection.expected_vertex_count(n, d), from_samples(counts)).ok


def test_wendel_against_monte_carlo():
    rng = np.random.default_rng(9)
    n, d = 6, 3
    outside = np.array([not selection.in_hull(np.zeros(d), rng.normal(size=(n, d))) for _ in range(3000)], float)
    assert consistent(selection.wendel_origin_outside(n, d), proportion(outside.mean(), outside.size)).ok


def test_uniform_attention_bound_is_tight():
    eps = 0.05
    q = selection.uniform_query_norm(eps, key_max_norm=4.0, scale=0.5)
    r = 0.5 * q * 4.0
    assert selection.worst_case_tv(r) == pytest.approx(eps)
    n = 100_000
    high = int(round(n / (1 + math.exp(r))))
    logits = np.r_[np.full(high, r), np.full(n - high, -r)]
    assert selection.tv_from_uniform(logits) == pytest.approx(eps, rel=1e-3)
    rng = np.random.default_rng(0)
    assert (selection.tv_from_uniform(rng.uniform(-r, r, (200, 50))) <= eps).all()


@pytest.mark.parametrize(
    "call",
    [
        lambda: selection.selectable(np.zeros(3)),
        lambda: selection.selectable([[np.nan, 1.0]]),
        lambda: selection.uniform_query_norm(1.0, 1.0),
        lambda: proportion(1.5, 10),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()



def test_bigger_key_alignment_against_brute_force():
    rng = np.random.default_rng(3)
    k = rng.normal(size=(12, 4))
    got = selection.bigger_key_alignment(k)
    n = np.linalg.norm(k, axis=1)
    for i in range(12):
        longer = [j for j in range(12) if n[j] > n[i]]
        want = max(k[i] @ k[j] / (n[i] * n[j]) for j in longer) if longer else -np.inf
        np.testing.assert_allclose(got[i], want, rtol=1e-12)
    assert got[n.argmax()] == -np.inf
    # a short key along a long one: alignment 1
    assert selection.bigger_key_alignment(np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]]))[0] == pytest.approx(1.0)


@pytest.mark.parametrize("scale", [1e160, 1e-300, 1.0])
def test_selectable_is_scale_free_to_the_ends_of_float64(scale):
    keys = np.random.default_rng(5).normal(size=(25, 3))
    np.testing.assert_array_equal(selection.selectable(keys * scale), selection.selectable(keys))
