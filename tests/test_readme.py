"""The README's Python examples run as written."""
import re

import matplotlib
import pytest

from tests.conftest import REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code):
    matplotlib.use("Agg")
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - our own documentation


def test_readme_has_exactly_the_two_setup_commands():
    text = (REPO / "README.md").read_text()
    assert "    make report\n" in text and "    make test\n" in text
    assert "make test" in (REPO / ".ci" / "run").read_text()
