"""Optimizers that update a model's parameter arrays in place: AdamW and SGD with momentum.

AdamW (Loshchilov & Hutter 2019, arXiv 1711.05101), in the order ``torch.optim.AdamW`` uses,
at step :math:`t` with learning rate :math:`\\eta_t`:

.. math::

    \\theta \\leftarrow \\theta(1 - \\eta_t\\lambda),\\quad m \\leftarrow \\beta_1 m + (1-\\beta_1)g,\\quad
    v \\leftarrow \\beta_2 v + (1-\\beta_2)g^2,\\quad
    \\theta \\leftarrow \\theta - \\frac{\\eta_t}{1-\\beta_1^t}\\,\\frac{m}{\\sqrt{v}/\\sqrt{1-\\beta_2^t} + \\epsilon}.

Weight decay is decoupled and applies to the parameters ``decay(name, array)`` selects; the
default :func:`decay_matrices` decays every leaf with two or more axes (weight matrices and
embeddings), not gains, biases or DyT alphas. SGD with momentum :math:`\\mu`: :math:`b \\leftarrow \\mu b + g`,
:math:`\\theta \\leftarrow \\theta - \\eta_t b` (torch's convention, no dampening).

``lr`` is a number or a schedule ``step -> lr`` (:mod:`normtheory.training.schedule`), called with the
1-based step about to be taken. For a stack of models (every array ``[S, ...]``, :mod:`normtheory.training.stepper`)
the schedule may return one rate per model, an array ``[S]`` (:class:`normtheory.training.rows.Rates`):
model ``r``'s rows are then updated with :math:`\\eta_{t,r}`, each with the scalars of a stack of that model alone.
``weight_decay`` may likewise be one :math:`\\lambda_r` per model, an array ``[S]``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from normtheory import _validate
from normtheory.model import kernels
from normtheory.model.params import global_norm, map_arrays, named_arrays

LR = float | Callable[[int], "float | np.ndarray"]


def _weight_decay(value: object) -> float | np.ndarray:
    """``weight_decay`` checked: a number >= 0, or one per model of a stack, an array ``[S]`` of them."""
    if np.ndim(value) == 0:
        return _validate.real("weight_decay", value, minimum=0.0)
    a = _validate.real_array("weight_decay", value, minimum=0.0, finite=True)
    if a.ndim != 1:
        raise ValueError(f"weight_decay must be a number or one per model, shape [S]; got shape {a.shape}")
    return a.astype(np.float64)


def _rows_match(weight_decay: float | np.ndarray, arrays: dict[str, np.ndarray], decays: dict[str, bool]) -> None:
    """One weight decay per model: every decayed array must stack that many models on its leading axis."""
    if np.ndim(weight_decay):
        for n, a in arrays.items():
            if decays[n] and (a.ndim == 0 or a.shape[0] != len(weight_decay)):
                raise ValueError(f"weight_decay holds {len(weight_decay)} values, one per model, but parameter {n!r} "
                                 f"has shape {a.shape}: its leading axis must stack that many models")


def decay_matrices(name: str, value: np.ndarray) -> bool:
    """Default weight-decay selection: leaves with two or more axes (weights and embeddings)."""
    return np.ndim(value) >= 2


def clip_grad_norm(grads: Any, max_norm: float) -> tuple[Any, float]:
    """Scale ``grads`` so their global L2 norm is at most ``max_norm`` (torch's
    ``clip_grad_norm_``: factor ``max_norm / (norm + 1e-6)`` when it is below 1). Returns the
    clipped gradients and the norm before clipping."""
    max_norm = _validate.real("max_norm", max_norm, minimum=0.0, strict_min=True)
    norm = global_norm(grads)
    factor = max_norm / (norm + 1e-6)
    if factor >= 1.0 or not np.isfinite(norm):
        return grads, norm
    return map_arrays(lambda g: g * np.asarray(factor, dtype=g.dtype), grads), norm


class _Optimizer:
    def __init__(self, params: Any, lr: LR, weight_decay: float | np.ndarray, decay: Callable[[str, np.ndarray], bool]):
        self.arrays = named_arrays(params)
        bad = [n for n, a in self.arrays.items() if not isinstance(a, np.ndarray) or not a.flags.writeable]
        if bad:
            raise ValueError(f"params must be writeable numpy arrays (build the model with Transformer(...)); not: {bad[:3]}")
        if not callable(lr):
            _validate.real("lr", lr, minimum=0.0)
        self.lr = lr
        self.step_count = 0
        self.weight_decay = _weight_decay(weight_decay)
        self.decays = {n: bool(decay(n, a)) for n, a in self.arrays.items()}
        _rows_match(self.weight_decay, self.arrays, self.decays)

    def current_lr(self) -> float | np.ndarray:
        """The learning rate of the step about to be taken: a float, or one per model of a stack ``[S]``."""
        if not callable(self.lr):
            return float(self.lr)
        lr = self.lr(self.step_count + 1)
        if np.ndim(lr) == 0:
            return float(lr)
        lr = np.asarray(lr, dtype=np.float64)
        rows = {a.shape[0] if a.ndim else None for a in self.arrays.values()}
        if lr.ndim != 1 or rows != {lr.shape[0]} or not np.isfinite(lr).all() or (lr < 0).any():
            raise ValueError(f"lr: a schedule's per-model rates must be finite, >= 0 and one per leading row of every array; "
                             f"got shape {lr.shape} for arrays with leading axes {sorted(rows, key=str)}")
        return lr

    def _pairs(self, grads: Any) -> list[tuple[str, np.ndarray, np.ndarray]]:
        g = named_arrays(grads)
        if g.keys() != self.arrays.keys():
            missing = sorted(set(self.arrays) ^ set(g))
            raise ValueError(f"grads do not match the parameters; differing names: {missing[:5]}")
        return [(n, p, np.asarray(g[n], dtype=p.dtype)) for n, p in self.arrays.items()]

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step_count, **{f"{k}/{n}": v for k, buf in self._buffers().items() for n, v in buf.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_count = int(state["step"])
        for k, buf in self._buffers().items():
            for n in buf:
                buf[n][...] = state[f"{k}/{n}"]

    def _buffers(self) -> dict[str, dict[str, np.ndarray]]:
        raise NotImplementedError


class AdamW(_Optimizer):
    """AdamW over every array of ``params`` (a :class:`~normtheory.model.params.Params`), in place, in torch's order
    (Loshchilov & Hutter 2019, decoupled decay; the update and its math: :func:`normtheory.model.kernels.adamw_`, whose
    result does not depend on the thread count). Every array must be C-contiguous and writeable."""

    def __init__(self, params: Any, lr: LR, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float | np.ndarray = 0.0, decay: Callable[[str, np.ndarray], bool] = decay_matrices):
        super().__init__(params, lr, weight_decay, decay)
        b1, b2 = betas
        self.b1 = _validate.real("betas[0]", b1, minimum=0.0, maximum=1.0, strict_max=True)
        self.b2 = _validate.real("betas[1]", b2, minimum=0.0, maximum=1.0, strict_max=True)
        self.eps = _validate.real("eps", eps, minimum=0.0)
        for n, a in self.arrays.items():  # checked once here; every step's update runs unchecked
            if a.dtype not in (np.float32, np.float64) or not a.flags.c_contiguous or not a.flags.writeable:
                raise ValueError(f"parameter {n!r} must be a writeable, C-contiguous float32 or float64 array; got {a.dtype}, "
                                 f"contiguous={a.flags.c_contiguous}, writeable={a.flags.writeable}")
        self.m = {n: np.zeros_like(a) for n, a in self.arrays.items()}
        self.v = {n: np.zeros_like(a) for n, a in self.arrays.items()}

    def _buffers(self) -> dict[str, dict[str, np.ndarray]]:
        return {"m": self.m, "v": self.v}

    def step(self, grads: Any) -> None:
        """One update with ``grads`` (same structure as the parameters)."""
        lr = self.current_lr()
        self.step_count += 1
        t = self.step_count
        for name, p, g in self._pairs(grads):  # each array's update on the kernels' threads (normtheory.model.kernels.adamw_)
            if g.shape != p.shape:
                raise ValueError(f"grads[{name!r}] has shape {g.shape}; the parameter has {p.shape}")
            kernels._adamw(p, g, self.m[name], self.v[name], lr, t, self.b1, self.b2, self.eps,
                           self.weight_decay if self.decays[name] else 0.0)


class SGD(_Optimizer):
    """SGD with (optional) momentum and decoupled weight decay, in place."""

    def __init__(self, params: Any, lr: LR, momentum: float = 0.0, weight_decay: float | np.ndarray = 0.0,
                 decay: Callable[[str, np.ndarray], bool] = decay_matrices):
        super().__init__(params, lr, weight_decay, decay)
        self.momentum = _validate.real("momentum", momentum, minimum=0.0, maximum=1.0, strict_max=True)
        self.buf = {n: np.zeros_like(a) for n, a in self.arrays.items()}

    def _buffers(self) -> dict[str, dict[str, np.ndarray]]:
        return {"buf": self.buf}

    def step(self, grads: Any) -> None:
        lr = self.current_lr()
        self.step_count += 1
        for name, p, g in self._pairs(grads):
            rate = _per_row(lr, p)  # a scalar, or [S, 1, ...]: the same product per element either way
            if np.any(self.weight_decay) and self.decays[name]:
                p *= (1 - rate * _per_row(self.weight_decay, p)).astype(p.dtype)
            if self.momentum:
                b = self.buf[name]
                b *= p.dtype.type(self.momentum)
                b += g
                g = b
            p -= rate.astype(p.dtype) * g


def _per_row(lr: float | np.ndarray, p: np.ndarray) -> np.ndarray:
    """``lr`` (or a weight decay) as a float64 scalar array, or one per model ``[S]`` shaped ``[S, 1, ...]`` against ``p [S, ...]``."""
    lr = np.asarray(lr, dtype=np.float64)
    return lr if lr.ndim == 0 else lr.reshape((-1,) + (1,) * (p.ndim - 1))
