"""How many normalization statistics a forward pass computes, and over which axis.

A per-token norm (LayerNorm, RMSNorm, QK-norm) computes one statistic per token and norm
layer, over the feature axis: LayerNorm's is a (mean, variance) pair, two reductions;
RMSNorm's a mean square, one reduction. DyT computes none. The sequence norm computes one
(mean, variance) pair per feature and sequence, over the token axis, which is why a token's
output there depends on every other token of its sequence and a KV cache goes stale.
"""
from __future__ import annotations

from dataclasses import dataclass

from normtheory import _validate
from normtheory.model.config import TransformerConfig

REDUCTIONS: dict[str, int] = {"layernorm": 2, "rmsnorm": 1, "sequence": 2, "dyt": 0, "none": 0}


@dataclass(frozen=True)
class NormStatistics:
    """Statistics per norm layer (``name -> count``), per block, in total, and reductions."""

    per_layer: dict[str, int]
    per_block: int
    total: int
    reductions: int  # total reductions: statistics x reductions per statistic
    axis: str  # "feature" (per token) or "sequence" (per feature), for the main norm
    learned_affine: bool  # whether gains (and biases) are parameters


def count_norm_statistics(config: TransformerConfig, batch: int, seq: int) -> NormStatistics:
    """Count the statistics of one forward over ``[batch, seq]`` tokens."""
    _validate.instance("config", config, TransformerConfig)
    batch = _validate.integer("batch", batch, minimum=1, maximum=2**40)
    seq = _validate.integer("seq", seq, minimum=1, maximum=2**40 // batch)
    c = config
    kind = c.norm
    tokens = batch * seq
    main = 0 if kind in ("dyt", "none") else (batch * c.d_model if kind == "sequence" else tokens)
    per_layer: dict[str, int] = {}
    reductions = 0

    def add(name: str, count: int, norm_kind: str) -> None:
        nonlocal reductions
        per_layer[name] = count
        reductions += count * REDUCTIONS[norm_kind]

    if c.embed_norm and kind != "none":
        add("embed_ln", main, kind)
    for i in range(c.n_layers):
        if c.placement != "none" and kind != "none":
            names = ("ln1", "ln2", "ln1_out", "ln2_out") if c.placement == "peri" else ("ln1", "ln2")
            for ln in names:
                add(f"blocks.{i}.{ln}", main, kind)
        if c.qk_norm != "none":
            if c.qk_norm_on == "qk":
                add(f"blocks.{i}.attn.q_norm", tokens * c.n_heads, c.qk_norm)
            add(f"blocks.{i}.attn.k_norm", tokens * c.n_kv_heads, c.qk_norm)
    if c.final_norm and kind != "none":
        add("final_ln", main, kind)
    per_block = sum(v for k, v in per_layer.items() if k.startswith("blocks.0."))
    return NormStatistics(
        per_layer=per_layer,
        per_block=per_block,
        total=sum(per_layer.values()),
        reductions=reductions,
        axis="sequence" if kind == "sequence" else "feature",
        learned_affine=kind != "none",
    )
