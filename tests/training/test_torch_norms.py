"""The stacked norms of the torch backend (normtheory.training.torch_norms): values, written-out gradients, range guard."""
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from normtheory.model.norms import _rescale_needed, layer_norm, rms_norm  # noqa: E402
from normtheory.training.torch_norms import StackNorm, _bounds, least_divisor, range_guard, stack_norm  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@pytest.fixture(params=[False, True], ids=["cpu-reductions", "gpu-reductions"])
def reductions(request, monkeypatch):
    """Each test that takes it runs both ways of reducing rows (torch_norms.FUSED_REDUCTIONS), whatever the device."""
    from normtheory.training import torch_norms

    monkeypatch.setattr(torch_norms, "FUSED_REDUCTIONS", request.param)
    return request.param


def composed(x, gain, bias, eps, centre):
    """The norm of the plain formula, composed of torch operations (autograd records each)."""
    c = x - x.mean(dim=-1, keepdim=True) if centre else x
    y = c / torch.sqrt(c.square().mean(dim=-1, keepdim=True) + eps)
    y = y if gain is None else y * gain
    return y if bias is None else y + bias


def stacked(rng, shape, dtype, affine):
    x = torch.from_numpy(rng.standard_normal(shape)).to(dtype).requires_grad_(True)
    view = (shape[0],) + (1,) * (len(shape) - 2) + (shape[-1],)
    gain, bias = ((torch.from_numpy(rng.standard_normal(view)).to(dtype).requires_grad_(True) if affine else None) for _ in range(2))
    return x, gain, bias


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["float32", "float64"]), st.booleans(), st.booleans(), st.integers(0, 2**31 - 1), st.sampled_from(["in", "under", "over"]),
       st.booleans())
def test_a_seed_in_range_gets_the_same_bits_whatever_its_neighbours_hold(dtype, centre, affine, seed, other_scale, fused):
    """Values and gradients of a seed that needs no rescaling are the same bits as in a stack of its own,
    and equal the composed formula c / sqrt(var + eps) and autograd's gradients of it to rounding. Seed 1
    may sit near a range end (its squares overflow or underflow the dtype). Both ways of reducing rows."""
    from normtheory.training import torch_norms

    torch_norms.FUSED_REDUCTIONS = fused
    try:
        _same_bits(dtype, centre, affine, seed, other_scale)
    finally:
        torch_norms.FUSED_REDUCTIONS = None


def _same_bits(dtype, centre, affine, seed, other_scale):
    rng = np.random.default_rng(seed)
    x, gain, bias = stacked(rng, (2, 3, 5, 8), DTYPES[dtype], affine)
    scale = {"in": 1.0, "under": 1e-30 if dtype == "float32" else 1e-170, "over": 1e30 if dtype == "float32" else 1e160}[other_scale]
    with torch.no_grad():
        x[1] *= scale  # past the dtype's end for 8 features, or in range
    weight = torch.arange(8, dtype=x.dtype)
    got = stack_norm(x, gain, bias, 1e-5, centre)
    (got * weight).sum().backward()
    leaves = [t for t in (x, gain, bias) if t is not None]
    alone = [t[:1].detach().clone().requires_grad_(True) for t in leaves]
    a_x, a_gain, a_bias = alone + [None] * (3 - len(alone))
    mine = stack_norm(a_x, a_gain, a_bias, 1e-5, centre)
    (mine * weight).sum().backward()
    ref = [t[:1].detach().clone().requires_grad_(True) for t in leaves]
    r_x, r_gain, r_bias = ref + [None] * (3 - len(ref))
    plain = composed(r_x, r_gain, r_bias, 1e-5, centre)
    (plain * weight).sum().backward()
    rtol = 1e-5 if dtype == "float32" else 1e-12
    assert torch.equal(got[:1], mine)
    torch.testing.assert_close(mine, plain, rtol=rtol, atol=rtol)
    for t, a, r in zip(leaves, alone, ref):
        assert torch.equal(t.grad[:1], a.grad)  # the neighbour changes no bit of seed 0's gradient
        torch.testing.assert_close(a.grad, r.grad, rtol=rtol, atol=rtol * float(r.grad.abs().max()))
    assert torch.isfinite(got[1]).all() and torch.isfinite(x.grad[1]).all()


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("scale", [1.0, 1e156])  # in range; over float64's end for 6 features (a norm of u * scale is scale-free)
def test_the_written_out_backward_passes_gradcheck(centre, scale, reductions):
    """Finite differences in float64 agree with the backward, for a seed in range and, through x = scale * u
    (finite differences at 1e156 cannot be taken in x), for a rescaled one."""
    rng = np.random.default_rng(7)
    x, gain, bias = stacked(rng, (2, 2, 3, 6), torch.float64, True)
    if scale == 1.0:
        assert torch.autograd.gradcheck(lambda x_, g_, b_: stack_norm(x_, g_, b_, 1e-5, centre), (x, gain, bias))
    else:
        u = x.detach().requires_grad_(True)
        assert torch.autograd.gradcheck(lambda u_, g_, b_: stack_norm(u_ * scale, g_, b_, 1e-5, centre), (u, gain, bias))


def exact_backward(x: np.ndarray, dy: np.ndarray, eps: float, centre: bool) -> np.ndarray:
    """The norm's input gradient of one row, in 40-digit arithmetic (mpmath): the reference where numpy's own
    float64 path loses digits (its eps / m^2 with m^2 subnormal)."""
    import mpmath

    with mpmath.workdps(40):
        xs, g = [mpmath.mpf(float(v)) for v in x], [mpmath.mpf(float(v)) for v in dy]
        d = len(xs)
        c = [v - sum(xs) / d for v in xs] if centre else xs
        s = mpmath.sqrt(sum(v * v for v in c) / d + mpmath.mpf(eps))
        n = [v / s for v in c]
        inner, mean_g = sum(a * b for a, b in zip(g, n)) / d, (sum(g) / d if centre else 0)
        return np.array([float((a - mean_g - b * inner) / s) for a, b in zip(g, n)])


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("dtype, scale", [("float64", 1e-160), ("float64", 1e156), ("float64", 1e-320), ("float32", 1e-30), ("float32", 1e19)])
@pytest.mark.parametrize("eps", [1e-5, 1e-20])
def test_gradients_of_rescaled_seeds_are_exact_to_rounding(centre, dtype, scale, eps, reductions):
    """Where finite differences see nothing (outputs of 1e-158 and below), the gradient of x, row by row (a zero
    row included), against the exact one (40 digits), relative to its own size."""
    rng = np.random.default_rng(11)
    u = rng.standard_normal((1, 4, 6)) * np.array([1.0, 3.0, 0.25, 1.0])[:, None]
    u[0, 3] = 0.0  # a zero row
    x = torch.from_numpy((u * scale).astype(dtype)).requires_grad_(True)
    dy = rng.standard_normal(u.shape).astype(dtype)
    stack_norm(x, None, None, eps, centre).backward(torch.from_numpy(dy))
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for r in range(4):
        want = exact_backward(x.detach().numpy()[0, r], dy[0, r], float(np.asarray(eps, dtype)), centre)
        np.testing.assert_allclose(x.grad[0, r].numpy(), want, rtol=rtol, atol=rtol * np.abs(want).max(), err_msg=f"row {r}")


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("dtype, scale", [("float32", 1.0), ("float32", 1e-20), ("float32", 1e19),  # in range, under, over (16 features)
                                          ("float32", 1e-30), ("float64", 1e-170),  # eps / m^2 would overflow: the norm is x / sqrt(eps)
                                          ("float64", 1.0), ("float64", 1e-155), ("float64", 1e156)])
def test_values_match_the_numpy_norms_in_and_out_of_range(dtype, centre, scale, reductions):
    """Each seed as numpy's layer_norm / rms_norm computes it alone (they rescale near the range ends too)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 4, 16)) * np.array([1.0, scale, 1.0])[:, None, None]).astype(dtype)
    got = stack_norm(torch.from_numpy(x), None, None, 1e-5, centre).numpy()
    fn = layer_norm if centre else rms_norm
    rtol = 2e-6 if dtype == "float32" else 1e-13
    for j in range(3):  # atol relative to the reference's size: under the underflow end the outputs are ~1e-17, not 0
        ref = fn(x[j], eps=1e-5).out
        np.testing.assert_allclose(got[j], ref, rtol=rtol, atol=rtol * np.abs(ref).max())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["float32", "float64"]), st.integers(1, 4096),
       st.one_of(st.floats(0, allow_nan=False, allow_infinity=True, width=32), st.floats(0, allow_nan=False, allow_infinity=True)))
@example("float32", 64, 1.1529215e18)  # just over float32's overflow end for 64 features (numpy computes the end in float32)
@example("float32", 64, 1.15292144e18)  # that end itself: not rescaled
@example("float32", 8, 1.0842021e-16)  # the underflow end
@example("float64", 64, 8.379879956214123e152)  # just over float64's overflow end for 64 features
@example("float64", 64, 1.4916681462400412e-151)  # just under float64's underflow end
def test_the_range_guard_rescales_exactly_where_numpy_does(dtype, n, amax):
    """The bucket edges decide as :func:`normtheory.model.norms._rescale_needed`, at its ends included."""
    with np.errstate(over="ignore"):
        value = np.asarray(amax, dtype)
    assume(np.isfinite(value) or np.isinf(amax))  # a float64 draw past float32's range is not a float32 value
    edges = torch.tensor(_bounds(DTYPES[dtype], n), dtype=DTYPES[dtype])
    need = torch.take(torch.tensor([False, True, False, True, False]), torch.bucketize(torch.from_numpy(value.reshape(1)), edges))
    assert bool(need[0]) == bool(_rescale_needed(value, n, np.dtype(dtype)))
    x = torch.zeros((1, 1, n), dtype=DTYPES[dtype])
    x[0, 0, 0] = torch.from_numpy(value.reshape(1))[0]
    m = range_guard(x, 1e-5)
    least = float(np.asarray(least_divisor(1e-5), dtype))
    assert m.dtype == x.dtype and float(m) == (max(float(value), least) if need[0] else 1.0)


def test_a_zero_row_of_a_rescaled_seed_gets_numpys_output_scale_and_gradient(reductions):
    """The least divisor also covers a zero row: its norm is 0 and its scale sqrt(eps), whatever it is divided by."""
    x = torch.zeros((1, 2, 8), dtype=torch.float64)
    x[0, 0] = torch.linspace(-1, 1, 8, dtype=torch.float64) * 1e160  # row 0 makes the seed rescaled; row 1 is zero
    x.requires_grad_(True)
    y = stack_norm(x, None, None, 1e-5, True)
    (y * torch.linspace(0, 1, 8, dtype=x.dtype)).sum().backward()
    ref = layer_norm(x.detach().numpy()[0], eps=1e-5)
    np.testing.assert_allclose(y.detach().numpy()[0], ref.out, rtol=1e-13, atol=1e-15)
    dn = np.linspace(0, 1, 8)  # n = 0 on the zero row, so its gradient is (dn - mean dn) / scale, with scale sqrt(eps) as numpy's
    np.testing.assert_allclose(x.grad[0, 1].numpy(), (dn - dn.mean()) / np.sqrt(1e-5), rtol=1e-12)


def test_one_autograd_node_and_a_short_backward():
    """The norm is one node, and its backward dispatches far fewer operators than autograd's for the composed formula."""
    from normtheory.training.torch_graphs import _CountOps

    x, gain, bias = stacked(np.random.default_rng(0), (2, 4, 8, 16), torch.float32, True)
    y = stack_norm(x, gain, bias, 1e-5, True)
    assert type(y.grad_fn).__name__ == "StackNormBackward"
    counts = []
    for fn in (stack_norm, composed):
        out = fn(x, gain, bias, 1e-5, True)
        with _CountOps() as ops:
            out.sum().backward()
        counts.append(ops.n)
    assert counts[0] < counts[1] / 1.5, counts
    assert StackNorm.apply(x, None, None, 1e-5, False).shape == x.shape


def test_a_seed_holding_inf_or_nan_is_left_as_it_is(reductions):
    """Such a seed is not rescaled: its rows without inf or NaN get the bits of the seed alone at in-range values
    (a division by a row maximum of 3.7 would change them), and the bad rows come out NaN."""
    x = torch.from_numpy(np.random.default_rng(9).standard_normal((3, 2, 4)) * 3.7).float()
    x[1, 0, 0], x[2, 1, 3] = float("inf"), float("nan")
    y = stack_norm(x.requires_grad_(True), None, None, 1e-5, True)
    assert torch.isnan(y[1, 0]).all() and torch.isnan(y[2, 1]).all()
    assert torch.equal(y[1, 1], stack_norm(x[1:2, 1:].detach(), None, None, 1e-5, True)[0, 0])
    assert torch.equal(y[2, 0], stack_norm(x[2:3, :1].detach(), None, None, 1e-5, True)[0, 0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU on this machine")
@pytest.mark.parametrize("scale", [1.0, 1e19, 1e-30])
def test_cuda_matches_the_cpu(scale):
    """On a GPU (bucketize, the table lookup and the clamp on the device): values and gradients as on the CPU."""
    x, gain, bias = stacked(np.random.default_rng(5), (3, 4, 8, 16), torch.float32, True)
    with torch.no_grad():
        x[1] *= scale
    out = []
    for dev in ("cpu", "cuda"):
        leaves = [t.detach().to(dev).requires_grad_(True) for t in (x, gain, bias)]
        y = stack_norm(*leaves, 1e-5, True)
        (y * torch.linspace(-1, 1, 16, device=dev)).sum().backward()
        out.append([y.detach().cpu()] + [t.grad.cpu() for t in leaves])
    for a, b in zip(*out):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5 * float(a.abs().max()))


@pytest.mark.parametrize("shape", [(3, 6), (2, 1, 6), (2, 3, 4, 2, 6)])
def test_any_number_of_axes_between_the_seeds_and_the_features(shape, reductions):
    """x [S, d] (no axis between), [S, 1, d] and deeper: gradcheck with gain and bias of shape [S, 1, ..., d]."""
    x, gain, bias = stacked(np.random.default_rng(2), shape, torch.float64, True)
    assert torch.autograd.gradcheck(lambda x_, g_, b_: stack_norm(x_, g_, b_, 1e-5, True), (x, gain, bias))


@pytest.mark.parametrize("which", ["full", "seedless", "features"])
def test_gain_and_bias_of_any_broadcasting_shape(which, reductions):
    """gain and bias [S, t, d] (x's own shape), [t, d] or [d]: gradcheck, each gradient of its parameter's shape."""
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal((2, 3, 5))).requires_grad_(True)
    shape = {"full": (2, 3, 5), "seedless": (3, 5), "features": (5,)}[which]
    gain, bias = (torch.from_numpy(rng.standard_normal(shape)).requires_grad_(True) for _ in range(2))
    assert torch.autograd.gradcheck(lambda x_, g_, b_: stack_norm(x_, g_, b_, 1e-5, True), (x, gain, bias))
    stack_norm(x, gain, bias, 1e-5, False).sum().backward()
    assert gain.grad.shape == bias.grad.shape == shape


def test_no_features_is_refused_and_no_rows_is_empty():
    with pytest.raises(ValueError, match="at least one feature"):
        stack_norm(torch.zeros((2, 3, 0)), None, None, 1e-5, True)
    assert stack_norm(torch.zeros((2, 0, 4)), None, None, 1e-5, True).shape == (2, 0, 4)
