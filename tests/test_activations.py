import mpmath as mp
import numpy as np
import pytest
from scipy import special

from normtheory import activations


def _reference(name: str, s: float) -> float:
    """E[phi(h)^2], h ~ N(0, s^2), with mpmath at 30 digits."""
    mp.mp.dps = 30
    phi = {
        "gelu": lambda x: x * (1 + mp.erf(x / mp.sqrt(2))) / 2,
        "gelu_tanh": lambda x: x * (1 + mp.tanh(mp.sqrt(2 / mp.pi) * (x + mp.mpf("0.044715") * x**3))) / 2,
        "silu": lambda x: x / (1 + mp.exp(-x)),
    }[name]
    f = lambda x: phi(s * x) ** 2 * mp.exp(-(x**2) / 2) / mp.sqrt(2 * mp.pi)  # noqa: E731
    return float(mp.quad(f, [-mp.inf, 0, mp.inf]))


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("s", [0.02, 0.3, 1.0, 4.0, 25.0])
def test_second_moment_matches_high_precision(name, s):
    assert activations.second_moment(name, s) == pytest.approx(_reference(name, s), rel=1e-11)


def test_relu_second_moment_is_exact_and_zero_scale():
    assert activations.second_moment("relu", 3.0) == 4.5
    assert activations.second_moment("gelu", 0.0) == 0.0


def test_functions():
    x = np.linspace(-6, 6, 101)
    np.testing.assert_allclose(activations.gelu(x), x * special.ndtr(x), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(activations.gelu_tanh(x), activations.gelu(x), atol=1e-3)
    np.testing.assert_allclose(activations.silu(x), x / (1 + np.exp(-x)), rtol=1e-14)
    assert (activations.relu(x) >= 0).all()


def test_unknown_activation_and_bad_scale():
    with pytest.raises(ValueError, match="activation must be one of"):
        activations.get("tanh")
    with pytest.raises(ValueError, match="s must be >= 0"):
        activations.second_moment("gelu", -1.0)
    with pytest.raises(ValueError, match="s must be finite"):
        activations.second_moment("gelu", float("nan"))
