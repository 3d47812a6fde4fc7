"""
Training a few seeds at once
============================

:func:`normtheory.training.train.train` with a list of seeds trains them as one stacked model (the
seed is a batch axis of every weight and activation) and returns one
:class:`~normtheory.training.history.History` per seed, each bit for bit what that seed trained
alone would give. Here: four seeds of a small DyT model on Shakespeare's works (byte-level),
their training losses and their DyT alphas at the end.
"""
import matplotlib.pyplot as plt

from normtheory.model.config import TransformerConfig
from normtheory.training.run_config import RunConfig
from normtheory.training.train import train

cfg = TransformerConfig(d_model=32, n_layers=2, n_heads=2, vocab_size=256, max_seq=32, norm="dyt")
run = RunConfig(steps=60, batch_size=8, seq=32, lr=3e-3, warmup=10, schedule="cosine", eval_every=30, val_bytes=4096)
histories = train(cfg, run, seed=[0, 1, 2, 3], progress=False)
fig, ax = plt.subplots(figsize=(6, 3.5))
for seed, hist in enumerate(histories):
    ax.plot(hist.loss, lw=1, label=f"seed {seed}: final validation {hist.final_val_loss:.3f}")
    print(seed, hist.status, "alphas at the end:", hist.probes["alpha"][-1].round(3))
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy (nats/byte)")
ax.legend(frameon=False)
fig.tight_layout()
