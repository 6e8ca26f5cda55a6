"""Arena memory touched ahead of a compiled program's first native call.

Why: a native runner's arena (one buffer for every intermediate of a segment: 47 MB for the small GPT's
training step) is fresh memory on the first call, and the kernel serves each first write to it with a
page fault that zeroes the page. Measured here on that step's first call: 633 faults, and
``clear_page_erms`` half of the call's samples (10-240 ms on this machine, varying with the host); later
calls reuse the arena and take none. In a warm process (the plan cache holds the program's plan) that
first call comes right after the trace, which runs the step in Python on one thread.

How: when a plan is stored into or loaded from the plan cache, the arena sizes of its runner are noted
beside the plans under the compiled function's name (``<name>.arena``: byte counts, nothing else). The
first trace of a function with that name starts a thread that maps that much anonymous memory (huge
pages advised, as NumPy does for large arrays) and writes it once, without the GIL, while the trace runs;
the runner's arena then takes a buffer whose size fits (at least the arena, at most twice it), else it is
allocated as before. A missing or stale note costs only the background thread's work; the buffers are
zero like the ``np.zeros`` arena they replace.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import threading

import numpy as np

MAX_BYTES = 4 << 30          # a note asking for more is ignored (the notes are ours, this is a bound)
_LOCK = threading.Lock()
_PENDING: dict = {}          # "thread": the toucher, "bufs": the touched arrays
_NOTED: dict = {}            # note path -> the sizes this process read or wrote there


def _note_path(name: str):
    from .plan_cache import _plans_dir
    from .build import _safe_name
    d = _plans_dir()
    return None if d is None else os.path.join(d, f"{_safe_name(name)[:40]}.arena")


def _read(name: str) -> tuple:
    path = _note_path(name)
    if path is None:
        return ()
    if path in _NOTED:
        return _NOTED[path]
    from .cache import _why_untrusted
    try:
        if _why_untrusted(path, "the arena note", directory=False) is not None:
            return ()
        with open(path, "rb") as f:
            sizes = tuple(int(x) for x in f.read(200).split())
    except (OSError, ValueError):
        return ()
    if len(sizes) > 4 or any(s <= 0 for s in sizes) or sum(sizes) > MAX_BYTES:
        return ()
    _NOTED[path] = sizes
    return sizes


def note(name: str, sizes) -> None:
    """Remember ``sizes`` (the arena bytes of each part of ``name``'s runner) for the next process."""
    sizes = tuple(int(s) for s in sizes)
    path = _note_path(name) if sizes else None
    if path is None or _NOTED.get(path) == sizes:
        return
    _NOTED[path] = sizes
    from .cache import replace_private
    try:
        replace_private(os.path.dirname(path), path, " ".join(map(str, sizes)).encode(), prefix=".plan-arena-")
    except OSError:
        pass


def _touch(sizes, bufs) -> None:
    for n in sizes:
        try:
            mm = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            if hasattr(mm, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
                try:
                    mm.madvise(mmap.MADV_HUGEPAGE)
                except OSError:
                    pass
            a = np.frombuffer(mm, dtype=np.uint8)
            ctypes.memset(a.ctypes.data, 0, n)         # (a foreign call: the GIL is released meanwhile)
        except (OSError, ValueError, MemoryError):
            continue
        bufs.append(a)


def start(name: str) -> None:
    """Touch the arena memory noted for ``name`` in the background (nothing when there is no note)."""
    sizes = _read(name)
    with _LOCK:
        _PENDING.clear()                 # (an earlier start's buffers, never taken: dropped)
        if not sizes:
            return
        bufs: list = []
        t = threading.Thread(target=_touch, args=(sizes, bufs), name="ember-arena-prefault", daemon=True)
        _PENDING.update(thread=t, bufs=bufs)
        t.start()


def take(nbytes: int):
    """A zeroed, touched uint8 array of ``nbytes`` from the background buffers, or None."""
    with _LOCK:
        if not _PENDING:
            return None
        _PENDING["thread"].join()
        bufs = _PENDING["bufs"]
        fits = [i for i, a in enumerate(bufs) if nbytes <= a.size <= 2 * nbytes]
        if not fits:
            _PENDING.clear()             # (a stale note: the memory goes back)
            return None
        a = bufs.pop(min(fits, key=lambda i: bufs[i].size))
        if not bufs:
            _PENDING.clear()
        return a[:nbytes]
