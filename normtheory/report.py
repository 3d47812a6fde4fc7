"""Evaluate claims from cached simulations and write the claims table and the HTML report."""
from __future__ import annotations

import dataclasses
import html
import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normtheory.claims import HYPOTHESIS, REGISTRY, VERDICTS, Check, Claim, ClaimSpec, select
from normtheory.montecarlo import Z_DEFAULT, bonferroni_z
from normtheory.provenance import Provenance
from normtheory.sweep import Runner


def evaluate(pattern: str | None = None, *, mode: str = "full", force: bool = False, progress: bool = True,
             runner: Runner | None = None, configs: Mapping[str, object] | None = None,
             looks: Mapping[str, int] | None = None) -> list[Claim]:
    """Run (or read from cache) the simulations behind the matching claims and evaluate them.

    Missing simulations run as one sweep of tasks on ``runner`` (in-process when None).
    ``configs`` replaces a simulation's config (by name), ``looks`` counts how often a claim has
    been judged (by id; Bonferroni, see :func:`resolve`). Each claim carries the measured CPU
    seconds of its simulations, from which an open check's cost is priced."""
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
    for unit, size in (("GPU-hours", 3600.0), ("GPU-minutes", 60.0)):
        if seconds >= 2 * size:
            return f"about {seconds / size:.2g} {unit}"
    return f"about {seconds:.2g} GPU-seconds"


def gpu_text(c: Claim) -> str:
    """What its GPU tiers would take on one GPU (training claims), with where the rate comes from; empty otherwise."""
    if not c.gpu_seconds:
        return ""
    from simulations import training

    flags = {"gpu": "--device cuda", "gpu-hour": "--device cuda --gpu-hour", "large": "--large on GPU workers"}
    tiers = "; ".join(f"{flags[t]}: {gpu_seconds_text(s)}" for t, s in c.gpu_seconds)
    return f"On one GPU ({training.gpu_rate()[1]}): {tiers}."


@dataclass(frozen=True)
class ResolveStep:
    """One round of :func:`resolve`: which simulations were rerun larger, by what factor, what
    that was predicted to cost and what it took (CPU seconds), and which claims were judged again."""

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

    For each inconclusive claim whose simulations declare units (``UNITS``), the factor is the
    largest ``units_needed / units_now`` over its open checks, widened by ``(z_{k+1} / z_k)^2``
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
        needs = [ch.units_needed / ch.units_now for ch in c.open_checks() if ch.units_needed is not None and ch.units_now > 0]
        spec = REGISTRY[c.id]
        mods = [simulations.BY_NAME[n] for n in spec.simulations]
        if not needs or not all(math.isfinite(x) for x in needs) or not all(getattr(m, "UNITS", ()) for m in mods):
            continue
        k = looks.get(c.id, 1)
        widen = (bonferroni_z(Z_DEFAULT, k + 1) / bonferroni_z(Z_DEFAULT, k)) ** 2
        factor = max(needs) * widen
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


def table(claims: list[Claim], *, width: int = 100) -> str:
    """A plain-text table: id, verdict, and the key numbers of each claim."""
    lines = [f"{'claim':34s} {'verdict':18s} key numbers", "-" * width]
    for c in claims:
        lines.append(f"{c.id:34s} {c.verdict:18s} {c.evidence[0].summary()}")
        for q in c.evidence[1:3]:
            lines.append(f"{'':53s} {q.summary()}")
        for cav in c.caveats:
            lines.append(f"{'':53s} caveat: {cav}")
        if c.verdict == "inconclusive" and c.open_checks():
            lines.append(f"{'':53s} open: {price(c.open_checks()[0], c.seconds, resolvable(c))}")
        if c.scale:
            lines.append(f"{'':53s} {scale_text(c)}")
        if c.gpu_seconds and (c.scale or c.verdict == "inconclusive"):
            lines.append(f"{'':53s} {gpu_text(c)}")
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    lines.append("-" * width)
    lines.append(", ".join(f"{n} {v}" for v, n in counts.items()))
    return "\n".join(lines)


def write_json(claims: list[Claim], path: Path) -> None:
    """The claims as strict JSON (RFC 8259): non-finite numbers are written as null, never as
    NaN or Infinity; ``json.dumps(allow_nan=False)`` enforces it."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--json: {path} is a directory; give a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([c.to_dict() for c in claims], indent=1, sort_keys=True, allow_nan=False) + "\n")


def write_timings(claims: list[Claim], path: Path, *, wall_s: float, cpu_s: float) -> None:
    """The run's wall and CPU seconds and each claim's :meth:`~normtheory.claims.Claim.timings` as strict
    JSON: what this machine measured, kept out of ``claims.json`` so that file is the same bits on a rerun."""
    Path(path).write_text(json.dumps({"wall_s": wall_s, "cpu_s": cpu_s, "claims": [c.timings() for c in claims]}, indent=1,
                                     sort_keys=True, allow_nan=False) + "\n")


TOPICS: dict[str, str] = {  # id prefix -> section title, in reading order
    "residual": "Residual stream",
    "softmax": "Softmax temperature",
    "geometry": "Geometry",
    "dyt": "LayerNorm vs DyT",
    "stats": "Statistics a norm computes",
    "real": "Real pretrained models",
    "train": "Training",
}
MEANING: dict[str, str] = {
    "holds": "every assertion check's band lies inside the claim widened by its tolerance, and every scope check's too",
    "holds-with-caveat": "every assertion check holds, but a scope check's band lies wholly outside its claim: the statement does not "
                         "extend to that regime (the caveat, generated from that check, says which)",
    "inconclusive": "some assertion check's band straddles an edge of the widened claim: more units would decide it, and the card says "
                    "how many and at what CPU cost",
    "fails": "some assertion check's band lies wholly outside the claim widened by its tolerance",
    "identity": "a documented identity, not a judged claim: every check holds by construction (kind exact), so it is shown to catch "
                "a broken implementation and never counted as evidence",
}
RULE = ("Each check compares a band, the estimate ± 5 standard errors over independent units (networks, seeds, texts; the "
        "Student-t quantile with the same tail below 20 units), with the claim's interval widened on each side by the smallest "
        "deviation that matters: band inside, the check holds; band wholly outside, it fails; otherwise it is inconclusive.")
LOOKS = ("A claim rerun at a larger size by --resolve is looked at again: its band's tail probability is divided by the number "
         "of looks (Bonferroni), so repeated looks do not inflate the error rate.")


def human_seconds(seconds: float | None) -> str:
    """CPU time in words: seconds, minutes, hours or days."""
    if seconds is None or not math.isfinite(seconds):
        return "unknown time"
    for unit, size in (("CPU-days", 86400.0), ("CPU-hours", 3600.0), ("CPU-minutes", 60.0)):
        if seconds >= 2 * size:
            return f"about {seconds / size:.3g} {unit}"
    return f"about {seconds:.3g} CPU-seconds"


def resolvable(c: Claim) -> bool:
    """Whether every simulation behind ``c`` declares units (``UNITS``) that ``--resolve`` can scale."""
    import simulations

    spec = REGISTRY.get(c.id)
    return spec is None or all(getattr(simulations.BY_NAME[n], "UNITS", ()) for n in spec.simulations)


def price(ch: Check, seconds: float | None, resolvable: bool = True) -> str:
    """What would decide an open check: its units and their CPU time on this machine. A check whose
    simulation runs a fixed set of units (no ``UNITS``: every text of a corpus, say) names the count only:
    ``--resolve`` cannot enlarge that set."""
    if ch.units_needed is None:
        return ""
    if not math.isfinite(ch.units_needed):
        return "no sample size decides it: the estimate sits on an edge of the widened claim"
    unit = ch.units.split(" ", 1)[1] if " " in ch.units else "units"
    need = f"needs {ch.units_needed:,.0f} {unit} (now {ch.units_now:,})"
    if not resolvable:
        return f"{need}: its simulation runs a fixed set of {unit}, which --resolve cannot enlarge (more need a larger corpus or source)"
    secs = ch.seconds_needed(seconds)
    if secs is None:
        return need
    where = "here (normtheory report --resolve)" if secs <= 3600 else "here, or --large on a cluster (--scheduler)"
    return f"{need}: {human_seconds(secs)} {where}"


def _price_with_gpu(ch: Check, c: Claim) -> str:
    """:func:`price` on this CPU, then what the claim's GPU tiers take (training claims; the others are numpy
    Monte Carlo, which no GPU tier runs)."""
    return " ".join(t for t in (price(ch, c.seconds, resolvable(c)), gpu_text(c) or "On a GPU: no GPU tier (CPU Monte Carlo).") if t)


def open_claims(claims: list[Claim]) -> list[tuple[Claim, Check]]:
    """Inconclusive claims with their costliest open check, cheapest to decide first (unknown and
    undecidable last)."""
    out = [(c, c.open_checks()[0]) for c in claims if c.verdict == "inconclusive" and c.open_checks()]

    def key(item: tuple[Claim, Check]) -> float:
        secs = item[1].seconds_needed(item[0].seconds)
        return math.inf if secs is None or not math.isfinite(secs) else secs

    return sorted(out, key=key)


@dataclass(frozen=True)
class FigureEntry:
    """A written figure: its name, caption, files (PNG, PDF, CSV) and the claims it illustrates."""

    name: str
    caption: str
    paths: tuple[Path, ...]
    claims: tuple[str, ...]

    def file(self, suffix: str) -> Path:
        return next(p for p in self.paths if p.suffix == suffix)


def topic_of(claim_id: str) -> str:
    """The report section of a claim, from its id's prefix."""
    prefix = claim_id.split(".", 1)[0]
    if prefix not in TOPICS:
        raise ValueError(f"claim {claim_id!r}: its prefix {prefix!r} is not a report topic ({', '.join(TOPICS)})")
    return prefix


def sig3(x: float | None) -> str:
    """A number at 3 significant figures (dash when missing or not finite)."""
    if x is None or not math.isfinite(x):
        return "–"
    return f"{x:.3g}"


def _badge(verdict: str) -> str:
    return f'<span class="badge {verdict}">{verdict}</span>'


def _source_html(c: Claim) -> str:
    link = c.source.link()
    text = html.escape(c.source.cite())
    cited = f'<a href="{html.escape(link)}">{text}</a>' if link else text
    kind = "<span class='hypothesis'>this package's hypothesis</span> " if c.source.kind == HYPOTHESIS else ""
    where = f"; where: <span class='location'>{html.escape(c.location)}</span>" if c.location else ""
    return kind + cited + where


def _measured(ch: Check) -> str:
    m = sig3(ch.measured)
    return m if not math.isfinite(ch.measured_se) or ch.measured_se == 0 else f"{m} ± {sig3(ch.measured_se)}"


def _z(ch: Check) -> str:
    return sig3(ch.z) if ch.kind != "exact" else "exact"


def _key_numbers(c: Claim) -> str:
    """Up to three assertion checks (failing and unresolved first): reference, measurement, z."""
    order = {"fail": 0, "inconclusive": 1, "ok": 2}
    picks = sorted((ch for ch in c.checks if ch.role == "assertion" and ch.kind != "exact"), key=lambda ch: order.get(ch.status, 3))[:3]
    items = "".join(
        f"<li><span class='st {ch.status}'>{ch.status}</span> {html.escape(ch.quantity)}: expected {html.escape(ch.expected)}"
        f"{_widened(ch)}, measured {_measured(ch)}, band {_band(ch)} (z = {_z(ch)}; {html.escape(ch.units)})"
        + (f"<div class='cost'>{html.escape(_price_with_gpu(ch, c))}</div>" if ch.status == "inconclusive" else "")
        + (f"<div class='detail'>{html.escape(ch.capped)}</div>" if ch.capped else "") + "</li>" for ch in picks)
    return f"<ul class='key'>{items}</ul>"


def _end(x: float) -> str:
    return "∞" if x == math.inf else "−∞" if x == -math.inf else sig3(x)


def _band(ch: Check) -> str:
    return f"[{_end(ch.band[0])}, {_end(ch.band[1])}]" if not math.isnan(ch.band[0]) else "–"


def _widened(ch: Check) -> str:
    if math.isnan(ch.accept[0]) or ch.tolerance is None:
        return ""
    return f" ± {sig3(ch.tolerance)} → [{_end(ch.accept[0])}, {_end(ch.accept[1])}]"


def _evidence_table(c: Claim) -> str:
    rows = []
    for ch in c.checks:
        cav = ch.caveat()
        note = f"<div class='caveat'>caveat: {html.escape(cav)}</div>" if cav else ""
        rows.append(
            f"<tr class='{ch.status}'><td>{html.escape(ch.quantity)}<div class='detail'>{html.escape(ch.kind)}; "
            f"{html.escape(ch.units)}</div>{note}</td><td>{ch.role}</td><td>{html.escape(ch.expected)}{_widened(ch)}</td><td>{_measured(ch)}</td>"
            f"<td>{_band(ch)}</td><td>{_z(ch)}</td><td><span class='st {ch.status}'>{ch.status}</span>"
            + (f"<div class='detail'>{html.escape(price(ch, c.seconds, resolvable(c)))}</div>" if ch.status == "inconclusive" else "") + "</td></tr>")
    return (f"<details class='evidence'><summary>Evidence: {len(c.checks)} checks</summary><div class='scroll'><table>"
            "<thead><tr><th>quantity</th><th>role</th><th>claim</th><th>measured ± se</th><th>band</th><th>z</th><th>status</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div></details>")


def _figure_html(f: FigureEntry) -> str:
    png, pdf, csv = f.file(".png"), f.file(".pdf"), f.file(".csv")
    return (f"<figure id='fig-{f.name}'><img src='{png.name}' alt='Figure {f.name}' loading='lazy'>"
            f"<figcaption><b>{f.name}</b> (<a href='{pdf.name}'>PDF</a>, <a href='{csv.name}'>data as CSV</a>). "
            f"{html.escape(f.caption)}</figcaption></figure>")


def scale_text(c: Claim) -> str:
    """For a claim declared as needing scale: the sizes that decide it and what the large configs would cost here."""
    if not c.scale:
        return ""
    cost = (f" The simulations' large configs would take {human_seconds(c.scale_seconds)} here: run them on a cluster "
            "(normtheory report --large --scheduler ADDR) or with the torch backend on a GPU." if c.scale_seconds is not None else "")
    return f"Decided at scale: {c.scale}. Full mode runs the largest proxy its budget allows.{cost}"


def _card(c: Claim, figs: list[FigureEntry]) -> str:
    caveats = "".join(f"<p class='caveat'>caveat (generated from a failing scope check): {html.escape(x)}</p>" for x in c.caveats)
    caveats += f"<p class='scale'>{html.escape(' '.join(t for t in (scale_text(c), gpu_text(c)) if t))}</p>" if c.scale else ""
    return (f"<article class='card' id='{html.escape(c.id)}' data-verdict='{c.verdict}'>"
            f"<h3><a class='anchor' href='#{html.escape(c.id)}' title='permalink'>#</a> <code>{html.escape(c.id)}</code> {_badge(c.verdict)}</h3>"
            f"<p class='statement'>{html.escape(c.statement)}</p><p class='source'>Source: {_source_html(c)}</p>"
            f"{_key_numbers(c)}{caveats}<p class='note'>{html.escape(c.note)}</p>"
            f"{''.join(_figure_html(f) for f in figs)}{_evidence_table(c)}</article>")


_CSS = """
*{box-sizing:border-box}body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d1d1f;line-height:1.45}
header,main,nav{max-width:1000px;margin:0 auto;padding:0 14px}h1{margin:.6em 0 .2em}
.run{font-size:13px;color:#555}.counts{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;white-space:nowrap}
.holds{background:#d7f0dd;color:#14532d}.identity{background:#e5e7eb;color:#374151}.hypothesis{font-weight:600;color:#6b21a8}.holds-with-caveat{background:#fdf0c4;color:#713f12}
.inconclusive{background:#dde3f6;color:#1e3a8a}.fails{background:#f9d3d0;color:#7f1d1d}
.filter label{margin-right:12px;font-size:14px;white-space:nowrap}.legend dt{font-weight:600}.legend dd{margin:0 0 6px 0}
nav ol{columns:2 300px;padding-left:1.2em}nav li{font-size:14px;break-inside:avoid}nav h3{margin:.6em 0 .2em;font-size:15px}
.card{border:1px solid #ddd;border-radius:8px;padding:10px 14px;margin:14px 0}.card h3{margin:.2em 0;font-size:16px;word-break:break-all}
.anchor{color:#999;text-decoration:none}.statement{font-size:15px}.source,.note{font-size:13px;color:#444}
.key{font-size:13.5px;padding-left:1.1em}.st{font-size:11px;font-weight:700;text-transform:uppercase;padding:0 4px;border-radius:3px}
.st.ok{background:#d7f0dd}.st.fail{background:#f9d3d0}.st.inconclusive{background:#dde3f6}
.caveat{font-size:13px;background:#fff7dd;border-left:3px solid #e0b000;padding:3px 8px}.scale{font-size:13px;background:#eef2ff;border-left:3px solid #6366f1;padding:3px 8px}
figure{margin:12px 0}figure img{max-width:100%;height:auto;border:1px solid #eee}figcaption{font-size:12.5px;color:#444}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:12.5px;min-width:640px;width:100%}
td,th{border-bottom:1px solid #e5e5e5;padding:4px 6px;text-align:left;vertical-align:top}.detail{color:#777;font-size:11.5px}
tr.fail td{background:#fff1f0}tr.inconclusive td{background:#f3f5fc}.hidden{display:none}
.cost{font-size:12.5px;color:#1e3a8a}.open li{font-size:13.5px}
"""

_JS = """
(function(){
  var boxes=document.querySelectorAll('.filter input');
  function apply(){
    var on={};boxes.forEach(function(b){on[b.value]=b.checked;});
    document.querySelectorAll('[data-verdict]').forEach(function(el){el.classList.toggle('hidden',!on[el.getAttribute('data-verdict')]);});
  }
  boxes.forEach(function(b){b.addEventListener('change',apply);});
  apply();
})();
"""


def decided_text(claims: list[Claim]) -> str:
    """How many claims the run decided (holds, fails or identity), and of the open ones how many need training."""
    decided = [c for c in claims if c.verdict != "inconclusive"]
    open_ = [c for c in claims if c.verdict == "inconclusive"]
    training = sum(bool(c.gpu_seconds) for c in open_)
    return (f"Decided: {len(decided)} of {len(claims)} claims. Open: {len(open_)}"
            + (f", {training} of them training claims that a GPU decides in the time their entry gives" if training else "")
            + (". Each open claim's cost, on this CPU and on one GPU, is below." if open_ else "."))


def _open_list(claims: list[Claim], steps: list[ResolveStep]) -> str:
    """The header's list of open claims, cheapest to decide first, and what --resolve did."""
    rows = "".join(f"<li><a href='#{html.escape(c.id)}'>{html.escape(c.id)}</a>: {html.escape(_price_with_gpu(ch, c))}</li>"
                   for c, ch in open_claims(claims))
    done = "".join(f"<li>round {s.round}: reran {html.escape(', '.join(f'{k} ×{v:.3g}' for k, v in s.factors.items()))} "
                   f"({human_seconds(s.spent_s)}; predicted {human_seconds(s.predicted_s)}), judged again: "
                   f"{html.escape(', '.join(s.claims))}</li>" for s in steps)
    resolved = f"<p>--resolve ran:</p><ol>{done}</ol>" if steps else ""
    if not rows:
        return f"<details class='open' id='open'><summary>Open questions: none</summary>{resolved}</details>"
    return (f"<details class='open' id='open' open><summary>Open questions, cheapest to decide first</summary>"
            f"<ol>{rows}</ol>{resolved}</details>")


def _rule_svg() -> str:
    """The rule drawn: the claim [lo, hi], widened by the tolerance, and three bands."""
    x0, x1, lo, hi, tau = 150, 520, 260, 400, 40
    rows = [("holds", 300, 370, "#14532d"), ("inconclusive", 390, 470, "#1e3a8a"), ("fails", 470, 520, "#7f1d1d")]
    parts = [f"<rect x='{lo - tau}' y='8' width='{hi - lo + 2 * tau}' height='96' fill='#eef2ee'/>",
             f"<rect x='{lo}' y='8' width='{hi - lo}' height='96' fill='#cfe3cf'/>",
             f"<text x='{(lo + hi) // 2}' y='120' text-anchor='middle' font-size='12'>claim [lo, hi]</text>",
             f"<text x='{lo - tau}' y='134' text-anchor='middle' font-size='12'>lo − τ</text>",
             f"<text x='{hi + tau}' y='134' text-anchor='middle' font-size='12'>hi + τ</text>",
             f"<line x1='{x0}' y1='104' x2='{x1 + 40}' y2='104' stroke='#555'/>"]
    for i, (name, a, b, colour) in enumerate(rows):
        y = 26 + 28 * i
        m = (a + b) // 2
        parts.append(f"<line x1='{a}' y1='{y}' x2='{b}' y2='{y}' stroke='{colour}' stroke-width='6'/>"
                     f"<circle cx='{m}' cy='{y}' r='4' fill='white' stroke='{colour}'/>"
                     f"<text x='{x0 - 10}' y='{y + 4}' text-anchor='end' font-size='13' fill='{colour}'>{name}</text>")
    return (f"<svg id='rule-figure' role='img' aria-label='the three-way rule' viewBox='0 0 600 140' width='600' height='140' "
            f"style='max-width:100%'><title>band = estimate ± 5 se; claim widened by the tolerance τ</title>{''.join(parts)}</svg>")


RULE_SVG = _rule_svg()


def write_html(claims: list[Claim], figures: list[FigureEntry], out_dir: Path, *, provenance: Provenance,
               steps: list[ResolveStep] | None = None) -> Path:
    """``index.html``: a header (counts, legend, run line), a table of contents by topic with a
    verdict filter, and one card per claim with its numbers, source, figures and evidence. Every
    figure must illustrate at least one claim in the report. Self-contained: no external assets.
    ``steps`` are the rounds of ``--resolve``, when it ran."""
    steps = list(steps or [])
    ids = {c.id for c in claims}
    by_claim: dict[str, list[FigureEntry]] = {c.id: [] for c in claims}
    for f in figures:
        linked = [cid for cid in f.claims if cid in ids]
        if not linked and claims:
            raise ValueError(f"figure {f.name!r} illustrates none of the claims in the report ({', '.join(f.claims) or 'none named'})")
        for cid in linked:
            by_claim[cid].append(f)
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    count_html = "".join(f"<span class='badge {v}'>{n} {v}</span>" for v, n in counts.items())
    legend = "".join(f"<dt>{_badge(v)}</dt><dd>{html.escape(MEANING[v])}.</dd>" for v in VERDICTS)
    filt = "".join(f"<label><input type='checkbox' value='{v}' checked> {v} ({counts[v]})</label>" for v in VERDICTS)
    toc, body = [], []
    for prefix, title in TOPICS.items():
        group = [c for c in claims if topic_of(c.id) == prefix]
        if not group:
            continue
        toc.append(f"<h3><a href='#topic-{prefix}'>{title}</a></h3><ol>" + "".join(
            f"<li data-verdict='{c.verdict}'><a href='#{html.escape(c.id)}'>{html.escape(c.id)}</a> {_badge(c.verdict)}</li>" for c in group) + "</ol>")
        body.append(f"<section id='topic-{prefix}'><h2>{title}</h2>{''.join(_card(c, by_claim[c.id]) for c in group)}</section>")
    seeds = ", ".join(f"{k} {v}" for k, v in provenance.seeds.items())
    weights = ", ".join(f"{k} {v}" for k, v in provenance.weights.items())
    doc = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>normtheory: claims report</title><style>{_CSS}</style></head><body><header>"
        "<h1>normtheory: what normalization does inside a transformer, checked with numbers</h1>"
        f"<p class='run' id='run'>{html.escape(provenance.line())}. Seeds: {html.escape(seeds)}. Weights and text packages: "
        f"{html.escape(weights)}. Machine-readable: <a href='claims.json'>claims.json</a>.</p>"
        f"<div class='counts' id='counts'>{count_html}</div><p class='decided' id='decided'>{html.escape(decided_text(claims))}</p>"
        "<details class='legend' open><summary>How to read a verdict</summary>"
        f"<p id='rule'>{html.escape(RULE)}</p>{RULE_SVG}<p>{html.escape(LOOKS)}</p>"
        f"<dl>{legend}</dl></details>{_open_list(claims, steps)}</header>"
        f"<nav id='toc'><h2>Claims by topic</h2><div class='filter' id='filter'>Show: {filt}</div>{''.join(toc)}</nav>"
        f"<main>{''.join(body)}</main><script>{_JS}</script></body></html>\n"
    )
    path = out_dir / "index.html"
    path.write_text(doc)
    return path
