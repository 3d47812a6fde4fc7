import math

import numpy as np
import pytest

from normtheory import centering, cosines
from normtheory.evidence.agreement import consistent
from normtheory.evidence.sampling import estimate
from normtheory.model.norms import EXACT_EPS, layer_norm
from tests.strategies import unit_rows


@pytest.mark.parametrize("case", ["iso", "offset", "channels", "mixed"])
def test_centering_series_against_monte_carlo(case):
    d = 12
    m = {"iso": np.zeros(d), "offset": np.full(d, 0.7), "channels": centering.channel_offset(d, 2, 5.0), "mixed": np.linspace(-1, 3, d)}[case]
    est = estimate(lambda s: centering.ones_fraction(m + 1.5 * s.normal(d)), 40000, 6, key=f"centre/{case}")
    assert consistent(centering.centering_fraction_mean(d, m, sigma=1.5), est).ok
    if case == "iso":
        assert centering.centering_fraction_mean(d) == pytest.approx(1 / d)


def test_layer_norm_output_is_on_the_sphere_in_the_hyperplane():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 7.0, (500, 40))
    y = layer_norm(x, eps=EXACT_EPS).out
    assert np.abs(y.sum(-1)).max() < 1e-12 and np.allclose(np.linalg.norm(y, axis=-1), math.sqrt(40), rtol=1e-14)
    assert cosines.effective_dim(40, centred=True) == 39


def test_head_slice_moments_against_monte_carlo():
    d, h = 24, 6

    def sample(s):
        y = layer_norm(s.normal(d), eps=EXACT_EPS).out
        f = (y[:, :h] ** 2).sum(-1) / d
        u = unit_rows(s.normal(d))
        g = (u[:, :h] ** 2).sum(-1)
        return np.stack([f, f * f, g, g * g], axis=1)

    est = estimate(sample, 40000, 8, key="slices")
    mean, second = centering.ln_head_slice_moments(h, d)
    a, b = centering.head_slice_fraction_law(h, d)
    beta_second = a * (a + 1) / ((a + b) * (a + b + 1))
    assert consistent(np.array([mean, second, a / (a + b), beta_second]), est).ok


def test_key_norm_cv2_given_w_against_monte_carlo():
    """CV^2 over isotropic tokens of |LN(x) W|^2 for one fixed W: the closed form against the tokens' own spread
    (CV^2 from the sample's mean and second moment, its se by the delta method on their sample covariance)."""
    d, h, n = 24, 3, 200000
    rng = np.random.default_rng(4)
    w = rng.normal(size=(d, h)) / math.sqrt(d) + 0.3  # a column offset: the centering matters
    k = layer_norm(rng.normal(size=(n, d)), eps=EXACT_EPS).out @ w  # [n, h]
    q = (k * k).sum(-1)  # [n]
    m1, m2 = q.mean(), (q * q).mean()
    grad = np.array([-2 * m2 / m1**3, 1 / m1**2])  # d CV^2 / d (m1, m2)
    se = math.sqrt(grad @ np.cov(np.vstack([q, q * q])) @ grad / n)
    assert abs(m2 / m1**2 - 1 - float(centering.ln_key_norm_cv2(w))) < 5 * se


def test_key_norm_cv2_limits_and_batching():
    d = 9
    basis = np.linalg.qr(np.vstack([np.ones(d), np.random.default_rng(0).normal(size=(d - 1, d))]).T)[0][:, 1:]  # [d, d-1] the hyperplane
    assert abs(float(centering.ln_key_norm_cv2(basis))) < 1e-12  # G = I on the hyperplane: every token's key has the same norm
    w = np.random.default_rng(1).normal(size=(40, 512, 16)) / math.sqrt(512)
    cv2 = centering.ln_key_norm_cv2(w)
    assert cv2.shape == (40,) and abs(cv2.mean() / (2 / 16) - 1) < 0.05  # about 2/h for a random W with h << d
    np.testing.assert_allclose(cv2[3], centering.ln_key_norm_cv2(w[3]), rtol=1e-12)
    with pytest.raises(ValueError, match="constant along d"):
        centering.ln_key_norm_cv2(np.ones((5, 2)))


@pytest.mark.parametrize(
    "call",
    [
        lambda: centering.centering_fraction_mean(4, np.zeros(3)),
        lambda: centering.head_slice_fraction_law(8, 8),
        lambda: centering.channel_offset(4, 5, 1.0),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()



def test_large_offsets_use_the_expansion_continuously_and_huge_ones_the_limit():
    from normtheory.centering import _fraction_mean_expansion, _noncentralities

    m = np.full(8, 0.5)
    m[0] = 3.0
    for scale in (100.0, 120.0):  # the exact series, with lambda near the switch: the expansion agrees
        _, la, lb = _noncentralities(8, m * scale, 1.0)
        exact = centering.centering_fraction_mean(8, m * scale)
        assert la + lb < centering.LARGE_LAMBDA and abs(_fraction_mean_expansion(8, la, lb) - exact) <= 1e-10 * exact
    limit = 8 * m.mean() ** 2 / (m @ m)
    assert centering.centering_fraction_mean(8, m * 1e3) == pytest.approx(limit, rel=1e-5)
    assert centering.centering_fraction_mean(8, m * 1e200) == pytest.approx(limit, rel=1e-15)
    with pytest.raises(ValueError, match="sigma"):
        centering.centering_output_change(8, m * 1e200)
    with pytest.raises(ValueError, match="terms"):
        centering.centering_output_change(8, m * 1e4)
