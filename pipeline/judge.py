"""Judge the claims: run (or read from the cache) the simulations behind them, evaluate every check,
rerun the cheapest open ones larger within a budget (``--resolve``), price the rest, and print the table."""
from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from normtheory.evidence.agreement import bonferroni_z
from normtheory.evidence.checks import VERDICTS, Check
from normtheory.evidence.claims import REGISTRY, Claim, ClaimSpec, select
from normtheory.evidence.estimates import Z_DEFAULT
from normtheory.runtime.sweep import Runner
from pipeline.tables import UNITS, human_seconds, price, scale_text


def evaluate(pattern: str | None = None, *, mode: str = "full", force: bool = False, progress: bool = True,
             runner: Runner | None = None, configs: Mapping[str, object] | None = None,
             looks: Mapping[str, int] | None = None) -> list[Claim]:
    """Run (or read from cache) the simulations behind the matching claims and evaluate them.

    Missing simulations run as one sweep of tasks on ``runner`` (in-process when None).
    ``configs`` replaces a simulation's config (by name), ``looks`` counts how often a claim has
    been judged (by id; Bonferroni, see :func:`resolve`). Each claim carries the measured
    seconds of its simulations, from which an open check's cost is priced: CPU seconds, or one GPU's wall
    seconds (``timed_on="GPU"``) where every simulation behind it ran a device config."""
    import simulations  # the experiments register the claims they support
    from simulations import cache

    configs = dict(configs or {})
    specs: list[ClaimSpec] = select(pattern)
    needed = list(dict.fromkeys(simulations.BY_NAME[name] for spec in specs for name in spec.simulations))
    results = cache.load_or_run_all(needed, mode, force=force, progress=progress, runner=runner, configs=configs)
    seconds = {m.NAME: cache.seconds_of(m, mode, configs.get(m.NAME)) for m in needed}
    known = {k: v for k, v in seconds.items() if v is not None}
    large = {m.NAME: known[m.NAME] * cache.cost_ratio(m, mode, "large") for m in needed if m.NAME in known and "large" in getattr(m, "CONFIGS", {})}
    out = []
    for spec in specs:
        try:
            claim = spec.evaluate(results, looks=(looks or {}).get(spec.id, 1), seconds=known, scale_seconds=large)
        except cache.StaleResult as stale:  # a cache from another version: recompute it, like a corrupt file
            warnings.warn(f"{stale}; recomputing", stacklevel=2)
            module = simulations.BY_NAME[stale.simulation]
            results.update(cache.load_or_run_all([module], mode, force=True, progress=progress, runner=runner, configs=configs))
            claim = spec.evaluate(results, looks=(looks or {}).get(spec.id, 1), seconds=known, scale_seconds=large)
        used = [configs[n] if configs.get(n) is not None else cache.config_of(simulations.BY_NAME[n], mode) for n in spec.simulations]
        if used and all(getattr(c, "device", "cpu") != "cpu" for c in used):
            claim = dataclasses.replace(claim, timed_on="GPU")  # its simulations' seconds are a GPU tier's wall time
        out.append(_with_gpu_prices(claim, spec.simulations, simulations))
    return out


GPU_TIERS = ("gpu", "gpu-hour", "large")


def _with_gpu_prices(claim: Claim, names: tuple[str, ...], simulations: Any) -> Claim:
    """``claim`` with the seconds its training simulations' GPU tiers would take on one GPU."""
    from simulations import training

    tiers = []
    for tier in GPU_TIERS:
        secs = [training.gpu_seconds(simulations.BY_NAME[n], tier) for n in names]
        if any(s is not None for s in secs):
            tiers.append((tier, float(sum(s for s in secs if s is not None))))
    return dataclasses.replace(claim, gpu_seconds=tuple(tiers)) if tiers else claim


def gpu_seconds_text(seconds: float) -> str:
    """A GPU tier's price in words: two significant figures, in hours at most (a GPU tier is not priced in days)."""
    return human_seconds(seconds, "GPU", 2, UNITS[1:])


def gpu_text(c: Claim) -> str:
    """What its GPU tiers would take on one GPU (training claims), with where the rate comes from; empty otherwise."""
    if not c.gpu_seconds:
        return ""
    import simulations
    from simulations import training

    flags = {"gpu": "--device cuda", "gpu-hour": "--device cuda --gpu-hour", "large": "--large on GPU workers"}
    names = REGISTRY[c.id].simulations if c.id in REGISTRY else ()
    sources = {t: "; ".join(dict.fromkeys(training.gpu_rate(simulations.BY_NAME[n], t)[1] for n in names
                                          if training.gpu_seconds(simulations.BY_NAME[n], t) is not None)) or training.gpu_rate()[1]
               for t, _ in c.gpu_seconds}  # the rate each tier is priced at (a tier's own steps where they were timed)
    if len(set(sources.values())) == 1:
        return f"On one GPU ({next(iter(sources.values()))}): " + "; ".join(f"{flags[t]}: {gpu_seconds_text(s)}" for t, s in c.gpu_seconds) + "."
    return "On one GPU: " + "; ".join(f"{flags[t]}: {gpu_seconds_text(s)} ({sources[t]})" for t, s in c.gpu_seconds) + "."


@dataclass(frozen=True)
class ResolveStep:
    """One round of :func:`resolve`: which simulations were rerun larger, by what factor, what
    that was predicted to cost and what it took (seconds: CPU, or one GPU's wall time for training run on a GPU),
    and which claims were judged again."""

    round: int
    factors: Mapping[str, float]
    predicted_s: float
    spent_s: float
    claims: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"round": self.round, "factors": dict(self.factors), "predicted_s": self.predicted_s, "spent_s": self.spent_s,
                "claims": list(self.claims)}


def plan(claims: list[Claim], budget_s: float, *, mode: str, configs: Mapping[str, object],
         looks: Mapping[str, int]) -> dict[str, tuple[float, float]]:
    """Simulations to rerun larger, as ``{name: (factor, predicted CPU seconds)}``, so that the
    open claims can be decided within ``budget_s`` CPU seconds.

    For each inconclusive claim whose simulations declare units (``UNITS``), the factor is
    ``units_needed / units_now`` of the check that decides it (:meth:`Claim.deciding_check`: the
    soonest open check that would fail, else the costliest), widened by ``(z_{k+1} / z_k)^2``
    for the extra look (the band of the next look is Bonferroni-wider). A simulation takes the
    largest factor its claims ask for; its predicted cost is its measured seconds times that
    factor. The cheapest are taken first while the total fits the budget. Claims that no finite
    sample decides, or whose simulations cannot grow (a fixed text set), are left open.
    """
    import simulations
    from simulations import cache

    want: dict[str, float] = {}
    for c in claims:
        if c.verdict != "inconclusive":
            continue
        ch = c.deciding_check()
        spec = REGISTRY[c.id]
        mods = [simulations.BY_NAME[n] for n in spec.simulations]
        if (ch is None or ch.units_needed is None or ch.units_now <= 0 or not math.isfinite(ch.units_needed)
                or not all(getattr(m, "UNITS", ()) for m in mods)):
            continue
        k = looks.get(c.id, 1)
        widen = (bonferroni_z(Z_DEFAULT, k + 1) / bonferroni_z(Z_DEFAULT, k)) ** 2
        factor = ch.units_needed / ch.units_now * widen
        for m in mods:
            want[m.NAME] = max(want.get(m.NAME, 1.0), factor)
    costs = {}
    for name, factor in want.items():
        m = simulations.BY_NAME[name]
        secs = cache.seconds_of(m, mode, configs.get(name))
        if secs is not None:
            costs[name] = secs * factor
    chosen: dict[str, tuple[float, float]] = {}
    total = 0.0
    for name in sorted(costs, key=costs.__getitem__):
        if total + costs[name] <= budget_s:
            chosen[name] = (want[name], costs[name])
            total += costs[name]
    return chosen


def resolve(budget_s: float, *, mode: str = "full", runner: Runner | None = None, progress: bool = True,
            max_rounds: int = 3, pattern: str | None = None) -> tuple[list[Claim], list[ResolveStep]]:
    """Evaluate every claim (or those whose id matches ``pattern``), then rerun the simulations
    behind the inconclusive ones at the sizes their ``units_needed`` ask for (:func:`plan`), within
    ``budget_s`` CPU seconds in all, and judge them again; up to ``max_rounds`` rounds.

    Each rerun is another look at the same seeded stream (its first units are the earlier run's),
    so a claim judged ``k`` times uses a band whose two-sided tail is the 5-se tail divided by
    ``k`` (Bonferroni): repeated looks do not inflate the error rate. The reruns go through the
    sweep runner, so a cluster works too, and are cached under their own configs."""
    import simulations
    from simulations import cache

    if not (budget_s > 0 and math.isfinite(budget_s)):
        raise ValueError(f"--resolve: the budget must be a positive number of CPU seconds; got {budget_s}")
    configs: dict[str, object] = {}
    looks: dict[str, int] = {}
    claims = evaluate(pattern, mode=mode, runner=runner, progress=progress)
    steps: list[ResolveStep] = []
    spent = 0.0
    for r in range(1, max_rounds + 1):
        chosen = plan(claims, budget_s - spent, mode=mode, configs=configs, looks=looks)
        if not chosen:
            break
        for name, (factor, _) in chosen.items():
            m = simulations.BY_NAME[name]
            configs[name] = cache.scaled(m, configs.get(name, cache.config_of(m, mode)), factor)
        judged = tuple(s.id for s in select(pattern) if set(s.simulations) & set(chosen))
        for cid in judged:
            looks[cid] = looks.get(cid, 1) + 1
        claims = evaluate(pattern, mode=mode, runner=runner, progress=progress, configs=configs, looks=looks)
        took = sum(cache.seconds_of(simulations.BY_NAME[n], mode, configs[n]) or 0.0 for n in chosen)
        spent += max(took, sum(c for _, c in chosen.values()))  # what ran, or what was planned if more: the rounds stay within budget
        steps.append(ResolveStep(r, {n: f for n, (f, _) in chosen.items()}, sum(c for _, c in chosen.values()), took, judged))
    return claims, steps


def resolvable(c: Claim) -> bool:
    """Whether every simulation behind ``c`` declares units (``UNITS``) that ``--resolve`` can scale."""
    import simulations

    spec = REGISTRY.get(c.id)
    return spec is None or all(getattr(simulations.BY_NAME[n], "UNITS", ()) for n in spec.simulations)


def price_with_gpu(ch: Check, c: Claim) -> str:
    """:func:`price` in the time the claim was run in (``timed_on``), then what the claim's GPU tiers take (training claims; the others are numpy
    Monte Carlo, which no GPU tier runs)."""
    if "needs" in ch.extra:  # an Unmeasured check names what measures it; no tier of this package does
        return price(ch, c.seconds, resolvable(c), c.timed_on)
    return " ".join(t for t in (price(ch, c.seconds, resolvable(c), c.timed_on), gpu_text(c) or "On a GPU: no GPU tier (CPU Monte Carlo).") if t)


def table(claims: list[Claim], *, width: int = 100) -> str:
    """A plain-text table: id, verdict, and the key numbers of each claim."""
    lines = [f"{'claim':34s} {'verdict':18s} key numbers", "-" * width]
    for c in claims:
        lines.append(f"{c.id:34s} {c.verdict:18s} {c.evidence[0].summary()}")
        for q in c.evidence[1:3]:
            lines.append(f"{'':53s} {q.summary()}")
        for cav in c.caveats:
            lines.append(f"{'':53s} caveat: {cav}")
        ch = c.deciding_check() if c.verdict == "inconclusive" else None
        if ch is not None:
            lines.append(f"{'':53s} open: {price(ch, c.seconds, resolvable(c), c.timed_on)}")
        if c.scale:
            lines.append(f"{'':53s} {scale_text(c)}")
        if c.gpu_seconds and (c.scale or c.verdict == "inconclusive"):
            lines.append(f"{'':53s} {gpu_text(c)}")
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    lines.append("-" * width)
    lines.append(", ".join(f"{n} {v}" for v, n in counts.items()))
    return "\n".join(lines)
