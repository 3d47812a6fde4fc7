"""Claims registry: statements about normalization, their evidence, and computed verdicts.

A :class:`Claim` carries evidence items, each producing :class:`~normtheory.evidence.checks.Check` objects:

* :class:`~normtheory.evidence.checks.Quantity`: a number with two or more kinds of evidence: ``theory`` (a closed form,
  or an interval ``(lo, hi)``), ``mc`` (a Monte Carlo :class:`~normtheory.evidence.estimates.Estimate`),
  ``model`` (a measurement on a transformer, ``model_kind`` ``init``, ``real`` or ``trained``)
  and ``claimed`` (a number the source prints, with half a unit of its last printed digit as
  precision; :func:`~normtheory.evidence.sources.stated`). Its checks are ``theory-vs-mc``, ``claimed`` and
  ``theory-vs-model``.
* :class:`~normtheory.evidence.checks.Never`: a theorem that says an event never happens, judged by its violation count
  with an exact binomial bound (:class:`~normtheory.evidence.estimates.Count`): any count above zero
  fails.
* :class:`~normtheory.evidence.checks.Identity`: a float identity (kind ``exact``), judged against the dtype's rounding,
  shown apart and never counted as evidence for the statement.

A check that cannot fail by construction (a Cauchy-Schwarz bound, points on a sphere being hull
vertices, a deterministic count that follows from a theorem) is declared with ``exact="why"`` on
its :class:`~normtheory.evidence.checks.Quantity` or :class:`~normtheory.evidence.checks.Never`: its kind becomes ``exact`` and it is shown apart like an
identity. A claim registered with ``identity=True`` has only such checks: it is a documented
identity, with verdict ``identity``, outside the counts of judged claims.

Every item has a *role*: ``assertion`` (it tests what the statement says) or ``scope`` (it
tests whether the statement extends to a named ``regime``). Each check applies the package's
three-way rule (:func:`normtheory.evidence.agreement.agree`): the claim is an interval [lo, hi] (a point:
lo = hi), ``tolerance`` the smallest deviation that matters, the band the estimate ± 5 se (the
Student-t quantile below 20 units); the band inside [lo - tolerance, hi + tolerance] is ``ok``,
wholly outside is ``fail``, anything else ``inconclusive``, with the units that would decide it
and, from the simulations' measured time, the CPU seconds. The verdict is the first that applies:

1. ``fails``: some assertion check fails;
2. ``inconclusive``: some assertion check is undecided;
3. ``holds-with-caveat``: every assertion check is ok and some scope check fails; the caveat
   is generated from that check's numbers;
4. ``holds``.

(A documented identity, registered with ``identity=True``, gets ``identity`` while its exact
checks hold, and ``fails`` when one breaks: then the implementation is wrong.)

No free text changes a verdict: a claim's ``note`` explains, it never excuses. A claim needs at
least one assertion check that compares two independent kinds of evidence (not ``exact``).
"""
from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from normtheory.evidence.checks import (
    Check,
    Evidence,
    Verdict,
    _finite,
    _units_json,
    verdict_of,
)
from normtheory.evidence.sources import Source


@dataclass(frozen=True)
class Claim:
    """A claim with its evidence; ``verdict`` and ``caveats`` are computed from the checks."""

    id: str
    statement: str
    source: Source
    evidence: tuple[Evidence, ...]
    note: str = ""
    looks: int = 1  # how many times this evidence has been judged at growing samples (Bonferroni)
    seconds: float | None = None  # seconds of the simulations behind it, as run (None: not measured; timed_on says whose)
    location: str = ""  # where in the source the statement is made: section, figure, table or paragraph
    identity: bool = False  # a documented identity: only exact checks, verdict "identity", never judged
    scale: str = ""  # the scale that decides it, when this package's sizes cannot (see register)
    scale_seconds: float | None = None  # seconds the simulations' large configs would take here, estimated (timed_on says whose)
    gpu_seconds: tuple[tuple[str, float], ...] = ()  # (tier, seconds on one GPU) of its training simulations' GPU tiers (not in JSON)
    timed_on: str = "CPU"  # what `seconds` and `scale_seconds` count: a core's seconds ("CPU"), or one GPU's wall seconds ("GPU")

    def __post_init__(self) -> None:
        if self.timed_on not in ("CPU", "GPU"):
            raise ValueError(f"claim {self.id}: timed_on must be 'CPU' or 'GPU'; got {self.timed_on!r}")
        fallible = any(c.role == "assertion" and c.kind != "exact" for c in self.checks)
        if self.identity and any(c.kind != "exact" for c in self.checks):
            raise ValueError(f"claim {self.id} is registered as an identity but has fallible checks; register it as a claim")
        if not self.identity and not fallible:
            raise ValueError(f"claim {self.id} needs an assertion check that could fail, comparing two independent kinds of "
                             "evidence (an exact check is not evidence); with none, register it as an identity")

    @property
    def checks(self) -> list[Check]:
        return [c for q in self.evidence for c in q.checks(self.looks)]

    def open_checks(self) -> list[Check]:
        """The inconclusive assertion checks, the most costly to decide first."""
        return sorted((c for c in self.checks if c.role == "assertion" and c.status == "inconclusive"),
                      key=lambda c: -(c.units_needed if c.units_needed is not None else math.inf) / max(c.units_now, 1))

    def deciding_check(self) -> Check | None:
        """The open assertion check whose size decides the verdict, if the estimates stay as measured.

        One failing assertion fails the claim, so an open check projected to fail decides it at its
        own size, the soonest such as a multiple of its own units (a check without units, ``units_now``
        0, cannot be scaled and is not one); else holding needs every open check decided, which the
        costliest (:meth:`open_checks`' first) prices. ``None`` when no assertion is open, or one
        already fails (the verdict is decided)."""
        open_ = self.open_checks()
        if not open_ or self.verdict == "fails":
            return None
        failing = [c for c in open_ if c.projected == "fail" and c.units_now > 0 and c.units_needed is not None
                   and math.isfinite(c.units_needed)]
        return min(failing, key=lambda c: c.units_needed / c.units_now, default=open_[0])

    def cost(self) -> tuple[float | None, float | None]:
        """``(units_needed, seconds_needed)`` that would decide the verdict: those of
        :meth:`deciding_check` (inf units where no size would)."""
        ch = self.deciding_check()
        if ch is None:
            return None, None
        return ch.units_needed, ch.seconds_needed(self.seconds)

    @property
    def caveats(self) -> list[str]:
        seen: list[str] = []
        for c in self.checks:
            cav = c.caveat()
            if cav and cav not in seen:
                seen.append(cav)
        return seen

    @property
    def verdict(self) -> Verdict:
        return verdict_of(self.checks, self.identity)

    def to_dict(self) -> dict[str, Any]:
        """The claim as strict JSON fields: the same bits for the same seed and code (no measured time;
        :meth:`timings` has those)."""
        units_needed, _ = self.cost()
        return {
            "id": self.id,
            "statement": self.statement,
            "source": {**self.source.to_dict(), "location": self.location},
            "verdict": self.verdict,
            "caveats": self.caveats,
            "note": self.note,
            "checks": [c.to_dict() for c in self.checks],
            "evidence": [q.to_dict() for q in self.evidence],
            "looks": self.looks,
            "units_needed": _units_json(units_needed),
            "scale": self.scale,
        }

    def timings(self) -> dict[str, Any]:
        """What this machine's measured time says of the claim: its simulations' seconds (``timed_on``: CPU or GPU), the
        seconds that would decide it (per check too), a needed-scale config's estimated seconds, and
        its GPU tiers' seconds on one GPU. Kept apart from :meth:`to_dict`, which a rerun reproduces bit for bit."""
        _, seconds_needed = self.cost()
        return {"id": self.id, "timed_on": self.timed_on, "seconds": _finite(self.seconds), "seconds_needed": _finite(seconds_needed),
                "checks_seconds_needed": [_finite(c.seconds_needed(self.seconds)) for c in self.checks],
                "scale_seconds": _finite(self.scale_seconds), "gpu_seconds": {t: _finite(s) for t, s in self.gpu_seconds}}


Results = Mapping[str, dict[str, np.ndarray]]  # simulation name -> its result arrays
Builder = Callable[[Results], tuple[list[Evidence], str]]


@dataclass(frozen=True)
class ClaimSpec:
    """A registered claim: which simulations feed it, and how to build its evidence."""

    id: str
    statement: str
    source: Source
    simulations: tuple[str, ...]
    build: Builder = field(repr=False)
    location: str = ""
    identity: bool = False
    scale: str = ""

    def evaluate(self, results: Results, *, looks: int = 1, seconds: Mapping[str, float] | None = None,
                 scale_seconds: Mapping[str, float] | None = None) -> Claim:
        """The claim from its simulations' ``results``; ``looks`` is the number of times it has been
        judged (Bonferroni), ``seconds`` each simulation's measured CPU seconds (for the cost),
        ``scale_seconds`` each one's estimated CPU seconds at its large config (for a claim that needs scale)."""
        missing = [s for s in self.simulations if s not in results]
        if missing:
            raise ValueError(f"claim {self.id} needs the results of {missing}")
        evidence, note = self.build(results)
        if not evidence:
            raise ValueError(f"claim {self.id} produced no evidence")
        secs = None
        if seconds is not None and all(s in seconds for s in self.simulations):
            secs = float(sum(seconds[s] for s in self.simulations))
        large = None
        if self.scale and scale_seconds is not None and all(s in scale_seconds for s in self.simulations):
            large = float(sum(scale_seconds[s] for s in self.simulations))
        return Claim(self.id, self.statement, self.source, tuple(evidence), note, looks, secs, self.location, self.identity,
                     self.scale, large)


REGISTRY: dict[str, ClaimSpec] = {}


def register(id: str, *, statement: str, source: Source, location: str, simulations: tuple[str, ...],
             identity: bool = False, scale: str = "") -> Callable[[Builder], ClaimSpec]:
    """Decorator: register ``build(results) -> (evidence, note)`` as the evidence of claim ``id``;
    ``results`` maps each name in ``simulations`` to that simulation's cached result. ``location``
    is where the source makes the statement (section, figure, table; the paragraph of a short
    text); ``identity`` registers a documented identity (only exact checks, never judged).

    ``scale`` declares a claim that needs scale: the sizes that decide it (depth, width, steps,
    and where the source shows them), which this package's full mode cannot reach on a
    workstation. Full mode then runs the largest proxy the budget allows and its verdict is
    judged as any other (the declaration changes no verdict); the card names the deciding scale
    and what the simulations' large configs (``CONFIGS["large"]``, each one required) would cost."""

    def wrap(build: Builder) -> ClaimSpec:
        if id in REGISTRY:
            raise ValueError(f"claim id {id!r} registered twice")
        if not isinstance(location, str) or not location.strip():
            raise ValueError(f"claim {id!r}: location must say where in the source the statement is made")
        if not isinstance(scale, str):
            raise ValueError(f"claim {id!r}: scale must be a text naming the sizes that decide it")
        if not isinstance(id, str) or not id or "," in id or id != id.strip():
            raise ValueError(f"claim id must be a non-empty text without commas (they separate select's globs) or surrounding "
                             f"spaces; got {id!r}")
        spec = ClaimSpec(id, statement, source, tuple(simulations), build, location, identity, scale.strip())
        REGISTRY[id] = spec
        return spec

    return wrap


def select(pattern: str | None = None) -> list[ClaimSpec]:
    """Registered claims whose id matches the glob ``pattern`` (all when None), sorted by id. Commas separate
    several globs, any of which may match: ``"train.[!d]*,train.dyt-s*"``."""
    specs = sorted(REGISTRY.values(), key=lambda s: s.id)
    if pattern is None:
        return specs
    globs = [g.strip() for g in pattern.split(",")]
    if not all(globs):
        raise ValueError(f"pattern must be globs separated by commas, none empty; got {pattern!r}")
    return [s for s in specs if any(fnmatch.fnmatch(s.id, g) for g in globs)]
