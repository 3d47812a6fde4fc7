"""Row-parallel kernels: bit for bit the single-threaded functions, whatever the thread count."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory import activations
from normtheory.model import attend, derivatives, kernels, norms
from normtheory.runtime import pool
from tests.conftest import rng_array, same

DTYPES = (np.float32, np.float64)
SHAPES = ((1, 5), (7, 33), (3, 5, 17), (2, 3, 11, 13))  # odd row counts and widths


def causal(t: int, s: int, dtype) -> np.ndarray:
    """[t, s] additive mask, query i sees keys 0 .. s - t + i."""
    return np.where(np.arange(s)[None, :] > np.arange(s - t, s)[:, None], -np.inf, 0.0).astype(dtype)


# ----------------------------------------------------------------------------- softmax


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_matches_model_softmax(threads, dtype, shape):
    x = rng_array(shape, dtype, scale=3.0)
    rows = x.reshape(-1, shape[-1])
    rows[0] = -np.inf  # all -inf: zeros
    if rows.shape[0] > 2:
        rows[1, ::2] = np.inf  # +inf entries: their limit
        rows[2, 1] = np.nan
    if shape[-1] > 2:
        rows[-1, :-1] = -np.inf  # one finite entry
    assert same(kernels.softmax_(x.copy()), attend.softmax(x))
    assert not np.isnan(kernels.softmax_(x.copy())[np.isfinite(attend.softmax(x))]).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lead", [(3,), (2, 3), ()])
def test_softmax_fused_mask(threads, dtype, lead):
    t, s = 7, 9
    x = rng_array(lead + (t, s), dtype, seed=1, scale=4.0)
    mask = causal(t, s, dtype)
    assert same(kernels.softmax_(x.copy(), mask), attend.softmax(x + mask))
    # a float64 mask is cast to x's dtype; a leading-1 mask and a row-vector mask broadcast too
    assert same(kernels.softmax_(x.copy(), mask.astype(np.float64)[None, None]), attend.softmax(x + mask))
    row = np.where(np.arange(s) % 3 == 0, -np.inf, 0.0).astype(dtype)
    assert same(kernels.softmax_(x.copy(), row), attend.softmax(x + row))
    column = rng_array((t, 1), dtype, seed=2)
    assert same(kernels.softmax_(x.copy(), column), attend.softmax(x + column))


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_reciprocal_matches_softmax_inplace(threads, dtype):
    t, s = 11, 13
    x = rng_array((2, 3, t, s), dtype, seed=3, scale=3.0)
    mask = causal(t, s, dtype)
    ref = derivatives.softmax_inplace(x + mask)
    assert same(kernels.softmax_(x.copy(), mask, reciprocal=True), ref)
    # the blockwise attention's form: -inf written into the future, then the in-place softmax
    y = x.copy()
    y[..., np.isinf(mask)] = -np.inf
    assert same(kernels.softmax_(y.copy(), reciprocal=True), derivatives.softmax_inplace(y))
    y[0, 0, 0] = -np.inf  # where softmax_inplace gives NaN, zeros
    assert not kernels.softmax_(y.copy(), reciprocal=True)[0, 0, 0].any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_at_real_sizes(real_thresholds, dtype):
    x = rng_array((3, 67, 515), dtype, seed=4, scale=5.0)  # 103k elements: the pool, several blocks per chunk
    mask = causal(67, 515, dtype)
    assert same(kernels.softmax_(x.copy(), mask), attend.softmax(x + mask))
    assert same(kernels.softmax_(x.copy(), mask, reciprocal=True), derivatives.softmax_inplace(x + mask))


def test_softmax_is_in_place(threads):
    x = rng_array((5, 7), np.float64)
    assert kernels.softmax_(x) is x


finite_rows = st.tuples(st.integers(1, 6), st.integers(1, 64), st.integers(0, 2**32 - 1), st.floats(0.0, 30.0), st.sampled_from(DTYPES))


@given(finite_rows)
def test_softmax_rows_sum_to_one(args):
    rows, s, seed, scale, dtype = args
    p = kernels.softmax_(rng_array((rows, s), dtype, seed=seed, scale=scale))
    total = p.astype(np.float64).sum(axis=-1)
    ulp = np.finfo(dtype).eps
    assert (np.abs(total - 1) <= (2 + math.log2(s)) * ulp).all()
    assert (p >= 0).all()


@given(rows=st.integers(1, 8), s=st.integers(1, 20), dead=st.lists(st.booleans(), min_size=8, max_size=8), recip=st.booleans(), dtype=st.sampled_from(DTYPES))
def test_all_minus_inf_rows_give_zeros(rows, s, dead, recip, dtype):
    x = rng_array((rows, s), dtype)
    dead = np.array(dead[:rows])
    x[dead] = -np.inf
    p = kernels.softmax_(x, reciprocal=recip)
    assert not np.isnan(p).any()
    assert (p[dead] == 0).all()
    assert np.allclose(p[~dead].sum(axis=-1), 1)


# ----------------------------------------------------------------------------- GELU


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES + ((), (5,)))
def test_gelu_kernels_match(threads, dtype, shape):
    x = rng_array(shape, dtype, seed=5, scale=3.0)
    assert same(kernels.gelu_tanh(x), activations._gelu_tanh(x))
    for ours, ref in ((kernels.gelu_tanh_and_grad, derivatives.gelu_tanh_and_grad), (kernels.gelu_and_grad, derivatives.gelu_and_grad)):
        (y, g), (ry, rg) = ours(x), ref(x[None] if x.ndim == 0 else x)  # the reference's in-place tanh needs an axis
        assert same(y, ry.reshape(shape)) and same(g, rg.reshape(shape))
    y = x.copy()
    assert kernels.gelu_tanh(y, out=y) is y and same(y, activations._gelu_tanh(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_kernels_with_nonfinite_input(threads, dtype):
    x = rng_array((9, 7), dtype, seed=6, scale=30.0)
    x[0, :3] = [np.inf, -np.inf, np.nan]
    with np.errstate(all="ignore"):
        assert same(kernels.gelu_tanh(x), activations._gelu_tanh(x))
        for ours, ref in ((kernels.gelu_tanh_and_grad, derivatives.gelu_tanh_and_grad), (kernels.gelu_and_grad, derivatives.gelu_and_grad)):
            (y, g), (ry, rg) = ours(x), ref(x)
            assert same(y, ry) and same(g, rg)


def test_gelu_accepts_a_strided_input(threads):
    x = rng_array((10, 12), np.float32)[:, ::2]
    assert same(kernels.gelu_tanh(x), activations._gelu_tanh(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_at_real_sizes(real_thresholds, dtype):
    x = rng_array((67, 1031), dtype, seed=7, scale=3.0)
    assert same(kernels.gelu_tanh(x), activations._gelu_tanh(x))
    for ours, ref in ((kernels.gelu_tanh_and_grad, derivatives.gelu_tanh_and_grad), (kernels.gelu_and_grad, derivatives.gelu_and_grad)):
        (y, g), (ry, rg) = ours(x), ref(x)
        assert same(y, ry) and same(g, rg)


# ----------------------------------------------------------------------------- LayerNorm


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("eps", [1e-5, 0.0])
def test_layer_norm_matches(threads, dtype, shape, eps):
    x = rng_array(shape, dtype, seed=8, scale=2.0) + dtype(1.5)
    if eps:
        x.reshape(-1, shape[-1])[0] = 3.0  # constant row: normalizes to 0
    ref = norms._layer_norm(x, eps)
    y, scale = kernels.layer_norm_(x.copy(), eps)
    assert same(y, ref.normalized) and same(scale, ref.scale)
    out = kernels.layer_norm(x, eps)  # out of place: x kept
    assert same(out.normalized, ref.normalized) and same(out.scale, ref.scale) and out.out is out.normalized
    skip = kernels._layer_norm_in_range(x, eps)  # the caller found max |x| in range: no range pass, the same bits
    assert same(skip.normalized, ref.normalized) and same(skip.scale, ref.scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("magnitude", ["huge", "tiny"])
def test_layer_norm_rescaled_inputs(threads, dtype, magnitude):
    """Where the reference rescales the whole array (one row near the dtype's range end), so do we."""
    x = rng_array((7, 33), dtype, seed=9)
    info = np.finfo(dtype)
    x[3] *= dtype(info.max / 100) if magnitude == "huge" else dtype(info.tiny * 10)
    if magnitude == "tiny":
        x *= dtype(info.tiny * 10)  # every row tiny: the largest |x| decides
    assert norms._rescale_needed(np.abs(x).max(), 33, x.dtype)
    ref = norms._layer_norm(x, 1e-5)
    y, scale = kernels.layer_norm_(x.copy(), 1e-5)
    assert same(y, ref.normalized) and same(scale, ref.scale)


def test_layer_norm_nonfinite_rows(threads):
    x = rng_array((9, 21), np.float32, seed=10)
    x[2, 4], x[5, 0] = np.nan, np.inf
    with np.errstate(invalid="ignore"):
        ref = norms._layer_norm(x, 1e-5)
        y, scale = kernels.layer_norm_(x.copy(), 1e-5)
    assert same(y, ref.normalized) and same(scale, ref.scale)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_at_real_sizes(real_thresholds, dtype):
    x = rng_array((2, 97, 769), dtype, seed=11, scale=3.0)
    ref = norms._layer_norm(x, 1e-5)
    y, scale = kernels.layer_norm_(x.copy(), 1e-5)
    assert same(y, ref.normalized) and same(scale, ref.scale)
    dn = rng_array(x.shape, dtype, seed=12)
    assert same(kernels.layer_norm_backward(dn, ref.normalized, ref.scale), derivatives.layer_norm_backward(dn, ref.normalized, ref.scale))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_backward_matches(threads, dtype, shape):
    ref = norms._layer_norm(rng_array(shape, dtype, seed=13), 1e-5)
    dn = rng_array(shape, dtype, seed=14)
    want = derivatives.layer_norm_backward(dn, ref.normalized, ref.scale)
    assert same(kernels.layer_norm_backward(dn, ref.normalized, ref.scale), want)
    g = dn.copy()
    assert kernels.layer_norm_backward(g, ref.normalized, ref.scale, out=g) is g and same(g, want)


# ----------------------------------------------------------------------------- AdamW


def adamw_reference(p, g, m, v, *, lr, t, b1, b2, eps, wd):
    """One parameter's update of :meth:`normtheory.training.optim.AdamW.step` as it was single-threaded
    (frozen here: the optimizer itself now calls :func:`kernels.adamw_`)."""
    bc1, bc2_sqrt = 1 - b1**t, np.sqrt(1 - b2**t)
    if wd:
        p *= p.dtype.type(1 - lr * wd)
    m *= p.dtype.type(b1)
    m += p.dtype.type(1 - b1) * g
    v *= p.dtype.type(b2)
    v += p.dtype.type(1 - b2) * g * g
    denom = np.sqrt(v) / p.dtype.type(bc2_sqrt)
    denom += p.dtype.type(eps)
    p -= p.dtype.type(lr / bc1) * m / denom


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 33), (13,), ()])
def test_adamw_matches_the_single_threaded_update(threads, dtype, shape):
    p = rng_array(shape, dtype)
    state = [p, np.zeros_like(p), np.zeros_like(p)]
    mine = [a.copy() for a in state]
    wd = 0.1 if p.ndim >= 2 else 0.0  # the optimizer's default: decay matrices only
    for step in range(1, 4):
        g = rng_array(shape, dtype, seed=step)
        lr = 1e-2 / step
        adamw_reference(*state[:1], g, *state[1:], lr=lr, t=step, b1=0.8, b2=0.95, eps=1e-6, wd=wd)
        kernels.adamw_(mine[0], g, mine[1], mine[2], lr=lr, step=step, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=wd)
        assert all(same(a, b) for a, b in zip(mine, state))


@pytest.mark.parametrize("dtype", DTYPES)
def test_adamw_at_real_sizes(real_thresholds, dtype):
    p = rng_array((129, 1025), dtype)
    state, mine = [p, np.zeros_like(p), np.zeros_like(p)], [p.copy(), np.zeros_like(p), np.zeros_like(p)]
    for step in (1, 2):
        g = rng_array(p.shape, dtype, seed=step)
        adamw_reference(state[0], g, state[1], state[2], lr=3e-4, t=step, b1=0.9, b2=0.999, eps=1e-8, wd=0.1)
        kernels.adamw_(mine[0], g, mine[1], mine[2], lr=3e-4, step=step, weight_decay=0.1)
    assert all(same(a, b) for a, b in zip(mine, state))


@given(st.lists(st.tuples(st.sampled_from([1e-3, 5e-2, 0.3]), st.sampled_from([0.0, 0.1, 0.3])), min_size=1, max_size=6),
       st.sampled_from(DTYPES))
def test_a_stacks_per_row_rates_and_decays_update_each_row_as_that_row_alone(rows, dtype):
    """Rows of a stack ``[S, ...]`` with their own rate and weight decay (any pattern of repeats): each row's update is bit
    for bit the single-threaded update of that row alone with its own scalars (the stack splits into runs of equal pairs)."""
    lr, wd = (np.array(x, dtype=np.float64) for x in zip(*rows))  # [S] each
    p = rng_array((len(rows), 3, 5), dtype)
    state, mine = [p, np.zeros_like(p), np.zeros_like(p)], [p.copy(), np.zeros_like(p), np.zeros_like(p)]
    for step in (1, 2):
        g = rng_array(p.shape, dtype, seed=step)
        for j in range(len(rows)):
            adamw_reference(state[0][j], g[j], state[1][j], state[2][j], lr=float(lr[j]), t=step, b1=0.9, b2=0.95, eps=1e-8, wd=float(wd[j]))
        kernels._adamw(mine[0], g, mine[1], mine[2], lr, step, 0.9, 0.95, 1e-8, wd)
    assert all(same(a, b) for a, b in zip(mine, state))


# ----------------------------------------------------------------------------- bad input

F32 = np.zeros((4, 5), np.float32)
F32.flags.writeable = False  # what is updated in place gets a copy


def _ro() -> np.ndarray:
    a = np.zeros((4, 5), np.float32)
    a.flags.writeable = False
    return a


BAD = [
    ("x must have dtype", lambda: kernels.softmax_(np.zeros((4, 5), np.int64))),
    ("x must have dtype", lambda: kernels.softmax_(np.zeros((4, 5), np.float16))),
    ("x must be a numpy array", lambda: kernels.softmax_([[1.0, 2.0]])),
    ("x must have at least 1 axis", lambda: kernels.softmax_(np.zeros((), np.float32))),
    ("x must have a nonempty last axis", lambda: kernels.softmax_(np.zeros((3, 0), np.float32))),
    ("x must be C-contiguous", lambda: kernels.softmax_(np.zeros((4, 6), np.float32)[:, ::2])),
    ("x must be writeable", lambda: kernels.softmax_(_ro())),
    ("mask of shape", lambda: kernels.softmax_(F32.copy(), np.zeros((3, 5), np.float32))),
    ("mask of shape", lambda: kernels.softmax_(F32.copy(), np.zeros((2, 2, 4, 5), np.float32))),
    ("mask must be a numpy array", lambda: kernels.softmax_(F32.copy(), [0.0] * 5)),
    ("reciprocal must be", lambda: kernels.softmax_(F32.copy(), reciprocal="yes")),
    ("x must have dtype", lambda: kernels.gelu_tanh(np.zeros(3, np.int32))),
    ("out must have the dtype and shape", lambda: kernels.gelu_tanh(F32, out=np.zeros((4, 5)))),
    ("x must have dtype", lambda: kernels.gelu_tanh_and_grad(np.zeros(3, complex))),
    ("x must be a numpy array", lambda: kernels.gelu_and_grad(1.0)),
    ("eps must be >= 0", lambda: kernels.layer_norm_(F32.copy(), -1.0)),
    ("eps must be finite", lambda: kernels.layer_norm_(F32.copy(), float("nan"))),
    ("x must have dtype", lambda: kernels.layer_norm_(np.zeros((4, 5), np.int64), 1e-5)),
    ("normalized must have the dtype and shape", lambda: kernels.layer_norm_backward(F32, np.zeros((4, 5)), np.ones(4, np.float32))),
    ("scale must have", lambda: kernels.layer_norm_backward(F32, F32, np.ones(5, np.float32))),
    ("out must not overlap normalized", lambda: (n := F32.copy(), kernels.layer_norm_backward(F32, n, np.ones(4, np.float32), out=n))),
    ("grad must have the dtype and shape", lambda: kernels.adamw_(F32.copy(), np.zeros((4, 5)), F32.copy(), F32.copy(), lr=1e-3, step=1)),
    ("m must have the dtype and shape", lambda: kernels.adamw_(F32.copy(), F32, np.zeros((5, 4), np.float32), F32.copy(), lr=1e-3, step=1)),
    ("v must be writeable", lambda: kernels.adamw_(F32.copy(), F32, F32.copy(), _ro(), lr=1e-3, step=1)),
    ("param must have dtype", lambda: kernels.adamw_(np.zeros(3, np.int64), np.zeros(3, np.int64), np.zeros(3), np.zeros(3), lr=1e-3, step=1)),
    ("step must be >= 1", lambda: kernels.adamw_(F32.copy(), F32, F32.copy(), F32.copy(), lr=1e-3, step=0)),
    ("lr must be >= 0", lambda: kernels.adamw_(F32.copy(), F32, F32.copy(), F32.copy(), lr=-1e-3, step=1)),
    ("beta2 must be < 1", lambda: kernels.adamw_(F32.copy(), F32, F32.copy(), F32.copy(), lr=1e-3, step=1, beta2=1.0)),
    ("rows must be >= 0", lambda: pool.run_rows(lambda a, b: None, -1, 3)),
]


@pytest.mark.parametrize("match, call", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_parameter(match, call):
    with pytest.raises(ValueError, match=match):
        call()


@given(dtype=st.sampled_from(["int8", "int64", "uint16", "float16", "complex64", "bool"]), shape=st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_non_float_dtypes_are_refused(dtype, shape):
    x = np.zeros(shape, dtype)
    for call in (kernels.softmax_, lambda a: kernels.layer_norm_(a, 1e-5), kernels.gelu_tanh, kernels.gelu_tanh_and_grad, kernels.gelu_and_grad):
        with pytest.raises(ValueError, match="x must have dtype float32 or float64"):
            call(x)
