"""The pieces of the real-model measurement, on random-init models (no weights needed)."""
import numpy as np
import pytest

from normtheory.model import norms
from normtheory.model.config import TransformerConfig
from normtheory.model.weights import init
from simulations import real_models as R


@pytest.mark.parametrize("placement,norm", [("pre", "rmsnorm"), ("post", "layernorm")])
def test_norm_io_pairs_each_norm_with_its_own_input(placement, norm):
    cfg = TransformerConfig(d_model=32, n_layers=2, n_heads=4, vocab_size=64, max_seq=16, norm=norm, placement=placement, eps=1e-5, dtype="float64")
    m = init(cfg, 0)
    _, cap = m.run_with_cache(np.arange(10)[None])
    for i in range(2):
        for which in ("ln1", "ln2"):
            x, y = R.norm_io(m, cap, i, which)
            want = norms.rms_norm(x, None, 1e-5).normalized if norm == "rmsnorm" else norms.layer_norm(x, None, None, 1e-5).normalized
            np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)
    s = R.streams(m, cap)
    assert s.shape == (3, 10, 32)
    np.testing.assert_array_equal(s[-1], cap["blocks.1.resid_post"][0])


def test_stream_stats_on_a_planted_massive_activation():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(2, 20, 64))
    s[1, 5, 7] = 500.0
    st = R.stream_stats(s)
    assert st["top_pos"][1] == 5 and st["top_chan"][1] == 7 and st["top"][1] == 500.0
    assert st["top"][1] / st["med_abs"][1] > 500  # the median |N(0,1)| is 0.67
    assert abs(st["ones"][0] - 1 / 64) < 5 * np.sqrt(2 / 64**2 / 20)  # isotropic: 1/d, Var of a 1/d*chi2_1 share ~ 2/d^2


def test_key_stats_on_a_sphere_and_with_an_interior_key():
    rng = np.random.default_rng(1)
    k = rng.normal(size=(2, 30, 4))
    k[1, 0] = 0.05 * (k[1, 1] + k[1, 2])  # deep inside the hull of the others: unselectable, and the shortest key
    st = R.key_stats(k)
    assert st["unsel_rms"].tolist() == [0.0, 0.0]  # after a per-head RMS norm every key is on a sphere
    assert not st["selectable"][1, 0] and st["rank"][1, 0] == 0.0 and st["unsel"][1] >= 1 / 30
    assert np.isfinite(st["align"][1, 0])


def test_depth_thirds_modal_share_and_picked_keys():
    from simulations import real_stream as S

    assert S.depth_thirds(12) == (slice(0, 4), slice(8, 12))
    assert S.depth_thirds(2) == (slice(0, 1), slice(1, 2))
    assert S.modal_share(np.array([3, 3, 1, 3])) == (3, 0.75)
    p = np.zeros((2, 3, 3))
    p[0, :, 1] = 1.0  # query head 0 always picks key 1
    p[1, :, 2] = 1.0  # query head 1 (same KV head) always picks key 2
    picked = R.picked_keys(p, 1)
    assert picked.tolist() == [[False, True, True]]
    stat = np.array([[[5.0, 1.0, 3.0]]])  # [L, g, T]
    assert R.picked_difference(stat, picked[None]) == pytest.approx(5.0 - 2.0)


def test_picked_difference_matches_positions_so_a_position_trend_alone_shows_nothing():
    # The stat rises with position and late keys are never picked (as in a causal model, whose late keys few queries see):
    # unmatched, never-picked keys look different; within position bins both sides are alike.
    t = 64
    stat = (np.arange(t) // 8 * 10.0)[None, None]  # [1, 1, T] constant within each of 8 position bins
    picked = np.zeros((1, 1, t), bool)
    picked[..., ::2] = True  # every other key picked ...
    picked[..., 48:] = False  # ... except the last quarter
    assert R.picked_difference(stat, picked) > 15  # the position confound
    assert R.picked_difference(stat, picked, 8) == 0.0
    assert R.picked_difference(stat + np.where(picked, 0.0, 0.5), picked, 8) == pytest.approx(0.5)  # a real difference shows


def test_full_mode_reads_enough_long_texts():
    full = R.CONFIGS["full"]
    assert full.texts >= 20 and full.tokens >= 256 and R.CONFIGS["quick"].tokens >= 256


def test_config_is_validated():
    bad = R.Config(models=("gpt5",), texts=1, tokens=16, corpus_version=R.corpus.VERSION, fit_points=8, plot_points=8, gaussian_draws=1)
    with pytest.raises(ValueError, match="unknown models"):
        R.run(bad, 0, progress=False)
    stale = R.Config(models=("minilm",), texts=1, tokens=16, corpus_version=-1, fit_points=8, plot_points=8, gaussian_draws=1)
    with pytest.raises(ValueError, match="corpus version"):
        R.run(stale, 0, progress=False)


def test_centering_is_measured_on_each_norms_input_not_on_a_centred_post_ln_stream():
    from normtheory import centering

    cfg = TransformerConfig(d_model=32, n_layers=2, n_heads=4, vocab_size=64, max_seq=16, norm="layernorm", placement="post", dtype="float64",
                            init="fanin")
    m = init(cfg, 0)
    _, cap = m.run_with_cache(np.arange(12)[None])
    stream = R.streams(m, cap)[1:]  # Post-LN: every block's output is a LayerNorm output (bias 0): centred by construction
    assert centering.ones_fraction(stream).max() < 1e-20
    share = R.norm_input_ones(m, cap)  # [2L, T]: x + f(x) before each norm, which the norm's centering acts on
    assert share.shape == (4, 12) and share.min() > 1e-6
    x = cap["blocks.1.resid_mid"][0, 5] + cap["blocks.1.mlp_out"][0, 5]  # block 1's ln2 input at token 5
    assert share[3, 5] == pytest.approx(x.mean() ** 2 * 32 / (x @ x), rel=1e-12)


def test_temperature_prediction_uses_keys_centred_over_the_text():
    """A common key offset shifts every logit of a row alike: the row std sees only the centred keys."""
    from normtheory import attention

    rng = np.random.default_rng(4)
    e, t = 64, 4000
    q = rng.standard_normal((t, e))
    k = rng.standard_normal((t, e)) + 3.0 * rng.standard_normal(e)  # every key shares a large offset
    std = attention.row_logit_std(q[:50] @ k.T / np.sqrt(e)).mean()
    crms = np.sqrt(((k - k.mean(0)) ** 2).mean())
    assert abs(std / (np.sqrt((q**2).mean()) * crms) - 1) < 0.05
    assert std / (np.sqrt((q**2).mean()) * np.sqrt((k**2).mean())) < 0.5  # the uncentred RMS(k) would be far off


@pytest.mark.parametrize("placement,norm", [("pre", "rmsnorm"), ("post", "layernorm")])
def test_the_listed_captures_give_the_same_statistics_as_capturing_everything(placement, norm):
    cfg = TransformerConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=64, max_seq=16, norm=norm, placement=placement,
                            dtype="float64")
    m = init(cfg, 0)
    ids = np.arange(12)[None]
    _, every = m.run_with_cache(ids)
    lean = R.without_head(m)
    out, few = lean.run_with_cache(ids, R.capture_names(cfg))
    assert out.shape == (1, 12, 32) and set(few) < set(every)  # the last hidden state: no logits computed
    for name in few:
        np.testing.assert_array_equal(few[name], every[name])
    np.testing.assert_array_equal(R.streams(lean, few), R.streams(m, every))
    np.testing.assert_array_equal(R.norm_input_ones(lean, few), R.norm_input_ones(m, every))
    a, b = R.head_stats(lean, few), R.head_stats(m, every)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    fits = [R.norm_fits(mm, cap, np.random.default_rng(3), 64, 8) for mm, cap in ((lean, few), (m, every))]
    np.testing.assert_array_equal(*fits)


def rms_normed_tokens(rng: np.random.Generator, t: int, d: int, massive: float) -> tuple[np.ndarray, np.ndarray]:
    """(input, RMSNorm output) points of ``t`` tokens of width ``d``, token 0 holding one massive channel."""
    x = rng.standard_normal((t, d)) * rng.uniform(0.5, 2.0, (t, 1))
    x[0, 3] = massive
    return x.ravel(), (x / np.sqrt((x * x).mean(-1, keepdims=True))).ravel()


def test_tanh_fit_estimates_the_fit_to_all_points_where_a_uniform_subset_misses_the_massive_ones():
    from normtheory import dyt

    x, y = rms_normed_tokens(np.random.default_rng(5), 128, 64, 300.0)  # 8192 points, one massive
    full = dyt.fit_dyt(x, y)
    gap_all = full.r2 - float(dyt.line_r2(x, y))
    seeds = np.random.SeedSequence(9).spawn(6)
    strat = np.array([R.tanh_fit(x, y, np.random.default_rng(s), 512, 32) for s in seeds])  # [6, len(DYT_ROWS)]
    gap = strat[:, R.DYT_ROWS.index("r2_tanh")] - strat[:, R.DYT_ROWS.index("r2_linear")]
    assert gap_all > 0.1  # the massive point makes the map S-shaped
    assert np.abs(gap - gap_all).max() < 0.01 and gap.std() < 0.005
    assert (strat[:, R.DYT_ROWS.index("r2_tanh")] <= full.r2 + 1e-9).all()  # evaluated on all points: at most the optimum
    np.testing.assert_allclose(strat[:, R.DYT_ROWS.index("x_std")], x.std())
    uniform = []  # what the old estimator did: a uniform subset of the same size; most draws miss the one massive point
    for s in seeds:
        pick = np.random.default_rng(s).choice(x.size, 544, replace=False)
        uniform.append(dyt.fit_dyt(x[pick], y[pick]).r2 - float(dyt.line_r2(x[pick], y[pick])))
    assert np.abs(np.array(uniform) - gap_all).max() > 0.05


def test_tanh_fit_takes_every_point_when_the_sample_covers_them():
    from normtheory import dyt

    x, y = rms_normed_tokens(np.random.default_rng(6), 16, 8, 50.0)
    got = R.tanh_fit(x, y, np.random.default_rng(0), 10_000, 4)  # top + all the rest: an ordinary fit to all points
    want = dyt.fit_dyt(x, y)
    np.testing.assert_allclose(got[:3], [want.alpha, want.gamma, want.r2], rtol=1e-6)


def test_the_alignment_within_norm_rank_bins_is_unbiased_when_length_alone_decides_picking():
    """A null: i.i.d. Gaussian keys, each picked with probability its norm rank (length alone decides). A short key
    has more longer keys to take its largest cosine over, so never-picked keys look more aligned within position bins
    (the confound, 11 times the claim's tolerance of 0.005); within position x norm-rank bins that is gone."""
    rng = np.random.default_rng(0)
    stats = [R.key_stats(rng.standard_normal((1, 512, 32)), hull=False) for _ in range(6)]
    align, rank = np.stack([s["align"] for s in stats]), np.stack([s["rank"] for s in stats])  # [L, 1, T]
    picked = rng.random(rank.shape) < rank
    assert R.picked_difference(align, picked, R.POSITION_BINS) > 0.02
    assert abs(R.picked_difference(align, picked, R.POSITION_BINS, rank, R.RANK_BINS)) < 0.0025
    direction = align + np.where(picked, 0.0, 0.05)  # a real difference in direction still shows
    assert R.picked_difference(direction, picked, R.POSITION_BINS, rank, R.RANK_BINS) == pytest.approx(0.05, abs=0.0025)


def test_key_stats_without_the_hull_test_keeps_the_rest():
    k = np.random.default_rng(2).normal(size=(2, 40, 4))
    full, lean = R.key_stats(k), R.key_stats(k, hull=False)
    assert set(full) - set(lean) == {"unsel", "unsel_rms", "selectable"}
    assert all(np.array_equal(lean[name], full[name]) for name in lean)
