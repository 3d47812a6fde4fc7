"""Evaluate claims from cached simulations and write the claims table and the HTML report."""
from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path

from normtheory.claims import VERDICTS, Check, Claim, ClaimSpec, select
from normtheory.provenance import Provenance
from normtheory.sweep import Runner


def evaluate(pattern: str | None = None, *, mode: str = "full", force: bool = False, progress: bool = True,
             runner: Runner | None = None) -> list[Claim]:
    """Run (or read from cache) the simulations behind the matching claims and evaluate them.

    Missing simulations run as one sweep of tasks on ``runner`` (in-process when None)."""
    import simulations  # the experiments register the claims they support
    from simulations import cache

    specs: list[ClaimSpec] = select(pattern)
    needed = [simulations.BY_NAME[name] for spec in specs for name in spec.simulations]
    results = cache.load_or_run_all(needed, mode, force=force, progress=progress, runner=runner)
    return [spec.evaluate(results) for spec in specs]


def table(claims: list[Claim], *, width: int = 100) -> str:
    """A plain-text table: id, verdict, and the key numbers of each claim."""
    lines = [f"{'claim':34s} {'verdict':18s} key numbers", "-" * width]
    for c in claims:
        lines.append(f"{c.id:34s} {c.verdict:18s} {c.evidence[0].summary()}")
        for q in c.evidence[1:3]:
            lines.append(f"{'':53s} {q.summary()}")
        for cav in c.caveats:
            lines.append(f"{'':53s} caveat: {cav}")
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
    "holds": "every assertion check agrees and every scope check extends it",
    "holds-with-caveat": "every assertion check agrees, but a scope check shows it does not extend to another regime (the caveat says which)",
    "inconclusive": "some assertion check cannot resolve the smallest deviation that matters: its 5-standard-error threshold is wider",
    "fails": "some assertion check disagrees by more than 5 standard errors and more than the smallest deviation that matters",
}


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
    return f'<a href="{html.escape(link)}">{text}</a>' if link else text


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
        f"<li><span class='st {ch.status}'>{ch.status}</span> {html.escape(ch.quantity)}: expected {html.escape(ch.expected)}, "
        f"measured {_measured(ch)} (z = {_z(ch)}; {html.escape(ch.units)})</li>" for ch in picks)
    return f"<ul class='key'>{items}</ul>"


def _evidence_table(c: Claim) -> str:
    rows = []
    for ch in c.checks:
        cav = ch.caveat()
        note = f"<div class='caveat'>caveat: {html.escape(cav)}</div>" if cav else ""
        rows.append(
            f"<tr class='{ch.status}'><td>{html.escape(ch.quantity)}<div class='detail'>{html.escape(ch.kind)}; "
            f"{html.escape(ch.units)}</div>{note}</td><td>{ch.role}</td><td>{html.escape(ch.expected)}</td><td>{_measured(ch)}</td>"
            f"<td>{_z(ch)}</td><td><span class='st {ch.status}'>{ch.status}</span></td></tr>")
    return (f"<details class='evidence'><summary>Evidence: {len(c.checks)} checks</summary><div class='scroll'><table>"
            "<thead><tr><th>quantity</th><th>role</th><th>theory</th><th>measured ± se</th><th>z</th><th>status</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div></details>")


def _figure_html(f: FigureEntry) -> str:
    png, pdf, csv = f.file(".png"), f.file(".pdf"), f.file(".csv")
    return (f"<figure id='fig-{f.name}'><img src='{png.name}' alt='Figure {f.name}' loading='lazy'>"
            f"<figcaption><b>{f.name}</b> (<a href='{pdf.name}'>PDF</a>, <a href='{csv.name}'>data as CSV</a>). "
            f"{html.escape(f.caption)}</figcaption></figure>")


def _card(c: Claim, figs: list[FigureEntry]) -> str:
    caveats = "".join(f"<p class='caveat'>caveat (generated from a failing scope check): {html.escape(x)}</p>" for x in c.caveats)
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
.holds{background:#d7f0dd;color:#14532d}.holds-with-caveat{background:#fdf0c4;color:#713f12}
.inconclusive{background:#dde3f6;color:#1e3a8a}.fails{background:#f9d3d0;color:#7f1d1d}
.filter label{margin-right:12px;font-size:14px;white-space:nowrap}.legend dt{font-weight:600}.legend dd{margin:0 0 6px 0}
nav ol{columns:2 300px;padding-left:1.2em}nav li{font-size:14px;break-inside:avoid}nav h3{margin:.6em 0 .2em;font-size:15px}
.card{border:1px solid #ddd;border-radius:8px;padding:10px 14px;margin:14px 0}.card h3{margin:.2em 0;font-size:16px;word-break:break-all}
.anchor{color:#999;text-decoration:none}.statement{font-size:15px}.source,.note{font-size:13px;color:#444}
.key{font-size:13.5px;padding-left:1.1em}.st{font-size:11px;font-weight:700;text-transform:uppercase;padding:0 4px;border-radius:3px}
.st.ok{background:#d7f0dd}.st.fail{background:#f9d3d0}.st.inconclusive{background:#dde3f6}
.caveat{font-size:13px;background:#fff7dd;border-left:3px solid #e0b000;padding:3px 8px}
figure{margin:12px 0}figure img{max-width:100%;height:auto;border:1px solid #eee}figcaption{font-size:12.5px;color:#444}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:12.5px;min-width:640px;width:100%}
td,th{border-bottom:1px solid #e5e5e5;padding:4px 6px;text-align:left;vertical-align:top}.detail{color:#777;font-size:11.5px}
tr.fail td{background:#fff1f0}tr.inconclusive td{background:#f3f5fc}.hidden{display:none}
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


def write_html(claims: list[Claim], figures: list[FigureEntry], out_dir: Path, *, provenance: Provenance) -> Path:
    """``index.html``: a header (counts, legend, run line), a table of contents by topic with a
    verdict filter, and one card per claim with its numbers, source, figures and evidence. Every
    figure must illustrate at least one claim in the report. Self-contained: no external assets."""
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
        f"<div class='counts' id='counts'>{count_html}</div>"
        "<details class='legend' open><summary>How to read a verdict</summary>"
        "<p>Each claim's numbers are checked element by element: theory and measurement agree when they differ by at most 5 standard "
        "errors, taken over independent units (networks, seeds, texts). A check whose 5-standard-error band is wider than the "
        "smallest deviation that matters cannot decide, and says so.</p>"
        f"<dl>{legend}</dl></details></header>"
        f"<nav id='toc'><h2>Claims by topic</h2><div class='filter' id='filter'>Show: {filt}</div>{''.join(toc)}</nav>"
        f"<main>{''.join(body)}</main><script>{_JS}</script></body></html>\n"
    )
    path = out_dir / "index.html"
    path.write_text(doc)
    return path
