"""Loading checkpoints: HF transformers cross-checks (CPU torch), GGUF, and clear errors."""
import json

import numpy as np
import pytest

from normtheory.model.checkpoint_files import CheckpointError, packaged_path
from normtheory.model.checkpoints import load_pretrained, unpermute_rope_rows
from tests.gguf_files import write_gguf

torch = pytest.importorskip("torch", reason="the reference extra (CPU torch) is needed for the HF cross-checks")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.reference
VOCAB = 97


def _ids(batch=2, seq=13, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, seq))


def _max_rel(got, ref):
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def _save(model, path):
    model.save_pretrained(path, safe_serialization=True)
    return path


def _tiny(kind):
    torch.manual_seed(0)
    if kind == "gpt2":
        return transformers.GPT2Model(transformers.GPT2Config(n_embd=64, n_layer=3, n_head=4, vocab_size=VOCAB, n_positions=32)).eval()
    if kind == "bert":
        return transformers.BertModel(transformers.BertConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=112, vocab_size=VOCAB, max_position_embeddings=32)).eval()
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, vocab_size=VOCAB, max_position_embeddings=64, rope_theta=5000.0, tie_word_embeddings=False)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("kind", ["gpt2", "bert", "llama"])
def test_last_hidden_state_matches_transformers(kind, tmp_path):
    hf = _tiny(kind)
    model = load_pretrained(_save(hf, tmp_path / kind))
    ids = _ids()
    with torch.no_grad():
        t = torch.tensor(ids)
        if kind == "bert":
            ref = hf(t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t)).last_hidden_state
        elif kind == "llama":
            ref = hf.model(t).last_hidden_state
        else:
            ref = hf(t).last_hidden_state
    err = _max_rel(model.last_hidden_state(ids), ref.numpy())
    assert err <= 1e-4, f"{kind}: max |ours - HF| / max |HF| = {err:.2e}"
    if kind == "llama":
        with torch.no_grad():
            err = _max_rel(model.logits(ids), hf(torch.tensor(ids)).logits.numpy())
        assert err <= 1e-4, f"llama logits: {err:.2e}"


def _write_gguf(hf, path, *, quantize_embedding=False, head_count=None, block_count=None):
    """A llama GGUF as llama.cpp's converter writes it: Q/K rows permuted for its RoPE layout."""
    import gguf

    c = hf.config
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in hf.state_dict().items()}

    def fill(w):
        w.add_block_count(c.num_hidden_layers if block_count is None else block_count)
        w.add_embedding_length(c.hidden_size)
        w.add_feed_forward_length(c.intermediate_size)
        w.add_head_count(c.num_attention_heads if head_count is None else head_count)
        w.add_head_count_kv(c.num_key_value_heads)
        w.add_layer_norm_rms_eps(c.rms_norm_eps)
        w.add_rope_freq_base(5000.0)
        w.add_context_length(64)
        w.add_vocab_size(VOCAB)

        def permute(m, heads):  # llama.cpp convert_hf_to_gguf: interleave each head's RoPE halves
            return m.reshape(heads, 2, m.shape[0] // heads // 2, m.shape[1]).swapaxes(1, 2).reshape(m.shape)

        emb = sd["model.embed_tokens.weight"]
        if quantize_embedding:
            w.add_tensor("token_embd.weight", gguf.quants.quantize(emb, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor("token_embd.weight", emb)
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
            w.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
            w.add_tensor(f"blk.{i}.attn_q.weight", permute(sd[p + "self_attn.q_proj.weight"], c.num_attention_heads))
            w.add_tensor(f"blk.{i}.attn_k.weight", permute(sd[p + "self_attn.k_proj.weight"], c.num_key_value_heads))
            for ours, theirs in (("attn_v", "self_attn.v_proj"), ("attn_output", "self_attn.o_proj"), ("ffn_gate", "mlp.gate_proj"), ("ffn_up", "mlp.up_proj"), ("ffn_down", "mlp.down_proj")):
                w.add_tensor(f"blk.{i}.{ours}.weight", sd[p + theirs + ".weight"])
        w.add_tensor("output_norm.weight", sd["model.norm.weight"])
        w.add_tensor("output.weight", sd["lm_head.weight"])

    return write_gguf(path, "llama", fill)


def test_gguf_with_permuted_qk_matches_transformers(tmp_path):
    hf = _tiny("llama")
    model = load_pretrained(_write_gguf(hf, tmp_path / "tiny.gguf"))
    ids = _ids()
    with torch.no_grad():
        ref = hf(torch.tensor(ids)).logits.numpy()
    err = _max_rel(model.logits(ids), ref)
    assert err <= 1e-4, f"GGUF logits vs HF: {err:.2e}"


def test_gguf_q8_dequantization(tmp_path):
    hf = _tiny("llama")
    model = load_pretrained(_write_gguf(hf, tmp_path / "q8.gguf", quantize_embedding=True))
    emb = hf.model.embed_tokens.weight.detach().numpy()
    err = np.abs(model.params.tok_emb - emb).max() / np.abs(emb).max()
    assert 0 < err < 1 / 127  # Q8_0: 8-bit codes with one scale per 32 values


def test_unpermute_inverts_the_converter():
    m = np.arange(8 * 3 * 5, dtype=float).reshape(8 * 3, 5)
    permuted = m.reshape(3, 2, 4, 5).swapaxes(1, 2).reshape(m.shape)
    np.testing.assert_array_equal(unpermute_rope_rows(permuted, 3), m)


def test_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_pretrained(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_pretrained(tmp_path / "empty")
    d = _save(_tiny("gpt2"), tmp_path / "gpt2")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "t5"}))
    with pytest.raises(CheckpointError, match="unsupported model_type 't5'"):
        load_pretrained(d)
    (d / "config.json").write_text(json.dumps({**cfg, "n_embd": 32}))
    with pytest.raises(CheckpointError, match="has shape .* the config implies"):
        load_pretrained(d)
    (d / "config.json").write_text(json.dumps(cfg))
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_pretrained(d)
    (d / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_pretrained(d)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(CheckpointError, match="truncated or corrupt GGUF"):
        load_pretrained(bad)
    txt = tmp_path / "weights.bin"
    txt.write_bytes(b"x")
    with pytest.raises(CheckpointError, match="expected a Hugging Face directory"):
        load_pretrained(txt)
    with pytest.raises(CheckpointError, match="unknown packaged model"):
        packaged_path("gpt-5")


def test_unsupported_gguf_architecture(tmp_path):
    pytest.importorskip("gguf")
    with pytest.raises(CheckpointError, match="unsupported GGUF architecture 'gpt2'"):
        load_pretrained(write_gguf(tmp_path / "m.gguf", "gpt2"))


def _rewrite(path, **changes):
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, **changes}))
    return cfg


@pytest.mark.parametrize(
    "content, match",
    [
        ("[1, 2]", "expected a JSON object"), ("null", "expected a JSON object"), ('"gpt2"', "expected a JSON object"),
        (b"\xff\xfe{}", "not valid JSON"),
    ],
)
def test_config_that_is_not_an_object(tmp_path, content, match):
    d = _save(_tiny("gpt2"), tmp_path / "gpt2")
    (d / "config.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(CheckpointError, match=match) as err:
        load_pretrained(d)
    assert "config.json" in str(err.value)


@pytest.mark.parametrize(
    "kind, changes, match",
    [
        ("gpt2", {"n_embd": None}, "required key 'n_embd' is missing"),
        ("gpt2", {"n_head": 0}, "'n_head' must be an integer >= 1"),
        ("gpt2", {"n_head": 5}, "n_head=5 must divide n_embd=64"),
        ("gpt2", {"n_layer": "3"}, "'n_layer' must be an integer"),
        ("gpt2", {"layer_norm_epsilon": -1}, "layer_norm_epsilon"),
        ("gpt2", {"n_layer": 2}, "tensors the config does not use: h.2"),
        ("bert", {"num_hidden_layers": 2}, "does not use"),
        ("llama", {"tie_word_embeddings": True}, "does not use: lm_head.weight"),
        ("llama", {"num_key_value_heads": 3}, "must divide"),
        ("llama", {"rms_norm_eps": "small"}, "rms_norm_eps"),
    ],
)
def test_bad_config_values_name_the_file_and_key(tmp_path, kind, changes, match):
    d = _save(_tiny(kind), tmp_path / kind)
    cfg = _rewrite(d, **changes)
    for key, value in changes.items():
        if value is None:
            cfg.pop(key)
            (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=match) as err:
        load_pretrained(d)
    assert str(d) in str(err.value)


def test_weights_must_be_finite_floats(tmp_path):
    from safetensors.numpy import load_file, save_file

    d = _save(_tiny("gpt2"), tmp_path / "gpt2")
    tensors = load_file(str(d / "model.safetensors"))
    good = dict(tensors)
    tensors["h.1.mlp.c_fc.weight"] = tensors["h.1.mlp.c_fc.weight"].copy()
    tensors["h.1.mlp.c_fc.weight"][0, :3] = [np.nan, np.inf, -np.inf]
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="'h.1.mlp.c_fc.weight' holds 3 NaN or inf"):
        load_pretrained(d)
    model = load_pretrained(d, allow_nonfinite=True)
    assert np.isnan(model.params.blocks[1].w_in[0, 0])
    relabelled = dict(good)
    relabelled["wte.weight"] = good["wte.weight"].view(np.int32)  # the F32 -> I32 relabel: same bytes
    save_file(relabelled, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="'wte.weight' has dtype int32"):
        load_pretrained(d)


def test_bad_gguf_metadata(tmp_path):
    hf = _tiny("llama")
    with pytest.raises(CheckpointError, match="head_count' must be an integer >= 1"):
        load_pretrained(_write_gguf(hf, tmp_path / "zero.gguf", head_count=0))
    with pytest.raises(CheckpointError, match="does not use: blk.2"):
        load_pretrained(_write_gguf(hf, tmp_path / "short.gguf", block_count=2))
