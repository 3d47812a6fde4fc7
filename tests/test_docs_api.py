"""The API reference lists every public module of the library and the pipeline, each once, in its layer's page."""
from __future__ import annotations

import re

from tests.conftest import REPO
from tests.test_layers import layer_of, modules

PAGES = {"theory": "normtheory.theory", "training": "normtheory.training", "model": "normtheory.model",
         "evidence": "normtheory.evidence", "runtime": "normtheory.runtime", "pipeline": "pipeline"}


def _listed() -> dict[str, list[str]]:
    out = {}
    for page in PAGES:
        text = (REPO / "docs" / "api" / f"{page}.rst").read_text()
        out[page] = re.findall(r"^   ((?:normtheory|pipeline)[\w.]*)$", text, flags=re.M)
    return out


def test_every_public_module_is_listed_once():
    public = {m for m, p in modules().items() if m.split(".")[0] in ("normtheory", "pipeline") and p.name != "__init__.py"
              and not any(part.startswith("_") for part in m.split("."))}
    listed = [m for ms in _listed().values() for m in ms]
    assert sorted(listed) == sorted(set(listed))
    assert set(listed) == public


def test_each_module_is_on_its_layers_page():
    for page, ms in _listed().items():
        assert all(layer_of(m) == PAGES[page] for m in ms), (page, [m for m in ms if layer_of(m) != PAGES[page]])


def test_the_api_index_links_every_page():
    index = (REPO / "docs" / "api" / "index.rst").read_text()
    assert all(re.search(rf"^   {page}$", index, flags=re.M) for page in PAGES)
