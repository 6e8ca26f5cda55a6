"""Which results keep a channels-last layout, as torch's CPU kernels choose it.

torch's convolutions, poolings, interpolations and paddings look at how their input is laid out
(``suggest_memory_format``: do the strides order the dims as N, spatial..., C?) and, when it is
channels-last, write a channels-last result. ember's kernels compute in (N, C, *spatial) order; the
functions here re-lay a fresh eager result afterwards, so ``stride()`` and
``is_contiguous(memory_format=...)`` answer as torch's do. Values never change. Only host (NumPy) results
are re-laid: a traced or device result keeps its own layout (layout is invisible to compiled code).
"""
from __future__ import annotations

import numpy as np

__all__ = ["suggests", "strides_suggest", "keep", "contiguous_result", "cl_strides", "CL_ORDER"]

# the dims from fastest to slowest varying in a channels-last layout, by rank
CL_ORDER = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}
_ORDER = CL_ORDER


def strides_suggest(shape, strides) -> bool:
    """torch's test that ``suggest_memory_format()`` is channels_last(_3d), on a 4-d/5-d shape and its
    strides in elements: C fastest, then the spatial dims from the last, then N (size-1 dims break ties
    towards the contiguous reading, as torch's test does)."""
    order = _ORDER.get(len(shape))
    if order is None or strides[1] == 0:
        return False
    lo = 0
    for d in order:
        if shape[d] == 0:
            return False
        st = strides[d]
        if st < lo:
            return False
        if d == 0 and lo == strides[1]:
            return False
        lo = st * shape[d] if shape[d] > 1 else st
    return True


def suggests(t) -> bool:
    """``strides_suggest`` for a host tensor (False for other devices' data)."""
    a = t._data
    if a.ndim not in _ORDER:
        return False
    if type(a) is not np.ndarray:
        return getattr(a, "is_meta", False) and strides_suggest(a.shape, a.strides)    # (meta: in elements)
    isz = a.itemsize
    return strides_suggest(a.shape, tuple(s // isz for s in a.strides))


def cl_strides(shape) -> tuple:
    """torch's channels-last strides (in elements) of a 4-d/5-d shape, size-1 dims included."""
    st = [0] * len(shape)
    acc = 1
    for d in _ORDER[len(shape)]:
        st[d] = acc
        acc *= shape[d]
    return tuple(st)


def _relaid(a: np.ndarray) -> np.ndarray:
    """``a``'s values in a channels-last array (the strides torch gives, size-1 dims included)."""
    nd = a.ndim
    perm = (0,) + tuple(range(2, nd)) + (1,)
    back = (0, nd - 1) + tuple(range(1, nd - 1))
    t = a.transpose(perm)
    buf = np.empty(t.shape, a.dtype)        # (not ascontiguousarray: it keeps odd strides of size-1 dims)
    np.copyto(buf, t)
    return buf.transpose(back)


def keep(out, *inputs):
    """Lay the fresh result ``out`` out channels-last when any of ``inputs`` suggests it (torch's rule for
    convolutions: input or weight); ``out`` itself is returned (its data swapped for a same-valued array,
    before any view of it exists)."""
    a = out._data
    if type(a) is not np.ndarray:           # a meta result takes the layout (no data to move); others keep theirs
        if getattr(a, "is_meta", False) and a.ndim in _ORDER and any(suggests(t) for t in inputs if t is not None):
            out._data = type(a)(a.shape, a.dtype, cl_strides(a.shape))
        return out
    if a.ndim in _ORDER and any(suggests(t) for t in inputs if t is not None):
        exp = _ORDER[a.ndim]
        isz = a.itemsize
        acc = 1
        for d in exp:                       # already channels-last with torch's strides: nothing to do
            if a.strides[d] != acc * isz:
                break
            acc *= a.shape[d]
        else:
            return out
        out._data = _relaid(a)
    return out


def contiguous_result(out):
    """Make a fresh result contiguous where torch's kernel writes a contiguous one whatever the input's
    layout (softmax, instance norm)."""
    a = out._data
    if type(a) is np.ndarray:
        if not a.flags.c_contiguous:
            out._data = np.ascontiguousarray(a)
    elif getattr(a, "is_meta", False) and not a.is_contiguous():
        out._data = type(a)(a.shape, a.dtype)
    return out
