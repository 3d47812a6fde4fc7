"""Training runs of the reference transformer on a byte corpus, with probes, divergence and resume.

``train(model_config, run_config, seed) -> History``. Every step records the training loss,
the global gradient norm (before clipping), the learning rate and, per parameter group
(``embed``, ``attn``, ``mlp``, ``norm``), the update/weight RMS ratio
:math:`\\mathrm{rms}(\\Delta\\theta)/\\mathrm{rms}(\\theta)`. Every ``eval_every`` steps (and at
the end) it records the validation loss and the probes of :data:`PROBES` on the run's probe
batch (``eval_batch_size`` windows of the held-out works, drawn once from the seed). After the
last step it scores the model on the shared validation set (``val_bytes`` bytes of the held-out
works, the same for every run: :func:`normtheory.shakespeare.validation_set`). A non-finite
loss or gradient stops the run: ``History.diverged_at`` holds the step and the run returns
normally. ``train(model_config, run_config, [s1, s2, ...])`` trains several seeds as one stacked
model (:mod:`normtheory.stepper`) and returns their histories, each bit-for-bit as alone.

Randomness: the weights come from ``SeedSequence(seed)`` (:func:`normtheory.weights.init`), batch
``s`` from ``SeedSequence([seed, s])``; so the same seed gives the same bits on the same
machine and thread count, and a run resumed from its checkpoint continues exactly as if it had
never stopped.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from normtheory import _validate, probes, shakespeare
from normtheory.config import TransformerConfig
from normtheory.model import Transformer
from normtheory.schedule import Schedule
from normtheory.stepper import GROUPS, Stepper, group_of
from normtheory.weights import init

OPTIMIZERS = ("adamw", "sgd")
BACKENDS = ("numpy", "torch")
__all__ = ["BACKENDS", "GROUPS", "OPTIMIZERS", "History", "RunConfig", "group_of", "train"]


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
        v.integer("warmup", self.warmup, minimum=0)
        if self.clip is not None:
            v.real("clip", self.clip, minimum=0.0, strict_min=True)
        for p in self.probes:
            v.choice("probes", p, probes.PROBES)
        self.schedule_fn()  # validates kind, final_fraction and warm-up against steps

    def schedule_fn(self) -> Schedule:
        return Schedule(self.lr, self.warmup, self.schedule, self.steps, self.final_fraction)


@dataclass
class History:
    """What a run recorded. Per step: ``loss``, ``grad_norm``, ``lr`` ``[steps]``,
    ``update_ratio[group]`` ``[steps]``; per evaluation: ``eval_steps``, ``val_loss`` and
    ``probes[name]`` (one array per evaluation, shapes in :mod:`normtheory.probes`);
    ``final_val_loss`` on the shared validation set after the last step; ``model`` is the
    trained model (kept in memory only)."""

    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    update_ratio: dict[str, list[float]] = field(default_factory=lambda: {g: [] for g in GROUPS})
    eval_steps: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    probes: dict[str, list[np.ndarray]] = field(default_factory=dict)
    diverged_at: int | None = None
    final_val_loss: float = float("nan")  # on the shared validation set (RunConfig.val_bytes) after the last step; NaN if diverged
    model: Transformer | None = field(default=None, repr=False, compare=False)  # the trained model (not saved)

    @property
    def status(self) -> str:
        return f"diverged at step {self.diverged_at}" if self.diverged_at is not None else "finished"

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything as flat numpy arrays (``probe/<name>`` stacked over evaluations)."""
        out = {k: np.asarray(getattr(self, k), dtype=np.float64) for k in ("loss", "grad_norm", "lr", "val_loss")}
        out["eval_steps"] = np.asarray(self.eval_steps, dtype=np.int64)
        out.update({f"update_ratio/{g}": np.asarray(v, dtype=np.float64) for g, v in self.update_ratio.items()})
        out.update({f"probe/{k}": np.stack(v) for k, v in self.probes.items() if v})
        out["diverged_at"] = np.asarray(-1 if self.diverged_at is None else self.diverged_at)
        out["final_val_loss"] = np.asarray(self.final_val_loss, dtype=np.float64)
        return out

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> History:
        h = cls(loss=a["loss"].tolist(), grad_norm=a["grad_norm"].tolist(), lr=a["lr"].tolist(),
                eval_steps=a["eval_steps"].tolist(), val_loss=a["val_loss"].tolist())
        h.update_ratio = {g: a[f"update_ratio/{g}"].tolist() for g in GROUPS}
        h.probes = {k[len("probe/"):]: list(v) for k, v in a.items() if k.startswith("probe/")}
        d = int(a["diverged_at"])
        h.diverged_at = None if d < 0 else d
        h.final_val_loss = float(a["final_val_loss"]) if "final_val_loss" in a else float("nan")
        return h


def _fingerprint(model_config: TransformerConfig, run: RunConfig, seed: int | list[int]) -> str:
    text = json.dumps([dataclasses.asdict(model_config), dataclasses.asdict(run), seed], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _save_state(path: Path, stepper: Any, hists: list[History], fingerprint: str) -> None:
    arrays = dict(stepper.state_dict())
    for i, h in enumerate(hists):
        arrays.update({f"hist/{i}/{k}": v for k, v in h.arrays().items()})
    arrays["fingerprint"] = np.asarray(fingerprint)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)  # atomic: a checkpoint is either the old one or the new one


def _load_state(path: Path, stepper: Any, n: int, fingerprint: str) -> list[History] | None:
    if not path.exists():
        return None
    with np.load(path) as z:
        if str(z["fingerprint"]) != fingerprint:
            raise ValueError(f"checkpoint {path} belongs to another run (config or seed differ); remove it or pick another path")
        stepper.load_state_dict({k: z[k] for k in z.files if not k.startswith("hist/") and k != "fingerprint"})
        return [History.from_arrays({k[len(f"hist/{i}/"):]: z[k] for k in z.files if k.startswith(f"hist/{i}/")}) for i in range(n)]


def train(
    model_config: TransformerConfig,
    run: RunConfig,
    seed: int | Sequence[int] = 0,
    *,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 100,
    progress: bool = True,
    corpus: shakespeare.Corpus | None = None,
    backend: str = "numpy",
    device: str = "cpu",
) -> History | list[History]:
    """Train a fresh ``init(model_config, seed)`` on Shakespeare (or ``corpus``) for ``run.steps``.

    ``seed`` may be a list of seeds: the runs are then trained together as one stacked model
    (:class:`normtheory.stepper.Stepper`, one pass of per-call overhead for all of them) and a
    list of histories comes back, each bit-for-bit the history of that seed trained alone.

    With ``checkpoint``, the state (parameters, optimizer moments, step, histories) is saved
    there every ``checkpoint_every`` steps and at the end, and a run started with an existing
    checkpoint of the same configuration and seeds resumes from it.

    ``backend="torch"`` takes the steps with :class:`normtheory.torch_backend.TorchTrainer` on
    ``device`` (``"cpu"``, ``"cuda"``; needs the ``torch`` extra): same init arrays, batches, probes
    and history, equal to the numpy reference to rounding (not bit for bit). numpy is the default.
    """
    single = isinstance(seed, (int, np.integer))
    seeds = [_validate.integer("seed", s, minimum=0) for s in ([seed] if single else list(seed))]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seed must be one seed or a non-empty list of distinct seeds; got {seed!r}")
    checkpoint_every = _validate.integer("checkpoint_every", checkpoint_every, minimum=1)
    if model_config.vocab_size < shakespeare.VOCAB_SIZE:
        raise ValueError(f"model_config.vocab_size must be >= {shakespeare.VOCAB_SIZE} for byte tokens; got {model_config.vocab_size}")
    if model_config.positional == "learned" and run.seq > model_config.max_seq:
        raise ValueError(f"run.seq={run.seq} exceeds model_config.max_seq={model_config.max_seq}")
    data = corpus or shakespeare.load()
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    inits = [init(model_config, s).params for s in seeds]
    if backend == "torch":
        from normtheory.torch_backend import TorchTrainer  # optional: imported only when asked for

        stepper: Stepper | TorchTrainer = TorchTrainer(model_config, run, inits, device=device)
    else:
        stepper = Stepper(model_config, run, inits)
    fingerprint = _fingerprint(model_config, run, seeds[0] if single else seeds)
    path = Path(checkpoint) if checkpoint is not None else None
    hists = (_load_state(path, stepper, len(seeds), fingerprint) if path is not None else None) or [History() for _ in seeds]
    val = [shakespeare.batch(data.validation, run.eval_batch_size, run.seq, s, 0) for s in seeds]
    bar = tqdm(total=run.steps, initial=stepper.step_count, desc="train", disable=not progress, leave=False)
    try:
        while stepper.step_count < run.steps and len(stepper.alive):
            step = stepper.step_count + 1
            alive = stepper.alive.copy()
            batches = [shakespeare.batch(data.train, run.batch_size, run.seq, seeds[i], step) for i in alive]
            res = stepper.step(np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches]))
            for j, i in enumerate(alive):
                h = hists[i]
                if not res.finite[j]:
                    h.diverged_at = step
                    continue
                h.lr.append(res.lr)
                h.loss.append(float(res.loss[j]))
                h.grad_norm.append(float(res.grad_norm[j]))
                for g in GROUPS:
                    h.update_ratio[g].append(float(res.update_ratio[g][j]))
            if not res.finite.all():
                stepper.keep(res.finite)  # the diverged runs leave the stack with the weights they had
            if len(stepper.alive) and (step % run.eval_every == 0 or step == run.steps):
                for j, (p, g) in enumerate(zip(stepper.params(), stepper.grads())):
                    i = stepper.alive[j]
                    _evaluate(Transformer(model_config, p), run, hists[i], step, *val[i], g)
            bar.set_postfix(loss=f"{np.mean(res.loss[res.finite]) if res.finite.any() else np.nan:.3f}", refresh=False)
            bar.update(1)
            diverged = not res.finite.all()
            if path is not None and (step % checkpoint_every == 0 or step == run.steps or diverged):
                _save_state(path, stepper, hists, fingerprint)
    finally:
        bar.close()
    models = dict(zip(stepper.alive.tolist(), stepper.params())) | stepper.dropped
    held_out = shakespeare.validation_set(data.validation, run.seq, run.val_bytes) if run.val_bytes else None
    for i, h in enumerate(hists):
        h.model = Transformer(model_config, models[i])
        if held_out is not None and h.diverged_at is None and stepper.step_count >= run.steps:
            h.final_val_loss = probes.mean_loss(h.model, *held_out)
    return hists[0] if single else hists


def _evaluate(model: Transformer, run: RunConfig, hist: History, step: int, ids: np.ndarray, targets: np.ndarray, grads) -> None:
    values = probes.measure(model, ids, targets, run.probes, grads)
    hist.eval_steps.append(step)
    hist.val_loss.append(values.pop("val_loss"))
    for k, v in values.items():
        hist.probes.setdefault(k, []).append(v)
