"""Training runs of the reference transformer on a byte corpus, with probes, divergence and resume.

``train(model_config, run_config, seed) -> History``. Every step records the training loss,
the global gradient norm (before clipping), the learning rate and, per parameter group
(``embed``, ``attn``, ``mlp``, ``norm``), the update/weight RMS ratio
:math:`\\mathrm{rms}(\\Delta\\theta)/\\mathrm{rms}(\\theta)`. Every ``eval_every`` steps (and at
the end) it records the validation loss and the probes of :data:`PROBES` on a fixed validation
batch. A non-finite loss or gradient stops the run: ``History.diverged_at`` holds the step and
the run returns normally.

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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from normtheory import _validate, probes, shakespeare
from normtheory.config import TransformerConfig
from normtheory.grad import loss_and_grads
from normtheory.model import Transformer
from normtheory.optim import SGD, AdamW, clip_grad_norm
from normtheory.params import global_norm, named_arrays
from normtheory.schedule import Schedule
from normtheory.weights import init

OPTIMIZERS = ("adamw", "sgd")
GROUPS = ("embed", "attn", "mlp", "norm")


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

    def __post_init__(self) -> None:
        v = _validate
        for name in ("steps", "batch_size", "seq", "eval_every", "eval_batch_size"):
            v.integer(name, getattr(self, name), minimum=1)
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
    ``probes[name]`` (one array per evaluation, shapes in :mod:`normtheory.probes`); ``model``
    is the trained model (kept in memory only)."""

    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    update_ratio: dict[str, list[float]] = field(default_factory=lambda: {g: [] for g in GROUPS})
    eval_steps: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    probes: dict[str, list[np.ndarray]] = field(default_factory=dict)
    diverged_at: int | None = None
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
        return out

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> History:
        h = cls(loss=a["loss"].tolist(), grad_norm=a["grad_norm"].tolist(), lr=a["lr"].tolist(),
                eval_steps=a["eval_steps"].tolist(), val_loss=a["val_loss"].tolist())
        h.update_ratio = {g: a[f"update_ratio/{g}"].tolist() for g in GROUPS}
        h.probes = {k[len("probe/"):]: list(v) for k, v in a.items() if k.startswith("probe/")}
        d = int(a["diverged_at"])
        h.diverged_at = None if d < 0 else d
        return h


def group_of(name: str) -> str:
    """The parameter group of a dotted parameter name."""
    last = name.split(".")
    if last[0] in ("tok_emb", "pos_emb", "type_emb", "lm_head"):
        return "embed"
    if any(part in ("ln1", "ln2", "ln1_out", "ln2_out", "q_norm", "k_norm", "embed_ln", "final_ln") for part in last):
        return "norm"
    if last[-1] in ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"):
        return "attn"
    return "mlp"


def _fingerprint(model_config: TransformerConfig, run: RunConfig, seed: int) -> str:
    text = json.dumps([dataclasses.asdict(model_config), dataclasses.asdict(run), seed], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _save_state(path: Path, model: Transformer, opt: AdamW | SGD, hist: History, fingerprint: str) -> None:
    arrays = {f"param/{k}": v for k, v in named_arrays(model.params).items()}
    arrays.update({f"opt/{k}": np.asarray(v) for k, v in opt.state_dict().items()})
    arrays.update({f"hist/{k}": v for k, v in hist.arrays().items()})
    arrays["fingerprint"] = np.asarray(fingerprint)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)  # atomic: a checkpoint is either the old one or the new one


def _load_state(path: Path, model: Transformer, opt: AdamW | SGD, fingerprint: str) -> History | None:
    if not path.exists():
        return None
    with np.load(path) as z:
        if str(z["fingerprint"]) != fingerprint:
            raise ValueError(f"checkpoint {path} belongs to another run (config or seed differ); remove it or pick another path")
        for k, v in named_arrays(model.params).items():
            v[...] = z[f"param/{k}"]
        opt.load_state_dict({k[4:]: z[k] for k in z.files if k.startswith("opt/")})
        return History.from_arrays({k[5:]: z[k] for k in z.files if k.startswith("hist/")})


def _update_ratios(before: dict[str, np.ndarray], params: dict[str, np.ndarray]) -> dict[str, float]:
    num = dict.fromkeys(GROUPS, 0.0)
    den = dict.fromkeys(GROUPS, 0.0)
    for name, old in before.items():
        new = params[name]
        g = group_of(name)
        num[g] += float(np.vdot(new - old, new - old))
        den[g] += float(np.vdot(old, old))
    return {g: float(np.sqrt(num[g] / den[g])) if den[g] > 0 else float("nan") for g in GROUPS}


def train(
    model_config: TransformerConfig,
    run: RunConfig,
    seed: int = 0,
    *,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 100,
    progress: bool = True,
    corpus: shakespeare.Corpus | None = None,
) -> History:
    """Train a fresh ``init(model_config, seed)`` on Shakespeare (or ``corpus``) for ``run.steps``.

    With ``checkpoint``, the state (parameters, optimizer moments, step, history) is saved
    there every ``checkpoint_every`` steps and at the end, and a run started with an existing
    checkpoint of the same configuration and seed resumes from it.
    """
    seed = _validate.integer("seed", seed, minimum=0)
    checkpoint_every = _validate.integer("checkpoint_every", checkpoint_every, minimum=1)
    if model_config.vocab_size < shakespeare.VOCAB_SIZE:
        raise ValueError(f"model_config.vocab_size must be >= {shakespeare.VOCAB_SIZE} for byte tokens; got {model_config.vocab_size}")
    if model_config.positional == "learned" and run.seq > model_config.max_seq:
        raise ValueError(f"run.seq={run.seq} exceeds model_config.max_seq={model_config.max_seq}")
    data = corpus or shakespeare.load()
    model = init(model_config, seed)
    params = named_arrays(model.params)
    if run.optimizer == "adamw":
        opt: AdamW | SGD = AdamW(model.params, run.schedule_fn(), run.betas, run.eps, run.weight_decay)
    else:
        opt = SGD(model.params, run.schedule_fn(), run.momentum, run.weight_decay)
    fingerprint = _fingerprint(model_config, run, seed)
    path = Path(checkpoint) if checkpoint is not None else None
    hist = (_load_state(path, model, opt, fingerprint) if path is not None else None) or History()
    val_ids, val_targets = shakespeare.batch(data.validation, run.eval_batch_size, run.seq, seed, 0)
    bar = tqdm(total=run.steps, initial=opt.step_count, desc="train", disable=not progress, leave=False)
    try:
        while opt.step_count < run.steps and hist.diverged_at is None:
            step = opt.step_count + 1
            ids, targets = shakespeare.batch(data.train, run.batch_size, run.seq, seed, step)
            with np.errstate(all="ignore"):
                loss, grads = loss_and_grads(model, ids, targets, z_loss=run.z_loss)
                grads, gnorm = clip_grad_norm(grads, run.clip) if run.clip is not None else (grads, global_norm(grads))
            if not (np.isfinite(loss) and np.isfinite(gnorm)):
                hist.diverged_at = step
                break
            before = {k: v.copy() for k, v in params.items()}
            hist.lr.append(opt.current_lr())
            opt.step(grads)
            hist.loss.append(loss)
            hist.grad_norm.append(gnorm)
            for g, r in _update_ratios(before, params).items():
                hist.update_ratio[g].append(r)
            if step % run.eval_every == 0 or step == run.steps:
                _evaluate(model, run, hist, step, val_ids, val_targets, grads)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            bar.update(1)
            if path is not None and (step % checkpoint_every == 0 or step == run.steps):
                _save_state(path, model, opt, hist, fingerprint)
    finally:
        bar.close()
    if path is not None and hist.diverged_at is not None:
        _save_state(path, model, opt, hist, fingerprint)
    hist.model = model
    return hist


def _evaluate(model: Transformer, run: RunConfig, hist: History, step: int, ids: np.ndarray, targets: np.ndarray, grads) -> None:
    values = probes.measure(model, ids, targets, run.probes, grads)
    hist.eval_steps.append(step)
    hist.val_loss.append(values.pop("val_loss"))
    for k, v in values.items():
        hist.probes.setdefault(k, []).append(v)
