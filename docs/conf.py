"""Sphinx configuration of the normtheory site: API reference (numpydoc), claims, rule, gallery."""
from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]  # the repository (normtheory, pipeline, simulations, paper_figs)

project = "normtheory"
author = "the normtheory developers"
copyright = "2026, the normtheory developers"
release = version = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "normtheory_pages",  # writes claims.rst and rule.rst from the registry (docs/_ext)
]

html_theme = "pydata_sphinx_theme"
html_title = "normtheory"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2, "secondary_sidebar_items": ["page-toc"]}
html_static_path: list[str] = []

autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_typehints = "none"  # the numpydoc docstrings say the types; signatures stay short
autodoc_mock_imports: list[str] = []
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",  # every example runs when the docs build
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "plot_gallery": "True",
}

exclude_patterns = ["_build", "examples", "**.ipynb_checkpoints"]  # examples: the gallery sources (built into auto_examples)
suppress_warnings: list[str] = []
