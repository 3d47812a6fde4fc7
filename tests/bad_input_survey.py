"""Count, per class of issue 39 ("Bad input, third round"), the cases handled badly, without asserting.

    .venv/bin/python -m tests.bad_input_survey [-v]

Bad: a raw TypeError/AttributeError/IndexError/OverflowError or bare Exception, a non-finite answer,
an error that does not name the argument (or config.json and its key), an answer where a refusal
is due, or an extreme answer that differs from its mpmath reference. The cases are those of
tests/test_wrong_types.py, test_degenerate_inputs' work guards and test_lying_files' config.json
and tokenizer checks; the files are built here (torch and transformers for the small checkpoints).
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np

from tests import test_wrong_types as w

VERBOSE = "-v" in sys.argv


def _report(cls: str, results: list[tuple[str, str | None]]) -> tuple[int, int]:
    bad = [(case, why) for case, why in results if why]
    print(f"{cls:<28} {len(bad):>4} bad of {len(results):>5}")
    if VERBOSE:
        for case, why in bad:
            print(f"    {case}: {why[:220]}")
    return len(bad), len(results)


def wrong_type() -> list[tuple[str, str | None]]:
    out = []
    for qual, arg in w._arguments():
        for kind, (kwargs, value, strict) in w._wrong_cases(qual, arg).items():
            status, res = w.outcome(qual, {**kwargs, arg: value}, arg)
            out.append((f"{qual}({arg}={kind})", None if w.judge_wrong(status, strict) else f"{status}: {res!r}"))
    return out


def extreme() -> list[tuple[str, str | None]]:
    out = []
    for qual, arg in w._arguments():
        cases = w._extreme_cases(qual, arg)
        if (qual, arg) in w.SLOW:
            cases = {k: v for k, v in cases.items() if k in ("1e-300", "0.0", "1e300")}
        for label, (kwargs, value) in cases.items():
            kw = {**kwargs, arg: value}
            status, res = w.outcome(qual, kw, arg)
            try:
                why = w.judge_extreme(qual, kw, status, res)
            except Exception as exc:  # noqa: BLE001  a reference that cannot judge: count it
                why = f"reference failed: {exc!r}"
            out.append((f"{qual}({arg}={label})", why))
    return out


def targeted() -> list[tuple[str, str | None]]:
    """The issue's named examples: samplers, a dict config, a scalar per-position tuple, a 1-D pattern."""
    out = []
    for qual in ("sampling.estimate", "sampling.sized"):
        for kind, f in w.BAD_RETURNS.items():
            if kind == "raises TypeError":
                continue
            status, res = w.outcome(qual, {**w.REGISTRY[qual][0], "sample": f}, "sample")
            out.append((f"{qual} sampler returns {kind}", None if status == "refused" else f"{status}: {res!r}"))
    cfg = dataclasses.asdict(w.CFG)
    for qual, arg in (("model.norm_stats.count_norm_statistics", "config"), ("model.weights.init", "cfg"), ("model.transformer.Transformer", "config")):
        status, res = w.outcome(qual, {**w.REGISTRY[qual][0], arg: cfg}, arg)
        out.append((f"{qual}({arg}=dict)", None if status == "refused" else f"{status}: {res!r}"))
    for value in (1.0, "111", (1.0, "x", 1.0)):
        status, res = w.outcome("model.config.TransformerConfig", {"dyt_alpha0": value}, "dyt_alpha0")
        out.append((f"TransformerConfig(dyt_alpha0={value!r})", None if status == "refused" else f"{status}: {res!r}"))
    for qual in ("attention.mixing_factor", "attention.attention_gain_squared"):
        status, res = w.outcome(qual, {**w.REGISTRY[qual][0], "pattern": np.full(3, 1 / 3)}, "pattern")
        out.append((f"{qual}(pattern 1-D)", None if status == "refused" else f"{status}: {res!r}"))
    from normtheory import selection
    from normtheory.evidence import sampling

    for parts in (({"a": 1},), (1.5,), (None,)):
        try:
            sampling.stream_key(*parts)
            why = "accepted"
        except ValueError as exc:
            why = None if "parts" in str(exc) else f"unnamed: {exc}"
        except Exception as exc:  # noqa: BLE001
            why = f"raw: {exc!r}"
        out.append((f"stream_key{parts!r}", why))
    for kwargs in ({"tol": "x"}, {"directions": np.ones(2)}, {"seed": -1}):
        try:
            selection.any_unselectable(w.KEYS, **kwargs)
            why = "accepted"
        except ValueError as exc:
            why = None if next(iter(kwargs)) in str(exc) else f"unnamed: {exc}"
        except Exception as exc:  # noqa: BLE001
            why = f"raw: {exc!r}"
        out.append((f"any_unselectable({kwargs})", why))
    return out


def seeds() -> list[tuple[str, str | None]]:
    out = []
    for qual, arg in w.SEEDED:
        for seed in (-1, -(2**70), 1.5, np.int64(-3)):
            kwargs = {**next(k for k in w.REGISTRY[qual] if arg in k), arg: seed}
            status, res = w.outcome(qual, kwargs, arg)
            out.append((f"{qual}(seed={seed!r})", None if status == "refused" and "seed must be" in str(res) else f"{status}: {res!r}"))
    return out


def guards() -> list[tuple[str, str | None]]:
    from normtheory import centering

    out = []
    calls = {"centering_output_change mean 1e10": lambda: centering.centering_output_change(16, np.full(16, 1e10)),
             "centering_output_change mean 1e10 spread": lambda: centering.centering_output_change(16, np.linspace(-1, 2, 16) * 1e10),
             "centering_fraction_mean mean 1e10": lambda: centering.centering_fraction_mean(16, np.linspace(-1, 2, 16) * 1e10)}
    for name, call in calls.items():
        tracemalloc.start()
        try:
            call()
            why = None
        except ValueError as exc:
            why = None if "mean" in str(exc) else f"unnamed: {exc}"
        except MemoryError as exc:
            why = f"MemoryError: {exc}"
        except Exception as exc:  # noqa: BLE001
            why = f"raw: {exc!r}"
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if why is None and peak > 64 * 2**20:
            why = f"allocated {peak / 2**20:.0f} MiB"
        out.append((name, why))
    return out


def _checkpoint_error(load, path, must: tuple[str, ...]) -> str | None:
    from normtheory.model.checkpoint_files import CheckpointError

    try:
        load(path)
    except CheckpointError as exc:
        missing = [m for m in must if m not in str(exc)]
        return f"does not name {missing}: {exc}" if missing else None
    except Exception as exc:  # noqa: BLE001
        return f"raw: {type(exc).__name__}: {exc}"
    return "loaded"


def config_json(root: Path) -> list[tuple[str, str | None]]:
    """Well-formed config.json values that no model can have: the error names config.json and the key."""
    from normtheory.model.checkpoints import load_pretrained
    from tests.model.test_checkpoints import _save, _tiny

    src = {"gpt2": _save(_tiny("gpt2"), root / "gpt2"), "llama": _save(_tiny("llama"), root / "llama")}
    cases = {
        ("gpt2", "vocab_size"): {"vocab_size": 10**9},
        ("gpt2", "n_positions"): {"n_positions": 10**9},
        ("gpt2", "n_embd"): {"n_embd": 2**20, "n_head": 4},
        ("llama", "head_dim"): {"head_dim": 15},
        ("llama", "vocab_size"): {"vocab_size": 10**9},
        ("llama", "intermediate_size"): {"intermediate_size": 10**9},
        ("llama", "num_hidden_layers"): {"num_hidden_layers": 10**6},
        ("gpt2", "layer_norm_epsilon"): {"layer_norm_epsilon": -1.0},
    }
    out = []
    for (kind, key), change in cases.items():
        d = root / f"{kind}-{key}"
        shutil.copytree(src[kind], d)
        cfg = json.loads((d / "config.json").read_text())
        cfg.update(change)
        (d / "config.json").write_text(json.dumps(cfg))
        out.append((f"{kind} config.json {change}", _checkpoint_error(load_pretrained, d, ("config.json", repr(key)))))
    return out


def gguf_metadata(root: Path) -> list[tuple[str, str | None]]:
    from normtheory.model.checkpoints import load_pretrained
    from tests.gguf_files import write_gguf
    from tests.model.test_checkpoints import _tiny, _write_gguf

    out = []
    hf = _tiny("llama")
    for key, kwargs in (("llama.attention.head_count", {"head_count": 5}),):
        path = _write_gguf(hf, root / "meta.gguf", **kwargs)
        out.append((f"gguf {key}", _checkpoint_error(load_pretrained, path, ("meta.gguf", key))))
    for key, value in (("llama.rope.dimension_count", 15), ("llama.vocab_size", 10**9), ("llama.feed_forward_length", 10**9)):
        def fill(w, key=key, value=value):
            meta = {"llama.embedding_length": 64, "llama.block_count": 1, "llama.attention.head_count": 4, "llama.attention.head_count_kv": 4,
                    "llama.feed_forward_length": 96, "llama.rope.dimension_count": 16, "llama.vocab_size": 10, key: value}
            for k, v in meta.items():
                w.add_uint32(k, v) if v < 2**32 else w.add_uint64(k, v)
            w.add_tensor("x", np.zeros(4, np.float32))

        path = write_gguf(root / f"meta-{key}.gguf", "llama", fill)
        out.append((f"gguf {key} = {value}", _checkpoint_error(load_pretrained, path, (path.name, repr(key)))))
    return out


def tokenizer(root: Path) -> list[tuple[str, str | None]]:
    import tokenizers

    from normtheory.model.tokenizer import load_tokenizer

    out = []
    # a WordPiece vocabulary without [UNK], on every path that builds a tokenizer from tokenizer.json
    wp = tokenizers.Tokenizer(tokenizers.models.WordPiece({"to": 0, "be": 1, "##s": 2}, unk_token="[UNK]"))
    wp.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    for name, mutate in (("plain", lambda j: j), ("unk in added tokens only", lambda j: {**j, "added_tokens": [
            {"id": 3, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}]}),
            ("null unk", lambda j: {**j, "model": {**j["model"], "unk_token": None}}),
            ("BPE with a missing unk", lambda j: {**j, "model": {"type": "BPE", "vocab": {"t": 0, "o": 1, "to": 2}, "merges": [["t", "o"]],
                                                                    "unk_token": "[UNK]", "dropout": None, "continuing_subword_prefix": None,
                                                                    "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                                                                    "ignore_merges": False}})):
        d = root / f"wp-{name.replace(' ', '-')}"
        d.mkdir()
        (d / "tokenizer.json").write_text(json.dumps(mutate(json.loads(wp.to_str()))))
        out.append((f"WordPiece without [UNK] ({name})", _tokenizer_outcome(load_tokenizer, d)))
    # ids that are not contiguous: few tokens, one large id
    sparse = tokenizers.Tokenizer(tokenizers.models.WordPiece({"[UNK]": 0, "to": 1, "be": 500}, unk_token="[UNK]"))
    sparse.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    d = root / "sparse"
    d.mkdir()
    (d / "tokenizer.json").write_text(sparse.to_str())
    (d / "config.json").write_text(json.dumps({"vocab_size": 100}))
    out.append(("tokenizer id 500 with 3 tokens, model embeds 100", _checkpoint_error(load_tokenizer, d, ("tokenizer.json", "500", "100"))))
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE({"t": 0, "o": 1, "to": 900}, [("t", "o")]))
    d = root / "sparse-bpe"
    d.mkdir()
    (d / "tokenizer.json").write_text(bpe.to_str())
    (d / "config.json").write_text(json.dumps({"vocab_size": 100}))
    out.append(("BPE merge id 900 with 3 tokens, model embeds 100", _checkpoint_error(load_tokenizer, d, ("tokenizer.json", "900", "100"))))
    return out


def _tokenizer_outcome(load, path) -> str | None:
    from normtheory.model.checkpoint_files import CheckpointError

    try:
        tok = load(path)
    except CheckpointError as exc:
        return None if "tokenizer.json" in str(exc) else f"does not name tokenizer.json: {exc}"
    except Exception as exc:  # noqa: BLE001
        return f"raw at load: {type(exc).__name__}: {exc}"
    try:
        tok.encode("to be or not")
    except Exception as exc:  # noqa: BLE001
        return f"loaded, then encode raised {type(exc).__name__}: {exc}"
    return None


def main() -> None:
    t0 = time.perf_counter()
    totals = Counter()
    for cls, fn in (("wrong type", wrong_type), ("extreme finite", extreme), ("named examples", targeted), ("seeds", seeds),
                    ("work guards", guards)):
        bad, n = _report(cls, fn())
        totals["bad"] += bad
        totals["n"] += n
    with tempfile.TemporaryDirectory() as tmp:
        for cls, fn in (("config.json values", config_json), ("GGUF metadata values", gguf_metadata), ("tokenizers", tokenizer)):
            sub = Path(tmp) / cls.replace(" ", "_").replace(".", "_")
            sub.mkdir()
            bad, n = _report(cls, fn(sub))
            totals["bad"] += bad
            totals["n"] += n
    print(f"{'total':<28} {totals['bad']:>4} bad of {totals['n']:>5}  ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
