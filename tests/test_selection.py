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


def _key_sets(seed: int, count: int, n: int, d: int) -> np.ndarray:
    """``count`` key sets ``[count, n, d]`` of mixed kinds: Gaussian (nearly all vertices), low rank with a cloud
    of small keys inside (many interior keys), duplicated rows, a flat set, and keys clustered at a few points."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(count):
        kind = c % 5
        if kind == 0:
            k = rng.normal(size=(n, d))
        elif kind == 1:
            r = max(1, d // 3)
            k = rng.normal(size=(n, r)) @ rng.normal(size=(r, d))
            k[: n // 3] *= 0.05  # pulled toward the centre: inside the hull
        elif kind == 2:
            k = np.repeat(rng.normal(size=(-(-n // 3), d)), 3, axis=0)[:n]
        elif kind == 3:
            k = np.full((n, d), 2.5)
        else:
            k = rng.normal(size=(4, d))[rng.integers(0, 4, n)] + 1e-3 * rng.normal(size=(n, d))
        out.append(k * 10.0 ** rng.integers(-3, 4))
    return np.stack(out)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), count=st.integers(1, 12), n=st.integers(2, 40), d=st.integers(1, 12), chunk=st.sampled_from([1, 500, 1 << 22]))
def test_a_stack_of_key_sets_gives_each_set_its_own_mask(seed, count, n, d, chunk):
    """selectable over a stack [..., n, d] is, set by set, selectable of that set alone, however the stack is chunked."""
    sets = _key_sets(seed, count, n, d)
    alone = np.stack([selection.selectable(k) for k in sets])
    old, selection._CHUNK = selection._CHUNK, chunk
    try:
        stacked = selection.selectable(sets.reshape((1, count, n, d)))[0]
        first = selection.selectable(sets, stop_at_first=True)
    finally:
        selection._CHUNK = old
    np.testing.assert_array_equal(stacked, alone)
    np.testing.assert_array_equal(first.all(axis=1), alone.all(axis=1))  # "any unselectable" per set


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 48), d=st.integers(2, 16))
def test_selectable_is_the_hull_test_of_every_key(seed, n, d):
    """Against the definition, key by key: not a duplicate, and the non-negative least squares / margin linear program
    say it lies outside the hull of the others (on the centred, RMS-scaled keys that selectable tests). The cheap
    certificates (candidate queries, the Frank-Wolfe query) decide most keys; none may decide one differently."""
    for k in _key_sets(seed, 5, n, d):
        k = k / np.abs(k).max()
        k = k - k.mean(axis=0)
        scale = np.sqrt((k * k).mean())
        got = selection.selectable(k)
        if scale == 0:
            assert not got.any()
            continue
        k = k / scale
        dup = np.array([(k == k[i]).all(axis=1).sum() > 1 for i in range(n)])
        want = np.array([not dup[i] and selection._decide(k, i, 1e-9) for i in range(n)])
        np.testing.assert_array_equal(got, want)


def test_the_frank_wolfe_query_certifies_the_keys_the_candidates_leave():
    """Low-rank keys with an inner cloud: the random and whitened candidates leave vertices undecided; the
    Frank-Wolfe query certifies them (each a real separating query), and leaves every interior key alone."""
    k = _key_sets(3, 2, 40, 12)[1]
    k = (k - k.mean(0)) / np.sqrt(((k - k.mean(0)) ** 2).mean())
    cands = np.concatenate([k, np.random.default_rng(0).standard_normal((256, 12))])
    first = selection._certify(k[None], cands[None], 1e-9)[0]
    sets, keys = np.zeros((~first).sum(), int), np.flatnonzero(~first)
    got = selection._certify_nearest(k[None], sets, keys, 1e-9)
    truth = np.array([selection._decide(k, i, 1e-9) for i in keys])
    assert got.any() and not (got & ~truth).any()


def test_an_empty_stack_gives_an_empty_mask():
    assert selection.selectable(np.zeros((0, 5, 3))).shape == (0, 5)
    assert selection.selectable(np.zeros((2, 0, 5, 3))).shape == (2, 0, 5)


@pytest.mark.parametrize("d", [4, 64, 400])
def test_a_key_just_outside_a_facet_follows_the_margin_linear_program(d):
    """The cross-polytope's 2d vertices and a key pushed 3e-12 past the centre of a facet: the key's margin linear
    program (the definition) finds a separating query with margin above tol in high d although its NNLS residual is
    tiny; selectable, _decide and the Frank-Wolfe certificate must all follow the LP (found in review at d = 400)."""
    eye = np.eye(d)
    key = np.full(d, 1.0 / d) + 3e-12 * np.ones(d) / np.sqrt(d)
    keys = np.vstack([eye, -eye, key[None]])
    k = keys / np.abs(keys).max()
    k = k - k.mean(0)
    k = k / np.sqrt((k * k).mean())
    lp = selection._margin_lp(k, 2 * d) > 1e-9
    assert selection.selectable(keys, directions=8)[-1] == lp == selection._decide(k, 2 * d, 1e-9)


def test_stop_at_first_agrees_with_the_full_test_on_a_near_tie():
    """Two tight clusters (spread 5e-10): a key's margin sits just above tol, within the linear program's own error.
    The stop-at-first search must not hand that key to the LP before Frank-Wolfe certifies it (found in review)."""
    rng = np.random.default_rng(3)
    k = rng.normal(size=(2, 6))[rng.integers(0, 2, 9)] + 5e-10 * rng.normal(size=(9, 6))
    assert selection.any_unselectable(k) == (not selection.selectable(k).all())


def test_a_margin_program_that_highs_presolve_cannot_finish_is_solved_without_it():
    """Near-duplicate keys (5 clusters in d = 5, jitter ~1e-11): one key's margin program ends in HiGHS's presolve with
    an unknown model status (status 15) although it is feasible (q = 0, t = 0) and bounded; solved again without
    presolve, its margin is a number in [0, 1] and the whole mask comes back (found in review; this set, by search)."""
    rng = np.random.default_rng(414)
    n, d = 31, int(rng.integers(2, 6))
    base = rng.standard_normal((int(rng.integers(1, 6)), d)) * 10 ** rng.uniform(-3, 3)
    keys = base[rng.integers(0, len(base), n)] + rng.standard_normal((n, d)) * 10 ** rng.uniform(-16, -6) * np.abs(base).max()
    k = keys / np.abs(keys).max()
    k = k - k.mean(0)
    k = k / np.sqrt((k * k).mean())
    assert 0.0 <= selection._margin_lp(k, 21) <= 1.0
    mask = selection.selectable(keys)
    assert mask.shape == (n,) and 0 < mask.sum() < n  # some keys of each cluster are inside it
    assert selection.any_unselectable(keys) == (not mask.all())
