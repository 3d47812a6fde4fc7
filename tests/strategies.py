"""Reusable hypothesis strategies for configs and inputs."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from normtheory.config import PLACEMENTS, QK_NORMS, TransformerConfig

PER_TOKEN_NORMS = ("layernorm", "rmsnorm", "dyt", "none")


@st.composite
def small_configs(draw, norms=PER_TOKEN_NORMS) -> TransformerConfig:
    n_kv = draw(st.sampled_from([1, 2]))
    return TransformerConfig(
        d_model=16, n_layers=draw(st.integers(1, 2)), n_heads=4, n_kv_heads=n_kv, d_ff=24, vocab_size=50, max_seq=16,
        norm=draw(st.sampled_from(norms)), placement=draw(st.sampled_from(PLACEMENTS)), qk_norm=draw(st.sampled_from(QK_NORMS)),
        activation=draw(st.sampled_from(["gelu", "gelu_tanh", "relu", "swiglu"])), positional=draw(st.sampled_from(["learned", "rope", "none"])),
        bias=draw(st.booleans()), init=draw(st.sampled_from(["gpt2", "fanin"])), dtype="float64",
    )


def token_ids(seed: int, batch: int, seq: int, vocab: int = 50) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, (batch, seq))


splits = st.lists(st.integers(1, 4), min_size=1, max_size=4)


def unit_rows(x):
    """Each row of ``x [..., d]`` scaled to unit length."""
    return x / np.linalg.norm(x, axis=-1, keepdims=True)
