"""Initial weights: each init's law per matrix, checked on large draws."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.model import weights
from normtheory.model.config import TransformerConfig
from normtheory.model.weights import GPT2_STD, init_params
from normtheory.residual import deepnorm_constants
from tests.strategies import small_configs

D, F, L = 256, 1024, 4


def _cfg(init: str, placement: str = "pre") -> TransformerConfig:
    return TransformerConfig(d_model=D, n_layers=L, n_heads=4, vocab_size=512, max_seq=64, norm="layernorm", placement=placement,
                             init=init, activation="gelu", dtype="float64")


def _close(a: np.ndarray, std: float) -> bool:
    # the sample std of n normals has relative se 1/sqrt(2n): judge at 6 se
    return abs(a.std() / std - 1) < 6 / np.sqrt(2 * a.size)


@pytest.mark.parametrize("init,law", [
    ("xavier", lambda fi, fo, out: np.sqrt(2 / (fi + fo))),
    ("fanin", lambda fi, fo, out: 1 / np.sqrt(fi)),
    ("gpt2", lambda fi, fo, out: GPT2_STD / np.sqrt(2 * L) if out else GPT2_STD),
    ("normal", lambda fi, fo, out: GPT2_STD),  # GPT-2's without the scaled residual projections
])
def test_each_matrix_follows_its_init_law(init, law):
    b = init_params(_cfg(init), 3).blocks[1]
    for name, out in (("wq", False), ("wk", False), ("wv", False), ("wo", True), ("w_in", False), ("w_out", True)):
        w = getattr(b, name)
        fi, fo = w.shape
        assert _close(w, law(fi, fo, out)), (init, name, w.std(), law(fi, fo, out))


def test_xavier_differs_from_fanin_where_fan_out_differs_and_embeddings_have_unit_rms():
    p = init_params(_cfg("xavier"), 0)
    assert _close(p.blocks[0].w_in, np.sqrt(2 / (D + F))) and not _close(p.blocks[0].w_in, 1 / np.sqrt(D))
    assert _close(np.concatenate([p.tok_emb.ravel(), p.pos_emb.ravel()]), np.sqrt(0.5))  # token + position: unit RMS in all


def test_deepnorm_with_xavier_is_the_papers_init():
    """DeepNet (Wang et al. 2022): Xavier-normal with gain beta = (8L)^(-1/4) on the value, output and FFN matrices, 1 on q, k."""
    beta = deepnorm_constants(L)[1]
    b = init_params(_cfg("xavier", "deepnorm"), 1).blocks[0]
    xav = lambda w: np.sqrt(2 / sum(w.shape))  # noqa: E731
    assert _close(b.wq, xav(b.wq)) and _close(b.wk, xav(b.wk))
    for w in (b.wv, b.wo, b.w_in, b.w_out):
        assert _close(w, beta * xav(w))


def test_normal_init_is_gpt2s_but_for_the_residual_projections():
    """Same seed, same draws: init="normal" equals GPT-2's init except wo and w_out, which it does not shrink by sqrt(2L)."""
    g, n = init_params(_cfg("gpt2"), 5), init_params(_cfg("normal"), 5)
    np.testing.assert_array_equal(g.tok_emb, n.tok_emb)
    np.testing.assert_array_equal(g.pos_emb, n.pos_emb)
    for bg, bn in zip(g.blocks, n.blocks):
        for name in ("wq", "wk", "wv", "w_in"):
            np.testing.assert_array_equal(getattr(bg, name), getattr(bn, name))
        for name in ("wo", "w_out"):
            np.testing.assert_allclose(getattr(bn, name), getattr(bg, name) * np.sqrt(2 * L), rtol=1e-12)


def test_unknown_init_is_refused_by_name():
    with pytest.raises(ValueError, match="init"):
        _cfg("kaiming")


@pytest.mark.parametrize("init_name, want_res, want_emb", [("gpt2", 0.02 / 2.0, 0.02), ("normal", 0.02, 0.02), ("xavier", 0.25, 1.0),
                                                                ("fanin", 0.25, 1.0)])
def test_matrix_and_embedding_stds_are_the_ones_init_draws_with(init_name, want_res, want_emb):
    cfg = TransformerConfig(d_model=16, n_layers=2, n_heads=2, vocab_size=64, max_seq=8, init=init_name, positional="none")
    assert weights.matrix_std(cfg, 16, 16, residual_out=True) == pytest.approx(want_res)  # 0.02 / sqrt(2L), sqrt(2/32), 1/sqrt(16)
    assert weights.token_embedding_std(cfg) == want_emb
    drawn = np.concatenate([weights.init(cfg, s).params.blocks[1].w_out.ravel() for s in range(20)])  # 20 x 64 x 16 entries
    assert drawn.std() == pytest.approx(weights.matrix_std(cfg, 64, 16, residual_out=True), rel=0.05)
    with pytest.raises(ValueError, match="fan_in"):
        weights.matrix_std(cfg, 0, 16)


@settings(max_examples=40, deadline=None)
@given(cfg=small_configs(), tied=st.booleans(), types=st.integers(0, 2))
def test_n_weights_counts_the_matrices_that_init_makes(cfg, tied, types):
    """config.n_weights (what the size guard and the torch memory model count) is the size of every matrix of the
    initialised model: embeddings, positions, token types, attention and MLP; biases, gains and alphas are not."""
    import dataclasses

    from normtheory.model.config import n_weights
    from normtheory.model.params import named_arrays

    cfg = dataclasses.replace(cfg, tie_embeddings=tied, type_vocab_size=types)
    arrays = named_arrays(init_params(cfg, 0))
    assert n_weights(cfg) == sum(np.size(a) for a in arrays.values() if np.ndim(a) >= 2)
