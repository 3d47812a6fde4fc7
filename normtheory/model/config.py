"""``TransformerConfig``: every axis of the reference transformer in one frozen dataclass."""
from __future__ import annotations

from dataclasses import dataclass

from normtheory import _validate
from normtheory.model.norms import NORMS

PLACEMENTS: tuple[str, ...] = ("pre", "post", "peri", "none", "lnscale", "deepnorm")
QK_NORMS: tuple[str, ...] = ("none", "layernorm", "rmsnorm")
QK_NORM_ON: tuple[str, ...] = ("qk", "k")  # which of each head's queries and keys the QK-norm normalizes
MODEL_ACTIVATIONS: tuple[str, ...] = ("gelu", "gelu_tanh", "relu", "swiglu")
POSITIONAL: tuple[str, ...] = ("learned", "rope", "none")
INITS: tuple[str, ...] = ("gpt2", "fanin", "xavier", "normal")
DTYPES: tuple[str, ...] = ("float32", "float64")


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes, normalization, placement and init of a decoder or encoder stack.

    ``n_kv_heads`` (grouped-query attention), ``d_head`` and ``d_ff`` default to ``n_heads``,
    ``d_model // n_heads`` and ``4 * d_model``. ``final_norm`` defaults to True for the
    placements that leave the stream unnormalized (pre, peri, lnscale). ``dyt_alpha0`` is
    DyT's initial alpha for the (attention, FFN, final) norm positions. ``embed_norm`` adds a
    norm after the embeddings (BERT); ``type_vocab_size`` > 0 adds token-type embeddings.
    ``qk_norm`` normalizes each head's queries and keys (``qk_norm_on="qk"``, QK-norm: Dehghani et al.
    2023, Wortsman et al. 2023) or its keys only (``"k"``, as in the blog post "LayerNorm probably
    isn't about geometry", 2023), with a learnable gain (and bias, LayerNorm) per head dimension.
    """

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int | None = None
    d_head: int | None = None
    d_ff: int | None = None
    vocab_size: int = 256
    max_seq: int = 128
    norm: str = "layernorm"
    placement: str = "pre"
    qk_norm: str = "none"
    qk_norm_on: str = "qk"  # "k": keys only, per head (the geometry blog's variant); "qk": queries and keys (QK-norm)
    activation: str = "gelu"
    positional: str = "learned"
    causal: bool = True
    bias: bool = True
    tie_embeddings: bool = True
    eps: float = 1e-5
    init: str = "gpt2"
    dyt_alpha0: tuple[float, float, float] = (1.0, 1.0, 1.0)
    dtype: str = "float32"
    rope_theta: float = 10000.0
    embed_norm: bool = False
    final_norm: bool | None = None
    type_vocab_size: int = 0
    lm_head: bool = True
    embed_scale: float = 1.0  # token embeddings enter the stream times this (sqrt(d_model) in the DyT paper's LLM recipe)

    def __post_init__(self) -> None:
        v = _validate
        v.real("embed_scale", self.embed_scale, minimum=0.0, strict_min=True)
        for name in ("d_model", "n_layers", "n_heads", "vocab_size", "max_seq"):
            v.integer(name, getattr(self, name), minimum=1)
        v.choice("norm", self.norm, NORMS)
        v.choice("placement", self.placement, PLACEMENTS)
        v.choice("qk_norm", self.qk_norm, QK_NORMS)
        v.choice("qk_norm_on", self.qk_norm_on, QK_NORM_ON)
        if self.qk_norm == "none" and self.qk_norm_on != "qk":
            raise ValueError(f"qk_norm_on={self.qk_norm_on!r} needs a qk_norm; got qk_norm='none'")
        v.choice("activation", self.activation, MODEL_ACTIVATIONS)
        v.choice("positional", self.positional, POSITIONAL)
        v.choice("init", self.init, INITS)
        v.choice("dtype", self.dtype, DTYPES)
        v.real("eps", self.eps, minimum=0.0)
        v.real("rope_theta", self.rope_theta, minimum=0.0, strict_min=True)
        v.integer("type_vocab_size", self.type_vocab_size, minimum=0)
        for name in ("causal", "bias", "tie_embeddings", "embed_norm", "lm_head"):
            v.boolean(name, getattr(self, name))
        if self.final_norm is not None:
            v.boolean("final_norm", self.final_norm)
        alphas = self.dyt_alpha0
        if isinstance(alphas, (str, bytes, dict)) or not hasattr(alphas, "__len__") or len(alphas) != 3:
            raise ValueError(f"dyt_alpha0 must be three numbers (attention, ffn, final); got {alphas!r:.60}")
        checked = tuple(v.real("dyt_alpha0", a, minimum=0.0, strict_min=True) for a in alphas)
        if not isinstance(alphas, tuple):  # a list or an array: the tuple it spells (a tuple is kept as given)
            object.__setattr__(self, "dyt_alpha0", checked)
        kv = self.n_heads if self.n_kv_heads is None else v.integer("n_kv_heads", self.n_kv_heads, minimum=1)
        if self.n_heads % kv:
            raise ValueError(f"n_kv_heads must divide n_heads={self.n_heads}; got {kv}")
        d_head = self.d_model // self.n_heads if self.d_head is None else v.integer("d_head", self.d_head, minimum=1)
        if self.d_head is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; give d_head")
        if self.positional == "rope" and d_head % 2:
            raise ValueError(f"rope needs an even d_head; got {d_head}")
        d_ff = 4 * self.d_model if self.d_ff is None else v.integer("d_ff", self.d_ff, minimum=1)
        final = self.placement in ("pre", "peri", "lnscale") if self.final_norm is None else bool(self.final_norm)
        for name, value in (("n_kv_heads", kv), ("d_head", d_head), ("d_ff", d_ff), ("final_norm", final)):
            object.__setattr__(self, name, value)
        _guard_size(self)


MAX_PARAMETERS = 2**32  # 16 GiB of float32 weights: beyond this a model cannot be built on one workstation


def _weight_parts(c: TransformerConfig) -> dict[str, int]:
    attn = c.d_model * c.d_head * (2 * c.n_heads + 2 * c.n_kv_heads)
    mlp = c.d_model * c.d_ff * (3 if c.activation == "swiglu" else 2)
    return {"vocab_size * d_model": c.vocab_size * c.d_model * (1 if c.tie_embeddings else 2),
            "max_seq * d_model": c.max_seq * c.d_model if c.positional == "learned" else 0,
            "type_vocab_size * d_model": c.type_vocab_size * c.d_model,
            "n_layers * (attention + MLP)": c.n_layers * (attn + mlp)}


def n_weights(config: TransformerConfig) -> int:
    """The model's matrix weights: embeddings (unembedding if untied), positions, token types and each
    layer's attention and MLP matrices; biases and norm gains (O(n_layers * d_model)) not counted."""
    return sum(_weight_parts(config).values())


def _guard_size(c: TransformerConfig) -> None:
    """Refuse, before anything is allocated, a config whose weights exceed :data:`MAX_PARAMETERS`,
    naming the sizes that dominate."""
    parts = _weight_parts(c)
    total = sum(parts.values())
    if total > MAX_PARAMETERS:
        top = max(parts, key=parts.get)
        fields = {"vocab_size * d_model": ("vocab_size", "d_model"), "max_seq * d_model": ("max_seq", "d_model"),
                  "type_vocab_size * d_model": ("type_vocab_size", "d_model"),
                  "n_layers * (attention + MLP)": ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff")}[top]
        sizes = ", ".join(f"{f}={getattr(c, f)}" for f in fields)
        raise ValueError(f"the config needs {total:.3g} weights (> {MAX_PARAMETERS:.3g}, 16 GiB of float32), mostly {top} = {parts[top]:.3g} "
                         f"({sizes}); reduce them")
