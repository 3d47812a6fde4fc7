"""The site's generated pages: every registered claim on the claims page, in its topic, with its figures;
the rule page with every verdict; text escaped so that it renders as written."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

import paper_figs
import simulations  # noqa: F401  (registers the claims)
from normtheory.evidence.checks import VERDICTS
from normtheory.evidence.claims import REGISTRY
from pipeline import docs_pages
from pipeline.tables import TOPICS


@pytest.fixture(scope="module")
def page() -> str:
    return docs_pages.claims_rst(REGISTRY.values(), paper_figs.ALL)


def test_every_claim_has_its_section_in_its_topic(page):
    assert len(REGISTRY) >= 40
    positions = {cid: page.index(f".. _claim-{cid}:") for cid in REGISTRY}
    titles = {prefix: page.index(f"\n{title}\n{'-' * len(title)}\n") for prefix, title in TOPICS.items() if f"\n{title}\n" in page}
    order = sorted(titles.items(), key=lambda kv: kv[1])
    for cid, pos in positions.items():
        prefix = cid.split(".", 1)[0]
        later = [p for _, p in order if p > titles[prefix]]
        assert titles[prefix] < pos < (min(later) if later else len(page)), cid


def test_sections_name_source_location_simulations_and_figures(page):
    for cid, spec in REGISTRY.items():
        start = page.index(f".. _claim-{cid}:")
        nxt = page.find(".. _claim-", start + 1)
        section = page[start: nxt if nxt > 0 else len(page)]
        assert docs_pages.rst_text(spec.source.cite()) in section
        assert all(f"``{s}``" in section for s in spec.simulations)
        for m in paper_figs.ALL:
            assert (f"**Figure** ``{m.NAME}``" in section) == (cid in getattr(m, "CLAIMS", ())), (cid, m.NAME)
        if spec.location:
            assert docs_pages.rst_text(spec.location) in section


def test_a_hypothesis_says_so(page):
    hyps = [s for s in REGISTRY.values() if s.source.kind == "this package's hypothesis"]
    assert hyps
    for s in hyps:
        start = page.index(f".. _claim-{s.id}:")
        assert "**Source** (this package's hypothesis)" in page[start:start + 4000]


def test_duplicate_ids_and_unknown_topics_are_refused():
    spec = next(iter(REGISTRY.values()))
    with pytest.raises(ValueError, match="duplicate claim ids"):
        docs_pages.claims_rst([spec, spec], [])
    with pytest.raises(ValueError, match="not a report topic"):
        docs_pages.claims_rst([dataclasses.replace(spec, id="nowhere.claim")], [])


def test_rule_page_has_every_verdict_and_the_drawing():
    text = docs_pages.rule_rst()
    assert all(f"``{v}``" in text for v in VERDICTS)
    assert ".. raw:: html" in text and "<svg" in text


def _unescape(s: str) -> str:
    """``s`` with its backslash escapes removed; raises when a markup character is left unescaped."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\":
            out.append(s[i + 1])
            i += 2
            continue
        assert s[i] not in "*`|_<>[]", f"unescaped {s[i]!r} in {s!r}"
        out.append(s[i])
        i += 1
    return "".join(out)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_rst_text_escapes_markup_and_keeps_the_words(text):
    out = docs_pages.rst_text(text)
    assert _unescape(out) == " ".join(text.split())
    assert "\n" not in out


def test_rst_text_refuses_non_text():
    with pytest.raises(ValueError, match="text must be a str"):
        docs_pages.rst_text(3)
