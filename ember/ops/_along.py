"""Cheap NumPy building blocks for the index-taking kernels (gather, sort/topk/max with ``dim``...).

``np.take_along_axis`` builds its broadcasting ``arange`` index arrays on every call through several
Python helpers (about 8 us on a 16x16 array); the grids depend only on the index shape and the axis, so
:func:`grid` keeps them (read-only, a bounded cache) and :func:`take_along` is one fancy-index.
:func:`first_out_of_range` checks indices in one reduction instead of two comparisons, an ``or`` and an
``any``.
"""
from __future__ import annotations

import numpy as np

_GRIDS: dict = {}


def grid(shape: tuple, axis: int) -> list:
    """Index arrays addressing every position of ``shape`` in each dim but ``axis`` (None there),
    shaped to broadcast against each other (a new list: the caller puts its index in ``axis``)."""
    key = (shape, axis)
    g = _GRIDS.get(key)
    if g is None:
        if len(_GRIDS) > 512:
            _GRIDS.clear()
        nd = len(shape)
        g = []
        for d, n in enumerate(shape):
            if d == axis:
                g.append(None)
                continue
            a = np.arange(n).reshape([n if k == d else 1 for k in range(nd)])
            a.flags.writeable = False
            g.append(a)
        _GRIDS[key] = g = tuple(g)
    return list(g)


def take_along(x: np.ndarray, ind: np.ndarray, axis: int) -> np.ndarray:
    """``np.take_along_axis(x, ind, axis)`` for ``ind`` no larger than ``x`` off ``axis`` (gather's rule):
    ``out[..., j, ...] = x[..., ind[..., j, ...], ...]``."""
    key = grid(ind.shape, axis)
    key[axis] = ind
    return x[tuple(key)]


_UNSIGNED = {4: np.uint32, 8: np.uint64}
_MAX = np.maximum.reduce     # (the ufunc's reduce: ndarray.max goes through a Python helper)


def first_out_of_range(idx: np.ndarray, size: int, allow_negative: bool):
    """The first index (flat order) outside ``[0, size)`` (``[-size, size)`` with ``allow_negative``), or
    None. One unsigned max finds whether there is one: a negative index wraps to a huge unsigned."""
    if idx.size == 0:
        return None
    if idx.dtype.kind == "i" and idx.dtype.itemsize >= 4:     # (a smaller int could overflow ``+ size``)
        u = (idx + size if allow_negative else idx).view(_UNSIGNED[idx.dtype.itemsize])
        if int(_MAX(u, axis=None)) < (2 * size if allow_negative else size):
            return None
    lo = -size if allow_negative else 0
    bad = (idx < lo) | (idx >= size)
    if bad.any():
        return int(idx.reshape(-1)[np.argmax(bad.reshape(-1))])
    return None
