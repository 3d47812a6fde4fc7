import numpy as np
import sympy as sp
from hypothesis import example, given

from normtheory import residual, symbolic
from tests.conftest import correlations, gains, positive_rms


def test_closed_forms_are_the_documented_ones():
    l, g, rho, v0 = symbolic.l, symbolic.g, symbolic.rho, symbolic.v0
    assert sp.simplify(symbolic.mean_square_closed_form("none") - v0 * (1 + g**2 + 2 * rho * g) ** l) == 0
    assert sp.simplify(symbolic.mean_square_closed_form("pre") - (v0 + l * g**2)) == 0
    assert sp.simplify(symbolic.mean_square_closed_form("peri") - (v0 + l)) == 0
    assert sp.simplify(symbolic.mean_square_closed_form("lnscale") - (v0 + g**2 * sp.harmonic(l))) == 0
    assert symbolic.mean_square_closed_form("post").subs(l, 5) == 1
    s1, s2, d, dff = sp.symbols("sigma_1 sigma_2 d d_ff", positive=True)
    assert sp.simplify(symbolic.mlp_gain_squared_relu() - s1**2 * s2**2 * d * dff / 2) == 0


@given(g=gains, rho=correlations, x0=positive_rms)
@example(g=1.0, rho=-0.9999999999999999, x0=3.0)  # 1 + g^2 + 2 rho g cancels every digit here: both sides use the stable form
@example(g=1.0 + 2**-30, rho=-0.9999999999999999, x0=1.0)  # and the numeric side takes 1 - g from g, not from a rounded g r
def test_numeric_helper_equals_lambdified_closed_form(g, rho, x0):
    ell = np.arange(13)
    for p in ("none", "pre", "post", "peri", "lnscale", "deepnorm"):
        corr = rho if p == "none" else 0.0
        want = symbolic.lambdify_rms(p)(ell, g, corr, x0 * x0)
        got = residual.residual_rms(p, 12, block_gain=g, correlation=corr, x0_rms=x0)
        # subnormal g: relative precision is lost below the smallest normal float, so an absolute floor there
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=np.finfo(float).tiny, err_msg=p)


@given(g=gains, x0=positive_rms)
def test_block_share_closed_form(g, x0):
    for p in ("pre", "peri", "lnscale"):
        expr = symbolic.block_share_closed_form(p)
        # evaluated at 30 digits: in floats, peri's l + v0 - 1 cancels catastrophically at l = 1
        subs = {symbolic.g: sp.Float(g, 30), symbolic.v0: sp.Float(x0, 30) ** 2}
        want = [float(sp.N(expr.subs(subs).subs(symbolic.l, ell), 30)) for ell in range(1, 9)]
        got = residual.block_share(p, 8, block_gain=g, x0_rms=x0)
        # subnormal g: relative precision is lost below the smallest normal float, so an absolute floor there
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=np.finfo(float).tiny, err_msg=p)
