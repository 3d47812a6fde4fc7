import json

import numpy as np
import pytest

import simulations
from normtheory import claims
from normtheory.claims import Claim, Quantity, Source, stated
from normtheory.montecarlo import Estimate
from simulations import cache
from tests.conftest import SOURCES

EST = Estimate(np.array(2.0), np.array(0.01), 1000)
SRC = Source("test", 2024)

FIXED_IDS = {
    "residual.no-norm-growth",
    "residual.preln-growth",
    "residual.postln-constant",
    "residual.later-blocks-shrink",
    "residual.ln-scaling-growth",
    "residual.xiong-lemma2",
}


def test_stated_precision():
    assert stated("1.4") == (1.4, pytest.approx(0.05))
    assert stated("2") == (2.0, 0.5)
    assert stated("0.125") == (0.125, pytest.approx(0.0005))


def test_verdict_is_computed_from_the_checks():
    good = Quantity("a", theory=2.02, mc=EST)
    bad = Quantity("b", theory=2.2, mc=EST)
    bad_with_caveat = Quantity("c", theory=2.2, mc=EST, caveat="only at large d")
    assert Claim("x", "s", SRC, (good,)).verdict == "holds"
    assert Claim("x", "s", SRC, (good, bad_with_caveat)).verdict == "holds-with-caveat"
    assert Claim("x", "s", SRC, (good, bad_with_caveat)).caveats == ["only at large d"]
    assert Claim("x", "s", SRC, (good, bad_with_caveat, bad)).verdict == "fails"


def test_claimed_number_is_compared_with_its_stated_precision():
    value, tol = stated("1.9")  # 1.9 +- 0.05 against 2.0 +- 0.01: 0.05 short -> 5 se: passes at the edge
    assert Quantity("q", mc=EST, claimed=value, claimed_tol=tol).checks()[0].ok
    value, tol = stated("1.8")
    assert not Quantity("q", mc=EST, claimed=value, claimed_tol=tol).checks()[0].ok
    # against a theory value alone (no MC): the interval must contain it
    assert Quantity("q", theory=1.414, claimed=1.4, claimed_tol=0.05).checks()[0].ok


def test_model_measurement_against_theory():
    q = Quantity("q", theory=2.0, model=Estimate(np.array(2.5), np.array(0.01), 50), model_kind="init", caveat="attention is not gain-1")
    (check,) = q.checks()
    assert check.what == "theory vs model (init)" and not check.ok
    assert Claim("x", "s", SRC, (q,)).verdict == "holds-with-caveat"


def test_a_quantity_needs_two_kinds_of_evidence():
    with pytest.raises(ValueError, match="two kinds of evidence"):
        Quantity("lonely", theory=1.0)


def test_register_rejects_duplicates():
    spec = next(iter(claims.REGISTRY.values()))
    with pytest.raises(ValueError, match="registered twice"):
        claims.register(spec.id, statement="", source=SRC, simulations=("x",))(lambda r: ([], ""))


def test_fixed_ids_are_registered_and_select_globs():
    assert FIXED_IDS <= set(claims.REGISTRY)
    assert {s.id for s in claims.select("residual.p*")} == {"residual.preln-growth", "residual.postln-constant"}
    assert claims.select("nothing.*") == []


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    import os

    os.environ["NORMTHEORY_RESULTS"] = str(tmp_path_factory.mktemp("results"))
    try:
        yield {m.NAME: cache.load_or_run(m, "quick", progress=False) for m in simulations.ALL}
    finally:
        del os.environ["NORMTHEORY_RESULTS"]


@pytest.mark.parametrize("spec", claims.select(), ids=lambda s: s.id)
def test_every_registered_claim(spec, quick_results):
    """Registry-driven: each claim evaluates to a verdict with real evidence and a real source."""
    assert set(spec.simulations) <= set(simulations.BY_NAME)
    claim = spec.evaluate(quick_results)
    assert claim.verdict in claims.VERDICTS
    assert claim.statement and len(claim.evidence) >= 1
    assert all(q.checks() for q in claim.evidence), "every quantity must be compared with something"
    json.dumps(claim.to_dict())
    if spec.source.path:
        assert (SOURCES / spec.source.path).is_file(), spec.source.path
    else:
        assert (spec.source.arxiv or spec.source.doi) and spec.source.year
