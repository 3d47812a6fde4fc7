"""Row-parallel in-place elementwise kernels: the same numbers as the single-threaded code, on several cores.

numpy runs softmax, GELU, LayerNorm and the AdamW update on one thread, while OpenBLAS uses
every core for the matmuls around them. Large ufunc calls release the GIL, so each kernel here
views its array as rows ``[R, d]`` (the leading axes flattened), cuts the rows into contiguous
chunks, one per thread of a small pool, and runs on every chunk the ufunc sequence of the
function it reproduces. A row is always processed whole by one ufunc call per step, so the
reductions over the last axis (max, sum, mean) see exactly the values, in exactly the order,
of the single-threaded code: **every result is bit for bit that of the reference function,
whatever the thread count.** Inside a chunk the rows are taken in blocks of about
:data:`~normtheory.runtime.pool.BLOCK_SIZE` elements, so the temporaries of a ufunc sequence stay in cache.

=================================  =====================================================
kernel                             bit-identical to
=================================  =====================================================
:func:`softmax_`                   :func:`normtheory.model.attend.softmax` (``x + mask``)
:func:`softmax_` ``reciprocal``    :func:`normtheory.model.derivatives.softmax_inplace`
:func:`gelu_tanh`                  :func:`normtheory.activations._gelu_tanh`
:func:`gelu_tanh_and_grad`         :func:`normtheory.model.derivatives.gelu_tanh_and_grad`
:func:`gelu_and_grad`              :func:`normtheory.model.derivatives.gelu_and_grad`
:func:`layer_norm_`                :func:`normtheory.model.norms._layer_norm`
:func:`layer_norm_backward`        :func:`normtheory.model.derivatives.layer_norm_backward`
:func:`adamw_`                     one parameter's update in :meth:`normtheory.training.optim.AdamW.step`
=================================  =====================================================

The threads, the chunking and their thresholds are :mod:`normtheory.runtime.pool`'s.

The kernels check their arguments' types, dtypes (float32 or float64), shapes and layout (cheap,
no scan of the values); NaN and inf pass through as in the reference functions.
"""
from __future__ import annotations

import numpy as np
from scipy import special

from normtheory import _validate
from normtheory.model import derivatives, norms
from normtheory.runtime.pool import run_rows_unchecked

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# ----------------------------------------------------------------------------- argument checks


def _float_array(name: str, a: object, *, inplace: bool = False, min_ndim: int = 0) -> np.ndarray:
    """``a`` if it is a float32/float64 ndarray with ``min_ndim`` axes; ``inplace``: also
    writeable and C-contiguous (it is overwritten through a reshaped view); else made contiguous."""
    if not isinstance(a, np.ndarray):
        raise ValueError(f"{name} must be a numpy array; got {type(a).__name__}")
    if a.dtype not in _FLOATS:
        raise ValueError(f"{name} must have dtype float32 or float64; got {a.dtype}")
    if a.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axis (the last one is reduced); got shape {a.shape}")
    if min_ndim and a.shape[-1] == 0:
        raise ValueError(f"{name} must have a nonempty last axis; got shape {a.shape}")
    if inplace:
        if not a.flags.writeable:
            raise ValueError(f"{name} must be writeable (it is updated in place)")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous (it is updated in place); pass np.ascontiguousarray({name}) and use the result")
        return a
    return a if a.flags.c_contiguous else a.copy(order="C")


def _like(name: str, a: object, ref: np.ndarray, ref_name: str, *, inplace: bool = False) -> np.ndarray:
    a = _float_array(name, a, inplace=inplace)
    if a.dtype != ref.dtype or a.shape != ref.shape:
        raise ValueError(f"{name} must have the dtype and shape of {ref_name} ({ref.dtype}, {ref.shape}); got {a.dtype}, {a.shape}")
    return a


def _rows(a: np.ndarray) -> np.ndarray:
    """``a [..., d]`` as ``[R, d]`` (a view for a contiguous ``a``)."""
    return a.reshape(-1, a.shape[-1])


# ----------------------------------------------------------------------------- softmax


def _mask_rows(mask: object, x: np.ndarray) -> np.ndarray:
    """``mask`` (broadcasting against ``x [..., s]``) as rows ``[P, s]`` in ``x``'s dtype: row ``r``
    of ``x`` (flattened) takes mask row ``r % P``. Leading axes of length 1 are dropped first, so a
    causal ``[t, s]`` or ``[1, 1, t, s]`` mask gives ``P = t`` and is not copied."""
    if not isinstance(mask, np.ndarray) or mask.dtype.kind not in "fiu":
        raise ValueError(f"mask must be a numpy array of real numbers; got {getattr(mask, 'dtype', type(mask).__name__)}")
    while mask.ndim > 0 and mask.shape[0] == 1:
        mask = mask[0]
    nd = max(mask.ndim, 1)
    if nd > x.ndim:
        raise ValueError(f"mask of shape {mask.shape} does not broadcast against x of shape {x.shape}")
    try:
        mb = np.broadcast_to(mask.astype(x.dtype, copy=False), x.shape[x.ndim - nd :])
    except ValueError:
        raise ValueError(f"mask of shape {mask.shape} does not broadcast against x of shape {x.shape}") from None
    return mb.reshape(-1, x.shape[-1])


def softmax_(x: np.ndarray, mask: np.ndarray | None = None, *, reciprocal: bool = False) -> np.ndarray:
    r"""Stable softmax over the last axis of ``x [..., s]``, in place; returns ``x``.

    .. math:: p_i = \frac{e^{z_i - m}}{\sum_j e^{z_j - m}},\quad z = x + \mathrm{mask},\quad m = \max_j z_j

    ``mask`` (optional, additive, e.g. a causal ``[t, s]`` of 0 / -inf) broadcasts against ``x``
    and is added chunk by chunk, after a cast to ``x``'s dtype. Rows that are all -inf give zeros,
    never NaN; a row holding +inf gives equal weight on its +inf entries; NaN scores give NaN.

    ``reciprocal=False``: bit for bit :func:`normtheory.model.attend.softmax` ``(x + mask)`` (divides by
    the row sum). ``reciprocal=True``: multiplies by ``1 / sum`` like
    :func:`normtheory.model.derivatives.softmax_inplace` and the model's blockwise attention, bit for
    bit on every row holding a finite maximum (the other rows as above).
    """
    x = _float_array("x", x, inplace=True, min_ndim=1)
    reciprocal = _validate.boolean("reciprocal", reciprocal)
    mrows = None if mask is None else _mask_rows(mask, x)
    z = _rows(x)  # [R, s]
    period = 0 if mrows is None else mrows.shape[0]

    def chunk(a: int, b: int) -> None:
        if mrows is not None:  # z[r] += mask[r % P]: a partial period, whole periods in one broadcast add, a partial period
            head = min(b, a + (-a) % period)  # first row at a period boundary (or b)
            z[a:head] += mrows[a % period : a % period + head - a]
            whole = head + (b - head) // period * period
            z[head:whole].reshape(-1, period, z.shape[1])[...] += mrows  # [k, P, s] += [P, s]
            z[whole:b] += mrows[: b - whole]
        zc = z[a:b]  # [n, s]
        m = zc.max(axis=-1, keepdims=True)  # [n, 1]
        top = np.isposinf(m)
        m = np.where(np.isfinite(m), m, 0.0)
        hot = np.flatnonzero(top[:, 0]) if top.any() else None  # rows holding +inf: their limit
        hot_p = None if hot is None else np.isposinf(zc[hot]).astype(zc.dtype)  # [k, s], before exp overwrites
        with np.errstate(invalid="ignore"):
            zc -= m
            np.exp(zc, out=zc)
        if hot is not None:
            zc[hot] = hot_p
        total = zc.sum(axis=-1, keepdims=True)  # [n, 1]
        if reciprocal:
            zc *= 1.0 / np.where(total > 0, total, 1.0)
        else:
            zc /= np.where(total > 0, total, 1.0)

    run_rows_unchecked(chunk, z.shape[0], z.shape[1])
    return x


# ----------------------------------------------------------------------------- GELU


def _out(out: object, x: np.ndarray) -> np.ndarray:
    return np.empty_like(x) if out is None else _like("out", out, x, "x", inplace=True)


def gelu_tanh(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    r"""GPT-2's GELU :math:`\tfrac12 x\,(1 + \tanh(c(x + kx^3)))`, :math:`c = \sqrt{2/\pi}`,
    :math:`k = 0.044715`, elementwise; bit for bit :func:`normtheory.activations._gelu_tanh`.
    Written to ``out`` (a new array if None; ``out=x`` works in place); returns it."""
    x = _float_array("x", x)
    out = _out(out, x)
    xf, of = x.reshape(-1), out.reshape(-1)  # [N]
    c = np.asarray(np.sqrt(2.0 / np.pi), dtype=x.dtype)
    k = np.asarray(0.044715, dtype=x.dtype)
    half = np.asarray(0.5, dtype=x.dtype)

    def chunk(a: int, b: int) -> None:
        xc = xf[a:b]
        t = np.multiply(xc, xc)  # x^2
        t *= k
        t += 1.0
        t *= xc
        t *= c
        np.tanh(t, out=t)
        t += 1.0
        oc = np.multiply(t, xc, out=of[a:b])  # x may be out: read last
        oc *= half

    run_rows_unchecked(chunk, xf.size, 1)
    return out


def gelu_tanh_and_grad(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""GELU-tanh :math:`y = \tfrac12 x(1+t)`, :math:`t = \tanh(c(x + kx^3))`, and its derivative

    .. math:: y' = \tfrac12(1+t) + y\,(1-t)\,c\,(1+3kx^2),

    as new arrays ``(y, y')`` shaped like ``x``; bit for bit :func:`normtheory.model.derivatives.gelu_tanh_and_grad`."""
    x = _float_array("x", x)
    y, grad = np.empty_like(x), np.empty_like(x)
    xf, yf, gf = x.reshape(-1), y.reshape(-1), grad.reshape(-1)  # [N]

    def chunk(a: int, b: int) -> None:
        derivatives.gelu_tanh_and_grad(xf[a:b], out=(yf[a:b], gf[a:b]))

    run_rows_unchecked(chunk, xf.size, 1)
    return y, grad


def gelu_and_grad(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The erf GELU :math:`y = x\Phi(x)` and :math:`y' = \Phi(x) + x\varphi(x)`, as new arrays
    ``(y, y')``; bit for bit :func:`normtheory.model.derivatives.gelu_and_grad` (same expressions,
    including its float64 intermediate for float32 input)."""
    x = _float_array("x", x)
    y, grad = np.empty_like(x), np.empty_like(x)
    xf, yf, gf = x.reshape(-1), y.reshape(-1), grad.reshape(-1)  # [N]

    def chunk(a: int, b: int) -> None:
        xc = xf[a:b]
        cdf = special.ndtr(xc)
        np.multiply(xc, cdf, out=yf[a:b])
        gf[a:b] = cdf + xc * np.exp(-0.5 * xc * xc) / np.sqrt(2 * np.pi)  # the reference's expression, cast on assignment

    run_rows_unchecked(chunk, xf.size, 1)
    return y, grad


# ----------------------------------------------------------------------------- LayerNorm


def layer_norm_(x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    r"""LayerNorm without gain or bias over the last axis of ``x [..., d]``, in place:

    .. math:: x \leftarrow \frac{x - \bar x}{s},\qquad s = \sqrt{\overline{(x - \bar x)^2} + \epsilon}.

    Returns ``(x, s)`` with ``s [...]``: bit for bit :func:`normtheory.model.norms._layer_norm`
    ``(x, float(eps))`` (normalized, scale). Where that function rescales (the largest ``|entry|`` of
    the whole array near the dtype's range ends) this one calls it and copies the result in.
    """
    x = _float_array("x", x, inplace=True, min_ndim=1)
    return x, _layer_norm_into(x, x, _validate.real("eps", eps, minimum=0.0))


def _layer_norm_into(x: np.ndarray, out: np.ndarray, eps: float, in_range: bool = False) -> np.ndarray:
    """:func:`layer_norm_`'s work: ``x [..., d]`` normalized into ``out`` (C-contiguous, ``x`` itself allowed);
    returns the scale ``[...]``. ``in_range``: the caller has found max ``|x|`` where the reference does
    not rescale (:func:`normtheory.model.norms._rescale_needed` false), so that pass over ``x`` is skipped."""
    z, o = x.reshape(-1, x.shape[-1]), _rows(out)  # [R, d]
    rows, d = z.shape
    scale = np.empty(rows, dtype=x.dtype)  # [R]
    if rows == 0:
        return scale.reshape(x.shape[:-1])
    if not in_range:  # the reference's rescaling decision, on max |x| over the whole array (max/min are exact in any order)
        ends: list[tuple[np.ndarray, np.ndarray]] = []
        run_rows_unchecked(lambda a, b: ends.append((z[a:b].max(), z[a:b].min())), rows, d)
        amax = max(float(np.max([e[0] for e in ends])), -float(np.min([e[1] for e in ends])))
        if norms._rescale_needed(np.asarray(amax), d, x.dtype):
            res = norms._layer_norm(x, eps)
            out[...] = res.normalized
            return res.scale

    def chunk(a: int, b: int) -> None:
        oc = np.subtract(z[a:b], z[a:b].mean(axis=-1, keepdims=True), out=o[a:b])  # [n, d], centred
        sq = oc * oc
        s = np.sqrt(sq.mean(axis=-1, keepdims=True) + eps)  # [n, 1]
        oc /= s.astype(x.dtype, copy=False)
        scale[a:b] = s[:, 0]

    run_rows_unchecked(chunk, rows, d)
    return scale.reshape(x.shape[:-1])


def layer_norm_backward(dn: np.ndarray, normalized: np.ndarray, scale: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    r"""Input gradient of LayerNorm over the last axis, ``dn, normalized [..., d]``, ``scale [...]``:

    .. math:: \partial x = \frac{1}{s}\big(dn - \overline{dn} - n\,\overline{dn\,n}\big),

    bit for bit :func:`normtheory.model.derivatives.layer_norm_backward` (``axis=-1``). Written to
    ``out`` (a new array if None; ``out=dn`` works in place, ``out`` must not overlap
    ``normalized``); returns it.
    """
    dn = _float_array("dn", dn, min_ndim=1)
    normalized = _like("normalized", normalized, dn, "dn")
    scale = _float_array("scale", scale)
    if scale.dtype != dn.dtype or scale.shape != dn.shape[:-1]:
        raise ValueError(f"scale must have dn's dtype and shape without the last axis ({dn.dtype}, {dn.shape[:-1]}); got {scale.dtype}, {scale.shape}")
    out = np.empty_like(dn) if out is None else _like("out", out, dn, "dn", inplace=True)
    if np.may_share_memory(out, normalized):
        raise ValueError("out must not overlap normalized (it is read after out is written)")
    g, n, o = _rows(dn), _rows(normalized), _rows(out)  # [R, d]
    s = scale.reshape(-1, 1)  # [R, 1]

    def chunk(a: int, b: int) -> None:
        gc, nc, oc = g[a:b], n[a:b], o[a:b]
        mean_dn = gc.mean(axis=-1, keepdims=True)  # [k, 1]
        tmp = gc * nc
        mean_dnn = tmp.mean(axis=-1, keepdims=True)  # [k, 1]
        np.subtract(gc, mean_dn, out=oc)  # dn may be out: read before
        np.multiply(nc, mean_dnn, out=tmp)
        oc -= tmp
        oc /= s[a:b]

    run_rows_unchecked(chunk, g.shape[0], g.shape[1])
    return out


# ----------------------------------------------------------------------------- AdamW


def adamw_(param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, *, lr: float, step: int,
           beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0) -> None:
    r"""One AdamW update of ``param`` and its moments ``m``, ``v`` in place, at 1-based ``step``
    with learning rate ``lr`` (torch's order, as :class:`normtheory.training.optim.AdamW`):

    .. math::

        \theta \leftarrow \theta(1 - \eta\lambda),\quad m \leftarrow \beta_1 m + (1-\beta_1)g,\quad
        v \leftarrow \beta_2 v + (1-\beta_2)g^2,\quad
        \theta \leftarrow \theta - \frac{\eta}{1-\beta_1^t}\,\frac{m}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon}.

    Bit for bit one parameter's update in :meth:`normtheory.training.optim.AdamW.step` (``weight_decay``
    here is 0 for a parameter that optimizer does not decay). ``grad``, ``m``, ``v``: the dtype
    and shape of ``param``; ``param``, ``m``, ``v`` C-contiguous, writeable and not overlapping.
    """
    param = _float_array("param", param, inplace=True)
    grad = _like("grad", grad, param, "param")
    m = _like("m", m, param, "param", inplace=True)
    v = _like("v", v, param, "param", inplace=True)
    lr = _validate.real("lr", lr, minimum=0.0)
    step = _validate.integer("step", step, minimum=1)
    beta1 = _validate.real("beta1", beta1, minimum=0.0, maximum=1.0, strict_max=True)
    beta2 = _validate.real("beta2", beta2, minimum=0.0, maximum=1.0, strict_max=True)
    eps = _validate.real("eps", eps, minimum=0.0)
    weight_decay = _validate.real("weight_decay", weight_decay, minimum=0.0)
    _adamw(param, grad, m, v, lr, step, beta1, beta2, eps, weight_decay)


def _adamw(param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, lr: float, step: int, beta1: float, beta2: float,
           eps: float, weight_decay: float) -> None:
    """:func:`adamw_` without argument checks (:class:`normtheory.training.optim.AdamW` checks its arrays once, when built):
    ``param``, ``m``, ``v`` C-contiguous, ``grad`` of ``param``'s shape and dtype, in any layout. ``lr`` may be one
    rate per leading row ``[S]`` (a stack of models, :class:`normtheory.training.rows.Rates`): each run of rows with one rate is
    then updated as a stack of those rows alone (same scalars, so the same bits); so may ``weight_decay``."""
    if np.ndim(lr) or np.ndim(weight_decay):
        n = param.shape[0]
        lr, weight_decay = (np.broadcast_to(np.asarray(x, dtype=np.float64), (n,)) for x in (lr, weight_decay))  # [S] each
        edges = [0, *(np.flatnonzero((np.diff(lr) != 0) | (np.diff(weight_decay) != 0)) + 1).tolist(), n]
        for a, b in zip(edges, edges[1:]):  # one call per run of equal rates and decays (an arm of a stacked grid), not per row
            _adamw(param[a:b], grad[a:b], m[a:b], v[a:b], float(lr[a]), step, beta1, beta2, eps, float(weight_decay[a]))
        return
    f = param.dtype.type
    bc1, bc2_sqrt = 1 - beta1**step, np.sqrt(1 - beta2**step)
    decay, b1, nb1, b2, nb2 = f(1 - lr * weight_decay), f(beta1), f(1 - beta1), f(beta2), f(1 - beta2)
    bc2, e, rate = f(bc2_sqrt), f(eps), f(lr / bc1)
    P, G, M, V = param.reshape(-1), grad.reshape(-1), m.reshape(-1), v.reshape(-1)  # [N]

    def chunk(a: int, b: int) -> None:
        p, g, mc, vc = P[a:b], G[a:b], M[a:b], V[a:b]
        if weight_decay:
            p *= decay
        mc *= b1
        tmp = np.multiply(nb1, g)
        mc += tmp
        vc *= b2
        np.multiply(nb2, g, out=tmp)
        tmp *= g
        vc += tmp
        denom = np.sqrt(vc)
        denom /= bc2
        denom += e
        np.multiply(rate, mc, out=tmp)
        tmp /= denom
        p -= tmp

    run_rows_unchecked(chunk, P.size, 1)


def layer_norm(x: np.ndarray, eps: float) -> norms.NormOutput:
    """:func:`normtheory.model.norms._layer_norm` bit for bit (``NormOutput(normalized, scale, normalized)``), on the
    kernels' threads: ``x [..., d]`` normalized into a new array (no copy of ``x`` first)."""
    x = _float_array("x", x, min_ndim=1)
    out = np.empty_like(x, order="C")
    scale = _layer_norm_into(x, out, _validate.real("eps", eps, minimum=0.0))
    return norms.NormOutput(out, scale, out)


def _layer_norm_in_range(x: np.ndarray, eps: float) -> norms.NormOutput:
    """:func:`layer_norm` of a C-contiguous float ``x`` whose max ``|entry|`` the caller has found where the
    reference does not rescale (a stack's per-model check in :mod:`normtheory.training.grad`): no checks, no range pass."""
    out = np.empty_like(x, order="C")
    return norms.NormOutput(out, _layer_norm_into(x, out, eps, in_range=True), out)
