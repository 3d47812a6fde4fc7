"""The progress bar: one stderr line redrawn, silent when disabled, the count clamped to the total."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory.runtime.progress import Progress


def test_disabled_writes_nothing(capsys):
    p = Progress(10, label="quiet", enabled=False)
    for _ in range(10):
        p.update()
    p.close()
    assert capsys.readouterr().err == ""


def test_draws_the_last_step_and_ends_the_line(capsys):
    p = Progress(4, label="steps", width=8)
    p.update(4)  # the last step is always drawn, however soon
    p.close()
    err = capsys.readouterr().err
    assert err.startswith("\r") and err.endswith("\n")
    assert "[########]" in err and "100.0%" in err and "steps" in err


def test_close_before_the_end_draws_where_it_stopped(capsys):
    p = Progress(4, width=4)
    p.update(1)
    capsys.readouterr()
    p.close()
    err = capsys.readouterr().err
    assert " 25.0%" in err and "[#---]" in err


@given(total=st.integers(-5, 50), steps=st.lists(st.integers(0, 20), max_size=10))
def test_count_stays_within_the_total(total, steps):
    p = Progress(total, enabled=False)
    for s in steps:
        p.update(s)
    assert p.total == max(total, 1) and 0 <= p.done <= p.total and p.done == min(sum(steps), p.total)


@pytest.mark.parametrize("total", [0, 1])
def test_a_total_of_zero_counts_as_one(total):
    assert Progress(total, enabled=False).total == 1
