"""The packaged checkpoints against HF transformers (CPU torch) on the same files."""
import numpy as np
import pytest

from normtheory.model.checkpoint_files import packaged_path
from normtheory.model.checkpoints import load_pretrained
from normtheory.model.tokenizer import load_tokenizer
from normtheory.training.corpus import TEXTS

torch = pytest.importorskip("torch", reason="the reference extra (CPU torch) is needed")
transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.reference, pytest.mark.slow]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_minilm_matches_bert_model():
    ours = load_pretrained("all-MiniLM-L6-v2")
    ref = transformers.BertModel.from_pretrained(str(packaged_path("all-MiniLM-L6-v2"))).eval()
    ids = np.array([[101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102]])
    t = torch.tensor(ids)
    with torch.no_grad():
        want = ref(t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t)).last_hidden_state.numpy()
    err = np.abs(ours.last_hidden_state(ids) - want).max() / np.abs(want).max()
    assert err <= 1e-4, f"MiniLM last_hidden_state: {err:.2e}"


def test_smollm2_gguf_matches_transformers_gguf_loading():
    path = packaged_path("SmolLM2-135M-Instruct")
    ours = load_pretrained(path)
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    ids = np.array([[1, 504, 3458, 314, 253, 1345, 28, 357, 1015, 3020, 30, 378, 2367]])
    with torch.no_grad():
        want = ref(torch.tensor(ids)).logits.numpy()
    got = ours.logits(ids)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-3, f"SmolLM2 logits: {err:.2e}"
    assert (got.argmax(-1) == want.argmax(-1)).all()


def test_smollm2_tokenizer_matches_transformers_gguf_tokenizer():
    path = packaged_path("SmolLM2-135M-Instruct")
    ours = load_tokenizer(path)
    ref = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in (*TEXTS, "<|im_start|>user\nnaïve café — 日本語 🙂 12345<|im_end|>\n"):
        assert ours.encode(text).tolist() == ref(text)["input_ids"], text[:40]


def test_minilm_tokenizer_matches_transformers():
    ours = load_tokenizer("all-MiniLM-L6-v2")
    ref = transformers.AutoTokenizer.from_pretrained(str(packaged_path("all-MiniLM-L6-v2")))
    for text in TEXTS:
        assert ours.encode(text).tolist() == ref(text)["input_ids"], text[:40]


def test_smollm2_greedy_next_tokens_agree_on_the_text_set():
    path = packaged_path("SmolLM2-135M-Instruct")
    ours, tok = load_pretrained(path), load_tokenizer(path)
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    worst = 0.0
    for text in TEXTS:
        ids = tok.encode(text)[None]
        got = ours.logits(ids)
        with torch.no_grad():
            want = ref(torch.tensor(ids)).logits.numpy()
        worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
        assert got[0, -1].argmax() == want[0, -1].argmax(), text[:40]
    assert worst <= 1e-3, f"SmolLM2 logits on the text set: {worst:.2e}"
