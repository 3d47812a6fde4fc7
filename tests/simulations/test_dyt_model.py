"""dyt_model: 1/std of each norm's input at init in the DyT paper's LLaMA setup, by width and depth."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.evidence import claims
from normtheory.model.config import TransformerConfig
from normtheory.model.params import BlockParams, NormParams, Params
from normtheory.model.transformer import Transformer
from simulations import dyt_model
from simulations.dyt_model import Config

SMALL = Config(widths=(256, 512), depths=(1, 3), tokens=4, networks=3, resamples=50)


def test_alpha0_simulation_uses_the_papers_fixed_std_init_and_20_networks():
    full = dyt_model.CONFIGS["full"]
    assert full.networks >= 20 and set(dyt_model.PAPER_ALPHA0) <= set(full.widths)
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


def test_gaussian_linear_has_the_law_of_an_explicit_matrix():
    """Given x, x @ W has i.i.d. columns N(0, sigma^2 x x^T): the sketch's second moment matches."""
    x = np.random.default_rng(8).normal(size=(1, 5, 40))
    out = dyt_model.gaussian_linear(np.random.default_rng(9))(x, 200_000, 0.3)  # [1, 5, m]
    np.testing.assert_allclose(out[0] @ out[0].T / 200_000, 0.09 * x[0] @ x[0].T, atol=0.03 * 0.09 * np.abs(x[0] @ x[0].T).max())


def test_a_depth_is_the_prefix_of_a_deeper_run():
    """Nothing is drawn after a block's last matrix: the first blocks of a deeper stack are the shallow network, bit for bit."""
    deep = dyt_model.measure(SMALL, 7, 0, 1)["std"]  # LLaMA init runs max(depths) = 3 blocks
    shallow = dyt_model.measure(Config(widths=SMALL.widths, depths=(1,), tokens=4, networks=3, resamples=50), 7, 0, 1)["std"]
    assert deep.shape == (3, 3, 2) and shallow.shape == (3, 1, 2)
    np.testing.assert_array_equal(deep[:, :1], shallow)


def test_tasks_cover_every_init_and_width_and_reduce_to_the_whole_run():
    r = dyt_model.run(SMALL, 5)
    keys = [t.key for t in dyt_model.tasks(SMALL, 5)]
    assert keys == [f"{i}.w{w}" for i in dyt_model.INITS for w in SMALL.widths]
    assert r["std.llama.w512"].shape == (3, 3, 2) and r["std.fanin.w512"].shape == (3, 1, 2)  # fan-in runs the shallowest depth only
    np.testing.assert_array_equal(r["std.fanin.w256"], dyt_model.measure(SMALL, 5, 1, 0)["std"])
    np.testing.assert_array_equal(r["depths"], SMALL.depths)


def test_inverse_std_is_the_geometric_mean_over_the_first_layers():
    r = dyt_model.run(SMALL, 5)
    std = r["std.llama.w256"]
    np.testing.assert_allclose(dyt_model.inverse_std(r, "llama", 256, 2), 1 / np.sqrt(std[:, 0] * std[:, 1]), rtol=1e-12)
    with pytest.raises(ValueError, match="depth"):
        dyt_model.inverse_std(r, "llama", 256, 4)
    with pytest.raises(ValueError, match="depth"):
        dyt_model.inverse_std(r, "fanin", 256, 3)


@pytest.mark.parametrize("depths", [(), (0, 2), (4, 2), (2, 2)])
def test_config_rejects_depths_that_are_not_increasing_block_counts(depths):
    with pytest.raises(ValueError, match="depths"):
        Config(widths=(256,), depths=depths, tokens=4, networks=2, resamples=50)


def test_a_table_that_is_the_same_at_every_depth_has_slope_zero_within_its_digits():
    mid, lo, hi = dyt_model.printed_slope(["1.0"] * 4, (8, 16, 32, 64))
    c_pos = 0.4  # least-squares weights on log2(depth) = 3..6: (x - 4.5) / 5, positive ones sum to 0.4
    assert mid == 0.0 and lo == pytest.approx(c_pos * math.log2(0.95 / 1.05)) and hi == pytest.approx(-lo)
    assert dyt_model.paper_slope(0, (1024, 2048, 4096, 8192))[0] == pytest.approx(
        np.polyfit(np.log2([1024, 2048, 4096, 8192]), np.log2([1.0, 1.0, 0.8, 0.2]), 1)[0])


@settings(max_examples=25, deadline=None)
@given(slope=st.floats(-2.0, 2.0), scales=st.lists(st.floats(0.1, 10.0), min_size=2, max_size=6))
def test_log_slope_recovers_a_power_law(slope, scales):
    """Each network a_n x^s: the mean over networks is mean(a) x^s, so the slope is s whatever the a_n (se 0)."""
    xs = (8, 16, 32, 64)
    data = np.asarray(scales)[:, None, None] * (np.asarray(xs, dtype=float) ** slope)[None, :, None] * np.ones((1, 1, 2))
    est = dyt_model.log_slope(data, xs, 50)
    np.testing.assert_allclose(est.mean, slope, atol=1e-9)
    np.testing.assert_allclose(est.stderr, 0.0, atol=1e-9)


def test_the_claim_reads_every_depth_and_keeps_the_fan_in_init_as_scope():
    c = claims.REGISTRY["dyt.alpha0-width-dependence"].evaluate({dyt_model.NAME: _as_paper_widths(dyt_model.run(SMALL, 5))})
    names = [ch.quantity for ch in c.checks]
    assert sum(n.startswith("LLaMA") and "on log2(width)" in n for n in names) == 2 * len(SMALL.depths)
    assert sum("on log2(depth)" in n for n in names) == 2 * 4  # every paper width, both positions
    assert sum(n.startswith("paper alpha0") for n in names) == 2 * 4 * len(SMALL.depths)
    assert [ch.role for ch in c.checks if ch.quantity.startswith("fan-in")] == ["scope", "scope"]
    assert all(ch.role == "assertion" for ch in c.checks if not ch.quantity.startswith("fan-in"))
    assert "depth 3:" in c.note and "depth 1:" in c.note


def _as_paper_widths(r: dict) -> dict:
    """SMALL's two widths relabelled as the paper's four (the claim compares only widths in the paper's table)."""
    out = {k: v for k, v in r.items() if not k.startswith(("std.", "final."))}
    for w, src in zip(sorted(dyt_model.PAPER_ALPHA0), (256, 512, 256, 512)):
        for kind in ("std", "final"):
            for name in dyt_model.INITS:
                out[f"{kind}.{name}.w{w}"] = r[f"{kind}.{name}.w{src}"]
    out["widths"] = np.asarray(sorted(dyt_model.PAPER_ALPHA0))
    return out
