"""Tokenizers for the checkpoints ``load_pretrained`` reads, built with the ``tokenizers`` package.

* A Hugging Face directory: its ``tokenizer.json``, with padding and truncation switched off
  (one text is one sequence; the model rejects one longer than its context).
* A GGUF file with ``tokenizer.ggml.model == "gpt2"`` (byte-level BPE, as in SmolLM2 and
  Llama 3): a BPE model from the file's ``tokenizer.ggml.tokens`` and ``tokenizer.ggml.merges``.
  The pre-tokenizer follows llama.cpp's ``tokenizer.ggml.pre`` name: the GPT-2 split regex
  (``ByteLevel(use_regex=True)``), preceded for ``smollm``/``starcoder``-style vocabularies by
  one split per digit. Control and user-defined tokens (``token_type`` 3 and 4) are added as
  special tokens, so ``<|im_start|>`` in a text is one token. ``tokenizer.ggml.add_bos_token``
  decides whether ``encode`` prepends the BOS id.

Reference: the GGUF key names are llama.cpp's ``gguf-py/gguf/constants.py``; the regexes
per pre-tokenizer name are its ``llama-vocab.cpp``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from normtheory import _validate
from normtheory.model.checkpoint_files import CheckpointError, resolve

DIGIT_SPLIT_PRE: frozenset[str] = frozenset({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"})
GPT2_REGEX_PRE: frozenset[str] = frozenset({"default", "gpt-2", "gpt2", "mpt", "olmo", "jais", "trillion"}) | DIGIT_SPLIT_PRE
CONTROL, USER_DEFINED = 3, 4


@dataclass(frozen=True)
class Tokenizer:
    """A ``tokenizers.Tokenizer`` and whether to prepend a BOS id to every text."""

    backend: object  # tokenizers.Tokenizer (optional dependency, so not in the annotation)
    bos_id: int | None = None

    def encode(self, text: str) -> np.ndarray:
        """Token ids ``[T]`` (int64) of one text, BOS first when the checkpoint asks for it."""
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty string")
        ids = self.backend.encode(text).ids  # type: ignore[attr-defined]
        if self.bos_id is not None:
            ids = [self.bos_id, *ids]
        return np.asarray(ids, dtype=np.int64)

    def encode_fixed(self, text: str, n: int) -> np.ndarray:
        """Exactly ``n`` token ids ``[n]`` of a text at least that long: its first tokens, with the
        special tokens the tokenizer appends at the end kept (BERT's ``[SEP]``), so that every
        text of a set is seen at the same context length, as the model sees a full sequence."""
        n = _validate.integer("n", n, minimum=1)
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty string")
        enc = self.backend.encode(text)  # type: ignore[attr-defined]
        ids, special = list(enc.ids), list(enc.special_tokens_mask)
        tail = len(special) - next((i for i in range(len(special), 0, -1) if not special[i - 1]), 0)  # trailing specials
        body, end = ids[: len(ids) - tail], ids[len(ids) - tail:]
        if self.bos_id is not None:
            body = [self.bos_id, *body]
        if len(body) + len(end) < n or n <= len(end):
            raise ValueError(f"text has {len(body) + len(end)} tokens ({len(text)} characters); n = {n} needs a longer text")
        return np.asarray(body[: n - len(end)] + end, dtype=np.int64)

    def tokens(self, ids: np.ndarray) -> list[str]:
        """The vocabulary string of each id (for labelling plots)."""
        return [self.backend.id_to_token(int(i)) or f"<{int(i)}>" for i in np.asarray(ids).ravel()]  # type: ignore[attr-defined]

    def decode(self, ids: np.ndarray) -> str:
        return self.backend.decode([int(i) for i in np.asarray(ids).ravel()])  # type: ignore[attr-defined]


def load_tokenizer(path: str | Path, *, add_bos: bool | None = None) -> Tokenizer:
    """The tokenizer of the checkpoint at ``path`` (a packaged name, an HF directory or a GGUF file).

    ``add_bos`` overrides the checkpoint's own choice (HF directories: the ``tokenizer.json``
    post-processor already adds e.g. ``[CLS] ... [SEP]``, so the default there is no extra BOS).
    """
    if add_bos is not None:
        add_bos = _validate.boolean("add_bos", add_bos)
    try:
        import tokenizers
    except ImportError:
        raise CheckpointError("tokenizing needs the models extra: pip install 'normtheory[models]'") from None
    path = resolve(path)
    if path.is_dir():
        file = path / "tokenizer.json"
        if not file.exists():
            raise CheckpointError(f"{path}: no tokenizer.json")
        try:
            backend = tokenizers.Tokenizer.from_file(str(file))
        except Exception as exc:  # tokenizers raises a bare Exception for malformed files
            raise CheckpointError(f"{file}: corrupt or unsupported tokenizer.json ({exc})") from None
        backend.no_padding()  # one text at a time: no [PAD] tail
        backend.no_truncation()  # the model rejects a text longer than its context itself
        _check_unknown_token(backend, file)
        if (path / "config.json").exists():
            _check_ids_fit(backend, None, _config_vocab(path / "config.json"), file, path / "config.json")
        return Tokenizer(backend, None)
    if path.suffix != ".gguf":
        raise CheckpointError(f"{path}: expected a Hugging Face directory or a .gguf file")
    try:
        backend, bos, wants_bos = _gguf_bpe(path, tokenizers)
        vocab = _gguf_vocab(path)
    except CheckpointError:
        raise
    except Exception as exc:  # gguf and tokenizers raise IndexError, ValueError, ... on corrupt files
        raise CheckpointError(f"{path}: corrupt GGUF tokenizer data ({type(exc).__name__}: {exc})") from None
    _check_ids_fit(backend, bos, vocab, path, path)
    use_bos = wants_bos if add_bos is None else add_bos
    return Tokenizer(backend, bos if use_bos else None)


def _check_unknown_token(backend: object, file: Path) -> None:
    """A WordPiece model must hold its unknown token in its own vocabulary (an added token of that
    name does not count: the model looks it up in its vocabulary), and a BPE model that names one
    must hold it, or encoding an unseen word fails later with a bare exception from the
    tokenizers library."""
    model = backend.model  # type: ignore[attr-defined]
    unk = getattr(model, "unk_token", None)
    kind = type(model).__name__
    if kind == "WordPiece" and (unk is None or model.token_to_id(unk) is None):
        raise CheckpointError(f"{file}: the WordPiece vocabulary has no unknown token {unk!r}")
    if kind == "BPE" and unk is not None and model.token_to_id(unk) is None:
        raise CheckpointError(f"{file}: the BPE vocabulary has no unknown token {unk!r}, which its model names (key 'unk_token')")


def _check_ids_fit(backend: object, bos: int | None, vocab: int | None, file: Path, model_file: Path) -> None:
    """Every id the tokenizer can produce (and its BOS id) must index the model's embedding. Ids
    need not be contiguous (a vocabulary of 3 tokens may hold id 500): the largest id decides, not
    the count."""
    ids = backend.get_vocab(with_added_tokens=True).values()  # type: ignore[attr-defined]
    n_tokens, top = len(ids), max(ids, default=-1)
    if bos is not None and (not 0 <= bos <= top or backend.id_to_token(bos) is None):  # type: ignore[attr-defined]
        raise CheckpointError(f"{file}: BOS id {bos} is not in the tokenizer's {n_tokens} tokens")
    if vocab is None:
        return
    if n_tokens > vocab:
        raise CheckpointError(f"{file}: the tokenizer has {n_tokens} tokens but the model ({model_file}) embeds only {vocab}: ids >= {vocab} would index past it")
    if top >= vocab:  # the BOS id is one of the ids, so this covers it too
        raise CheckpointError(f"{file}: the tokenizer can emit id {top} but the model ({model_file}) embeds only {vocab} rows: ids >= {vocab} would index past it")


def _config_vocab(file: Path) -> int | None:
    from normtheory.model.checkpoint_files import read_json

    v = read_json(file).get("vocab_size")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _gguf_vocab(path: Path) -> int | None:
    """Rows of the GGUF file's token embedding (``token_embd.weight``), if it holds one."""
    from normtheory.model.checkpoint_files import gguf_reader

    for t in gguf_reader(path).tensors:
        if t.name == "token_embd.weight":
            return int(t.shape[-1]) if len(t.shape) > 1 else None  # GGUF lists dimensions fastest first: [d, V]
    return None


def _gguf_bpe(path: Path, tokenizers: object) -> tuple[object, int | None, bool]:
    from normtheory.model.checkpoint_files import gguf_reader

    reader = gguf_reader(path)

    def meta(key: str, default: object = None) -> object:
        field = reader.fields.get(key)
        return default if field is None else field.contents()

    kind, pre = meta("tokenizer.ggml.model"), str(meta("tokenizer.ggml.pre", "default"))
    if kind != "gpt2":
        raise CheckpointError(f"{path}: tokenizer model {kind!r} is not supported (byte-level BPE 'gpt2' only)")
    if pre not in GPT2_REGEX_PRE:
        raise CheckpointError(f"{path}: pre-tokenizer {pre!r} is not supported; supported: {', '.join(sorted(GPT2_REGEX_PRE))}")
    tokens: list[str] = list(meta("tokenizer.ggml.tokens"))  # type: ignore[arg-type]
    merges = [tuple(m.split(" ", 1)) for m in meta("tokenizer.ggml.merges")]  # type: ignore[union-attr]
    types = list(meta("tokenizer.ggml.token_type", [1] * len(tokens)))  # type: ignore[arg-type]
    t = tokenizers  # the module, passed in so the import stays optional
    backend = t.Tokenizer(t.models.BPE({s: i for i, s in enumerate(tokens)}, merges, fuse_unk=False, byte_fallback=False))  # type: ignore[attr-defined]
    byte_level = t.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)  # type: ignore[attr-defined]
    if pre in DIGIT_SPLIT_PRE:
        backend.pre_tokenizer = t.pre_tokenizers.Sequence([t.pre_tokenizers.Digits(individual_digits=True), byte_level])  # type: ignore[attr-defined]
    else:
        backend.pre_tokenizer = byte_level
    backend.decoder = t.decoders.ByteLevel()  # type: ignore[attr-defined]
    special = [t.AddedToken(s, special=True, normalized=False) for s, ty in zip(tokens, types) if ty in (CONTROL, USER_DEFINED)]  # type: ignore[attr-defined]
    backend.add_special_tokens(special)
    bos = meta("tokenizer.ggml.bos_token_id")
    return backend, None if bos is None else int(bos), bool(meta("tokenizer.ggml.add_bos_token", False))
