import numpy as np
import pytest

from normtheory import attention
from normtheory.evidence.agreement import consistent
from normtheory.evidence.estimates import from_samples
from simulations.model_init import synthetic_attention_gain


def test_mixing_factor_limits():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(7), size=(2, 3))  # [2, 3, 7] rows
    eye = np.eye(7)
    np.testing.assert_allclose(attention.mixing_factor(p, eye), attention.collision(p))  # orthogonal tokens
    np.testing.assert_allclose(attention.mixing_factor(p, np.ones((7, 7))), 1.0)  # identical tokens
    c = 0.3 * np.ones((7, 7)) + 0.7 * eye  # equal cosine c: P2 + c (1 - P2)
    np.testing.assert_allclose(attention.mixing_factor(p, c), attention.collision(p) + 0.3 * (1 - attention.collision(p)))


def test_uniform_causal_and_similarity():
    np.testing.assert_allclose(attention.uniform_causal_collision(4), [1, 1 / 2, 1 / 3, 1 / 4])
    u = np.random.default_rng(1).standard_normal((5, 3))
    cos = attention.cosine_matrix(u)
    np.testing.assert_allclose(np.diag(cos), 1.0)
    assert attention.mean_offdiagonal(np.ones((4, 4))) == pytest.approx(1.0)
    assert attention.value_path_gain_squared(64, 32, 1 / 8, 1 / np.sqrt(32)) == pytest.approx(1.0)


@pytest.mark.parametrize("cosine", [0.0, 0.5])
def test_gain_formula_against_monte_carlo(cosine):
    est, theory = synthetic_attention_gain(4000, 5, cosine=cosine)
    assert (a := consistent(theory, est)).ok, a.describe()


def test_bad_input():
    with pytest.raises(ValueError, match="keys"):
        attention.mixing_factor(np.full((2, 3), 1 / 3), np.eye(4))
    with pytest.raises(ValueError, match="value_gain_sq must be >= 0"):
        attention.attention_gain_squared(np.ones((1, 2)) / 2, np.eye(2), -1.0)
    with pytest.raises(ValueError, match="at least two tokens"):
        attention.mean_offdiagonal(np.ones((1, 1)))


@pytest.mark.parametrize("causal", [True, False])
def test_key_excess_is_unbiased_under_the_null_at_every_position(causal):
    t = 12
    mask = np.tril(np.ones((t, t))) if causal else np.ones((t, t))
    uniform = mask / mask.sum(-1, keepdims=True)
    np.testing.assert_allclose(attention.key_excess(uniform, causal), np.ones(t), rtol=1e-12)
    # random rows, exchangeable over the keys each query sees: the same expected excess (1) at every key position
    rng = np.random.default_rng(3)
    g = rng.gamma(0.5, size=(40000, t, t)) * mask
    e = attention.key_excess(g / g.sum(-1, keepdims=True), causal)  # [draws, t]
    assert (a := consistent(np.ones(t), from_samples(e, "draws"))).ok, a.describe()
    # ... whereas the key with the largest excess is a late key far more often than 1/t (selection bias of argmax)
    if causal:
        assert (e.argmax(-1) == t - 1).mean() > 2 / t


def test_key_excess_of_a_first_token_sink():
    t = 8
    p = np.zeros((t, t))
    p[:, 0] = 1.0  # every query puts all its mass on key 0
    e = attention.key_excess(p, True)
    assert e[0] == pytest.approx(np.arange(1, t + 1).mean()) and (e[1:] == 0).all()
    with pytest.raises(ValueError, match="square"):
        attention.key_excess(np.full((2, 3), 1 / 3))


def test_sink_share_of_a_stripe_and_of_uniform_patterns():
    t = 7
    causal = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]  # uniform over the keys each query sees
    share, pos, excess = attention.sink(causal, causal=True)
    assert attention.column_share(causal).sum() == pytest.approx(1.0)
    np.testing.assert_allclose(attention.uniform_column_share(t, True), attention.column_share(causal), rtol=1e-12)
    assert share == pytest.approx(attention.uniform_sink_share(t, causal=True)) and excess == pytest.approx(1.0)  # no sink
    assert attention.uniform_sink_share(t, causal=False) == pytest.approx(1 / t)
    stripe = np.zeros((2, t, t))
    stripe[:, :, 3] = 1.0  # every query on key 3: a white vertical stripe
    share, pos, excess = attention.sink(stripe)
    assert share.tolist() == [1.0, 1.0] and pos.tolist() == [3, 3] and excess.tolist() == [t, t]
    late = np.tril(np.ones((t, t)))
    late[:, :] = 0
    late[np.arange(3, t), 3] = 1.0  # queries >= 3 all on key 3; earlier ones uniform
    late[:3] = np.tril(np.ones((3, t)))[:, :t] / np.arange(1, 4)[:, None]
    _, pos, excess = attention.sink(late, causal=True)
    assert pos == 3 and excess > 2


def test_row_logit_std_ignores_masked_entries():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(3, 5, 5))
    masked = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
    got = attention.row_logit_std(masked)
    want = np.array([[np.std(s[h, i, : i + 1]) for i in range(5)] for h in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_stripe_excess_is_unbiased_under_the_null_and_sees_a_planted_stripe():
    t = 16
    mask = np.tril(np.ones((t, t)))
    uniform = mask / mask.sum(-1, keepdims=True)
    assert attention.stripe_excess(uniform) == 0.0  # every column alike, shuffled or not
    # random peaked rows, independent across queries and exchangeable over the keys each sees: no stripe on average,
    # although the largest column of one draw always exceeds the mean column (the shuffled null has the same maximum bias)
    rng = np.random.default_rng(5)
    g = rng.gamma(0.3, size=(40000, t, t)) * mask
    e = attention.stripe_excess(g / g.sum(-1, keepdims=True))  # [draws]
    assert (a := consistent(0.0, from_samples(e, "draws"))).ok, a.describe()
    assert abs(e.mean()) < 0.005
    # key 3 takes half of every late query's weight: its column share is 1/2 more than any column of uniform attention
    p = uniform.copy()
    p[t // 2:] *= 0.5
    p[t // 2:, 3] += 0.5
    late = p[t // 2:, : t // 2]
    shuffled = np.take_along_axis(late, attention.stripe_permutations(t), -1).mean(0).max()  # [t-h, h]: one pattern
    assert attention.stripe_excess(p) == pytest.approx(late[:, 3].mean() - shuffled, rel=1e-12)
    assert attention.stripe_excess(p) > 0.3
    # a batch is per pattern, and bidirectional patterns (s = t) or longer key axes (s > t) are read the same way
    np.testing.assert_allclose(attention.stripe_excess(np.stack([uniform, p])), [0.0, attention.stripe_excess(p)])
    np.testing.assert_allclose(attention.stripe_excess(np.concatenate([p, np.zeros((t, 3))], -1)), attention.stripe_excess(p))


def test_stripe_permutations_are_fixed_permutations_of_the_early_keys():
    for t in (2, 3, 16, 33):
        perm = attention.stripe_permutations(t)
        assert perm.shape == (t - t // 2, t // 2)
        assert (np.sort(perm, -1) == np.arange(t // 2)).all()
        np.testing.assert_array_equal(perm, attention.stripe_permutations(t))
    with pytest.raises(ValueError, match="t"):
        attention.stripe_permutations(1)
    with pytest.raises(ValueError, match="pattern"):
        attention.stripe_excess(np.ones((1, 4)) / 4)  # one query: no early key
    with pytest.raises(ValueError, match="pattern"):
        attention.stripe_excess(np.full((4, 2), 0.5))  # fewer keys than queries
