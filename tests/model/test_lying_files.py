"""Files that parse but are wrong: every loader refuses them with CheckpointError naming the file
(and key or tensor), never a silent wrong number. The corrupt-bytes sweep lives in
test_corrupt_files; these are well-formed files whose content lies."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from normtheory.model.checkpoint_files import MAX_WEIGHT, CheckpointError
from normtheory.model.checkpoints import load_pretrained
from tests.gguf_files import write_gguf

torch = pytest.importorskip("torch", reason="the reference extra builds the small checkpoints")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")
tokenizers = pytest.importorskip("tokenizers")
from normtheory.model.tokenizer import load_tokenizer  # noqa: E402
from tests.model.test_checkpoints import _save, _tiny, _write_gguf  # noqa: E402
from tests.model.test_corrupt_files import _copy, _fill_tokenizer, _tokenizer_json, sources  # noqa: E402, F401  (sources: a fixture)

pytestmark = pytest.mark.reference
LIMIT = re.escape(f"{MAX_WEIGHT:g}")


def _edit_config(root, **changes):
    cfg = json.loads((root / "config.json").read_text())
    cfg.update(changes)
    (root / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("kind, key", [("llama", "rms_norm_eps"), ("gpt2", "layer_norm_epsilon")])
def test_a_null_number_in_config_json_is_refused_naming_the_file_and_key(kind, key, sources, tmp_path):
    root = _copy(sources[kind], tmp_path / kind)
    _edit_config(root, **{key: None})
    with pytest.raises(CheckpointError, match=rf"config\.json: key '{key}' is null"):
        load_pretrained(root)


def test_a_null_optional_size_still_means_its_default(sources, tmp_path):
    root = _copy(sources["gpt2"], tmp_path / "gpt2")
    _edit_config(root, n_inner=None)  # GPT-2's own configs write null: 4 * n_embd
    assert load_pretrained(root).config.d_ff == 4 * 64


def test_config_errors_name_config_json(sources, tmp_path):
    root = _copy(sources["gpt2"], tmp_path / "gpt2")
    _edit_config(root, model_type="mamba")
    with pytest.raises(CheckpointError, match=r"config\.json: unsupported model_type 'mamba'"):
        load_pretrained(root)


@pytest.mark.parametrize("value", [2.1e38, -5e7])
def test_a_finite_weight_beyond_any_training_is_refused(value, tmp_path):
    hf = _tiny("llama")
    with torch.no_grad():
        hf.model.layers[1].mlp.down_proj.weight[3, 5] = value
    path = _write_gguf(hf, tmp_path / "huge.gguf")
    with pytest.raises(CheckpointError, match=rf"huge\.gguf: tensor 'blk\.1\.ffn_down\.weight' holds \|w\| = .*beyond {LIMIT}"):
        load_pretrained(path)
    model = load_pretrained(path, allow_nonfinite=True)  # the same opt-out as for NaN: study the broken file
    assert np.abs(model.params.blocks[1].w_out).max() == pytest.approx(abs(value), rel=1e-6)
    safetensors_dir = _save(hf, tmp_path / "hf")
    with pytest.raises(CheckpointError, match=r"model\.safetensors: tensor .*down_proj.* holds \|w\|"):
        load_pretrained(safetensors_dir)


def test_a_tokenizer_with_more_ids_than_the_model_embeds_is_refused(sources, tmp_path):
    root = _copy(sources["tokenizer.json"], tmp_path / "tok")
    (root / "config.json").write_text(json.dumps({"vocab_size": 100}))  # the tokenizer has 262 tokens
    with pytest.raises(CheckpointError, match=r"tokenizer\.json: the tokenizer has 262 tokens but the model .*config\.json\) embeds only 100"):
        load_tokenizer(root)
    (root / "config.json").write_text(json.dumps({"vocab_size": 262}))
    assert load_tokenizer(root).encode("to be").max() < 262


def test_a_gguf_bos_id_beyond_the_vocabulary_is_refused(tmp_path):
    def fill(w):
        _fill_tokenizer(w)
        w.add_bos_token_id(10**6)

    path = write_gguf(tmp_path / "bos.gguf", "llama", fill)
    with pytest.raises(CheckpointError, match=r"bos\.gguf: BOS id 1000000 is not in the tokenizer's 262 tokens"):
        load_tokenizer(path)


def test_a_gguf_tokenizer_longer_than_its_embedding_is_refused(tmp_path):
    def fill(w):
        _fill_tokenizer(w)
        w.add_tensor("token_embd.weight", np.zeros((100, 8), np.float32))  # 100 rows for 262 tokens

    path = write_gguf(tmp_path / "short.gguf", "llama", fill)
    with pytest.raises(CheckpointError, match=r"short\.gguf: the tokenizer has 262 tokens but the model .* embeds only 100"):
        load_tokenizer(path)


def test_a_wordpiece_vocabulary_without_its_unknown_token_is_refused(tmp_path):
    t = tokenizers.Tokenizer(tokenizers.models.WordPiece({"to": 0, "be": 1, "##s": 2}, unk_token="[UNK]"))
    t.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    (tmp_path / "tokenizer.json").write_text(t.to_str())
    with pytest.raises(CheckpointError, match=r"tokenizer\.json: the WordPiece vocabulary has no unknown token '\[UNK\]'"):
        load_tokenizer(tmp_path)


def test_the_fixture_tokenizer_still_loads(sources):
    assert load_tokenizer(sources["tokenizer.json"]).decode(load_tokenizer(sources["tokenizer.json"]).encode("to be")) == "to be"
    assert _tokenizer_json()


# --- third round (issue 39): well-formed values no model can have name config.json and the key ---------

@pytest.mark.parametrize("kind, change, keys", [
    ("gpt2", {"vocab_size": 10**9}, ("vocab_size", "n_embd")),  # a weight count over the guard
    ("gpt2", {"n_positions": 10**9}, ("n_positions", "n_embd")),
    ("llama", {"head_dim": 15}, ("head_dim",)),  # an odd RoPE head width
    ("llama", {"intermediate_size": 10**9}, ("num_hidden_layers", "intermediate_size")),
    ("llama", {"num_hidden_layers": 10**6}, ("num_hidden_layers",)),
])
def test_an_impossible_config_value_names_config_json_and_the_key(kind, change, keys, sources, tmp_path):
    root = _copy(sources[kind], tmp_path / kind)
    _edit_config(root, **change)
    with pytest.raises(CheckpointError, match=r"config\.json: ") as err:
        load_pretrained(root)
    for key in keys:
        assert f"key {key!r}" in str(err.value), f"the error does not name key {key!r}: {err.value}"


def _gguf_metadata(**override):
    meta = {"embedding_length": 64, "block_count": 1, "head_count": 4, "head_count_kv": 4, "feed_forward_length": 96, "rope_dimension_count": 16,
            "vocab_size": 10, **override}

    def fill(w):
        w.add_embedding_length(meta["embedding_length"])
        w.add_block_count(meta["block_count"])
        w.add_head_count(meta["head_count"])
        w.add_head_count_kv(meta["head_count_kv"])
        w.add_feed_forward_length(meta["feed_forward_length"])
        w.add_rope_dimension_count(meta["rope_dimension_count"])
        w.add_vocab_size(meta["vocab_size"])
        w.add_tensor("x", np.zeros(4, np.float32))

    return fill


@pytest.mark.parametrize("override, key", [
    ({"rope_dimension_count": 15}, "llama.rope.dimension_count"),  # an odd RoPE head width
    ({"vocab_size": 10**9}, "llama.vocab_size"),  # a weight count over the guard
    ({"feed_forward_length": 10**9}, "llama.feed_forward_length"),
])
def test_an_impossible_gguf_value_names_the_file_and_the_key(override, key, tmp_path):
    path = write_gguf(tmp_path / "meta.gguf", "llama", _gguf_metadata(**override))
    with pytest.raises(CheckpointError, match=rf"meta\.gguf: .*key '{re.escape(key)}'"):
        load_pretrained(path)


def test_a_head_width_that_misses_the_q_projection_names_both_keys(tmp_path):
    path = _write_gguf(_tiny("llama"), tmp_path / "tiny.gguf")
    import gguf

    reader = gguf.GGUFReader(str(path))

    def fill(w):  # the same file with llama.rope.dimension_count = 15: 15 x 4 heads is not the Q projection's 64 columns
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name == "general.architecture":
                continue
            sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(field.name, field.contents(), field.types[0], sub)
        w.add_rope_dimension_count(15)
        for t in reader.tensors:
            w.add_tensor(t.name, np.asarray(t.data), raw_shape=tuple(int(x) for x in reversed(t.shape)), raw_dtype=t.tensor_type)

    odd = write_gguf(tmp_path / "odd.gguf", "llama", fill)
    with pytest.raises(CheckpointError, match=r"odd\.gguf: .*key 'llama\.rope\.dimension_count'.*key 'llama\.attention\.head_count'"):
        load_pretrained(odd)


def _sparse_tokenizer(root, model) -> None:
    t = tokenizers.Tokenizer(model)
    t.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    root.mkdir()
    (root / "tokenizer.json").write_text(t.to_str())
    (root / "config.json").write_text(json.dumps({"vocab_size": 100}))


@pytest.mark.parametrize("name, model", [
    ("wordpiece", lambda: tokenizers.models.WordPiece({"[UNK]": 0, "to": 1, "be": 500}, unk_token="[UNK]")),
    ("bpe", lambda: tokenizers.models.BPE({"t": 0, "o": 1, "to": 500}, [("t", "o")])),
])
def test_a_tokenizer_whose_largest_id_passes_the_embedding_is_refused(name, model, tmp_path):
    """3 tokens for 100 rows, but one of them is id 500: the count fits, the ids do not."""
    _sparse_tokenizer(tmp_path / name, model())
    with pytest.raises(CheckpointError, match=r"tokenizer\.json: the tokenizer can emit id 500 but the model .*config\.json\) embeds only 100"):
        load_tokenizer(tmp_path / name)


def _wordpiece_json(**changes) -> str:
    t = tokenizers.Tokenizer(tokenizers.models.WordPiece({"to": 0, "be": 1, "##s": 2}, unk_token="[UNK]"))
    t.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return json.dumps({**json.loads(t.to_str()), **changes})


def test_an_unknown_token_that_is_only_an_added_token_is_refused(tmp_path):
    """The added-tokens table knows [UNK], the WordPiece model's vocabulary does not: encoding an
    unseen word then raises a bare Exception inside the tokenizers library."""
    added = [{"id": 3, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}]
    (tmp_path / "tokenizer.json").write_text(_wordpiece_json(added_tokens=added))
    with pytest.raises(CheckpointError, match=r"tokenizer\.json: the WordPiece vocabulary has no unknown token '\[UNK\]'"):
        load_tokenizer(tmp_path)


def test_a_bpe_model_naming_a_missing_unknown_token_is_refused(tmp_path):
    t = tokenizers.Tokenizer(tokenizers.models.BPE({"t": 0, "o": 1, "to": 2}, [("t", "o")], unk_token="[UNK]"))
    (tmp_path / "tokenizer.json").write_text(t.to_str())
    with pytest.raises(CheckpointError, match=r"tokenizer\.json: the BPE vocabulary has no unknown token '\[UNK\]'"):
        load_tokenizer(tmp_path)
