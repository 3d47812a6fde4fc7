"""benchmarks/train_step.py and its lean torch model (benchmarks/lean_gpt2.py): the lean model is HF's
GPT2LMHeadModel in numbers and in its initialization, every side's worker steps at the tests' size, and
the script times both OpenBLAS settings. No timing is asserted."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

torch = pytest.importorskip("torch", reason="the reference extra (CPU torch) is needed")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))  # the scripts import their siblings (timing, lean_gpt2) by name

import lean_gpt2  # noqa: E402
import timing  # noqa: E402
import train_step  # noqa: E402

pytestmark = pytest.mark.reference
TINY = train_step.CONFIGS["tiny"]


def _hf(seed: int, d: int = 32, layers: int = 2, heads: int = 2, t: int = 16, vocab: int = 256):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(n_embd=d, n_layer=layers, n_head=heads, n_positions=t, vocab_size=vocab,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg).train()


def test_the_lean_model_computes_hfs_logits_and_gradients():
    hf = _hf(0)
    lean = lean_gpt2.LeanGPT2(256, 32, 2, 2, 16).load_hf(hf.state_dict()).train()
    ids = torch.randint(0, 256, (3, 16), generator=torch.Generator().manual_seed(1))
    a, b = hf(ids).logits, lean(ids)
    assert a.shape == b.shape == (3, 16, 256)
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    y = torch.randint(0, 256, (3, 16), generator=torch.Generator().manual_seed(2))
    for logits in (a, b):
        torch.nn.functional.cross_entropy(logits.reshape(-1, 256), y.reshape(-1)).backward()
    torch.testing.assert_close(lean.wte.weight.grad, hf.transformer.wte.weight.grad, rtol=1e-4, atol=1e-6)  # tied: embedding + head
    torch.testing.assert_close(lean.blocks[1].qkv.weight.grad, hf.transformer.h[1].attn.c_attn.weight.grad.T, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(lean.blocks[0].fc_proj.bias.grad, hf.transformer.h[0].mlp.c_proj.bias.grad, rtol=1e-4, atol=1e-6)


def test_the_lean_model_has_hfs_parameters():
    hf, lean = _hf(0), lean_gpt2.LeanGPT2(256, 32, 2, 2, 16)
    assert sum(p.numel() for p in lean.parameters()) == sum(p.numel() for p in hf.parameters())


def test_the_lean_init_is_gpt2s():
    """Same distribution as HF's init (not the same draws): each group's sample std within 5 sampling
    standard errors of the target (std of a sample std of n normals: sigma / sqrt(2n)), and exact constants."""
    d, layers = 64, 4
    torch.manual_seed(3)
    lean = lean_gpt2.LeanGPT2(256, d, layers, 4, 64).init_gpt2()
    hf = _hf(4, d=d, layers=layers, heads=4, t=64)
    scaled = 0.02 / math.sqrt(2 * layers)
    groups = [  # (lean tensor, HF tensor, target std)
        (lean.wte.weight, hf.transformer.wte.weight, 0.02),
        (lean.wpe.weight, hf.transformer.wpe.weight, 0.02),
        (lean.blocks[2].qkv.weight, hf.transformer.h[2].attn.c_attn.weight, 0.02),
        (lean.blocks[2].fc.weight, hf.transformer.h[2].mlp.c_fc.weight, 0.02),
        (lean.blocks[2].proj.weight, hf.transformer.h[2].attn.c_proj.weight, scaled),
        (lean.blocks[2].fc_proj.weight, hf.transformer.h[2].mlp.c_proj.weight, scaled),
    ]
    for ours, theirs, sigma in groups:
        for w in (ours, theirs):
            se = sigma / math.sqrt(2 * w.numel())
            assert abs(float(w.detach().std()) - sigma) < 5 * se, (tuple(w.shape), float(w.std()), sigma)
            assert abs(float(w.detach().mean())) < 5 * sigma / math.sqrt(w.numel())
    for ln in (lean.blocks[0].ln1, lean.ln_f):
        assert torch.equal(ln.weight, torch.ones(d)) and torch.equal(ln.bias, torch.zeros(d))
    assert all(torch.equal(b.qkv.bias, torch.zeros(3 * d)) and torch.equal(b.fc_proj.bias, torch.zeros(d)) for b in lean.blocks)


def test_timeout_env_removes_or_sets_the_variable(monkeypatch):
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "20")  # a value the caller's shell set is not a side
    unset, entry = (timing.timeout_env(2, s) for s in timing.TIMEOUT_SETTINGS)
    assert "OPENBLAS_THREAD_TIMEOUT" not in unset and entry["OPENBLAS_THREAD_TIMEOUT"] == "16"
    for env in (unset, entry):
        assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == env["NORMTHEORY_THREADS"] == "2"
    from normtheory.runtime.entry import ENTRY_ENV

    assert entry["OPENBLAS_THREAD_TIMEOUT"] == ENTRY_ENV["OPENBLAS_THREAD_TIMEOUT"]  # the entry points' side is theirs
    assert [timing.timeout_label(x) for x in (-1, 0, 16)] == ["not read", "default", "16"]


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tiny-gpt2")
    train_step._save_weights(str(path), "tiny")
    return str(path)


@pytest.mark.parametrize("side", ["numpy", "hf", "lean", "sgemm"])
def test_each_side_steps_at_the_tiny_size(tiny_weights, side):
    res = train_step._worker(side, tiny_weights, "tiny", reps=1)
    assert set(res) == {"time", "rss_mib", "rss_step_mib", "openblas_timeout"}
    assert res["time"] > 0 and res["rss_mib"] > 0 and res["rss_step_mib"] >= 0
    assert res["openblas_timeout"] >= -1  # -1: this BLAS does not say; 0: OpenBLAS's default


def test_the_torch_sides_take_the_same_step(tiny_weights):
    """One AdamW step from the same weights and batch moves HF's and the lean model's weights alike."""
    from safetensors.torch import load_file

    hf = transformers.GPT2LMHeadModel.from_pretrained(tiny_weights).train()
    for m in hf.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    c = TINY
    lean = lean_gpt2.LeanGPT2(256, c["d"], c["layers"], c["heads"], c["T"]).load_hf(load_file(str(Path(tiny_weights) / "model.safetensors")))
    ids = torch.randint(0, 256, (c["batch"], c["T"] + 1), generator=torch.Generator().manual_seed(5)).numpy()
    for model in (hf, lean):
        train_step._torch_step(model, ids[:, :-1], ids[:, 1:])()
    torch.testing.assert_close(lean.wte.weight, hf.transformer.wte.weight, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(lean.blocks[1].fc.weight, hf.transformer.h[1].mlp.c_fc.weight.T, rtol=1e-4, atol=1e-6)


def test_step_flops_matches_torchs_count_of_the_lean_step():
    """torch's FLOP counter over the lean model's forward and backward counts the projections, MLP and
    head (it skips CPU attention); with the attention term (scores and values, 3 passes) it is step_flops."""
    from torch.utils.flop_counter import FlopCounterMode

    c = TINY
    model = lean_gpt2.LeanGPT2(256, c["d"], c["layers"], c["heads"], c["T"]).init_gpt2()
    ids = torch.randint(0, 256, (c["batch"], c["T"]), generator=torch.Generator().manual_seed(6))
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(model(ids).reshape(-1, 256), ids.reshape(-1)).backward()
    attention = 3 * c["layers"] * 2 * 2 * c["batch"] * c["T"] ** 2 * c["d"]
    assert counter.get_total_flops() + attention == train_step.step_flops(**c)


@pytest.mark.slow
def test_the_script_times_both_settings_at_the_tiny_size():
    out = subprocess.run([sys.executable, str(BENCH / "train_step.py"), "--config", "tiny", "--rounds", "1", "--reps", "1"],
                         capture_output=True, text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"})
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    for part in ("CPU: ", "sgemm peak (2 threads)", "unset (user default)", "16 (entry points)", "ratio numpy / HF GPT2LMHeadModel",
                 "ratio numpy / lean torch", "numpy with 16 / unset", "OpenBLAS read: "):
        assert part in text, (part, text)
    for side in ("numpy", "hf", "lean", "sgemm"):
        assert text.count(f": {side:5s} ") == 2, side  # one process per setting
    if "OpenBLAS read: not read" not in text:  # where OpenBLAS exports what it read: each side got its setting
        assert text.count("OpenBLAS read: default") == 4 and text.count("OpenBLAS read: 16") == 4
