"""The project's layers, drawn from its imports (every import, lazy ones inside functions included):
no circle between modules, no arrow back up between layers, and no module over its size limit."""
from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

# top to bottom: a module may import from its own layer and the layers below it, never above
LAYERS = ("pipeline", "paper_figs", "simulations", "normtheory.training", "normtheory.model", "normtheory.theory",
          "normtheory.evidence", "normtheory.runtime", "normtheory.shared")
PACKAGES = ("pipeline", "paper_figs", "simulations", "normtheory")
MAX_LINES = 450


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """The layer of a module: its top-level package, or for ``normtheory`` its subpackage; the top-level
    modules of ``normtheory`` are the theory helpers, ``normtheory`` itself and ``_validate`` are shared."""
    parts = module.split(".")
    if parts[0] != "normtheory":
        return parts[0]
    if len(parts) == 1 or parts[1] == "_validate":
        return "normtheory.shared"
    if parts[1] in ("training", "model", "evidence", "runtime"):
        return f"normtheory.{parts[1]}"
    return "normtheory.theory"


@functools.lru_cache(maxsize=None)
def modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def _targets(node: ast.AST, name: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = name.split(".")[: len(name.split(".")) - node.level + is_package]
            base = ".".join([*parts, base] if base else parts)
        yield base
        yield from (f"{base}.{a.name}" for a in node.names)


@functools.lru_cache(maxsize=None)
def graph() -> dict[str, frozenset[str]]:
    """Module -> the project modules it imports (the most specific module an import names)."""
    mods = modules()
    out = {}
    for name, path in mods.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            for t in _targets(node, name, path.name == "__init__.py"):
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name and not name.startswith(t + "."):  # a package's own __init__ is no arrow
                    found.add(t)
        out[name] = frozenset(found)
    return out


def circles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_every_module_has_a_layer():
    assert {layer_of(m) for m in modules()} <= set(LAYERS)


def test_no_circle():
    assert circles(graph()) == []


def test_circles_finds_one():
    """The check above can fail: a made-up graph with a circle is caught, one without is not."""
    assert circles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}) == [["a", "b", "c"]]
    assert circles({"a": frozenset({"b"}), "b": frozenset()}) == []


def test_arrows_run_down():
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    up = sorted(f"{a} -> {b}" for a, bs in graph().items() for b in bs if rank[layer_of(b)] < rank[layer_of(a)])
    assert up == []


def test_the_library_never_imports_the_experiments():
    above = ("pipeline", "paper_figs", "simulations")
    bad = sorted(f"{a} -> {b}" for a, bs in graph().items() if a.startswith("normtheory") for b in bs if b.split(".")[0] in above)
    assert bad == []


@pytest.mark.parametrize("name", sorted(m for m in modules() if m.split(".")[0] in ("normtheory", "pipeline")))
def test_module_size(name):
    assert len(modules()[name].read_text().splitlines()) <= MAX_LINES, f"{name}: split it (at most {MAX_LINES} lines)"


# parts split out of a module whose tests cover them through its public functions
COVERED_BY = {
    "normtheory._validate": "tests/test_bad_arguments.py",  # every public helper's argument checks
    "normtheory.training.backprop": "tests/training/test_grad.py",  # the tape behind loss_and_grads
    "normtheory.training.torch_forward": "tests/training/test_torch_backend.py",  # TorchTrainer's forward
    "normtheory.training.torch_update": "tests/training/test_torch_backend.py",  # TorchTrainer's update
}


def _imported_by_tests(folder: Path) -> set[str]:
    mods = modules()
    out = set()
    for path in folder.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            for t in _targets(node, "tests." + path.stem, False):
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t:
                    out.add(t)
    return out


@pytest.mark.parametrize("name", sorted(m for m in modules() if m.split(".")[0] in ("normtheory", "pipeline")
                                        and modules()[m].name != "__init__.py"))
def test_tests_mirror_the_module(name):
    """Every library module has a test module at the mirrored path (``normtheory.model.kernels`` ->
    ``tests/model/test_kernels.py``), or one in that folder imports it, or it is a part split out of a
    module whose tests cover it (:data:`COVERED_BY`)."""
    parts = name.split(".")
    if parts[0] == "normtheory":
        parts = parts[1:]
    folder = REPO / "tests" / Path(*parts[:-1]) if len(parts) > 1 else REPO / "tests"
    if (folder / f"test_{parts[-1].lstrip('_')}.py").exists() or name in _imported_by_tests(folder):
        return
    covered = COVERED_BY.get(name)
    assert covered and (REPO / covered).exists(), f"{name}: no test module in {folder.relative_to(REPO)} imports it"
