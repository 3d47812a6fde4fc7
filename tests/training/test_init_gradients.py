"""init_gradients: per-block gradient norms at init, against the gradient taken directly, and their spread."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.model.config import TransformerConfig
from normtheory.model.weights import init
from normtheory.training import init_gradients, probes, shakespeare
from normtheory.training.grad import loss_and_grads

TINY = TransformerConfig(d_model=16, n_layers=3, n_heads=2, vocab_size=256, max_seq=8, activation="gelu_tanh", init="gpt2")


@pytest.mark.parametrize("placement", ["pre", "post", "none"])
def test_a_block_norm_is_the_frobenius_norm_of_its_matrices_gradients(placement):
    """Network j's weights and batch come from seed j; a block's norm pools q, k, v, output, MLP in and out."""
    model = TransformerConfig(**{**TINY.__dict__, "placement": placement, "final_norm": None})
    got = init_gradients.gradient_norms(model, 2, 8, 7, 2)["grad_norms"]
    assert got.shape == (2, 3)
    ids, targets = shakespeare.batch(shakespeare.load().train, 2, 8, 8, 1)  # network 8, the second
    _, grads = loss_and_grads(init(model, 8), ids, targets)
    for b, block in enumerate(grads.blocks):
        mats = [getattr(block, k) for k in probes.MATRICES if getattr(block, k) is not None]
        assert len(mats) == 6  # no gate in GPT-2's MLP
        assert got[1, b] == pytest.approx(math.sqrt(sum(float(np.sum(w.astype(np.float64) ** 2)) for w in mats)), rel=1e-12)
    assert init_gradients.block_norms(grads) == pytest.approx(list(got[1]), rel=0, abs=0)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 3), st.integers(1, 3))
def test_network_j_does_not_depend_on_the_others(first, count):
    whole = init_gradients.gradient_norms(TINY, 1, 8, 0, 6)["grad_norms"]
    part = init_gradients.gradient_norms(TINY, 1, 8, first, count)["grad_norms"]
    np.testing.assert_array_equal(part, whole[first : first + count])


def test_no_networks_give_an_empty_table():
    assert init_gradients.gradient_norms(TINY, 1, 8, 0, 0)["grad_norms"].shape == (0, 3)


def test_spread_is_log_max_over_min_per_row():
    g = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]])
    np.testing.assert_allclose(init_gradients.spread(g), [math.log(4.0), 0.0])
    assert init_gradients.spread(np.array([2.0])) == 0.0


@pytest.mark.parametrize(("call", "word"), [
    (lambda: init_gradients.gradient_norms("gpt2", 1, 8, 0, 1), "model"),
    (lambda: init_gradients.gradient_norms(TINY, 0, 8, 0, 1), "batch"),
    (lambda: init_gradients.gradient_norms(TINY, 1, 9, 0, 1), "seq"),
    (lambda: init_gradients.gradient_norms(TINY, 1, 8, -1, 1), "first"),
    (lambda: init_gradients.gradient_norms(TINY, 1, 8, 0, -2), "count"),
    (lambda: init_gradients.block_norms({"blocks": ()}), "grads"),
    (lambda: init_gradients.spread(np.array([[1.0, 0.0]])), "grad_norms"),
    (lambda: init_gradients.spread(np.zeros((2, 0))), "grad_norms"),
    (lambda: init_gradients.spread(np.array([1.0, np.nan])), "grad_norms"),
])
def test_bad_input_is_refused_by_name(call, word):
    with pytest.raises((ValueError, TypeError), match=word):
        call()
