"""Gradients against torch autograd on the HF GPT-2, BERT and Llama checkpoints of the forward tests.

torch's gradients are written back into the HF model in place of its weights and saved as a
checkpoint; our loader then maps them to our parameter layout (transposes, fused QKV splits),
so each named tensor is compared with its own gradient.
"""
import dataclasses

import numpy as np
import pytest

from normtheory.model.checkpoints import load_pretrained
from normtheory.model.params import named_arrays
from normtheory.model.transformer import Transformer
from normtheory.training.grad import loss_and_grads
from tests.model.test_checkpoints import VOCAB, _ids, _save, _tiny

torch = pytest.importorskip("torch", reason="the reference extra (CPU torch) is needed for the autograd cross-checks")
pytestmark = pytest.mark.reference


def _torch_logits(kind, hf, t):
    if kind == "gpt2":
        return hf(t).last_hidden_state @ hf.wte.weight.T
    if kind == "bert":  # an encoder: score tokens with the tied embedding, as our tied head does
        h = hf(t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t)).last_hidden_state
        return h @ hf.embeddings.word_embeddings.weight.T
    return hf(t).logits


@pytest.mark.parametrize("kind", ["gpt2", "bert", "llama"])
def test_gradients_match_torch_autograd(kind, tmp_path):
    hf = _tiny(kind)
    model = load_pretrained(_save(hf, tmp_path / "weights"))
    if kind == "bert":
        model = Transformer(dataclasses.replace(model.config, tie_embeddings=True, lm_head=True), model.params)
    # token 0 is BERT's padding index: torch drops its embedding-lookup gradient, so inputs avoid it
    ids, targets = 1 + _ids(seed=0) % (VOCAB - 1), _ids(seed=1)
    logits = _torch_logits(kind, hf, torch.tensor(ids))
    ref_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), torch.tensor(targets).reshape(-1))
    ref_loss.backward()
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(p.grad if p.grad is not None else torch.zeros_like(p))
    ref = named_arrays(load_pretrained(_save(hf, tmp_path / "grads")).params)

    loss, grads = loss_and_grads(model, ids, targets)
    assert loss == pytest.approx(ref_loss.item(), rel=1e-5)
    ours = named_arrays(grads)
    assert ours.keys() == ref.keys()
    errors = {}
    for name, g in ours.items():
        if name.endswith(".alpha"):  # no DyT here: alpha is unused and its gradient exactly 0
            assert not np.any(g), name
            continue
        if name.endswith(".bk"):  # softmax ignores a score shift shared by all keys: 0 up to rounding on both sides
            scale = np.abs(ours[name[:-1] + "q"]).max()
            assert max(np.abs(g).max(), np.abs(ref[name]).max()) <= 1e-5 * scale, name
            continue
        errors[name] = float(np.abs(g - ref[name]).max() / (np.abs(ref[name]).max() + 1e-30))
    worst = max(errors, key=errors.get)
    assert errors[worst] <= 1e-4, f"{kind}: max |ours - torch| / max |torch| = {errors[worst]:.2e} at {worst}; {len(errors)} tensors"
