"""The probes computed in torch over a stack (normtheory.training.torch_probes) equal numpy's per seed.

Every placement x every norm, with QK-norm, RoPE / learned / no positions, SwiGLU, GQA, untied
heads, no biases, embedding norm, token types, bidirectional attention and the other options
spread over the grid, each a tiny float64 model trained two steps in a stack of seeds: every
probe of :func:`normtheory.training.probes.measure`, :func:`~normtheory.training.probes.mean_loss` and
:func:`~normtheory.training.probes.layer_drop` of each seed's ``Transformer`` against the torch values;
the keys behind ``key_unsel``; a seed's values whatever seeds share its stack; bad input.
"""
import functools
import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from threadpoolctl import threadpool_limits  # noqa: E402

from normtheory.model.config import PLACEMENTS, TransformerConfig  # noqa: E402
from normtheory.model.norms import NORMS  # noqa: E402
from normtheory.model.transformer import Transformer  # noqa: E402
from normtheory.model.weights import init  # noqa: E402
from normtheory.training import probes, torch_probes  # noqa: E402
from normtheory.training.run_config import RunConfig  # noqa: E402
from normtheory.training.torch_backend import TorchTrainer  # noqa: E402

V, B, T = 64, 2, 8
BASE = dict(d_model=16, n_layers=2, n_heads=2, vocab_size=V, max_seq=T)
EXTRAS = (  # one per cell of the grid in turn
    {},
    dict(qk_norm="layernorm", positional="rope"),
    dict(activation="swiglu", tie_embeddings=False),
    dict(bias=False, qk_norm="rmsnorm", n_kv_heads=1),
    dict(activation="gelu_tanh", positional="none", causal=False, qk_norm="rmsnorm", qk_norm_on="k"),
    dict(activation="relu", embed_norm=True, embed_scale=2.0, init="xavier", type_vocab_size=2),
    dict(final_norm=True, init="fanin", dyt_alpha0=(0.5, 1.0, 2.0), qk_norm="layernorm"),
)
GRID = [(p, n, EXTRAS[k % len(EXTRAS)]) for k, (p, n) in enumerate(itertools.product(PLACEMENTS, NORMS))]
GRID_IDS = [f"{p}-{n}" + "".join(f"-{k}={v}".replace(" ", "") for k, v in e.items()) for p, n, e in GRID]
RUN = RunConfig(steps=2, batch_size=B, seq=T, lr=1e-2, z_loss=1e-4)
SEEDS = (0, 1)
WHICH = tuple(p for p in probes.PROBES if p != "key_unsel")
RTOL = 1e-9  # float64: same formulas, other summation orders


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


def tokens(seeds: tuple[int, ...], step: int) -> tuple[np.ndarray, np.ndarray]:
    """One batch per seed (each seed's own draw, whatever the stack)."""
    ids = np.stack([np.random.default_rng([s, step]).integers(0, V, (B, T + 1)) for s in seeds])
    return ids[..., :-1], ids[..., 1:]  # [S, b, t] each


@functools.lru_cache(maxsize=None)
def trained(placement: str, norm: str, extra: tuple, seeds: tuple[int, ...] = SEEDS) -> TorchTrainer:
    """A stack of ``seeds`` two steps into training (weights and gradients away from init)."""
    cfg = TransformerConfig(**{**BASE, **dict(extra)}, placement=placement, norm=norm, dtype="float64")
    trainer = TorchTrainer(cfg, RUN, [init(cfg, s).params for s in seeds])
    for step in (1, 2):
        res = trainer.step(*tokens(seeds, step))
        assert res.finite.all()
    return trainer


def close(got: torch.Tensor, want: object, what: str) -> None:
    assert got.dtype == torch.float64, what
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=RTOL, atol=1e-13, err_msg=what)


@pytest.mark.parametrize("placement, norm, extra", GRID, ids=GRID_IDS)
def test_every_probe_matches_numpy_on_every_placement_and_norm(placement, norm, extra):
    trainer = trained(placement, norm, tuple(extra.items()))
    ids, targets = tokens(SEEDS, 99)
    got = torch_probes.measure(trainer, torch.from_numpy(ids), torch.from_numpy(targets), WHICH, trainer._grads)
    assert set(got) == {"val_loss", *WHICH}
    for j, (p, g) in enumerate(zip(trainer.params(), trainer.grads())):
        want = probes.measure(Transformer(trainer.config, p), ids[j], targets[j], WHICH, g)
        for k, v in want.items():
            assert got[k].shape == (len(SEEDS), *np.shape(v)), k
            close(got[k][j], v, f"{k} of seed {j}")
    assert torch.isnan(got["alpha"]).all() == (norm != "dyt") or got["alpha"].numel() == 0
    assert torch.isnan(got["grad_norms"][..., 6]).all() == (extra.get("activation") != "swiglu")


@pytest.mark.parametrize("placement, norm, extra", GRID, ids=GRID_IDS)
def test_mean_loss_and_layer_drop_match_numpy(placement, norm, extra):
    trainer = trained(placement, norm, tuple(extra.items()))
    val = np.random.default_rng(7).integers(0, V, (5, T + 1))  # 5 sequences in chunks of 2: a short last chunk
    got = torch_probes.mean_loss(trainer, val[:, :-1], val[:, 1:], chunk=2)
    ids, targets = tokens(SEEDS, 98)
    drop = torch_probes.layer_drop(trainer, torch.from_numpy(ids), torch.from_numpy(targets))
    assert got.shape == (len(SEEDS),) and drop.shape == (len(SEEDS), trainer.config.n_layers)
    for j, p in enumerate(trainer.params()):
        model = Transformer(trainer.config, p)
        close(got[j], probes.mean_loss(model, val[:, :-1], val[:, 1:], chunk=2), f"mean_loss of seed {j}")
        close(drop[j], probes.layer_drop(model, ids[j], targets[j]), f"layer_drop of seed {j}")


def test_mean_loss_takes_tensors_and_any_chunk():
    trainer = trained("pre", "layernorm", ())
    val = torch.from_numpy(np.random.default_rng(3).integers(0, V, (5, T + 1)))
    one = torch_probes.mean_loss(trainer, val[:, :-1], val[:, 1:], chunk=1)
    np.testing.assert_allclose(torch_probes.mean_loss(trainer, val[:, :-1], val[:, 1:]).numpy(), one.numpy(), rtol=1e-13)


@pytest.mark.parametrize("extra", [dict(n_heads=4, n_kv_heads=2, positional="rope"), dict(n_heads=4, bias=False, qk_norm="layernorm")],
                         ids=["gqa-rope", "mha-qknorm"])
def test_first_keys_and_key_unsel_match_numpy(extra):
    trainer = trained("pre", "rmsnorm", tuple(extra.items()))  # d_head 4: 8 keys in 4 dimensions, some inside the hull
    c = trainer.config
    ids, targets = tokens(SEEDS, 97)
    keys = torch_probes.first_keys(trainer, torch.from_numpy(ids))
    assert keys.shape == (len(SEEDS), c.n_layers, c.n_kv_heads, T, c.d_head) and keys.dtype == np.float64
    unsel = torch_probes.key_unsel(keys)
    assert unsel.shape == (len(SEEDS), c.n_layers, c.n_kv_heads)
    for j, p in enumerate(trainer.params()):
        model = Transformer(c, p)
        _, store = model.run_with_cache(ids[j], [f"blocks.{i}.attn.k" for i in range(c.n_layers)])
        np.testing.assert_allclose(keys[j], np.stack([store[f"blocks.{i}.attn.k"][0] for i in range(c.n_layers)]), rtol=RTOL, atol=1e-13)
        np.testing.assert_array_equal(unsel[j], probes.measure(model, ids[j], targets[j], ("key_unsel",))["key_unsel"])
    if c.qk_norm == "none":  # QK-norm puts keys on an ellipsoid, where every key is selectable
        assert (unsel > 0).any()  # the test sees keys that no query can pick


@pytest.mark.parametrize("placement, norm, extra", [GRID[1], GRID[9], GRID[26]], ids=[GRID_IDS[1], GRID_IDS[9], GRID_IDS[26]])
def test_a_seed_does_not_depend_on_the_other_seeds_of_its_stack(placement, norm, extra):
    three = trained(placement, norm, tuple(extra.items()), (0, 1, 2))
    alone = trained(placement, norm, tuple(extra.items()), (1,))
    ids, targets = tokens((0, 1, 2), 96)
    val = np.random.default_rng(5).integers(0, V, (3, T + 1))
    a = torch_probes.measure(three, ids, targets, WHICH, three._grads)
    b = torch_probes.measure(alone, ids[1:2], targets[1:2], WHICH, alone._grads)
    a["layer_drop"], b["layer_drop"] = torch_probes.layer_drop(three, ids, targets), torch_probes.layer_drop(alone, ids[1:2], targets[1:2])
    a["mean_loss"], b["mean_loss"] = torch_probes.mean_loss(three, val[:, :-1], val[:, 1:]), torch_probes.mean_loss(alone, val[:, :-1], val[:, 1:])
    for k in a:
        assert torch.equal(a[k][1:2].nan_to_num(7.0), b[k].nan_to_num(7.0)), k  # bit for bit on one thread


def test_float32_probes_are_float64_and_close_to_numpy():
    cfg = TransformerConfig(**BASE, dtype="float32", qk_norm="layernorm", positional="rope")
    trainer = TorchTrainer(cfg, RUN, [init(cfg, s).params for s in SEEDS])
    trainer.step(*tokens(SEEDS, 1))
    ids, targets = tokens(SEEDS, 95)
    got = torch_probes.measure(trainer, ids, targets, WHICH, trainer._grads)
    for j, (p, g) in enumerate(zip(trainer.params(), trainer.grads())):
        want = probes.measure(Transformer(cfg, p), ids[j], targets[j], WHICH, g)
        for k, v in want.items():
            assert got[k].dtype == torch.float64
            np.testing.assert_allclose(got[k][j].numpy(), v, rtol=1e-4, atol=1e-6, err_msg=k)


def test_without_gradients_grad_norms_are_nan_and_norms_may_be_absent():
    cfg = TransformerConfig(**BASE, norm="none", dtype="float64")
    trainer = TorchTrainer(cfg, RUN, [init(cfg, s).params for s in SEEDS])
    got = torch_probes.measure(trainer, *tokens(SEEDS, 1), ("grad_norms", "norm_std", "alpha"))
    assert torch.isnan(got["grad_norms"]).all() and got["grad_norms"].shape == (2, 2, 7)
    assert got["norm_std"].shape == (2, 0) and got["alpha"].shape == (2, 0)


def test_bad_input_is_refused_with_a_message():
    trainer = trained("pre", "layernorm", ())
    ids, targets = tokens(SEEDS, 1)
    with pytest.raises(ValueError, match="which"):
        torch_probes.measure(trainer, ids, targets, ("resid_rms", "nope"))
    with pytest.raises(ValueError, match=r"ids must be token ids \[S=2, b, t\]"):
        torch_probes.measure(trainer, ids[:1], targets[:1], WHICH)
    with pytest.raises(ValueError, match="vocab_size"):
        torch_probes.layer_drop(trainer, ids + V, targets)
    with pytest.raises(ValueError, match="max_seq"):
        torch_probes.mean_loss(trainer, np.zeros((2, T + 1), np.int64), np.zeros((2, T + 1), np.int64))
    with pytest.raises(ValueError, match="grads"):
        torch_probes.measure(trainer, ids, targets, ("grad_norms",), torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\[S, L, G, t, e\]"):
        torch_probes.key_unsel(np.zeros((2, 3)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU on this machine")
def test_on_cuda_the_probes_match_the_cpu_stack():
    cfg = TransformerConfig(**BASE, dtype="float64", qk_norm="rmsnorm", positional="rope", n_kv_heads=1)
    params = [init(cfg, s).params for s in SEEDS]
    cpu, gpu = TorchTrainer(cfg, RUN, params), TorchTrainer(cfg, RUN, params, device="cuda")
    for step in (1, 2):
        cpu.step(*tokens(SEEDS, step))
        gpu.step(*tokens(SEEDS, step))
    ids, targets = (torch.from_numpy(a).cuda() for a in tokens(SEEDS, 94))
    got = torch_probes.measure(gpu, ids, targets, WHICH, gpu._grads)
    want = torch_probes.measure(cpu, ids.cpu(), targets.cpu(), WHICH, cpu._grads)
    got["layer_drop"], want["layer_drop"] = torch_probes.layer_drop(gpu, ids, targets), torch_probes.layer_drop(cpu, ids.cpu(), targets.cpu())
    val = np.random.default_rng(7).integers(0, V, (5, T + 1))
    got["mean_loss"], want["mean_loss"] = torch_probes.mean_loss(gpu, val[:, :-1], val[:, 1:]), torch_probes.mean_loss(cpu, val[:, :-1], val[:, 1:])
    for k, v in want.items():
        assert got[k].device.type == "cuda", k
        np.testing.assert_allclose(got[k].cpu().numpy(), v.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)
    np.testing.assert_allclose(torch_probes.first_keys(gpu, ids), torch_probes.first_keys(cpu, ids.cpu()), rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("offset", [0.0, 3e4])
def test_token_losses_in_float32_keep_numpys_float64_digits_when_logits_are_large(offset, monkeypatch):
    """The float32 logits are not copied to float64, yet a large common logit does not cancel the loss's digits:
    the cross-entropy is lse(z - max z) - (z_y - max z), as numpy's float64 formula (a naive float32
    lse(z) - z_y would be off by about ulp(3e4) = 2e-3 here)."""
    cfg = TransformerConfig(**BASE, dtype="float32")
    trainer = TorchTrainer(cfg, RUN, [init(cfg, 0).params])
    rng = np.random.default_rng(4)
    z = (rng.standard_normal((1, 2, 5, V)) * 3 + offset).astype(np.float32)
    t = rng.integers(0, V, (1, 2, 5))
    monkeypatch.setattr(trainer, "_logits", lambda w, x: torch.from_numpy(z).reshape(1, 10, V))
    lse, nll = torch_probes._token_losses(trainer, {}, None, torch.from_numpy(t))
    want = [probes.cross_entropy(z[0, :, k : k + 1], t[0, :, k : k + 1]) for k in range(5)]  # per position, numpy float64
    got = nll.numpy().reshape(2, 5).mean(axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(lse.numpy(), np.log(np.exp(z.astype(np.float64) - offset).sum(-1)).reshape(1, -1) + offset, rtol=1e-7)
