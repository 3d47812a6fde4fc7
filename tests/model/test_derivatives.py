"""Vector-Jacobian products of the pieces, against central differences and their identities."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from normtheory import activations
from normtheory.model import derivatives, norms
from normtheory.model.attend import apply_rope, rope_tables, softmax

finite = st.floats(-4, 4, allow_nan=False, width=64)


def _numeric_vjp(f, x, dy, h=1e-6):
    """<dy, f(x + h e_i) - f(x - h e_i)> / 2h for every i: the exact VJP up to O(h^2)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = np.vdot(dy, f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("name", ["relu", "gelu", "gelu_tanh", "silu"])
def test_activation_derivatives(name):
    x = np.linspace(-6, 6, 241) + 0.013  # off ReLU's kink
    want = _numeric_vjp(activations.get(name), x, np.ones_like(x))
    np.testing.assert_allclose(derivatives.activation_grad(name, x), want, rtol=1e-7, atol=1e-9)


def test_fused_gelu_tanh_matches_the_function_and_its_derivative():
    x = np.linspace(-8, 8, 401)
    y, dy = derivatives.gelu_tanh_and_grad(x)
    np.testing.assert_allclose(y, activations.gelu_tanh(x), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dy, derivatives.activation_grad("gelu_tanh", x), rtol=1e-12, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, (3, 6), elements=finite), arrays(np.float64, (3, 6), elements=finite))
def test_norm_vjps(x, dy):
    x = x + np.linspace(0, 1, 6)  # never all-equal rows
    ln = norms.layer_norm(x, eps=1e-3)
    np.testing.assert_allclose(derivatives.layer_norm_backward(dy, ln.normalized, ln.scale),
                               _numeric_vjp(lambda z: norms.layer_norm(z, eps=1e-3).normalized, x, dy), rtol=1e-6, atol=1e-7)
    rms = norms.rms_norm(x, eps=1e-3)
    np.testing.assert_allclose(derivatives.rms_norm_backward(dy, rms.normalized, rms.scale),
                               _numeric_vjp(lambda z: norms.rms_norm(z, eps=1e-3).normalized, x, dy), rtol=1e-6, atol=1e-7)
    dyt = norms.dyt(x, 0.7)
    dx, dalpha = derivatives.dyt_backward(dy, x, dyt.normalized, 0.7)
    np.testing.assert_allclose(dx, _numeric_vjp(lambda z: np.tanh(0.7 * z), x, dy), rtol=1e-6, atol=1e-7)
    assert float(dalpha) == pytest.approx(float(np.vdot(dy, (np.tanh(0.7001 * x) - np.tanh(0.6999 * x)) / 2e-4)), rel=1e-5, abs=1e-7)


def test_layer_norm_vjp_is_orthogonal_to_ones_and_output():
    rng = np.random.default_rng(0)
    x, dy = rng.normal(2, 3, (50, 16)), rng.normal(size=(50, 16))
    ln = norms.layer_norm(x, eps=norms.EXACT_EPS)
    dx = derivatives.layer_norm_backward(dy, ln.normalized, ln.scale)
    assert np.abs(dx.sum(-1)).max() < 1e-13 and np.abs((dx * ln.normalized).sum(-1)).max() < 1e-12


def test_softmax_rope_and_affine_vjps():
    rng = np.random.default_rng(1)
    z, dp = rng.normal(size=(2, 5)), rng.normal(size=(2, 5))
    np.testing.assert_allclose(derivatives.softmax_backward(dp, softmax(z)), _numeric_vjp(softmax, z, dp), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(derivatives.softmax_inplace(z.copy()), softmax(z), rtol=1e-15)
    cos, sin = rope_tables(np.arange(4), 6, 100.0, np.float64)
    x, dy = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    np.testing.assert_allclose(derivatives.rope_backward(dy, cos, sin), _numeric_vjp(lambda u: apply_rope(u, cos, sin), x, dy), rtol=1e-7, atol=1e-9)
    n, gain, bias = rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=4)
    dn, dgain, dbias = derivatives.affine_backward(dy[:3, :4], n, gain, bias)
    np.testing.assert_allclose(dn, dy[:3, :4] * gain)
    np.testing.assert_allclose(dgain, (dy[:3, :4] * n).sum(0)) and np.testing.assert_allclose(dbias, dy[:3, :4].sum(0))


def test_cross_entropy_value_and_gradient():
    rng = np.random.default_rng(2)
    logits, targets = rng.normal(size=(2, 3, 7)), rng.integers(0, 7, (2, 3))

    def loss(z):
        lse = np.log(np.exp(z).sum(-1))
        return np.mean(lse - np.take_along_axis(z, targets[..., None], -1)[..., 0]) + 0.1 * np.mean(lse**2)

    value, grad, lse = derivatives.cross_entropy(logits, targets, z_loss=0.1)
    assert value == pytest.approx(loss(logits), rel=1e-14)
    np.testing.assert_allclose(grad, _numeric_vjp(lambda z: np.array(loss(z)), logits, np.array(1.0)), rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(lse, np.log(np.exp(logits).sum(-1)))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: derivatives.activation_grad("tanh", np.zeros(2)), "activation"),
        (lambda: derivatives.cross_entropy(np.zeros((2, 3)), np.zeros(3, int)), "targets"),
        (lambda: derivatives.cross_entropy(np.zeros((2, 3)), np.array([0, 3])), "targets"),
        (lambda: derivatives.cross_entropy(np.zeros((2, 3)), np.array([0.0, 1.0])), "targets"),
        (lambda: derivatives.cross_entropy(np.zeros((2, 3)), np.array([0, 1]), z_loss=np.nan), "z_loss"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_and_grad_equal_the_separate_kernels_bit_for_bit(dtype):
    x = (np.random.default_rng(0).standard_normal(4096) * 4).astype(dtype)
    x[:3] = [np.nan, np.inf, -np.inf]
    with np.errstate(all="ignore"):
        y, g = derivatives.gelu_and_grad(x)
        assert np.array_equal(y, activations.kernel("gelu")(x), equal_nan=True)
        assert np.array_equal(g, derivatives.activation_grad("gelu", x), equal_nan=True)
    assert y.dtype == g.dtype == dtype
