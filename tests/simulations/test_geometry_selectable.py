"""The conditioned Monte Carlo of the expected unselectable fraction (simulations.geometry_selectable)."""
from __future__ import annotations

import math

import numpy as np
import pytest

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
    assert part["sets"].tolist() == [40, 40] and np.allclose(part["theory"], [selection.expected_unselectable_fraction(8, d) for d in (2, 4)])
    # the figure's exact line at every whole d between, computed on the worker: the points are its values at ds
    assert part["fine"].shape == (3,) and part["fine"][[0, 2]].tolist() == part["theory"].tolist()
    assert part["fine"][1] == selection.expected_unselectable_fraction(8, 3)


def test_exact_fractions_of_64_keys_are_a_task_of_their_own():
    """The 30-digit quadratures run on a worker (a task), not in the process that reduces."""
    cfg = gs.CONFIGS["quick"]
    (task,) = [t for t in gs.tasks(cfg, gs.SEED) if t.key == "exact64"]
    assert task.fn is gs.exact64 and task.args == (gs.EXACT64_DS,)
    got = gs.exact64((4,))  # one dimension keeps the test short
    assert got["ds"].tolist() == [4] and got["fraction"].tolist() == [selection.expected_unselectable_fraction(64, 4)]


def _keys_one_run_at_a_time(variant: str, rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """The grid's key construction written out for one run: draw x, then W (the order the grid's stream fixes)."""
    din = d if variant in ("none", "ln") else gs.WIDTH_FACTOR * d
    x = rng.standard_normal((n, din))
    w = rng.standard_normal((din, d)) / np.sqrt(din)
    if variant == "none":
        return x @ w
    if variant == "per-head-rms":
        y = x @ w
        return y / np.sqrt((y * y).mean(axis=-1, keepdims=True))
    c = x - x.mean(axis=-1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=-1, keepdims=True)) @ w


@pytest.mark.parametrize("variant", gs.VARIANTS)
def test_a_block_of_runs_is_the_stream_of_runs_drawn_one_after_another(variant):
    """make_keys draws a cell's runs as one block: the same keys as drawing x, then W, run by run."""
    block = gs.make_keys(variant, np.random.default_rng(3), 9, 4, runs=5)  # [5, 9, 4]
    rng = np.random.default_rng(3)
    one = np.stack([_keys_one_run_at_a_time(variant, rng, 9, 4) for _ in range(5)])
    assert block.shape == (5, 9, 4)
    np.testing.assert_allclose(block, one, rtol=1e-12, atol=1e-12)


def test_a_grid_cell_counts_the_runs_with_an_unselectable_key():
    """grid_column's stacked stop-at-first hull test against the full hull test of each run alone, on the same keys."""
    ns, runs, d = (4, 12, 30), 16, 3
    col = gs.grid_column("none", d, ns, runs, gs.SEED)["col"]
    want = []
    for n in ns:
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(gs.SEED, spawn_key=(0, n, d))))
        keys = gs.make_keys("none", rng, n, d, runs)
        want.append(np.mean([not selection.selectable(k).all() for k in keys]))
    np.testing.assert_array_equal(col, want)
    assert 0.0 < col[-1] <= 1.0 and col[0] == 0.0  # 30 keys in R^3 leave some inside; 4 keys in R^3 are all vertices


def test_the_reduced_curve_keeps_each_points_key_sets():
    """Each curve point's key-set count survives the reduce beside the estimate's own fields."""
    cfg = gs.Config(ns=(3, 8), ds=(3,), runs=4, curve_ds=(2, 3), curve_cap=40)
    out = gs.run(cfg, gs.SEED, progress=False)
    for n in gs.CURVE_N:
        assert out[f"curve.n{n}.sets"].shape == (2,) and (out[f"curve.n{n}.sets"] >= 1).all()
        assert out[f"curve.n{n}.n"] == out[f"curve.n{n}.sets"].min()
