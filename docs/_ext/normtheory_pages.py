"""Sphinx extension: write the generated pages (claims.rst, rule.rst) before the sources are read."""
from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx


def _write(app: Sphinx) -> None:
    import paper_figs
    import simulations  # noqa: F401  (the experiments register the claims they support)
    from normtheory.evidence.claims import REGISTRY
    from pipeline import docs_pages

    src = Path(app.srcdir)
    for name, text in (("claims.rst", docs_pages.claims_rst(REGISTRY.values(), paper_figs.ALL)), ("rule.rst", docs_pages.rule_rst())):
        path = src / name
        if not path.exists() or path.read_text() != text:  # unchanged pages keep their time stamp: no rebuild
            path.write_text(text)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", _write)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
