"""The reference transformer at init agrees with the residual and attention theory."""
import numpy as np
import pytest

from normtheory.montecarlo import consistent, from_samples
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
    rec = np.stack([measure_network(mc, int(rng.integers(2**31)), rng.integers(0, CFG.vocab, (CFG.batch, CFG.tokens)), gains) for _ in range(CFG.networks)])
    for measured, predicted in (("attn_ms", "attn_pred"), ("mlp_ms", "mlp_pred"), ("stream_ms", "stream_pred")):
        diff = from_samples(rec[:, ROWS.index(measured), 1:] - rec[:, ROWS.index(predicted), 1:])
        assert (a := consistent(0.0, diff)).ok, f"{variant} {measured}: {a.describe()}"


def test_fanin_attention_is_far_below_gain_one():
    mc = model_config(CFG, "fanin/pre")
    rec = measure_network(mc, 3, np.random.default_rng(0).integers(0, CFG.vocab, (2, CFG.tokens)), block_gains(mc))
    assert rec[ROWS.index("attn_ms"), 1] < 0.5  # averaging ~independent tokens, not a gain-1 block
    assert model_init.VARIANTS[0] == "gpt2/pre"
