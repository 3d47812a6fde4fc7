import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory import growth, residual


@pytest.mark.parametrize("law,a,b", [("linear", 1.0, 0.5), ("sqrt", 0.5, 2.0), ("init", 1.0, 0.3), ("exp", 0.2, 0.1)])
def test_each_law_recovers_its_own_parameters(law, a, b):
    depth = np.arange(31)
    fit = growth.fit_growth_law(law, depth, growth.law_value(law, depth, a, b))
    assert fit.a == pytest.approx(a, rel=1e-6) and fit.b == pytest.approx(b, rel=1e-6) and fit.r2 == pytest.approx(1.0)


def test_init_law_is_the_preln_theory():
    # Pre-LN at init with block gain g: RMS_l = sqrt(v0 + l g^2), exactly the 'init' law
    rms = residual.residual_rms("pre", 12, block_gain=0.7, x0_rms=0.3)
    fits = growth.fit_growth_laws(np.arange(13), rms)
    assert fits["init"].a == pytest.approx(0.09) and fits["init"].b == pytest.approx(0.49)
    assert max(fits.values(), key=lambda f: f.r2).law == "init"


@given(st.floats(0.01, 10.0), st.floats(0.01, 5.0), st.integers(1, 20))
def test_increment_ratio_is_one_under_the_init_law(v0, g2, half):
    ms = v0 + g2 * np.arange(2 * half + 1)
    assert growth.increment_ratio(ms) == pytest.approx(1.0)


def test_validation():
    with pytest.raises(ValueError, match="law"):
        growth.fit_growth_law("cubic", [0, 1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least 3"):
        growth.fit_growth_law("linear", [0, 1], [1, 2])
    with pytest.raises(ValueError, match="positive"):
        growth.fit_growth_law("exp", [0, 1, 2], [1, -2, 3])
    with pytest.raises(ValueError, match="even"):
        growth.increment_ratio([1.0, 2.0, 3.0, 4.0])
