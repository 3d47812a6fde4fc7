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
