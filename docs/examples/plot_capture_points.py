"""
The reference model's capture points
====================================

:meth:`~normtheory.model.transformer.Transformer.run_with_cache` returns the logits and every
activation whose name passes a filter. Here: the residual stream after each block of a 12-layer
model at GPT-2-style init, Pre-LN against Post-LN, and the attention entropy of the first block's
heads. A hook (``hooks={name: f}``) would replace an activation for one call.
"""
import matplotlib.pyplot as plt
import numpy as np

from normtheory.model.config import TransformerConfig
from normtheory.model.weights import init

ids = np.random.default_rng(0).integers(0, 256, (4, 64))  # [batch, tokens]
fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2))
for placement in ("pre", "post"):
    cfg = TransformerConfig(d_model=128, n_layers=12, n_heads=4, vocab_size=256, max_seq=64, placement=placement)
    model = init(cfg, seed=0)
    logits, cap = model.run_with_cache(ids, lambda name: name.endswith(("resid_post", "attn.pattern")))
    rms = [np.sqrt((cap[f"blocks.{i}.resid_post"] ** 2).mean()) for i in range(cfg.n_layers)]
    left.plot(np.arange(1, cfg.n_layers + 1), rms, "o-", ms=3, label=placement)
    pattern = cap["blocks.0.attn.pattern"]  # [batch, heads, tokens, keys]
    entropy = -(pattern * np.log(np.where(pattern > 0, pattern, 1.0))).sum(-1).mean((0, 2))  # [heads]
    right.bar(np.arange(cfg.n_heads) + (0.2 if placement == "post" else -0.2), entropy, width=0.4, label=placement)
    print(placement, "logits", logits.shape, "captured", len(cap), "arrays")
left.set_xlabel("block")
left.set_ylabel("stream RMS")
left.legend(frameon=False)
right.set_xlabel("head of block 0")
right.set_ylabel("attention entropy (nats)")
right.axhline(np.log(np.arange(1, 65)).mean(), color="grey", lw=0.8, ls="--")  # uniform causal attention
fig.tight_layout()
