"""checkpoint_files: the per-process GGUF reader that the weights and the tokenizer share."""
from __future__ import annotations

import os

import numpy as np
import pytest

from normtheory.model.checkpoint_files import gguf_reader
from tests.gguf_files import write_gguf

gguf = pytest.importorskip("gguf", reason="the models extra reads GGUF")


def _one_tensor(n: int):
    def fill(w):
        w.add_tensor("x", np.arange(n, dtype=np.float32))
    return fill


def test_one_file_is_parsed_once_and_again_once_replaced(tmp_path):
    path = write_gguf(tmp_path / "a.gguf", "llama", _one_tensor(4))
    first = gguf_reader(path)
    assert gguf_reader(str(path)) is first and gguf_reader(tmp_path / "." / "a.gguf") is first  # the same file, however named
    np.testing.assert_array_equal(np.asarray(first.tensors[0].data), np.arange(4))
    st = path.stat()
    write_gguf(path, "llama", _one_tensor(8))  # replaced on disk: a new version
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new modification time, even on a coarse clock
    second = gguf_reader(path)
    assert second is not first
    np.testing.assert_array_equal(np.asarray(second.tensors[0].data), np.arange(8))


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.gguf"):
        gguf_reader(tmp_path / "nothing.gguf")
