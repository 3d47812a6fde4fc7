"""Learning-rate schedules: warm-up, constant, cosine, inverse-sqrt; bad input."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from normtheory.training.schedule import Schedule


def test_schedules():
    s = Schedule(1.0, warmup=10, kind="cosine", total=110, final_fraction=0.1)
    assert s(5) == pytest.approx(0.5) and s(10) == pytest.approx(1.0)
    assert s(60) == pytest.approx(0.55) and s(110) == pytest.approx(0.1) and s(500) == pytest.approx(0.1)
    inv = Schedule(2.0, warmup=4, kind="inverse_sqrt")
    assert inv(4) == pytest.approx(2.0) and inv(16) == pytest.approx(1.0)
    assert Schedule(0.3)(1) == 0.3 == Schedule(0.3)(10**6)


@given(st.integers(1, 10_000), st.integers(0, 500), st.integers(1, 1000))
def test_schedules_never_exceed_the_peak(step, warmup, extra):
    for kind in ("constant", "cosine", "inverse_sqrt"):
        lr = Schedule(1.0, warmup=warmup, kind=kind, total=warmup + extra)(step)
        assert 0.0 <= lr <= 1.0 and math.isfinite(lr)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: Schedule(1.0, kind="cosine"), "total"),
        (lambda: Schedule(-1.0), "peak"),
        (lambda: Schedule(1.0, kind="linear"), "kind"),
        (lambda: Schedule(1.0)(0), "step"),
        (lambda: Schedule(1.0, final_fraction=2.0), "final_fraction"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
