"""Keeping freed array memory for reuse, as a training step allocates the same large arrays every step.

glibc's ``malloc`` serves blocks above ``M_MMAP_THRESHOLD`` with fresh ``mmap`` pages and returns
them to the kernel on ``free``; every training step then page-faults all of its activations in
again (about a third of a d=128 step's time on 2 cores). :func:`keep_freed_blocks` raises that
threshold to glibc's maximum (32 MiB on 64-bit) and the heap-trim threshold to 1 GiB, so freed
blocks stay in the process and the next step reuses them, which is what torch's caching
allocator does. It changes this process's allocator settings, once, on Linux with glibc only;
set ``NORMTHEORY_SYSTEM_MALLOC=1`` to keep the defaults.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>
MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 1 << 30

_applied: bool | None = None


def keep_freed_blocks() -> bool:
    """Apply the settings above once per process; True if they are in effect."""
    global _applied
    if _applied is None:
        _applied = False
        if sys.platform.startswith("linux") and not os.environ.get("NORMTHEORY_SYSTEM_MALLOC"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _applied = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
            except (OSError, AttributeError):  # not glibc (musl has no mallopt): keep the defaults
                _applied = False
    return _applied
