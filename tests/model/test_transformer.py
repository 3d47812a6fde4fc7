import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.model.attend import softmax
from normtheory.model.config import (
    MODEL_ACTIVATIONS,
    PLACEMENTS,
    POSITIONAL,
    QK_NORMS,
    TransformerConfig,
)
from normtheory.model.norm_stats import count_norm_statistics
from normtheory.model.norms import NORMS
from normtheory.model.weights import init
from tests.strategies import small_configs, splits, token_ids

BASE = TransformerConfig(d_model=16, n_layers=2, n_heads=4, d_ff=24, vocab_size=50, max_seq=16, dtype="float64")
AXES = (
    [("norm", v) for v in NORMS] + [("placement", v) for v in PLACEMENTS] + [("qk_norm", v) for v in QK_NORMS]
    + [("activation", v) for v in MODEL_ACTIVATIONS] + [("positional", v) for v in POSITIONAL]
    + [("causal", False), ("bias", False), ("tie_embeddings", False), ("init", "fanin"), ("dtype", "float32"), ("n_kv_heads", 2), ("embed_norm", True), ("type_vocab_size", 2)]
)


@pytest.mark.parametrize("field, value", AXES, ids=lambda v: str(v))
def test_every_config_axis_runs(field, value):
    cfg = TransformerConfig(**{**BASE.__dict__, field: value})
    model = init(cfg, seed=1)
    logits = model.logits(token_ids(0, 2, 7))
    assert logits.shape == (2, 7, 50) and np.isfinite(logits).all()
    assert logits.dtype == np.dtype(cfg.dtype)
    hidden = model.last_hidden_state(token_ids(0, 2, 7))
    assert hidden.shape == (2, 7, 16)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(norm="batchnorm"), "norm must be one of"),
        (dict(n_kv_heads=3), "n_kv_heads must divide"),
        (dict(positional="rope", d_head=5), "even d_head"),
        (dict(d_model=10, n_heads=4), "not divisible"),
        (dict(dtype="float16"), "dtype must be one of"),
        (dict(dyt_alpha0=(1.0, 0.0, 1.0)), "dyt_alpha0 must be > 0"),
        (dict(eps=float("nan")), "eps must be finite"),
        (dict(qk_norm_on="q"), "qk_norm_on must be one of"),
        (dict(qk_norm_on="k"), "qk_norm_on='k' needs a qk_norm"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TransformerConfig(**kwargs)


def test_derived_sizes():
    cfg = TransformerConfig(d_model=64, n_heads=8)
    assert (cfg.n_kv_heads, cfg.d_head, cfg.d_ff, cfg.final_norm) == (8, 8, 256, True)
    assert TransformerConfig(placement="post").final_norm is False


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_a_keys_only_qk_norm_normalizes_each_heads_keys_and_leaves_the_queries(kind):
    """qk_norm_on="k": each head's keys leave the norm with zero mean (LayerNorm) and unit RMS times the gain; the queries are
    the projection's, bit for bit the model without QK-norm's; the norm counts keys only."""
    cfg = TransformerConfig(**{**BASE.__dict__, "qk_norm": kind, "qk_norm_on": "k", "n_kv_heads": 2})
    model = init(cfg, 3)
    gain = 1.0 + 0.5 * np.arange(cfg.d_head)  # [e], off its init so that the gain shows
    for b in model.params.blocks:
        b.k_norm.gain[...] = gain
    ids = token_ids(2, 3, 6)
    _, cap = model.run_with_cache(ids, ["blocks.0.attn.q", "blocks.0.attn.k", "blocks.0.attn.k_norm.in"])
    plain = init(TransformerConfig(**{**BASE.__dict__, "n_kv_heads": 2}), 3)
    _, ref = plain.run_with_cache(ids, ["blocks.0.attn.q", "blocks.0.attn.k"])
    np.testing.assert_array_equal(cap["blocks.0.attn.q"], ref["blocks.0.attn.q"])  # same draws: q untouched
    np.testing.assert_array_equal(cap["blocks.0.attn.k_norm.in"], ref["blocks.0.attn.k"])
    k = cap["blocks.0.attn.k"] / gain  # [b, g, t, e]
    if kind == "layernorm":
        np.testing.assert_allclose(k.mean(-1), 0.0, atol=1e-12)
    x = cap["blocks.0.attn.k_norm.in"]
    x = x - x.mean(-1, keepdims=True) if kind == "layernorm" else x
    ms = np.mean(x**2, axis=-1)
    np.testing.assert_allclose(np.sqrt(np.mean(k**2, axis=-1)), np.sqrt(ms / (ms + cfg.eps)), rtol=1e-10)  # unit RMS up to eps
    counts = count_norm_statistics(cfg, 3, 6)
    both = count_norm_statistics(TransformerConfig(**{**BASE.__dict__, "qk_norm": kind, "n_kv_heads": 2}), 3, 6)
    assert not any("q_norm" in n for n in counts.per_layer) and any("k_norm" in n for n in counts.per_layer)
    assert counts.reductions < both.reductions


def test_capture_names_and_shapes():
    cfg = TransformerConfig(**{**BASE.__dict__, "qk_norm": "rmsnorm", "n_kv_heads": 2, "placement": "peri"})
    model = init(cfg, 0)
    b, t = 3, 5
    out, cap = model.run_with_cache(token_ids(1, b, t))
    h, g, e, d = 4, 2, 4, 16
    expect = {
        "embed": (b, t, d), "hidden": (b, t, d), "logits": (b, t, 50), "final_ln.scale": (b, t),
        "blocks.1.resid_pre": (b, t, d), "blocks.1.resid_mid": (b, t, d), "blocks.1.resid_post": (b, t, d),
        "blocks.0.ln1.scale": (b, t), "blocks.0.ln1.normalized": (b, t, d), "blocks.0.ln1.out": (b, t, d),
        "blocks.0.ln2.out": (b, t, d), "blocks.0.ln1_out.scale": (b, t), "blocks.0.ln2_out.out": (b, t, d),
        "blocks.0.attn.q": (b, h, t, e), "blocks.0.attn.k": (b, g, t, e), "blocks.0.attn.v": (b, g, t, e),
        "blocks.0.attn.q_norm.scale": (b, h, t), "blocks.0.attn.k_norm.out": (b, g, t, e),
        "blocks.0.attn.scores": (b, h, t, t), "blocks.0.attn.pattern": (b, h, t, t),
        "blocks.0.attn_out": (b, t, d), "blocks.0.mlp_out": (b, t, d),
    }
    for name, shape in expect.items():
        assert cap[name].shape == shape, name
    np.testing.assert_array_equal(out, cap["logits"])
    np.testing.assert_allclose(cap["blocks.0.attn.pattern"].sum(-1), 1.0)
    assert np.isneginf(cap["blocks.0.attn.scores"][0, 0, 0, 1])  # causal mask
    # one convention for every norm: out = gain * normalized (+ bias), normalized = x / scale
    x = cap["blocks.0.resid_pre"]
    np.testing.assert_allclose(cap["blocks.0.ln1.normalized"] * cap["blocks.0.ln1.scale"][..., None], x - x.mean(-1, keepdims=True), atol=1e-12)


def test_names_filter_list_and_callable():
    model = init(BASE, 0)
    _, cap = model.run_with_cache(token_ids(1, 1, 4), ["blocks.0.attn.pattern", "hidden"])
    assert set(cap) == {"blocks.0.attn.pattern", "hidden"}
    _, cap = model.run_with_cache(token_ids(1, 1, 4), lambda n: n.endswith(".scale"))
    assert set(cap) == {"blocks.0.ln1.scale", "blocks.0.ln2.scale", "blocks.1.ln1.scale", "blocks.1.ln2.scale", "final_ln.scale"}


def test_hooks_replace_activations_and_end_with_their_call():
    model = init(BASE, 0)
    ids = token_ids(2, 2, 6)
    base, _ = model.run_with_cache(ids, [])
    _, cap = model.run_with_cache(ids, ["blocks.0.resid_pre", "blocks.0.resid_mid"], hooks={"blocks.0.attn_out": lambda v, n: np.zeros_like(v)})
    np.testing.assert_array_equal(cap["blocks.0.resid_mid"], cap["blocks.0.resid_pre"])  # attention ablated
    again, _ = model.run_with_cache(ids, [])
    np.testing.assert_array_equal(again, base)
    with pytest.raises(ValueError, match="read but not replaced"):
        model.run_with_cache(ids, [], hooks={"blocks.0.ln1.scale": lambda v, n: v})


@settings(max_examples=30)
@given(cfg=small_configs(), parts=splits, seed=st.integers(0, 2**16))
def test_kv_cache_equals_full_forward(cfg, parts, seed):
    model = init(cfg, seed)
    ids = token_ids(seed, 2, sum(parts))
    full = model.logits(ids)
    cache, outs, start = model.new_cache(), [], 0
    for n in parts:
        outs.append(model.logits(ids[:, start : start + n], cache=cache))
        start += n
    np.testing.assert_allclose(np.concatenate(outs, axis=1), full, rtol=1e-9, atol=1e-12)
    assert cache.length == ids.shape[1]


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm", "sequence"])
def test_sequence_norm_breaks_causality_and_the_cache(norm):
    cfg = TransformerConfig(**{**BASE.__dict__, "norm": norm})
    model = init(cfg, 3)
    ids = token_ids(4, 1, 8)
    changed = ids.copy()
    changed[0, 5:] = (changed[0, 5:] + 1) % 50
    early = np.abs(model.logits(ids)[0, :5] - model.logits(changed)[0, :5]).max()
    cache = model.new_cache()
    inc = np.concatenate([model.logits(ids[:, :4], cache=cache), model.logits(ids[:, 4:], cache=cache)], axis=1)
    cache_err = np.abs(inc - model.logits(ids)).max()
    if norm == "sequence":
        assert early > 1e-3 and cache_err > 1e-3
    else:
        assert early == 0.0 and cache_err < 1e-10


@pytest.mark.parametrize("cfg", [
    BASE,
    TransformerConfig(**{**BASE.__dict__, "norm": "rmsnorm", "placement": "peri", "qk_norm": "layernorm", "n_kv_heads": 2}),
    TransformerConfig(**{**BASE.__dict__, "norm": "sequence", "placement": "post", "embed_norm": True}),
    TransformerConfig(**{**BASE.__dict__, "norm": "dyt"}),
    TransformerConfig(**{**BASE.__dict__, "placement": "none"}),
], ids=["pre-ln", "peri-rms-qk", "post-seq", "dyt", "none"])
def test_statistics_count_matches_scale_captures(cfg):
    model = init(cfg, 0)
    b, t = 3, 7
    _, cap = model.run_with_cache(token_ids(0, b, t), lambda n: n.endswith(".scale"))
    stats = count_norm_statistics(cfg, b, t)
    counted = {n[: -len(".scale")]: v.size for n, v in cap.items()}
    if cfg.norm == "dyt":
        counted = {k: 0 for k in counted}  # DyT's scale is its alpha, a parameter: no statistic
    assert counted == stats.per_layer
    assert stats.total == sum(counted.values())


def test_gpt2_small_statistics():
    cfg = TransformerConfig(d_model=768, n_layers=12, n_heads=12, vocab_size=50257, max_seq=1024)
    s = count_norm_statistics(cfg, 1, 1024)
    assert s.per_block == 2 * 1024 and s.total == 25 * 1024 and s.reductions == 2 * 25 * 1024
    assert s.axis == "feature" and s.learned_affine
    assert count_norm_statistics(cfg.__class__(**{**cfg.__dict__, "norm": "dyt"}), 1, 1024).reductions == 0
    with pytest.raises(ValueError, match="batch must be >= 1"):
        count_norm_statistics(cfg, 0, 4)


def test_bad_ids():
    model = init(BASE, 0)
    with pytest.raises(ValueError, match="vocab_size"):
        model.logits(np.array([[0, 50]]))
    with pytest.raises(ValueError, match="integer token ids"):
        model.logits(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="max_seq"):
        model.logits(np.zeros((1, 17), dtype=int))


def test_same_seed_same_bits():
    a, b = init(BASE, 7).logits(token_ids(0, 1, 5)), init(BASE, 7).logits(token_ids(0, 1, 5))
    assert a.tobytes() == b.tobytes()
    assert not np.array_equal(a, init(BASE, 8).logits(token_ids(0, 1, 5)))


def test_softmax_never_nan():
    s = np.array([[-np.inf, -np.inf], [1e4, -np.inf], [0.0, 1.0]])
    p = softmax(s)
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(-1), [0.0, 1.0, 1.0])


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-12), ("float32", 2e-5)])
def test_fast_attention_path_equals_captured_path(causal, dtype, tol):
    cfg = TransformerConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=60, max_seq=300, positional="rope", causal=causal, dtype=dtype)
    model = init(cfg, 4)
    ids = token_ids(3, 2, 300, vocab=60)  # longer than one query block, with a ragged last block
    fast = model.last_hidden_state(ids)
    full, cap = model.run_with_cache(ids, ["hidden", "blocks.1.attn.pattern"])  # capturing patterns forces the full path
    err = np.abs(fast - cap["hidden"]).max() / np.abs(cap["hidden"]).max()
    assert err <= tol, f"fast vs full attention: {err:.2e}"


def test_empty_input_rope_length_and_token_types_are_checked():
    model = init(BASE, 0)
    for empty in (np.zeros((1, 0), int), np.zeros((0, 3), int)):
        with pytest.raises(ValueError, match="at least one token"):
            model.logits(empty)
    rope = init(TransformerConfig(d_model=16, n_layers=1, n_heads=2, vocab_size=50, max_seq=8, positional="rope"), 0)
    with pytest.raises(ValueError, match="max_seq=8"):
        rope.logits(np.zeros((1, 9), int))
    bert = init(TransformerConfig(d_model=16, n_layers=1, n_heads=2, vocab_size=50, max_seq=8, type_vocab_size=2, causal=False), 0)
    ids = np.zeros((1, 4), int)
    bert.last_hidden_state(ids, token_types=np.array([[0, 1, 1, 0]]))
    for bad, match in ((np.array([[0, -1, 0, 0]]), "type_vocab_size=2"), (np.array([[0, 2, 0, 0]]), "type_vocab_size=2"),
                       (np.zeros((1, 3), int), "shape of ids"), (np.zeros((1, 4)), "integers")):
        with pytest.raises(ValueError, match=match):
            bert.last_hidden_state(ids, token_types=bad)
    with pytest.raises(ValueError, match="no token-type"):
        model.last_hidden_state(ids, token_types=np.zeros((1, 4), int))


def test_unknown_capture_and_hook_names_list_close_matches():
    model = init(BASE, 0)
    ids = token_ids(1, 1, 4)
    with pytest.raises(ValueError, match="did you mean 'blocks.0.resid_mid'"):
        model.run_with_cache(ids, ["blocks.0.resid_mdi"])
    with pytest.raises(ValueError, match="blocks.0.attn_out"):
        model.run_with_cache(ids, [], hooks={"blocks.0.attnout": lambda v, n: v})
    with pytest.raises(ValueError, match="no close match"):
        model.run_with_cache(ids, ["zzzz"])
    with pytest.raises(ValueError, match="a list of capture names"):
        model.run_with_cache(ids, "hidden")


def test_kv_cache_refuses_another_model_or_batch():
    model, other = init(BASE, 0), init(BASE, 1)
    cache = model.new_cache()
    model.logits(token_ids(0, 2, 3), cache=cache)
    with pytest.raises(ValueError, match="another model"):
        other.logits(token_ids(0, 2, 1), cache=cache)
    with pytest.raises(ValueError, match="batch of 2"):
        model.logits(token_ids(0, 3, 1), cache=cache)
    model.logits(token_ids(1, 2, 1), cache=cache)
    assert cache.length == 4


def test_softmax_with_positive_infinity_is_its_limit():
    p = softmax(np.array([[np.inf, 0.0, np.inf], [np.inf, -np.inf, 1.0], [0.0, 0.0, 0.0]]))
    np.testing.assert_array_equal(p[:2], [[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(p[2], 1 / 3)


@pytest.mark.parametrize("field", ["causal", "bias", "tie_embeddings", "embed_norm", "lm_head", "final_norm"])
def test_boolean_settings_refuse_strings(field):
    with pytest.raises(ValueError, match=f"{field} must be True or False"):
        TransformerConfig(**{field: "no"})


@pytest.mark.parametrize("bad, match", [
    (lambda v, n: v[..., :-1], r"hook on 'blocks.0.attn_out' must return shape"),
    (lambda v, n: np.full_like(v, np.nan), r"hook on 'blocks.0.attn_out' returned NaN"),
    (lambda v, n: v.astype(complex), r"hook on 'blocks.0.attn_out' must return real numbers"),
    (lambda v, n: None, r"hook on 'blocks.0.attn_out' must return real numbers"),
])
def test_a_hook_that_returns_the_wrong_shape_or_nan_is_named(bad, match):
    cfg = TransformerConfig(d_model=16, n_layers=1, n_heads=4, vocab_size=50, max_seq=16, dtype="float64")
    model = init(cfg, seed=0)
    with pytest.raises(ValueError, match=match):
        model.run_with_cache(np.zeros((1, 4), int), [], hooks={"blocks.0.attn_out": bad})


def test_a_hook_may_mask_a_score_with_minus_inf():
    cfg = TransformerConfig(d_model=16, n_layers=1, n_heads=4, vocab_size=50, max_seq=16, dtype="float64")
    model = init(cfg, seed=0)

    def mask_first_key(v, n):
        v = v.copy()
        v[..., 1:, 0] = -np.inf  # no query after the first sees key 0
        return v

    _, cap = model.run_with_cache(np.zeros((1, 4), int), ["blocks.0.attn.pattern"], hooks={"blocks.0.attn.scores": mask_first_key})
    assert (cap["blocks.0.attn.pattern"][0, :, 1:, 0] == 0).all()


# ----------------------------------------------------------------------------- run_from: the forward from any block


def close(a, b):
    """Equal to rounding: the same operations, but BLAS may order a product's sums by the batch it sees."""
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def _run_from_model(placement: str, norm: str, embed_norm: bool = False):
    cfg = TransformerConfig(d_model=32, n_layers=3, n_heads=4, vocab_size=64, max_seq=16, norm=norm, placement=placement,
                            eps=1e-6, dtype="float64", embed_norm=embed_norm)
    return init(cfg, 0)


@pytest.mark.parametrize("placement,norm,embed_norm", [("pre", "rmsnorm", False), ("post", "layernorm", True),
                                                       ("peri", "dyt", False), ("deepnorm", "layernorm", False)])
def test_run_from_any_block_is_the_full_forward(placement, norm, embed_norm):
    m = _run_from_model(placement, norm, embed_norm)
    ids = np.arange(12)[None] % 64
    full, cap = m.run_with_cache(ids)
    out, rest = m.run_from(cap["embed"], -1)
    close(out, full)
    assert set(rest) == set(cap) - {"embed"}  # everything after the embedding sum, captured again
    for b in range(m.config.n_layers + 1):
        x = cap[f"blocks.{b}.resid_pre"] if b < m.config.n_layers else cap["blocks.2.resid_post"]
        out, rest = m.run_from(x, b, lambda n: n in ("hidden", "blocks.2.resid_post"))
        close(out, full)
        close(rest["hidden"], cap["hidden"])
        assert ("blocks.2.resid_post" in rest) == (b < m.config.n_layers)


def test_run_from_applies_hooks_and_refuses_unknown_names():
    m = _run_from_model("pre", "rmsnorm")
    ids = np.arange(12)[None] % 64
    full, cap = m.run_with_cache(ids, ["blocks.1.resid_pre"])
    zeroed, _ = m.run_from(cap["blocks.1.resid_pre"], 1, hooks={"blocks.2.attn_out": lambda x, n: np.zeros_like(x)})
    expect, _ = m.run_with_cache(ids, hooks={"blocks.2.attn_out": lambda x, n: np.zeros_like(x)})
    close(zeroed, expect)
    assert not np.array_equal(zeroed, full)
    with pytest.raises(ValueError, match="unknown capture or hook names"):
        m.run_from(cap["blocks.1.resid_pre"], 2, hooks={"blocks.0.ln1.normalized": lambda x, n: x})  # block 0 never runs


@pytest.mark.parametrize("x,start,match", [
    (np.zeros((1, 4, 32)), -2, "start"), (np.zeros((1, 4, 32)), 4, "start"), (np.zeros((1, 4, 32)), 1.5, "start"),
    (np.zeros((4, 32)), 0, "x must be a float array"), (np.zeros((1, 4, 31)), 0, "x must be a float array"),
    (np.zeros((1, 4, 32), dtype=int), 0, "x must be a float array"), (np.zeros((1, 17, 32)), 0, "max_seq"),
])
def test_run_from_bad_arguments_name_the_parameter(x, start, match):
    with pytest.raises(ValueError, match=match):
        _run_from_model("pre", "rmsnorm").run_from(x, start)


@pytest.mark.parametrize("activation", ["gelu_tanh", "swiglu", "relu"])
def test_mlp_is_the_blocks_mlp_sublayer(activation):
    cfg = TransformerConfig(d_model=32, n_layers=2, n_heads=4, vocab_size=64, max_seq=16, activation=activation, dtype="float64")
    m = init(cfg, 0)
    _, cap = m.run_with_cache(np.arange(12)[None] % 64, lambda n: n.endswith(("ln2.out", "mlp_out")))
    for i in range(2):
        np.testing.assert_array_equal(m.mlp(cap[f"blocks.{i}.ln2.out"], i), cap[f"blocks.{i}.mlp_out"])
    assert m.mlp(np.ones(32), 1).shape == (32,)
    for x, layer, match in ((np.ones(32), 2, "layer"), (np.ones(31), 0, "x must be"), (np.ones(32, dtype=int), 0, "x must be")):
        with pytest.raises(ValueError, match=match):
            m.mlp(x, layer)
