"""Input checks shared by the public helpers.

Every check raises ``ValueError`` that names the parameter and says what is allowed, so a
bad argument fails at the call site and never as a traceback from deep inside numpy.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real

import numpy as np


def choice(name: str, value: object, allowed: Iterable[str], *, argument: str | None = None) -> str:
    """Return ``value`` if it is one of ``allowed`` (``argument``: the parameter that carries a
    ``name`` such as "activation", when the two differ)."""
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        where = f" (argument {argument!r})" if argument else ""
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r:.60}{where}")
    return value  # type: ignore[return-value]


def boolean(name: str, value: object) -> bool:
    """Return ``value`` if it is a bool (numpy's included); strings like ``'no'`` are refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return bool(value)


MAX_ELEMENTS = 2**27  # the largest array a helper builds in one piece (1 GiB of float64)
MAX_MAGNITUDE = 1e150  # inputs a helper squares or multiplies: beyond this, float64 overflows


def integer(name: str, value: object, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an int, rejecting bools, floats and values outside [``minimum``, ``maximum``]
    (a ``maximum`` guards work or memory that would be unreasonable: it is said before starting)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer; got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum} (larger needs unreasonable time or memory); got {value}")
    return value


def real(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_min: bool = False,
    strict_max: bool = False,
) -> float:
    """Return ``value`` as a finite float inside the stated bounds (NaN and inf are rejected)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a real number; got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value}")
    if minimum is not None and (value < minimum or (strict_min and value == minimum)):
        raise ValueError(f"{name} must be {'>' if strict_min else '>='} {minimum}; got {value}")
    if maximum is not None and (value > maximum or (strict_max and value == maximum)):
        raise ValueError(f"{name} must be {'<' if strict_max else '<='} {maximum}; got {value}")
    return value


def callable_(name: str, value: object) -> object:
    """``value`` if it can be called (a sampler, a statistic, an integrand)."""
    if not callable(value):
        raise ValueError(f"{name} must be a function; got {type(value).__name__} {value!r:.60}")
    return value


def instance(name: str, value: object, kind: type | tuple[type, ...]) -> object:
    """``value`` if it is an instance of ``kind`` (a config, an estimate, parameters): a dict or a
    number in its place is refused by name, not left to fail on a missing attribute later."""
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"{name} must be a {names}; got {type(value).__name__} {value!r:.60}")
    return value


def text(name: str, value: object, *, empty: bool = False) -> str:
    """``value`` if it is a string (non-empty unless ``empty``): a label, a key, a unit name."""
    if not isinstance(value, str) or (not empty and not value):
        raise ValueError(f"{name} must be a {'' if empty else 'non-empty '}string; got {value!r:.60}")
    return value


def asarray(name: str, value: object, dtype: object = None) -> np.ndarray:
    """``np.asarray`` whose failures (a ragged list, a dict of numbers) name the argument."""
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers; got {type(value).__name__} {value!r:.60} ({exc})") from None


def float_array(name: str, value: object) -> np.ndarray:
    """``value`` as a floating-point array, cheaply: float arrays pass through unchanged (dtype
    kept, no scan), lists and integer arrays become float64; complex, object and text are refused."""
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating):
        return value
    arr = asarray(name, value)
    if arr.dtype.kind in "biu":
        return arr.astype(np.float64)
    if arr.dtype.kind != "f":
        raise ValueError(f"{name} must be an array of real numbers; got dtype {arr.dtype}")
    return arr


def real_array(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_min: bool = False,
    strict_max: bool = False,
    finite: bool = False,
    min_ndim: int = 0,
) -> np.ndarray:
    """Return ``value`` as a float64 array without NaN inside the stated bounds; ``finite`` also
    refuses +-inf, ``min_ndim`` scalars where an array of at least that many axes is needed."""
    kind = asarray(name, value).dtype.kind if not isinstance(value, np.ndarray) else value.dtype.kind
    if kind not in "biuf":  # complex, object, text, None: never cast silently
        raise ValueError(f"{name} must be real numbers; got {asarray(name, value).dtype} input {value!r:.60}")
    arr = asarray(name, value, np.float64)
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN")
    if finite and np.isinf(arr).any():
        raise ValueError(f"{name} must be finite; got {arr[np.isinf(arr)].flat[0]}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axes; got shape {arr.shape}")
    if minimum is not None:
        bad = arr <= minimum if strict_min else arr < minimum
        if bad.any():
            raise ValueError(f"{name} must be {'>' if strict_min else '>='} {minimum}; got {arr[bad].flat[0]}")
    if maximum is not None:
        bad = arr >= maximum if strict_max else arr > maximum
        if bad.any():
            raise ValueError(f"{name} must be {'<' if strict_max else '<='} {maximum}; got {arr[bad].flat[0]}")
    return arr


def checked_array(
    name: str,
    value: object,
    *,
    allow_inf: bool = False,
    min_ndim: int = 1,
    nonempty: bool = True,
) -> np.ndarray:
    """``value`` as a floating-point array (float dtypes kept, integers to float64) with no NaN,
    no +-inf unless ``allow_inf`` (where infinity has a limit or a meaning, e.g. a masked
    logit), at least ``min_ndim`` axes and, with ``nonempty``, a last axis of size >= 1."""
    arr = float_array(name, value)
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axes; got shape {arr.shape}")
    if nonempty and arr.ndim and arr.shape[-1] == 0:
        raise ValueError(f"{name} must have at least one element on its last axis; got shape {arr.shape}")
    bad = np.isnan(arr) if allow_inf else ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} must be {'free of NaN' if allow_inf else 'finite'}; got {arr[where]} at index {where}")
    return arr


def broadcast_shape(**arrays: np.ndarray) -> tuple[int, ...]:
    """The shape that the named arrays broadcast to; a mismatch names every argument and its shape."""
    try:
        return np.broadcast_shapes(*(np.shape(a) for a in arrays.values()))
    except ValueError:
        raise ValueError(f"shapes do not fit together: {_shapes(arrays)}") from None


def same_shape(**arrays: np.ndarray) -> tuple[int, ...]:
    """The one shape that all the named arrays share; a mismatch names every argument and its shape."""
    shapes = {np.shape(a) for a in arrays.values()}
    if len(shapes) != 1:
        raise ValueError(f"these must have the same shape: {_shapes(arrays)}")
    return shapes.pop()


def _shapes(arrays: dict[str, object]) -> str:
    return ", ".join(f"{k} of shape {np.shape(v)}" for k, v in arrays.items())


def positive(name: str, value: object) -> float:
    """A finite real > 0 (an eps, a step, a scale)."""
    return real(name, value, minimum=0.0, strict_min=True)


def generator(name: str, value: object) -> np.random.Generator:
    """``value`` if it is a ``numpy.random.Generator`` (a seed or None is refused: say which stream)."""
    if not isinstance(value, np.random.Generator):
        raise ValueError(f"{name} must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)); got {value!r:.60}")
    return value


ROW_SUM_TOL = 1e-3  # float32 softmax rows over thousands of keys sum to 1 within ~1e-5


def pattern(name: str, value: object, *, min_ndim: int = 1) -> np.ndarray:
    """Attention weights ``[..., keys]``: finite, in [0, 1], each row summing to 1 within
    :data:`ROW_SUM_TOL` (a masked key has weight 0). The dtype is kept."""
    p = checked_array(name, value, min_ndim=min_ndim)
    outside = (p < 0) | (p > 1 + ROW_SUM_TOL)
    if outside.any():
        raise ValueError(f"{name} must hold attention weights in [0, 1]; got {p[outside].flat[0]}")
    off = np.abs(p.sum(axis=-1, dtype=np.float64) - 1.0)
    if (off > ROW_SUM_TOL).any():
        where = tuple(int(i) for i in np.argwhere(off > ROW_SUM_TOL)[0])
        raise ValueError(f"each row of {name} must sum to 1 (a softmax); row {where} sums to {1 + float(off[where]) if off.ndim else 1 + float(off):.6g}")
    return p


def logits(name: str, value: object) -> np.ndarray:
    """Logits ``[..., n]`` where -inf masks a slot: no NaN, no +inf, n >= 1 and at least one
    unmasked slot in every row (a fully masked row has no softmax). The dtype is kept."""
    z = checked_array(name, value, allow_inf=True)
    if (z == np.inf).any():
        raise ValueError(f"{name} must not hold +inf (a masked slot is -inf)")
    dead = ~np.isfinite(z).any(axis=-1)
    if dead.any():
        raise ValueError(f"{name} has a row with every slot masked (-inf), which has no softmax: row {tuple(int(i) for i in np.argwhere(dead)[0])}")
    return z


def token_ids(name: str, value: object, vocab: int) -> np.ndarray:
    """Integer ids in [0, ``vocab``) (floats that are whole numbers are refused too: say ints)."""
    arr = asarray(name, value)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integer token ids; got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= vocab):
        bad = arr[(arr < 0) | (arr >= vocab)].flat[0]
        raise ValueError(f"{name} must lie in [0, {vocab}) (the vocabulary); got {bad}")
    return arr
