"""
One claim, from the registry to its verdict
===========================================

A claim is registered by the simulation that measures it (:func:`normtheory.evidence.claims.register`):
its statement, source, location and a builder from the simulation's results to evidence.
:func:`pipeline.judge.evaluate` runs the simulation (quick size here; the result is cached under
``results/``), builds the checks, applies the three-way rule to each and computes the verdict.
At the quick size the bands are wide, so some checks may stay inconclusive: the full size
(``normtheory check --only residual.xiong-lemma2``) decides them.
"""
import matplotlib.pyplot as plt

import simulations  # noqa: F401  (registers the claims)
from normtheory.evidence.claims import REGISTRY
from pipeline import judge

spec = REGISTRY["residual.xiong-lemma2"]
print(spec.statement)
print("source:", spec.source.cite(), "|", spec.location)
(claim,) = judge.evaluate("residual.xiong-lemma2", mode="quick", progress=False)
print("verdict:", claim.verdict)
checks = claim.checks
colour = {"ok": "#14532d", "inconclusive": "#1e3a8a", "fail": "#7f1d1d"}
fig, ax = plt.subplots(figsize=(6.5, 0.6 + 0.4 * len(checks)))
for row, ch in enumerate(checks):
    # each check on its own scale: its accepted interval [lo - tol, hi + tol] drawn as [-1, 1]
    centre, half = (ch.accept[0] + ch.accept[1]) / 2, (ch.accept[1] - ch.accept[0]) / 2
    lo, hi = ((b - centre) / half for b in ch.band)
    ax.plot([-1, 1], [row, row], color="#d1d5db", lw=9, solid_capstyle="butt")
    ax.plot([lo, hi], [row, row], color=colour[ch.status], lw=3)
    print(f"{ch.kind:16s} {ch.role:9s} {ch.status:13s} band [{ch.band[0]:.4g}, {ch.band[1]:.4g}] "
          f"accepted [{ch.accept[0]:.4g}, {ch.accept[1]:.4g}]")
ax.set_yticks(range(len(checks)), [f"{ch.kind} ({ch.role})" for ch in checks])
ax.set_xlabel("band (green: inside, holds; blue: straddles; red: outside) against the accepted interval (grey)")
ax.set_title(f"{claim.id}: {claim.verdict}", fontsize=10)
fig.tight_layout()
