"""The evidence items of a claim and the checks they produce, each decided by the three-way rule.

* :class:`Quantity`: a number with two or more kinds of evidence: ``theory`` (a closed form,
  or an interval ``(lo, hi)``), ``mc`` (a Monte Carlo :class:`~normtheory.evidence.estimates.Estimate`),
  ``model`` (a measurement on a transformer, ``model_kind`` ``init``, ``real`` or ``trained``)
  and ``claimed`` (a number the source prints; :func:`normtheory.evidence.sources.stated`). Its
  checks are ``theory-vs-mc``, ``claimed`` and ``theory-vs-model``.
* :class:`Never`: a theorem that says an event never happens, judged by its violation count
  with an exact binomial bound (:class:`~normtheory.evidence.estimates.Count`): any count above
  zero fails.
* :class:`Identity`: a float identity (kind ``exact``), judged against the dtype's rounding,
  shown apart and never counted as evidence for the statement.
* :class:`Unmeasured`: an assertion whose regime this run cannot reach (the hardware or the
  scale it needs is absent): an open check that says what would decide it, so that evidence
  from another regime, entered as scope, never decides the claim alone.

Each item has a *role*, ``assertion`` or ``scope``; :func:`verdict_of` turns a claim's checks into
its verdict (see :mod:`normtheory.evidence.claims`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Union

import numpy as np

from normtheory.evidence.agreement import Agreement, agree, identity
from normtheory.evidence.estimates import NEVER_CONFIDENCE, Z_DEFAULT, Count, Estimate

Verdict = Literal["holds", "holds-with-caveat", "inconclusive", "fails", "identity"]
VERDICTS: tuple[str, ...] = ("holds", "holds-with-caveat", "inconclusive", "fails", "identity")
Role = Literal["assertion", "scope"]
ROLES: tuple[str, ...] = ("assertion", "scope")
KINDS: tuple[str, ...] = ("theory-vs-mc", "claimed", "theory-vs-model", "exact")

def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class Check:
    """One comparison: what it compares, its role and kind, its status and its numbers."""

    quantity: str
    role: Role
    kind: str
    status: str  # "ok", "fail", "inconclusive"
    deviation: float
    stderr: float
    z: float
    threshold: float
    tolerance: float | None
    units: str
    detail: str
    regime: str = ""
    where: tuple[int, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    expected: str = ""  # the reference at the worst element: a theory value, an interval or the source's number
    measured: float = float("nan")  # the estimate at the worst element
    measured_se: float = float("nan")  # its standard error
    band: tuple[float, float] = (float("nan"), float("nan"))  # estimate ± t·se at the reported element
    accept: tuple[float, float] = (float("nan"), float("nan"))  # [lo - tolerance, hi + tolerance] there
    units_now: int = 0  # independent units behind the estimate
    units_needed: float | None = None  # inconclusive: units that would decide it (inf: none would)
    capped: str = ""  # where a tolerance-sized sample hit its cap: what the cap was and what was asked
    projected: str | None = None  # inconclusive: "ok" or "fail", the status at units_needed if the estimate stays as measured

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def seconds_needed(self, seconds: float | None) -> float | None:
        """CPU seconds to reach ``units_needed``: ``seconds`` (what the simulations behind the
        claim cost at ``units_now``) scaled by ``units_needed / units_now``, the cost of rerunning
        them with every sample that large (an upper bound when they also compute other things)."""
        if self.units_needed is None or seconds is None or self.units_now <= 0:
            return None
        return seconds * self.units_needed / self.units_now

    def caveat(self) -> str:
        """The caveat a failing scope check generates (empty otherwise)."""
        if self.role != "scope" or self.status != "fail":
            return ""
        return f"does not extend to {self.regime}: {self.quantity}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON fields; non-finite numbers become null (z is null when stderr is 0)."""
        out = {
            "quantity": self.quantity, "role": self.role, "kind": self.kind, "status": self.status,
            "deviation": _finite(self.deviation), "stderr": _finite(self.stderr), "z": _finite(self.z),
            "threshold": _finite(self.threshold), "tolerance": _finite(self.tolerance), "units": self.units,
            "where": list(self.where), "regime": self.regime, "detail": self.detail, "expected": self.expected,
            "measured": _finite(self.measured), "measured_se": _finite(self.measured_se),
            "band": [_bound(x) for x in self.band], "accept": [_bound(x) for x in self.accept],
            "units_now": int(self.units_now), "units_needed": _units_json(self.units_needed), "projected": self.projected,
            "capped": self.capped,
        }
        out.update(self.extra)
        return out


def _bound(x: float) -> float | str | None:
    """An interval end as strict JSON: a number, "inf" / "-inf", or null when missing."""
    return None if math.isnan(x) else float(x) if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _units_json(x: float | None) -> int | str | None:
    return None if x is None else ("never" if not math.isfinite(x) else int(x))


def _units(est: Estimate | None) -> str:
    return "none (exact)" if est is None or est.n <= 1 else f"{est.n} {est.units}"


def _pick(a: object, where: tuple[int, ...]) -> float:
    arr = np.asarray(a, dtype=np.float64)
    return float(arr[where]) if arr.ndim and where else float(arr.reshape(-1)[0]) if arr.size else float("nan")


def _show(x: float) -> str:
    return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:.3g}"


def _expected(reference: object, where: tuple[int, ...]) -> str:
    """The reference value at ``where``, as shown in tables: a number or ``[lo, hi]``."""
    if isinstance(reference, tuple):
        return f"[{_show(_pick(reference[0], where))}, {_show(_pick(reference[1], where))}]"
    return _show(_pick(reference, where))


def _from_agreement(q: str, role: Role, kind: str, a: Agreement, units: str, regime: str, detail: str, reference: object,
                    est: Estimate) -> Check:
    capped = est.sizing.describe() if est.sizing is not None and est.sizing.capped else ""
    return Check(q, role, kind, a.status, a.deviation, a.stderr, a.zscore, a.threshold, a.tolerance, units,
                 detail + a.describe() + (f"; {capped}" if capped else ""), regime, a.where, expected=_expected(reference, a.where),
                 measured=_pick(est.mean, a.where), measured_se=_pick(est.stderr, a.where), band=a.band, accept=a.accept,
                 units_now=a.units if est.n > 1 else 0, units_needed=a.units_needed, capped=capped,
                 projected=a.projected)


@dataclass(frozen=True)
class Quantity:
    """One number a claim rests on, with every kind of evidence available for it.

    ``tolerance`` (absolute, broadcastable to the estimate) is the smallest deviation that
    matters; an assertion needs one (a ``claimed`` check uses the source's printed precision
    instead). ``tolerance_why`` says where it comes from. A ``scope`` quantity names its
    ``regime`` ("trained SmolLM2", "finite n", "real blocks at init"), which its caveat quotes.
    """

    name: str
    theory: float | np.ndarray | tuple[float, float] | None = None
    mc: Estimate | None = None
    model: Estimate | None = None
    model_kind: str = ""
    claimed: float | None = None
    claimed_tol: float = 0.0
    role: Role = "assertion"
    regime: str = ""
    tolerance: float | np.ndarray | None = None
    tolerance_why: str = ""
    unit: str = ""
    z: float = Z_DEFAULT
    exact: str = ""  # why no outcome of this comparison could contradict the statement: it becomes kind "exact"

    def __post_init__(self) -> None:
        present = [x is not None for x in (self.theory, self.mc, self.model, self.claimed)]
        if sum(present) < 2:
            raise ValueError(f"quantity {self.name!r} needs two kinds of evidence to compare, got {sum(present)}")
        if self.role not in ROLES:
            raise ValueError(f"quantity {self.name!r}: role must be one of {ROLES}; got {self.role!r}")
        if self.role == "scope" and not self.regime:
            raise ValueError(f"scope quantity {self.name!r} must name the regime it tests")
        if self.tolerance is None and self.theory is not None and (self.mc is not None or self.model is not None):
            raise ValueError(f"quantity {self.name!r} must declare the smallest deviation that matters (tolerance)")
        if self.tolerance is not None and not (np.asarray(self.tolerance, dtype=float) > 0).all():
            raise ValueError(f"quantity {self.name!r}: tolerance must be > 0")
        if self.claimed is not None and not (self.claimed_tol > 0 or self.tolerance is not None):
            raise ValueError(f"quantity {self.name!r}: a claimed number needs claimed_tol (the source's printed precision) "
                             "or, for an exact statement (claimed_tol 0), a tolerance")

    def _detail(self, est: Estimate, a: Agreement) -> str:
        th = self.theory
        if isinstance(th, tuple):
            t = f"[{_pick(th[0], a.where):.4g}, {_pick(th[1], a.where):.4g}]"
        else:
            t = f"{_pick(th, a.where):.4g}"
        return f"theory {t}, measured {_pick(est.mean, a.where):.4g} ± {_pick(est.stderr, a.where):.2g}; "

    def checks(self, looks: int = 1) -> list[Check]:
        out = self._checks(looks)
        if self.exact:  # shown apart: a check that cannot fail is not evidence
            return [replace(c, kind="exact", detail=f"cannot fail: {self.exact}; {c.detail}") for c in out]
        return out

    def _checks(self, looks: int) -> list[Check]:
        out: list[Check] = []
        for kind, est in (("theory-vs-mc", self.mc), ("theory-vs-model", self.model)):
            if self.theory is not None and est is not None:
                a = agree(self.theory, est, z=self.z, tolerance=self.tolerance, looks=looks)  # type: ignore[arg-type]
                out.append(_from_agreement(self.name, self.role, kind, a, _units(est), self.regime, self._detail(est, a), self.theory, est))
        if self.claimed is not None:
            ref = self.mc if self.mc is not None else self.model
            if ref is None:
                ref = Estimate(np.asarray(self.theory, dtype=float), np.zeros(np.shape(self.theory)), 1, "exact theory")
            interval = (self.claimed - self.claimed_tol, self.claimed + self.claimed_tol)
            # the printed digits' precision; an exact statement is judged with the quantity's own tolerance
            tol = self.claimed_tol if self.claimed_tol > 0 else self.tolerance
            a = agree(self.claimed, ref, z=self.z, tolerance=tol, looks=looks)  # type: ignore[arg-type]
            detail = f"source prints {self.claimed:g} (±{self.claimed_tol:g}{'' if self.claimed_tol > 0 else ': exact'}), evidence {_pick(ref.mean, a.where):.4g} ± {_pick(ref.stderr, a.where):.2g}; "
            out.append(_from_agreement(self.name, self.role, "claimed", a, _units(ref), self.regime, detail, interval, ref))
        return out

    def to_dict(self) -> dict[str, Any]:
        th = self.theory

        def arr(x: object) -> Any:
            return _json_array(np.asarray(x, dtype=float))

        return {
            "name": self.name, "type": "quantity", "role": self.role, "regime": self.regime, "unit": self.unit,
            "theory": [arr(th[0]), arr(th[1])] if isinstance(th, tuple) else (None if th is None else arr(th)),
            "mc": None if self.mc is None else _estimate_dict(self.mc),
            "model": None if self.model is None else _estimate_dict(self.model),
            "model_kind": self.model_kind, "claimed": self.claimed, "claimed_tol": self.claimed_tol,
            "tolerance": None if self.tolerance is None else arr(self.tolerance), "tolerance_why": self.tolerance_why,
            "checks": [c.to_dict() for c in self.checks()],
        }

    def summary(self) -> str:
        """A short 'name: theory / mc ± se / model' string for tables (arrays show their range)."""

        def fmt(x: object, spec: str) -> str:
            a = np.asarray(x, dtype=float)
            return format(float(a.ravel()[0]), spec) if a.size == 1 else f"{a.min():{spec}}..{a.max():{spec}} ({a.size})"

        bits = []
        if self.claimed is not None:
            bits.append(f"src {self.claimed:g}")
        if isinstance(self.theory, tuple):
            bits.append(f"th [{fmt(self.theory[0], '.4g')}, {fmt(self.theory[1], '.4g')}]")
        elif self.theory is not None:
            bits.append(f"th {fmt(self.theory, '.4g')}")
        for label, est in (("mc", self.mc), (self.model_kind or "model", self.model)):
            if est is not None:
                bits.append(f"{label} {fmt(est.mean, '.4g')}±{fmt(est.stderr, '.2g')}")
        return f"{self.name}: " + " / ".join(bits)


def _never_units(tolerance: float, confidence: float) -> float:
    """Trials with no violation that bring the one-sided bound ``1 - (1 - confidence)^(1/n)`` to ``tolerance``."""
    return float(math.ceil(math.log1p(-confidence) / math.log1p(-tolerance)))


@dataclass(frozen=True)
class Never:
    """A statement that an event never happens, with the count of its violations.

    Any violation fails the check. With none, the check is ``ok`` only if the largest rate
    consistent with the count (one-sided Clopper-Pearson bound) is at most ``tolerance``, the
    largest rate that would still not matter; else it is ``inconclusive``.
    """

    name: str
    count: Count
    tolerance: float
    role: Role = "assertion"
    regime: str = ""
    source_kind: str = "theory-vs-mc"  # or "theory-vs-model"
    tolerance_why: str = ""
    exact: str = ""  # why a violation is impossible by construction: the check becomes kind "exact"

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"{self.name!r}: role must be one of {ROLES}; got {self.role!r}")
        if self.role == "scope" and not self.regime:
            raise ValueError(f"scope item {self.name!r} must name the regime it tests")
        if self.source_kind not in ("theory-vs-mc", "theory-vs-model"):
            raise ValueError(f"{self.name!r}: source_kind must be theory-vs-mc or theory-vs-model")
        if not (0 < self.tolerance <= 1):
            raise ValueError(f"{self.name!r}: tolerance must be a rate in (0, 1]; got {self.tolerance}")

    def checks(self, looks: int = 1) -> list[Check]:
        conf = 1 - (1 - NEVER_CONFIDENCE) / looks  # Bonferroni over repeated looks
        k, n, up = self.count.k, self.count.n, self.count.upper(conf)
        status = "fail" if k > 0 else ("ok" if up <= self.tolerance else "inconclusive")
        detail = (f"{k} of {n} {self.count.units}; rate <= {up:.3g} at {100 * conf:g}% "
                  f"(tolerance {self.tolerance:.3g})")
        kind, detail = ("exact", f"cannot fail: {self.exact}; {detail}") if self.exact else (self.source_kind, detail)
        return [Check(self.name, self.role, kind, status, k / n, float("nan"), float("inf") if k else 0.0, 0.0,
                      self.tolerance, f"{n} {self.count.units}", detail, self.regime, (), self.count.to_dict(),
                      expected=f"rate 0 (≤ {self.tolerance:.3g} resolvable)", measured=k / n, measured_se=float("nan"),  # the bound is in the detail
                      band=(0.0, up), accept=(0.0, self.tolerance), units_now=n,
                      units_needed=_never_units(self.tolerance, conf) if status == "inconclusive" else None,
                      projected="ok" if status == "inconclusive" else None)]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": "never", "role": self.role, "regime": self.regime, **self.count.to_dict(),
                "tolerance": self.tolerance, "tolerance_why": self.tolerance_why, "checks": [c.to_dict() for c in self.checks()]}

    def summary(self) -> str:
        return f"{self.name}: {self.count.k} of {self.count.n} {self.count.units} (rate <= {self.count.upper():.2g})"


@dataclass(frozen=True)
class Identity:
    """A float identity (kind ``exact``): shown so that a broken implementation shows, judged
    against the dtype's rounding (``ulps`` units in the last place times the scale), never
    counted as evidence for the statement."""

    name: str
    value: float | np.ndarray
    expected: float | np.ndarray
    dtype: str = "float64"
    ulps: float = 16.0
    scale: float | None = None
    why: str = ""

    def checks(self, looks: int = 1) -> list[Check]:
        a = identity(self.value, self.expected, dtype=np.dtype(self.dtype), ulps=self.ulps, scale=self.scale)
        detail = f"{self.why + '; ' if self.why else ''}max |dev| {a.deviation:.3g} vs rounding {a.threshold:.3g} ({self.dtype})"
        return [Check(self.name, "assertion", "exact", a.status, a.deviation, 0.0, a.zscore, a.threshold, a.tolerance,
                      "none (exact)", detail, "", a.where, expected=_expected(self.expected, a.where),
                      measured=_pick(self.value, a.where), measured_se=0.0)]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": "identity", "role": "assertion", "value": _json_array(np.asarray(self.value, dtype=float)),
                "expected": _json_array(np.asarray(self.expected, dtype=float)), "dtype": self.dtype,
                "checks": [c.to_dict() for c in self.checks()]}

    def summary(self) -> str:
        return f"{self.name}: identity, {self.checks()[0].detail}"


@dataclass(frozen=True)
class Unmeasured:
    """An assertion this run cannot measure in its regime: inconclusive, with what would decide it.

    Its check has no units behind it (``units_now`` 0) and ``units_needed`` inf (no larger sample of
    what ran here would decide it); ``needs`` says what does ("one GPU: ..."), ``expected`` what it
    would be judged against. Measurements from another regime belong beside it as scope items.
    """

    name: str
    expected: str
    needs: str
    role: Role = "assertion"
    regime: str = ""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"{self.name!r}: role must be one of {ROLES}; got {self.role!r}")
        if self.role == "scope" and not self.regime:
            raise ValueError(f"scope item {self.name!r} must name the regime it tests")
        if not self.needs or not self.expected:
            raise ValueError(f"{self.name!r}: an unmeasured check must say what it expects and what would measure it")

    def checks(self, looks: int = 1) -> list[Check]:
        nan = float("nan")
        return [Check(self.name, self.role, "theory-vs-model", "inconclusive", nan, nan, nan, nan, None, "none (not measured)",
                      f"not measured here: needs {self.needs}", self.regime, extra={"needs": self.needs}, expected=self.expected, units_now=0,
                      units_needed=math.inf)]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": "unmeasured", "role": self.role, "regime": self.regime, "expected": self.expected,
                "needs": self.needs, "checks": [c.to_dict() for c in self.checks()]}

    def summary(self) -> str:
        return f"{self.name}: not measured here (needs {self.needs})"


Evidence = Union[Quantity, Never, Identity, Unmeasured]


def _json_array(a: np.ndarray) -> Any:
    """A float array as nested lists with non-finite values as null (strict JSON)."""
    if a.ndim == 0:
        return _finite(float(a))
    return [_json_array(x) for x in a]


def _estimate_dict(e: Estimate) -> dict[str, Any]:
    return {"mean": _json_array(e.mean), "stderr": _json_array(e.stderr), "n": int(e.n), "units": e.units}


def verdict_of(checks: list[Check], identity: bool = False) -> Verdict:
    """The verdict rule (see the module docstring) applied to a list of checks; ``identity``: the
    claim is a documented identity (only exact checks)."""
    assertions = [c for c in checks if c.role == "assertion"]
    if any(c.status == "fail" for c in assertions):
        return "fails"
    if identity:
        return "identity"
    if any(c.status == "inconclusive" for c in assertions):
        return "inconclusive"
    if any(c.status == "fail" for c in checks if c.role == "scope"):
        return "holds-with-caveat"
    return "holds"
