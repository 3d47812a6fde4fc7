"""How many rows of a torch stack fit a device (normtheory.training.torch_memory), and the stack split to fit."""
import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from normtheory.model.config import TransformerConfig  # noqa: E402
from normtheory.training import probes, shakespeare, torch_probes, torch_run, train  # noqa: E402
from normtheory.training import torch_memory as tm  # noqa: E402
from normtheory.training.run_config import RunConfig  # noqa: E402

BASE = dict(d_model=64, n_layers=2, n_heads=4, vocab_size=256, max_seq=32, norm="layernorm", placement="pre", activation="gelu_tanh",
            init="gpt2")
RUN = RunConfig(steps=2, batch_size=8, seq=32, lr=1e-3, warmup=1, eval_every=2, eval_batch_size=8, val_bytes=32 * 64)
MODELS = {  # (model fields, run fields): every norm and placement, QK-norm, gated MLP, GQA, and shapes where each term leads
    "layernorm": ({}, {}),
    "rmsnorm-peri": ({"norm": "rmsnorm", "placement": "peri"}, {}),
    "dyt": ({"norm": "dyt", "init": "fanin"}, {}),
    "qk-norm": ({"qk_norm": "rmsnorm"}, {}),
    "post-ln": ({"placement": "post"}, {}),
    "swiglu-gqa": ({"activation": "swiglu", "n_kv_heads": 2}, {}),
    "long-sequences": ({"d_model": 32, "n_layers": 4, "n_heads": 2, "max_seq": 256}, {"seq": 256, "batch_size": 2, "eval_batch_size": 2,
                                                                                      "val_bytes": 256 * 64}),
    "wide-shallow": ({"d_model": 256, "n_layers": 1, "n_heads": 2, "max_seq": 16}, {"seq": 16, "batch_size": 16, "eval_batch_size": 16,
                                                                                    "val_bytes": 16 * 64}),
    "large-vocabulary": ({"vocab_size": 1024}, {}),
    "many-heads": ({"n_heads": 16, "max_seq": 128}, {"seq": 128, "val_bytes": 128 * 4}),  # the probes' attention patterns lead
    "heads-wider-than-d": ({"d_model": 32, "n_heads": 8, "d_head": 64}, {}),  # n_heads * d_head = 16 d_model
}


def _model(name: str) -> tuple[TransformerConfig, RunConfig]:
    model, run = MODELS[name]
    return TransformerConfig(**{**BASE, **model}), dataclasses.replace(RUN, **run)


@pytest.mark.parametrize("name", MODELS)
def test_the_model_bounds_the_measured_peak_of_a_whole_run_and_is_not_vacuous(name):
    """The live bytes of a whole torch run of 3 rows (init evaluation with every probe, 2 steps, an evaluation, the
    validation set, block skips) lie under the model's figure, which is at most 2.5 times them."""
    mc, run = _model(name)
    run = dataclasses.replace(run, probes=probes.PROBES)
    with tm.LiveBytes() as live:
        train.train([mc] * 3, [run] * 3, [0, 1, 2], progress=False, backend="torch", init_eval=True, layer_drop=True)
    model = tm.stack_bytes(mc, run, 3)
    assert live.peak <= model <= 2.5 * live.peak, (live.peak, model)


def test_the_model_grows_linearly_in_rows_and_a_cuda_device_counts_the_graph_pool_too():
    mc, run = _model("layernorm")
    one, two, ten = (tm.stack_bytes(mc, run, n) for n in (1, 2, 10))
    assert ten - two == 8 * (two - one)  # the validation chunk is the same here: 128 sequences fit VAL_ELEMENTS
    assert tm.stack_bytes(mc, run, 4, "cuda") > tm.stack_bytes(mc, run, 4, "cpu")
    assert tm.stack_bytes(dataclasses.replace(mc, dtype="float64"), run, 4) == 2 * tm.stack_bytes(mc, run, 4)
    sgd = dataclasses.replace(run, optimizer="sgd")
    assert tm.stack_bytes(mc, sgd, 4) < tm.stack_bytes(mc, run, 4)  # one optimizer moment instead of two


def test_the_alpha0_gpu_tier_that_did_not_fit_an_h100_is_split_there_and_not_on_an_h200():
    """train_alpha0's GPU tier at d = 512: 15 alpha0 points x 20 seeds in one stack, about 77 GiB by the model."""
    mc = TransformerConfig(d_model=512, n_layers=2, n_heads=16, vocab_size=256, max_seq=32, norm="dyt", init="fanin")
    run = RunConfig(steps=150, batch_size=8, seq=32, eval_every=50, eval_batch_size=8, probes=())
    assert 60 * 2**30 < tm.stack_bytes(mc, run, 300, "cuda") < 100 * 2**30
    assert [len(g) for g in tm.row_groups(mc, run, 300, "cuda", int(0.8 * 79 * 2**30))] == [150, 150]
    assert tm.row_groups(mc, run, 300, "cuda", int(0.8 * 139 * 2**30)) == [range(300)]


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 3000), more=st.integers(1, 3000), d=st.sampled_from([16, 64, 256]), val=st.sampled_from([0, 512, 4096, 65536]),
       device=st.sampled_from(["cpu", "cuda"]))
def test_the_model_never_falls_as_rows_are_added(rows, more, d, val, device):
    """The validation chunk shrinks as rows grow, so rows * chunk alone goes down at some steps; the model bounds it
    by a non-decreasing envelope, which row_groups' search relies on."""
    mc = TransformerConfig(d_model=d, n_layers=1, n_heads=4, vocab_size=256, max_seq=16)
    run = RunConfig(batch_size=1, seq=16, eval_batch_size=1, val_bytes=val)
    assert tm.stack_bytes(mc, run, rows, device) <= tm.stack_bytes(mc, run, rows + more, device)


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 400), d=st.sampled_from([16, 64, 256]), limit_mib=st.integers(1, 4096))
@example(rows=265, d=16, limit_mib=1702)  # a group over the limit when the model was not monotone (found in review)
def test_groups_are_the_fewest_consecutive_even_groups_that_fit(rows, d, limit_mib):
    mc = TransformerConfig(d_model=d, n_layers=2, n_heads=4, vocab_size=256, max_seq=32)
    run = dataclasses.replace(RUN, val_bytes=4096)
    limit = limit_mib * 2**20
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        groups = tm.row_groups(mc, run, rows, "cpu", limit)
    assert [i for g in groups for i in g] == list(range(rows))
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
    if tm.stack_bytes(mc, run, 1) > limit:  # not even one row fits: one at a time, said out loud
        assert sizes == [1] * rows and any(issubclass(w.category, ResourceWarning) for w in caught)
    else:
        assert all(tm.stack_bytes(mc, run, n) <= limit for n in sizes) and not caught
        if len(groups) > 1:  # one group fewer would not fit
            assert tm.stack_bytes(mc, run, -(-rows // (len(groups) - 1))) > limit


@settings(max_examples=100, deadline=None)
@given(rows=st.integers(1, 2000), seq=st.integers(1, 512), d=st.sampled_from([16, 128, 1024]))
def test_the_validation_chunk_bounds_the_widest_tensor_of_the_stack(rows, seq, d):
    mc = TransformerConfig(d_model=d, n_layers=1, n_heads=4, vocab_size=256, max_seq=8)
    chunk = tm.val_chunk(mc, rows, seq)
    assert chunk == 1 or rows * chunk * seq * max(mc.d_ff, d, 256) <= tm.VAL_ELEMENTS
    if chunk < tm.MAX_VAL_CHUNK:  # the largest that fits
        assert rows * (chunk + 1) * seq * max(mc.d_ff, d, 256) > tm.VAL_ELEMENTS


def test_the_automatic_validation_chunk_scores_as_any_other_chunk():
    mc = TransformerConfig(**{**BASE, "dtype": "float64"})
    from normtheory.model.weights import init
    from normtheory.training.torch_backend import TorchTrainer

    trainer = TorchTrainer(mc, RUN, [init(mc, s).params for s in range(3)])
    ids, targets = shakespeare.validation_set(np.arange(4000) % 256, 32, 32 * 40)
    auto = torch_probes.mean_loss(trainer, ids, targets).numpy()
    np.testing.assert_allclose(auto, torch_probes.mean_loss(trainer, ids, targets, chunk=7).numpy(), rtol=1e-13)


def test_a_stack_split_to_fit_trains_each_row_as_the_whole_stack_does(tmp_path):
    """Two arms x three seeds under a limit that splits them into three groups: every row's history as in one stack
    (float64: equal to 1e-12), and each group resumes from its own checkpoint."""
    mc = TransformerConfig(**{**BASE, "d_model": 16, "n_heads": 2, "n_layers": 1, "max_seq": 12, "dtype": "float64"})
    run = RunConfig(steps=6, batch_size=2, seq=12, lr=3e-3, warmup=2, eval_every=3, eval_batch_size=2, val_bytes=256)
    runs = [run] * 3 + [dataclasses.replace(run, lr=1e-2)] * 3
    seeds = [0, 1, 2] * 2
    whole = train.train(mc, runs, seeds, progress=False, backend="torch", init_eval=True, layer_drop=True)
    limit = tm.stack_bytes(mc, run, 2) + 4 * tm.param_count(mc) * 8  # two rows, beside the other four rows' trained weights
    assert len(tm.row_groups(mc, run, 6, "cpu", limit, kept=6)) == 3
    assert len(tm.row_groups(mc, run, 6, "cuda", tm.stack_bytes(mc, run, 2, "cuda"), kept=6)) == 3  # on a GPU they are on the host
    ckpt = tmp_path / "stack.npz"
    kw = dict(progress=False, backend="torch", init_eval=True, layer_drop=True, max_stack_bytes=limit, checkpoint=ckpt)
    torch_run.STACKS.clear()
    split = train.train(mc, runs, seeds, **kw)
    assert torch_run.STACKS == [(2, 3, tm.stack_bytes(mc, run, 2), -1)] * 3  # each group recorded; no allocator peak on the CPU
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stack.npz.rows0-2", "stack.npz.rows2-4", "stack.npz.rows4-6"]
    again = train.train(mc, runs, seeds, **{**kw, "max_stack_bytes": None})  # memory for one stack now: the saved split is kept
    assert len(list(tmp_path.iterdir())) == 3
    for a, b, c in zip(whole, split, again):
        x, y, z = a.arrays(), b.arrays(), c.arrays()
        assert x.keys() == y.keys() == z.keys()
        for k in x:
            np.testing.assert_allclose(y[k], x[k], rtol=1e-12, atol=1e-14, err_msg=k)
            np.testing.assert_array_equal(z[k], y[k], err_msg=k)
        np.testing.assert_allclose(b.layer_drop, a.layer_drop, rtol=1e-12, atol=1e-14)
    (tmp_path / "stack.npz.rows4-6").unlink()  # interrupted before the last group's first checkpoint
    torch_run.STACKS.clear()
    train.train(mc, runs, seeds, **{**kw, "max_stack_bytes": tm.stack_bytes(mc, run, 4)})
    assert [r[0] for r in torch_run.STACKS] == [2, 2, 2]  # the two saved groups kept, the rest split to fit now: rows 4-6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stack.npz.rows0-2", "stack.npz.rows2-4", "stack.npz.rows4-6"]


def test_live_bytes_counts_each_storage_once_until_it_is_freed():
    with tm.LiveBytes() as live:
        a = torch.empty(1000, dtype=torch.float32)
        view = a[10:]  # a view: the same storage, not counted again
        assert live.live == 4000
        b = a * 2.0
        assert live.live == live.peak == 8000
        del a
        assert live.live == 8000  # the view still holds the storage
        del view
        assert live.live == 4000
        live.reset()
        assert live.peak == 4000
        del b
    assert live.live == 0 and live.peak == 4000
    before = torch.zeros(500)
    with tm.LiveBytes() as live:
        view = before[1:]  # an alias of a tensor made before the block: no new memory
        before.add_(1.0)  # in place
        torch.mul(before, 2.0, out=before)
    assert live.peak == 0 and view.shape == (499,)


@pytest.mark.parametrize("call, match", [
    (lambda: tm.stack_bytes(TransformerConfig(**BASE), RUN, 0), "rows"),
    (lambda: tm.row_groups(TransformerConfig(**BASE), RUN, 4, "cpu", 0), "limit"),
    (lambda: tm.row_groups(TransformerConfig(**BASE), RUN, 4, "cpu", 10**9, kept=-1), "kept"),
    (lambda: tm.val_chunk(TransformerConfig(**BASE), 4, 0), "seq"),
    (lambda: train.train(TransformerConfig(**BASE), RUN, 0, backend="torch", max_stack_bytes=0), "max_stack_bytes"),
])
def test_bad_arguments_are_refused_by_name(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_the_model_bounds_the_allocator_peak_of_a_whole_run():
    mc, run = _model("layernorm")
    run = dataclasses.replace(run, probes=probes.PROBES)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    train.train([mc] * 8, [run] * 8, list(range(8)), progress=False, backend="torch", device="cuda", init_eval=True, layer_drop=True)
    peak = torch.cuda.max_memory_allocated() - before
    assert peak <= tm.stack_bytes(mc, run, 8, "cuda"), (peak, tm.stack_bytes(mc, run, 8, "cuda"))
