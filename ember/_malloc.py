"""Allocator tuning for NumPy temporaries (glibc only).

glibc serves allocations above ``M_MMAP_THRESHOLD`` (128 KiB by default, adapting upward) with fresh
``mmap`` pages and returns them to the OS on free, so every large temporary of an eager op pays page
faults again: measured here, chains of such arrays ran several times slower. Raising the mmap
threshold to 64 MiB and the trim threshold to 256 MiB keeps freed blocks in the heap for reuse. This
is a process-wide setting; set ``EMBER_NO_MALLOPT=1`` before importing ember to leave malloc alone.
"""
from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def tune() -> bool:
    if os.environ.get("EMBER_NO_MALLOPT") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(M_MMAP_THRESHOLD, 64 << 20) == 1
        ok &= libc.mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1
        return bool(ok)
    except (OSError, AttributeError):
        return False


TUNED = tune()
