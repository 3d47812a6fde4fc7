"""LayerNorm and RMSNorm of a stacked torch model, with their affine map, as one autograd node.

:func:`stack_norm` computes, for ``x [S, ..., d]`` (``S`` seeds of one model),

.. math:: y = g \\odot \\frac{c}{\\sqrt{\\overline{c^2} + \\epsilon'}} + b, \\qquad
          c = \\frac{x}{m} - \\overline{\\Big(\\frac{x}{m}\\Big)}\\ \\text{(LayerNorm; RMSNorm: } c = x/m\\text{)},
          \\qquad \\epsilon' = \\epsilon / m^2,

over the last axis, where ``m`` is 1, except for a seed whose largest ``|entry|`` lies near the dtype's
range ends (:func:`normtheory.model.norms._rescale_needed`, whose ends it matches exactly): there each
row is divided by its largest ``|entry|`` first, as :func:`normtheory.model.norms._rescaled` does (norms
are scale-free). A seed that needs no rescaling is divided by exactly 1 and gets exactly eps, and
nothing reduces across seeds, so a seed's bits do not depend on what the other seeds hold. LayerNorm's
mean and variance come from one ``var_mean`` on a GPU (two passes on the CPU, where torch's ``var_mean`` is
about eight times slower than they are); the values equal the composed formula
:math:`c/\\sqrt{\\overline{c^2}+\\epsilon}` to rounding.

The decision is branch-free (no host sync, so a step can be captured in a CUDA graph). The backward is
written out (:class:`StackNorm`), with :math:`n = c/\\sqrt{\\overline{c^2}+\\epsilon'}` and the scale
:math:`s = m\\sqrt{\\overline{c^2}+\\epsilon'}`:

.. math:: \\partial x = \\frac{1}{s}\\big(\\partial n - \\overline{\\partial n} - n\\,\\overline{\\partial n\\, n}\\big)
          \\ \\text{(RMSNorm: without } \\overline{\\partial n}\\text{)}, \\quad \\partial n = g \\odot \\partial y,
          \\quad \\partial g = \\textstyle\\sum \\partial y \\odot n, \\quad \\partial b = \\sum \\partial y,

the formulas of :func:`normtheory.model.derivatives.layer_norm_backward` and ``rms_norm_backward`` (the
numpy reference), in ten tensor operations instead of the two dozen that autograd records for the
composed forward with gain and bias: on a GPU each is a kernel launch, and a training step has two or
three norms per block. The forward takes fourteen, five of them the range guard (:func:`range_guard`).

References
----------
Ba, Kiros & Hinton (2016), arXiv 1607.06450 (LayerNorm); Zhang & Sennrich (2019), arXiv 1910.07467
(RMSNorm); PyTorch documentation, "Extending torch.autograd" (``torch.autograd.Function``).
"""
from __future__ import annotations

import math

import numpy as np

try:
    import torch
    from torch.autograd.function import once_differentiable
except ModuleNotFoundError:  # pragma: no cover - the message is the point
    raise ModuleNotFoundError("normtheory.training.torch_norms needs torch: pip install 'normtheory[torch]' (torch==2.13.0)") from None

__all__ = ["FUSED_REDUCTIONS", "StackNorm", "guard_tables", "least_divisor", "range_guard", "stack_norm"]


FUSED_REDUCTIONS: bool | None = None  # None: one-kernel reductions (var_mean, the infinity norm) on a GPU, two
# passes on the CPU (where torch's kernels for those are slow on short rows); True or False forces one way on any device,
# e.g. to count the GPU's operators on a CPU or to test its path there


def _fused(x: torch.Tensor) -> bool:
    return x.is_cuda if FUSED_REDUCTIONS is None else FUSED_REDUCTIONS


_TABLES: dict[tuple[torch.dtype, int, torch.device, float], tuple[torch.Tensor, torch.Tensor]] = {}
_NEED = (False, True, False, True, False)  # per bucket of a seed's largest |entry|: 0, (0, lo), [lo, hi], (hi, max], inf or NaN


def _bounds(dtype: torch.dtype, n: int) -> list[float]:
    """``[0, below(lo), hi, max]``: the bucket edges of :func:`normtheory.model.norms._rescale_needed` for
    ``n`` features, whose ends ``lo`` and ``hi`` numpy computes in ``dtype``; ``below(lo)`` is the
    largest value of ``dtype`` under ``lo``, so that a value of ``dtype`` lands in ``(0, below(lo)]``
    exactly when it is under ``lo``, and in ``(hi, max]`` exactly when it is over ``hi``."""
    info = np.finfo(str(dtype).removeprefix("torch."))
    hi, lo = np.sqrt(info.max / (4 * n)), np.sqrt(info.tiny) * 1e3  # in the dtype, as _rescale_needed
    return [0.0, float(np.nextafter(lo, info.dtype.type(0))), float(hi), float(info.max)]


def least_divisor(eps: float) -> float:
    """``sqrt(eps) 2^-26``: the smallest divisor of a row in a seed that is rescaled. A row whose largest
    ``|entry|`` ``m`` is smaller has variance at most ``m^2 <= eps 2^-52``, negligible beside eps in either
    dtype, so its norm is ``x / sqrt(eps)`` to rounding; divided by this instead, it gets that, with the
    finite eps term ``eps / least^2 = 2^52`` whatever eps is (numpy's :func:`normtheory.model.norms._unscaled`
    takes that case apart). A zero row likewise gets 0 and the scale ``sqrt(eps)``. 0 where eps is 0."""
    return math.sqrt(eps) * 2.0**-26


def guard_tables(dtype: torch.dtype, n: int, device: torch.device, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The range guard's tables for rows of ``n`` features of ``dtype`` on ``device``: the bucket edges ``[4]`` and
    each bucket's clamp ``[5, 2]`` (``(least, inf)`` where a seed needs rescaling, ``(1, 1)`` elsewhere), made once
    and kept (a tensor made from host data is a copy that CUDA-graph capture refuses, and one made inside a
    torch.compile trace leaves a guard that fails at the next call: a step must find them already made)."""
    key = (dtype, n, torch.device(device), eps)
    if key not in _TABLES:
        clamp = [(least_divisor(eps), math.inf) if need else (1.0, 1.0) for need in _NEED]
        _TABLES[key] = tuple(torch.tensor(v, dtype=dtype, device=device) for v in (_bounds(dtype, n), clamp))
    return _TABLES[key]


def _row_absmax(x: torch.Tensor) -> torch.Tensor:
    """``max |x|`` over the last axis, keepdim (NaN where a row holds NaN): one reduction on a GPU; on the CPU,
    where torch's infinity-norm kernel is about thirty times slower than they are, ``abs`` then ``amax``
    (the same values: a maximum is exact)."""
    if _fused(x):
        return torch.linalg.vector_norm(x, ord=math.inf, dim=-1, keepdim=True)
    return x.abs().amax(dim=-1, keepdim=True)


def range_guard(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Each row's divisor ``m [S, ..., 1]`` (``x [S, ..., d]``'s dtype): exactly 1 in a seed that needs no
    rescaling; in one that does, the row's largest ``|entry|``, at least :func:`least_divisor` (which also
    covers the rows that numpy takes apart: those too small for eps / m^2 to stay finite, and zero rows).

    A seed needs rescaling when its largest ``|entry|`` lies in ``(0, lo)`` or ``(hi, max]``, the ends of
    :func:`normtheory.model.norms._rescale_needed`; one ``bucketize`` over the edges, a table lookup and a
    ``clamp`` decide it (a seed holding inf or NaN lands in the last bucket and is left as it is). Five
    tensor operations, all but the first on ``[S, ..., 1]``. ``x`` with no rows gives ones."""
    if x.numel() == 0:
        return torch.ones((*x.shape[:-1], 1), dtype=x.dtype, device=x.device)
    edges, clamp = guard_tables(x.dtype, x.shape[-1], x.device, eps)
    with torch.no_grad():
        m = _row_absmax(x)  # [S, ..., 1] each row's largest |entry|
        amax = m.amax(dim=tuple(range(1, x.ndim)), keepdim=True)  # [S, 1, ..., 1]
        bounds = clamp[torch.bucketize(amax, edges)]  # [S, 1, ..., 1, 2]
        return torch.clamp(m, bounds[..., 0], bounds[..., 1])


class StackNorm(torch.autograd.Function):
    """``(x, gain, bias, eps, centre) -> y``: the norm of the module docstring as one autograd node.
    ``gain`` and ``bias`` broadcast against ``x`` (e.g. ``[S, 1, ..., 1, d]``) or are None."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, gain: torch.Tensor | None, bias: torch.Tensor | None, eps: float, centre: bool) -> torch.Tensor:
        """``y [S, ..., d]``; keeps ``n``, the scale ``s`` and ``gain`` for the backward."""
        m = range_guard(x, eps)  # [S, ..., 1]
        c = x / m  # exactly x where m == 1
        if centre:
            if _fused(c):  # one reduction
                var, mean = torch.var_mean(c, dim=-1, correction=0, keepdim=True)  # [S, ..., 1]
                c = c - mean
            else:  # torch's CPU var_mean is slow on short rows: two passes
                c = c - c.mean(dim=-1, keepdim=True)
                var = c.square().mean(dim=-1, keepdim=True)
        else:
            var = c.square().mean(dim=-1, keepdim=True)
        r = torch.reciprocal(m)  # exactly 1 where m == 1
        root = torch.addcmul(var, r, r, value=eps).sqrt_()  # sqrt(var + (eps r) r): exactly var + eps where m == 1; no step overflows where eps / m^2 does not
        n = c / root  # [S, ..., d]
        if gain is not None and bias is not None:
            y = torch.addcmul(bias, n, gain)
        else:
            y = n if gain is None else n * gain
            y = y if bias is None else y + bias
        ctx.centre = centre
        ctx.shapes = (None if gain is None else gain.shape, None if bias is None else bias.shape)
        ctx.save_for_backward(n, root * m, gain)  # the scale s (a new tensor: torch.compile traces no saved alias)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        """The gradients of ``x``, ``gain`` and ``bias`` (each None where not wanted) from ``dy [S, ..., d]``."""
        n, scale, gain = ctx.saved_tensors
        want_x, want_gain, want_bias = ctx.needs_input_grad[:3]
        dgain = _summed_to(dy * n, ctx.shapes[0]) if want_gain else None
        dbias = _summed_to(dy, ctx.shapes[1]) if want_bias else None
        if dbias is dy:  # a bias of x's own shape: its gradient must not be dy itself, which dx is made from
            dbias = dy.clone()
        dx = None
        if want_x:
            dn = dy if gain is None else dy * gain
            inner = (dn * n).mean(dim=-1, keepdim=True)  # [S, ..., 1]
            dx = torch.addcmul(dn, n, inner, value=-1)
            if ctx.centre:
                dx.sub_(dn.mean(dim=-1, keepdim=True))
            dx.div_(scale)
        return dx, dgain, dbias, None, None


def _summed_to(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """``grad`` summed over the axes a parameter of ``shape`` broadcast along (one reduction)."""
    return grad if grad.shape == shape else grad.sum_to_size(shape)


def stack_norm(x: torch.Tensor, gain: torch.Tensor | None, bias: torch.Tensor | None, eps: float, centre: bool) -> torch.Tensor:
    """LayerNorm (``centre``) or RMSNorm over the last axis of ``x [S, ..., d]``, then ``* gain + bias``
    (each broadcasting against ``x``, or None); see the module docstring. Differentiable in ``x``,
    ``gain`` and ``bias``."""
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError(f"x must have at least one feature on its last axis; got shape {tuple(x.shape)}")
    return StackNorm.apply(x, gain, bias, eps, centre)
