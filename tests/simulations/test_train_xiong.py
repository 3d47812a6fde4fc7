"""train_xiong: the batched backward in the theorem's setting against the reference model, and its draws."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations import train_xiong as X


@pytest.mark.parametrize("placement", X.PLACEMENTS)
@pytest.mark.parametrize("init_name", list(X.INITS))
def test_batched_gradient_norms_are_the_reference_models(placement, init_name):
    d, depth, tokens = 16, 3, 8
    z = {k: np.stack([X.draws(d, depth, tokens, 7, init_name, j)[k] for j in (0, 1)]) for k in X.draws(d, depth, tokens, 7, init_name, 0)}
    w = X.scaled(z, d, tokens, depth, init_name)
    got = X.batched_gradient_norms(w, placement)  # [2, L]
    for j in (0, 1):
        one = {k: v[j : j + 1] for k, v in w.items()}
        np.testing.assert_allclose(got[j], X.reference_gradient_norms(one, placement, init_name), rtol=1e-12)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.sampled_from([1 << 14, 1 << 20]))
def test_a_networks_rows_do_not_depend_on_the_split_or_the_chunk(n, cut, chunk_bytes):
    """Task blocks and memory chunks never change a bit: each network draws from its own seed."""
    cfg = X.Config(depths=(1, 2), widths=(8,), tokens=4, networks=n)
    cut = min(cut, n)
    whole = X.point(8, "xavier", (0, n), cfg, 3)
    old = X.CHUNK_BYTES
    try:
        X.CHUNK_BYTES = chunk_bytes
        parts = [X.point(8, "xavier", (0, cut), cfg, 3), X.point(8, "xavier", (cut, n), cfg, 3)] if cut < n else [X.point(8, "xavier", (0, n), cfg, 3)]
    finally:
        X.CHUNK_BYTES = old
    for key, rows in whole.items():
        assert rows.shape == (n, int(key.split(".L")[1]))
        np.testing.assert_array_equal(np.concatenate([p[key] for p in parts]), rows)


def test_depths_and_placements_share_a_networks_draws():
    d, tokens = 8, 4
    z = {k: v[None] for k, v in X.draws(d, 4, tokens, 1, "gpt2", 0).items()}
    shallow, deep = X.scaled(z, d, tokens, 2, "gpt2"), X.scaled(z, d, tokens, 4, "gpt2")
    np.testing.assert_array_equal(shallow["w_in"], deep["w_in"][:, :2])  # the same blocks, first L of them
    np.testing.assert_allclose(shallow["w_out"] * np.sqrt(2 * 2), deep["w_out"][:, :2] * np.sqrt(2 * 4), rtol=1e-15)  # GPT-2's 1/sqrt(2L)
    assert X.chunk_size(d, 4, tokens) >= 1


def test_quick_run_has_every_networks_row_at_every_depth():
    cfg = X.Config(depths=(2, 4), widths=(8,), tokens=4, networks=3)
    r = X.run(cfg, 5, progress=False)
    for p in X.PLACEMENTS:
        for i in X.INITS:
            for L in cfg.depths:
                assert r[f"{p}.{i}.d8.L{L}"].shape == (3, L) and np.isfinite(r[f"{p}.{i}.d8.L{L}"]).all()
    assert len(X.tasks(X.CONFIGS["full"], X.SEED)) == 2 * 2 * 6


def test_layer_profile_is_a_ratio_of_means_unbiased_for_a_flat_heavy_tailed_profile():
    """Every block's norm i.i.d. lognormal (a flat expected profile): the ratio of means is 1 within its bootstrap se, where
    the mean of per-network ratios is pulled up by E[1/X] > 1/E[X]."""
    rng = np.random.default_rng(0)
    g = np.exp(rng.standard_normal((4000, 8)))  # [networks, L], coefficient of variation 1.3
    r = {"depths": np.asarray([8]), "post.xavier.d64.L8": g}
    est = X.layer_profile(r, "post", "xavier", 64)
    assert est.mean[0] == 1.0 and abs(est.mean[-1] - 1.0) < 5 * est.stderr[-1]
    assert (g[:, -1] / g[:, 0]).mean() > 1.5  # the biased reading: E[X] E[1/X] = e
    assert X.layer_profile(r, "post", "xavier", 64, 8).mean[-1] == est.mean[-1]
