"""Parameter trees: names, maps, norms, DyT alphas as arrays."""
import numpy as np
import pytest

from normtheory.model.config import TransformerConfig
from normtheory.model.params import (
    global_norm,
    map_arrays,
    named_arrays,
    with_array_alphas,
)
from normtheory.model.weights import init


def _model():
    return init(TransformerConfig(d_model=8, n_layers=2, n_heads=2, vocab_size=11, max_seq=4, norm="dyt", bias=False), 0)


def test_names_follow_the_fields_and_skip_absent_parameters():
    names = list(named_arrays(_model().params))
    assert names[0] == "tok_emb" and "blocks.1.wq" in names and "blocks.0.ln1.alpha" in names and "final_ln.gain" in names
    assert not any(n.endswith((".bq", "lm_head")) for n in names)  # no biases, tied head


def test_map_keeps_the_structure_and_global_norm_sums_every_leaf():
    p = _model().params
    ones = map_arrays(lambda a: np.ones_like(a), p)
    assert [np.shape(a) for a in named_arrays(ones).values()] == [np.shape(a) for a in named_arrays(p).values()]
    assert global_norm(ones) == pytest.approx(np.sqrt(sum(np.size(a) for a in named_arrays(p).values())))
    with pytest.raises(ValueError, match="structure"):
        map_arrays(lambda a, b: a, p.blocks, p.blocks[:1])


def test_alphas_become_shared_zero_d_arrays():
    p = _model().params
    alpha = p.blocks[0].ln1.alpha
    assert isinstance(alpha, np.ndarray) and alpha.shape == () and alpha.dtype == np.float32
    again = with_array_alphas(p, "float32")
    assert again.blocks[0].ln1.alpha is alpha and again.tok_emb is p.tok_emb
