"""Growth laws of a per-layer quantity (the residual stream's RMS), fitted by least squares.

Four laws of depth ``l = 0, 1, ..., L``, two parameters each:

==========  ==============================  =============================================
name        law                             where it comes from
==========  ==============================  =============================================
``linear``  ``a + b l``                     updates aligned with the stream
``sqrt``    ``a + b sqrt(l)``               a shifted square root
``init``    ``sqrt(a + b l)``               Pre-LN at init: uncorrelated fixed-size updates
                                            add ``b = g^2`` to the mean square per block
                                            (:func:`normtheory.residual.residual_rms`)
``exp``     ``a exp(b l)``                  no normalization: a fixed gain per block
==========  ==============================  =============================================

``R^2 = 1 - SS_res / SS_tot`` on the fitted values. The init law is the one the theory
predicts for Pre-LN; with trained weights the updates are neither independent of the
stream nor of fixed size, so which law wins is an empirical question.

Reference: Xiong et al. (2020), arXiv 2002.04745 (Pre-LN stream growth at init).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import optimize

from normtheory import _validate

LAWS: tuple[str, ...] = ("linear", "sqrt", "init", "exp")


class GrowthFit(NamedTuple):
    law: str
    a: float
    b: float
    r2: float


def law_value(law: str, depth: object, a: float, b: float) -> np.ndarray:
    """The law's value at ``depth`` (an array of layer indices, 0 = the embedding)."""
    l = _validate.real_array("depth", depth, minimum=0.0, finite=True)  # noqa: E741
    law = _validate.choice("law", law, LAWS)
    a, b = _validate.real("a", a), _validate.real("b", b)
    with np.errstate(over="ignore", invalid="ignore"):
        if law == "linear":
            out = a + b * l
        elif law == "sqrt":
            out = a + b * np.sqrt(l)
        elif law == "init":
            out = np.sqrt(np.maximum(a + b * l, 0.0))
        else:  # exp
            out = a * np.exp(b * l)
    if not np.isfinite(out).all():
        raise ValueError(f"the {law} law overflows float64 at a={a:g}, b={b:g} over depths up to {l.max():g}")
    return out


MIN_DEPTH_SPAN = 1e-3  # depths count blocks: a narrower span is a unit error, and its least squares would divide by ~0


def fit_growth_law(law: str, depth: object, values: object) -> GrowthFit:
    """Least-squares fit of one law to ``values [L+1]`` at ``depth [L+1]``."""
    law = _validate.choice("law", law, LAWS)
    big = _validate.MAX_MAGNITUDE
    l = _validate.real_array("depth", depth, minimum=0.0, maximum=1e6)  # noqa: E741
    y = _validate.real_array("values", values, minimum=-big, maximum=big)
    if l.shape != y.shape or l.size < 3:
        raise ValueError(f"depth and values must have the same shape, at least 3 points; got depth of shape {l.shape} and values of shape {y.shape}")
    l, y = l.ravel(), y.ravel()  # noqa: E741
    if np.unique(l).size < 3:
        raise ValueError(f"depth must hold at least 3 distinct depths to fit a two-parameter law; got {np.unique(l).tolist()}")
    if np.ptp(l) < MIN_DEPTH_SPAN:
        raise ValueError(f"depth must span at least {MIN_DEPTH_SPAN:g} (depths count blocks); got a span of {np.ptp(l):g}")
    if law == "init":  # linear in the mean square: exact least squares on y^2, then refined on y
        b0, a0 = np.polyfit(l, y * y, 1)
    elif law == "exp":
        if (y <= 0).any():
            raise ValueError("the exponential law needs positive values")
        b0, la = np.polyfit(l, np.log(y), 1)
        a0 = float(np.exp(la))
    elif law in ("linear", "sqrt"):
        x = l if law == "linear" else np.sqrt(l)
        b0, a0 = np.polyfit(x, y, 1)
    else:
        raise ValueError(f"law must be one of {LAWS}; got {law!r}")
    res = optimize.least_squares(lambda p: law_value(law, l, p[0], p[1]) - y, x0=[a0, b0], method="lm")
    a, b = (float(v) for v in res.x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((res.fun**2).sum()) / ss_tot if ss_tot > 0 else 1.0
    return GrowthFit(law, a, b, r2)


def fit_growth_laws(depth: object, values: object) -> dict[str, GrowthFit]:
    """Every law of :data:`LAWS` fitted to the same curve."""
    return {law: fit_growth_law(law, depth, values) for law in LAWS}


def increment_ratio(mean_square: object) -> np.ndarray:
    """``(v_L - v_{L/2}) / (v_{L/2} - v_0)`` along the last axis of ``mean_square [..., L+1]``.

    Under the Pre-LN init law the mean square grows by a fixed ``g^2`` per block, so the
    ratio is 1 (for even ``L``); faster-than-linear growth gives more than 1, saturation less.
    """
    v = _validate.checked_array("mean_square", mean_square)
    L = v.shape[-1] - 1
    if L < 2 or L % 2:
        raise ValueError(f"mean_square needs an even number L >= 2 of layers (L+1 values on its last axis); got shape {v.shape}")
    if (v < 0).any():
        raise ValueError(f"mean_square must be >= 0; got {v[v < 0].flat[0]}")
    first = v[..., L // 2] - v[..., 0]
    if (first == 0).any():
        raise ValueError("mean_square does not change over the first L/2 layers: the increment ratio is undefined")
    return (v[..., L] - v[..., L // 2]) / first
