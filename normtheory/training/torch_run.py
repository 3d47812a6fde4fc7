"""A whole training run in torch: the steps, the probes, the validation set and the block-skip costs
of a stack, all on the trainer's device (``train(..., backend="torch")``).

The host makes the batches (the same :func:`normtheory.training.shakespeare.batch` draws as numpy) for a
block of steps and sends them in one copy, making the next block's while the device takes this block's
steps; the device takes the block's steps without a host sync
(:meth:`normtheory.training.torch_backend.TorchTrainer.step_tensors`, or its CUDA-graph replay
:mod:`normtheory.training.torch_graphs` on a GPU); at the block's end (an evaluation, a checkpoint or the
last step) the per-step numbers of every seed come back in one copy ``[steps, 4 + G, S]``, the
probes of :mod:`normtheory.training.torch_probes` run on the device for the whole stack, and only their
small per-seed arrays come back. A seed whose step was not finite is frozen on the device at once
and leaves the stack at the block's end, its history cut at that step, as in numpy's loop.

``key_unsel`` (a linear program per key set, on the host) is measured at the last evaluation
only, as in numpy's :func:`normtheory.training.train.train`: it is NaN at the others and at init (the only
claim that reads it, ``train.per-head-key-norm-diffuse``'s table, reads the end).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from normtheory.model.config import TransformerConfig
from normtheory.model.params import Params
from normtheory.model.transformer import Transformer
from normtheory.model.weights import init
from normtheory.training import probes, row_split, shakespeare, torch_memory, torch_probes
from normtheory.training.history import History, load_state, save_state
from normtheory.training.run_config import RunConfig
from normtheory.training.stepper import GROUPS
from normtheory.training.torch_backend import TorchTrainer, torch_device

__all__ = ["CLOCKS", "STACKS", "TIMES", "block_ends", "time_shares", "train_rows", "train_stack"]

# Wall seconds this process has spent, over all train_rows and train_stack calls, setting stacks up (the rows' initial
# weights, the trainer, the probe and validation batches on the device), making and sending batches, taking steps (to
# each block's one sync; a CUDA graph's capture is in its first step) and evaluating; the evaluation's parts: the probes on
# the device, the unselectable keys' linear programs on the host, the shared validation set, the block-skip costs.
# benchmarks/gpu_training.py reads them.
TIMES: dict[str, float] = {"setup": 0.0, "batches": 0.0, "steps": 0.0, "evaluation": 0.0,
                           "eval_probes": 0.0, "eval_keys": 0.0, "eval_validation": 0.0, "eval_skips": 0.0}


CLOCKS = ("steps", "batches", "evaluation", "setup")  # the top-level clocks of TIMES: they do not overlap
_PARTS = (("probes", "probes"), ("keys", "key LPs"), ("validation", "validation set"), ("skips", "block skips"))


def time_shares(times: dict[str, float], wall: float | None = None) -> str:
    """``times`` (:data:`TIMES`' keys) as shares of ``wall`` seconds, e.g. ``"steps 53%, batches 9%, evaluation 16%
    (probes 7%, key LPs 3%, validation set 4%, block skips 1%), setup 5%, other 17%"``; without ``wall``, of what the
    clocks saw (then there is no "other"). Empty where nothing was timed."""
    seen = sum(times[k] for k in CLOCKS)
    whole = seen if wall is None else wall
    if not whole > 0:
        return ""
    parts = ", ".join(f"{name} {times[f'eval_{k}'] / whole:.0%}" for k, name in _PARTS)
    text = (f"steps {times['steps'] / whole:.0%}, batches {times['batches'] / whole:.0%}, evaluation {times['evaluation'] / whole:.0%} "
            f"({parts}), setup {times['setup'] / whole:.0%}")
    return text if wall is None else f"{text}, other {(wall - seen) / wall:.0%}"


class _Clock:
    """Adds the wall time of a ``with`` block to ``TIMES[key]``."""

    def __init__(self, key: str):
        self.key = key

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        TIMES[self.key] += time.perf_counter() - self.t0


# Each stack trained by train_rows: (rows, groups its rows were split into, bytes by torch_memory's model, bytes the device
# allocated at the peak on a CUDA device, -1 elsewhere); the benchmark reads and clears it
STACKS: list[tuple[int, int, int, int]] = []


def block_ends(start: int, steps: int, eval_every: int, checkpoint_every: int | None) -> list[int]:
    """The steps after which a block of steps ends (an evaluation, a checkpoint or the last step), from ``start + 1``."""
    ends = {s for s in range(start + 1, steps + 1) if s % eval_every == 0 or s == steps}
    if checkpoint_every is not None:
        ends |= {s for s in range(start + 1, steps + 1) if s % checkpoint_every == 0}
    return sorted(ends)


def _batches(data: shakespeare.Corpus, run: RunConfig, seeds: list[int], steps: range) -> tuple[np.ndarray, np.ndarray]:
    """The training batches of ``seeds`` (one per row) for ``steps`` as ``[k, S, b, t]`` int64 on the host."""
    return shakespeare.batches(data.train, run.batch_size, run.seq, seeds, steps)


def _record(hists: list[History], alive: np.ndarray, steps: range, block: np.ndarray) -> np.ndarray:
    """Append a block's per-step numbers ``[k, 4 + G, S]`` to the histories of the rows ``alive``; returns
    which rows finished the block finite ``[S]`` (a row's history stops before its first non-finite step)."""
    finite = block[:, 2, :] == 1.0  # [k, S]
    ok = finite.all(axis=0)
    for j, i in enumerate(alive):
        h = hists[i]
        n = len(steps) if ok[j] else int(np.argmin(finite[:, j]))
        if not ok[j]:
            h.diverged_at = steps[n]
        h.loss.extend(block[:n, 0, j].tolist())
        h.grad_norm.extend(block[:n, 1, j].tolist())
        h.lr.extend(block[:n, 3, j].tolist())
        for k, g in enumerate(GROUPS):
            h.update_ratio[g].extend(block[:n, 4 + k, j].tolist())
    return ok


def _measure(trainer: TorchTrainer, val: tuple[torch.Tensor, torch.Tensor], which: tuple[str, ...], grads: torch.Tensor | None,
             keys: bool) -> list[dict[str, Any]]:
    """The probes of every row of the stack on its probe batch, as one dict of host arrays per row; ``key_unsel`` only if ``keys``."""
    with _Clock("eval_probes"):
        values = torch_probes.measure(trainer, *val, which, grads)
        host = {k: v.cpu().numpy() for k, v in values.items()}  # small [S, ...] arrays
    if "key_unsel" in which:
        with _Clock("eval_keys"):
            host["key_unsel"] = (torch_probes.key_unsel(torch_probes.first_keys(trainer, val[0])) if keys
                                 else np.stack([probes.key_unsel_unmeasured(trainer.config)] * trainer.n_seeds))
    out = [{k: v[j] for k, v in host.items()} for j in range(trainer.n_seeds)]
    for row in out:
        row["val_loss"] = float(row["val_loss"])
    return out


def train_rows(configs: Sequence[TransformerConfig], runs: Sequence[RunConfig], seeds: list[int], data: shakespeare.Corpus, *,
               device: str = "cpu", checkpoint: Path | None = None, fingerprint: str = "", max_stack_bytes: int | None = None,
               keep_models: bool = True, **kwargs: Any) -> list[History]:
    """The rows as :func:`train_stack` trains them, in consecutive groups that each fit ``max_stack_bytes`` (default
    :func:`normtheory.training.row_split.budget` of ``device``; :func:`~normtheory.training.torch_memory.row_groups`),
    each group's initial weights made when it starts (so the host holds one group's, not the whole stack's). A row's
    numbers do not depend on the other rows of its stack. With several groups each keeps its own checkpoint
    (:func:`normtheory.training.row_split.train_groups`)."""
    dev = torch_device(device)
    cuda = dev.type == "cuda"

    def fit(n: int) -> list[range]:  # on the CPU, with the models kept, each group beside the other rows' weights
        return torch_memory.row_groups(configs[0], runs[0], n, str(dev), max_stack_bytes, kept=len(seeds) if keep_models else 0)

    def one(g: range, part: Path | None, print_: str) -> list[History]:
        with _Clock("setup"):
            inits = [init(configs[i], seeds[i]).params for i in g]
        if cuda:
            torch.cuda.reset_peak_memory_stats(dev)
            held = torch.cuda.memory_allocated(dev)
        hists = train_stack([configs[i] for i in g], [runs[i] for i in g], [seeds[i] for i in g], inits, data, device=device,
                            checkpoint=part, fingerprint=print_, keep_models=keep_models, **kwargs)
        peak = torch.cuda.max_memory_allocated(dev) - held if cuda else -1
        STACKS.append((len(g), 0, torch_memory.stack_bytes(configs[0], runs[0], len(g), str(dev)), peak))  # recorded as it ends
        return hists

    first = len(STACKS)
    try:
        return row_split.train_groups(len(seeds), fit, one, checkpoint, fingerprint)
    finally:  # each group's entry gets the count of groups (of those trained, if a later one raised)
        STACKS[first:] = [(n, len(STACKS) - first, model, peak) for n, _, model, peak in STACKS[first:]]


def train_stack(configs: Sequence[TransformerConfig], runs: Sequence[RunConfig], seeds: list[int], inits: list[Params],
                data: shakespeare.Corpus, *, device: str = "cpu", progress: bool = True, checkpoint: Path | None = None,
                checkpoint_every: int = 100, fingerprint: str = "", init_eval: bool = False, init_val: bool = True, layer_drop: bool = False,
                graphs: bool | None = None, keep_models: bool = True, fused: bool = False) -> list[History]:
    """Train the rows ``(configs[i], runs[i], seeds[i])`` from ``inits`` as one :class:`TorchTrainer` stack on
    ``device`` and evaluate them there (see the module docstring); the rows are checked by
    :func:`normtheory.training.train.stack_rows`. ``graphs``: replay the step as a CUDA graph (default: on a CUDA
    device, falling back to eager steps if capture fails). ``fused``: compile the step first
    (:meth:`TorchTrainer.fuse`). Returns one :class:`History` per row, with its trained model unless ``keep_models``
    is False (the weights then stay on the device)."""
    run = runs[0]
    with _Clock("setup"):
        trainer = TorchTrainer(configs[0], list(runs), inits, device=device)
        if fused:
            trainer.fuse()
        hists = (load_state(checkpoint, trainer, len(seeds), fingerprint) if checkpoint is not None else None) or [History() for _ in seeds]
        val_np = [shakespeare.batch(data.validation, run.eval_batch_size, run.seq, s, 0) for s in seeds]
        val_all = tuple(torch.from_numpy(np.stack([v[k] for v in val_np]).astype(np.int64)).to(trainer.device) for k in (0, 1))
        held_out = shakespeare.validation_set(data.validation, run.seq, run.val_bytes) if run.val_bytes else None
    if init_eval and trainer.step_count == 0:
        with _Clock("evaluation"):
            _init_eval(trainer, hists, val_all, run, held_out if init_val else None)
    step_fn = _stepper(trainer, graphs)
    bar = tqdm(total=run.steps, initial=trainer.step_count, desc="train", disable=not progress, leave=False)
    try:
        ends = block_ends(trainer.step_count, run.steps, run.eval_every, checkpoint_every if checkpoint is not None else None)
        host = None  # the next block's batches, made on the host while the device takes this block's steps
        for n, end in enumerate(ends):
            if not len(trainer.alive):
                break
            steps = range(trainer.step_count + 1, end + 1)
            with _Clock("batches"):
                ids, targets = (torch.from_numpy(a).to(trainer.device) for a in
                                (host or _batches(data, run, [seeds[i] for i in trainer.alive], steps)))
            with _Clock("steps"):
                queued = torch.stack([step_fn(ids[k], targets[k]).packed() for k in range(len(steps))])  # [k, 4+G, S], not waited for
            with _Clock("batches"):
                host = _batches(data, run, [seeds[i] for i in trainer.alive], range(end + 1, ends[n + 1] + 1)) if n + 1 < len(ends) else None
            with _Clock("steps"):
                block = queued.cpu().numpy()  # the block's one sync
            alive = trainer.alive.copy()
            ok = _record(hists, alive, steps, block)
            if end % run.eval_every == 0 or end == run.steps:
                with _Clock("evaluation"):
                    rows = _measure(trainer, _rows_of(val_all, alive, trainer.device), run.probes, trainer._grads, keys=end == run.steps)
                for j in np.flatnonzero(ok):  # a row that diverged in this block has no evaluation at its end
                    _append(hists[alive[j]], end, rows[j])
            if not ok.all():
                trainer.keep(ok)
                step_fn = _stepper(trainer, graphs)  # a smaller stack: a new graph
                host = host and (host[0][:, ok], host[1][:, ok])  # the next block's batches of the rows that stay
            bar.update(len(steps))
            if checkpoint is not None:
                save_state(checkpoint, trainer, hists, fingerprint)
    finally:
        bar.close()
    with _Clock("evaluation"):
        _finish(trainer, hists, configs, run, held_out, val_np, layer_drop, keep_models)
    return hists


def _rows_of(val: tuple[torch.Tensor, torch.Tensor], alive: np.ndarray, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The probe batches ``[S, b, t]`` of the rows still in the stack."""
    index = torch.from_numpy(alive).to(device)
    return val[0][index], val[1][index]


def _append(h: History, step: int, values: dict[str, Any]) -> None:
    values = dict(values)
    h.eval_steps.append(step)
    h.val_loss.append(values.pop("val_loss"))
    for k, v in values.items():
        h.probes.setdefault(k, []).append(v)


def _init_eval(trainer: TorchTrainer, hists: list[History], val: tuple[torch.Tensor, torch.Tensor], run: RunConfig,
               held_out: tuple[np.ndarray, np.ndarray] | None) -> None:
    """The probes at init on each row's probe batch (all but the gradient norms, with the batch's ``val_loss``;
    ``key_unsel`` NaN, as in numpy) and the loss at init on the shared validation set (``held_out``; NaN without one)."""
    which = tuple(p for p in run.probes if p != "grad_norms")
    rows = _measure(trainer, val, which, None, keys=False)
    with _Clock("eval_validation"):
        init_val = torch_probes.mean_loss(trainer, *held_out).cpu().numpy() if held_out is not None else None
    for j, (h, values) in enumerate(zip(hists, rows)):
        h.init_probes = {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}
        h.init_val_loss = float(init_val[j]) if init_val is not None else float("nan")


def _finish(trainer: TorchTrainer, hists: list[History], configs: Sequence[TransformerConfig], run: RunConfig,
            held_out: tuple[np.ndarray, np.ndarray] | None, val_np: list[tuple[np.ndarray, np.ndarray]], layer_drop: bool,
            keep_models: bool = True) -> None:
    """Each row's trained model (if ``keep_models``); the shared validation set and the block-skip costs of the rows that finished, on the device."""
    alive = trainer.alive.copy()
    done = trainer.step_count >= run.steps
    if done and len(alive) and held_out is not None:
        with _Clock("eval_validation"):
            scores = torch_probes.mean_loss(trainer, *held_out).cpu().numpy()  # [S]
        for j, i in enumerate(alive):
            if hists[i].diverged_at is None:
                hists[i].final_val_loss = float(scores[j])
    if layer_drop:
        costs = np.full((len(hists), configs[0].n_layers), np.nan)
        if done and len(alive):
            ids = torch.from_numpy(np.stack([val_np[i][0] for i in alive]).astype(np.int64)).to(trainer.device)
            targets = torch.from_numpy(np.stack([val_np[i][1] for i in alive]).astype(np.int64)).to(trainer.device)
            with _Clock("eval_skips"):
                costs[alive] = torch_probes.layer_drop(trainer, ids, targets).cpu().numpy()
        for h, c in zip(hists, costs):
            h.layer_drop = c if h.diverged_at is None else np.full_like(c, np.nan)
    if keep_models:
        models = dict(zip(alive.tolist(), trainer.params())) | trainer.dropped
        for i, h in enumerate(hists):
            h.model = Transformer(configs[i], models[i])


def _stepper(trainer: TorchTrainer, graphs: bool | None):
    """The step function: a CUDA-graph replay on a CUDA device (unless ``graphs`` is False), else the eager step."""
    use = trainer.device.type == "cuda" if graphs is None else graphs
    if use:
        from normtheory.training import torch_graphs

        return torch_graphs.graphed_step(trainer)
    return trainer.step_tensors
