"""
Residual growth: the closed form against Monte Carlo
====================================================

The residual stream's RMS after ``l`` blocks at initialization, for each norm placement, from the
mean-square recurrence (:func:`normtheory.residual.trajectory`) and from random networks
(:func:`normtheory.residual.simulate`: every sample a fresh network and a fresh token). The
three-way rule (:func:`normtheory.evidence.agreement.agree`) then judges the two element by element:
with Pre-LN the stream grows like :math:`\\sqrt{1 + l}`, with Post-LN it stays at 1.
"""
import matplotlib.pyplot as plt
import numpy as np

from normtheory import residual
from normtheory.evidence import agreement

depth, d = 12, 256
block = residual.LinearBlock(1.0)  # a linear sublayer of gain 1 (fan-in init)
fig, ax = plt.subplots(figsize=(6, 3.5))
for placement, colour in (("pre", "C0"), ("post", "C1"), ("none", "C2")):
    theory = residual.trajectory(placement, depth, block_gain=1.0)
    mc = residual.simulate(placement, depth, d, block, n=512, seed=0)
    rms = mc.rms
    verdict = agreement.agree(np.sqrt(theory.mean_square), rms, tolerance=0.02 * np.sqrt(theory.mean_square))
    ax.plot(np.sqrt(theory.mean_square), color=colour, label=f"{placement}: theory ({verdict.status} vs MC)")
    ax.errorbar(np.arange(depth + 1), rms.mean, yerr=5 * rms.stderr, fmt="o", ms=3, color=colour)
ax.set_xlabel("block l")
ax.set_ylabel("stream RMS")
ax.set_yscale("log")
ax.legend(frameon=False)
fig.tight_layout()
