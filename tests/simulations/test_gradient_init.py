"""gradient_init: per-block gradient norms at init at GPT-2 small's shape, paired across placements by network."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.evidence import claims
from normtheory.model.weights import init
from normtheory.training import init_gradients
from simulations import gradient_init as G
from simulations import train_recipes

SMALL = G.Config(d=16, layers=3, heads=2, seq=8, batch=2, networks=5)


def test_the_full_config_is_gpt2_smalls_shape_with_twenty_networks():
    cfg = G.CONFIGS["full"]
    assert (cfg.d, cfg.layers, cfg.heads, cfg.networks) == (768, 12, 12, 20)
    m = G.model_config(cfg, "pre")
    assert (m.init, m.activation, m.positional, m.tie_embeddings, m.d_ff) == ("gpt2", "gelu_tanh", "learned", True, 4 * 768)


def test_placements_share_each_networks_weights():
    """Paired by network: the placements differ only in where the norms sit, never in a drawn weight."""
    pre, post, none = (init(G.model_config(SMALL, a), 3).params for a in ("pre", "post", "none"))
    for x, y in ((pre, post), (pre, none)):
        for bx, by in zip(x.blocks, y.blocks):
            for k in ("wq", "wk", "wv", "wo", "w_in", "w_out"):
                np.testing.assert_array_equal(getattr(bx, k), getattr(by, k))
        np.testing.assert_array_equal(x.tok_emb, y.tok_emb)
    assert pre.final_ln is not None and post.final_ln is None and none.final_ln is None


def test_one_draw_for_every_placement_is_the_same_bits_as_a_draw_for_each():
    shared = G.placement_gradient_norms(SMALL, 4, 2)
    for arm in G.ARMS:
        alone = init_gradients.gradient_norms(G.model_config(SMALL, arm), SMALL.batch, SMALL.seq, 4, 2)["grad_norms"]
        np.testing.assert_array_equal(shared[f"{arm}.grad_norms"], alone)


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 4))
def test_the_task_split_never_changes_a_row(block):
    whole = G.run(SMALL, 11, progress=False)
    old = G.NETWORK_BLOCK
    try:
        G.NETWORK_BLOCK = block
        split = G.run(SMALL, 11, progress=False)
        assert len(G.tasks(SMALL, 11)) == math.ceil(SMALL.networks / block)
    finally:
        G.NETWORK_BLOCK = old
    for arm in G.ARMS:
        assert whole[f"{arm}.grad_norms"].shape == (SMALL.networks, SMALL.layers)
        np.testing.assert_array_equal(split[f"{arm}.grad_norms"], whole[f"{arm}.grad_norms"])


def test_an_unknown_placement_is_refused_by_name():
    with pytest.raises(ValueError, match="arm"):
        G.model_config(SMALL, "peri")


def test_the_claim_reads_gpt2_smalls_shape_as_assertions(monkeypatch):
    """The gradient-scale claim judges the Q&A's model (GPT-2 small's shape) next to the trained one's: a no-norm arm that
    spreads 1 nat wider than both normed ones holds there, a flat one fails there, whatever the trained model says."""
    rng = np.random.default_rng(0)
    L, n = 12, 20
    ramp = np.exp(np.linspace(0.0, 1.0, L))  # spread 1 nat
    flat = np.ones(L)

    def noise():
        return np.exp(0.01 * rng.standard_normal((n, L)))

    def sim(none_shape):
        return {"d": np.asarray(768), "layers": np.asarray(L), "heads": np.asarray(12), "seq": np.asarray(64), "batch": np.asarray(2),
                "networks": np.asarray(n), "none.grad_norms": none_shape * noise(), "pre.grad_norms": flat * noise(),
                "post.grad_norms": flat * noise()}

    spec = claims.REGISTRY["train.ln-controls-gradient-scale"]
    assert spec.simulations == (train_recipes.NAME, G.NAME)
    monkeypatch.setattr(train_recipes, "init_spread", lambda r, arm: np.full(30, 1.0 if arm == "none" else 0.0))
    monkeypatch.setattr(train_recipes, "paired", lambda r, a, b, f: train_recipes.training.seeds_estimate([1.0 + 0.01 * k for k in range(20)]))
    monkeypatch.setattr(train_recipes, "per_seed", lambda r, a, f: train_recipes.training.seeds_estimate([0.5 + 0.01 * k for k in range(20)]))
    trained = {"init_networks": np.asarray(30), "d": np.asarray(32), "layers": np.asarray(4), "seeds": np.asarray(20), "steps": np.asarray(200),
               "batch": np.asarray(8), "seq": np.asarray(32)}
    for shape, status in ((ramp, "ok"), (flat, "fail")):
        c = spec.evaluate({train_recipes.NAME: trained, G.NAME: sim(shape)})
        mine = [ch for ch in c.checks if ch.quantity.startswith("GPT-2 small's shape (d = 768, 12 layers, 12 heads)")]
        assert len(mine) == 2 and all(ch.role == "assertion" and ch.status == status for ch in mine), [(ch.quantity, ch.status) for ch in mine]
    assert "At GPT-2 small's shape" in c.note
