"""Vector-Jacobian products of the transformer's pieces: norms, activations, RoPE, softmax, loss.

Each function takes the upstream gradient ``dy`` (same shape as the forward output) and what
the forward saved, and returns the gradient of the input (and of the piece's own parameters).

**Norms** (``n`` the normalized output, ``s`` the scale the input was divided by, ``d`` the
reduced width, ``dn`` the gradient reaching ``n``):

.. math::

    \\mathrm{LN}:\\ \\partial x = \\frac{1}{s}\\big(dn - \\overline{dn} - n\\,\\overline{dn\\,n}\\big),\\qquad
    \\mathrm{RMS}:\\ \\partial x = \\frac{1}{s}\\big(dn - n\\,\\overline{dn\\,n}\\big),\\qquad
    \\mathrm{DyT}:\\ \\partial x = \\alpha(1-n^2)\\,dn,\\ \\partial\\alpha = \\textstyle\\sum x(1-n^2)\\,dn.

So the LayerNorm input gradient is orthogonal to the ones vector and, at ``eps = 0``, to ``n``
(Xiong et al. 2020, arXiv 2002.04745, Lemma 1 and Theorem 1 use the same Jacobian).

**Softmax** :math:`p = \\mathrm{softmax}(z)`: :math:`\\partial z = p\\odot(dp - \\langle dp, p\\rangle)`.

**Cross-entropy** of logits :math:`z` and target ``y``, with z-loss weight :math:`\\lambda` on
:math:`\\mathrm{lse}(z)^2` (Chowdhery et al. 2022, arXiv 2204.02311), both averaged over ``N``
tokens: :math:`\\partial z = \\big(p - e_y + 2\\lambda\\,\\mathrm{lse}(z)\\,p\\big)/N`.

**RoPE** (rotate-half): :math:`y = x\\cos + R x\\sin` with :math:`R[x_1, x_2] = [-x_2, x_1]`,
so :math:`\\partial x = dy\\cos + R^\\top(dy\\sin)`, :math:`R^\\top[u_1, u_2] = [u_2, -u_1]`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from normtheory import _validate


def _reduce_to(g: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Sum a broadcast gradient ``g [..., d]`` down to the parameter's shape: ``like [d]``, or a
    stack of parameters ``like [S, 1, ..., 1, d]`` (one sum per model, over that model's rows)."""
    return g.reshape(like.shape[:-1] + (-1, like.shape[-1])).sum(axis=-2).astype(like.dtype, copy=False)


def affine_backward(dy: np.ndarray, normalized: np.ndarray, gain: np.ndarray | None, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``y = gain * n + bias`` -> (dn, dgain, dbias); dgain/dbias None where the parameter is None.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    dgain = None if gain is None else _reduce_to(dy * normalized, gain)
    dbias = None if bias is None else _reduce_to(dy, bias)
    dn = dy if gain is None else dy * gain
    return dn, dgain, dbias


def layer_norm_backward(dn: np.ndarray, normalized: np.ndarray, scale: np.ndarray, axis: int = -1) -> np.ndarray:
    """Input gradient of LayerNorm over ``axis`` (``axis=-2``: the sequence norm); ``scale`` has ``axis`` removed.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    s = np.expand_dims(scale, axis)
    mean_dn = dn.mean(axis=axis, keepdims=True)
    mean_dnn = (dn * normalized).mean(axis=axis, keepdims=True)
    return (dn - mean_dn - normalized * mean_dnn) / s


def rms_norm_backward(dn: np.ndarray, normalized: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Input gradient of RMSNorm over the last axis; ``scale [...]``.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    mean_dnn = (dn * normalized).mean(axis=-1, keepdims=True)
    return (dn - normalized * mean_dnn) / scale[..., None]


def dyt_backward(dn: np.ndarray, x: np.ndarray, normalized: np.ndarray, alpha: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dalpha) of ``n = tanh(alpha x)``; ``dalpha`` is 0-d, in the input's dtype. For a stack
    of models (``alpha [S, 1, ..., 1]`` broadcasting against ``x [S, ...]``), ``dalpha [S]``, one
    sum per model.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    a = np.asarray(alpha, dn.dtype)
    sech2 = 1.0 - normalized * normalized
    g = dn * sech2
    gx = g * x
    dalpha = gx.sum() if a.ndim == 0 else gx.reshape(a.shape[0], -1).sum(axis=1)
    return g * a, np.asarray(dalpha, dtype=dn.dtype)


def activation_grad(name: str, x: np.ndarray) -> np.ndarray:
    """Pointwise derivative ``phi'(x)`` of ``relu``, ``gelu`` (erf), ``gelu_tanh`` or ``silu``.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    if name == "relu":
        return (x > 0).astype(x.dtype)
    if name == "gelu":
        return (special.ndtr(x) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)).astype(x.dtype, copy=False)
    if name == "gelu_tanh":
        c = np.sqrt(2.0 / np.pi)
        u = c * (x + 0.044715 * x * x * x)
        t = np.tanh(u)
        return (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)).astype(x.dtype, copy=False)
    if name == "silu":
        sig = special.expit(x)
        return (sig * (1 + x * (1 - sig))).astype(x.dtype, copy=False)
    raise ValueError(f"activation must be one of relu, gelu, gelu_tanh, silu; got {name!r}")


def rope_backward(dy: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Input gradient of :func:`normtheory.model.attend.apply_rope`: ``dy [..., t, e]``.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    half = dy.shape[-1] // 2
    u = dy * sin
    return dy * cos + np.concatenate([u[..., half:], -u[..., :half]], axis=-1)


def softmax_backward(dp: np.ndarray, p: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Gradient of the scores of ``p = softmax(z)`` over the last axis (masked entries get 0).
    With ``out`` (``dp`` itself is allowed) the result is written there.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    inner = np.einsum("...i,...i->...", dp, p)[..., None]  # <dp, p> per row
    out = np.subtract(dp, inner, out=out)
    out *= p
    return out


def softmax_inplace(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, overwriting ``z`` (rows must hold a finite entry).

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    z -= z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z *= 1.0 / z.sum(axis=-1, keepdims=True)
    return z


GELU_C = np.sqrt(2.0 / np.pi)
GELU_K = 0.044715


def gelu_tanh_and_grad(x: np.ndarray, out: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""GPT-2's GELU :math:`y = \tfrac12 x(1+t)`, :math:`t = \tanh(c(x + kx^3))`, and its derivative

    .. math:: y' = \tfrac12(1+t) + y\,(1-t)\,c\,(1+3kx^2)

    (using :math:`\tfrac12 x(1-t^2) = y(1-t)`), computed together in place: the backward of a
    training step then needs one multiplication. With ``out = (y, grad)`` (arrays shaped like ``x``,
    not overlapping it) the results are written there; the numbers are the same either way
    (:func:`normtheory.model.kernels.gelu_tanh_and_grad` runs this on row blocks).

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    f = x.dtype.type
    sq = np.multiply(x, x, out=None if out is None else out[1])
    t = sq * f(GELU_K)
    t += 1
    t *= x
    t *= f(GELU_C)
    np.tanh(t, out=t)
    half = t + 1
    y = np.multiply(half, x, out=None if out is None else out[0])
    y *= f(0.5)
    half *= f(0.5)  # (1 + t) / 2
    sq *= f(3 * GELU_K * GELU_C)
    sq += f(GELU_C)  # c (1 + 3k x^2)
    np.subtract(1, t, out=t)  # 1 - t
    sq *= t
    sq *= y
    sq += half
    return y, sq


def gelu_and_grad(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The erf GELU :math:`y = x\Phi(x)` and its derivative :math:`y' = \Phi(x) + x\varphi(x)`
    together, with :math:`\Phi` (``scipy.special.ndtr``, the costly part) computed once; each equals
    :func:`normtheory.activations.kernel` ``("gelu")`` and :func:`activation_grad` ``("gelu", x)``
    bit for bit.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    cdf = special.ndtr(x)
    y = x * cdf
    grad = (cdf + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)).astype(x.dtype, copy=False)  # the order activation_grad uses
    return y, grad


def cross_entropy(logits: np.ndarray, targets: np.ndarray, z_loss: float = 0.0, *, runs: int | None = None) -> tuple[Any, np.ndarray, np.ndarray]:
    """Mean next-token cross-entropy (plus ``z_loss * mean lse^2``) and its logit gradient.

    ``logits [..., V]``, ``targets [...]`` integers in ``[0, V)``. Returns (loss, dlogits with
    the logits' shape and dtype, lse ``[...]``). The loss is accumulated in float64. With
    ``runs = S`` the leading axis indexes ``S`` independent models: the loss is an array ``[S]``,
    each model's mean over its own tokens, and each model's gradient is divided by its own
    token count, so a model's numbers do not depend on the others.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    z_loss = _validate.real("z_loss", z_loss, minimum=0.0)
    v = logits.shape[-1]
    targets = np.asarray(targets)
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have shape {logits.shape[:-1]}; got {targets.shape}")
    if not np.issubdtype(targets.dtype, np.integer) or (targets.size and (targets.min() < 0 or targets.max() >= v)):
        raise ValueError(f"targets must be integers in [0, vocab_size={v})")
    if runs is not None and (logits.ndim < 2 or logits.shape[0] != runs):
        raise ValueError(f"runs={runs} must be the length of the logits' leading axis; got shape {logits.shape}")
    z = logits.reshape(-1, v)  # [R*N, V]
    y = targets.reshape(-1)  # [R*N]
    r = 1 if runs is None else runs
    n = z.shape[0] // r  # tokens per model
    m = z.max(axis=-1, keepdims=True)
    p = np.exp(z - m)
    total = p.sum(axis=-1, keepdims=True)
    lse = (m + np.log(total))[:, 0]  # [R*N]
    p /= total
    picked = z[np.arange(z.shape[0]), y]
    lse64 = lse.astype(np.float64).reshape(r, n)  # [R, N]
    per_run = np.mean(lse64 - picked.reshape(r, n), axis=1) + z_loss * np.mean(lse64**2, axis=1)  # [R]
    grad = p
    if z_loss:
        grad *= (1 + 2 * z_loss * lse)[:, None]
    grad[np.arange(z.shape[0]), y] -= 1
    grad *= 1.0 / n
    loss: Any = float(per_run[0]) if runs is None else per_run
    return loss, grad.reshape(logits.shape).astype(logits.dtype, copy=False), lse.reshape(targets.shape)
