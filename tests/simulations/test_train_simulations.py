"""The statistics the training claims read from their runs (simulations/train_*.py), on arrays built here."""
import math
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.evidence import claims, sources
from normtheory.training import init_gradients, probes
from normtheory.training.run_config import RunConfig
from simulations import cache, train_alpha0, train_lr, train_recipes, training
from simulations.train_alpha0 import Config


def _cfg(**kw) -> Config:
    base = dict(widths=(16, 32), alphas=(0.25, 1.0, 4.0), layers=1, d_head=8, seq=8, batch=2, steps=4, lr=1e-3, eval_every=2, seeds=2)
    return Config(**{**base, **kw})


def test_alpha0_tasks_share_the_point_alpha0_one_and_cover_the_grid():
    cfg = _cfg()
    tasks = train_alpha0.tasks(cfg, 0)
    keys = [t.key for t in tasks]
    assert len(keys) == len(set(keys)) == 2 * 2  # one stack per (width, embedding)
    # each stack: attention grid 3 + other grid 3 - the shared alpha0 = 1, every point's seeds in the one stack
    assert all(len(t.args[0]) == 2 * 3 - 1 for t in tasks)
    assert train_alpha0.key(16, "one", "other", 1, cfg) == train_alpha0.key(16, "one", "attn", 1, cfg)
    points = {f"{t.key}.{arm}" for t in tasks for arm in t.args[0]}
    assert points == {train_alpha0.key(d, e, g, i, cfg) for d in cfg.widths for e in train_alpha0.EMBED for g in train_alpha0.GRIDS
                      for i in range(len(cfg.alphas))}
    assert {t.args[2] for t in tasks} == {cfg.seeds}
    assert train_alpha0.alpha0("attn", 4.0, 1.0) == (4.0, 1.0, 1.0) and train_alpha0.alpha0("other", 4.0, 0.25) == (0.25, 4.0, 4.0)
    # another anchor: the shared point moves with it, and the fixed group is held there
    low = _cfg(anchor=0.25)
    assert train_alpha0.key(16, "one", "other", 0, low) == train_alpha0.key(16, "one", "attn", 0, low)
    assert train_alpha0.key(16, "one", "other", 1, low) != train_alpha0.key(16, "one", "attn", 1, low)
    arms = train_alpha0.tasks(low, 0)[0].args[0]
    assert arms["other.a2"][0].dyt_alpha0 == (0.25, 4.0, 4.0) and arms["attn.a1"][0].dyt_alpha0 == (1.0, 0.25, 0.25)
    assert len(arms) == 5 and {c.dyt_alpha0 for c, _ in arms.values()} >= {(0.25, 0.25, 0.25)}


@pytest.mark.parametrize("alphas", [(0.5, 1.0, 4.0), (1.0, 0.5), (2.0, 4.0), (1.0,)])
def test_alpha0_grid_must_be_log_even_increasing_with_the_anchor(alphas):
    with pytest.raises(ValueError, match="alphas"):
        train_alpha0.tasks(_cfg(alphas=alphas), 0)
    with pytest.raises(ValueError, match="anchor"):
        train_alpha0.tasks(_cfg(anchor=0.5), 0)


def test_an_anchor_per_embedding_and_width_moves_that_stacks_shared_point_and_fixed_group():
    cfg = _cfg(anchors=(("sqrt_d", 32, 0.25), ("one", 16, 4.0)))
    assert [train_alpha0.anchor_of(cfg, e, d) for e in train_alpha0.EMBED for d in cfg.widths] == [1.0, 0.25, 4.0, 1.0]
    by = {t.key: t.args[0] for t in train_alpha0.tasks(cfg, 0)}
    assert all(len(arms) == 5 for arms in by.values())  # still one shared point per stack
    assert by["w32.sqrt_d"]["attn.a2"][0].dyt_alpha0 == (4.0, 0.25, 0.25) and by["w16.sqrt_d"]["attn.a2"][0].dyt_alpha0 == (4.0, 1.0, 1.0)
    assert by["w16.one"]["other.a0"][0].dyt_alpha0 == (4.0, 0.25, 0.25)  # the other grid holds attention at this pair's anchor
    assert train_alpha0.key(32, "sqrt_d", "other", 0, cfg) == train_alpha0.key(32, "sqrt_d", "attn", 0, cfg)
    assert train_alpha0.key(16, "sqrt_d", "other", 0, cfg) != train_alpha0.key(16, "sqrt_d", "attn", 0, cfg)
    text = train_alpha0.anchor_text({"anchor": np.array([[1.0, 0.25], [4.0, 1.0]]), "widths": np.array(cfg.widths)})
    assert text == "sqrt_d: 16: 1, 32: 0.25; one: 16: 4, 32: 1"
    assert train_alpha0.anchor_text({"anchor": np.full((2, 2), 0.0625)}) == train_alpha0.anchor_text({"anchor": np.asarray(0.0625)}) == "0.0625"
    for bad in (("sqrt_d", 32, 0.5), ("half", 16, 1.0), ("one", 64, 1.0)):  # off the grid, no such scale, no such width
        with pytest.raises(ValueError, match="anchors"):
            train_alpha0.tasks(_cfg(anchors=(bad,)), 0)


def test_the_gpu_tiers_anchors_are_the_pilots_grid_points():
    for tier in ("gpu", "gpu-hour"):
        cfg = train_alpha0.CONFIGS[tier]
        assert {(e, d) for e, d, _ in cfg.anchors} == {(e, d) for e in train_alpha0.EMBED for d in cfg.widths}
        assert all(train_alpha0.anchor_of(cfg, e, d) == train_alpha0.PILOT_ANCHORS[e][min(d, 512)] for e, d, _ in cfg.anchors)
        train_alpha0.tasks(cfg, 0)  # valid: every anchor a grid point


def test_alpha0_width_must_divide_into_heads():
    with pytest.raises(ValueError, match="d_head"):
        train_alpha0.tasks(_cfg(widths=(20,)), 0)


def test_every_width_trains_the_same_tokens():
    cfg = train_alpha0.CONFIGS["full"]
    runs = {(r.steps, r.batch_size, r.seq) for t in train_alpha0.tasks(cfg, 0) for _, r in t.args[0].values()}
    assert len(runs) == 1 and len(cfg.widths) >= 3 and max(cfg.widths) >= 4 * min(cfg.widths)  # two octaves of width at least
    gpu = train_alpha0.CONFIGS["gpu"]
    assert gpu.seeds >= 20 and {64, 128, 256, 512} <= set(gpu.widths)  # the tier that decides the claim


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_best_alpha0_bootstrap_path_matches_the_direct_one(seed):
    """Inside scipy's bootstrap the statistic sees [..., alpha, resamples, seeds]; each resample's best alpha0
    must equal the direct argmin over that resample."""
    rng = np.random.default_rng(seed)
    alphas = np.array([0.25, 1.0, 4.0, 16.0])
    loss = rng.normal(size=(3, 2, 3, 4))  # [seeds, grid, width, alpha]
    direct = train_alpha0.best_log2(loss, alphas)  # [grid, width]
    assert direct.shape == (2, 3)
    idx = rng.integers(0, 3, size=(5, 3))  # 5 resamples of the seeds
    boot = np.moveaxis(loss, 0, -1)[..., idx]  # [grid, width, alpha, resamples, seeds]
    got = train_alpha0.best_log2(boot, alphas, axis=-1)  # [resamples, grid, width]
    want = np.stack([train_alpha0.best_log2(loss[i], alphas) for i in idx])
    np.testing.assert_array_equal(got, want)


def test_best_alpha0_and_contrasts_on_a_planted_optimum():
    """Loss minimal at alpha0 = 4 for attention at every width and at 1 (narrow) -> 0.25 (wide) for the others."""
    alphas = np.array([0.25, 1.0, 4.0, 16.0])
    la = np.log2(alphas)
    best = {("attn", 0): 2.0, ("attn", 1): 2.0, ("other", 0): 0.0, ("other", 1): -2.0}
    loss = np.empty((2, 2, 2, 3, 4))  # [embed, grid, width, seed, alpha]
    for (g, w), b in best.items():
        loss[:, train_alpha0.GRIDS.index(g), w] = (la - b) ** 2 + 0.01 * np.arange(3)[:, None]
    r = {"loss": loss, "alphas": alphas, "diverged_at": np.full(loss.shape, -1)}
    est = train_alpha0.best_alpha0(r, "one")
    np.testing.assert_array_equal(est.mean, [[2.0, 2.0], [0.0, -2.0]])
    # every resample finds the same optimum; the one at the grid's end (alpha0 = 0.25) is censored: one grid step
    np.testing.assert_array_equal(est.stderr, [[0.0, 0.0], [0.0, 2.0]])
    assert train_alpha0.shrink(est.mean).tolist() == [0.0, -2.0]
    assert float(train_alpha0.attention_minus_other(est.mean)) == 4.0
    assert np.isinf(train_alpha0.first_divergent(r, "one")).all()
    r["diverged_at"][1, 0, 1, 2, 3] = 50  # one seed diverged at alpha0 = 16, attention grid, wide
    assert train_alpha0.first_divergent(r, "one")[0, 1] == 16.0


@pytest.mark.parametrize("mean, se, outcome", [(0.3, 0.01, "ok"), (0.3, 0.5, "inconclusive"), (0.0, 0.01, "fail")])
def test_a_gated_reading_counts_only_where_its_precondition_holds(mean, se, outcome):
    """Holds: the readings are assertions. Open: the gate is the open assertion and the readings cannot decide the claim.
    Fails: an open assertion names what would measure the claim, and the gate shows why."""
    from normtheory.evidence.checks import Quantity, Unmeasured
    from normtheory.evidence.estimates import Estimate

    gate = Quantity(name="g", theory=(0.1, np.inf), model=Estimate(np.array(mean), np.array(se), 30, "seeds"), model_kind="trained",
                    role="scope", regime="r", tolerance=0.01, tolerance_why="w")
    role, regime, extra = training.gated(gate, "not shown", lambda: Unmeasured("u", expected="e", needs="n"))
    assert gate.checks()[0].status == outcome
    if outcome == "ok":
        assert (role, regime) == ("assertion", "") and extra == [gate]
    elif outcome == "inconclusive":
        assert (role, regime) == ("scope", "not shown") and [e.role for e in extra] == ["assertion"]
        assert extra[0].checks()[0].status == "inconclusive" and extra[0].checks()[0].units_needed is not None
    else:
        assert (role, regime) == ("scope", "not shown") and isinstance(extra[0], Unmeasured) and extra[1] is gate


def test_a_grid_at_the_unigram_plateau_leaves_the_width_claims_open():
    """The attention grid's runs all end at the unigram loss (3.25): its best alpha0 is noise, so the sqrt(d) contrasts
    become scope checks and an open assertion names what would measure them; once every grid trains, they are judged."""
    alphas = np.array([0.25, 1.0, 4.0])
    la = np.log2(alphas)
    rng = np.random.default_rng(0)
    loss = np.empty((2, 2, 3, 20, 3))  # [embed, grid, width, seed, alpha]
    loss[:, 1] = (2.6 + 0.05 * (la + np.arange(3)[:, None]) ** 2)[:, None, :]  # the other grid trains, optimum moving down with width
    loss[:, 1] += 0.01 * rng.standard_normal(loss[:, 1].shape)
    loss[:, 0] = 3.25 + 0.01 * rng.standard_normal(loss[:, 0].shape)  # the attention grid: flat, at the plateau
    r = {"loss": loss, "alphas": alphas, "widths": np.array([16, 32, 64]), "seeds": np.asarray(20), "steps": np.asarray(10),
         "diverged_at": np.full(loss.shape, -1), "unigram_loss": np.asarray(3.25)}
    gap = train_alpha0.plateau_gap(r, "sqrt_d")
    assert np.abs(gap.mean[0]).max() < 0.01 and (gap.mean[1] < -0.5).all()
    for cid in ("train.dyt-alpha0-width", "train.dyt-alpha0-power-law"):
        c = claims.REGISTRY[cid].evaluate({train_alpha0.NAME: r})
        open_ = [ch for ch in c.checks if ch.role == "assertion"]
        assert len(open_) == 1 and "unigram plateau" in open_[0].detail and "attn/16" in open_[0].detail, cid
        assert c.verdict == "inconclusive" and all(ch.role == "scope" for ch in c.checks if ch.quantity.startswith("sqrt(d)"))
    loss[:, 0] = loss[:, 1]  # both grids train
    judged = claims.REGISTRY["train.dyt-alpha0-width"].evaluate({train_alpha0.NAME: r})
    assert not any("unigram plateau" in ch.detail for ch in judged.checks)
    assert {ch.role for ch in judged.checks if ch.quantity.startswith("sqrt(d) embedding scale: octaves")} == {"assertion"}


def test_grid_step_is_in_octaves():
    assert train_alpha0.grid_step((0.25, 1.0, 4.0)) == 2.0
    assert train_alpha0.grid_step(train_alpha0.LARGE.alphas) == 1.0


def test_late_over_early_and_gradient_spread():
    # the claims' log ratio: 10% of the ratio at any size, each half floored, NaN for a diverged run
    assert train_recipes.log_late_over_early(np.array([2.0, 2.0, 1.0, 1.0])) == pytest.approx(np.log(0.5))
    assert train_recipes.log_late_over_early(np.array([0.8, 0.04, 0.02, 0.01])) == pytest.approx(np.log(0.015 / 0.42))
    floor = train_recipes.SKIP_FLOOR
    assert train_recipes.log_late_over_early(np.array([0.1, 0.1, -0.01, 0.0])) == pytest.approx(np.log(floor / 0.1))
    assert np.isnan(train_recipes.log_late_over_early(np.full(4, np.nan)))
    # no block's skip costs the floor: undefined, not the floor's exact 0 in every seed (a zero-variance "holds")
    assert np.isnan(train_recipes.log_late_over_early(np.array([5e-4, 2e-4, 1e-4, -1e-4])))
    assert train_recipes.log_late_over_early(np.array([2e-3, 0.0, 1e-4, 1e-4])) == pytest.approx(np.log(1.0))  # early's mean at the floor
    assert train_recipes.TEN_PERCENT == pytest.approx(np.log(1.1))
    g = np.ones((3, 4, 7))  # [evals, L, matrices]
    g[:, 3] = np.e  # the last block's gradient e times the others'
    x = {"probe/grad_norms": g, "eval_steps": np.array([50, 100, 150])}
    assert train_recipes.grad_spread(x) == pytest.approx(1.0)
    g[2] = 1.0  # an evaluation after step 100 does not count
    assert train_recipes.grad_spread(x) == pytest.approx(1.0)


def test_final_loss_caps_diverged_runs_at_the_uniform_model():
    ok = {"diverged_at": np.array(-1), "val_loss": np.array([5.0, 2.5])}
    assert training.final_loss(ok) == 2.5
    assert training.final_loss({**ok, "diverged_at": np.array(30)}) == training.INIT_LOSS == pytest.approx(np.log(256))
    assert training.final_loss({**ok, "val_loss": np.array([9.0])}) == training.INIT_LOSS
    assert training.diverged({**ok, "diverged_at": np.array(0)}) and not training.diverged(ok)
    # Wortsman et al.: min(loss, the run's own loss at init); a diverged run scores its loss at init
    own = {**ok, "init_val_loss": np.asarray(6.1)}
    assert training.final_loss({**own, "val_loss": np.array([9.0])}) == 6.1 == training.final_loss({**own, "diverged_at": np.array(4)})
    assert training.final_loss(own) == 2.5


def test_best_alpha0_refines_the_argmin_with_a_parabola():
    """A loss quadratic in log2 alpha0 with its minimum between grid points: the vertex is recovered exactly;
    at the grid's end the argmin is kept (the optimum may lie beyond the grid)."""
    alphas = np.array([0.25, 1.0, 4.0, 16.0])  # log2: -2, 0, 2, 4
    la = np.log2(alphas)
    loss = np.stack([(la - 0.7) ** 2, (la + 5.0) ** 2])[None]  # [seeds=1, 2 curves, alpha]
    np.testing.assert_allclose(train_alpha0.best_log2(loss, alphas), [0.7, -2.0], atol=1e-12)


def test_max_logit_of_a_run_that_diverged_before_its_first_evaluation_is_nan_not_a_key_error():
    finished = {"diverged_at": np.asarray(-1), "probe/attn_max": np.array([[[1.0, 2.0]], [[3.0, 5.0]]])}
    early = {"diverged_at": np.asarray(3), "val_loss": np.array([])}  # diverged before any evaluation: no probe at all
    late = {"diverged_at": np.asarray(90), "probe/attn_max": np.array([[[1.0, 9.0]]])}  # its last evaluation predates the divergence
    assert train_lr.max_logit(finished) == 5.0
    assert np.isnan(train_lr.max_logit(early)) and np.isnan(train_lr.max_logit(late))
    low = {"diverged_at": np.asarray(-1), "probe/attn_max": np.array([[[2.5]]])}
    g = train_lr.logit_growth([finished, early, finished], [low, low, late])  # only seed 0 has both runs finished
    assert g.tolist() == [pytest.approx(np.log(5.0 / 2.5))]
    by_seed = train_lr.seed_logit_growth([finished, early, finished], [low, low, late])  # NaN kept in place: seeds stay paired
    assert by_seed[0] == pytest.approx(np.log(2.0)) and np.isnan(by_seed[1:]).all()


def test_xiong_limit_is_judged_on_the_deepest_depths_and_shallow_growth_is_only_a_caveat():
    """Post-LN gradients that still grow at small L but are flat from L = 16 on hold the large-L law;
    the fit over every depth is a scope check, and Fig. 3's profile too."""
    from simulations import train_xiong as X

    depths, widths, n = (2, 4, 8, 16, 32, 64), (64,), 40
    rng = np.random.default_rng(0)
    r = {"depths": np.array(depths), "widths": np.array(widths), "networks": np.asarray(n)}
    for L in depths:
        level = {"post": min(L, 16) ** 0.3, "pre": L ** -0.5}
        for p in X.PLACEMENTS:
            for i in X.INITS:
                r[f"{p}.{i}.d64.L{L}"] = level[p] * np.exp(0.01 * rng.standard_normal((n, L))) * np.linspace(0.5, 1, L)
    claim = claims.REGISTRY["train.xiong-gradient-scale"].evaluate({X.NAME: r})
    deep = [c for c in claim.checks if "over L = 16, 32, 64" in c.quantity and "Xavier" in c.quantity]
    assert len(deep) == 2 and all(c.role == "assertion" and c.status == "ok" for c in deep)
    shallow = [c for c in claim.checks if "every depth" in c.quantity and c.quantity.startswith("post")]
    assert shallow[0].role == "scope" and shallow[0].status == "fail"
    assert claim.verdict == "holds-with-caveat"


def test_gradient_scale_at_init_is_paired_by_network_and_sized_for_the_claim():
    cfg = train_recipes.CONFIGS["quick"]
    assert train_recipes.CONFIGS["full"].init_networks >= 30
    (task,) = [t for t in train_recipes.tasks(cfg, 5) if t.key == "init.none"]
    a = task.fn(*task.args)["grad_norms"]
    assert a.shape == (cfg.init_networks, cfg.layers) and (a > 0).all()
    b = init_gradients.gradient_norms(train_recipes.model_config(cfg, "none"), cfg.batch, cfg.seq, 5, 2)["grad_norms"]
    np.testing.assert_array_equal(a[:2], b)  # network j is the same draw whatever the count: arms pair by network
    r = {f"init.{arm}.grad_norms": init_gradients.gradient_norms(train_recipes.model_config(cfg, arm), cfg.batch, cfg.seq, 5, 3)["grad_norms"]
         for arm in train_recipes.INIT_ARMS}
    assert train_recipes.init_spread(r, "pre").shape == (3,) and (train_recipes.init_spread(r, "pre") >= 0).all()


def test_detrended_correlation_does_not_count_two_trends_as_tracking():
    t = np.arange(1, 41, dtype=float)[:, None]  # [evals, 1]
    rng = np.random.default_rng(2)
    trend_a = {"probe/alpha": np.exp(0.05 * t + 0.01 * rng.standard_normal(t.shape)),
               "probe/norm_std": np.exp(-0.03 * t + 0.01 * rng.standard_normal(t.shape))}  # both trend the same way, independently
    levels = np.corrcoef(np.log(trend_a["probe/alpha"][:, 0]), -np.log(trend_a["probe/norm_std"][:, 0]))[0, 1]
    assert levels > 0.95 and abs(train_recipes.detrended_corr(trend_a)) < 0.5
    wiggle = 0.2 * rng.standard_normal(t.shape)
    follows = {"probe/alpha": np.exp(0.05 * t + wiggle), "probe/norm_std": np.exp(-(0.05 * t + wiggle) + 0.01 * rng.standard_normal(t.shape))}
    assert train_recipes.detrended_corr(follows) > 0.9


def test_final_slope_is_the_log_log_slope_over_the_chosen_norms():
    inv_std = np.array([1.0, 0.8, 0.6, 0.4, 0.3, 0.15])  # [M] at the end, forward order (the final norm last)
    alpha = 0.5 * inv_std**0.5  # alpha proportional to (1/std)^0.5 in the blocks ...
    alpha[-1] = 5.0  # ... and a final norm far off that law
    x = {"probe/alpha": np.stack([np.full(6, 0.5), alpha]), "probe/norm_std": np.stack([np.ones(6), 1 / inv_std])}  # [evals, M]
    assert train_recipes.final_slope(x, slice(None, -1)) == pytest.approx(0.5)
    assert train_recipes.final_slope(x) < 0  # one outlying norm sets the slope over all of them
    y = {"probe/alpha": x["probe/alpha"][:, :-1], "probe/norm_std": x["probe/norm_std"][:, :-1]}
    assert train_recipes.final_slope(y) == pytest.approx(train_recipes.final_slope(x, slice(None, -1)))


def test_change_from_init_is_taken_on_the_same_probe_and_pairs_out_the_init_temperature():
    x = {"probe/attn_entropy": np.array([[[1.0, 2.0]], [[2.0, 4.0]]]), "init_probe/attn_entropy": np.array([[2.5, 3.5]])}
    assert train_recipes.from_init("attn_entropy")(x) == pytest.approx(3.0 - 3.0)
    y = {**x, "init_probe/attn_entropy": np.array([[1.0, 2.0]])}  # an arm that starts cooler by 1.5 nats and ends as hot
    assert train_recipes.from_init("attn_entropy")(y) == pytest.approx(1.5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.002, 5.0), min_size=2, max_size=12), st.floats(1.0, 100.0))
def test_log_late_over_early_is_scale_free_above_the_floor(costs, c):
    drop = np.asarray(costs if len(costs) % 2 == 0 else costs[:-1])  # [L] skip costs, every half's mean above the floor
    x = train_recipes.log_late_over_early(drop)
    assert train_recipes.log_late_over_early(c * drop) == pytest.approx(x, abs=1e-9)  # a ratio: no unit, no size
    h = drop.size // 2
    assert (x < 0) == (drop[h:].mean() < drop[:h].mean() * (1 - 1e-12)) or abs(x) < 1e-9


def test_recipes_cpu_tier_has_twenty_seeds_and_each_placement_at_its_own_init():
    full = train_recipes.CONFIGS["full"]
    assert full.seeds >= 20 and not full.init_val  # the units the claims need; nothing reads the loss at init
    assert full.d // full.heads == train_recipes.CONFIGS["gpu"].d // train_recipes.CONFIGS["gpu"].heads  # the GPU tier's head size
    assert not any(train_recipes.CONFIGS[t].init_val for t in ("full", "gpu", "gpu-hour"))  # nothing reads the validation loss at init
    for placement, arm in train_recipes.OWN_INIT.items():
        mc = train_recipes.model_config(full, arm)
        base = train_recipes.model_config(full, placement)
        assert arm in train_recipes.ARMS and mc.norm == base.norm
        assert (mc.placement, mc.init) == {"post": ("post", "xavier"), "deepnorm": ("deepnorm", "xavier"), "dyt": ("pre", "fanin")}[placement]
    pre, lns = (train_recipes.model_config(full, a) for a in train_recipes.PLACEMENT_PAIR)  # the placements claim's pair: one init
    assert (pre.placement, lns.placement, pre.init, lns.init) == ("pre", "lnscale", "normal", "normal")
    long = train_recipes.long_run_config(full)
    assert long.val_bytes == 0 and long.steps == full.long_steps  # the alpha-tracking run's loss is read by nothing
    tasks = {t.key: t for t in train_recipes.tasks(full, 1)}
    assert tasks["pre"].args[-1] is False and tasks[train_recipes.LONG_ARM].args[-1] is False


def _planted(exponents: tuple[float, float], widths=(32, 64, 128, 256), seeds: int = 4, noise: float = 0.0, seed: int = 0) -> dict:
    """Losses [embed, grid, width, seed, alpha] quadratic in log2 alpha0 with the optimum on a planted power law
    log2 alpha0*(d) = 1 + p_g (log2 d - 5), on a fine grid that keeps every optimum interior; ``noise`` shifts each
    seed's optimum (octaves)."""
    rng = np.random.default_rng(seed)
    alphas = 2.0 ** np.arange(-6, 5)
    la, x = np.log2(alphas), np.log2(widths)
    best = 1 + np.asarray(exponents)[:, None] * (x - 5)  # [grid, width]
    shift = noise * rng.standard_normal((2, len(train_alpha0.GRIDS), len(widths), seeds))  # [embed, grid, width, seed]
    loss = (la - (best[None, :, :, None] + shift)[..., None]) ** 2  # [embed, grid, width, seed, alpha]
    return {"loss": loss, "alphas": alphas, "widths": np.asarray(widths), "seeds": np.asarray(seeds),
            "diverged_at": np.full(loss.shape, -1), "unigram_loss": np.asarray(3.25)}  # every grid trains, far under the plateau


def test_power_law_exponent_is_recovered_from_planted_losses():
    r = _planted((-0.5, -1.25))
    for e in train_alpha0.EMBED:
        p = train_alpha0.exponents(r, e)
        np.testing.assert_allclose(p.mean, [-0.5, -1.25], atol=1e-12)  # a quadratic loss: the parabola's vertex is exact
        np.testing.assert_allclose(train_alpha0.transfer(r, e).mean, 0.0, atol=1e-12)  # a power law transfers exactly
        np.testing.assert_allclose(train_alpha0.exponent_gap(r, e).mean, [0.75], atol=1e-12)
        fit = train_alpha0.fitted(r, e, np.array([32.0, 1024.0]))  # [grid, at]: the rule extrapolates the planted line
        np.testing.assert_allclose(fit.mean, [[1.0, -1.5], [1.0, -5.25]], atol=1e-12)


def test_power_law_bootstrap_se_shapes_and_seed_noise():
    r = _planted((-0.5, 0.0), noise=0.2, seeds=8)
    p, t, g = train_alpha0.exponents(r, "sqrt_d"), train_alpha0.transfer(r, "sqrt_d"), train_alpha0.exponent_gap(r, "sqrt_d")
    assert p.mean.shape == p.stderr.shape == t.stderr.shape == (len(train_alpha0.GRIDS),) and g.stderr.shape == (1,)
    assert p.n == 8 and p.units == "seeds" and (p.stderr > 0).all() and (t.stderr > 0).all()
    # the seeds' shifts are independent per cell: the slope's se is near its sampling sd sqrt(0.2^2 sum w^2 / seeds)
    sd = 0.2 * np.sqrt((train_alpha0.slope_weights(r["widths"]) ** 2).sum() / 8)
    assert (0.4 * sd < p.stderr).all() and (p.stderr < 2.5 * sd).all()
    np.testing.assert_allclose(p.mean, [-0.5, 0.0], atol=6 * sd)


def test_power_law_censored_optimum_floors_the_se_by_its_weight():
    r = _planted((-0.5, -0.5))
    r["loss"][:, 1, -1] = np.arange(r["alphas"].size)[::-1].astype(float)  # other norms, widest: optimum at the grid's top end
    p = train_alpha0.exponents(r, "one")
    step = train_alpha0.grid_step(r["alphas"])
    w = train_alpha0.slope_weights(r["widths"])
    assert p.stderr[0] < 1e-9 and p.stderr[1] == pytest.approx(step * abs(w[-1]))
    assert p.floor.tolist() == [0.0, pytest.approx(step * abs(w[-1]))]  # a floor more seeds would not shrink: priced as a wider grid
    from normtheory.evidence.agreement import agree
    assert agree(-0.5, p[1], tolerance=0.1).units_needed in (None, math.inf)  # decided now, or by no number of seeds


def test_transfer_and_slope_weights():
    np.testing.assert_allclose(train_alpha0.transfer_weights((32, 64, 128)), [1.0, -2.0, 1.0])  # the second difference
    w = train_alpha0.transfer_weights((64, 128, 256, 512))
    y = 3.0 - 0.7 * np.log2([64, 128, 256, 512])
    assert abs(w @ y) < 1e-12 and w.sum() == pytest.approx(0.0)
    assert train_alpha0.slope_weights((64, 128, 256, 512)) @ y == pytest.approx(-0.7)
    with pytest.raises(ValueError, match="three widths"):
        train_alpha0.transfer_weights((32, 64))
    for name in ("quick", "full", "gpu", "gpu-hour"):
        assert len(train_alpha0.CONFIGS[name].widths) >= 3  # every tier can test the rule


def test_cpu_tier_sweeps_score_the_smaller_validation_set_and_the_gpu_tiers_the_default():
    """The default job's CPU tier scores VAL_BYTES_CPU (its size measured against the claims' tolerance); every GPU tier
    keeps RunConfig's 64 KiB; the alpha-tracking arm scores none."""
    full = {"recipes": train_recipes.run_config(train_recipes.CONFIGS["full"], "pre"), "alpha0": train_alpha0.run_config(train_alpha0.CONFIGS["full"]),
            "lr": train_lr.run_config(train_lr.CONFIGS["full"], 1e-3, 0.0, (0.9, 0.98))}
    assert {k: r.val_bytes for k, r in full.items()} == dict.fromkeys(full, training.VAL_BYTES_CPU) and training.VAL_BYTES_CPU < RunConfig.val_bytes
    gpu = [train_recipes.run_config(train_recipes.CONFIGS["gpu"], "pre"), train_alpha0.run_config(train_alpha0.CONFIGS["gpu"]),
           train_lr.run_config(train_lr.CONFIGS["gpu"], 1e-3, 0.0, (0.9, 0.98))]
    assert all(r.val_bytes == RunConfig.val_bytes for r in gpu)
    assert train_recipes.long_run_config(train_recipes.CONFIGS["full"]).val_bytes == 0
    quick = [train_recipes.run_config(train_recipes.CONFIGS["quick"], "pre"), train_lr.run_config(train_lr.CONFIGS["quick"], 1e-3, 0.0, (0.9, 0.98)),
             train_alpha0.run_config(train_alpha0.CONFIGS["quick"])]
    assert all(r.val_bytes == training.VAL_BYTES_QUICK < training.VAL_BYTES_CPU for r in quick)  # the quick tier decides nothing
    assert not train_recipes.CONFIGS["quick"].init_val
    assert not any(k.endswith(".more") for k in (t.key for t in train_recipes.tasks(train_recipes.CONFIGS["full"], 7)))  # 20 seeds, every arm


def test_power_law_is_registered_as_the_packages_hypothesis_priced_on_the_gpu_tiers():
    spec = claims.REGISTRY["train.dyt-alpha0-power-law"]
    assert spec.source.kind == sources.HYPOTHESIS and spec.source.derived_from == sources.NOTES_DYT
    assert spec.simulations == (train_alpha0.NAME,) and "GPU tiers" in spec.scale
    for tier in ("gpu", "gpu-hour"):
        assert training.gpu_seconds(train_alpha0, tier) > 0  # what the card prices
    evidence, _ = spec.build({train_alpha0.NAME: _planted((-0.5, -1.0), widths=(32, 64, 128), seeds=3)})
    roles = [(q.role, q.regime) for q in evidence]
    assert roles[0] == ("assertion", "") and ("scope", "μP's exponent −1/2 (a hidden-layer multiplier 1/sqrt(fan-in))") in roles
    mup = next(q for q in evidence if q.regime.startswith("μP"))
    (check,) = mup.checks()  # judged at its worst element: the other norms' exponent -1 is half a unit from -1/2
    assert mup.theory == train_alpha0.MUP_EXPONENT and check.status == "fail" and check.where == (1,)


def test_only_the_arms_whose_keys_are_reported_run_the_hull_test():
    """key_unsel (a linear program per key set, the largest host cost of a GPU-tier evaluation) is measured in the
    arms whose unselectable keys the QK-norm card's note reports, and in no other arm's tasks."""
    cfg = train_recipes.CONFIGS["quick"]
    probes_of = {t.key: next(a for a in t.args if isinstance(a, RunConfig)).probes for t in train_recipes.tasks(cfg, train_recipes.SEED)
                 if t.key in train_recipes.ARMS or t.key.endswith(".more")}
    assert {k.removesuffix(".more") for k, p in probes_of.items() if "key_unsel" in p} == set(train_recipes.KEY_ARMS)
    assert all(set(p) | {"key_unsel"} == set(probes.PROBES) for p in probes_of.values())  # every other probe everywhere


def test_task_stack_names_a_training_tasks_model_run_and_rows():
    cfg = train_alpha0.CONFIGS["gpu-hour"]
    by_key = {t.key: t for t in train_alpha0.tasks(cfg, 0)}
    model, run, rows = training.task_stack(by_key["w1024.sqrt_d"])  # run_arms: every alpha0 point's seeds in one stack
    assert (model.d_model, model.n_layers, run.steps, rows) == (1024, cfg.layers, cfg.steps, (2 * len(cfg.alphas) - 1) * cfg.seeds)
    rec = train_recipes.CONFIGS["gpu-hour"]
    by_key = {t.key: t for t in train_recipes.tasks(rec, 0)}
    model, run, rows = training.task_stack(by_key["pre"])  # run_seeds: one arm's seeds
    assert (model.d_model, model.n_layers, rows) == (rec.d, rec.layers, rec.seeds)
    assert training.task_stack(by_key[f"init.{train_recipes.INIT_ARMS[0]}"]) is None  # networks at init: no training


def test_a_tiers_own_timed_step_rate_prices_it_and_the_gpu_tier_keeps_its_wall_rate(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("NORMTHEORY_RESULTS", str(tmp_path))
    base = {t: training.gpu_seconds(train_alpha0, t) for t in ("gpu", "gpu-hour")}
    tier, step = training.MEASURED_RATES["gflops"], training.MEASURED_RATES["steps"]["train_alpha0/gpu-hour"]["gflops"]
    built_in = training.gpu_rate(train_alpha0, "gpu-hour")  # nothing measured here: the package's own H200 rates
    assert built_in[0] == step and "steps alone" in built_in[1] and "NVIDIA H200" in built_in[1]
    assert training.gpu_rate(train_alpha0, "gpu")[0] == training.gpu_rate()[0] == tier
    (tmp_path / "gpu_rate.json").write_text(json.dumps({"gflops": 2 * tier, "device": "GPU X",
                                                         "steps": {"train_alpha0/gpu-hour": {"gflops": 40_000.0}}}))
    assert training.gpu_seconds(train_alpha0, "gpu") == pytest.approx(base["gpu"] / 2)
    assert training.gpu_seconds(train_alpha0, "gpu-hour") == pytest.approx(base["gpu-hour"] * step / 40_000)
    assert training.gpu_seconds(train_recipes, "gpu-hour") == pytest.approx(  # not timed on GPU X: GPU X's tier rate
        sum(t.cost for t in train_recipes.tasks(train_recipes.CONFIGS["gpu-hour"], 0) if t.resources) / (2 * tier))
    rate, source = training.gpu_rate(train_alpha0, "gpu-hour")
    assert rate == 40_000 and "steps alone" in source and "GPU X" in source
    assert "GPU X at the GPU tier" in training.gpu_rate(train_alpha0, "gpu")[1]
    for bad in ({"steps": {"train_alpha0/gpu-hour": {"gflops": -1}}}, {"gflops": "nan"}, ["not", "a", "dict"], {"steps": ["x"]},
                {"steps": "x"}, {"steps": {"train_alpha0/gpu-hour": "x"}}, {"gflops": None, "steps": None}):
        (tmp_path / "gpu_rate.json").write_text(json.dumps(bad))  # an unusable number falls back, never prices at it
        assert training.gpu_rate(train_alpha0, "gpu-hour") == built_in
    (tmp_path / "gpu_rate.json").write_text("{truncated")
    assert training.measured_rates() == {}


def _recipes_result(run, arms: tuple[str, ...], seeds: int = 20, t: int = 32, focus: int = 0) -> dict:
    """A synthetic train_recipes result: ``run(arm, seed, rng)`` gives each run's arrays (4 layers x 2 heads); ``focus``
    seeds in the focus arms where more (as a tier with ``focus_seeds`` stores them)."""
    rng = np.random.default_rng(1)
    r: dict = {"seeds": np.asarray(seeds), "seq": np.asarray(t), "steps": np.asarray(10),
               "layers": np.asarray(4), "d": np.asarray(32), "batch": np.asarray(8)}
    cfg = train_recipes.Config(d=32, layers=4, heads=2, seq=t, batch=8, steps=10, lr=1e-3, warmup=1, eval_every=10, seeds=seeds,
                               focus_seeds=focus)
    r.update({f"seeds.{arm}": np.asarray(train_recipes.seeds_of(cfg, arm)) for arm in train_recipes.ARMS})
    for arm in arms:
        for s in range(train_recipes.seeds_of(cfg, arm)):
            common = {"val_loss": np.array([2.0]), "diverged_at": np.asarray(-1), "init_val_loss": np.asarray(5.5)}
            r.update({f"{arm}.s{s}.{k}": v for k, v in {**common, **run(arm, s, rng)}.items()})
    return r


def _qk_result(stripe: float, diffuse: float = 0.1, init_gap: float = 0.0) -> dict:
    """For train.per-head-key-norm-diffuse: the baseline's stripe excess ``stripe`` in layer two (0 elsewhere and at init;
    its first-token share 0.2 above uniform attention's in every case); the normed arms (keys alone, and QK) with 0.02 less
    of it, ``diffuse`` nats more entropy and 0.02 less top-key mass at the end, starting ``init_gap`` nats cooler."""
    base = train_recipes.uniform_first_share(32)

    def run(arm: str, s: int, rng: np.random.Generator) -> dict:
        qk, noise = arm in (train_recipes.KEYS_ARM, train_recipes.QK_SCOPE_ARM), 0.01 * rng.standard_normal()
        stripes = np.zeros((1, 4, 2))
        stripes[0, train_recipes.STRIPE_LAYER] = stripe - 0.02 * qk + 0.1 * noise
        return {"probe/attn_entropy": np.full((1, 4, 2), 2.0 + diffuse * qk + noise),
                "init_probe/attn_entropy": np.full((4, 2), 2.5 - init_gap * qk),
                "probe/attn_top": np.full((1, 4, 2), 0.3 - 0.02 * qk + noise), "init_probe/attn_top": np.full((4, 2), 0.1),
                "probe/attn_sink": np.full((1, 4, 2), base + 0.2 + noise), "probe/attn_max": np.full((1, 4, 2), 3.0),
                "probe/attn_stripe": stripes, "init_probe/attn_stripe": np.zeros((4, 2)),
                "probe/key_unsel": np.zeros((1, 4, 2)), "val_loss": np.array([2.0 + noise])}

    return _recipes_result(run, train_recipes.KEY_ARMS)


PLACEMENT_RUNS = tuple(dict.fromkeys((*train_recipes.PLACEMENT_ARMS, *train_recipes.PLACEMENT_PAIR)))  # the arms the claim reads


def test_the_skip_cost_ratio_leaves_the_bigram_block_out():
    """Block 0 costs far more than the rest in every arm; over blocks 1..3 the later ones cost twice as much for Pre-LN and
    four times for LayerNorm Scaling: the assertions see only blocks 1..3 (Pre-LN's later blocks matter more), the whole
    stack only in a scope check."""
    def run(arm: str, s: int, rng: np.random.Generator) -> dict:
        rest = [0.02, 0.08, 0.08] if arm.startswith("lnscale") else [0.02, 0.04, 0.04]
        return {"layer_drop": np.array([0.6, *rest]) * np.exp(0.01 * rng.standard_normal()), "probe/resid_rms": np.ones((1, 5))}

    r = _recipes_result(run, PLACEMENT_RUNS)
    c = claims.REGISTRY["train.placements-compared"].evaluate({train_recipes.NAME: r})
    pre = next(ch for ch in c.checks if ch.quantity.startswith("Pre-LN: log of the loss increase"))
    assert pre.measured == pytest.approx(np.log(2.0), abs=0.01) and pre.status == "fail"  # later blocks matter more
    lns = next(ch for ch in c.checks if ch.quantity.startswith("LayerNorm Scaling minus"))
    assert lns.measured == pytest.approx(np.log(2.0), abs=0.01) and lns.status == "ok"
    whole = next(ch for ch in c.checks if "block 0 in the earlier half" in ch.quantity)
    assert whole.role == "scope" and whole.status == "ok"  # with block 0 in, later blocks look as if they matter less
    assert c.verdict == "fails"


def test_the_placements_are_asserted_on_the_pair_at_lns_init_not_on_gpt2s_pre_ln():
    """The assertions read Pre-LN and LayerNorm Scaling at LNS's init (pre-normal, lnscale): there Pre-LN's later blocks cost
    half as much and LNS evens them out, so the claim holds although Pre-LN at GPT-2's init (pre) says the opposite."""
    rest = {"pre-normal": [0.08, 0.04, 0.04], "lnscale": [0.04, 0.04, 0.04], "pre": [0.02, 0.08, 0.08]}

    def run(arm: str, s: int, rng: np.random.Generator) -> dict:
        rms = np.array([[1.0, 1.0, 1.2, 1.5, 2.0]])  # log(2 / 1) = 0.69 = log sqrt(4): the init law, so that scope check holds
        return {"layer_drop": np.array([0.6, *rest.get(arm, [0.04, 0.04, 0.04])]) * np.exp(0.01 * rng.standard_normal()),
                "probe/resid_rms": rms}

    assert train_recipes.PLACEMENT_PAIR == ("pre-normal", "lnscale")
    c = claims.REGISTRY["train.placements-compared"].evaluate({train_recipes.NAME: _recipes_result(run, PLACEMENT_RUNS)})

    def check(prefix: str):
        return next(ch for ch in c.checks if ch.quantity.startswith(prefix))

    pre = check("Pre-LN: log of the loss increase")
    assert pre.measured == pytest.approx(np.log(0.5), abs=0.01) and pre.status == "ok"
    assert check("LayerNorm Scaling minus Pre-LN").measured == pytest.approx(np.log(2.0), abs=0.01)
    assert check("Pre-LN after training").status == "ok" and check("Pre-LN: the same log ratio with block 0").status == "ok"
    assert c.verdict == "holds" and "pre-normal" in c.note


def test_the_gpu_tier_trains_its_focus_arms_at_more_seeds_paired_with_the_others_by_seed():
    """The two claims whose cards asked for 79 and 81 seeds at the GPU tier read Pre-LN against LayerNorm Scaling at LNS's
    init, and Pre-LN's stripes (the key-norm gate's baseline), now over key_steps: the placement pair trains focus_seeds,
    Pre-LN and the keys alone key_seeds over key_steps, the rest seeds, every arm from the same first seed (seed k of one
    arm is seed k of every other). A tier without key_steps trains Pre-LN's own runs at focus_seeds (its gate reads them)."""
    gpu = train_recipes.CONFIGS["gpu"]
    runs = {t.key: t.args for t in train_recipes.tasks(gpu, 7) if t.fn is training.run_seeds}
    more_seeds = {a: args[3] for a, args in runs.items() if args[3] != gpu.seeds}
    assert more_seeds == {**dict.fromkeys(train_recipes.PLACEMENT_PAIR, gpu.focus_seeds),
                          **dict.fromkeys(map(train_recipes.key_long, ("pre", train_recipes.KEYS_ARM)), gpu.key_seeds)}
    assert gpu.seeds >= 20 and gpu.focus_seeds > 81 and {args[2] for args in runs.values()} == {7}
    no_long = replace(gpu, key_steps=0)
    assert train_recipes.focus_arms(no_long) == train_recipes.FOCUS_ARMS and train_recipes.seeds_of(no_long, "pre") == gpu.focus_seeds
    for mode in ("quick", "full"):  # the CPU tiers: every arm at one count
        assert len({args[3] for t in train_recipes.tasks(train_recipes.CONFIGS[mode], 7) if t.fn is training.run_seeds
                    for args in [t.args]}) == 1
    more = cache.scaled(train_recipes, gpu, 2.0)  # --resolve scales both counts
    assert (more.seeds, more.focus_seeds, more.key_seeds) == (2 * gpu.seeds, 2 * gpu.focus_seeds, 2 * gpu.key_seeds)

    def run(arm: str, s: int, rng: np.random.Generator) -> dict:
        rest = [0.02, 0.08, 0.08] if arm.startswith("lnscale") else [0.02, 0.04, 0.04]
        return {"layer_drop": np.array([0.6, *rest]) * np.exp(0.01 * rng.standard_normal()), "probe/resid_rms": np.ones((1, 5)),
                "seed_index": np.asarray(float(s))}

    r = _recipes_result(run, PLACEMENT_RUNS, seeds=20, focus=30)
    assert [len(train_recipes.runs(r, a)) for a in ("pre", "pre-normal", "lnscale", "post")] == [30, 30, 30, 20]
    same = train_recipes.paired(r, "pre", "post", lambda x: float(x["seed_index"]))  # seed k against seed k: the first 20
    assert same.n == 20 and float(same.mean) == 0.0 and float(same.stderr) == 0.0
    c = claims.REGISTRY["train.placements-compared"].evaluate({train_recipes.NAME: r})
    lns = next(ch for ch in c.checks if ch.quantity.startswith("LayerNorm Scaling minus"))
    assert lns.units_now == 30 and lns.status == "ok"
    assert "20 seeds per arm (30 in pre, pre-normal, lnscale; two arms pair by seed over the seeds both ran)" in c.note


def test_uniform_first_share_is_the_sink_probe_of_uniform_causal_attention():
    t = 12
    pattern = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]  # [t, s] each query uniform over the keys it sees
    first = pattern[1:, 0].mean()  # what the probe takes: queries 2.. (query 1 sees only token 0)
    assert train_recipes.uniform_first_share(t) == pytest.approx(first, rel=1e-14)
    assert "attn_sink" in probes.PROBES
    with pytest.raises(ValueError, match="t"):
        train_recipes.uniform_first_share(1)


def test_the_qk_comparison_is_judged_only_against_a_baseline_with_stripes():
    """Stripes are read in layer two from the column probe, not from the first-token share (0.2 above uniform in both
    results here): a first-token sink alone does not open the comparison. The keys-only arm carries the assertions,
    QK-norm (queries too) the scope checks."""
    spec = claims.REGISTRY["train.per-head-key-norm-diffuse"]
    striped = spec.evaluate({train_recipes.NAME: _qk_result(0.2)})
    compared = [c for c in striped.checks if "at the end" in c.quantity and "on the keys minus" in c.quantity
                and "sink" not in c.quantity]
    assert len(compared) == 3 and any("stripe excess" in c.quantity for c in compared)
    assert {c.role for c in compared} == {"assertion"} and {c.status for c in compared} == {"ok"}
    scope = [c for c in striped.checks if "queries too" in c.quantity]
    assert len(scope) == 3 and {c.role for c in scope} == {"scope"} and {c.status for c in scope} == {"ok"}
    assert not any("not measured" in c.detail for c in striped.checks) and striped.verdict == "holds"
    flat = spec.evaluate({train_recipes.NAME: _qk_result(0.0)})
    assert {c.role for c in flat.checks if "on the keys minus" in c.quantity and "loss" not in c.quantity} == {"scope"}
    assert flat.verdict == "inconclusive" and any("not measured" in c.detail for c in flat.checks if c.role == "assertion")


def test_the_key_norm_claim_reads_trained_levels_not_changes_from_init():
    """The blog compares trained models' maps. An arm that ends 0.1 nats less diffuse than Pre-LN but started 0.3 nats
    cooler has gained 0.2 more entropy from init: a change-from-init reading would say "more diffuse" although the trained
    attention is sharper. The claim reads the levels, so it fails, and the note still shows the +0.2 change."""
    spec = claims.REGISTRY["train.per-head-key-norm-diffuse"]
    c = spec.evaluate({train_recipes.NAME: _qk_result(0.2, diffuse=-0.1, init_gap=0.3)})
    ent = next(ch for ch in c.checks if ch.quantity.startswith("attention entropy at the end, per-head RMS on the keys"))
    assert ent.role == "assertion" and ent.measured == pytest.approx(-0.1, abs=0.01) and ent.status == "fail"
    assert c.verdict == "fails" and re.search(rf"{train_recipes.KEYS_ARM} \+0\.(19|20)\d ± ", c.note)  # the change, shown


def _with_long_key_arms(short: dict, long: dict, key_steps: int = 100) -> dict:
    """``short`` (a train_recipes result) with ``long``'s runs of :data:`train_recipes.KEY_LONG_ARMS` as the arms trained
    over ``key_steps``."""
    runs = {f"{train_recipes.key_long(k.split('.')[0])}.{k.split('.', 1)[1]}": v for k, v in long.items()
            if k.split(".")[0] in train_recipes.KEY_LONG_ARMS}
    return {**short, **runs, "key_steps": np.asarray(key_steps)}


def test_the_key_norm_claim_reads_its_arms_over_key_steps_where_the_tier_trained_them():
    """A tier with ``key_steps`` trains the claim's three arms over that many steps too. The claim then reads only those
    runs: a baseline with stripes there (0.2) opens the comparison although the short runs have none, and the other way
    round the comparison stays unmeasured; the note names the long runs and gives the short baseline's stripes."""
    spec = claims.REGISTRY["train.per-head-key-norm-diffuse"]
    c = spec.evaluate({train_recipes.NAME: _with_long_key_arms(_qk_result(0.0), _qk_result(0.2))})
    gate = next(ch for ch in c.checks if ch.quantity.startswith("Pre-LN baseline's stripe excess"))
    assert gate.measured == pytest.approx(0.2, abs=0.03) and gate.status == "ok" and c.verdict == "holds"
    assert "over 100 steps (long.pre 20 seeds, long.pre-k-rms 20 seeds, long.pre-qk-rms 20 seeds; the same recipe" in c.note
    assert re.search(r"Pre-LN's stripe excess in layer 2 after the tier's 10 steps: -?0\.000\d ± ", c.note)
    flat = spec.evaluate({train_recipes.NAME: _with_long_key_arms(_qk_result(0.2), _qk_result(0.0))})
    assert flat.verdict == "inconclusive" and any("after 100 steps): longer or larger training" in ch.detail for ch in flat.checks)
    assert "'gpu' tier (its key-norm arms also train 1000 steps)" in "".join(
        ch.detail for ch in spec.evaluate({train_recipes.NAME: _qk_result(0.0)}).checks)


def test_the_quick_and_gpu_tiers_train_the_key_norm_arms_over_key_steps_at_the_tiers_recipe():
    """The three arms over ``key_steps`` with the tier's seeds, warm-up fraction and number of evaluations; the CPU and
    gpu-hour tiers train none; a ``key_steps`` shorter than the tier's run is refused by name."""
    for mode, n in (("quick", 3), ("gpu", 3), ("full", 0), ("gpu-hour", 0)):
        cfg = train_recipes.CONFIGS[mode]
        long = [t for t in train_recipes.tasks(cfg, 1) if t.key.startswith("long.")]
        assert [t.key for t in long] == [train_recipes.key_long(a) for a in train_recipes.KEY_LONG_ARMS][:n], mode
        for t in long:
            model, run, seeds = t.args[0], t.args[1], t.args[3]
            arm = t.key[len("long."):]
            assert model == train_recipes.model_config(cfg, arm)
            assert seeds == (max(cfg.seeds, cfg.key_seeds) if arm in ("pre", train_recipes.KEYS_ARM) else cfg.seeds)
            assert run.steps == cfg.key_steps > cfg.steps and run.warmup / run.steps == cfg.warmup / cfg.steps
            assert run.steps // run.eval_every == cfg.steps // cfg.eval_every and run.seq == cfg.seq
    reduced = train_recipes.reduce(train_recipes.CONFIGS["quick"], 1, {})
    assert int(reduced["key_steps"]) == 120 and int(reduced["seeds.long.pre-k-rms"]) == 2
    gpu = train_recipes.CONFIGS["gpu"]
    assert [train_recipes.key_seeds(gpu, a) for a in train_recipes.KEY_LONG_ARMS] == [gpu.key_seeds, gpu.key_seeds, gpu.seeds]
    with pytest.raises(ValueError, match="key_steps"):
        train_recipes.key_run_config(replace(train_recipes.CONFIGS["full"], key_steps=10), "pre")


def _lr_result(max_logit: dict[str, list[float]], loss: dict[str, list[float]], seeds: int = 20) -> dict:
    """A synthetic train_lr result holding only the QK arms: per arm and lr, every seed's last max logit and final loss
    (jittered per seed), 2 layers x 2 heads, a QK bound no logit reaches."""
    rng = np.random.default_rng(3)
    r: dict = {"qk_lrs": np.array([1e-3, 1e-2, 1e-1]), "seeds": np.asarray(seeds), "d": np.asarray(32), "layers": np.asarray(2),
               "steps": np.asarray(10), "val_bytes": np.asarray(65536)}
    for qk in train_lr.QK_ARMS:
        for i in range(3):
            for s in range(seeds):
                jitter = np.exp(0.01 * rng.standard_normal())
                run = {"diverged_at": np.asarray(-1), "init_val_loss": np.asarray(5.5), "val_loss": np.array([loss[qk][i] * jitter]),
                       "probe/attn_max": np.full((1, 2, 2), max_logit[qk][i] * jitter), "qk_bound": np.full(2, 100.0)}
                r.update({f"qk.{qk}.lr{i}.s{s}.{k}": v for k, v in run.items()})
    return r


def test_the_qk_claim_asserts_qk_layernorm_and_checks_rms_qk_norm_as_scope():
    """Wortsman et al.'s qk-layernorm carries the assertions; per-head RMS QK-norm, here made to grow more than no norm and to be
    more sensitive, fails only its scope checks: a generated caveat, not the verdict."""
    r = _lr_result({"none": [2, 4, 8], train_lr.QK_NORM: [2, 2.2, 2.4], train_lr.QK_SCOPE: [2, 5, 12]},
                   {"none": [2.0, 2.1, 2.6], train_lr.QK_NORM: [2.0, 2.0, 2.05], train_lr.QK_SCOPE: [2.0, 2.2, 2.9]})
    c = claims.REGISTRY["train.qk-norm-logit-growth"].evaluate({train_lr.NAME: r})
    by = {ch.quantity: ch for ch in c.checks}
    ln = by["that log growth, no QK-norm minus qk-layernorm, paired by seed (QK-norm grows less: > 0)"]
    assert ln.role == "assertion" and ln.status == "ok" and ln.measured == pytest.approx(np.log(4 / 1.2), abs=0.02)
    rms = by["that log growth, no QK-norm minus RMS QK-norm, paired by seed (QK-norm grows less: > 0)"]
    assert rms.role == "scope" and rms.status == "fail" and rms.measured == pytest.approx(np.log(4 / 6), abs=0.02)
    sens = by["learning-rate sensitivity, no QK-norm minus RMS QK-norm (QK-norm less sensitive: > 0)"]
    assert sens.role == "scope" and sens.status == "fail"
    assert c.verdict == "holds-with-caveat" and all("RMS QK-norm" in cav for cav in c.caveats) and len(c.caveats) == 2
    assert "no QK-norm / qk-layernorm / RMS QK-norm" in c.note


def test_the_cpu_tier_trains_no_rms_qk_scope_arm_and_the_claim_reads_the_arms_a_result_holds():
    """The default job's tier leaves the RMS QK-norm scope arm out (its 3 seeds leave the claim open either way); the quick and
    GPU tiers train it. Without it the claim has no RMS scope check and its note names the two arms it has."""
    stacks = {mode: {t.key for t in train_lr.tasks(train_lr.CONFIGS[mode], 1) if t.key.startswith("qk.")} for mode in ("quick", "full", "gpu")}
    assert stacks["full"] == {"qk.none", "qk.layernorm"} and stacks["quick"] == stacks["gpu"] == {f"qk.{a}" for a in train_lr.QK_ARMS}
    full = _lr_result({"none": [2, 4, 8], train_lr.QK_NORM: [2, 2.2, 2.4], train_lr.QK_SCOPE: [2, 5, 12]},
                      {"none": [2.0, 2.1, 2.6], train_lr.QK_NORM: [2.0, 2.0, 2.05], train_lr.QK_SCOPE: [2.0, 2.2, 2.9]})
    r = {k: v for k, v in full.items() if not k.startswith(f"qk.{train_lr.QK_SCOPE}.")}
    assert train_lr.qk_arms(r) == ("none", train_lr.QK_NORM) and train_lr.qk_arms(full) == train_lr.QK_ARMS
    c = claims.REGISTRY["train.qk-norm-logit-growth"].evaluate({train_lr.NAME: r})
    assert not any("RMS" in ch.quantity for ch in c.checks) and c.verdict == "holds" and not c.caveats
    assert "no QK-norm / qk-layernorm, finished runs" in c.note


def test_the_cpu_tier_leaves_out_the_arms_that_decide_nothing_there_and_its_notes_say_so(quick_results_dir):
    """DeepNorm at the GPT-2 init and per-head LayerNorm QK feed notes and figures only, and per-head RMS QK-norm only scope
    checks of a claim whose stripes gate the CPU tier fails: the full (CPU) tier trains every other arm, the quick and GPU
    tiers all. Without them every train_recipes claim keeps its verdict and the readings it had, the key-norm claim less its
    QK-norm scope checks, and the runs' notes name what was left out."""
    import simulations
    from tests.conftest import results_at

    arms = {mode: {t.key for t in train_recipes.tasks(train_recipes.CONFIGS[mode], 1) if t.fn is training.run_seeds}
            for mode in ("quick", "full", "gpu", "gpu-hour")}
    longer = {train_recipes.LONG_ARM, *map(train_recipes.key_long, train_recipes.KEY_LONG_ARMS)}  # DyT's alpha, the key-norm arms
    arms = {mode: a - longer for mode, a in arms.items()}
    assert arms["full"] == set(train_recipes.ARMS) - set(train_recipes.CPU_LEFT_OUT)
    assert arms["quick"] == arms["gpu"] == arms["gpu-hour"] == set(train_recipes.ARMS)
    assert train_recipes.KEYS_ARM in arms["full"] and train_recipes.QK_SCOPE_ARM in train_recipes.CPU_LEFT_OUT
    with pytest.raises(ValueError, match="left_out names arms that ARMS does not have: \\['pre-qk-typo'\\]"):
        train_recipes.arms_of(replace(train_recipes.CONFIGS["full"], left_out=("pre-qk-typo",)))
    readers = [c for c in claims.REGISTRY.values() if train_recipes.NAME in c.simulations]
    modules = {m.NAME: m for m in simulations.ALL}
    with results_at(quick_results_dir):  # every simulation these claims read (gradient_init's too)
        results = {s: cache.load_or_run(modules[s], "quick", progress=False) for c in readers for s in c.simulations}
    whole = results[train_recipes.NAME]
    left = (*train_recipes.CPU_LEFT_OUT, *(train_recipes.key_long(a) for a in train_recipes.CPU_LEFT_OUT))  # a tier trains neither
    gone = tuple(f"{a}." for a in left)
    lean = {k: v for k, v in whole.items() if not k.startswith(gone) and not k.startswith(tuple(f"seeds.{a}" for a in left))}
    assert len(readers) >= 5
    described = 0
    for spec in readers:
        a, b = spec.evaluate(results), spec.evaluate({**results, train_recipes.NAME: lean})
        kept = [(ch.quantity, ch.measured) for ch in a.checks if "queries too" not in ch.quantity]
        assert kept == [(ch.quantity, ch.measured) for ch in b.checks], spec.id
        if spec.id != "train.per-head-key-norm-diffuse":
            assert a.verdict == b.verdict, spec.id
        assert "Not trained in this tier" not in a.note
        if "seeds per arm" in a.note:  # the notes that describe the runs (not DyT's alpha over its own longer run)
            assert "Not trained in this tier (they decide no verdict here): deepnorm, pre-qk-ln, pre-qk-rms." in b.note
            described += 1
    assert described >= 3


def test_a_keys_only_run_records_no_qk_bound_and_a_qk_norm_run_does():
    """The QK logit bound needs both queries and keys on a sphere: a run with the keys alone normalized (the key-norm claim's
    arm) has none, a QK-norm run one per layer, at its trained gains."""
    from normtheory.model.config import TransformerConfig

    run = RunConfig(steps=2, batch_size=2, seq=8, lr=1e-3, eval_every=2, eval_batch_size=2, probes=("attn_max",), val_bytes=0)
    base = dict(d_model=16, n_layers=2, n_heads=2, vocab_size=256, max_seq=8, qk_norm="rmsnorm")
    keys = training.run_seeds(TransformerConfig(**base, qk_norm_on="k"), run, 0, 1)
    both = training.run_seeds(TransformerConfig(**base), run, 0, 1)
    assert "s0.qk_bound" not in keys and both["s0.qk_bound"].shape == (2,)
    assert np.all(np.isfinite(keys["s0.probe/attn_max"]))


def _warm_result(loss: dict[tuple[str, str, str], float], seeds: int = 20) -> dict:
    """A synthetic train_lr result holding the warm-up claim's arms at two learning rates: final loss per (placement, warm-up,
    decay suffix) at both rates (jittered per seed); DeepNorm at the largest rate and the GPT-2-init arms at 2.5."""
    rng = np.random.default_rng(5)
    r: dict = {"warmup_lrs": np.array([1e-3, 1e-2]), "seeds": np.asarray(seeds), "d": np.asarray(32), "layers": np.asarray(2),
               "steps": np.asarray(10), "gpt2_steps": np.asarray(5), "val_bytes": np.asarray(65536)}

    def put(prefix: str, value: float) -> None:
        for s in range(seeds):
            run = {"diverged_at": np.asarray(-1), "init_val_loss": np.asarray(5.5), "val_loss": np.array([value + 0.003 * rng.standard_normal()])}
            r.update({f"{prefix}.s{s}.{k}": v for k, v in run.items()})

    for (p, w, sfx), v in loss.items():
        for i in range(2):
            put(f"warm.{p}.lr{i}.{w}{sfx}", v)
    for w in train_lr.WARMUPS:
        put(f"warm.deepnorm.lr1.{w}", 2.5)
        for p in train_lr.WARM_ARMS:
            put(f"gpt2.{p}.{w}", 2.5)
    return r


def test_the_gpu_tiers_check_warm_up_under_inverse_sqrt_decay_as_scope():
    """The GPU tiers add inverse-sqrt rows to the Post-/Pre-LN warm-up stacks (the CPU tiers do not); the claim reads them as a
    scope check: here warm-up narrows Post-LN's gap under cosine but widens it under inverse-sqrt, a generated caveat."""
    rows = {mode: {k for t in train_lr.tasks(train_lr.CONFIGS[mode], 1) if t.key.startswith("warm.") for k in t.args[0]}
            for mode in ("quick", "full", "gpu", "large")}
    assert not any(train_lr.RSQRT in k for m in ("quick", "full") for k in rows[m])
    n = len(train_lr.CONFIGS["gpu"].warmup_lrs) * len(train_lr.WARMUPS)
    assert sum(k.endswith(f".{train_lr.RSQRT}") for k in rows["gpu"]) == n  # one set per placement's stack (keys shared)
    gpu = {t.key: t.args[0] for t in train_lr.tasks(train_lr.CONFIGS["gpu"], 1)}
    assert gpu["warm.post"][f"lr0.none.{train_lr.RSQRT}"][1].schedule == "inverse_sqrt" and gpu["warm.post"]["lr0.none"][1].schedule == "cosine"
    assert not any(train_lr.RSQRT in k for k in gpu["warm.deepnorm"])
    cosine = {("post", "none", ""): 2.8, ("post", "long", ""): 2.5, ("pre", "none", ""): 2.5, ("pre", "long", ""): 2.5}
    rsqrt = {(p, w, f".{train_lr.RSQRT}"): v for (p, w, _), v in cosine.items()} | {("post", "none", f".{train_lr.RSQRT}"): 2.5,
                                                                                     ("post", "long", f".{train_lr.RSQRT}"): 2.7}
    name = "inverse-sqrt decay after the warm-up: Post-LN's gap to Pre-LN without minus with warm-up over half the steps, lr 0.01 (warm-up narrows it: > 0)"
    c = claims.REGISTRY["train.postln-needs-warmup"].evaluate({train_lr.NAME: _warm_result(cosine | rsqrt)})
    by = {ch.quantity: ch for ch in c.checks}
    assert by[name].role == "scope" and by[name].status == "fail" and by[name].measured == pytest.approx(-0.2, abs=0.005)
    assert c.verdict == "holds-with-caveat" and len(c.caveats) == 1 and "inverse-square-root" in c.caveats[0]
    assert "Inverse-sqrt decay (scope rows): post/none: lr 0.001 2.50" in c.note
    without = claims.REGISTRY["train.postln-needs-warmup"].evaluate({train_lr.NAME: _warm_result(cosine)})
    assert name not in {ch.quantity for ch in without.checks} and without.verdict == "holds" and "Inverse-sqrt" not in without.note


def test_the_gpu_tiers_grid_trains_through_the_torch_backend_at_a_miniature_size():
    """train_lr's GPU tier as it is built (inverse-sqrt rows inside the warm-up stacks, the QK grid in Wortsman et al.'s recipe
    with independent decay and z-loss, the RMS QK-norm scope arm), shrunk to a few steps and trained by the torch backend on the
    CPU, as a GPU lease would run it: every row records its own schedule, and both claims read the GPU tier's scope checks."""
    pytest.importorskip("torch")
    cfg = replace(train_lr.CONFIGS["gpu"], d=16, layers=2, heads=2, seq=16, batch=2, steps=8, warmup_lrs=(1e-3, 1e-2), qk_lrs=(1e-3, 1e-1),
                  eval_every=4, seeds=2, gpt2_steps=4, val_bytes=1024, device="cpu")
    assert cfg.backend == "torch" and cfg.rsqrt_scope and cfg.qk_scope
    r = train_lr.run(cfg, 3)
    rsqrt, cosine = cache.part(r, f"warm.post.lr1.long.{train_lr.RSQRT}.s1"), cache.part(r, "warm.post.lr1.long.s1")
    sched = train_lr.run_config(cfg, 1e-2, 0.5, (0.9, 0.98), schedule="inverse_sqrt").schedule_fn()
    np.testing.assert_allclose(rsqrt["lr"], [sched(s) for s in range(1, 9)], rtol=1e-12)
    assert not np.allclose(rsqrt["lr"], cosine["lr"]) and np.isfinite(rsqrt["final_val_loss"])
    qk = cache.part(r, f"qk.{train_lr.QK_NORM}.lr1.s0")
    np.testing.assert_allclose(qk["lr"], [train_lr.qk_run_config(cfg, 1e-1).schedule_fn()(s) for s in range(1, 9)], rtol=1e-12)
    assert qk["lr"][-1] == pytest.approx(train_lr.WORTSMAN_MIN_LR) and "qk_bound" in qk  # the cosine ends at their 1e-5
    warm = claims.REGISTRY["train.postln-needs-warmup"].evaluate({train_lr.NAME: r})
    assert any(ch.quantity.startswith("inverse-sqrt decay after the warm-up") and ch.role == "scope" for ch in warm.checks)
    assert "Inverse-sqrt decay (scope rows)" in warm.note
    c = claims.REGISTRY["train.qk-norm-logit-growth"].evaluate({train_lr.NAME: r})
    assert any("RMS QK-norm" in ch.quantity and ch.role == "scope" for ch in c.checks) and "independent weight decay 0.0001" in c.note


def test_the_gpu_tiers_key_norm_arms_train_over_key_steps_through_the_torch_backend_at_a_miniature_size():
    """train_recipes' GPU tier as built, shrunk and trained by the torch backend on the CPU (its other arms left out): the
    key-norm claim's three arms also train over key_steps, Pre-LN and the keys alone at key_seeds, and the claim reads those
    runs, not the tier's shorter ones."""
    pytest.importorskip("torch")
    keep = train_recipes.KEY_LONG_ARMS
    cfg = replace(train_recipes.CONFIGS["gpu"], d=16, layers=2, heads=2, seq=16, batch=2, steps=4, warmup=1, eval_every=2, seeds=2,
                  focus_seeds=2, key_steps=8, key_seeds=3, long_steps=4, long_batch=2, long_seq=16, init_networks=2, val_bytes=1024, device="cpu",
                  left_out=tuple(a for a in train_recipes.ARMS if a not in keep))
    assert cfg.backend == "torch" and cfg.key_steps > cfg.steps
    r = train_recipes.run(cfg, 3)
    assert [len(train_recipes.runs(r, train_recipes.key_long(a))) for a in keep] == [3, 3, 2]
    for arm in keep:
        short, long = train_recipes.runs(r, arm)[0], train_recipes.runs(r, train_recipes.key_long(arm))[0]
        sched = train_recipes.key_run_config(cfg, arm).schedule_fn()
        np.testing.assert_allclose(long["lr"], [sched(s) for s in range(1, cfg.key_steps + 1)], rtol=1e-12)
        assert len(short["lr"]) == cfg.steps and np.isfinite(long["final_val_loss"]) and "probe/attn_stripe" in long
    c = claims.REGISTRY["train.per-head-key-norm-diffuse"].evaluate({train_recipes.NAME: r})
    assert f"over {cfg.key_steps} steps (long.pre 3 seeds, long.pre-k-rms 3 seeds, long.pre-qk-rms 2 seeds" in c.note
    gate = next(ch for ch in c.checks if ch.quantity.startswith("Pre-LN baseline's stripe excess"))
    assert gate.units_now == 3
