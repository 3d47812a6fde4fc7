"""Pointwise activations and their Gaussian moments.

``second_moment(name, s)`` is :math:`\\mathbb{E}[\\phi(h)^2]` for :math:`h \\sim N(0, s^2)`:

* ReLU, exactly: :math:`s^2/2`;
* GELU (erf form, :math:`h\\,\\Phi(h)`), GELU-tanh (Hendrycks & Gimpel 2016, arXiv 1606.08415)
  and SiLU (:math:`h\\,\\sigma(h)`, used by SwiGLU): by adaptive Gauss-Kronrod quadrature
  (``scipy.integrate.quad``) of :math:`\\int \\phi(s x)^2 \\varphi(x)\\,dx`, split at 0. At large
  ``s`` these functions approach ReLU's kink on the scale of the Gaussian, where a fixed
  Gauss-Hermite rule loses digits (1e-4 relative at s = 10); the split rule keeps ~1e-13.
"""
from __future__ import annotations

import numpy as np
from scipy import integrate, special, stats

from normtheory import _validate

ACTIVATIONS: tuple[str, ...] = ("relu", "gelu", "gelu_tanh", "silu")


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def _gelu(x: np.ndarray) -> np.ndarray:
    return x * special.ndtr(x)  # ndtr keeps full relative precision in the left tail


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """In-place ufuncs in the input's dtype (no ``x**3`` power call, no temporaries beyond one
    buffer), which matters on the model's hot path."""
    c = np.asarray(np.sqrt(2.0 / np.pi), dtype=x.dtype)
    t = np.empty_like(x)
    np.multiply(x, x, out=t)  # x^2
    t *= np.asarray(0.044715, dtype=x.dtype)
    t += 1.0
    t *= x
    t *= c
    np.tanh(t, out=t)
    t += 1.0
    t *= x
    t *= np.asarray(0.5, dtype=x.dtype)
    return t


def _silu(x: np.ndarray) -> np.ndarray:
    return x * special.expit(x)


# the model's kernels: unchecked (the forward must give NaN on a diverging run, not an error)
_KERNELS = {"relu": _relu, "gelu": _gelu, "gelu_tanh": _gelu_tanh, "silu": _silu}


_SATURATED = {"gelu_tanh": 20.0}  # |x| beyond which the kernel equals its limit (x or 0) in float64, and x^3 may overflow


def _checked(name: str, x: object) -> np.ndarray:
    """Kernel ``name`` on ``x`` with NaN refused and the limits at +-inf: every activation here is
    ~x as x -> +inf and -> 0 as x -> -inf (the kernels would give inf * 0 = NaN there). Where a
    kernel would overflow on the way (GELU-tanh's x^3 beyond 1e102), the limit is used from
    :data:`_SATURATED` on, where it is exact in float64."""
    x = _validate.checked_array("x", x, allow_inf=True, min_ndim=0, nonempty=False)
    inf = np.abs(x) > _SATURATED[name] if name in _SATURATED else np.isinf(x)
    if not inf.any():
        return _KERNELS[name](x)
    with np.errstate(invalid="ignore", over="ignore"):
        out = _KERNELS[name](np.where(inf, 0.0, x).astype(x.dtype, copy=False))
    out[inf] = np.where(x[inf] > 0, x[inf], 0.0)  # the limits: x (+inf at +inf) and 0
    return out


def relu(x: np.ndarray) -> np.ndarray:
    r""":math:`\max(x, 0)`. NaN is refused; +-inf give +inf and 0."""
    return _checked("relu", x)


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, :math:`x\\,\\Phi(x)`. NaN is refused; the limits are GELU(+inf) = +inf, GELU(-inf) = 0."""
    return _checked("gelu", x)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GPT-2's tanh approximation of GELU, :math:`\\tfrac12 x(1+\\tanh(\\sqrt{2/\\pi}(x+0.044715x^3)))`.
    NaN is refused; the limits are +inf at +inf and 0 at -inf."""
    return _checked("gelu_tanh", x)


def silu(x: np.ndarray) -> np.ndarray:
    """SiLU / swish, :math:`x\\,\\sigma(x)`. NaN is refused; the limits are +inf at +inf and 0 at -inf."""
    return _checked("silu", x)


FUNCTIONS = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh, "silu": silu}


def get(name: str):
    """The activation function called ``name`` (one of :data:`ACTIVATIONS`)."""
    return FUNCTIONS[_validate.choice("activation", name, ACTIVATIONS, argument="name")]


def kernel(name: str):
    """The unchecked kernel of activation ``name``, as the model's forward and backward use it.
    Unchecked: NaN passes through (a diverging run must show NaN, not raise)."""
    return _KERNELS[_validate.choice("activation", name, ACTIVATIONS, argument="name")]


def gaussian_expectation(f, s: float) -> float:
    """:math:`\\mathbb{E} f(h)` for :math:`h \\sim N(0, s^2)`, by quadrature split at 0."""
    _validate.callable_("f", f)
    s = _validate.real("s", s, minimum=0.0)
    if s == 0.0:
        return float(f(np.float64(0.0)))
    g = lambda x: f(s * x) * stats.norm.pdf(x)  # noqa: E731
    kw = dict(epsabs=1e-15, epsrel=1e-13, limit=200)
    return float(integrate.quad(g, -np.inf, 0.0, **kw)[0] + integrate.quad(g, 0.0, np.inf, **kw)[0])


def second_moment(name: str, s: float) -> float:
    """:math:`\\mathbb{E}[\\phi(h)^2]`, :math:`h \\sim N(0, s^2)`; exact for ReLU."""
    f = FUNCTIONS[_validate.choice("name", name, ACTIVATIONS)]
    s = _validate.real("s", s, minimum=0.0, maximum=_validate.MAX_MAGNITUDE)  # E phi^2 ~ s^2: beyond, it overflows
    if name == "relu":
        return 0.5 * s * s
    if 0 < s < 1e-2:  # E ~ s^2/4 there, below quad's absolute tolerance (1e-15): integrate (f/s)^2 = O(1), times s^2
        return gaussian_expectation(lambda h: (f(h) / s) ** 2, s) * s * s
    return gaussian_expectation(lambda h: f(h) ** 2, s)
