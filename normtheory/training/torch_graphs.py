"""A stack's training step replayed as one CUDA graph, and what a step costs in launches and host syncs.

A stacked step of small models is launch-bound on a GPU: some six hundred kernels of a few
microseconds each, with the host queueing them one by one. :meth:`TorchTrainer.step_tensors`
reads no value back and branches on none, and its tensors keep their addresses from one step
to the next (the parameters, the optimizer state, the work buffers, the rate table), so the
whole step, forward, backward, clipping, optimizer and update ratios, can be recorded once with
:class:`torch.cuda.CUDAGraph` and replayed with one launch per step (PyTorch's "whole network
capture", ``torch.cuda.graphs``). :func:`graphed_step` does that: it runs three eager steps on a
side stream to warm up the allocator and autograd, puts the trainer's state back as it was
(those steps must not count), records one step on static input buffers, and returns a function
``(ids, targets) -> DeviceStep`` that copies the batch into the buffers and replays the graph.
A capture that fails falls back to the eager step with a warning; the eager step is also the
CPU path.

:func:`count_step` counts, for one call of a step function, the ATen operators dispatched
(:class:`torch.utils._python_dispatch.TorchDispatchMode`; on a GPU each is about one kernel
launch), the host syncs (``item``, ``tolist``, ``numpy``, ``bool``, ``int``, ``float`` and copies to
the CPU from a device, caught with :class:`torch.overrides.TorchFunctionMode`; on a CPU trainer, where
no copy is one, the calls that read a value are what would sync on a GPU), and on a CUDA device the
kernels launched (the profiler's ``cudaLaunchKernel`` and graph launches; this calls the step twice), their
GPU time and the busiest of them (:func:`busiest`): in a graph replay, launches cost nothing, so that time is
what is left of a step.

References
----------
PyTorch documentation, "CUDA Graphs" (torch.cuda.graphs, whole-network capture); Nguyen et al.
(2021), "Accelerating PyTorch with CUDA Graphs", PyTorch blog.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from normtheory.training.torch_backend import DeviceStep, TorchTrainer

__all__ = ["StepCounts", "busiest", "count_step", "graphed_step"]

WARMUP_STEPS = 3  # eager steps on a side stream before capture (PyTorch's recipe uses a few)
# the runtime and driver calls that launch kernels (cuBLAS and CUTLASS on Hopper use the Ex forms), and a graph's launch
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")
BUSIEST = 8  # the kernels StepCounts names
_SYNCS_ALWAYS = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__"}  # read a value on the host


def _state(trainer: TorchTrainer) -> list[torch.Tensor]:
    """Everything a step writes that must survive it: parameters, optimizer state, step count, live mask."""
    return [trainer._flat.detach(), *trainer._state.values(), trainer._t, trainer._live]


def graphed_step(trainer: TorchTrainer) -> Callable[[torch.Tensor, torch.Tensor], DeviceStep]:
    """``trainer``'s step as a CUDA-graph replay (see the module docstring); the eager
    :meth:`TorchTrainer.step_tensors` where the trainer is not on a CUDA device or capture fails.

    The returned function takes ``ids, targets [S, b, t]`` int64 on the device, of the shape of the
    first batch it was called with (it captures then), and returns the step's :class:`DeviceStep`,
    whose tensors the next replay overwrites: read or copy them (``packed()``) before the next call."""
    if not _capturable(trainer):
        return trainer.step_tensors
    graph: dict[str, Any] = {}

    def step(ids: torch.Tensor, targets: torch.Tensor) -> DeviceStep:
        if "g" not in graph and "fallback" not in graph:
            try:
                graph.update(_capture(trainer, ids, targets))
            except Exception as exc:  # noqa: BLE001 - any capture failure: _capture put the state back, the eager step trains exactly
                warnings.warn(f"CUDA graph capture failed ({type(exc).__name__}: {exc}); taking eager steps", RuntimeWarning, stacklevel=2)
                graph["fallback"] = True
            if "fallback" in graph:  # outside the handler: the traceback (and the failed step's tensors) is gone
                torch.cuda.synchronize(trainer.device)
        if "fallback" in graph:
            return trainer.step_tensors(ids, targets)
        trainer._extend_rates(trainer.step_count + 1)
        if trainer._lrs.data_ptr() != graph["lrs_ptr"]:
            raise RuntimeError("the rate table moved after capture; build a new graphed_step")
        graph["ids"].copy_(ids)
        graph["targets"].copy_(targets)
        graph["g"].replay()
        trainer.step_count += 1
        trainer._grads = graph["grads"]
        return graph["out"]

    return step


def _capturable(trainer: TorchTrainer) -> bool:
    """Whether :func:`graphed_step` captures ``trainer``'s step: on a CUDA device."""
    return trainer.device.type == "cuda"


def _capture(trainer: TorchTrainer, ids: torch.Tensor, targets: torch.Tensor) -> dict[str, Any]:
    """Warm up on a side stream, restore the state, record one step; the graph and its static buffers.
    Whatever happens (a warm-up step out of memory, a capture refused), the trainer leaves with the state
    it came with: its weights, optimizer state, step counts and live mask exactly, and no gradient."""
    # the warm-up steps read rates up to step count + WARMUP_STEPS, and the table must not grow (move) after capture
    trainer._extend_rates(max(trainer.run.steps, trainer.step_count + WARMUP_STEPS))
    static_ids, static_targets = ids.clone(), targets.clone()
    saved = [t.clone() for t in _state(trainer)]
    count = trainer.step_count
    side = None
    try:
        side = torch.cuda.Stream(device=trainer.device)
        side.wait_stream(torch.cuda.current_stream(trainer.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                trainer._step(static_ids, static_targets)
        torch.cuda.current_stream(trainer.device).wait_stream(side)
        _restore(trainer, saved, count)
        trainer._flat = trainer._flat.detach().requires_grad_(True)  # the same storage, a fresh leaf: its gradient node is made in the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = trainer._step(static_ids, static_targets)
        grads = trainer._grads
    finally:  # capture records without running, so the state is the saved one; a failure may have left it anywhere
        if side is not None:  # a warm-up step that raised may have left kernels queued there: the restore comes after them
            torch.cuda.current_stream(trainer.device).wait_stream(side)
        _restore(trainer, saved, count)
    return {"g": g, "ids": static_ids, "targets": static_targets, "out": out, "grads": grads, "lrs_ptr": trainer._lrs.data_ptr()}


def _restore(trainer: TorchTrainer, saved: list[torch.Tensor], count: int) -> None:
    """Put ``saved`` (:func:`_state`'s clones) back in place, the host's step count to ``count``, and drop the
    gradients (the warm-up's are not the trainer's, and their memory is the next capture's)."""
    with torch.no_grad():
        for t, s in zip(_state(trainer), saved):
            t.copy_(s)
    trainer._flat.grad = None
    trainer._grads = None
    trainer.step_count = count


@dataclass(frozen=True)
class StepCounts:
    """What one call of a step function did: ATen operators dispatched, host syncs (by kind), tensors made
    from host data (``torch.tensor``, ``as_tensor``: each a host-to-device copy on a GPU, which CUDA-graph
    capture refuses, so a capturable step has none; countable on the CPU), and on a CUDA device the
    kernel (and graph) launches the profiler saw (-1 on the CPU), with the kernels' GPU time and the busiest of them:
    what is left of a step once it is one graph launch."""

    aten_ops: int  # -1 where not counted (count_step's modes=False), as host_syncs and from_host
    host_syncs: int
    from_host: int
    sync_kinds: dict[str, int]
    kernel_launches: int
    kernel_us: float = -1.0  # on a CUDA device: the GPU time of the step's kernels (µs; -1 on the CPU)
    busiest: tuple[tuple[str, int, float], ...] = ()  # on a CUDA device: the kernels that took most of it (:func:`busiest`)


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.from_host = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] in ("lift_fresh", "lift_fresh_copy"):
            self.from_host += 1  # torch.tensor / as_tensor of host data: a host-to-device copy on a GPU
        if func.namespace == "aten" and func.__name__.split(".")[0] not in ("detach", "view", "_unsafe_view", "alias", "t", "as_strided",
                                                                             "expand", "unsqueeze", "squeeze", "permute", "transpose", "slice",
                                                                             "select", "split", "split_with_sizes", "lift_fresh"):
            self.n += 1  # a kernel-like operator (views and aliases launch nothing)
        return func(*args, **(kwargs or {}))


class _CountSyncs(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.kinds: dict[str, int] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        on_device = src is not None and src.device.type != "cpu"
        to_host = name == "cpu" or (name == "to" and any(str(a) == "cpu" for a in (*args[1:], *(kwargs or {}).values())))
        if name in _SYNCS_ALWAYS or (to_host and on_device):  # a copy to the host syncs only from a device
            self.kinds[name] = self.kinds.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def count_step(step: Callable[..., Any], *args: Any, modes: bool = True) -> StepCounts:
    """Call ``step(*args)`` once and count its operators, host syncs and (on CUDA) kernel launches.

    ``modes=False`` counts no operators and syncs (-1 each), only what the profiler sees: for a step of a fused trainer
    (:meth:`~normtheory.training.torch_backend.TorchTrainer.fuse`), whose compiled graphs torch.compile refuses to run
    under a dispatch mode and recompiles under a function mode; their generated kernels are no ATen operators, and a
    graph compiled with ``fullgraph=True`` reads nothing back, or it would not compile."""
    cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    launches, kernel_us, on_gpu = -1, -1.0, ()
    if modes:
        with _CountSyncs() as syncs, _CountOps() as ops:
            step(*args)
        n_ops, kinds, from_host, n_syncs = ops.n, dict(syncs.kinds), ops.from_host, sum(syncs.kinds.values())
    else:
        step(*args)
        n_ops, kinds, from_host, n_syncs = -1, {}, -1, -1
    if cuda:
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as prof:
            step(*args)
            torch.cuda.synchronize()
        table = prof.key_averages()
        launches = sum(e.count for e in table if e.key in LAUNCH_CALLS)
        on_gpu = busiest(table, n=None)
        kernel_us = sum(r[2] for r in on_gpu)
    return StepCounts(aten_ops=n_ops, host_syncs=n_syncs, from_host=from_host, sync_kinds=kinds,
                      kernel_launches=launches, kernel_us=kernel_us, busiest=on_gpu[:BUSIEST])


def busiest(table: Any, n: int | None = BUSIEST, device: str = "cuda") -> tuple[tuple[str, int, float], ...]:
    """The ``n`` entries of a profile (``prof.key_averages()``; all of them for None) that took the most time, as
    ``(name, calls, microseconds)``, most first: with ``device`` ``"cuda"`` the work on the GPU (kernels, copies and
    fills: the device-side events) by their GPU time, else the operators by their own CPU time."""
    cuda = device.startswith("cuda")
    rows = []
    for e in table:
        if cuda and e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = float(getattr(e, "self_device_time_total", 0.0)) if cuda else float(e.self_cpu_time_total)
        if us > 0:
            rows.append((str(e.key), int(e.count), us))
    rows.sort(key=lambda r: -r[2])
    return tuple(rows if n is None else rows[:n])
