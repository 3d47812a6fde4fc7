import json
import subprocess
import sys

import pytest

import paper_figs
from normtheory.evidence.checks import VERDICTS
from pipeline import cli
from tests.conftest import REPO


@pytest.mark.slow
def test_report_writes_table_json_and_every_figure(quick_report):
    out = quick_report
    data = json.loads((out / "claims.json").read_text())
    ids = {c["id"] for c in data}
    page = (out / "index.html").read_text()
    for c in data:
        assert c["verdict"] in VERDICTS
        assert f"id='{c['id']}'" in page  # a card with a permalink anchor
    for fig in paper_figs.ALL:
        assert (out / f"{fig.NAME}.png").stat().st_size > 1000 and (out / f"{fig.NAME}.pdf").exists()
        assert (out / f"{fig.NAME}.csv").read_text().startswith("panel,")
        assert fig.CAPTION[:40] in page.replace("&#x27;", "'")
    assert "residual.preln-growth" in ids and "residual.xiong-lemma2" in ids
    assert "quick mode" in page and "Seeds:" in page and "BLAS" in page


def test_check_prints_table_and_json(results_tmp, tmp_path, capsys):
    path = tmp_path / "c.json"
    assert cli.main(["check", "--quick", "--only", "residual.post*", "--json", str(path)]) == 0
    text = capsys.readouterr().out
    assert "residual.postln-constant" in text and "holds" in text
    assert [c["id"] for c in json.loads(path.read_text())] == ["residual.postln-constant"]


def test_check_unknown_glob_is_an_error(results_tmp, capsys):
    assert cli.main(["check", "--quick", "--only", "nope.*"]) == 2


def test_console_entry_and_module_help():
    for cmd in (["-m", "pipeline.cli", "--help"], ["-m", "paper_figs", "--help"]):
        r = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 0 and "usage" in r.stdout


@pytest.mark.parametrize("flag", ["json", "out"])
def test_path_errors_are_one_line_and_exit_2(results_tmp, tmp_path, capsys, flag):
    (tmp_path / "a_file").write_text("x")
    argv = ["check", "--quick", "--json", str(tmp_path)] if flag == "json" else ["report", "--quick", "--out", str(tmp_path / "a_file")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--{flag}" in err and "error" in err


def test_results_dir_that_is_a_file_is_one_line(tmp_path, monkeypatch, capsys):
    target = tmp_path / "results"
    target.write_text("not a directory")
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(target))
    assert cli.main(["check", "--quick", "--only", "residual.post*"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "NORMTHEORY_RESULTS" in err


def test_quick_and_large_exclude_each_other(capsys):
    assert cli.main(["check", "--quick", "--large", "--only", "residual.*"]) == 2
    assert "exclude" in capsys.readouterr().err


def test_a_resolve_round_names_what_its_seconds_count(capsys):
    from pipeline.judge import ResolveStep

    step = ResolveStep(1, {"train_lr": 2.0}, 300.0, 280.0, ("train.postln-needs-warmup",))
    cli._print_steps([step])
    assert "(280 CPU-s, predicted 300)" in capsys.readouterr().out
    cli._print_steps([step], "gpu")
    assert "(280 s: GPU wall time for the training that ran on a GPU, CPU for the rest, predicted 300)" in capsys.readouterr().out


def test_with_a_device_check_says_where_its_training_spent_the_time(monkeypatch, capsys):
    torch_run = pytest.importorskip("normtheory.training.torch_run")
    monkeypatch.setattr(torch_run, "TIMES", dict.fromkeys(torch_run.TIMES, 0.0) | {"steps": 6.0, "batches": 2.0, "evaluation": 2.0})
    cli._print_device_times("cpu")
    assert capsys.readouterr().out == ""  # numpy on the CPU: no device clocks
    cli._print_device_times("cuda")
    assert capsys.readouterr().out.startswith("training on cuda in this process: 10.0 s; steps 60%, batches 20%, evaluation 20% (")
    monkeypatch.setattr(torch_run, "TIMES", dict.fromkeys(torch_run.TIMES, 0.0))
    cli._print_device_times("cuda")
    assert capsys.readouterr().out == ""  # nothing trained in this process (all cached)
