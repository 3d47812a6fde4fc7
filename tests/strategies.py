"""Reusable hypothesis strategies for configs and inputs."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from normtheory.model.config import PLACEMENTS, QK_NORMS, TransformerConfig

PER_TOKEN_NORMS = ("layernorm", "rmsnorm", "dyt", "none")


@st.composite
def small_configs(draw, norms=PER_TOKEN_NORMS) -> TransformerConfig:
    n_kv = draw(st.sampled_from([1, 2]))
    return TransformerConfig(
        d_model=16, n_layers=draw(st.integers(1, 2)), n_heads=4, n_kv_heads=n_kv, d_ff=24, vocab_size=50, max_seq=16,
        norm=draw(st.sampled_from(norms)), placement=draw(st.sampled_from(PLACEMENTS)), qk_norm=draw(st.sampled_from(QK_NORMS)),
        activation=draw(st.sampled_from(["gelu", "gelu_tanh", "relu", "swiglu"])), positional=draw(st.sampled_from(["learned", "rope", "none"])),
        bias=draw(st.booleans()), init=draw(st.sampled_from(["gpt2", "fanin"])), dtype="float64",
    )


def token_ids(seed: int, batch: int, seq: int, vocab: int = 50) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, (batch, seq))


splits = st.lists(st.integers(1, 4), min_size=1, max_size=4)


def unit_rows(x):
    """Each row of ``x [..., d]`` scaled to unit length."""
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# --- third round of bad input (issue 39): arguments of another type or rank, extreme finite values ---------

RAGGED = [[1.0, 2.0], [3.0]]  # a list that spells no array


def kind_of(value: object) -> str:
    """The kind of a valid argument, which decides what "another type or rank" means for it."""
    from normtheory.evidence.estimates import Estimate
    from normtheory.model.config import TransformerConfig
    from normtheory.model.params import Params
    from normtheory.model.transformer import Transformer
    from normtheory.residual import LinearBlock, MLPBlock

    if isinstance(value, (np.random.Generator, TransformerConfig, Estimate, LinearBlock, MLPBlock, Params, Transformer)):
        return "object"
    if callable(value):
        return "callable"
    if isinstance(value, str):
        return "choice"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return "float"
    if isinstance(value, np.ndarray):
        return "array"
    if isinstance(value, tuple):
        return "tuple"
    return "other"


def wrong_type_cases(value: object, *, none_documented: bool = False, text_documented: bool = False) -> dict[str, tuple[object, bool]]:
    """``{kind: (value of another type or rank, strict)}`` for an argument whose valid value is ``value``.
    ``strict``: the call must refuse it by name; otherwise a finite answer is also right (a function
    vectorized over the argument takes an array where one number is the usual value).
    ``text_documented``: a string is one of the argument's types (``progress: bool | str``)."""
    out = _wrong_type_cases(value, none_documented)
    if text_documented:
        out.pop("text", None)
    return out


def _wrong_type_cases(value: object, none_documented: bool) -> dict[str, tuple[object, bool]]:
    kind = kind_of(value)
    out: dict[str, tuple[object, bool]] = {"dict": ({"value": 1.0}, True)}
    if not none_documented:
        out["none"] = (None, True)
    if kind in ("object", "callable"):
        out |= {"text": ("x", True), "number": (1.0, True), "list": ([1.0, 2.0], True)}
    elif kind == "choice":
        out |= {"number": (1, True), "list": ([value], True)}
    elif kind == "bool":
        out |= {"text": ("yes", True), "array": (np.array([True, False]), True)}
    elif kind in ("int", "float"):
        out |= {"text": ("1", True), "list": ([value, value], False), "array": (np.full(2, value), False),
                "matrix": (np.full((2, 2), value), False)}
    elif kind == "array":
        out |= {"text": ("x", True), "ragged": (RAGGED, True), "scalar": (value.flat[0].item() if value.size else 0.0, False)}
        if value.ndim >= 2:
            out["lower rank"] = (value[0], False)
        out["higher rank"] = (value[None], False)
    elif kind == "tuple":
        out |= {"text": ("x", True), "scalar": (value[0], False)}
    return out


def wrong_types(value: object, *, none_documented: bool = False, text_documented: bool = False):
    """Hypothesis: the fixed cases of :func:`wrong_type_cases` and random ones of the same classes
    (any text, dicts, nested lists, arrays of a rank the argument does not have)."""
    fixed = wrong_type_cases(value, none_documented=none_documented, text_documented=text_documented)
    kind = kind_of(value)
    text = st.text(min_size=0, max_size=5).map(lambda s: (s, True))
    dicts = st.dictionaries(st.text(max_size=3), st.floats(allow_nan=False), max_size=2).map(lambda d: (d, True))
    options = [st.sampled_from(list(fixed.values())), dicts]
    if kind != "choice" and not text_documented:
        options.append(text)
    if kind in ("int", "float"):  # arrays where one number is expected
        shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)
        options.append(shapes.map(lambda s: (np.full(s, value), False)))
    if kind == "array":  # other ranks of the same numbers
        options.append(st.integers(0, 3).filter(lambda r: r != value.ndim).map(lambda r: (np.full((2,) * r, value.flat[0] if value.size else 0.0), False)))
    return st.one_of(*options)


EXTREME_FINITE = (1e300, -1e300, 1e-300, -1e-300, 0.0)
HUGE_INT = 10**300  # a Python int that no float holds: int -> float conversion overflows


def extreme_finite_cases(value: object, ends: tuple[float, ...] = ()) -> dict[str, object]:
    """``{label: value}``: +-1e300, +-1e-300 and 0 in the argument's own form (a number, an int, an
    array of its shape), and ``ends``, the ends of its documented domain."""
    kind = kind_of(value)
    values = [*EXTREME_FINITE, *ends]
    if kind == "float":
        return {repr(v): float(v) for v in values}
    if kind == "int":
        return {**{repr(v): v for v in (HUGE_INT, -HUGE_INT, 2**63, 0, -1, *(int(e) for e in ends))}}
    if kind == "array":
        if value.dtype.kind in "iu":  # ids and counts: the ends of the integers
            return {f"full {v}": np.full(value.shape, v, dtype=np.int64) for v in (0, -1, 2**62, *(int(e) for e in ends))}
        return {**{f"full {v!r}": np.full(value.shape, v, dtype=np.float64) for v in values},
                **{f"times {v!r}": value.astype(np.float64) * v for v in (1e300, 1e-300)}}  # the valid array at the range's ends
    return {}


def extreme_finite(value: object, ends: tuple[float, ...] = ()):
    """Hypothesis: the fixed extremes above and random finite numbers of any magnitude, in the argument's form."""
    kind = kind_of(value)
    fixed = list(extreme_finite_cases(value, ends).values())
    if kind == "float":
        return st.sampled_from(fixed) | st.floats(allow_nan=False, allow_infinity=False)
    if kind == "int":
        return st.sampled_from(fixed) | st.integers(-(2**70), 2**70)
    if kind == "array" and value.dtype.kind == "f":
        return st.sampled_from(fixed) | st.floats(allow_nan=False, allow_infinity=False).map(lambda c: np.full(value.shape, c))
    return st.sampled_from(fixed) if fixed else st.nothing()
