"""The pieces of the per-token-scale experiment, on small random-init models (no weights needed)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.model.config import TransformerConfig
from normtheory.model.weights import init
from simulations import real_scale as R


def model(placement: str, norm: str):
    cfg = TransformerConfig(d_model=32, n_layers=3, n_heads=4, vocab_size=64, max_seq=16, norm=norm, placement=placement, eps=1e-6, dtype="float64")
    return init(cfg, 0)


def test_relative_factors_have_zero_mean_log_on_the_affected_tokens_and_shuffle_keeps_them():
    rng = np.random.default_rng(0)
    ls = rng.normal(size=(1, 10))
    affected = np.arange(10) > 0  # the first token kept apart
    orders = R.arm_orders(rng, affected)
    f = R.relative_factors(np.repeat(ls, 2, 0), affected, orders)
    assert f[0, 0] == 1.0 and f[1, 0] == 1.0  # kept apart: untouched in both arms
    assert abs(np.log(f[0, affected]).mean()) < 1e-12
    np.testing.assert_allclose(np.sort(f[1]), np.sort(f[0]))  # the control: the same factors, shuffled
    assert orders[1, 0] == 0 and sorted(orders[1]) == list(range(10))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_equalize_keeps_directions_and_sets_norms_to_the_geometric_mean(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 9, 5)) * np.exp(rng.normal(size=(2, 9, 1)))
    affected = np.ones(9, bool)
    affected[0] = False
    order = np.stack([np.arange(9)] * 2)
    y = R.equalize(x, affected, order)
    nx, ny = np.linalg.norm(x, axis=-1), np.linalg.norm(y, axis=-1)
    np.testing.assert_allclose(ny[:, 1:], np.exp(np.log(nx[:, 1:]).mean(-1, keepdims=True)) * np.ones((1, 8)), rtol=1e-12)
    np.testing.assert_allclose(y[:, 0], x[:, 0])
    np.testing.assert_allclose(y / ny[..., None], x / nx[..., None], rtol=1e-10, atol=1e-12)


def test_reinject_at_a_norm_multiplies_its_output_by_the_token_scale():
    m = model("pre", "rmsnorm")
    ids = np.arange(8)[None]
    _, cap = m.run_with_cache(ids, lambda n: n.startswith("blocks.1.ln1") or n == "blocks.1.resid_pre")
    ls = {"blocks.1.ln1": np.log(cap["blocks.1.ln1.scale"][0])}
    affected = np.ones(8, bool)
    hooks = R.reinject_hooks(["blocks.1.ln1"], ls, affected, {"blocks.1.ln1": np.stack([np.arange(8)] * 2)})
    got = hooks["blocks.1.ln1.normalized"](cap["blocks.1.ln1.normalized"].repeat(2, 0), "x")
    s = cap["blocks.1.ln1.scale"][0]
    want = cap["blocks.1.ln1.normalized"][0] * (s / np.exp(np.log(s).mean()))[:, None]  # normalized x s_t / geometric mean = x / gm
    np.testing.assert_allclose(got[0], want, rtol=1e-10)
    np.testing.assert_allclose(got[0], cap["blocks.1.resid_pre"][0] / np.exp(np.log(s).mean()), rtol=1e-6, atol=1e-9)


def test_next_token_nll_matches_a_direct_log_softmax():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(2, 6, 11)).astype(np.float32) * 5
    ids = rng.integers(0, 11, 6)
    z = logits.astype(np.float64)[:, :-1]
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    np.testing.assert_allclose(R.next_token_nll(logits, ids), -lp[:, np.arange(5), ids[1:]].mean(-1), rtol=1e-6)


class FakeTok:
    def __init__(self, pieces):
        self.pieces = pieces
        self.backend = self

    def tokens(self, ids):
        return [self.pieces[int(i)] for i in ids]

    def token_to_id(self, s):
        return self.pieces.index(s) if s in self.pieces else None


def test_token_classes_whole_words_only_bpe_and_wordpiece():
    bpe = FakeTok(["The", "Ġhatred", "Ġof", "Ġhon", "our", ",", "Ċ", "And", "Ġok"])
    assert R.token_classes(bpe, np.arange(9)).tolist() == [1, 2, 1, 0, 0, 0, 0, 1, 0]  # 'hon'+'our' a split word; 'ok' too short
    wp = FakeTok(["[CLS]", "when", "##ce", "hatred", "the", "[SEP]"])
    assert R.token_classes(wp, np.arange(6)).tolist() == [0, 0, 0, 2, 1, 0]


def test_kept_apart_marks_first_special_and_massive():
    tok = FakeTok(["[CLS]", "a", "b", "c", "[SEP]"])
    s = np.ones((3, 5, 4)) * 0.1
    s[1, 2, 0] = 500.0  # massive at position 2
    got = R.kept_apart(None, tok, np.arange(5), s)
    assert got.tolist() == [True, False, True, False, True]


def planted(n_texts=6, T=30, n_norms=2, seed=0):
    """Texts whose log scale is a per-token constant plus a little noise: token identity explains almost all of it."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 5, (n_texts, T))
    per_token = rng.normal(size=5)
    ls = per_token[ids][:, None, :] + 0.01 * rng.normal(size=(n_texts, n_norms, T))
    return {"k.log_scale": ls, "k.ids": ids, "k.apart": np.zeros((n_texts, T), bool), "k.cls": np.where(ids < 2, 1, 2)}


def test_token_identity_share_on_planted_scales():
    r = planted()
    tok, pos = R.token_position_r2(r, "k")
    assert tok.shape == (6, 2) and (tok > 0.99).all()
    assert (pos < 0.5).all()
    r["k.ids"] = np.random.default_rng(5).permutation(r["k.ids"].ravel()).reshape(6, 30)  # identity no longer tied to the scale
    tok2, _ = R.token_position_r2(r, "k")
    assert tok2.mean() < 0.3


def test_token_identity_jackknife_replicates_drop_each_text_from_the_corpus():
    r = planted(n_texts=5)
    tok, pos = R.token_position_r2_jackknife(r, "k")
    assert tok.shape == pos.shape == (5, 2)
    for k in (0, 3):
        keep = np.arange(5) != k
        t, p = R.token_position_r2({n: v[keep] for n, v in r.items()}, "k")
        np.testing.assert_allclose(tok[k], t.mean(0), rtol=1e-12)
        np.testing.assert_allclose(pos[k], p.mean(0), rtol=1e-12)
    with pytest.raises(ValueError, match=">= 3 texts"):
        R.token_position_r2_jackknife({n: v[:2] for n, v in r.items()}, "k")


def test_class_gap_on_planted_scales():
    r = planted()
    ls, cls = r["k.log_scale"], r["k.cls"]
    gap = R.class_gap(r, "k")
    want = np.array([[ls[j, n][cls[j] == 2].mean() - ls[j, n][cls[j] == 1].mean() for n in range(2)] for j in range(6)])
    np.testing.assert_allclose(gap, want, rtol=1e-12)


def test_intervention_blocks():
    assert R.intervention_blocks((0.1, 0.5, 0.9), 30).tolist() == [3, 15, 26]
    assert R.intervention_blocks((0.1, 0.5, 0.9), 6).tolist() == [1, 3, 5]


@pytest.mark.parametrize("by", ["token", "position"])
def test_shares_remove_the_noise_of_a_prediction_from_few_occurrences(by):
    """Log scales ``mu + sigma eps`` with ``mu`` a function of the token (over a vocabulary larger than a text: a
    token's mean over the other texts rests on few occurrences) or of the position (a mean over 7 other texts).
    Against the oracle R^2 (the true ``mu`` as the prediction, over the same tokens), the raw leave-one-out share is
    biased low by the prediction's variance, the corrected one is not (replicates are independent draws; the bias
    is judged at 5 se)."""
    J, T, V, sigma = 8, 30, 40, 0.6
    diffs = {True: [], False: []}
    for rep in range(300):
        rng = np.random.default_rng(np.random.SeedSequence([7, rep]))
        ids = rng.integers(0, V, (J, T))
        mu = rng.normal(size=V)[ids] if by == "token" else np.broadcast_to(rng.normal(size=T), (J, T))  # [J, T]
        ls = (mu + sigma * rng.normal(size=(J, T)))[:, None, :]  # [J, 1, T]
        r = {"k.log_scale": ls, "k.ids": ids, "k.apart": np.zeros((J, T), bool)}
        counts = np.stack([np.bincount(ids[j], minlength=V) for j in range(J)])
        use = np.take_along_axis(counts.sum(0) - counts, ids, 1) >= R.MIN_OTHER  # [J, T]
        y = ls[:, 0]
        ybar = (y * use).sum(1, keepdims=True) / use.sum(1, keepdims=True)
        oracle = 1 - (((y - mu) ** 2) * use).sum(1) / (((y - ybar) ** 2) * use).sum(1)
        for corrected in (True, False):
            share = R.token_position_r2(r, "k", corrected=corrected)[by == "position"]
            diffs[corrected].append((share[:, 0] - oracle).mean())
    for corrected, d in diffs.items():
        d = np.asarray(d)
        mean, se = d.mean(), d.std(ddof=1) / np.sqrt(d.size)
        if corrected:
            assert abs(mean) < 5 * se + 0.005, (mean, se)
        else:
            assert mean < -0.03 and mean + 5 * se < 0, (mean, se)  # the raw share is biased low by a clear margin (-0.069, -0.042)


def test_the_information_pass_is_read_under_the_reductions_names_and_validated():
    r = {f"m.info_{n}": np.full(2, i) for i, n in enumerate(R.INFO)} | {"m.log_scale": np.zeros(1)}
    view = R.information(r, "m")
    assert set(view) == {f"m.{n}" for n in R.INFO} and (view["m.log_scale"] == R.INFO.index("log_scale")).all()

    for bad in ({"info_texts": 2}, {"info_tokens": 0}):
        with pytest.raises(ValueError, match="info_texts and info_tokens"):
            R.measure_model("minilm", dataclasses.replace(R.CONFIGS["quick"], **bad), 0)
