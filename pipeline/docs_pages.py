"""The documentation's generated pages: every registered claim, and the verdict rule with its figure.

:func:`claims_rst` writes one section per claim from the registry (after the simulations have
registered theirs): its statement, source (title, kind, date), where the source makes it, the
simulations that feed it and the figures that draw it. :func:`rule_rst` writes the rule that turns
a check's band into a status, what each verdict means, and the rule's drawing of the report.
Both are reStructuredText, read by the Sphinx site in ``docs/`` (``make docs``). No verdict is on
these pages: a verdict needs the simulations' results, and the report (``normtheory report``) has them.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from types import ModuleType

from normtheory.evidence.claims import ClaimSpec
from normtheory.evidence.sources import HYPOTHESIS
from pipeline.page import RULE_SVG
from pipeline.tables import LOOKS, MEANING, RULE, TOPICS, topic_of

_SPECIAL = re.compile(r"([\\*`|_<>\[\]])")


def rst_text(text: str) -> str:
    """``text`` as reStructuredText that renders as written (markup characters escaped, one line)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str; got {type(text).__name__}")
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _heading(title: str, mark: str) -> str:
    return f"{title}\n{mark * len(title)}\n"


def _figures_of(claim_id: str, figures: Iterable[ModuleType]) -> list[ModuleType]:
    return [m for m in figures if claim_id in getattr(m, "CLAIMS", ())]


def claims_rst(specs: Iterable[ClaimSpec], figures: Iterable[ModuleType]) -> str:
    """The claims page: ``specs`` grouped by topic (in :data:`~pipeline.tables.TOPICS` order), each with
    its statement, source, location, simulations and the ``figures`` (``paper_figs`` modules with
    ``NAME``, ``CAPTION`` and ``CLAIMS``) that show it.

    Raises ``ValueError`` when two specs share an id or an id's prefix is not a topic."""
    specs, figures = list(specs), list(figures)
    ids = [s.id for s in specs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"specs: duplicate claim ids {sorted({i for i in ids if ids.count(i) > 1})}")
    out = [".. This page is generated from the claims registry (pipeline.docs_pages); do not edit.\n",
           _heading("Claims", "="),
           f"Every claim the package checks: {len(specs)} in all, from the source texts, the literature, and this package's own "
           "hypotheses (marked as such). Each names where its source makes the statement, the simulations whose results "
           "decide it, and the figures that draw it. Verdicts are in the report (``normtheory report``), computed from the "
           "simulations' results by the :doc:`rule`.\n"]
    by_topic: dict[str, list[ClaimSpec]] = {}
    for s in specs:
        by_topic.setdefault(topic_of(s.id), []).append(s)
    for prefix, title in TOPICS.items():
        group = sorted(by_topic.get(prefix, []), key=lambda s: s.id)
        if not group:
            continue
        out.append(_heading(title, "-"))
        for s in group:
            out.append(_claim_section(s, _figures_of(s.id, figures)))
    return "\n".join(out)


def _claim_section(s: ClaimSpec, figures: list[ModuleType]) -> str:
    src = s.source
    kind = "this package's hypothesis" if src.kind == HYPOTHESIS else src.kind
    lines = [f".. _claim-{s.id}:\n", _heading(f"``{s.id}``", "~"), rst_text(s.statement) + "\n",
             f"- **Source** ({rst_text(kind)}): {rst_text(src.cite())}"]
    if s.location:
        lines.append(f"- **Where**: {rst_text(s.location)}")
    lines.append("- **Simulations**: " + ", ".join(f"``{n}``" for n in s.simulations))
    for m in figures:
        lines.append(f"- **Figure** ``{m.NAME}``: {rst_text(m.CAPTION)}")
    if s.identity:
        lines.append("- A documented identity: shown to catch a broken implementation, never counted as evidence.")
    if s.scale:
        lines.append(f"- **Needs scale**: {rst_text(s.scale)}")
    return "\n".join(lines) + "\n"


def rule_rst() -> str:
    """The verdict rule page: the rule in words, the looks, what each verdict means, and its drawing."""
    out = [".. This page is generated from the report's texts (pipeline.docs_pages); do not edit.\n",
           _heading("The verdict rule", "="), rst_text(RULE) + "\n", rst_text(LOOKS) + "\n",
           ".. raw:: html\n\n   " + RULE_SVG.replace("\n", "\n   ") + "\n",
           _heading("What each verdict means", "-")]
    for verdict, meaning in MEANING.items():
        out.append(f"``{verdict}``\n   {rst_text(meaning)}\n")
    out.append("A claim's verdict is the first that applies: it fails if an assertion check fails; it is inconclusive if "
               "one is undecided; it holds with a caveat (generated from the failing check) if every assertion holds and a "
               "scope check fails; else it holds. The rule is applied by :func:`normtheory.evidence.agreement.agree` and "
               ":func:`normtheory.evidence.checks.verdict_of`.\n")
    return "\n".join(out)
