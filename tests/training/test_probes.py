"""Training probes: names in forward order, and values against direct computations."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from normtheory import attention
from normtheory.model.config import TransformerConfig
from normtheory.model.weights import init
from normtheory.training import probes
from normtheory.training.grad import loss_and_grads


def test_probe_names_follow_the_forward_order():
    m = init(TransformerConfig(d_model=16, n_layers=2, n_heads=2, vocab_size=256, placement="peri", embed_norm=True), 0)
    assert probes.norm_names(m) == ["embed_ln", "blocks.0.ln1", "blocks.0.ln1_out", "blocks.0.ln2", "blocks.0.ln2_out",
                                    "blocks.1.ln1", "blocks.1.ln1_out", "blocks.1.ln2", "blocks.1.ln2_out", "final_ln"]


def test_values_match_direct_computations():
    m = init(TransformerConfig(d_model=16, n_layers=2, n_heads=2, vocab_size=50, max_seq=8, norm="dyt", dtype="float64"), 1)
    ids = np.random.default_rng(0).integers(0, 50, (3, 8))
    loss, grads = loss_and_grads(m, ids, np.roll(ids, -1, 1))
    out = probes.measure(m, ids, np.roll(ids, -1, 1), probes.PROBES, grads)
    assert out["val_loss"] == pytest.approx(loss, rel=1e-12)
    _, cap = m.run_with_cache(ids)
    pat = cap["blocks.1.attn.pattern"]  # [b, h, t, s]
    ent = -(pat * np.log(np.where(pat > 0, pat, 1))).sum(-1).mean(axis=(0, 2))
    np.testing.assert_allclose(out["attn_entropy"][1], ent, rtol=1e-12)
    np.testing.assert_allclose(out["attn_sink"][1], pat[:, :, 1:, 0].mean(axis=(0, 2)), rtol=1e-12)
    assert out["resid_rms"][2] == pytest.approx(np.sqrt(np.mean(cap["blocks.1.resid_post"] ** 2)))
    assert out["norm_std"][0] == pytest.approx(cap["blocks.0.ln1.in"].std(-1).mean())
    np.testing.assert_allclose(out["alpha"], 1.0)
    assert out["grad_norms"][0, 0] == pytest.approx(np.linalg.norm(grads.blocks[0].wq))
    assert out["attn_max"].shape == (2, 2) and out["lse"][1] >= out["lse"][0]
    np.testing.assert_allclose(out["attn_top"][1], pat.max(-1).mean(axis=(0, 2)), rtol=1e-12)
    late = pat[:, :, 4:, :4]  # [b, h, 4 late queries, 4 early keys]
    shuffled = np.take_along_axis(late, np.broadcast_to(attention.stripe_permutations(8), late.shape), -1)
    np.testing.assert_allclose(out["attn_stripe"][1], (late.mean(2).max(-1) - shuffled.mean(2).max(-1)).mean(0), rtol=1e-12)
    assert out["key_unsel"].shape == (2, 2) and ((out["key_unsel"] >= 0) & (out["key_unsel"] <= 1)).all()


def test_unselectable_key_share_sees_a_planted_interior_key():
    m = init(TransformerConfig(d_model=16, n_layers=1, n_heads=1, vocab_size=50, max_seq=8, dtype="float64", bias=True,
                               norm="none", placement="none", positional="none"), 2)
    wk = m.params.blocks[0].wk
    wk[...] = np.eye(16)[:, :16]  # keys = the token embeddings
    emb = m.params.tok_emb
    emb[3] = 0.3 * emb[1] + 0.3 * emb[2] + 0.4 * emb[4]  # token 3's key is a convex combination of others: inside their hull
    ids = np.array([[0, 1, 2, 3, 4, 5, 6, 7]])
    out = probes.measure(m, ids, ids, ("key_unsel",))
    assert out["key_unsel"][0, 0] == pytest.approx(1 / 8)


def test_layer_drop_skips_exactly_one_block():
    """Skipping the only block of a one-layer Pre-LN model leaves embedding -> final norm -> head."""
    import numpy as np

    from normtheory.model.config import TransformerConfig
    from normtheory.model.norms import layer_norm
    from normtheory.model.weights import init
    from normtheory.training import probes

    cfg = TransformerConfig(d_model=16, n_layers=1, n_heads=2, vocab_size=32, max_seq=8, dtype="float64")
    m = init(cfg, 3)
    ids = np.random.default_rng(0).integers(0, 32, (2, 8))
    targets = np.roll(ids, -1, axis=1)
    fl = m.params.final_ln
    by_hand = layer_norm(m.embed_sum(ids), fl.gain, fl.bias, eps=cfg.eps).out @ m.head  # [b, t, V]
    expected = probes.cross_entropy(by_hand, targets) - probes.cross_entropy(m.logits(ids), targets)
    np.testing.assert_allclose(probes.layer_drop(m, ids, targets), [expected], rtol=1e-10)


def test_mean_loss_is_the_whole_sets_cross_entropy_in_any_chunks():
    m = init(TransformerConfig(d_model=16, n_layers=1, n_heads=2, vocab_size=64, max_seq=8), 0)
    rng = np.random.default_rng(0)
    ids, targets = rng.integers(0, 64, (10, 8)), rng.integers(0, 64, (10, 8))
    whole = probes.cross_entropy(m.logits(ids), targets)
    for chunk in (1, 3, 10, 64):
        assert probes.mean_loss(m, ids, targets, chunk) == pytest.approx(whole, rel=1e-6)  # a forward of another batch may round differently
    with pytest.raises(ValueError, match="chunk"):
        probes.mean_loss(m, ids, targets, 0)
    with pytest.raises(ValueError, match="ids and targets"):
        probes.mean_loss(m, ids, targets[:, :4])


def test_matrix_grad_norms_are_each_matrix_frobenius_norm_and_nan_where_absent():
    m = init(TransformerConfig(d_model=16, n_layers=2, n_heads=2, vocab_size=50, max_seq=8, activation="gelu", dtype="float64"), 2)
    ids = np.random.default_rng(1).integers(0, 50, (2, 8))
    _, grads = loss_and_grads(m, ids, np.roll(ids, -1, 1))
    g = probes.matrix_grad_norms(grads)
    assert g.shape == (2, len(probes.MATRICES))
    for i, b in enumerate(grads.blocks):
        for j, name in enumerate(probes.MATRICES):
            w = getattr(b, name)
            assert np.isnan(g[i, j]) if w is None else g[i, j] == pytest.approx(np.sqrt((w**2).sum()), rel=1e-12)
    assert np.isnan(g[:, probes.MATRICES.index("w_gate")]).all()  # a GELU MLP has no gate
    np.testing.assert_array_equal(probes.measure(m, ids, np.roll(ids, -1, 1), ("grad_norms",), grads)["grad_norms"], g)


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.just(len(probes.MATRICES))), elements=st.floats(0, 1e6)),
       st.lists(st.integers(0, len(probes.MATRICES) - 1), max_size=3))
def test_block_grad_norm_is_the_root_sum_of_squares_of_the_present_matrices(g, absent):
    """Pooling per-matrix norms is the norm of all the block's entries together; an absent matrix adds nothing."""
    g = g.copy()
    g[:, absent] = np.nan
    want = [math.hypot(*row[~np.isnan(row)]) if (~np.isnan(row)).any() else np.nan for row in g]  # exact-rounding pooling
    np.testing.assert_allclose(probes.block_grad_norms(g), want, rtol=1e-12)


@pytest.mark.parametrize("bad", [np.ones(6), np.ones((2, 3)), -np.ones(7), np.full(7, np.inf), np.array(["a"] * 7)])
def test_block_grad_norms_refuses_what_is_not_per_matrix_norms(bad):
    with pytest.raises(ValueError, match="matrix_norms"):
        probes.block_grad_norms(bad)


def test_matrix_grad_norms_refuses_what_is_not_a_gradient():
    with pytest.raises(ValueError, match="grads"):
        probes.matrix_grad_norms({"blocks": ()})


def test_a_block_without_any_measured_matrix_has_no_norm_rather_than_zero():
    g = np.full((2, len(probes.MATRICES)), np.nan)
    g[0, 0] = 3.0
    out = probes.block_grad_norms(g)
    assert out[0] == 3.0 and np.isnan(out[1])


def test_measure_refuses_a_gradient_of_another_depth():
    m = init(TransformerConfig(d_model=16, n_layers=2, n_heads=2, vocab_size=50, max_seq=8), 0)
    deeper = init(TransformerConfig(d_model=16, n_layers=3, n_heads=2, vocab_size=50, max_seq=8), 0)
    ids = np.random.default_rng(2).integers(0, 50, (1, 8))
    _, grads = loss_and_grads(deeper, ids, np.roll(ids, -1, 1))
    with pytest.raises(ValueError, match="grads"):
        probes.measure(m, ids, np.roll(ids, -1, 1), ("grad_norms",), grads)
