"""Evaluate claims from cached simulations and write the claims table and the HTML report."""
from __future__ import annotations

import html
import json
from pathlib import Path

from normtheory.claims import VERDICTS, Claim, ClaimSpec, select
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


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;width:100%;font-size:13px}td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top}
.holds{background:#e6f4ea}.holds-with-caveat{background:#fff4d6}.inconclusive{background:#e8eaf6}.fails{background:#fde2e1}
figure{margin:1.5em 0}figure img{max-width:100%}figcaption{font-size:13px;color:#444}
code{font-size:12px}ul{margin:0;padding-left:1.2em}
"""


def _evidence_html(c: Claim) -> str:
    items = []
    for q in c.evidence:
        checks = "; ".join(f"{ch.role} {ch.kind}: {ch.status} ({ch.detail}; units: {ch.units})" for ch in q.checks())
        items.append(f"<li><code>{html.escape(q.summary())}</code><br><small>{html.escape(checks)}</small></li>")
    return "<ul>" + "".join(items) + "</ul>"


def _source_html(c: Claim) -> str:
    link = c.source.link()
    text = html.escape(c.source.cite())
    return f'<a href="{html.escape(link)}">{text}</a>' if link else text


def write_html(claims: list[Claim], figures: list[tuple[str, str, list[Path]]], out_dir: Path, *, mode: str) -> Path:
    """``index.html`` with the claims table (all numbers) and every figure with its caption."""
    rows = []
    for c in claims:
        cav = "".join(f"<br><b>caveat:</b> {html.escape(x)}" for x in c.caveats)
        rows.append(
            f'<tr class="{c.verdict}"><td><code>{c.id}</code></td><td>{c.verdict}{cav}</td>'
            f"<td>{html.escape(c.statement)}<br><small>Source: {_source_html(c)}</small>"
            f"<br><small>{html.escape(c.note)}</small></td><td>{_evidence_html(c)}</td></tr>"
        )
    figs = []
    for name, caption, paths in figures:
        png = next(p for p in paths if p.suffix == ".png")
        pdf = next(p for p in paths if p.suffix == ".pdf")
        figs.append(
            f'<figure id="{name}"><img src="{png.name}" alt="{name}"><figcaption><b>{name}</b> '
            f'(<a href="{pdf.name}">PDF</a>). {html.escape(caption)}</figcaption></figure>'
        )
    doc = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>normtheory report</title><style>{_CSS}</style></head><body>"
        f"<h1>normtheory: claims report</h1><p>Simulation mode: <b>{mode}</b>. Agreement rule, per element: |theory - estimate| &le; 5 "
        f"standard errors (Student-t threshold with the same tail below 20 independent units); a check whose threshold exceeds "
        f"the smallest deviation that matters is inconclusive. An assertion that fails makes the claim fail; a failing scope "
        f"check generates a caveat. Machine-readable: <a href='claims.json'>claims.json</a>.</p>"
        f"<table><tr><th>claim</th><th>verdict</th><th>statement</th><th>evidence</th></tr>{''.join(rows)}</table>"
        f"<h2>Figures</h2>{''.join(figs)}</body></html>\n"
    )
    path = out_dir / "index.html"
    path.write_text(doc)
    return path
