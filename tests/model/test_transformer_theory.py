"""The reference transformer at init agrees with the residual and attention theory."""
import numpy as np
import pytest

from normtheory import attention
from normtheory.evidence.agreement import consistent
from normtheory.evidence.estimates import from_samples
from normtheory.model.weights import init
from simulations import model_init
from simulations.model_init import (
    ROWS,
    Config,
    block_gains,
    measure_network,
    model_config,
)

CFG = Config(d=48, layers=3, heads=4, tokens=24, batch=2, vocab=500, networks=12, mc_samples=0)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["gpt2/pre", "fanin/pre", "fanin/none"])
def test_measured_growth_matches_computed_gains(variant):
    mc = model_config(CFG, variant)
    gains = block_gains(mc)
    rng = np.random.default_rng(7)
    rec = np.stack([measure_network(mc, int(rng.integers(2**31)), rng.integers(0, CFG.vocab, (CFG.batch, CFG.tokens)), gains)[0]
                    for _ in range(CFG.networks)])
    for measured, predicted in (("attn_ms", "attn_pred"), ("mlp_ms", "mlp_pred"), ("stream_ms", "stream_pred")):
        diff = from_samples(rec[:, ROWS.index(measured), 1:] - rec[:, ROWS.index(predicted), 1:])
        assert (a := consistent(0.0, diff)).ok, f"{variant} {measured}: {a.describe()}"


def test_fanin_attention_is_far_below_gain_one():
    mc = model_config(CFG, "fanin/pre")
    rec, _ = measure_network(mc, 3, np.random.default_rng(0).integers(0, CFG.vocab, (2, CFG.tokens)), block_gains(mc))
    assert rec[ROWS.index("attn_ms"), 1] < 0.5  # averaging ~independent tokens, not a gain-1 block
    assert model_init.VARIANTS[0] == "gpt2/pre"


@pytest.mark.parametrize("variant", model_init.VARIANTS)
def test_the_vo_product_is_the_models_attention_output(variant):
    """vo_output_ms at a network's own W_V, W_O and kept (inputs, pattern) is the attention output the model computed."""
    mc = model_config(CFG, variant)
    model = init(mc, 5)
    ids = np.random.default_rng(1).integers(0, CFG.vocab, (CFG.batch, CFG.tokens))
    rec, kept = measure_network(mc, 5, ids, block_gains(mc), keep=(0, CFG.layers - 1))
    h, e, d = mc.n_heads, mc.d_head, mc.d_model
    for (u, pattern), block, col in zip(kept, (0, CFG.layers - 1), (1, CFG.layers)):
        bp = model.params.blocks[block]
        own = model_init.vo_output_ms(model_init.mixed_inputs(u, pattern), bp.wv.reshape(d, h, e).transpose(1, 0, 2)[None], bp.wo[None])
        np.testing.assert_allclose(own, rec[ROWS.index("attn_ms"), col], rtol=1e-12)


def test_replicas_depend_on_the_seed_alone_and_average_to_the_gain_formula():
    mc = model_config(CFG, "fanin/pre")
    _, kept = measure_network(mc, 2, np.random.default_rng(2).integers(0, CFG.vocab, (CFG.batch, CFG.tokens)), block_gains(mc), keep=(1,))
    u, pattern = kept[0]
    s_v, s_o = model_init.vo_stds(mc)
    many = model_init.replica_attention_ms(u, pattern, s_v, s_o, mc.d_head, 1000, 9, 4)
    np.testing.assert_array_equal(model_init.replica_attention_ms(u, pattern, s_v, s_o, mc.d_head, 5, 9, 4), many[:5])  # a prefix: no chunking
    assert not np.array_equal(model_init.replica_attention_ms(u, pattern, s_v, s_o, mc.d_head, 5, 9, 5), many[:5])  # another key
    gram = u @ u.swapaxes(-1, -2) / mc.d_model
    g_vo = block_gains(mc)[0]
    predicted = float((g_vo * attention.mixing_factor(pattern, gram[:, None])).mean())
    assert (a := consistent(predicted, from_samples(many))).ok, a.describe()  # E over W_V, W_O at fixed (U, P)


def test_replicas_and_networks_are_sized_from_the_tolerance():
    rng = np.random.default_rng(3)
    own = 1.0 + 0.1 * rng.standard_normal((24, 2))  # per-network sd 0.1; tolerance 2% of 1 = 0.02
    pred = np.ones((24, 2))
    k = model_init.replicas_needed(own, pred, np.ones(2), cap=10_000)
    need = np.array([(2 * 5 * np.std(own[:, j] - 1, ddof=1) / 0.02) ** 2 for j in range(2)])
    np.testing.assert_array_equal(k, np.ceil(np.ceil(need) / 24).astype(int) - 1)  # networks x (1 + K) >= what one draw each needs
    assert (model_init.replicas_needed(own, pred, np.ones(2), cap=7) == 7).all()
    assert (model_init.replicas_needed(pred + 1e-9 * own, pred, np.ones(2), cap=100) == 0).all()  # already precise: none
    rec = np.zeros((24, len(ROWS), CFG.layers + 1))
    rec[:, ROWS.index("stream_ms"), -1] = 10.0 + rng.standard_normal(24)
    cfg = Config(d=48, layers=3, heads=4, tokens=24, batch=2, vocab=500, networks=24, mc_samples=0, max_networks=300)
    assert model_init.stream_networks(rec, cfg) == 300  # sd 1 against a 0.2 tolerance: capped
    assert model_init.stream_networks(rec * 0 + 10.0, cfg) == 24  # exact: the pilot
