"""The element order that libstdc++'s ``std::sort`` leaves, for ``mode``'s torch-compatible indices.

torch's CPU ``mode`` sorts each slice's (value, index) pairs with ``std::sort`` comparing values with
``<`` and reports, for the longest run of equal values (the smallest value among equally long runs),
the index of the run's last pair. ``std::sort`` is not stable (introsort: median-of-three quicksort above
16 elements, heapsort past a depth limit, then insertion sort), and NaN compares false with everything,
so which index torch reports for a tie in a long slice, or for a slice holding NaN, follows from the
exact steps of that algorithm. :func:`std_sort` replays them on a Python list; ``mode`` uses it only for
the slices whose answer depends on it.
"""
from __future__ import annotations

__all__ = ["std_sort"]

_THRESHOLD = 16


def _lt(a, b):
    return a[0] < b[0]


def std_sort(items: list) -> None:
    """Sort ``items`` (pairs, compared on their first element with ``<``) in place as libstdc++ does."""
    n = len(items)
    if n < 2:
        return
    _introsort(items, 0, n, 2 * (n.bit_length() - 1))
    if n > _THRESHOLD:
        _insertion(items, 0, _THRESHOLD)
        for i in range(_THRESHOLD, n):
            _linear_insert(items, i)
    else:
        _insertion(items, 0, n)


def _introsort(a, first, last, depth):
    while last - first > _THRESHOLD:
        if depth == 0:
            _heapsort(a, first, last)
            return
        depth -= 1
        mid = first + (last - first) // 2
        _median_to_first(a, first, first + 1, mid, last - 1)
        cut = _partition(a, first + 1, last, first)
        _introsort(a, cut, last, depth)
        last = cut


def _median_to_first(a, result, x, y, z):
    if _lt(a[x], a[y]):
        if _lt(a[y], a[z]):
            m = y
        elif _lt(a[x], a[z]):
            m = z
        else:
            m = x
    elif _lt(a[x], a[z]):
        m = x
    elif _lt(a[y], a[z]):
        m = z
    else:
        m = y
    a[result], a[m] = a[m], a[result]


def _partition(a, first, last, pivot):
    while True:
        while _lt(a[first], a[pivot]):
            first += 1
        last -= 1
        while _lt(a[pivot], a[last]):
            last -= 1
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _insertion(a, first, last):
    for i in range(first + 1, last):
        if _lt(a[i], a[first]):
            v = a[i]
            a[first + 1:i + 1] = a[first:i]
            a[first] = v
        else:
            _linear_insert(a, i)


def _linear_insert(a, i):
    v = a[i]
    j = i - 1
    while _lt(v, a[j]):
        a[i] = a[j]
        i = j
        j -= 1
    a[i] = v


def _adjust_heap(a, base, hole, length, value):
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if _lt(a[base + child], a[base + child - 1]):
            child -= 1
        a[base + hole] = a[base + child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[base + hole] = a[base + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and _lt(a[base + parent], value):
        a[base + hole] = a[base + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[base + hole] = value


def _heapsort(a, first, last):
    length = last - first
    if length >= 2:
        parent = (length - 2) // 2
        while True:
            _adjust_heap(a, first, parent, length, a[first + parent])
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:
        last -= 1
        v = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, v)


# slices longer than this many elements in all keep the vectorised answer (replaying the sort in Python
# costs about 5 us an element); a tie in such a slice may then report another of the tied indices
BUDGET = 1 << 16


def mode_index(row) -> int:
    """torch's CPU ``mode`` index for one slice (a 1-d NumPy array)."""
    items = [(v, i) for i, v in enumerate(row.tolist())]
    std_sort(items)
    best, top, run = 0, 0, 0
    last = len(items) - 1
    for i, (v, k) in enumerate(items):
        run += 1
        if i == last or v != items[i + 1][0]:
            if run > top:
                best, top = k, run
            run = 0
    return best


def torch_mode_indices(x, axis, ind):
    """``ind`` (mode's indices, ``axis`` kept with size 1) with the slices whose index depends on
    ``std_sort``'s order (a NaN in the slice, or more than 16 elements) replayed, within ``BUDGET``."""
    import numpy as np
    n = x.shape[axis]
    rows = np.moveaxis(x, axis, -1).reshape(-1, n)
    need = np.isnan(rows).any(axis=1) if x.dtype.kind in "fc" else np.zeros(len(rows), bool)
    if n > _THRESHOLD:
        need[:] = True
    picked = np.flatnonzero(need)[:max(BUDGET // max(n, 1), 1)]
    if not len(picked):
        return ind
    out = np.moveaxis(ind, axis, -1).reshape(-1).copy()
    for r in picked:
        out[r] = mode_index(rows[r])
    return np.moveaxis(out.reshape(np.moveaxis(ind, axis, -1).shape), -1, axis)
