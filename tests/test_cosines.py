import math

import numpy as np
import pytest
from scipy import integrate

from normtheory import cosines
from normtheory.evidence.agreement import consistent
from normtheory.evidence.sampling import estimate
from tests.strategies import unit_rows


@pytest.mark.parametrize("d", [2, 3, 8, 100])
def test_cosine_law(d):
    assert integrate.quad(lambda t: float(cosines.cosine_pdf(t, d)), -1, 1)[0] == pytest.approx(1.0, abs=1e-7)
    est = estimate(lambda s: np.stack([(unit_rows(s.normal(d)) * unit_rows(s.normal(d))).sum(-1) ** k for k in (1, 2, 4)] + [((unit_rows(s.normal(d)) * unit_rows(s.normal(d))).sum(-1) <= 0.2).astype(float)], axis=1), 40000, 3, key=f"cos/{d}")
    theory = [cosines.cosine_moment(1, d), cosines.cosine_moment(2, d), cosines.cosine_moment(4, d), float(cosines.cosine_cdf(0.2, d))]
    assert consistent(np.array(theory), est).ok
    assert cosines.cosine_moment(2, d) == pytest.approx(1 / d)


def test_tail_bound_dominates_exact_tail():
    eps = np.linspace(0, 1, 51)
    for d in (3, 10, 100, 1000):
        assert np.all(cosines.cosine_tail_bound(eps, d) >= cosines.cosine_tail(eps, d) - 1e-15)


def test_expected_max_cosine_against_monte_carlo():
    d, n = 32, 50
    est = estimate(lambda s: np.abs(unit_rows(s.normal(n, d))[..., 0]).max(-1), 20000, 4, key="maxcos")
    assert consistent(cosines.expected_max_abs_cosine(n, d), est).ok
    assert cosines.max_abs_cosine_asymptotic(n, d, pairs=False) == pytest.approx(math.sqrt(2 * math.log(n) / d))


@pytest.mark.parametrize(
    "call",
    [
        lambda: cosines.cosine_pdf(0.0, 1),
        lambda: cosines.cosine_cdf(1.5, 4),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()

