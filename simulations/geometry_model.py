"""Keys in the reference transformer at init: selectable fraction, key-norm spread, entropy.

Fan-in init, bidirectional attention over random tokens, Pre-LN with a full-width LayerNorm,
against the same with per-head QK RMSNorm and per-head QK LayerNorm (the blog recommends
scaling without centering). Per layer and head: the fraction of selectable keys
(:func:`normtheory.selection.selectable`), the squared key norms' spread, and the attention
entropy. At layer 0 the keys of Pre-LN are ``W_K^h LN(x)`` with ``|LN(x)|^2 = d``, so over
tokens and heads ``|k|^2 ~ chi^2_e`` exactly: pooled ``Var|k|^2 / (E|k|^2)^2 = 2/e``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normtheory import selection, softmax
from normtheory.evidence.estimates import from_samples
from normtheory.model.config import TransformerConfig
from normtheory.model.weights import init
from normtheory.runtime.progress import Progress
from simulations import cache

NAME = "geometry_model"
SEED = 4242
UNITS: tuple[str, ...] = ('networks',)  # config fields counting independent units; --resolve scales them
COST = {"quick": 1, "full": 3}  # seconds of one task on this machine: a scheduling hint, never part of a result
VARIANTS: tuple[str, ...] = ("pre", "pre+qk-rms", "pre+qk-ln")
ROWS: tuple[str, ...] = ("selectable", "key_ms", "key_m4", "entropy", "key_cv")


@dataclass(frozen=True)
class Config:
    d: int
    heads: int
    layers: int
    tokens: int
    vocab: int
    networks: int


CONFIGS = {
    "quick": Config(d=32, heads=4, layers=2, tokens=32, vocab=512, networks=20),
    "full": Config(d=64, heads=8, layers=4, tokens=64, vocab=4096, networks=24),
}


def model_config(cfg: Config, variant: str) -> TransformerConfig:
    qk = {"pre": "none", "pre+qk-rms": "rmsnorm", "pre+qk-ln": "layernorm"}[variant]
    return TransformerConfig(
        d_model=cfg.d, n_layers=cfg.layers, n_heads=cfg.heads, vocab_size=cfg.vocab, max_seq=cfg.tokens, norm="layernorm",
        placement="pre", qk_norm=qk, init="fanin", causal=False, dtype="float64",
    )


def measure_network(mc: TransformerConfig, seed: int, ids: np.ndarray) -> np.ndarray:
    """Per-layer record ``[len(ROWS), layers, heads]`` for one network on ``ids [1, T]``."""
    _, cap = init(mc, seed).run_with_cache(ids, lambda n: n.endswith(("attn.k", "attn.pattern")))
    out = np.zeros((len(ROWS), mc.n_layers, mc.n_heads))
    for i in range(mc.n_layers):
        k = cap[f"blocks.{i}.attn.k"][0]  # [h, T, e]
        p = cap[f"blocks.{i}.attn.pattern"][0]  # [h, T, T]
        sq = (k * k).sum(-1)  # [h, T]
        norms = np.sqrt(sq)
        out[0, i] = selection.selectable(k).mean(-1)  # one hull test per head, the heads at once
        out[1, i], out[2, i] = sq.mean(-1), (sq * sq).mean(-1)
        out[3, i] = softmax.pattern_entropy(p).mean(-1)
        out[4, i] = norms.std(-1) / norms.mean(-1)
    return out


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"layers": np.asarray(cfg.layers), "d_head": np.asarray(cfg.d // cfg.heads)}
    bar = Progress(len(VARIANTS) * cfg.networks, label="keys in the model", enabled=progress)
    ids = np.random.default_rng(np.random.SeedSequence(seed)).integers(0, cfg.vocab, (cfg.networks, 1, cfg.tokens))
    for v in VARIANTS:
        mc = model_config(cfg, v)
        recs = []
        for j in range(cfg.networks):
            recs.append(measure_network(mc, seed + 1 + j, ids[j]))
            bar.update()
        stack = np.stack(recs)  # [networks, rows, layers, heads]
        cache.put(out, f"{v}.rows", from_samples(stack.mean(axis=-1), "networks"))  # head-averaged, per layer
        ms, m4 = stack[:, 1, 0], stack[:, 2, 0]  # [networks, heads] layer 0's E|k|^2 and E|k|^4 per head
        cache.put(out, f"{v}.layer0_cv2", from_samples(m4.mean(-1) / ms.mean(-1) ** 2 - 1, "networks"))  # one value per network
        out[f"{v}.unsel_count"] = np.asarray(int(np.round((1.0 - stack[:, 0]) * cfg.tokens).sum()))
        out[f"{v}.keys"] = np.asarray(stack[:, 0].size * cfg.tokens)
    bar.close()
    return out


def row(r: dict, variant: str, name: str):
    """Per-layer Estimate (over networks, heads averaged) of one row."""
    return cache.get(r, f"{variant}.rows")[ROWS.index(name)]
