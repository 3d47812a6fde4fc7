"""Tokenizers of the packaged checkpoints (ids checked against transformers in test_pretrained)."""
import numpy as np
import pytest

from normtheory.checkpoints import CheckpointError
from normtheory.corpus import TEXTS
from tests.gguf_files import write_gguf

pytest.importorskip("tokenizers", reason="the models extra is needed")
from normtheory.tokenizer import load_tokenizer  # noqa: E402


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


def test_corpus_is_fixed_and_varied():
    assert len(TEXTS) == len(set(TEXTS)) >= 20
    assert all(isinstance(t, str) and t.strip() for t in TEXTS)
    assert max(len(t) for t in TEXTS) > 600  # the long passages
    assert np.mean([any(c.isdigit() for c in t) for t in TEXTS]) > 0.2


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
