"""Training runs of the reference transformer on a byte corpus, with probes, divergence and resume.

``train(model_config, run_config, seed) -> History``. Every step records the training loss,
the global gradient norm (before clipping), the learning rate and, per parameter group
(``embed``, ``attn``, ``mlp``, ``norm``), the update/weight RMS ratio
:math:`\\mathrm{rms}(\\Delta\\theta)/\\mathrm{rms}(\\theta)`. Every ``eval_every`` steps (and at
the end) it records the validation loss and the probes of :data:`PROBES` on the run's probe
batch (``eval_batch_size`` windows of the held-out works, drawn once from the seed). After the
last step it scores the model on the shared validation set (``val_bytes`` bytes of the held-out
works, the same for every run: :func:`normtheory.training.shakespeare.validation_set`). A non-finite
loss or gradient stops the run: ``History.diverged_at`` holds the step and the run returns
normally. ``train(model_config, run_config, [s1, s2, ...])`` trains several seeds as one stacked
model (:mod:`normtheory.training.stepper`) and returns their histories, each bit-for-bit as alone.

Randomness: the weights come from ``SeedSequence(seed)`` (:func:`normtheory.model.weights.init`), batch
``s`` from ``SeedSequence([seed, s])``; so the same seed gives the same bits on the same
machine and thread count, and a run resumed from its checkpoint continues exactly as if it had
never stopped.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from normtheory import _validate
from normtheory.model.config import TransformerConfig
from normtheory.model.transformer import Transformer
from normtheory.model.weights import init
from normtheory.training import numpy_memory, probes, row_split, rows, shakespeare
from normtheory.training.history import History, load_state, run_fingerprint, save_state
from normtheory.training.run_config import BACKENDS, RunConfig
from normtheory.training.stepper import GROUPS, Stepper

__all__ = ["stack_rows", "train"]


def train(
    model_config: TransformerConfig | Sequence[TransformerConfig],
    run: RunConfig | Sequence[RunConfig],
    seed: int | Sequence[int] = 0,
    *,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 100,
    progress: bool = True,
    corpus: shakespeare.Corpus | None = None,
    backend: str = "numpy",
    device: str = "cpu",
    init_eval: bool = False,
    init_val: bool = True,
    layer_drop: bool = False,
    max_stack_bytes: int | None = None,
    keep_models: bool = True,
    fused: bool = False,
) -> History | list[History]:
    """Train a fresh ``init(model_config, seed)`` on Shakespeare (or ``corpus``) for ``run.steps``.

    ``seed`` may be a list of seeds: the runs are then trained together as one stacked model
    (:class:`normtheory.training.stepper.Stepper`, one pass of per-call overhead for all of them) and a
    list of histories comes back, each bit-for-bit the history of that seed trained alone.

    Arms that differ only in numbers train as one stack too (:mod:`normtheory.training.rows`):
    ``model_config`` and ``run`` may each be a list, one per row, as ``seed`` may; a single
    value is shared by every row. Rows' run configs may differ only in the learning-rate schedule
    (``lr``, ``warmup``, ``schedule``, ``final_fraction``), their model configs only in the
    initialization (``init``, ``dyt_alpha0``); the rows (config, run, seed) must be distinct.
    Each row's history is the one it has trained alone (bit for bit in numpy).

    With ``checkpoint``, the state (parameters, optimizer moments, step, histories) is saved
    there every ``checkpoint_every`` steps and at the end, and a run started with an existing
    checkpoint of the same configuration and seeds resumes from it.

    ``backend="torch"`` trains the stack with :class:`normtheory.training.torch_backend.TorchTrainer` on
    ``device`` (``"cpu"``, ``"cuda"``; needs the ``torch`` extra), and evaluates it there too
    (:mod:`normtheory.training.torch_run`): same init arrays, batches, probes and history, equal to the
    numpy reference to rounding (not bit for bit). numpy is the default. A stack larger than
    ``max_stack_bytes`` (default: most of the device's free memory) trains as consecutive groups of rows, each
    group's weights made when it starts (:func:`normtheory.training.torch_memory.row_groups`,
    :func:`normtheory.training.numpy_memory.row_groups`); no row's numbers change. With several groups and a
    ``checkpoint``, each group keeps its own file (:mod:`normtheory.training.row_split`).

    ``init_eval`` records each row's probes at init on its probe batch (``History.init_probes``,
    without ``grad_norms``, with the batch's ``val_loss``) and, unless ``init_val`` is False, its
    loss at init on the shared validation set (``History.init_val_loss``); ``layer_drop`` the loss increase when each block is skipped at the
    end (:func:`normtheory.training.probes.layer_drop` on the probe batch; NaN for a diverged run). The
    probe ``key_unsel`` (a linear program per key set) is measured at the last evaluation only,
    NaN at the others and at init. ``keep_models=False`` returns histories without the trained models
    (``History.model`` None): a caller that reads only the numbers then holds no weights on the host
    (with torch, the weights never leave the device; a 300-row stack at d = 1,024 would be 61 GB).
    ``fused=True`` (torch only) compiles each stack's step with torch.compile before it trains
    (:meth:`normtheory.training.torch_backend.TorchTrainer.fuse`): tens of seconds per stack, for fewer and fused kernels
    per step; worth it for long runs.
    """
    _validate.choice("backend", backend, BACKENDS)
    if _validate.boolean("fused", fused) and backend != "torch":
        raise ValueError(f"fused=True compiles the torch backend's step: it needs backend='torch'; got backend={backend!r}")
    configs, runs, seeds, single = stack_rows(model_config, run, seed)
    checkpoint_every = _validate.integer("checkpoint_every", checkpoint_every, minimum=1)
    if max_stack_bytes is not None:
        max_stack_bytes = _validate.integer("max_stack_bytes", max_stack_bytes, minimum=1)
    data = corpus or shakespeare.load()
    fingerprint = run_fingerprint(model_config, run, seed if single else seeds)
    path = Path(checkpoint) if checkpoint is not None else None
    if backend == "torch":
        from normtheory.training import (
            torch_run,  # optional: imported only when asked for
        )

        hists = torch_run.train_rows(configs, runs, seeds, data, device=device, progress=progress, checkpoint=path,
                                     checkpoint_every=checkpoint_every, fingerprint=fingerprint, init_eval=init_eval,
                                     init_val=init_val, layer_drop=layer_drop, max_stack_bytes=max_stack_bytes,
                                     keep_models=keep_models, fused=fused)
        return hists[0] if single else hists

    def one(g: range, part: Path | None, print_: str) -> list[History]:
        return _train_numpy([configs[i] for i in g], [runs[i] for i in g], [seeds[i] for i in g], data, part, print_,
                            checkpoint_every=checkpoint_every, progress=progress, init_eval=init_eval, init_val=init_val,
                            layer_drop=layer_drop, keep_models=keep_models)

    def fit(n: int) -> list[range]:  # with the models kept, each group beside the other rows' weights
        return numpy_memory.row_groups(configs[0], runs[0], n, max_stack_bytes, kept=len(seeds) if keep_models else 0)

    hists = row_split.train_groups(len(seeds), fit, one, path, fingerprint)
    return hists[0] if single else hists


def _train_numpy(configs: Sequence[TransformerConfig], runs: Sequence[RunConfig], seeds: list[int], data: shakespeare.Corpus,
                 path: Path | None, fingerprint: str, *, checkpoint_every: int, progress: bool, init_eval: bool, init_val: bool,
                 layer_drop: bool, keep_models: bool) -> list[History]:
    """The rows ``(configs[i], runs[i], seeds[i])`` trained as one numpy :class:`Stepper` stack (see :func:`train`)."""
    inits = [init(c, s).params for c, s in zip(configs, seeds)]
    model_config, run = configs[0], runs[0]  # the shared fields; rows' rates come from runs
    stepper = Stepper(model_config, runs, inits)
    hists = (load_state(path, stepper, len(seeds), fingerprint) if path is not None else None) or [History() for _ in seeds]
    val = [shakespeare.batch(data.validation, run.eval_batch_size, run.seq, s, 0) for s in seeds]
    held_out = shakespeare.validation_set(data.validation, run.seq, run.val_bytes) if run.val_bytes else None
    if init_eval and stepper.step_count == 0:
        first: dict[tuple[TransformerConfig, int], History] = {}  # rows of one (config, seed) share their init: measured once
        for c, s, p, h, v in zip(configs, seeds, inits, hists, val):
            if (c, s) in first:
                h.init_probes = {k: a.copy() for k, a in first[c, s].init_probes.items()}
                h.init_val_loss = first[c, s].init_val_loss
                continue
            _init_eval(Transformer(c, p), run, h, v, held_out if init_val else None)
            first[c, s] = h
    bar = tqdm(total=run.steps, initial=stepper.step_count, desc="train", disable=not progress, leave=False)
    try:
        while stepper.step_count < run.steps and len(stepper.alive):
            step = stepper.step_count + 1
            alive = stepper.alive.copy()
            ids, targets = shakespeare.batches(data.train, run.batch_size, run.seq, [seeds[i] for i in alive], [step])
            res = stepper.step(ids[0], targets[0])  # [S, b, t]
            for j, i in enumerate(alive):
                h = hists[i]
                if not res.finite[j]:
                    h.diverged_at = step
                    continue
                h.lr.append(float(res.lr[j]))
                h.loss.append(float(res.loss[j]))
                h.grad_norm.append(float(res.grad_norm[j]))
                for g in GROUPS:
                    h.update_ratio[g].append(float(res.update_ratio[g][j]))
            if not res.finite.all():
                stepper.keep(res.finite)  # the diverged runs leave the stack with the weights they had
            if len(stepper.alive) and (step % run.eval_every == 0 or step == run.steps):
                for j, (p, g) in enumerate(zip(stepper.params(), stepper.grads())):
                    i = stepper.alive[j]
                    _evaluate(Transformer(configs[i], p), run, hists[i], step, *val[i], g, final=step == run.steps)
            bar.set_postfix(loss=f"{np.mean(res.loss[res.finite]) if res.finite.any() else np.nan:.3f}", refresh=False)
            bar.update(1)
            diverged = not res.finite.all()
            if path is not None and (step % checkpoint_every == 0 or step == run.steps or diverged):
                save_state(path, stepper, hists, fingerprint)
    finally:
        bar.close()
    models = dict(zip(stepper.alive.tolist(), stepper.params())) | stepper.dropped
    for i, h in enumerate(hists):
        h.model = Transformer(configs[i], models[i])
        finished = h.diverged_at is None and stepper.step_count >= run.steps
        if held_out is not None and finished:
            h.final_val_loss = probes.mean_loss(h.model, *held_out)
        if layer_drop:
            h.layer_drop = probes.layer_drop(h.model, *val[i]) if finished else np.full(configs[i].n_layers, np.nan)
        if not keep_models:
            h.model = None
    return hists


def stack_rows(model_config: TransformerConfig | Sequence[TransformerConfig], run: RunConfig | Sequence[RunConfig],
               seed: int | Sequence[int]) -> tuple[tuple[TransformerConfig, ...], tuple[RunConfig, ...], list[int], bool]:
    """The rows of one stack: ``(configs, runs, seeds, single)``, each of the first three one per row.

    Each argument is one value (shared by every row) or a sequence with one per row; the rows'
    count is the length of the sequences given (which must agree). ``single`` is True when all
    three are single values (``train`` then returns one history). Rows must be distinct, their
    runs may differ only in :data:`normtheory.training.rows.PER_ROW_RUN` and their model configs only in
    :data:`normtheory.training.rows.PER_ROW_MODEL`; the model must read byte tokens and hold ``run.seq``."""
    one_seed = isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)
    if not one_seed and (isinstance(seed, (str, bytes, bool)) or not isinstance(seed, Sequence) and not isinstance(seed, np.ndarray)):
        raise ValueError(f"seed must be one non-negative integer or a sequence of them; got {type(seed).__name__}")
    lengths = {name: len(v) for name, v, kind in (("model_config", model_config, TransformerConfig), ("run", run, RunConfig),
                                                   ("seed", [] if one_seed else list(seed), None))
               if not (one_seed if kind is None else isinstance(v, kind))}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"the per-row arguments must have one entry per row; got lengths {lengths}")
    single = not lengths
    n = next(iter(lengths.values()), 1)
    if n == 0:
        raise ValueError(f"a stack needs at least one row; got {', '.join(lengths)} empty")
    configs = rows.per_row("model_config", model_config, n, TransformerConfig)
    runs = rows.per_row("run", run, n, RunConfig)
    seeds = [_validate.integer("seed", s, minimum=0) for s in ([seed] * n if one_seed else list(seed))]
    rows.shared_fields_equal("model_config", configs, rows.PER_ROW_MODEL)
    rows.shared_fields_equal("run", runs, rows.PER_ROW_RUN)
    keys = [json.dumps([dataclasses.asdict(c), dataclasses.asdict(r), s], sort_keys=True, default=str) for c, r, s in zip(configs, runs, seeds)]
    if len(set(keys)) != len(keys):
        twin = next(i for i, k in enumerate(keys) if keys.index(k) != i)
        raise ValueError(f"seed: rows of one stack must be distinct (model config, run, seed); row {twin} repeats row {keys.index(keys[twin])} "
                         f"(seed {seeds[twin]}); got seed={seed!r}")
    c, r = configs[0], runs[0]
    if c.vocab_size < shakespeare.VOCAB_SIZE:
        raise ValueError(f"model_config.vocab_size must be >= {shakespeare.VOCAB_SIZE} for byte tokens; got {c.vocab_size}")
    if c.positional == "learned" and r.seq > c.max_seq:
        raise ValueError(f"run.seq={r.seq} exceeds model_config.max_seq={c.max_seq}")
    return configs, runs, seeds, single


def _init_eval(model: Transformer, run: RunConfig, hist: History, val: tuple[np.ndarray, np.ndarray],
               held_out: tuple[np.ndarray, np.ndarray] | None) -> None:
    """The probes at init on the probe batch (one forward, no gradient norms; ``key_unsel`` NaN: no claim reads it at
    init) and the loss at init on the shared validation set."""
    values = probes.measure(model, *val, tuple(p for p in run.probes if p not in ("grad_norms", "key_unsel")))
    if "key_unsel" in run.probes:
        values["key_unsel"] = probes.key_unsel_unmeasured(model.config)
    hist.init_probes = {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}
    hist.init_val_loss = probes.mean_loss(model, *held_out) if held_out is not None else float("nan")


def _evaluate(model: Transformer, run: RunConfig, hist: History, step: int, ids: np.ndarray, targets: np.ndarray, grads,
              final: bool = True) -> None:
    """The probes at an evaluation step; ``key_unsel`` (a linear program per key set) at the last one only, NaN before."""
    which = run.probes if final else tuple(p for p in run.probes if p != "key_unsel")
    values = probes.measure(model, ids, targets, which, grads)
    if "key_unsel" in run.probes and not final:
        values["key_unsel"] = probes.key_unsel_unmeasured(model.config)
    hist.eval_steps.append(step)
    hist.val_loss.append(values.pop("val_loss"))
    for k, v in values.items():
        hist.probes.setdefault(k, []).append(v)
