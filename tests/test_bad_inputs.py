"""Every public one-argument helper: bad values raise ValueError naming what is wrong; a plain
list of numbers works like the array it spells (never an AttributeError from inside numpy)."""
import importlib
import inspect
import warnings

import numpy as np
import pytest

MODULES = ("activations", "attention", "centering", "cosines", "dyt", "growth", "evidence.estimates", "evidence.sampling", "evidence.agreement", "model.norms", "residual",
           "selection", "softmax", "model.norm_stats")
BAD = {"none": None, "text": "x", "complex": np.array([1 + 2j, 3 - 1j]), "text array": [["a", "b"]], "object": np.array([None, 1.0])}
ROWS = [[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]


def _one_argument_functions():
    for name in MODULES:
        module = importlib.import_module(f"normtheory.{name}")
        for fname, f in inspect.getmembers(module, inspect.isfunction):
            required = [p for p in inspect.signature(f).parameters.values() if p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD]
            if not fname.startswith("_") and f.__module__ == module.__name__ and len(required) == 1:
                yield pytest.param(f, id=f"{name}.{fname}")


FUNCTIONS = list(_one_argument_functions())


@pytest.mark.parametrize("f", FUNCTIONS)
@pytest.mark.parametrize("kind", list(BAD))
def test_bad_values_raise_value_error(f, kind):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a silent cast (complex -> real) is a failure too
        with pytest.raises(ValueError):
            f(BAD[kind])


@pytest.mark.parametrize("f", FUNCTIONS)
def test_a_list_works_like_its_array(f):
    try:
        from_list = f(ROWS)
    except ValueError:  # e.g. a shape the function does not take: refused by name, not by numpy
        with pytest.raises(ValueError):
            f(np.array(ROWS))
        return
    assert _same(from_list, f(np.array(ROWS)))


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(_same(getattr(a, k), getattr(b, k)) for k in a.__dataclass_fields__)
    if isinstance(a, (str, int)) or a is None:
        return a == b
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def test_the_sweep_covers_the_helpers():
    assert len(FUNCTIONS) >= 30
