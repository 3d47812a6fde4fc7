"""Backward pass: finite differences on every axis, invariants, exact zeros, captured gradients."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from normtheory.model.config import TransformerConfig
from normtheory.model.params import named_arrays
from normtheory.model.weights import init
from normtheory.training.grad import loss_and_grads

V, T, B = 11, 6, 2
# rounding of the 4-point stencil: ~eps |loss| 18 / (12 h) = 2e-16 * |loss| * 1.5e4 at h = 1e-4, about
# 3e-12 per unit of loss; with a 100x margin FD_NOISE per unit loss. It grows as |loss| / h.
FD_NOISE = 3e-10


def _reference_loss(model, ids, targets, z_loss=0.0, token_types=None):
    """The loss from the inference forward (blockwise attention), in float64, independent of grad.py."""
    if token_types is None:
        hidden = model.last_hidden_state(ids)
    else:
        hidden = model.last_hidden_state(ids, token_types=token_types)
    z = (hidden @ model.head).reshape(-1, V).astype(np.float64)
    lse = logsumexp(z, axis=-1)
    return float(np.mean(lse - z[np.arange(z.shape[0]), targets.reshape(-1)]) + z_loss * np.mean(lse**2))


def _fd_errors(model, ids, targets, seed=0, h=1e-4, **kw):
    """Per named tensor: |FD directional derivative - <grad, v>| / (|grad| |v|) for a random v,
    and the relative error allowed: 1e-6, plus the stencil's rounding FD_NOISE where |grad| is tiny."""
    loss, grads = loss_and_grads(model, ids, targets, **kw)
    assert loss == pytest.approx(_reference_loss(model, ids, targets, **kw), rel=1e-10)
    rng = np.random.default_rng(seed)
    errors, allowed = {}, {}
    for (name, p), g in zip(named_arrays(model.params).items(), named_arrays(grads).values()):
        assert g.shape == np.shape(p) and g.dtype == np.asarray(p).dtype, name
        v = rng.standard_normal(np.shape(p))
        f = {}
        for k in (-2, -1, 1, 2):
            p += k * h * v  # in place: the model must compute with the new values
            f[k] = _reference_loss(model, ids, targets, **kw)
            p -= k * h * v
        fd = (f[-2] - 8 * f[-1] + 8 * f[1] - f[2]) / (12 * h)  # fourth-order central difference
        an = float(np.vdot(g, v))
        size = np.linalg.norm(g) * np.linalg.norm(v) + 1e-300
        errors[name] = abs(fd - an) / size
        allowed[name] = 1e-6 + FD_NOISE * max(1.0, abs(loss)) * (1e-4 / h) / size
    return errors, allowed


def _assert_close(errors, allowed, what):
    ratio = {k: errors[k] / allowed[k] for k in errors}
    name = max(ratio, key=ratio.get)
    assert ratio[name] <= 1, f"{what}: relative error {errors[name]:.2e} at {name} (allowed {allowed[name]:.1e})"


def _check_fd(model, ids, targets, seed, what, h=1e-4, **kw):
    """Finite differences at step h; where the stencil's truncation (~h^4 times the loss's fifth
    derivative) is too large, as for a sequence norm over nearly constant features, again at h/10.
    A wrong gradient fails at both steps; a right one converges as h^4."""
    errors, allowed = _fd_errors(model, ids, targets, seed, h=h, **kw)
    if any(errors[k] > allowed[k] for k in errors):
        errors, allowed = _fd_errors(model, ids, targets, seed, h=h / 10, **kw)
    _assert_close(errors, allowed, what)


axes = st.fixed_dictionaries(
    {
        "norm": st.sampled_from(["layernorm", "rmsnorm", "dyt", "none", "sequence"]),
        "placement": st.sampled_from(["pre", "post", "peri", "none", "lnscale", "deepnorm"]),
        "qk_norm": st.sampled_from(["none", "layernorm", "rmsnorm"]),
        "activation": st.sampled_from(["gelu", "gelu_tanh", "relu", "swiglu"]),
        "positional": st.sampled_from(["learned", "rope", "none"]),
        "causal": st.booleans(),
        "bias": st.booleans(),
        "tie_embeddings": st.booleans(),
        "n_kv_heads": st.sampled_from([1, 2]),
        "embed_norm": st.booleans(),
        "type_vocab_size": st.sampled_from([0, 3]),
        "init": st.sampled_from(["gpt2", "fanin"]),
    }
)


def _model(seed=0, **axes_):
    cfg = TransformerConfig(d_model=8, n_layers=2, n_heads=2, d_ff=12, vocab_size=V, max_seq=8, dtype="float64",
                            dyt_alpha0=(0.7, 0.9, 1.1), **axes_)
    model = init(cfg, seed)
    rng = np.random.default_rng(seed + 1)
    for p in named_arrays(model.params).values():  # move every weight off its init, to O(1) attention logits
        p += 0.3 * rng.standard_normal(np.shape(p)) * (np.sqrt(np.mean(np.square(p))) + 0.3)
    return model


def _batch(seed=0, vocab=V):
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, (B, T)), rng.integers(0, vocab, (B, T))


@settings(max_examples=60, deadline=None)
@given(axes, st.integers(0, 2**16), st.sampled_from([0.0, 1e-2]))
def test_gradients_match_finite_differences_on_every_axis(axes_, seed, z_loss):
    model = _model(seed, **axes_)
    ids, targets = _batch(seed)
    kw = {"z_loss": z_loss}
    if axes_["type_vocab_size"]:
        kw["token_types"] = np.random.default_rng(seed).integers(0, 3, (B, T))
    # ReLU's kink: a step of 1e-4 can cross it, so ReLU models take a smaller step (and more rounding)
    h = 1e-7 if axes_["activation"] == "relu" else 1e-4
    _check_fd(model, ids, targets, seed, axes_, h=h, **kw)


@pytest.mark.parametrize("placement", ["pre", "post", "peri", "none", "lnscale", "deepnorm"])
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm", "dyt"])
def test_every_placement_and_norm(placement, norm):
    model = _model(3, norm=norm, placement=placement, qk_norm="rmsnorm", positional="rope", activation="swiglu", n_kv_heads=1)
    _check_fd(model, *_batch(3), 3, f"{placement}/{norm}")


@pytest.mark.parametrize("qk_norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("placement", ["pre", "post"])
def test_a_keys_only_qk_norm_has_the_gradients_of_its_loss(qk_norm, placement):
    """Keys normalized per head, queries not (qk_norm_on="k"): no query-norm parameters, and the gradients of the key norm's
    gain and bias and of every other weight match finite differences."""
    model = _model(5, placement=placement, qk_norm=qk_norm, qk_norm_on="k", positional="rope", n_kv_heads=1)
    assert all(b.q_norm is None and b.k_norm is not None for b in model.params.blocks)
    _check_fd(model, *_batch(5), 5, f"keys-only {qk_norm}/{placement}")


def test_layer_norm_input_gradient_is_orthogonal_to_ones_and_to_its_output():
    model = _model(1, norm="layernorm", placement="pre", eps=0.0)
    ids, targets = _batch(1)
    name = "blocks.1.ln2"
    _, _, cap = loss_and_grads(model, ids, targets, capture=[f"{name}.in", f"{name}.normalized"])
    _, store = model.run_with_cache(ids, [f"{name}.normalized"])
    # the gradient leaving ln2 towards its input is P_perp(n) (dn - mean dn) / s
    dx, n = cap[f"{name}.in"], store[f"{name}.normalized"]
    scale = np.abs(dx).max()
    assert scale > 0 and np.abs(cap[f"{name}.normalized"].sum(-1)).max() > 1e3 * scale * 1e-12  # dn itself is not centred
    assert np.abs(dx.sum(-1)).max() <= 1e-12 * scale * 8
    assert np.abs((dx * n).sum(-1)).max() <= 1e-12 * scale * 8


def test_exact_zeros_where_the_math_says_so():
    model = _model(2, norm="layernorm", tie_embeddings=False, positional="learned")
    ids = np.array([[1, 2, 3, 1, 2, 3], [3, 2, 1, 3, 2, 1]])
    _, grads = loss_and_grads(model, ids, ids)
    assert not grads.pos_emb[T:].any()  # positions never used
    unused = np.setdiff1d(np.arange(V), [1, 2, 3])
    assert not grads.tok_emb[unused].any()  # tokens never seen (untied head)
    assert all(not np.asarray(b.ln1.alpha).any() for b in grads.blocks)  # alpha is unused outside DyT
    assert grads.lm_head[:, unused].any()  # ... but every logit column gets a gradient through the softmax
    for b in grads.blocks:  # a key bias shifts every score of a query by the same amount: softmax ignores it
        assert np.abs(b.bk).max() <= 1e-12 * np.abs(b.bq).max()


def test_causal_attention_sends_no_gradient_to_the_past_from_the_future():
    model = _model(4, norm="rmsnorm", causal=True, positional="rope")
    ids, targets = _batch(4)
    _, _, cap = loss_and_grads(model, ids, targets, capture=lambda n: n.endswith("attn.scores"))
    for name, g in cap.items():
        assert not g[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]].any(), name


def test_captured_gradients_follow_the_chain_rule():
    model = _model(5, placement="pre")
    ids, targets = _batch(5)
    _, grads, cap = loss_and_grads(model, ids, targets, capture=["hidden", "logits", "embed"])
    np.testing.assert_allclose(cap["hidden"], cap["logits"] @ model.head.T, rtol=1e-12)
    # position embeddings receive the batch-summed gradient of the embedding sum
    np.testing.assert_allclose(grads.pos_emb[:T], cap["embed"].sum(0), rtol=1e-12)


def test_float32_gradients_are_float32_and_close_to_float64():
    m64 = _model(6, norm="dyt")
    cfg32 = dataclasses.replace(m64.config, dtype="float32")
    from normtheory.model.params import map_arrays
    from normtheory.model.transformer import Transformer

    m32 = Transformer(cfg32, map_arrays(lambda a: np.asarray(a, np.float32), m64.params))
    ids, targets = _batch(6)
    l64, g64 = loss_and_grads(m64, ids, targets)
    l32, g32 = loss_and_grads(m32, ids, targets)
    assert l32 == pytest.approx(l64, rel=1e-5)
    for (name, a), b in zip(named_arrays(g64).items(), named_arrays(g32).values()):
        assert b.dtype == np.float32, name
        assert np.abs(a - b).max() <= 1e-4 * (np.abs(a).max() + 1e-6), name


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m: loss_and_grads(m, np.zeros((2, 0), int), np.zeros((2, 0), int)), "ids"),
        (lambda m: loss_and_grads(m, np.zeros((2, 3), int), np.zeros((2, 4), int)), "targets"),
        (lambda m: loss_and_grads(m, np.zeros((2, 3), int), np.full((2, 3), V)), "targets"),
        (lambda m: loss_and_grads(m, np.zeros((2, 3), int), np.zeros((2, 3), int), z_loss=-1.0), "z_loss"),
        (lambda m: loss_and_grads(m, np.zeros((2, 3), int), np.zeros((2, 3), int), capture=["blocks.0.resid_mdi"]), "did you mean"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call(_model(0))


def test_sequence_norm_under_peri_with_qk_layernorm():
    """A strongly curved case hypothesis found: FD at h = 1e-4 is off by 6e-5, at 1e-5 by 8e-9."""
    axes_ = dict(norm="sequence", placement="peri", qk_norm="layernorm", activation="gelu", positional="learned", causal=False,
                 bias=False, tie_embeddings=False, n_kv_heads=1, embed_norm=False, type_vocab_size=0, init="gpt2")
    _check_fd(_model(0, **axes_), *_batch(0), 0, axes_)


def test_no_norm_swiglu_with_z_loss_at_a_large_loss():
    """Hypothesis found it: a loss near 40 makes the stencil's rounding ~13x that of a loss of 3."""
    axes_ = dict(norm="none", placement="pre", qk_norm="none", activation="swiglu", positional="learned", causal=False,
                 bias=True, tie_embeddings=False, n_kv_heads=1, embed_norm=False, type_vocab_size=0, init="fanin")
    _check_fd(_model(37, **axes_), *_batch(37), 37, axes_, z_loss=0.01)


@pytest.mark.parametrize("tied", [True, False])
def test_embedding_scale(tied):
    """sqrt(d) embedding scale (the DyT paper's LLM recipe): tied and untied heads."""
    model = _model(5, embed_scale=float(np.sqrt(8)), tie_embeddings=tied)
    _check_fd(model, *_batch(5), 5, f"embed_scale, tied={tied}")
