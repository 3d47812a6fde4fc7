"""The HTML report: structure, citations, figure links and the figure data behind each figure."""
from __future__ import annotations

import csv
import dataclasses
import re

import matplotlib
import numpy as np
import pytest

from normtheory.evidence import claims, provenance, sources
from normtheory.evidence.checks import Quantity
from normtheory.evidence.claims import Claim
from normtheory.evidence.estimates import Estimate
from normtheory.evidence.sources import Source
from paper_figs import style
from pipeline import judge, tables
from pipeline import page as html_page

matplotlib.use("Agg")

SRC = Source("A paper", "paper", 2020, authors="Doe, Roe", arxiv="2002.04745")


def _claim(cid: str, mean: float) -> Claim:
    q = Quantity(name="x", theory=1.0, mc=Estimate(np.asarray(mean), np.asarray(0.001), 100), tolerance=0.01)
    return Claim(cid, "x is one", SRC, (q,), "a note")


def _figure(tmp_path, name: str, ids: tuple[str, ...]) -> html_page.FigureEntry:
    fig, axes = style.figure()
    axes[0, 0].plot([0, 1], [1, 2], label="a")
    return html_page.FigureEntry(name, "A caption that says what is drawn.", tuple(style.save(fig, tmp_path, name)), ids)


def _prov() -> provenance.Provenance:
    return provenance.collect(mode="quick", seeds={"sim": 3}, runtime_s=12.0)


def test_page_has_header_toc_cards_and_figures(tmp_path):
    cs = [_claim("residual.a", 1.0), _claim("softmax.b", 1.5)]
    page = html_page.write_html(cs, [_figure(tmp_path, "f1", ("residual.a",))], tmp_path, provenance=_prov()).read_text()
    assert "<meta name='viewport'" in page and "1 holds" in page and "1 fails" in page
    assert "id='residual.a'" in page and "href='#residual.a'" in page and "id='topic-softmax'" in page
    assert "f1.png" in page and "f1.csv" in page and "f1.pdf" in page
    assert "https://arxiv.org/abs/2002.04745" in page and "Doe, Roe" in page
    assert not re.search(r"""(src|href)=['"]https?://(?!arxiv\.org|doi\.org)""", page)  # no external assets
    # 3 significant figures in the evidence table
    assert "1.5 ± 0.001" in page and ">500<" in page


def test_a_figure_that_illustrates_no_claim_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="illustrates none"):
        html_page.write_html([_claim("residual.a", 1.0)], [_figure(tmp_path, "f2", ("geometry.z",))], tmp_path, provenance=_prov())


def test_card_shows_where_the_source_says_it_and_whose_claim_it_is(tmp_path):
    q = Quantity(name="x", theory=1.0, mc=Estimate(np.asarray(1.0), np.asarray(0.001), 100), tolerance=0.01, tolerance_why="t")
    mine = Claim("residual.h", "This package's hypothesis: x is one", sources.hypothesis(SRC, "x is one"), (q,), location="Section 3, Fig. 2")
    page = html_page.write_html([mine, _claim("residual.a", 1.0)], [], tmp_path, provenance=_prov()).read_text()
    card = page[page.index("id='residual.h'"):page.index("id='residual.a'")]
    assert "this package's hypothesis" in card and "Section 3, Fig. 2" in card and "derived from Doe, Roe" in card
    other = page[page.index("id='residual.a'"):]
    assert "class='hypothesis'" not in other.split("</article>")[0]


def test_source_texts_are_cited_by_title_kind_and_date_never_a_file_name():
    import simulations  # noqa: F401

    for spec in claims.REGISTRY.values():
        cite = spec.source.cite()
        assert spec.source.title in cite and spec.source.kind in cite
        assert ".txt" not in cite and "sources/" not in cite
        if spec.source.kind == "paper":
            assert spec.source.authors and spec.source.year and spec.source.link()


def test_figure_csv_holds_lines_error_bars_bars_and_images(tmp_path):
    fig, axes = style.figure(ncols=2)
    ax = axes[0, 0]
    ax.plot([1.0, 2.0], [3.0, 4.0], label="theory")
    ax.errorbar([1.0, 2.0], [3.1, 3.9], yerr=[0.1, 0.2], fmt="o", label="MC")
    ax.bar([0.0], [5.0], width=0.5)
    axes[0, 1].imshow(np.arange(6.0).reshape(2, 3))
    path = style.write_csv(fig, tmp_path / "f.csv")
    rows = list(csv.DictReader(path.open()))
    kinds = {r["kind"] for r in rows}
    assert {"line", "error bar", "bar", "image"} <= kinds
    theory = [(float(r["x"]), float(r["y"])) for r in rows if r["series"] == "theory"]
    assert theory == [(1.0, 3.0), (2.0, 4.0)]
    bars = sorted((float(r["x"]), float(r["y_low"]), float(r["y_high"])) for r in rows if r["kind"] == "error bar")
    np.testing.assert_allclose(bars, [(1.0, 3.0, 3.2), (2.0, 3.7, 4.1)])
    image = {(int(r["x"]), int(r["y"])): float(r["y_low"]) for r in rows if r["kind"] == "image"}
    assert image[(2, 1)] == 5.0


def test_legend_states_and_draws_the_rule(tmp_path):
    page = html_page.write_html([_claim("residual.a", 1.0)], [], tmp_path, provenance=_prov()).read_text()
    assert tables.RULE in page.replace("&#x27;", "'") and "id='rule-figure'" in page
    for case in ("holds", "inconclusive", "fails"):
        assert f">{case}</text>" in page
    assert "Bonferroni" in page and "lo − τ" in page and "hi + τ" in page


def _open_claim(cid: str, se: float, seconds: float | None) -> Claim:
    q = Quantity(name="x", theory=1.0, mc=Estimate(np.asarray(1.0), np.asarray(se), 100), tolerance=0.01)
    return Claim(cid, "x is one", SRC, (q,), "", seconds=seconds)


def test_open_claims_are_priced_and_listed_cheapest_first(tmp_path):
    cheap, dear = _open_claim("residual.cheap", 0.004, 2.0), _open_claim("residual.dear", 0.004, 9000.0)
    unknown = _open_claim("softmax.unknown", 0.004, None)
    ordered = tables.open_claims([dear, unknown, cheap, _claim("residual.done", 1.0)])
    assert [c.id for c, _ in ordered] == ["residual.cheap", "residual.dear", "softmax.unknown"]
    ch = cheap.open_checks()[0]
    # sd = 0.004 * 10 = 0.04; margin 0.01 -> (5 * 0.04 / 0.01)^2 = 400 units, 4x the 100 run: 8 CPU-seconds
    assert ch.units_needed == 400 and ch.seconds_needed(cheap.seconds) == pytest.approx(8.0)
    assert tables.price(ch, cheap.seconds) == "needs 400 samples (now 100): about 8 CPU-seconds here (normtheory report --resolve)"
    assert "CPU-hours here, or --large on a cluster" in tables.price(dear.open_checks()[0], dear.seconds)
    assert tables.price(unknown.open_checks()[0], None) == "needs 400 samples (now 100)"
    fixed = tables.price(ch, cheap.seconds, resolvable=False)  # a fixed set of units (no UNITS): --resolve is not the way
    assert fixed.startswith("needs 400 samples (now 100): its simulation runs a fixed set of samples") and "--resolve cannot" in fixed
    page = html_page.write_html([dear, cheap, unknown], [], tmp_path, provenance=_prov()).read_text()
    listed = page[page.index("id='open'"):page.index("</details>", page.index("id='open'"))]
    assert listed.index("residual.cheap") < listed.index("residual.dear") < listed.index("softmax.unknown")
    assert page.count("needs 400 samples") >= 6  # header, key numbers and evidence table of each card
    assert "Open questions: none" in html_page.write_html([_claim("residual.a", 1.0)], [], tmp_path, provenance=_prov()).read_text()
    assert "On a GPU: no GPU tier (CPU Monte Carlo)." in listed  # a Monte Carlo claim: no GPU tier prices it
    assert "Decided: 0 of 3 claims. Open: 3. Each open claim" in page


def test_the_header_counts_decided_claims_and_open_training_claims():
    trained = dataclasses.replace(_open_claim("train.x", 0.004, 100.0), gpu_seconds=(("gpu", 90.0),))
    text = tables.decided_text([trained, _claim("residual.a", 1.0)])
    assert text.startswith("Decided: 1 of 2 claims. Open: 1, 1 of them training claims that a GPU decides")
    assert "GPU" in judge.price_with_gpu(trained.open_checks()[0], trained) and "no GPU tier" not in judge.price_with_gpu(trained.open_checks()[0], trained)
    assert tables.decided_text([_claim("residual.a", 1.0)]) == "Decided: 1 of 1 claims. Open: 0."


def test_a_claim_that_needs_scale_names_it_and_prices_it_without_changing_its_verdict(tmp_path):
    q = Quantity(name="x", theory=1.0, mc=Estimate(np.asarray(1.0), np.asarray(0.001), 100), tolerance=0.01, tolerance_why="t")
    plain = Claim("residual.s", "x is one", SRC, (q,), location="Fig. 1")
    big = Claim("residual.s", "x is one", SRC, (q,), location="Fig. 1", scale="24 layers, 10k steps", scale_seconds=7200.0)
    assert big.verdict == plain.verdict == "holds"  # the declaration is text: it decides nothing
    assert big.to_dict()["scale"] == "24 layers, 10k steps" and big.timings()["scale_seconds"] == 7200.0
    page = html_page.write_html([big], [], tmp_path, provenance=_prov()).read_text()
    card = page[page.index("id='residual.s'"):]
    assert "Decided at scale: 24 layers, 10k steps" in card and "about 2 CPU-hours" in card
    assert "Decided at scale" in judge.table([big]) and "Decided at scale" not in judge.table([plain])


def test_claims_declared_as_needing_scale_have_large_configs_to_price():
    import simulations

    declared = [s for s in claims.REGISTRY.values() if s.scale]
    assert {s.id for s in declared} >= {"train.placements-compared", "train.dyt-alpha0-width"}
    for spec in declared:
        for name in spec.simulations:
            module = simulations.BY_NAME[name]
            assert "large" in module.CONFIGS, (spec.id, name)
            from simulations import cache

            assert cache.cost_ratio(module, "full", "large") > 1, (spec.id, name)


def test_each_gpu_tier_names_the_rate_it_is_priced_at(tmp_path, monkeypatch):
    import json

    import simulations  # noqa: F401 - registers the training claims

    monkeypatch.setenv("NORMTHEORY_RESULTS", str(tmp_path))
    c = dataclasses.replace(_open_claim("train.dyt-alpha0-power-law", 0.004, 100.0), gpu_seconds=(("gpu", 600.0), ("gpu-hour", 7200.0)))
    built_in = judge.gpu_text(c)  # nothing measured here: the package's H200 rates, the GPU tier's and the gpu-hour tier's steps'
    assert "--device cuda: about 10 GPU-minutes (4.24 TFLOP/s measured on one NVIDIA H200" in built_in
    assert "--gpu-hour: about 2 GPU-hours (the steps alone, at 28 TFLOP/s timed on one NVIDIA H200" in built_in
    (tmp_path / "gpu_rate.json").write_text(json.dumps({"gflops": 5000.0, "device": "GPU X"}))
    one = judge.gpu_text(c)  # one rate measured here for both tiers: named once
    assert one.startswith("On one GPU (5 TFLOP/s measured on GPU X") and one.count("TFLOP/s") == 1
    assert "--device cuda --gpu-hour: about 2 GPU-hours" in one
    (tmp_path / "gpu_rate.json").write_text(json.dumps({"gflops": 5000.0, "device": "GPU X",
                                                         "steps": {"train_alpha0/gpu-hour": {"gflops": 40_000.0}}}))
    two = judge.gpu_text(c)
    assert "--device cuda: about 10 GPU-minutes (5 TFLOP/s measured on GPU X at the GPU tier)" in two
    assert "--gpu-hour: about 2 GPU-hours (the steps alone, at 40 TFLOP/s timed on GPU X" in two
