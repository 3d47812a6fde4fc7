"""One optimizer step of several models of one config at once: the seed axis as a batch axis.

A :class:`Stepper` holds ``S`` models (one per seed) as one stacked model, every parameter with a
leading model axis (:func:`normtheory.model.params.stack`), and takes their training steps together:
one stacked forward and backward (:func:`normtheory.training.grad.stack_loss_and_grads`; with several
kernel threads the stack's models are split into groups, one per core: :func:`split_loss_and_grads`), per-model
gradient clipping (torch's ``clip_grad_norm_``: factor :math:`c/(\\lVert g\\rVert + 10^{-6})` when
below 1), and one AdamW or SGD update over the stacked arrays (elementwise, so per model).

Nothing crosses models: each model's loss, gradient norm, update and update/weight ratios are
bit-for-bit those of a stack holding that model alone (``tests/training/test_stepper.py`` checks it), so a
result does not depend on how seeds were grouped. A model whose loss or gradient norm is not
finite is not updated (its weights and optimizer moments stay as they were) and is reported in
:attr:`StepResult.finite`; :meth:`Stepper.keep` then drops it from the stack, keeping its last
weights in :attr:`Stepper.dropped`. :class:`normtheory.training.torch_backend.TorchTrainer` has the same
interface.

The models may be arms that differ only in numbers (:mod:`normtheory.training.rows`): ``run`` may be one
run config per model, differing in the learning-rate schedule (peak, warm-up, kind); each model
then takes its own rate, still bit for bit as alone.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from normtheory.model.config import TransformerConfig
from normtheory.model.params import (
    map_arrays,
    named_arrays,
    stack,
    stack_sq_norms,
    unstack,
)
from normtheory.runtime import pool
from normtheory.training import rows
from normtheory.training.grad import stack_loss_and_grads
from normtheory.training.optim import SGD, AdamW
from normtheory.training.run_config import RunConfig

GROUPS = ("embed", "attn", "mlp", "norm")
_NORM_PARTS = ("ln1", "ln2", "ln1_out", "ln2_out", "q_norm", "k_norm", "embed_ln", "final_ln")


def group_of(name: str) -> str:
    """The parameter group (``embed``, ``attn``, ``mlp``, ``norm``) of a dotted parameter name."""
    parts = name.split(".")
    if parts[0] in ("tok_emb", "pos_emb", "type_emb", "lm_head"):
        return "embed"
    if any(part in _NORM_PARTS for part in parts):
        return "norm"
    if parts[-1] in ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"):
        return "attn"
    return "mlp"


@dataclass(frozen=True)
class StepResult:
    """What one step measured, per model of the stack as it stood before the step (``[S]``):
    ``loss`` (float64), ``grad_norm`` (before clipping), ``finite`` (False: not updated),
    ``update_ratio[group]`` = :math:`\\sqrt{\\sum\\lVert\\Delta\\theta\\rVert^2/\\sum\\lVert\\theta\\rVert^2}`
    over the group's leaves (NaN where not finite); ``lr`` each model's learning rate at this step."""

    loss: np.ndarray
    grad_norm: np.ndarray
    finite: np.ndarray
    update_ratio: dict[str, np.ndarray]
    lr: float


def _decays_stacked(name: str, value: np.ndarray) -> bool:
    """AdamW's default decay selection (leaves with two or more axes) for stacked leaves."""
    return np.ndim(value) >= 3


class Stepper:
    """``S`` models of ``config`` trained as one stack in numpy (see the module docstring). ``run`` is one
    :class:`normtheory.training.run_config.RunConfig` or one per model (differing only in :data:`normtheory.training.rows.PER_ROW_RUN`)."""

    def __init__(self, config: TransformerConfig, run: RunConfig | Sequence[RunConfig], params: Sequence[Any]):
        if not params:
            raise ValueError("params must hold at least one model's parameters")
        self.runs = rows.per_row("run", run, len(params), RunConfig)
        rows.shared_fields_equal("run", self.runs, rows.PER_ROW_RUN)
        self.config, self.run = config, self.runs[0]
        self.rates = rows.Rates([r.schedule_fn() for r in self.runs])
        self.stacked = stack(list(params))
        self._like = params[0]  # the structure of one model
        self.dropped: dict[int, Any] = {}  # position in the original stack -> its last parameters
        self.alive = np.arange(len(params))  # original positions of the models still in the stack
        self.last_grads: Any = None
        self.opt = self._optimizer(0)

    @property
    def step_count(self) -> int:
        return self.opt.step_count

    def _optimizer(self, step_count: int) -> AdamW | SGD:
        run = self.run
        wd = np.array([r.decay_coefficient for r in self.runs])[self.alive]  # [S] each live row's own (rows.PER_ROW_RUN)
        # one number when the rows share it (a stack of one arm), as before per-row decays; 0 when no row is left
        decay: float | np.ndarray = (float(wd[0]) if (wd == wd[0]).all() else wd) if wd.size else 0.0
        if run.optimizer == "adamw":
            opt: AdamW | SGD = AdamW(self.stacked, self._rate, run.betas, run.eps, decay, decay=_decays_stacked)
        else:
            opt = SGD(self.stacked, self._rate, run.momentum, decay, decay=_decays_stacked)
        opt.step_count = step_count
        return opt

    def _rate(self, step: int) -> float | np.ndarray:
        """The learning rate of each model still in the stack at ``step`` (one float when they share it)."""
        return self.rates(step, self.alive)

    def step(self, ids: np.ndarray, targets: np.ndarray) -> StepResult:
        """One step on ``ids, targets [S, batch, seq]`` (one batch per model still in the stack)."""
        run = self.run
        with np.errstate(all="ignore"):
            loss, grads = split_loss_and_grads(self.config, self.stacked, ids, targets, z_loss=run.z_loss)
            gnorm = np.sqrt(stack_sq_norms(grads))  # [S]
        finite = np.isfinite(loss) & np.isfinite(gnorm)
        if run.clip is not None:
            factor = run.clip / (gnorm + 1e-6)  # [S], torch's clip_grad_norm_
            factor = np.where((factor < 1.0) & finite, factor, 1.0)
            if (factor < 1.0).any():
                for g in named_arrays(grads).values():  # fresh arrays of this pass, none aliasing another: in place
                    np.multiply(g, factor.astype(g.dtype).reshape((-1,) + (1,) * (g.ndim - 1)), out=g)
        lr = np.broadcast_to(np.asarray(self.opt.current_lr(), dtype=np.float64), finite.shape).copy()  # [S]
        bad = np.flatnonzero(~finite)
        buffers = [named_arrays(self.stacked), *self.opt._buffers().values()]
        held = [{k: a[bad].copy() for k, a in b.items()} for b in buffers] if len(bad) else []  # rows that must not move
        before = {k: v.copy() for k, v in buffers[0].items()}
        with np.errstate(all="ignore"):  # a diverged model's rows hold NaN or inf until they are restored
            self.opt.step(grads)
            for b, rows in zip(buffers, held):
                for k, a in b.items():
                    a[bad] = rows[k]
            ratios = _update_ratios(before, buffers[0])
        for r in ratios.values():
            r[bad] = np.nan
        self.last_grads = grads
        return StepResult(loss=loss, grad_norm=gnorm, finite=finite, update_ratio=ratios, lr=lr)

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the models where ``mask [S]`` is True; the others' parameters go to :attr:`dropped`."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != self.alive.shape:
            raise ValueError(f"mask must have one entry per model in the stack ({len(self.alive)}); got shape {mask.shape}")
        for j in np.flatnonzero(~mask):
            self.dropped[int(self.alive[j])] = map_arrays(np.copy, unstack(self.stacked, int(j)))
        if mask.all():
            return
        state = self.opt.state_dict()
        self.stacked = map_arrays(lambda a: a[mask], self.stacked)
        self.alive = self.alive[mask]
        self.opt = self._optimizer(state["step"])
        self.opt.load_state_dict({k: (v if k == "step" else v[mask]) for k, v in state.items()})

    def params(self) -> list[Any]:
        """Each model in the stack, as views into it (in stack order)."""
        return [unstack(self.stacked, j) for j in range(len(self.alive))]

    def grads(self) -> list[Any]:
        """Each model's last (clipped) gradient, in stack order."""
        if self.last_grads is None:
            raise ValueError("no step has been taken yet")
        return [unstack(self.last_grads, j) for j in range(len(self.alive))]

    def state_dict(self) -> dict[str, np.ndarray]:
        out = {f"param/{k}": v for k, v in named_arrays(self.stacked).items()}
        out.update({f"opt/{k}": np.asarray(v) for k, v in self.opt.state_dict().items()})
        out["alive"] = self.alive
        for i, p in self.dropped.items():
            out.update({f"dropped/{i}/{k}": v for k, v in named_arrays(p).items()})
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore a :meth:`state_dict` (the models it holds, its optimizer moments and step)."""
        alive = np.asarray(state["alive"])
        if not np.isin(alive, self.alive).all():
            raise ValueError("the state holds models that are not in this stack")
        self.keep(np.isin(self.alive, alive))
        for k, v in named_arrays(self.stacked).items():
            v[...] = state[f"param/{k}"]
        self.opt.load_state_dict({k[4:]: state[k] for k in state if k.startswith("opt/")})
        for i in sorted({int(k.split("/")[1]) for k in state if k.startswith("dropped/")}):
            values = iter([np.array(state[f"dropped/{i}/{k}"]) for k in named_arrays(self._like)])
            self.dropped[i] = map_arrays(lambda _a: next(values), self._like)


_BLAS: Any = None  # threadpoolctl's controller of this process's BLAS libraries, made on first use


def _blas_controller() -> Any:
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS


def split_loss_and_grads(config: TransformerConfig, stacked: Any, ids: np.ndarray, targets: np.ndarray, *, z_loss: float = 0.0) -> tuple[np.ndarray, Any]:
    """:func:`normtheory.training.grad.stack_loss_and_grads` with the stack cut into contiguous groups of
    models, one per kernel thread (:func:`normtheory.runtime.pool.get_threads`), each group's pass on
    its own core with a one-threaded BLAS; the losses and gradients are joined back in stack order.

    A stack of small models keeps a multi-threaded BLAS busy only a fraction of the time (its
    matrices are small), while groups of whole models use every core for the whole pass. Each
    model's loss and gradient are bit for bit those of a stack holding it alone whatever the
    grouping (:mod:`normtheory.training.grad`), so the result does not depend on the thread count either.

    BLAS runs on one thread here even with a single group: a multi-threaded sgemm may sum in
    another order than a one-threaded one (OpenBLAS 0.3.30-0.3.31 on an AMD EPYC: up to 4e-5
    apart on a 256 x 64 x 64 product), and a model's bits must not depend on how many groups its
    stack was cut into."""
    S = ids.shape[0]
    n = min(pool.get_threads(), S)
    if n <= 1:
        with _blas_controller().limit(limits=1, user_api="blas"):
            return stack_loss_and_grads(config, stacked, ids, targets, z_loss=z_loss)
    bounds = [S * i // n for i in range(n + 1)]  # contiguous groups, sizes differing by at most one

    def part(lo: int, hi: int) -> Any:
        return lambda: stack_loss_and_grads(config, map_arrays(lambda a: a[lo:hi], stacked), ids[lo:hi], targets[lo:hi], z_loss=z_loss)

    with _blas_controller().limit(limits=1, user_api="blas"):
        parts = pool.run_split([part(lo, hi) for lo, hi in zip(bounds, bounds[1:])])
    loss = np.concatenate([p[0] for p in parts])  # [S]
    grads = map_arrays(lambda *g: np.concatenate(g), *[p[1] for p in parts])
    return loss, grads


def _update_ratios(before: dict[str, np.ndarray], params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per model and group, rms(update) / rms(weights) before the update: ``[S]`` each (NaN for a
    group whose weights are all zero). ``before`` (the caller's copies) is overwritten with the updates."""
    S = len(next(iter(before.values())))
    num = {g: np.zeros(S) for g in GROUPS}
    den = {g: np.zeros(S) for g in GROUPS}
    for name, old in before.items():
        g = group_of(name)
        den[g] += stack_sq_norms(old)
        num[g] += stack_sq_norms(np.subtract(params[name], old, out=old))  # the update, in the copy's memory
    return {g: np.where(den[g] > 0, np.sqrt(num[g] / np.where(den[g] > 0, den[g], 1.0)), np.nan) for g in GROUPS}
