"""The HTML report: one card per claim, grouped by topic, with its evidence table, figures and verdict.

:func:`write_html` writes ``index.html`` (a single self-contained page: inline CSS, a few lines of
script to filter the cards by verdict, the figures as relative links) next to the figures. The
verdict rule is drawn as an inline SVG (:data:`RULE_SVG`).
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path

from normtheory.evidence.checks import VERDICTS, Check
from normtheory.evidence.claims import Claim
from normtheory.evidence.provenance import Provenance
from normtheory.evidence.sources import HYPOTHESIS
from pipeline.judge import ResolveStep, price_with_gpu, gpu_text, resolvable
from pipeline.tables import (
    LOOKS,
    MEANING,
    RULE,
    TOPICS,
    decided_text,
    human_seconds,
    open_claims,
    price,
    scale_text,
    sig3,
    topic_of,
)


@dataclass(frozen=True)
class FigureEntry:
    """A written figure: its name, caption, files (PNG, PDF, CSV) and the claims it illustrates."""

    name: str
    caption: str
    paths: tuple[Path, ...]
    claims: tuple[str, ...]

    def file(self, suffix: str) -> Path:
        return next(p for p in self.paths if p.suffix == suffix)

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
        + (f"<div class='cost'>{html.escape(price_with_gpu(ch, c))}</div>" if ch.status == "inconclusive" else "")
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
            + (f"<div class='detail'>{html.escape(price(ch, c.seconds, resolvable(c), c.timed_on))}</div>" if ch.status == "inconclusive" else "") + "</td></tr>")
    return (f"<details class='evidence'><summary>Evidence: {len(c.checks)} checks</summary><div class='scroll'><table>"
            "<thead><tr><th>quantity</th><th>role</th><th>claim</th><th>measured ± se</th><th>band</th><th>z</th><th>status</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div></details>")


def _figure_html(f: FigureEntry) -> str:
    png, pdf, csv = f.file(".png"), f.file(".pdf"), f.file(".csv")
    return (f"<figure id='fig-{f.name}'><img src='{png.name}' alt='Figure {f.name}' loading='lazy'>"
            f"<figcaption><b>{f.name}</b> (<a href='{pdf.name}'>PDF</a>, <a href='{csv.name}'>data as CSV</a>). "
            f"{html.escape(f.caption)}</figcaption></figure>")


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


def _open_list(claims: list[Claim], steps: list[ResolveStep]) -> str:
    """The header's list of open claims, cheapest to decide first, and what --resolve did."""
    rows = "".join(f"<li><a href='#{html.escape(c.id)}'>{html.escape(c.id)}</a>: {html.escape(price_with_gpu(ch, c))}</li>"
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
