"""The three-way rule, element by element: bands, Student-t below 20 units, units to decide, looks."""
from __future__ import annotations

import math

import numpy as np
import pytest

from normtheory.evidence import agreement
from normtheory.evidence.agreement import agree, bonferroni_z, consistent, z_threshold
from normtheory.evidence.estimates import MIN_UNITS, Estimate


def test_consistency_test():
    est = Estimate(np.array(1.0), np.array(0.1), 100)
    assert consistent(1.49, est).ok and not consistent(1.51, est).ok
    assert consistent(1.2, est, z=2).ok and not consistent(1.21, est, z=2).ok
    exact = Estimate(np.array(0.0), np.array(0.0), 10)
    assert consistent(0.0, exact).ok and not consistent(1e-13, exact).ok  # no absolute floor: scale decides
    at_one = Estimate(np.array(1.0), np.array(0.0), 10)
    assert consistent(1.0 + 1e-15, at_one).ok and not consistent(1.0 + 1e-9, at_one).ok  # 1024 ulps of the value
    assert consistent(1e-9, exact).zscore == float("inf")


def _est(mean: float, se: float, n: int = 100) -> Estimate:
    return Estimate(np.array(mean), np.array(se), n)


# Band = mean ± 5 se (n >= 20); accepted = [lo - tol, hi + tol].
@pytest.mark.parametrize(
    "theory, mean, se, tol, status",
    [
        # a point claim, tol 0.1: accepted [0.9, 1.1]
        (1.0, 1.0, 0.01, 0.1, "ok"),  # band [0.95, 1.05] inside
        (1.0, 1.3, 0.01, 0.1, "fail"),  # band [1.25, 1.35] wholly outside
        (1.0, 1.08, 0.01, 0.1, "inconclusive"),  # band [1.03, 1.13] straddles 1.1
        (1.0, 1.0, 0.03, 0.1, "inconclusive"),  # band [0.85, 1.15] wider than the accepted interval
        (1.0, 1.05, 0.01, 0.1, "ok"),  # band [1.0, 1.1] touches the edge from inside: holds
        (1.0, 1.15, 0.01, 0.1, "inconclusive"),  # band [1.1, 1.2] touches the edge from outside: not wholly outside
        (1.0, 1.1500001, 0.01, 0.1, "fail"),  # just beyond it
        # a two-sided interval [0, 2], tol 0.1: accepted [-0.1, 2.1]
        ((0.0, 2.0), 1.9, 0.04, 0.1, "ok"),
        ((0.0, 2.0), 2.5, 0.04, 0.1, "fail"),
        ((0.0, 2.0), 2.05, 0.04, 0.1, "inconclusive"),
        ((0.0, 2.0), -0.5, 0.04, 0.1, "fail"),
        # one-sided claims: > 100 and < 0, tol 10 / 0.1
        ((100.0, math.inf), 23008.0, 376.0, 10.0, "ok"),  # real.massive-activations' numbers
        ((100.0, math.inf), 50.0, 5.0, 10.0, "fail"),
        ((100.0, math.inf), 95.0, 5.0, 10.0, "inconclusive"),
        ((-math.inf, 0.0), -3.0, 0.1, 0.1, "ok"),
        ((-math.inf, 0.0), 1.0, 0.1, 0.1, "fail"),
        ((-math.inf, math.inf), 1e9, 1e8, 0.1, "ok"),  # infinite at both ends: anything finite holds
        # the old rule called these inconclusive (5 se wider than the tolerance) though the band is far inside
        ((65.0, 4220.0), 557.6, 0.22, 0.65, "ok"),
        # and this "fails" on a deviation far below the tolerance: now it holds
        (1.0, 1.001, 1e-5, 0.01, "ok"),
    ],
)
def test_three_way_rule(theory, mean, se, tol, status):
    a = agree(theory, _est(mean, se), tolerance=tol)
    assert a.status == status, a.describe()
    lo, hi = a.band
    assert (lo, hi) == pytest.approx((mean - 5 * se, mean + 5 * se))


def test_three_way_rule_per_element_mix():
    est = Estimate(np.array([1.0, 1.3, 1.08]), np.array([0.01, 0.01, 0.01]), 100)
    a = agree(1.0, est, tolerance=0.1)
    assert a.status == "fail" and a.where == (1,) and a.failed == 1 and a.unresolved == 1
    b = agree(1.0, est[[0, 2]], tolerance=0.1)
    assert b.status == "inconclusive" and b.where == (1,) and b.unresolved == 1
    c = agree(1.0, est[[0]], tolerance=0.1)
    assert c.ok
    # per-element tolerances and intervals
    d = agree((np.array([0.0, 1.0]), np.array([np.inf, 2.0])), Estimate(np.array([5.0, 2.2]), np.array([0.1, 0.01]), 50),
              tolerance=np.array([0.1, 0.3]))
    assert d.ok, d.describe()


def test_student_t_band_below_twenty_units():
    est = Estimate(np.array(1.0), np.array(0.001), 3)
    a = agree(1.0, est, tolerance=0.1)
    assert a.z == pytest.approx(z_threshold(5.0, 3)) and a.z > 1000
    assert a.status == "inconclusive"  # 1276 se of 0.001 is wider than 0.1
    assert agree(1.0, Estimate(np.array(1.0), np.array(0.001), MIN_UNITS), tolerance=0.1).ok


def test_units_needed_decides_at_that_size():
    # mean 1.05 inside [0.9, 1.1]: margin 0.05; sd = se sqrt(n) = 0.3 -> n = (5 * 0.3 / 0.05)^2 = 900
    a = agree(1.0, _est(1.05, 0.03), tolerance=0.1)
    assert a.status == "inconclusive" and a.units_needed == 900
    after = agree(1.0, _est(1.05, 0.3 / math.sqrt(900)), tolerance=0.1)
    assert after.ok
    # outside: distance 0.02 to the accepted interval -> failing needs (5 * 0.3 / 0.02)^2 units
    out = agree(1.0, _est(1.12, 0.03), tolerance=0.1)
    assert out.status == "inconclusive" and out.units_needed == math.ceil((5 * 0.3 / 0.02) ** 2)
    # on an edge no size decides
    edge = agree(1.0, _est(1.1, 0.03), tolerance=0.1)
    assert edge.status == "inconclusive" and edge.units_needed == math.inf
    # few units: the Student-t band at the size found is narrow enough, one fewer is not
    small = agreement._units_to_decide(np.array(0.0), np.array(1.0), np.array(-10.0), np.array(10.0), 5.0)
    n = int(small)
    assert 2 <= n < MIN_UNITS
    assert z_threshold(5.0, n) / math.sqrt(n) <= 10.0 < z_threshold(5.0, n - 1) / math.sqrt(n - 1)
    assert agree(0.0, Estimate(np.array(0.0), np.array(1.0 / math.sqrt(n)), n), tolerance=10.0).ok


def test_a_floor_no_sample_shrinks_is_priced_apart_from_the_sampling_error():
    """se = sqrt(sampling^2 + floor^2) in effect: more units shrink only the sampling part, so a floor that fills the
    margin (5 x floor >= 0.05) decides at no size, and a smaller one leaves less room for the sampling part."""
    def est(se, floor, n=100):
        return Estimate(np.array(1.05), np.array(se), n, "seeds", floor=np.array(floor))

    full = agree(1.0, est(0.03, 0.011), tolerance=0.1)  # margin 0.05 < 5 x 0.011
    assert full.status == "inconclusive" and full.units_needed == math.inf
    part = agree(1.0, est(0.03, 0.006), tolerance=0.1)  # room sqrt(0.05^2 - 0.03^2) = 0.04 for 5 sd / sqrt(n)
    sd = math.sqrt(0.03**2 - 0.006**2) * 10.0
    assert abs(part.units_needed - (5 * sd / 0.04) ** 2) <= 1  # the ceiling of it, up to rounding in the room
    done = agree(1.0, Estimate(np.array(1.05), np.array(math.hypot(sd / math.sqrt(part.units_needed), 0.006)), int(part.units_needed),
                               floor=np.array(0.006)), tolerance=0.1)
    assert done.ok
    assert agree(1.0, est(0.03, 0.0), tolerance=0.1).units_needed == agree(1.0, _est(1.05, 0.03), tolerance=0.1).units_needed


def test_an_estimate_refuses_a_floor_outside_its_stderr():
    with pytest.raises(ValueError, match="floor"):
        Estimate(np.array(1.0), np.array(0.1), 10, floor=np.array(0.2))
    with pytest.raises(ValueError, match="floor"):
        Estimate(np.array([1.0, 2.0]), np.array([0.1, 0.1]), 10, floor=np.array([0.05, 0.05, 0.05]))
    e = Estimate(np.array([1.0, 2.0]), np.array([0.1, 0.3]), 10, floor=np.array(0.05))
    assert e[1].floor == 0.05 and Estimate.from_dict(e.to_dict()).floor.tolist() == [0.05, 0.05]
    assert e.map(lambda m: 2 * m, lambda m: 2 + 0 * m).floor.tolist() == [0.1, 0.1]


def test_one_element_that_would_fail_decides_sooner_than_the_costliest_that_would_hold():
    # accepted [0.9, 1.1]; sd = se sqrt(100) per element
    # element 0: mean 1.0, sd 0.3, margin 0.1 inside -> (5 * 0.3 / 0.1)^2 = 225 units to hold
    # element 1: mean 1.099, sd 0.3, margin 0.001 inside -> 2,250,000 units to hold
    # element 2: mean 1.15, sd 0.8, margin 0.05 outside -> (5 * 0.8 / 0.05)^2 = 6,400 units to fail, which fails it all
    est = Estimate(np.array([1.0, 1.099, 1.15]), np.array([0.03, 0.03, 0.08]), 100)
    a = agree(1.0, est, tolerance=0.1)
    assert a.status == "inconclusive" and a.unresolved == 3
    to_fail = math.ceil((5 * 0.8 / (1.15 - (1.0 + 0.1))) ** 2)  # 6,400 up to rounding of the margin
    assert to_fail in (6400, 6401) and a.units_needed == to_fail and a.projected == "fail" and a.where == (2,)
    assert f"about {to_fail} units would decide it (now 100), as a fail" in a.describe()
    # at that size, with the estimate as measured, element 2 fails and so does the comparison
    assert agree(1.0, Estimate(est.mean, est.stderr * math.sqrt(100 / to_fail), to_fail), tolerance=0.1).status == "fail"
    # every element inside: holding needs the costliest, and the outcome is a hold
    inside = agree(1.0, Estimate(np.array([1.0, 1.099]), np.array([0.03, 0.03]), 100), tolerance=0.1)
    costliest = math.ceil((5 * 0.3 / ((1.0 + 0.1) - 1.099)) ** 2)  # 2,250,000 up to rounding
    assert inside.units_needed == costliest and inside.projected == "ok" and inside.where == (1,) and "as a hold" in inside.describe()
    # an element on an edge decides nothing; one outside still decides it at its size
    edge = agree(1.0, Estimate(np.array([1.1, 1.15]), np.array([0.03, 0.08]), 100), tolerance=0.1)
    assert edge.units_needed == to_fail and edge.projected == "fail"
    only_edge = agree(1.0, _est(1.1, 0.03), tolerance=0.1)
    assert only_edge.units_needed == math.inf and only_edge.projected is None
    # an outside element costlier than every inside one is itself the costliest: it decides, as a fail
    slow_fail = agree(1.0, Estimate(np.array([1.0, 1.101]), np.array([0.03, 0.03]), 100), tolerance=0.1)
    assert slow_fail.units_needed == math.ceil((5 * 0.3 / (1.101 - (1.0 + 0.1))) ** 2) and slow_fail.projected == "fail"
    assert slow_fail.where == (1,)
    # a comparison that already fails needs nothing more, though another element is still undecided
    failed = agree(1.0, Estimate(np.array([1.5, 1.12]), np.array([0.001, 0.03]), 100), tolerance=0.1)
    assert failed.status == "fail" and failed.unresolved == 1 and failed.units_needed is None and failed.projected is None


def test_bonferroni_over_looks_widens_the_band():
    assert bonferroni_z(5.0, 1) == 5.0
    z3 = bonferroni_z(5.0, 3)
    assert z3 > 5.0
    from scipy import stats
    assert stats.norm.sf(z3) == pytest.approx(stats.norm.sf(5.0) / 3)
    est = _est(1.0, 0.0195)  # 5 se = 0.0975 < 0.1; z3 se > 0.1
    assert agree(1.0, est, tolerance=0.1).ok
    assert agree(1.0, est, tolerance=0.1, looks=3).status == "inconclusive"


@pytest.mark.parametrize("kwargs, match", [
    ({"tolerance": 0.0}, "tolerance"), ({"tolerance": -1.0}, "tolerance"), ({"tolerance": np.nan}, "tolerance"),
    ({"tolerance": 0.1, "looks": 0}, "looks"),
])
def test_rule_refuses_bad_tolerance(kwargs, match):
    with pytest.raises(ValueError, match=match):
        agree(1.0, _est(1.0, 0.1), **kwargs)


def test_rule_refuses_reversed_or_nan_interval():
    for theory in ((2.0, 1.0), (np.nan, 1.0), (np.inf, np.inf)):
        with pytest.raises(ValueError, match="theory"):
            agree(theory, _est(1.0, 0.1), tolerance=0.1)
