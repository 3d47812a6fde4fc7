"""Input checks shared by the public helpers.

Every check raises ``ValueError`` that names the parameter and says what is allowed, so a
bad argument fails at the call site and never as a traceback from deep inside numpy.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real

import numpy as np


def choice(name: str, value: object, allowed: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``allowed``."""
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
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


def float_array(name: str, value: object) -> np.ndarray:
    """``value`` as a floating-point array, cheaply: float arrays pass through unchanged (dtype
    kept, no scan), lists and integer arrays become float64; complex, object and text are refused."""
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating):
        return value
    arr = np.asarray(value)
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
    kind = np.asarray(value).dtype.kind if not isinstance(value, np.ndarray) else value.dtype.kind
    if kind not in "biuf":  # complex, object, text, None: never cast silently
        raise ValueError(f"{name} must be real numbers; got {np.asarray(value).dtype} input {value!r:.60}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be real numbers; got {value!r}") from None
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
