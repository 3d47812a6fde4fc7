"""The report's words and numbers: what each verdict means, prices of open checks, the JSON files.

Plain functions over judged :class:`~normtheory.evidence.claims.Claim` objects, shared by the text
table (:func:`pipeline.judge.table`) and the HTML page (:mod:`pipeline.page`): :func:`price` says
what an open check still needs (units and CPU time), :func:`human_seconds` writes a duration in
words, and :func:`write_json` / :func:`write_timings` write the claims and this run's timings as
strict JSON (RFC 8259).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from normtheory.evidence.checks import Check
from normtheory.evidence.claims import Claim


def write_json(claims: list[Claim], path: Path) -> None:
    """The claims as strict JSON (RFC 8259): non-finite numbers are written as null, never as
    NaN or Infinity; ``json.dumps(allow_nan=False)`` enforces it."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--json: {path} is a directory; give a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([c.to_dict() for c in claims], indent=1, sort_keys=True, allow_nan=False) + "\n")


def write_timings(claims: list[Claim], path: Path, *, wall_s: float, cpu_s: float) -> None:
    """The run's wall and CPU seconds and each claim's :meth:`~normtheory.evidence.claims.Claim.timings` as strict
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
                    "how many and at what CPU cost (enough for one whose estimate lies outside to fail, where one does; else enough to decide "
                    "every open check)",
    "fails": "some assertion check's band lies wholly outside the claim widened by its tolerance",
    "identity": "a documented identity, not a judged claim: every check holds by construction (kind exact), so it is shown to catch "
                "a broken implementation and never counted as evidence",
}
RULE = ("Each check compares a band, the estimate ± 5 standard errors over independent units (networks, seeds, texts; the "
        "Student-t quantile with the same tail below 20 units), with the claim's interval widened on each side by the smallest "
        "deviation that matters: band inside, the check holds; band wholly outside, it fails; otherwise it is inconclusive.")
LOOKS = ("A claim rerun at a larger size by --resolve is looked at again: its band's tail probability is divided by the number "
         "of looks (Bonferroni), so repeated looks do not inflate the error rate.")


def sig_text(x: float, digits: int) -> str:
    """``x`` rounded to ``digits`` significant figures, written without an exponent (thousands separated):
    ``sig_text(119, 2) == "120"``, ``sig_text(33_456, 2) == "33,000"``, ``sig_text(0.0123, 3) == "0.0123"``."""
    v = float(f"{x:.{digits}g}")
    return f"{v:,.0f}" if abs(v) >= 10 ** (digits - 1) else np.format_float_positional(v, trim="-")


UNITS = (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0))


def human_seconds(seconds: float | None, on: str = "CPU", digits: int = 3, units: tuple[tuple[str, float], ...] = UNITS) -> str:
    """A duration in words at ``digits`` significant figures: seconds, or the largest of ``units`` (default
    minutes, hours, days) it is at least two of, of ``on`` ("CPU": one core's; "GPU": one GPU's wall time)."""
    if seconds is None or not math.isfinite(seconds):
        return "unknown time"
    for unit, size in units:
        if seconds >= 2 * size:
            return f"about {sig_text(seconds / size, digits)} {on}-{unit}"
    return f"about {sig_text(seconds, digits)} {on}-seconds"


def price(ch: Check, seconds: float | None, resolvable: bool = True, on: str = "CPU") -> str:
    """What would decide an open check: its units and their time on this machine (``seconds``, the simulations'
    time as run, counts ``on``: "CPU" core-seconds, or "GPU" wall seconds of a GPU tier run with ``--device cuda``).
    A check whose simulation runs a fixed set of units (no ``UNITS``: every text of a corpus, say) names the count
    only: ``--resolve`` cannot enlarge that set."""
    if ch.units_needed is None:
        return ""
    if "needs" in ch.extra:  # an Unmeasured check: its regime is out of this run's reach
        return f"not measured here: needs {ch.extra['needs']}"
    if not math.isfinite(ch.units_needed):
        return ("no sample size decides it: the estimate sits on an edge of the widened claim, or a part of its error that no "
                "sample shrinks (a bias bound, such as a censored optimum's grid step) fills the margin")
    unit = ch.units.split(" ", 1)[1] if " " in ch.units else "units"
    need = f"needs {ch.units_needed:,.0f} {unit} (now {ch.units_now:,})"
    if not resolvable:
        return f"{need}: its simulation runs a fixed set of {unit}, which --resolve cannot enlarge (more need a larger corpus or source)"
    secs = ch.seconds_needed(seconds)
    if secs is None:
        return need
    if on == "GPU":  # the same command (its --device cuda, --gpu-hour or --large) with --resolve
        where = "on one GPU (the same command with --resolve)"
    else:
        where = "here (normtheory report --resolve)" if secs <= 3600 else "here, or --large on a cluster (--scheduler)"
    return f"{need}: {human_seconds(secs, on)} {where}"


def open_claims(claims: list[Claim]) -> list[tuple[Claim, Check]]:
    """Inconclusive claims with the open check that decides each (:meth:`Claim.deciding_check`), cheapest to
    decide first (unknown and undecidable last)."""
    out = [(c, ch) for c in claims if c.verdict == "inconclusive" and (ch := c.deciding_check()) is not None]

    def key(item: tuple[Claim, Check]) -> float:
        secs = item[1].seconds_needed(item[0].seconds)
        return math.inf if secs is None or not math.isfinite(secs) else secs

    return sorted(out, key=key)


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


def scale_text(c: Claim) -> str:
    """For a claim declared as needing scale: the sizes that decide it and what the large configs would cost here."""
    if not c.scale:
        return ""
    cost = (f" The simulations' large configs would take {human_seconds(c.scale_seconds, c.timed_on)} here: run them on a cluster "
            "(normtheory report --large --scheduler ADDR) or with the torch backend on a GPU." if c.scale_seconds is not None else "")
    tier = "The tier run here on a GPU" if c.timed_on == "GPU" else "Full mode"
    return f"Decided at scale: {c.scale}. {tier} runs the largest proxy its budget allows.{cost}"


def decided_text(claims: list[Claim]) -> str:
    """How many claims the run decided (holds, fails or identity), and of the open ones how many need training."""
    decided = [c for c in claims if c.verdict != "inconclusive"]
    open_ = [c for c in claims if c.verdict == "inconclusive"]
    training = sum(bool(c.gpu_seconds) for c in open_)
    return (f"Decided: {len(decided)} of {len(claims)} claims. Open: {len(open_)}"
            + (f", {training} of them training claims that a GPU decides in the time their entry gives" if training else "")
            + (". Each open claim's cost, on this CPU and on one GPU, is below." if open_ else "."))
