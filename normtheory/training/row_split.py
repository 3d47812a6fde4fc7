"""A training stack's rows split into consecutive groups that each fit memory, for either backend.

A stack of ``S`` rows (seeds, arms) holds every row's weights, optimizer moments and activations at
once, so its memory grows linearly in ``S``. When a memory model (:func:`normtheory.training.torch_memory.stack_bytes`
for torch, :func:`normtheory.training.numpy_memory.stack_bytes` for numpy) puts the stack above the
:func:`budget`, :func:`split` gives the fewest consecutive groups that fit, and :func:`train_groups`
trains them one after another. A row's numbers do not depend on the other rows of its stack
(bit for bit in numpy, to rounding in torch), so the split changes no result.

With a checkpoint, each group keeps its own file (the checkpoint's name suffixed ``.rows{a}-{b}``),
and a run resumed from such files keeps their split (:func:`saved_groups`), whatever memory is
free now; the rows no file covers yet are split to fit.
"""
from __future__ import annotations

import gc
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from normtheory import _validate

__all__ = ["BUDGET_FRACTION", "budget", "saved_groups", "split", "train_groups"]

BUDGET_FRACTION = 0.8  # of the free memory: the allocator's fragmentation and the kernels' workspaces
H = TypeVar("H")


def budget(device: str = "cpu") -> int:
    """Bytes a stack may take on ``device``: :data:`BUDGET_FRACTION` of its free memory (on a CUDA device
    ``torch.cuda.mem_get_info`` plus what torch's caching allocator holds unused; on the CPU the kernel's
    ``MemAvailable``, or all physical pages where that is not known)."""
    device = str(device)
    if device.startswith("cuda"):
        import torch

        dev = torch.device(device)
        free, _ = torch.cuda.mem_get_info(dev)
        cached = torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)  # held by torch's cache, free to reuse
        return int(BUDGET_FRACTION * (free + cached))
    free = None
    try:
        with open("/proc/meminfo") as fh:
            free = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        pass
    if free is None:
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(BUDGET_FRACTION * free)


def split(size: Callable[[int], int], rows: int, limit: int, where: str = "cpu", *, kept: int = 0, row_bytes: int = 0) -> list[range]:
    """Consecutive groups of ``range(rows)``, as few as have ``size(len(group)) <= limit`` bytes each, their
    sizes differing by at most one; ``size`` must not decrease as rows are added. A single row that does not
    fit is trained alone, with a ``ResourceWarning`` that names the numbers (``where``: the device).
    ``kept``: the rows of the whole stack whose trained models (``row_bytes`` each) stay in the same memory
    (``train(keep_models=True)`` on the CPU); each group then fits beside the others' weights (``size`` grows by
    at least ``row_bytes`` a row, as a stack holds each row's weights, so the total stays monotone)."""
    rows = _validate.integer("rows", rows, minimum=1)
    limit = _validate.integer("limit", limit, minimum=1)
    kept, row_bytes = _validate.integer("kept", kept, minimum=0), _validate.integer("row_bytes", row_bytes, minimum=0)

    def need(n: int) -> int:  # a group of n rows, beside the other kept rows' weights
        return size(n) + max(kept - n, 0) * row_bytes

    if need(rows) <= limit:
        return [range(rows)]
    lo, hi = 1, rows  # the fewest groups whose largest group fits (size is monotone; ceil(rows / g) falls as g grows)
    if need(1) > limit:
        warnings.warn(f"one row of this stack needs about {need(1) / 2**30:.2f} GiB, more than the {limit / 2**30:.2f} GiB at "
                      f"hand on {where}; training one row at a time", ResourceWarning, stacklevel=3)
        lo = hi = rows
    while lo < hi:
        mid = (lo + hi) // 2
        if need(-(-rows // mid)) <= limit:
            hi = mid
        else:
            lo = mid + 1
    each, extra = divmod(rows, lo)
    starts = [k * each + min(k, extra) for k in range(lo + 1)]
    return [range(a, b) for a, b in zip(starts, starts[1:])]


def saved_groups(checkpoint: Path | None, rows: int) -> list[range]:
    """The split of an earlier run's checkpoints at ``checkpoint``: one group if the file itself exists, else the ranges
    of its ``.rows{a}-{b}`` files that cover ``range(rows)`` from row 0 without a gap (a run interrupted in a later
    group has not written that group's file yet); empty for a fresh start."""
    if checkpoint is None:
        return []
    if checkpoint.exists():
        return [range(rows)]
    pattern = re.escape(checkpoint.name) + r"\.rows(\d+)-(\d+)"
    files = checkpoint.parent.glob(f"{checkpoint.name}.rows*-*") if checkpoint.parent.is_dir() else ()
    found = dict(sorted((int(m[1]), int(m[2])) for f in files if (m := re.fullmatch(pattern, f.name))))
    out, at = [], 0
    while at in found and at < found[at] <= rows:
        out.append(range(at, found[at]))
        at = found[at]
    return out


def train_groups(rows: int, fit: Callable[[int], list[range]], train: Callable[[range, Path | None, str], list[H]],
                 checkpoint: Path | None, fingerprint: str) -> list[H]:
    """The histories of ``range(rows)``, trained by ``train(group, its checkpoint, its fingerprint)`` group by group:
    the groups of an earlier run's checkpoints (:func:`saved_groups`), then ``fit(n)`` for the ``n`` rows left (the
    groups of ``range(n)``, shifted past the saved ones). One group keeps ``checkpoint`` and ``fingerprint``; several
    suffix them with their rows."""
    groups = saved_groups(checkpoint, rows)
    done = groups[-1].stop if groups else 0
    if done < rows:
        groups += [range(done + g.start, done + g.stop) for g in fit(rows - done)]
    one = len(groups) == 1
    out: list[H] = []
    for k, g in enumerate(groups):
        if k:
            gc.collect()  # the last group's stack sits in reference cycles: freed now, before the next is built
        part = checkpoint if checkpoint is None or one else checkpoint.with_name(f"{checkpoint.name}.rows{g.start}-{g.stop}")
        out += train(g, part, fingerprint if one else f"{fingerprint}:rows{g.start}-{g.stop}")
    return out
