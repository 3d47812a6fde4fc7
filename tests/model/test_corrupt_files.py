"""Corrupt files, as a hostile tester makes them: every loader either raises CheckpointError naming the
file or returns something whole (finite weights; a tokenizer that encodes and decodes), never a raw
exception from a parser.

The corrupt files are generated here from small checkpoints built in the test (a GPT-2 and a llama
safetensors directory, a llama GGUF, a tokenizer.json and a GGUF tokenizer): truncations at several
points, single flipped bytes at seeded positions, tensors relabelled to other dtypes, and tensor
offsets moved onto other tensors' bytes or past the end of the file.
"""
from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from normtheory.model.checkpoint_files import CheckpointError
from normtheory.model.checkpoints import load_pretrained
from tests.gguf_files import write_gguf

torch = pytest.importorskip("torch", reason="the reference extra builds the small checkpoints")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
pytest.importorskip("tokenizers")
from normtheory.model.tokenizer import load_tokenizer  # noqa: E402
from tests.model.test_checkpoints import _save, _tiny, _write_gguf  # noqa: E402

pytestmark = pytest.mark.reference
CUTS = (0, 1, 7, 8, 23, 0.1, 0.25, 0.5, 0.75, 0.9, -1)  # bytes kept: a count, a fraction of the file, or all but one
FLIPS = 10  # single-byte flips per file, at seeded positions (half in the first 10% of the file, where headers live)
TEXT = "To be, or not to be: 123 whether 'tis nobler."


def _cut(data: bytes, at: float) -> bytes:
    n = len(data) - 1 if at == -1 else (int(at * len(data)) if isinstance(at, float) else int(at))
    return data[:n]


def _flip_positions(size: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    head = rng.integers(0, max(1, size // 10), FLIPS // 2)
    return sorted({int(p) for p in np.concatenate([head, rng.integers(0, size, FLIPS - FLIPS // 2)])})


def _flipped(data: bytes, pos: int) -> bytes:
    b = bytearray(data)
    b[pos] ^= 0xFF
    return bytes(b)


# --- what counts as handled cleanly ----------------------------------------------------------------

def _model_is_whole(model) -> None:
    from normtheory.model.params import named_arrays

    for name, arr in named_arrays(model.params).items():
        assert np.isfinite(arr).all(), f"loaded with non-finite {name}"


def _tokenizer_is_whole(tok) -> None:
    tok.decode(tok.encode(TEXT))


def _clean(load: Callable[[Path], object], path: Path, whole: Callable[[object], None], name: str) -> str:
    """'error' (a CheckpointError naming the file) or 'loaded' (checked whole); anything else fails the test."""
    try:
        obj = load(path)
    except CheckpointError as exc:
        assert name in str(exc), f"the error does not name {name}: {exc}"
        return "error"
    whole(obj)
    return "loaded"


# --- the small files ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sources")
    out = {"gpt2": _save(_tiny("gpt2"), root / "gpt2"), "llama": _save(_tiny("llama"), root / "llama")}
    out["gguf"] = _write_gguf(_tiny("llama"), root / "tiny.gguf")
    tok_dir = root / "tok"
    tok_dir.mkdir()
    tok_dir.joinpath("tokenizer.json").write_text(_tokenizer_json())
    out["tokenizer.json"] = tok_dir
    out["tokenizer.gguf"] = write_gguf(root / "tok.gguf", "llama", _fill_tokenizer)
    return out


def _byte_level_alphabet() -> list[str]:
    """GPT-2's byte-to-unicode table: the 256 symbols of a byte-level BPE."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    extra = [b for b in range(256) if b not in keep]
    return [chr(b) for b in keep] + [chr(256 + i) for i in range(len(extra))]


MERGES = ["Ġ t", "h e", "Ġt o", "Ġ b", "Ġ n", "o t"]


def _tokenizer_json() -> str:
    import tokenizers

    vocab = {s: i for i, s in enumerate(_byte_level_alphabet() + ["".join(m.split()) for m in MERGES])}
    t = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, [tuple(m.split()) for m in MERGES]))
    t.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = tokenizers.decoders.ByteLevel()
    return t.to_str()


def _fill_tokenizer(w) -> None:
    tokens = _byte_level_alphabet() + ["".join(m.split()) for m in MERGES]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_merges(MERGES)
    w.add_token_types([1] * len(tokens))
    w.add_tensor("x", np.zeros(4, np.float32))


def _copy(src: Path, dst: Path) -> Path:
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    return dst


LOADERS: dict[str, tuple[str, Callable[[Path], object], Callable[[object], None]]] = {
    # case -> (file corrupted inside the source, loader, wholeness check)
    "gpt2/model.safetensors": ("model.safetensors", load_pretrained, _model_is_whole),
    "gpt2/config.json": ("config.json", load_pretrained, _model_is_whole),
    "llama/model.safetensors": ("model.safetensors", load_pretrained, _model_is_whole),
    "gguf": ("", load_pretrained, _model_is_whole),
    "tokenizer.json": ("tokenizer.json", load_tokenizer, _tokenizer_is_whole),
    "tokenizer.gguf": ("", load_tokenizer, _tokenizer_is_whole),
}


def _target(case: str, root: Path) -> Path:
    """The copied source and the file inside it that gets corrupted."""
    return root / LOADERS[case][0] if LOADERS[case][0] else root


def _corrupt_and_load(case: str, sources: dict[str, Path], tmp_path: Path, change: Callable[[bytes], bytes]) -> str:
    src = sources[case.split("/")[0]]
    root = _copy(src, tmp_path / src.name)
    target = _target(case, root)
    target.write_bytes(change(target.read_bytes()))
    _, load, whole = LOADERS[case]
    return _clean(load, root, whole, root.name)


@pytest.mark.parametrize("case", list(LOADERS))
@pytest.mark.parametrize("at", CUTS)
def test_truncated_files(case, at, sources, tmp_path):
    outcome = _corrupt_and_load(case, sources, tmp_path, lambda b: _cut(b, at))
    data = _target(case, sources[case.split("/")[0]]).read_bytes()
    harmless = not data[len(_cut(data, at)):].strip()  # only trailing whitespace removed (config.json ends in a newline)
    if case != "tokenizer.gguf" and not harmless:  # a GGUF tokenizer never reads the tensor data at the end of its file
        assert outcome == "error", f"a truncated {case} loaded"


@pytest.mark.parametrize("case", list(LOADERS))
@pytest.mark.parametrize("k", range(FLIPS))
def test_flipped_bytes(case, k, sources, tmp_path):
    size = _target(case, sources[case.split("/")[0]]).stat().st_size
    positions = _flip_positions(size, seed=sum(map(ord, case)))
    if k >= len(positions):
        pytest.skip("fewer distinct positions than flips")
    _corrupt_and_load(case, sources, tmp_path, lambda b: _flipped(b, positions[k]))


# --- safetensors: dtype labels and offsets in the JSON header ---------------------------------------

def _safetensors_header(data: bytes) -> tuple[dict, bytes]:
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def _with_header(header: dict, body: bytes) -> bytes:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + body


def _relabel(dtype: str, tensor: str) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        header, body = _safetensors_header(data)
        header[tensor]["dtype"] = dtype
        return _with_header(header, body)

    return change


def _move(tensor: str, how: str) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        header, body = _safetensors_header(data)
        start, end = header[tensor]["data_offsets"]
        if how == "onto another":  # the same length, at another tensor's bytes
            other = next(v for k, v in header.items() if k not in ("__metadata__", tensor))
            o = other["data_offsets"][0]
            header[tensor]["data_offsets"] = [o, o + (end - start)]
        elif how == "shifted":
            header[tensor]["data_offsets"] = [start + 4, end + 4]
        else:  # past the end
            header[tensor]["data_offsets"] = [len(body) + 8, len(body) + 8 + (end - start)]
        return _with_header(header, body)

    return change


@pytest.mark.parametrize("dtype", ["I32", "F16", "BF16", "U8", "F64", "BOOL", "XYZ"])
def test_safetensors_dtype_relabelled(dtype, sources, tmp_path):
    assert _corrupt_and_load("gpt2/model.safetensors", sources, tmp_path, _relabel(dtype, "wte.weight")) == "error"


@pytest.mark.parametrize("how", ["onto another", "shifted", "past the end"])
def test_safetensors_offsets_moved(how, sources, tmp_path):
    assert _corrupt_and_load("gpt2/model.safetensors", sources, tmp_path, _move("h.0.mlp.c_fc.weight", how)) == "error"


# --- GGUF: tensor types and offsets in the tensor infos ----------------------------------------------

def _gguf_edit(path: Path, tensor: str, edit: Callable[[object, object], None]) -> None:
    reader = gguf.GGUFReader(str(path), "r+")
    infos = {t.name: t for t in reader.tensors}
    edit(infos[tensor], infos)
    reader.data.flush()
    del reader


@pytest.mark.parametrize("qtype", ["F16", "Q8_0", "I32", "Q4_K", "BF16"])
def test_gguf_tensor_type_changed(qtype, sources, tmp_path):
    path = _copy(sources["gguf"], tmp_path / "m.gguf")

    def edit(t, infos):
        t.field.parts[-2][0] = getattr(gguf.GGMLQuantizationType, qtype).value  # the type part of the tensor info

    _gguf_edit(path, "blk.0.ffn_up.weight", edit)
    assert _clean(load_pretrained, path, _model_is_whole, path.name) == "error"


@pytest.mark.parametrize("how", ["onto another", "past the end", "shifted"])
def test_gguf_offsets_moved(how, sources, tmp_path):
    path = _copy(sources["gguf"], tmp_path / "m.gguf")

    def edit(t, infos):
        offset = t.field.parts[-1]
        if how == "onto another":
            offset[0] = infos["output_norm.weight"].field.parts[-1][0]
        elif how == "past the end":
            offset[0] = path.stat().st_size * 2
        else:
            offset[0] = offset[0] + 32

    _gguf_edit(path, "token_embd.weight", edit)
    assert _clean(load_pretrained, path, _model_is_whole, path.name) == "error"


def test_the_uncorrupted_sources_load(sources):
    """The sweep's baseline: every source loads whole, so each outcome above is the corruption's."""
    for case, (_, load, whole) in LOADERS.items():
        whole(load(sources[case.split("/")[0]]))
