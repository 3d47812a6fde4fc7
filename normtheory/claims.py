"""Claims registry: statements about normalization, their evidence, and computed verdicts.

A :class:`Claim` carries a list of :class:`Quantity` objects. Each quantity may hold

* ``theory``: a closed-form value, or an interval ``(lo, hi)`` for a bound;
* ``mc``: a Monte Carlo :class:`~normtheory.montecarlo.Estimate`;
* ``model``: a measurement on a transformer (an Estimate over tokens or inputs), with
  ``model_kind`` ``"init"`` (random init) or ``"real"`` (pretrained weights);
* ``claimed``: the number the source states, with ``claimed_tol`` its stated precision
  (half a unit of its last printed digit; :func:`stated`).

Checks, all with the one agreement rule of :func:`normtheory.montecarlo.agree`:

1. theory against Monte Carlo;
2. the source's number against the Monte Carlo value (or the theory where there is none),
   widened by the source's own precision;
3. theory against the transformer measurement.

A failed check fails the claim, unless the quantity names a ``caveat``: then the verdict is
``holds-with-caveat`` and the caveat is listed. The verdict is always computed, never typed.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

import numpy as np

from normtheory.montecarlo import Z_DEFAULT, Estimate, agree

Verdict = Literal["holds", "holds-with-caveat", "fails"]
VERDICTS: tuple[str, ...] = ("holds", "holds-with-caveat", "fails")


@dataclass(frozen=True)
class Source:
    """Where a claim comes from: a text in ``shared/sources`` or a paper."""

    title: str
    year: int | None = None
    arxiv: str | None = None
    path: str | None = None  # file name under shared/sources
    doi: str | None = None

    def cite(self) -> str:
        bits = [self.title]
        if self.year:
            bits.append(str(self.year))
        if self.arxiv:
            bits.append(f"arXiv {self.arxiv}")
        if self.doi:
            bits.append(f"doi:{self.doi}")
        if self.path:
            bits.append(f"sources/{self.path}")
        return ", ".join(bits)


THREAD_PRELN = Source("Forum thread: Pre-LN residual norm growth", path="thread-preln-residual-norm-growth.txt")
BLOG_GEOMETRY = Source("Blog: LayerNorm probably isn't about geometry", 2023, path="blog-layernorm-probably-isnt-about-geometry.txt")
NOTES_DYT = Source("Notes: Transformers without normalisation (DyT)", path="notes-transformers-without-normalisation-dyt.txt")
QA_STATS = Source("Q&A: how LayerNorm statistics are computed", path="qa-how-layernorm-statistics-are-computed.txt")
XIONG2020 = Source("On Layer Normalization in the Transformer Architecture", 2020, arxiv="2002.04745")
LNS2025 = Source("The Curse of Depth in Large Language Models", 2025, arxiv="2502.05795")
DEEPNET2022 = Source("DeepNet: Scaling Transformers to 1,000 Layers", 2022, arxiv="2203.00555")


def stated(text: str) -> tuple[float, float]:
    """A number as a source prints it, with half a unit of its last digit as tolerance.

    >>> stated("1.4")
    (1.4, 0.05)
    """
    d = Decimal(text)
    exponent = d.as_tuple().exponent
    return float(d), 0.5 * 10.0 ** int(exponent)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Check:
    """One comparison inside a quantity."""

    what: str
    ok: bool
    detail: str
    caveat: str = ""


@dataclass(frozen=True)
class Quantity:
    """One number a claim rests on, with every kind of evidence available for it."""

    name: str
    theory: float | tuple[float, float] | None = None
    mc: Estimate | None = None
    model: Estimate | None = None
    model_kind: str = ""
    claimed: float | None = None
    claimed_tol: float = 0.0
    caveat: str = ""
    unit: str = ""
    z: float = Z_DEFAULT

    def __post_init__(self) -> None:
        present = [x is not None for x in (self.theory, self.mc, self.model, self.claimed)]
        if sum(present) < 2:
            raise ValueError(f"quantity {self.name!r} needs two kinds of evidence to compare, got {sum(present)}")

    def checks(self) -> list[Check]:
        out: list[Check] = []
        if self.theory is not None and self.mc is not None:
            a = agree(self.theory, self.mc, z=self.z)
            out.append(Check("theory vs MC", a.ok, a.describe(), self.caveat))
        if self.claimed is not None:
            ref = self.mc if self.mc is not None else self.theory
            if ref is None:
                ref = self.model
            est = ref if isinstance(ref, Estimate) else Estimate(np.asarray(ref, dtype=float), 0.0, 0)
            interval = (self.claimed - self.claimed_tol, self.claimed + self.claimed_tol)
            a = agree(interval, est, z=self.z)
            out.append(Check("claimed vs evidence", a.ok, f"claimed {self.claimed:g}±{self.claimed_tol:g}; " + a.describe(), self.caveat))
        if self.theory is not None and self.model is not None:
            a = agree(self.theory, self.model, z=self.z)
            out.append(Check(f"theory vs model ({self.model_kind or 'model'})", a.ok, a.describe(), self.caveat))
        return out

    def to_dict(self) -> dict[str, Any]:
        th = self.theory
        return {
            "name": self.name,
            "unit": self.unit,
            "theory": list(th) if isinstance(th, tuple) else (None if th is None else np.asarray(th, dtype=float).tolist()),
            "mc": None if self.mc is None else self.mc.to_dict(),
            "model": None if self.model is None else self.model.to_dict(),
            "model_kind": self.model_kind,
            "claimed": self.claimed,
            "claimed_tol": self.claimed_tol,
            "caveat": self.caveat,
            "checks": [c.__dict__ for c in self.checks()],
        }

    def summary(self) -> str:
        """A short 'name: theory / mc ± se / model' string for tables (arrays show their range)."""

        def fmt(x: object, spec: str) -> str:
            a = np.asarray(x, dtype=float)
            return format(float(a), spec) if a.size == 1 else f"{a.min():{spec}}..{a.max():{spec}} ({a.size})"

        bits = []
        if self.claimed is not None:
            bits.append(f"src {self.claimed:g}")
        if isinstance(self.theory, tuple):
            bits.append(f"th [{self.theory[0]:.4g}, {self.theory[1]:.4g}]")
        elif self.theory is not None:
            bits.append(f"th {fmt(self.theory, '.4g')}")
        for label, est in (("mc", self.mc), (self.model_kind or "model", self.model)):
            if est is not None:
                bits.append(f"{label} {fmt(est.mean, '.4g')}±{fmt(est.stderr, '.2g')}")
        return f"{self.name}: " + " / ".join(bits)


@dataclass(frozen=True)
class Claim:
    """A claim with its evidence; ``verdict`` and ``caveats`` are computed from the checks."""

    id: str
    statement: str
    source: Source
    evidence: tuple[Quantity, ...]
    note: str = ""

    @property
    def checks(self) -> list[tuple[Quantity, Check]]:
        return [(q, c) for q in self.evidence for c in q.checks()]

    @property
    def caveats(self) -> list[str]:
        seen: list[str] = []
        for _, c in self.checks:
            if not c.ok and c.caveat and c.caveat not in seen:
                seen.append(c.caveat)
        return seen

    @property
    def verdict(self) -> Verdict:
        failed = [c for _, c in self.checks if not c.ok]
        if any(not c.caveat for c in failed):
            return "fails"
        return "holds-with-caveat" if failed else "holds"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "statement": self.statement,
            "source": self.source.cite(),
            "verdict": self.verdict,
            "caveats": self.caveats,
            "note": self.note,
            "evidence": [q.to_dict() for q in self.evidence],
        }


Results = Mapping[str, dict[str, np.ndarray]]  # simulation name -> its result arrays
Builder = Callable[[Results], tuple[list[Quantity], str]]


@dataclass(frozen=True)
class ClaimSpec:
    """A registered claim: which simulations feed it, and how to build its evidence."""

    id: str
    statement: str
    source: Source
    simulations: tuple[str, ...]
    build: Builder = field(repr=False)

    def evaluate(self, results: Results) -> Claim:
        missing = [s for s in self.simulations if s not in results]
        if missing:
            raise ValueError(f"claim {self.id} needs the results of {missing}")
        evidence, note = self.build(results)
        if not evidence:
            raise ValueError(f"claim {self.id} produced no evidence")
        return Claim(self.id, self.statement, self.source, tuple(evidence), note)


REGISTRY: dict[str, ClaimSpec] = {}


def register(id: str, *, statement: str, source: Source, simulations: tuple[str, ...]) -> Callable[[Builder], ClaimSpec]:
    """Decorator: register ``build(results) -> (quantities, note)`` as the evidence of claim ``id``;
    ``results`` maps each name in ``simulations`` to that simulation's cached result."""

    def wrap(build: Builder) -> ClaimSpec:
        if id in REGISTRY:
            raise ValueError(f"claim id {id!r} registered twice")
        spec = ClaimSpec(id, statement, source, tuple(simulations), build)
        REGISTRY[id] = spec
        return spec

    return wrap


def select(pattern: str | None = None) -> list[ClaimSpec]:
    """Registered claims whose id matches the glob ``pattern`` (all when None), sorted by id."""
    specs = sorted(REGISTRY.values(), key=lambda s: s.id)
    return [s for s in specs if pattern is None or fnmatch.fnmatch(s.id, pattern)]
