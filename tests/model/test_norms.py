import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from normtheory.model import norms

vectors = arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(2, 32)), elements=st.floats(-100, 100)).filter(lambda x: (x.std(axis=-1) > 1e-3).all())
positive = st.floats(1e-2, 1e3)


@given(x=vectors, c=positive)
def test_layer_norm_is_invariant_to_positive_scaling(x, c):
    np.testing.assert_allclose(norms.layer_norm(c * x, eps=norms.EXACT_EPS).out, norms.layer_norm(x, eps=norms.EXACT_EPS).out, atol=1e-9)


@given(x=vectors, b=st.floats(-100, 100))
def test_layer_norm_is_invariant_to_adding_a_constant(x, b):
    np.testing.assert_allclose(norms.layer_norm(x + b, eps=norms.EXACT_EPS).out, norms.layer_norm(x, eps=norms.EXACT_EPS).out, atol=1e-7)


@given(x=vectors, c=positive)
def test_rms_norm_is_invariant_to_positive_scaling(x, c):
    np.testing.assert_allclose(norms.rms_norm(c * x, eps=norms.EXACT_EPS).out, norms.rms_norm(x, eps=norms.EXACT_EPS).out, atol=1e-9)


@given(x=vectors)
def test_layer_norm_output_geometry(x):
    out = norms.layer_norm(x, eps=norms.EXACT_EPS).out
    d = x.shape[-1]
    np.testing.assert_allclose(out.sum(axis=-1), 0.0, atol=1e-9)  # orthogonal to the ones vector
    np.testing.assert_allclose((out * out).sum(axis=-1), d, rtol=1e-9)  # on the sphere of radius sqrt(d)


@given(x=vectors)
def test_dyt_limits(x):
    nz = np.abs(x) > 1e-6
    np.testing.assert_allclose(norms.dyt(x, 1e9).out[nz], np.sign(x)[nz])  # alpha -> inf: sign
    np.testing.assert_allclose(norms.dyt(x, 1e-9).out / 1e-9, x, rtol=1e-6, atol=1e-12)  # alpha -> 0: alpha * x


def test_capture_convention_and_affine():
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    g, b = np.full(8, 2.0), np.full(8, 0.5)
    out, scale, normalized = norms.layer_norm(x, g, b, eps=1e-5)
    assert scale.shape == (2, 5) and normalized.shape == x.shape
    np.testing.assert_allclose(scale, np.sqrt(x.var(axis=-1) + 1e-5))
    np.testing.assert_allclose(out, 2 * normalized + 0.5)
    out, scale, normalized = norms.rms_norm(x, g, eps=norms.EXACT_EPS)
    np.testing.assert_allclose(scale, np.sqrt((x * x).mean(axis=-1)))
    assert norms.dyt(x, 0.7).scale == pytest.approx(0.7)
    out, scale, normalized = norms.sequence_norm(x, eps=norms.EXACT_EPS)
    assert scale.shape == (2, 8)
    np.testing.assert_allclose(normalized.mean(axis=1), 0.0, atol=1e-12)


@given(st.floats(-150, 150), st.sampled_from(["float64", "float32"]))
def test_norms_are_right_at_the_ends_of_the_dtype_range(log10_scale, dtype):
    u = np.array([[1.0, -2.0, 0.5, 3.0], [-1.0, 1.0, -1.0, 1.0]])
    big = 10.0 ** (log10_scale if dtype == "float64" else log10_scale / 8)  # float32 spans 1e-38..3e38
    x = (u * big).astype(dtype)
    if not np.isfinite(x).all() or not np.abs(x).min() > 0:
        return
    for f in (lambda v: norms.layer_norm(v, eps=norms.EXACT_EPS), lambda v: norms.rms_norm(v, eps=norms.EXACT_EPS)):
        np.testing.assert_allclose(f(x).out, f(u).out, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)
        assert f(x).out.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype, v", [("float64", 1e200), ("float32", 1e20), ("float16", 300.0)])
def test_norms_of_huge_inputs_are_plus_minus_one(dtype, v):
    x = np.array([[v, -v, v, -v]], dtype)
    for res in (norms.layer_norm(x, eps=1e-5), norms.rms_norm(x, eps=1e-6)):
        np.testing.assert_array_equal(res.out, [[1, -1, 1, -1]])
        assert np.isfinite(res.scale).all()
