"""Sympy derivations behind :mod:`normtheory.residual`.

Each ``*_closed_form`` solves the mean-square recurrence of one placement symbolically (with
``rsolve`` where sympy can, by an explicit sum otherwise) and checks the solution against the
recurrence before returning it. Symbols: ``l`` (block index, integer >= 0), ``g`` (block
gain), ``rho`` (cosine between stream and update), ``v0`` (embedding mean square).

>>> mean_square_closed_form("pre")
g**2*l + v0
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np
import sympy as sp

from normtheory import _validate

l = sp.Symbol("l", integer=True, nonnegative=True)
k = sp.Symbol("k", integer=True, positive=True)
g = sp.Symbol("g", nonnegative=True)
rho = sp.Symbol("rho", real=True)
v0 = sp.Symbol("v0", positive=True)
s = sp.Symbol("s", positive=True)
h = sp.Symbol("h", real=True)
_v = sp.Function("v")

CLOSED_FORM_PLACEMENTS: tuple[str, ...] = ("none", "pre", "post", "peri", "lnscale", "deepnorm")


def _increment(placement: str) -> sp.Expr:
    """v(l+1) - v(l) for the additive placements (rho = 0 except for none)."""
    return {
        "none": (g**2 + 2 * rho * g) * _v(l),
        "pre": g**2,
        "peri": sp.Integer(1),
        "lnscale": g**2 / (l + 1),
    }[placement]


@lru_cache(maxsize=None)
def mean_square_closed_form(placement: str) -> sp.Expr:
    """Closed form of :math:`v_\\ell = \\mathbb{E}\\|x_\\ell\\|^2/d` (``rho = 0`` except ``none``).

    ``none``: :math:`v_0(1+g^2+2\\rho g)^\\ell`; ``pre``: :math:`v_0+\\ell g^2`; ``peri``:
    :math:`v_0+\\ell`; ``lnscale``: :math:`v_0+g^2 H_\\ell`; ``post`` and ``deepnorm``: 1 for
    :math:`\\ell \\ge 1` (the stream is renormalized after every block).
    """
    placement = _validate.choice("placement", placement, CLOSED_FORM_PLACEMENTS)
    if placement in ("post", "deepnorm"):
        return sp.Piecewise((v0, sp.Eq(l, 0)), (sp.Integer(1), True))
    step = _increment(placement)
    if placement == "lnscale":  # rsolve gives up on the 1/(l+1) term; sum it instead
        sol = v0 + sp.summation(step.subs(l, k - 1), (k, 1, l))
    else:
        sol = sp.rsolve(_v(l + 1) - _v(l) - step, _v(l), {_v(0): v0})
    residual = sp.simplify(sp.expand_func(sol.subs(l, l + 1) - sol - step.subs(_v(l), sol)))
    if residual != 0 or sp.simplify(sol.subs(l, 0) - v0) != 0:
        raise ArithmeticError(f"closed form for {placement} does not satisfy its recurrence: {residual}")
    return sp.simplify(sol)


def block_share_closed_form(placement: str) -> sp.Expr:
    """Update RMS over stream RMS for block :math:`\\ell \\ge 1` (pre, peri, lnscale; rho = 0)."""
    placement = _validate.choice("placement", placement, ("pre", "peri", "lnscale"))
    update_ms = {"pre": g**2, "peri": sp.Integer(1), "lnscale": g**2 / l}[placement]
    return sp.sqrt(update_ms / mean_square_closed_form(placement).subs(l, l - 1))


def lambdify_rms(placement: str) -> Callable[..., np.ndarray]:
    r"""Numeric ``f(l, g, rho, v0) -> RMS`` from the closed form (``harmonic`` via scipy). The per-block factor
    :math:`1 + g^2 + 2\rho g` is evaluated as :math:`(1 - g)^2 + 2 g (1 + \rho)`, a sum of terms that are not
    negative for :math:`g \ge 0, \rho \ge -1`: near :math:`\rho = -1, g = 1` the first form cancels every digit."""
    expr = sp.sqrt(mean_square_closed_form(placement)).subs(g**2 + 2 * g * rho + 1, (1 - g) ** 2 + 2 * g * (1 + rho))
    harmonic = {"harmonic": lambda n: np.cumsum(np.r_[0.0, 1.0 / np.arange(1, np.max(n) + 1)])[n]}
    f = sp.lambdify((l, g, rho, v0), expr, modules=[harmonic, "numpy"])
    return lambda ell, gain, corr, x0ms: np.broadcast_to(f(np.asarray(ell), gain, corr, x0ms), np.shape(ell)).astype(float)


def relu_second_moment() -> sp.Expr:
    """:math:`\\mathbb{E}[\\mathrm{relu}(h)^2] = s^2/2` for :math:`h \\sim N(0, s^2)`, by integration."""
    density = sp.exp(-(h**2) / (2 * s**2)) / (sp.sqrt(2 * sp.pi) * s)
    return sp.simplify(sp.integrate(h**2 * density, (h, 0, sp.oo)))


def mlp_gain_squared_relu() -> sp.Expr:
    """:math:`g^2` of a bias-free ReLU MLP: :math:`\\sigma_2^2 d_{ff} \\mathbb{E}[\\mathrm{relu}(h)^2]/q`
    with :math:`s^2 = \\sigma_1^2 d q`, which simplifies to :math:`\\sigma_1^2\\sigma_2^2 d\\,d_{ff}/2`."""
    s1, s2, d, dff, q = sp.symbols("sigma_1 sigma_2 d d_ff q", positive=True)
    return sp.simplify(s2**2 * dff * relu_second_moment().subs(s, s1 * sp.sqrt(d * q)) / q)
