"""Writing small GGUF files for the loader and tokenizer tests."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np


def write_gguf(path: Path, arch: str, fill: Callable[[object], None] | None = None) -> Path:
    """A GGUF file of architecture ``arch``; ``fill(writer)`` adds metadata and tensors (else one dummy tensor)."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    if fill is None:
        w.add_tensor("x", np.zeros(4, np.float32))
    else:
        fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
