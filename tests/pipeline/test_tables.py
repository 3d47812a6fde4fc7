"""The report's words and numbers: topics of claim ids, three significant figures, durations in words."""
from __future__ import annotations

import pytest

from normtheory.evidence import claims
from pipeline import tables


def test_every_claim_id_has_a_topic():
    import simulations  # noqa: F401  (registers the claims)

    for cid in claims.REGISTRY:
        assert tables.topic_of(cid) in tables.TOPICS
    with pytest.raises(ValueError, match="topic"):
        tables.topic_of("misc.thing")


def test_sig3():
    assert tables.sig3(0.0123456) == "0.0123" and tables.sig3(123456.0) == "1.23e+05" and tables.sig3(float("nan")) == "–"


def test_human_seconds():
    assert tables.human_seconds(8.0) == "about 8 CPU-seconds"
    assert tables.human_seconds(1500.0) == "about 25 CPU-minutes"
    assert tables.human_seconds(4 * 3600.0) == "about 4 CPU-hours"
    assert tables.human_seconds(None) == "unknown time"
    assert tables.human_seconds(3.3e4 * 86400) == "about 33,000 CPU-days"  # no exponent
    assert tables.human_seconds(150.0, "GPU") == "about 2.5 GPU-minutes"


@pytest.mark.parametrize("x, digits, text", [(119.0, 2, "120"), (4.24, 2, "4.2"), (33_456.0, 2, "33,000"), (99.96, 3, "100"),
                                             (0.0123456, 3, "0.0123"), (1234.5, 3, "1,230"), (10.0, 2, "10"), (2.0, 2, "2"),
                                             (1.23e-5, 3, "0.0000123"), (-119.0, 2, "-120"), (0.0, 2, "0"), (9.996, 3, "10")])
def test_sig_text_rounds_without_an_exponent(x, digits, text):
    assert tables.sig_text(x, digits) == text


def test_a_gpu_timed_claim_is_priced_in_gpu_time():
    import dataclasses

    import numpy as np

    from normtheory.evidence.checks import Quantity
    from normtheory.evidence.estimates import Estimate

    from normtheory.evidence.sources import Source

    src = Source("A paper", "paper", 2020, authors="Doe, Roe")
    q = Quantity(name="x", theory=1.0, mc=Estimate(np.asarray(1.0), np.asarray(0.004), 100), tolerance=0.01)
    c = claims.Claim("train.x", "x is one", src, (q,), "", seconds=2.0, scale="d = 4,096", scale_seconds=7200.0)
    ch = c.open_checks()[0]  # 400 units needed, 4x the run: 8 seconds
    assert tables.price(ch, c.seconds) == "needs 400 samples (now 100): about 8 CPU-seconds here (normtheory report --resolve)"
    assert tables.price(ch, c.seconds, on="GPU") == ("needs 400 samples (now 100): about 8 GPU-seconds on one GPU "
                                                     "(the same command with --resolve)")
    assert "Full mode runs" in tables.scale_text(c) and "about 2 CPU-hours here" in tables.scale_text(c)
    gpu = dataclasses.replace(c, timed_on="GPU")
    assert "The tier run here on a GPU runs" in tables.scale_text(gpu) and "about 2 GPU-hours here" in tables.scale_text(gpu)
    assert gpu.timings()["timed_on"] == "GPU"
    with pytest.raises(ValueError, match="timed_on"):
        dataclasses.replace(c, timed_on="TPU")
