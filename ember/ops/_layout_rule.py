"""The layout of an elementwise result whose operands disagree on their layouts, as torch chooses it.

torch's TensorIterator orders the output's dims by the operands' strides, asking the operands in order:
the first operand whose strides tell two dims apart decides (a broadcast operand has no say). NumPy's
ufuncs also keep their operands' layout, but where two operands disagree NumPy falls back to C order, so
``channels_last + contiguous`` came out contiguous where torch keeps channels_last (and ``contiguous +
channels_last`` contiguous, as in torch); in 2-d and 3-d ``a.t() + b`` came out C-ordered where torch gives
``a.t()``'s strides. The kernels call :func:`first_wins` on results of rank 2 and up when the first operand
is not C-contiguous (a rank test and a flags test are all the common case pays). Values never change.
"""
from __future__ import annotations

import numpy as np

__all__ = ["first_wins", "contiguous_results", "suggests_channels_last", "channels_last_empty"]


def first_wins(r, x):
    """``r`` (a fresh ufunc result whose first operand was ``x``) laid out in ``x``'s stride order when
    ``x`` has the result's shape and NumPy chose C order against it; else ``r`` itself."""
    if type(x) is not np.ndarray or type(r) is not np.ndarray or x.shape != r.shape \
            or x.flags.c_contiguous or not r.flags.c_contiguous:
        return r
    st = x.strides
    shape = r.shape
    dims = [d for d in range(r.ndim) if shape[d] != 1]
    if any(st[d] <= 0 for d in dims):
        return r
    order = _order(shape, st)
    if order == list(range(r.ndim)):
        return r
    back = [order.index(d) for d in range(r.ndim)]
    out = np.empty([shape[d] for d in order], r.dtype).transpose(back)
    np.copyto(out, r)
    return out


def _order(shape, st):
    """The dims from slowest to fastest varying in a layout with strides ``st``; a size-1 dim stays
    just before the dim that follows it in C order (its stride says nothing)."""
    big = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: -st[d])
    ones = [d for d in range(len(shape)) if shape[d] == 1]
    order = list(big)
    for d in ones:
        nxt = next((i for i, e in enumerate(order) if e > d), len(order))
        order.insert(nxt, d)
    return order


def result_strides(shape, operands):
    """torch's strides (in elements) for a new elementwise result of ``shape`` whose operands have the
    ``(shape, strides)`` pairs ``operands`` (in elements, in argument order): the dims sorted from fastest
    to slowest by the operands' strides, the first operand that tells two dims apart deciding, a
    broadcast dim (stride 0) giving no say, equal strides sending the smaller dim inwards."""
    nd = len(shape)
    views = []
    for osh, ost in operands:
        lead = nd - len(osh)
        if lead < 0:
            continue
        st = [0] * lead + [0 if (n == 1 and shape[lead + i] != 1) else s
                           for i, (n, s) in enumerate(zip(osh, ost))]
        views.append(st)

    def should_swap(d0, d1):
        for st in views:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(nd - 1, -1, -1))          # fastest first
    for i in range(1, nd):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    strides = [0] * nd
    acc = 1
    for d in perm:
        strides[d] = acc
        acc *= max(shape[d], 1)
    return tuple(strides)


def _c_order(r):
    return np.ascontiguousarray(r) if type(r) is np.ndarray and not r.flags.c_contiguous else r


def contiguous_results(*ops, channels_last: bool = False):
    """Make ``ops`` return C-contiguous arrays, as torch's reductions, softmax and the norm layers do
    whatever the input's layout (NumPy keeps a permuted input's layout, so ``x.transpose(1, 2).sum(0,
    keepdim=True).view(-1)`` failed where torch's works). A flags test is all a contiguous result pays.
    ``channels_last``: the first result is channels-last instead when the first argument suggests it
    (torch's group_norm)."""
    for op in ops:
        kernel = op.kernel
        if getattr(kernel, "_c_order", False):
            continue
        if channels_last:
            def wrapped(*args, _k=kernel, **kw):
                res = _k(*args, **kw)
                x = args[0]
                one = type(res) is np.ndarray
                first = res if one else res[0]
                if type(x) is np.ndarray and x.ndim in (4, 5) and not x.flags.c_contiguous \
                        and suggests_channels_last(x.shape, x.strides):
                    first = channels_last_copy(first)
                else:
                    first = _c_order(first)
                return first if one else (first,) + tuple([_c_order(r) for r in res[1:]])
        elif op.nout == 1:
            def wrapped(*args, _k=kernel, **kw):
                r = _k(*args, **kw)
                return np.ascontiguousarray(r) if type(r) is np.ndarray and not r.flags.c_contiguous else r
        else:
            def wrapped(*args, _k=kernel, **kw):
                return tuple([_c_order(r) for r in _k(*args, **kw)])
        wrapped._c_order = True
        wrapped.__name__ = getattr(kernel, "__name__", op.name)
        wrapped.__wrapped__ = kernel
        op.kernel = wrapped


def channels_last_copy(r):
    """``r``'s values in a fresh channels-last (4-d) / channels_last_3d (5-d) array."""
    out = channels_last_empty(r.shape, r.dtype)
    np.copyto(out, r)
    return out


def channels_last_empty(shape, dtype):
    """A fresh array of ``shape`` (4-d or 5-d) laid out channels-last."""
    nd = len(shape)
    order = (0,) + tuple(range(2, nd)) + (1,)
    return np.empty([shape[d] for d in order], dtype).transpose([order.index(d) for d in range(nd)])


def suggests_channels_last(shape, strides) -> bool:
    """torch's ``suggest_memory_format() == channels_last`` (4-d) / ``channels_last_3d`` (5-d) for a
    layout: walking C, then the spatial dims from last to first, then N, the strides never fall, N's
    stride is not C's (an ambiguous N111 layout counts as contiguous), and a dim of size > 1 raises the
    floor by its extent. Strides may be in bytes or elements (only their order and ratios matter)."""
    nd = len(shape)
    if nd not in (4, 5) or strides[1] == 0:
        return False
    lo = 0
    for d in (1,) + tuple(range(nd - 1, 1, -1)) + (0,):
        if shape[d] == 0 or strides[d] < lo:
            return False
        if d == 0 and lo == strides[1]:
            return False
        lo = strides[d] * shape[d] if shape[d] > 1 else strides[d]
    return True
