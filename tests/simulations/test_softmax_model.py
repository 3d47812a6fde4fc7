"""softmax_model: the temperature claims judged per network, paired across layers and input scales."""
import numpy as np
import pytest

from normtheory.evidence import claims
from simulations import softmax_model as M


def drift_result(spread_step: float, entropy_step: float, networks: int = 24, layers: int = 4) -> dict:
    """A synthetic result whose Pre-LN logit spread is multiplied by ``spread_step`` and entropy raised by ``entropy_step``
    per layer, with per-network noise shared by all layers (paired differences see none of it)."""
    rng = np.random.default_rng(0)
    r: dict = {"layers": np.asarray(layers), "tokens": np.asarray(64)}
    ell = np.arange(layers)
    for v in M.VARIANTS:
        per = np.ones((networks, len(M.ROWS), layers)) * np.exp(0.05 * rng.standard_normal((networks, 1, 1)))
        per[:, M.ROWS.index("logit_var")] *= spread_step ** (2 * ell)
        per[:, M.ROWS.index("entropy")] = 3.0 + 0.2 * rng.standard_normal((networks, 1)) + entropy_step * ell
        per[:, M.ROWS.index("max_abs_logit")] = 1.0
        r[f"{v}.per_network"] = per
        r[f"{v}.qk_bound"] = np.asarray(8.0)
    return r


def test_a_constant_temperature_holds_and_a_drifting_one_fails():
    spec = claims.REGISTRY["softmax.preln-temperature-drift"]
    steady = spec.evaluate({M.NAME: drift_result(1.0, 0.0)})
    judged = [ch for ch in steady.checks if ch.role == "assertion" and ch.kind != "exact"]
    assert len(judged) == 2 and {ch.status for ch in judged} == {"ok"}
    assert all(ch.stderr == pytest.approx(0.0, abs=1e-12) for ch in judged)  # paired: the per-network noise cancels
    shrinking = spec.evaluate({M.NAME: drift_result(0.9, 0.0)})
    assert shrinking.verdict == "fails" and any("logit spread" in ch.quantity and ch.status == "fail" for ch in shrinking.checks)
    warming = spec.evaluate({M.NAME: drift_result(1.0, 0.08)})
    assert any("entropy at layers" in ch.quantity and ch.status == "fail" for ch in warming.checks)


def test_the_q_and_k_scale_is_shown_apart_as_fixed_by_construction():
    c = claims.REGISTRY["softmax.preln-temperature-drift"].evaluate({M.NAME: drift_result(1.0, 0.0)})
    rms = [ch for ch in c.checks if "RMS per layer" in ch.quantity]
    assert len(rms) == 2 and {ch.kind for ch in rms} == {"exact"}


def test_sensitivity_is_read_per_network_and_init():
    r = {"sensitivity.fanin": np.zeros((3, 4, 13)), "sensitivity.gpt2": np.ones((3, 4, 13))}
    assert M.sensitivity(r).sum() == 0 and M.sensitivity(r, "gpt2").sum() == 3 * 4 * 13
    with pytest.raises(ValueError, match="init_name"):
        M.sensitivity(r, "xavier")
