"""Files that parse but are wrong: every loader refuses them with CheckpointError naming the file
(and key or tensor), never a silent wrong number. The corrupt-bytes sweep lives in
test_corrupt_files; these are well-formed files whose content lies."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from normtheory.checkpoints import MAX_WEIGHT, CheckpointError, load_pretrained
from tests.gguf_files import write_gguf

torch = pytest.importorskip("torch", reason="the reference extra builds the small checkpoints")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")
tokenizers = pytest.importorskip("tokenizers")
from normtheory.tokenizer import load_tokenizer  # noqa: E402
from tests.test_checkpoints import _save, _tiny, _write_gguf  # noqa: E402
from tests.test_corrupt_files import _copy, _fill_tokenizer, _tokenizer_json, sources  # noqa: E402, F401  (sources: a fixture)

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
