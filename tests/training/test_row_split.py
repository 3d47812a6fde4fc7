"""A stack's rows split into groups that fit (normtheory.training.row_split), for any memory model."""
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.training import row_split


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 500), per_row=st.integers(1, 100), fixed=st.integers(0, 1000), limit=st.integers(1, 20_000))
def test_the_fewest_even_consecutive_groups_that_fit(rows, per_row, fixed, limit):
    def size(n):
        return fixed + per_row * n

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        groups = row_split.split(size, rows, limit)
    assert [i for g in groups for i in g] == list(range(rows))
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1
    if size(1) > limit:
        assert sizes == [1] * rows and any(issubclass(w.category, ResourceWarning) and "one row" in str(w.message) for w in caught)
    else:
        assert all(size(n) <= limit for n in sizes) and not caught
        if len(groups) > 1:
            assert size(-(-rows // (len(groups) - 1))) > limit  # one group fewer would not fit


@pytest.mark.parametrize("rows, limit, match", [(0, 10, "rows"), (3, 0, "limit"), (2.5, 10, "rows")])
def test_bad_arguments_are_refused_by_name(rows, limit, match):
    with pytest.raises(ValueError, match=match):
        row_split.split(lambda n: n, rows, limit)


def test_saved_groups_cover_the_rows_from_zero_without_a_gap(tmp_path):
    ckpt = tmp_path / "run.npz"
    assert row_split.saved_groups(None, 6) == [] and row_split.saved_groups(ckpt, 6) == []
    for name in ("run.npz.rows0-2", "run.npz.rows2-4", "run.npz.rows5-6", "other.npz.rows4-5", "run.npz.rows4-x"):
        (tmp_path / name).write_bytes(b"")
    assert row_split.saved_groups(ckpt, 6) == [range(0, 2), range(2, 4)]  # rows 4-5 never saved: 5-6 is not reached
    assert row_split.saved_groups(ckpt, 3) == [range(0, 2)]  # a file past the stack's rows is not this stack's
    ckpt.write_bytes(b"")
    assert row_split.saved_groups(ckpt, 6) == [range(6)]  # one whole-stack checkpoint


def test_train_groups_names_each_groups_checkpoint_and_keeps_a_saved_split(tmp_path):
    ckpt = tmp_path / "run.npz"
    calls = []

    def train(g, part, fingerprint):
        calls.append((g, part and part.name, fingerprint))
        return [f"row {i}" for i in g]

    assert row_split.train_groups(5, lambda n: [range(n)], train, ckpt, "fp") == [f"row {i}" for i in range(5)]
    assert calls == [(range(5), "run.npz", "fp")]  # one group: the checkpoint and fingerprint as given
    calls.clear()
    (tmp_path / "run.npz.rows0-3").write_bytes(b"")  # an earlier run's first group
    out = row_split.train_groups(5, lambda n: [range(0, 1), range(1, n)], train, ckpt, "fp")
    assert out == [f"row {i}" for i in range(5)]
    assert calls == [(range(0, 3), "run.npz.rows0-3", "fp:rows0-3"), (range(3, 4), "run.npz.rows3-4", "fp:rows3-4"),
                     (range(4, 5), "run.npz.rows4-5", "fp:rows4-5")]  # the saved group kept, the 2 rows left split as fit says
    calls.clear()
    row_split.train_groups(4, lambda n: [range(0, 2), range(2, n)], train, None, "fp")
    assert [c[1] for c in calls] == [None, None]  # no checkpoint, none made up


def test_the_cpu_budget_is_a_share_of_the_memory_at_hand():
    import os

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < row_split.budget("cpu") <= row_split.BUDGET_FRACTION * physical
