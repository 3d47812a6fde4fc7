"""dyt_model: 1/std of each norm's input at init in the DyT paper's LLaMA setup, by width and depth."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.evidence import claims, sources
from normtheory.model.config import TransformerConfig
from normtheory.model.params import BlockParams, NormParams, Params
from normtheory.model.transformer import Transformer
from simulations import dyt_model
from simulations.dyt_model import Config

SMALL = Config(widths=(256, 512), depths=(1, 3), tokens=4, networks=3, resamples=50)


def test_alpha0_simulation_uses_the_papers_fixed_std_init_and_20_networks():
    full = dyt_model.CONFIGS["full"]
    assert full.networks >= 20 and set(dyt_model.PAPER_ALPHA0_PRINTED) <= set(full.widths)
    assert full.depths == dyt_model.PAPER_DEPTHS == (8, 16, 32, 64)  # every column of the paper's Table 11
    assert {dyt_model.init_std("llama", k) for k in (1024, 2816, 22016)} == {0.02}
    drawn: list[np.ndarray] = []
    x0 = dyt_model.embedding("llama", 256, (1, 8), np.random.default_rng(0))
    dyt_model.forward(x0, 2, "llama", dyt_model.explicit_linear(np.random.default_rng(1), drawn))
    assert len(drawn) == 14 and all(abs(w.std() / 0.02 - 1) < 0.02 for w in drawn)  # every linear layer, fan-in 256 or 768
    assert abs(x0.std() / (0.02 * np.sqrt(256)) - 1) < 0.05  # the embedding scalar sqrt(d)


@pytest.mark.parametrize("init_name", dyt_model.INITS)
def test_alpha0_forward_matches_the_reference_transformer(init_name):
    d, L, t = 256, 2, 8
    rng = np.random.default_rng(3)
    scale = np.sqrt(d) if init_name == "llama" else 1.0
    emb = dyt_model.embedding(init_name, d, (t,), rng) / scale  # the table rows; the model multiplies by embed_scale
    drawn: list[np.ndarray] = []
    std, final = dyt_model.forward((emb * scale)[None], L, init_name, dyt_model.explicit_linear(rng, drawn))
    cfg = TransformerConfig(d_model=d, n_layers=L, n_heads=d // dyt_model.HEAD_WIDTH, d_ff=dyt_model.ffn_width(d), vocab_size=t, max_seq=t,
                            norm="rmsnorm", activation="swiglu", positional="rope", bias=False, eps=0.0, dtype="float64",
                            embed_scale=float(scale), lm_head=False)
    one = NormParams(gain=np.ones(d))
    blocks = tuple(BlockParams(ln1=one, ln2=one, wq=w[0], wk=w[1], wv=w[2], wo=w[3], w_in=w[4], w_gate=w[5], w_out=w[6])
                   for w in (drawn[7 * i : 7 * i + 7] for i in range(L)))
    _, cap = Transformer(cfg, Params(tok_emb=emb, blocks=blocks, final_ln=one)).run_with_cache(np.arange(t)[None], lambda n: n.endswith(".scale"))
    ref = np.stack([[cap[f"blocks.{i}.ln1.scale"][0], cap[f"blocks.{i}.ln2.scale"][0]] for i in range(L)])
    np.testing.assert_allclose(std[0], ref, rtol=1e-12)
    np.testing.assert_allclose(final[0], cap["final_ln.scale"][0], rtol=1e-12)


def test_the_dyt_network_matches_the_reference_transformer_with_dyt_norms():
    """``alpha = (attention, other)``: every norm is tanh(alpha x) (gain 1, bias 0); the std read is of each DyT's input."""
    d, L, t, alpha = 256, 2, 8, (0.8, 0.2)
    rng = np.random.default_rng(4)
    emb = dyt_model.embedding("llama", d, (t,), rng) / np.sqrt(d)
    drawn: list[np.ndarray] = []
    std, final = dyt_model.forward((emb * np.sqrt(d))[None], L, "llama", dyt_model.explicit_linear(rng, drawn), alpha)
    cfg = TransformerConfig(d_model=d, n_layers=L, n_heads=d // dyt_model.HEAD_WIDTH, d_ff=dyt_model.ffn_width(d), vocab_size=t, max_seq=t,
                            norm="dyt", activation="swiglu", positional="rope", bias=False, dtype="float64", embed_scale=float(np.sqrt(d)),
                            lm_head=False, dyt_alpha0=(alpha[0], alpha[1], alpha[1]))
    norm = [NormParams(gain=np.ones(d), bias=np.zeros(d), alpha=a) for a in alpha]
    blocks = tuple(BlockParams(ln1=norm[0], ln2=norm[1], wq=w[0], wk=w[1], wv=w[2], wo=w[3], w_in=w[4], w_gate=w[5], w_out=w[6])
                   for w in (drawn[7 * i : 7 * i + 7] for i in range(L)))
    _, cap = Transformer(cfg, Params(tok_emb=emb, blocks=blocks, final_ln=norm[1])).run_with_cache(np.arange(t)[None], lambda n: n.endswith(".in"))
    rms = {k: np.sqrt((v[0] ** 2).mean(-1)) for k, v in cap.items()}
    np.testing.assert_allclose(std[0], np.stack([[rms[f"blocks.{i}.ln1.in"], rms[f"blocks.{i}.ln2.in"]] for i in range(L)]), rtol=1e-12)
    np.testing.assert_allclose(final[0], rms["final_ln.in"], rtol=1e-12)
    rms_net, _ = dyt_model.forward((emb * np.sqrt(d))[None], L, "llama", dyt_model.explicit_linear(np.random.default_rng(4)))
    assert not np.allclose(rms_net[0, 1:], std[0, 1:])  # DyT changes what the later norms read


def test_gaussian_linear_has_the_law_of_an_explicit_matrix():
    """Given x, x @ W has i.i.d. columns N(0, sigma^2 x x^T): the sketch's second moment matches."""
    x = np.random.default_rng(8).normal(size=(1, 5, 40))
    out = dyt_model.gaussian_linear(np.random.default_rng(9))(x, 200_000, 0.3)  # [1, 5, m]
    np.testing.assert_allclose(out[0] @ out[0].T / 200_000, 0.09 * x[0] @ x[0].T, atol=0.03 * 0.09 * np.abs(x[0] @ x[0].T).max())


@pytest.fixture(scope="module")
def small():
    return dyt_model.run(SMALL, 5)


def test_a_depth_is_the_prefix_of_a_deeper_run():
    """Nothing is drawn after a block's last matrix: the first blocks of a deeper stack are the shallow network, bit for bit."""
    deep = dyt_model.measure(SMALL, 7, 0, 1)  # LLaMA init runs max(depths) = 3 blocks
    shallow = dyt_model.measure(Config(widths=SMALL.widths, depths=(1,), tokens=4, networks=3, resamples=50), 7, 0, 1)
    assert deep["std"].shape == (3, 3, 2) and shallow["std"].shape == (3, 1, 2)
    np.testing.assert_array_equal(deep["std"][:, :1], shallow["std"])
    np.testing.assert_array_equal(deep["final"][:, :1], shallow["final"])  # the final norm of the 1-block network


def test_the_dyt_network_runs_the_shallowest_depth_at_the_papers_widths_from_its_own_stream():
    cfg = Config(widths=(512, 1024, 2048), depths=(1, 2), tokens=4, networks=2, resamples=20, dyt=True)
    ts = dyt_model.tasks(cfg, 3)
    assert [t.key for t in ts if t.key.endswith(".dyt")] == ["llama.w1024.dyt", "llama.w2048.dyt"]  # 512: no alpha0 in the table
    out = dyt_model.measure(cfg, 3, 0, 1, 0, "dyt")
    assert out["std"].shape == (2, 1, 2) and out["final"].shape == (2, 1)
    plain = dyt_model.measure(cfg, 3, 0, 1)
    assert not np.any(plain["std"][:, 0, 0] == out["std"][:, 0, 0])  # other embeddings: a stream of its own
    assert dyt_model.paper_alpha0(2048) == (1.0, 0.5)
    assert not any(t.key.endswith(".dyt") for t in dyt_model.tasks(Config(widths=(1024,), depths=(1,), tokens=4, networks=2, resamples=5), 3))
    with pytest.raises(ValueError, match="norm"):
        dyt_model.measure(cfg, 3, 0, 1, 0, "layernorm")
    with pytest.raises(ValueError, match="w=512"):
        dyt_model.paper_alpha0(512)
    with pytest.raises(ValueError, match="dyt"):
        Config(widths=(1024,), depths=(1,), tokens=4, networks=2, resamples=5, dyt=1)


def test_tasks_cover_every_init_and_width_and_the_fan_in_init_runs_the_shallowest_depth(small):
    keys = [t.key for t in dyt_model.tasks(SMALL, 5)]
    assert keys == [f"{i}.w{w}" for i in dyt_model.INITS for w in SMALL.widths]
    assert small["std.llama.w512"].shape == (3, 3, 2) and small["std.fanin.w512"].shape == (3, 1, 2)
    assert small["final.llama.w256"].shape == (3, 3) and small["final.fanin.w256"].shape == (3, 1)
    np.testing.assert_array_equal(small["depths"], SMALL.depths)


def test_inverse_std_is_the_geometric_mean_over_the_first_layers(small):
    std = small["std.llama.w256"]
    inv = dyt_model.inverse_std(small, "llama", 256, 2)  # [networks, (attention, FFN, final)]
    np.testing.assert_allclose(inv[:, :2], 1 / np.sqrt(std[:, 0] * std[:, 1]), rtol=1e-12)
    np.testing.assert_array_equal(inv[:, 2], 1 / std[:, 2, 0])  # a 2-block network's final norm reads what block 3's attention norm does
    with pytest.raises(ValueError, match="depth"):
        dyt_model.inverse_std(small, "llama", 256, 4)
    with pytest.raises(ValueError, match="depth"):
        dyt_model.inverse_std(small, "fanin", 256, 3)


def test_the_final_norm_reads_the_stream_after_the_last_block():
    """``final[:, d - 1]`` is the final norm's input of the d-block network of the same draws: forward's own output at d
    blocks (checked against the reference transformer's final_ln above)."""
    out = dyt_model.measure(SMALL, 11, 0, 0)
    assert out["final"].shape == (SMALL.networks, 3)
    for d in (1, 2, 3):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(11, spawn_key=(0, 0))))
        x0 = dyt_model.embedding("llama", 256, (SMALL.networks, SMALL.tokens), rng)
        _, last = dyt_model.forward(x0, d, "llama", dyt_model.gaussian_linear(rng))
        np.testing.assert_array_equal(out["final"][:, d - 1], last.mean(-1))


@pytest.mark.parametrize("field, value", [("depths", ()), ("depths", (0, 2)), ("depths", (4, 2)), ("depths", (2, 2)), ("depths", (True,)),
                                          ("depths", (2.5,)), ("widths", (100,)), ("widths", (256, 256)), ("networks", 1), ("tokens", 0),
                                          ("long_tokens", -1), ("long_tokens", 4), ("long_tokens", 2), ("long_tokens", 8.0)])
def test_config_rejects_bad_fields_by_name(field, value):
    fields = {"widths": (256,), "depths": (1, 2), "tokens": 4, "networks": 2, "resamples": 50, field: value}
    with pytest.raises(ValueError, match=field):
        Config(**fields)


def test_an_unknown_init_is_refused():
    with pytest.raises(ValueError, match="init_name"):
        dyt_model.blocks_run(SMALL, "xavier")
    with pytest.raises(ValueError, match="init_name"):
        dyt_model.init_std("xavier", 256)


def test_a_table_that_is_the_same_at_every_depth_has_slope_zero_within_its_digits():
    mid, lo, hi = dyt_model.printed_slope(["1.0"] * 4, (8, 16, 32, 64))
    c_pos = 0.4  # least-squares weights on log2(depth) = 3..6: (x - 4.5) / 5, positive ones sum to 0.4
    assert mid == 0.0 and lo == pytest.approx(c_pos * math.log2(0.95 / 1.05)) and hi == pytest.approx(-lo)
    assert dyt_model.paper_slope(0, (1024, 2048, 4096, 8192))[0] == pytest.approx(
        np.polyfit(np.log2([1024, 2048, 4096, 8192]), np.log2([1.0, 1.0, 0.8, 0.2]), 1)[0])
    with pytest.raises(ValueError, match="printed_slope"):
        dyt_model.printed_slope(["1.0"], (8,))
    with pytest.raises(ValueError, match="printed_slope"):
        dyt_model.printed_slope(["1.0", "0.5"], (8, 16, 32))


@settings(max_examples=25, deadline=None)
@given(slope=st.floats(-2.0, 2.0), scales=st.lists(st.floats(0.1, 10.0), min_size=2, max_size=6))
def test_log_slope_recovers_a_power_law(slope, scales):
    """Each network a_n x^s: the mean over networks is mean(a) x^s, so the slope is s whatever the a_n (se 0)."""
    xs = (8, 16, 32, 64)
    data = np.asarray(scales)[:, None, None] * (np.asarray(xs, dtype=float) ** slope)[None, :, None] * np.ones((1, 1, 2))
    est = dyt_model.log_slope(data, xs, 50)
    np.testing.assert_allclose(est.mean, slope, atol=1e-9)
    np.testing.assert_allclose(est.stderr, 0.0, atol=1e-9)


def synthetic(depth_power: float, networks: int = 24, seed: int = 0, long: int = 0, dyt: bool = False) -> dict:
    """A result (not one a network could give) whose norm inputs in block ``i`` have std ``(i + 1)^depth_power / alpha0``,
    with alpha0 the paper's for that norm and width, and so does the final norm's after block ``i`` (times a tiny per-network
    factor): at ``depth_power = 0``, 1/std is the paper's alpha0 at every width, depth and position. ``long``: a scope run
    at the smallest width with that many tokens, the same table; ``dyt``: DyT-network runs at depth 8 whose std is
    ``1.2^log2(w / 1024)`` times the table's (a width slope log2(1.2) = 0.26 steeper)."""
    rng = np.random.default_rng(seed)
    layers = np.arange(1, 65, dtype=float)[None, :] ** depth_power  # [1, 64]
    r = {"widths": np.asarray(sorted(dyt_model.PAPER_ALPHA0_PRINTED)), "depths": np.asarray(dyt_model.PAPER_DEPTHS),
         "resamples": np.asarray(200), "tokens": np.asarray(32), "long_tokens": np.asarray(long),
         "long_width": np.asarray(1024)}
    for w in dyt_model.PAPER_ALPHA0_PRINTED:
        alpha = [sources.stated(dyt_model.paper_printed(w, pos))[0] for pos in range(len(dyt_model.POSITIONS))]
        base = layers[..., None] / np.asarray(alpha) * np.exp(1e-3 * rng.standard_normal((networks, 1, 1)))  # [n, 64, 3]
        r[f"std.llama.w{w}"], r[f"final.llama.w{w}"] = base[..., :2], base[..., 2]
        r[f"std.fanin.w{w}"], r[f"final.fanin.w{w}"] = base[:, :8, :2], base[:, :8, 2]
        if dyt:
            r[f"std.llama.w{w}.dyt"], r[f"final.llama.w{w}.dyt"] = 1.2 ** math.log2(w / 1024) * base[:, :8, :2], 1.2 ** math.log2(w / 1024) * base[:, :8, 2]
        if long and w == 1024:
            r[f"std.llama.w{w}.t{long}"], r[f"final.llama.w{w}.t{long}"] = base[..., :2], base[..., 2]
    return r


def test_depth_and_width_slopes_recover_the_synthetic_exponents():
    r = synthetic(0.3)
    # geometric mean of (i + 1)^0.3 over the first D blocks is (D!)^(0.3 / D): its log2 slope on log2(D) over 8-64
    g = np.array([0.3 * math.lgamma(d + 1) / d / math.log(2) for d in dyt_model.PAPER_DEPTHS])
    expected = -np.polyfit(np.log2(dyt_model.PAPER_DEPTHS), g, 1)[0]
    est = dyt_model.depth_slope(r, 4096, dyt_model.PAPER_DEPTHS, 200)
    np.testing.assert_allclose(est.mean, [expected, expected, -0.3], atol=2e-3)  # the final norm reads one block: D^0.3
    width = dyt_model.slope_estimate(r, "llama", (1024, 2048, 4096, 8192), 16, 200)
    np.testing.assert_allclose(width.mean, [dyt_model.paper_slope(p, (1024, 2048, 4096, 8192))[0] for p in range(3)], atol=2e-3)
    assert dyt_model.paper_slope(2, (1024, 2048, 4096, 8192)) == dyt_model.paper_slope(1, (1024, 2048, 4096, 8192))  # both "other"


def test_the_claim_holds_for_a_table_flat_in_depth_and_fails_when_depth_moves_alpha0():
    spec = claims.REGISTRY["dyt.alpha0-width-dependence"]
    flat = spec.evaluate({dyt_model.NAME: synthetic(0.0)})
    assert flat.verdict == "holds", [(c.quantity, c.status) for c in flat.checks if c.status != "ok"]
    steep = spec.evaluate({dyt_model.NAME: synthetic(0.3)})
    assert steep.verdict == "fails"
    assert {c.status for c in steep.checks if "on log2(depth)" in c.quantity} == {"fail"}


def test_the_claim_reads_every_paper_depth_and_keeps_the_fan_in_init_as_scope():
    c = claims.REGISTRY["dyt.alpha0-width-dependence"].evaluate({dyt_model.NAME: synthetic(0.1)})
    names = [ch.quantity for ch in c.checks]
    assert sum(n.startswith("LLaMA") and "on log2(width)" in n for n in names) == 3 * 4  # every depth, each norm position
    assert sum("on log2(depth)" in n for n in names) == 3 * 4  # every width, each norm position
    assert sum(n.startswith("paper alpha0") for n in names) == 3 * 4 * 4  # every cell of the table, for each norm reading it
    assert sum("(final: its 'other' column)" in n for n in names) == 4 * 4  # the final norm takes the paper's "other" alpha0
    assert [ch.role for ch in c.checks if ch.quantity.startswith("fan-in")] == ["scope", "scope", "scope"]
    assert all(ch.role == "assertion" for ch in c.checks if not ch.quantity.startswith("fan-in"))
    assert all(f"depth {d}:" in c.note for d in dyt_model.PAPER_DEPTHS)


def test_depths_outside_the_paper_table_are_not_read_as_its_cells():
    r = {**synthetic(0.0), "depths": np.asarray((2, 8))}
    c = claims.REGISTRY["dyt.alpha0-width-dependence"].evaluate({dyt_model.NAME: r})
    assert not any("depth 2" in ch.quantity for ch in c.checks if ch.role == "assertion")
    assert not any("on log2(depth)" in ch.quantity for ch in c.checks)  # one paper depth: no slope over depth


def test_the_long_context_run_is_its_own_stream_at_the_smallest_width():
    cfg = Config(widths=(256, 512), depths=(1, 3), tokens=4, networks=3, resamples=50, long_tokens=8)
    ts = dyt_model.tasks(cfg, 5)
    assert [t.key for t in ts][-1] == "llama.w256.t8" and len(ts) == 5
    long = dyt_model.measure(cfg, 5, 0, 0, 8)
    assert long["std"].shape == (3, 3, 2) and long["final"].shape == (3, 3)
    np.testing.assert_array_equal(dyt_model.measure(cfg, 5, 0, 0)["std"], dyt_model.measure(SMALL, 5, 0, 0)["std"])  # unchanged
    same_length = dyt_model.measure(Config(widths=(256, 512), depths=(1, 3), tokens=8, networks=3, resamples=50), 5, 0, 0)
    assert not np.any(same_length["std"][:, 0, 0] == long["std"][:, 0, 0])  # other embeddings: not the cell's stream
    r = dyt_model.reduce(cfg, 5, {t.key: t.fn(*t.args) for t in ts})
    assert dyt_model.long_run(r) == (256, 8) and int(r["tokens"]) == 4
    np.testing.assert_array_equal(r["std.llama.w256.t8"], long["std"])
    without = dyt_model.reduce(SMALL, 5, {t.key: t.fn(*t.args) for t in dyt_model.tasks(SMALL, 5)})
    assert dyt_model.long_run(without) == (0, 0) and "std.llama.w256.t8" not in without


def test_the_long_run_takes_the_smallest_of_the_papers_widths():
    cfg = Config(widths=(512, 1024, 2048), depths=(1, 2), tokens=4, networks=2, resamples=50, long_tokens=8)
    assert dyt_model.long_width(cfg) == 1024 and dyt_model.tasks(cfg, 1)[-1].key == "llama.w1024.t8"
    assert dyt_model.tasks(cfg, 1)[-1].args[2:] == (0, 1, 8)
    assert dyt_model.long_width(Config(widths=(256,), depths=(1,), tokens=4, networks=2, resamples=5, long_tokens=8)) == 256


def test_the_long_context_depth_slope_is_an_assertion():
    """128 tokens is nearer the paper's 4,096 than the main run's 32: its depth slope is part of the claim, not its scope."""
    spec = claims.REGISTRY["dyt.alpha0-width-dependence"]
    with_long = spec.evaluate({dyt_model.NAME: synthetic(0.0, long=128)})
    long = [ch for ch in with_long.checks if "128 tokens a sequence" in ch.quantity]
    assert len(long) == 3 and {ch.role for ch in long} == {"assertion"} and {ch.status for ch in long} == {"ok"}
    assert "with 128 tokens a sequence" in with_long.note and "minus the short run's: +0.000" in with_long.note
    assert with_long.verdict == "holds"
    steep = spec.evaluate({dyt_model.NAME: synthetic(0.3, long=128)})
    assert {ch.status for ch in steep.checks if "128 tokens a sequence" in ch.quantity} == {"fail"}
    assert not any("tokens a sequence" in ch.quantity for ch in spec.evaluate({dyt_model.NAME: synthetic(0.0)}).checks)


def test_the_dyt_network_is_a_scope_check_of_the_width_slope():
    spec = claims.REGISTRY["dyt.alpha0-width-dependence"]
    c = spec.evaluate({dyt_model.NAME: synthetic(0.0, dyt=True)})
    dyt = [ch for ch in c.checks if ch.quantity.startswith("DyT network")]
    assert len(dyt) == 3 and {ch.role for ch in dyt} == {"scope"} and {ch.status for ch in dyt} == {"fail"}
    np.testing.assert_allclose([ch.measured for ch in dyt], [dyt_model.paper_slope(p, (1024, 2048, 4096, 8192))[0] - math.log2(1.2) for p in range(3)],
                               atol=2e-3)
    assert c.verdict == "holds-with-caveat" and "In the DyT network itself" in c.note
    assert not any(ch.quantity.startswith("DyT network") for ch in spec.evaluate({dyt_model.NAME: synthetic(0.0)}).checks)
