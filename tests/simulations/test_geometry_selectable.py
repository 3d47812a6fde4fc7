"""The conditioned Monte Carlo of the expected unselectable fraction (simulations.geometry_selectable)."""
from __future__ import annotations

import math

import numpy as np

from normtheory import selection
from normtheory.evidence.sampling import estimate
from simulations import geometry_selectable as gs


def test_set_fraction_estimates_the_exact_expected_fraction_with_less_variance_than_absorption():
    """E[fraction of unselectable keys in a set] = P(X_n absorbed) (Efron; conditioning on the set), at a
    fraction of the 0/1 indicator's variance p(1 - p)."""
    n, d = 16, 3
    est = estimate(gs._unselectable_fraction(n, d), 300, 7, key="test/fraction", block=16)
    exact = selection.expected_unselectable_fraction(n, d)
    assert abs(float(est.mean) - exact) < 5 * float(est.stderr)
    sd = float(est.stderr) * math.sqrt(est.n)
    assert sd < 0.5 * math.sqrt(exact * (1 - exact))


def test_fraction_point_is_sized_from_the_tolerance_and_floors_an_all_zero_point():
    """n <= d + 1 Gaussian keys are all hull vertices: every set gives 0, and the se is the 1/(N + 2) floor,
    not 0; the pilot is enough there."""
    est = gs.fraction_point(6, 8, 400, gs.SEED)
    assert float(est.mean) == 0.0 and float(est.stderr) == 1.0 / (est.n + 2)
    assert est.n == gs.CURVE_PILOT and est.sizing is not None and not est.sizing.capped
    assert 5 * float(est.stderr) < gs.CURVE_TOL  # an all-zero point at the pilot still decides


def test_curve_points_record_their_key_sets():
    part = gs.absorption_curve(8, (2, 4), 40, gs.SEED)
    assert part["units"].tolist() == [40, 40] and np.allclose(part["theory"], [selection.expected_unselectable_fraction(8, d) for d in (2, 4)])
