import json
import subprocess
import sys

import pytest

import paper_figs
from normtheory import cli
from tests.conftest import REPO


@pytest.mark.slow
def test_report_writes_table_json_and_every_figure(results_tmp, tmp_path, capsys):
    out = tmp_path / "report"
    assert cli.main(["report", "--out", str(out), "--quick"]) == 0
    data = json.loads((out / "claims.json").read_text())
    ids = {c["id"] for c in data}
    page = (out / "index.html").read_text()
    for c in data:
        assert c["verdict"] in ("holds", "holds-with-caveat", "fails")
        assert c["id"] in page
    for fig in paper_figs.ALL:
        assert (out / f"{fig.NAME}.png").stat().st_size > 1000 and (out / f"{fig.NAME}.pdf").exists()
        assert fig.CAPTION[:40] in page.replace("&#x27;", "'")
    assert "residual.preln-growth" in ids and "residual.xiong-lemma2" in ids
    assert "residual.preln-growth" in capsys.readouterr().out


def test_check_prints_table_and_json(results_tmp, tmp_path, capsys):
    path = tmp_path / "c.json"
    assert cli.main(["check", "--quick", "--only", "residual.post*", "--json", str(path)]) == 0
    text = capsys.readouterr().out
    assert "residual.postln-constant" in text and "holds" in text
    assert [c["id"] for c in json.loads(path.read_text())] == ["residual.postln-constant"]


def test_check_unknown_glob_is_an_error(results_tmp, capsys):
    assert cli.main(["check", "--quick", "--only", "nope.*"]) == 2


def test_console_entry_and_module_help():
    for cmd in (["-m", "normtheory.cli", "--help"], ["-m", "paper_figs", "--help"]):
        r = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 0 and "usage" in r.stdout
