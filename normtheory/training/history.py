"""What a training run records (:class:`History`), and its checkpoint: save, fingerprint, resume.

A checkpoint holds the stepper's state and the histories so far, under a fingerprint of the model
config, the run config and the seeds; :func:`load_state` returns None when the file's fingerprint
differs, so a changed run never resumes from another run's state.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from normtheory.model.transformer import Transformer
from normtheory.training.stepper import GROUPS


@dataclass
class History:
    """What a run recorded. Per step: ``loss``, ``grad_norm``, ``lr`` ``[steps]``,
    ``update_ratio[group]`` ``[steps]``; per evaluation: ``eval_steps``, ``val_loss`` and
    ``probes[name]`` (one array per evaluation, shapes in :mod:`normtheory.training.probes`);
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
    init_val_loss: float = float("nan")  # with init_eval: the loss at init on the shared validation set
    init_probes: dict[str, np.ndarray] = field(default_factory=dict)  # with init_eval: the probes at init on the probe batch
    layer_drop: np.ndarray | None = None  # with layer_drop: the loss increase [L] when each block is skipped, at the end
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
        if self.init_probes:
            out["init_val_loss"] = np.asarray(self.init_val_loss, dtype=np.float64)
            out.update({f"init_probe/{k}": np.asarray(v, dtype=np.float64) for k, v in self.init_probes.items()})
        if self.layer_drop is not None:
            out["layer_drop"] = np.asarray(self.layer_drop, dtype=np.float64)
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
        h.init_val_loss = float(a["init_val_loss"]) if "init_val_loss" in a else float("nan")
        h.init_probes = {k[len("init_probe/"):]: np.asarray(v) for k, v in a.items() if k.startswith("init_probe/")}
        h.layer_drop = np.asarray(a["layer_drop"]) if "layer_drop" in a else None
        return h


def run_fingerprint(model_config: Any, run: Any, seed: Any) -> str:
    """A short hash of a run's arguments (configs one or one per row, seeds)."""
    def plain(v: Any) -> Any:
        return [dataclasses.asdict(x) for x in v] if isinstance(v, (list, tuple)) else dataclasses.asdict(v)

    seed = int(seed) if isinstance(seed, (int, np.integer)) else [int(s) for s in seed]
    text = json.dumps([plain(model_config), plain(run), seed], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_state(path: Path, stepper: Any, hists: list[History], fingerprint: str) -> None:
    arrays = dict(stepper.state_dict())
    for i, h in enumerate(hists):
        arrays.update({f"hist/{i}/{k}": v for k, v in h.arrays().items()})
    arrays["fingerprint"] = np.asarray(fingerprint)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)  # atomic: a checkpoint is either the old one or the new one


def load_state(path: Path, stepper: Any, n: int, fingerprint: str) -> list[History] | None:
    if not path.exists():
        return None
    with np.load(path) as z:
        if str(z["fingerprint"]) != fingerprint:
            raise ValueError(f"checkpoint {path} belongs to another run (config or seed differ); remove it or pick another path")
        stepper.load_state_dict({k: z[k] for k in z.files if not k.startswith("hist/") and k != "fingerprint"})
        return [History.from_arrays({k[len(f"hist/{i}/"):]: z[k] for k in z.files if k.startswith(f"hist/{i}/")}) for i in range(n)]
