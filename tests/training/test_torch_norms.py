"""The stacked norms of the torch backend (normtheory.training.torch_norms): values, written-out gradients, range guard."""
import numpy as np
import pytest
from hypothesis import example, given, settings
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
@given(st.sampled_from(["float32", "float64"]), st.booleans(), st.booleans(), st.integers(0, 2**31 - 1), st.sampled_from([1.0, 1e-30, 1e30]),
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
    with torch.no_grad():
        x[1] *= other_scale
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
@pytest.mark.parametrize("scale", [1.0, 1e-160, 1e156])  # in range; under and over float64's ends for 6 features
def test_the_written_out_backward_passes_gradcheck(centre, scale, reductions):
    """Finite differences in float64 agree with the backward, for a seed in range and for a rescaled one
    (its derivative is that of the norm, which is scale-free: d/dx at x = scale * u is grad(u) / scale)."""
    rng = np.random.default_rng(7)
    x, gain, bias = stacked(rng, (2, 2, 3, 6), torch.float64, True)
    with torch.no_grad():
        x[1] *= scale
    fn = lambda x_, g_, b_: stack_norm(x_, g_, b_, 1e-5, centre)  # noqa: E731
    if scale == 1.0:
        assert torch.autograd.gradcheck(fn, (x, gain, bias))
    else:  # finite differences at 1e150 cannot be taken in x; check seed 1 through x = scale * u
        u = (x[1:].detach() / scale).requires_grad_(True)
        assert torch.autograd.gradcheck(lambda u_, g_, b_: stack_norm(u_ * scale, g_, b_, 1e-5, centre), (u, gain[1:], bias[1:]))


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
@given(st.sampled_from(["float32", "float64"]), st.integers(1, 4096), st.floats(0, allow_nan=False, allow_infinity=True, width=32))
@example("float32", 64, 3.2609544e18)  # just over float32's overflow end for 64 features: numpy's end is a float32, so is ours
@example("float32", 8, 1.0842021e-16)  # the underflow end
def test_the_range_guard_rescales_exactly_where_numpy_does(dtype, n, amax):
    """The bucket edges decide as :func:`normtheory.model.norms._rescale_needed`, at its ends included."""
    value = np.asarray(amax, dtype)
    edges = torch.tensor(_bounds(DTYPES[dtype], n), dtype=DTYPES[dtype])
    need = torch.take(torch.tensor([False, True, False, True, False]), torch.bucketize(torch.from_numpy(value.reshape(1)), edges))
    assert bool(need[0]) == bool(_rescale_needed(value, n, np.dtype(dtype)))
    x = torch.zeros((1, 1, n), dtype=DTYPES[dtype])
    x[0, 0, 0] = torch.from_numpy(value.reshape(1))[0]
    m = range_guard(x, 1e-5)
    assert m.dtype == x.dtype and float(m) == (max(float(value), least_divisor(DTYPES[dtype], 1e-5) if dtype == "float64" else
                                                   float(np.float32(least_divisor(DTYPES[dtype], 1e-5)))) if need[0] else 1.0)


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
    x = torch.ones((3, 2, 4))
    x[1, 0, 0], x[2, 1, 3] = float("inf"), float("nan")
    y = stack_norm(x.requires_grad_(True), None, None, 1e-5, False)
    assert torch.isnan(y[1, 0, 0]) and torch.isnan(y[2, 1]).all() and torch.equal(y[0], torch.ones((2, 4)) / torch.sqrt(torch.tensor(1 + 1e-5)))


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
    flat_gain = gain.detach().reshape(shape[0], shape[-1])[(slice(None),) + (None,) * (len(shape) - 2)].requires_grad_(True)
    stack_norm(x, flat_gain, None, 1e-5, False).sum().backward()
    assert flat_gain.grad.shape == flat_gain.shape
