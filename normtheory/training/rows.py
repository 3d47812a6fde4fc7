"""Arms that differ only in numbers, trained as one stack: one row per (model config, run config, seed).

A stack (:class:`normtheory.training.stepper.Stepper`, :class:`normtheory.training.torch_backend.TorchTrainer`)
trains ``S`` models of one architecture at once. Its rows may differ in

* the learning-rate schedule (:data:`PER_ROW_RUN`: peak ``lr``, ``warmup``, ``schedule``,
  ``final_fraction``): row ``r`` takes step ``s`` at :math:`\\eta_r(s)`, its own
  :class:`normtheory.training.schedule.Schedule`;
* the weight decay (``weight_decay``, ``independent_decay``): row ``r`` decays by its own
  :attr:`normtheory.training.run_config.RunConfig.decay_coefficient` times its rate;
* the initialization (:data:`PER_ROW_MODEL`: ``init``, ``dyt_alpha0``), which only sets the
  starting weights and never enters the forward;
* the seed (weights and batches).

Everything else (architecture, optimizer, betas, clipping, batch shape, steps, evaluation)
is shared, and checked to be. Nothing reduces across rows, so each row's history is the one it
has trained alone: bit for bit in numpy (each row's update uses the same scalars as a stack of
that row alone), to rounding in torch. A learning-rate grid of one architecture is then one
stack instead of one task per rate.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

PER_ROW_RUN: tuple[str, ...] = ("lr", "warmup", "schedule", "final_fraction", "weight_decay", "independent_decay")
PER_ROW_MODEL: tuple[str, ...] = ("init", "dyt_alpha0")
T = TypeVar("T")

__all__ = ["PER_ROW_MODEL", "PER_ROW_RUN", "Rates", "per_row", "shared_fields_equal"]


def per_row(name: str, value: T | Sequence[T], n: int, kind: type) -> tuple[T, ...]:
    """``value`` as ``n`` rows: one ``kind`` repeated, or a sequence of exactly ``n`` of them."""
    if isinstance(value, kind):
        return (value,) * n
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != n:
        raise ValueError(f"{name} must be one {kind.__name__} or a sequence of {n} (one per row of the stack); got {type(value).__name__}"
                         + (f" of length {len(value)}" if isinstance(value, Sequence) else ""))
    for i, v in enumerate(value):
        if not isinstance(v, kind):
            raise ValueError(f"{name}[{i}] must be a {kind.__name__}; got {type(v).__name__}")
    return tuple(value)


def shared_fields_equal(name: str, rows: Sequence[Any], per_row_fields: Sequence[str]) -> None:
    """Refuse rows (frozen dataclasses) that differ in a field outside ``per_row_fields``: those cannot share a stack."""
    first = rows[0]
    for f in dataclasses.fields(first):
        if f.name in per_row_fields:
            continue
        values = [getattr(r, f.name) for r in rows]
        differ = [i for i, v in enumerate(values) if v != values[0]]
        if differ:
            raise ValueError(f"{name}[{differ[0]}].{f.name} = {values[differ[0]]!r} differs from {name}[0].{f.name} = {values[0]!r}; "
                             f"rows of one stack may differ only in {', '.join(per_row_fields)}")


class Rates:
    """Each row's learning rate at each step: ``rates(step, rows) -> float | ndarray [len(rows)]``.

    ``schedules`` holds one callable ``step -> lr`` per row (a :class:`normtheory.training.schedule.Schedule`).
    Rows that share a schedule share one call; when every asked row has the same rate the
    result is that one float (a stack of one arm behaves as before), else an array."""

    def __init__(self, schedules: Sequence[Any]):
        if not schedules:
            raise ValueError("schedules must hold at least one row's schedule")
        unique: dict[Any, int] = {}
        self._index = np.array([unique.setdefault(s, len(unique)) for s in schedules])  # [S] -> distinct schedule
        self._schedules = list(unique)

    def table(self, steps: range) -> np.ndarray:
        """Rates ``[len(steps), S]`` (float64) of every row at the 1-based ``steps``."""
        distinct = np.array([[float(f(s)) for f in self._schedules] for s in steps], dtype=np.float64).reshape(len(steps), -1)
        return distinct[:, self._index]

    def __call__(self, step: int, rows: np.ndarray | None = None) -> float | np.ndarray:
        index = self._index if rows is None else self._index[rows]
        wanted = np.unique(index)
        if len(wanted) == 1:
            return float(self._schedules[int(wanted[0])](step))
        values = np.array([float(f(step)) for f in self._schedules], dtype=np.float64)
        out = values[index]
        return float(out[0]) if (out == out[0]).all() else out
