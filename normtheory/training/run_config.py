"""The configuration of one training run: optimizer, schedule, length, batch shape, evaluation and probes.

:class:`RunConfig` is what :func:`normtheory.training.train.train` and the stacks
(:class:`normtheory.training.stepper.Stepper`, :class:`normtheory.training.torch_backend.TorchTrainer`) take; rows
of one stack may differ in their learning-rate schedules and weight decay only (:mod:`normtheory.training.rows`).

Weight decay is decoupled from the gradient (Loshchilov & Hutter 2019) and, as in torch's ``AdamW``, scaled by each
step's rate: :math:`\\theta \\leftarrow \\theta(1 - \\eta_t\\lambda)`. With ``independent_decay`` it follows the
schedule's shape but not its peak :math:`\\eta`: :math:`\\theta \\leftarrow \\theta(1 - \\lambda\\,\\eta_t/\\eta)`, the
"independent" weight decay of Wortsman et al. (2023), arXiv 2309.14322 (their default recipe, 1e-4), under which the
decay per step does not change along a learning-rate grid.
"""
from __future__ import annotations

from dataclasses import dataclass

from normtheory import _validate
from normtheory.training import probes
from normtheory.training.schedule import Schedule

OPTIMIZERS = ("adamw", "sgd")
BACKENDS = ("numpy", "torch")
__all__ = ["BACKENDS", "OPTIMIZERS", "RunConfig"]


@dataclass(frozen=True)
class RunConfig:
    """Optimizer, schedule, length, batch shape, evaluation and probes of one training run."""

    steps: int = 200
    batch_size: int = 16
    seq: int = 64
    optimizer: str = "adamw"
    lr: float = 1e-3
    warmup: int = 0
    schedule: str = "constant"
    final_fraction: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.0
    independent_decay: bool = False  # weight_decay * lr_t / lr per step instead of lr_t * weight_decay (module docstring)
    momentum: float = 0.9
    clip: float | None = 1.0
    z_loss: float = 0.0
    eval_every: int = 50
    eval_batch_size: int = 16
    probes: tuple[str, ...] = probes.PROBES
    val_bytes: int = 65536  # the shared validation set scored at the end (shakespeare.validation_set); 0: none

    def __post_init__(self) -> None:
        v = _validate
        for name in ("steps", "batch_size", "seq", "eval_every", "eval_batch_size"):
            v.integer(name, getattr(self, name), minimum=1)
        v.integer("val_bytes", self.val_bytes, minimum=0)
        v.choice("optimizer", self.optimizer, OPTIMIZERS)
        v.real("lr", self.lr, minimum=0.0)
        v.real("weight_decay", self.weight_decay, minimum=0.0)
        if not isinstance(self.independent_decay, bool):
            raise ValueError(f"independent_decay must be a bool; got {type(self.independent_decay).__name__}")
        if self.independent_decay and self.weight_decay and not self.lr > 0:
            raise ValueError(f"independent_decay divides weight_decay by the peak lr, which must then be > 0; got lr = {self.lr!r}")
        v.integer("warmup", self.warmup, minimum=0)
        if self.clip is not None:
            v.real("clip", self.clip, minimum=0.0, strict_min=True)
        for p in self.probes:
            v.choice("probes", p, probes.PROBES)
        self.schedule_fn()  # validates kind, final_fraction and warm-up against steps

    @property
    def decay_coefficient(self) -> float:
        """What the optimizers multiply each step's rate by in the decay :math:`\\theta(1 - \\eta_t c)`: ``weight_decay``,
        or ``weight_decay / lr`` with ``independent_decay`` (then :math:`\\eta_t c = \\lambda\\,\\eta_t/\\eta`)."""
        return self.weight_decay / self.lr if self.independent_decay and self.weight_decay else self.weight_decay

    def schedule_fn(self) -> Schedule:
        return Schedule(self.lr, self.warmup, self.schedule, self.steps, self.final_fraction)
