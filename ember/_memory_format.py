"""Memory formats (``ember.contiguous_format``, ``channels_last``, ``channels_last_3d``, ``preserve_format``).

A channels-last tensor is a real strided layout, as in torch: the N, C, H, W view of an array laid out as
N, H, W, C (``x.contiguous(memory_format=ember.channels_last)`` permutes, copies contiguously and permutes
back), so ``stride()``, ``is_contiguous(memory_format=...)`` and ``.view`` answer as torch's do, and NumPy's
ufuncs keep the layout of their inputs. Kernels read any strides, so results are the same either way.
"""
from __future__ import annotations

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format",
           "check", "is_contiguous_as", "to_format"]


class memory_format:
    """The type of ember's memory-format constants."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
_ALL = {f.name: f for f in (contiguous_format, channels_last, channels_last_3d, preserve_format)}
# the dims from fastest to slowest varying: C, then the spatial dims from the last, then N
_ORDER = {channels_last: (1, 3, 2, 0), channels_last_3d: (1, 4, 3, 2, 0)}
_RANK = {channels_last: 4, channels_last_3d: 5}


def _by_name(name):
    return _ALL[name]


def check(fmt, fn: str) -> None:
    """TypeError (torch's wording) when ``fmt`` is not a memory format or None."""
    if fmt is not None and type(fmt) is not memory_format:
        raise TypeError(f"{fn}(): argument 'memory_format' must be torch.memory_format, not {type(fmt).__name__}")


def is_contiguous_as(shape, strides, fmt) -> bool:
    """torch's contiguity test for ``fmt`` (strides in elements; size-1 dims are ignored)."""
    order = _ORDER.get(fmt)
    if order is None:
        raise RuntimeError(f"is_contiguous: unsupported memory format {fmt}")
    if len(shape) != len(order):
        return False
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def tensor_is_contiguous(t, fmt) -> bool:
    """``t.is_contiguous(memory_format=fmt)`` for a format other than contiguous_format."""
    check(fmt, "is_contiguous")
    if fmt is preserve_format:
        return t.is_contiguous()
    return is_contiguous_as(t.shape, t.stride(), fmt)


def to_format(t, fmt, fn: str, copy: bool = False):
    """``t`` laid out in ``fmt`` (ember ops, so autograd records it): itself when it already is, unless
    ``copy``. ``contiguous_format`` is plain ``contiguous()``; ``preserve_format`` keeps ``t``."""
    check(fmt, fn)
    if fmt is None or fmt is preserve_format:
        return t.clone() if copy else t
    if fmt is contiguous_format:
        r = t.contiguous()
        return r.clone() if copy and r is t else r
    rank = _RANK[fmt]
    if t.dim() != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    order = tuple(reversed(_ORDER[fmt]))              # slowest to fastest: N, spatial..., C
    back = tuple(order.index(d) for d in range(rank))
    if not copy and is_contiguous_as(t.shape, t.stride(), fmt):
        return t
    return t.permute(*order).contiguous().permute(*back) if not copy else t.permute(*order).clone(
        memory_format=contiguous_format).permute(*back)


def like_layout(arr, input, fmt, fn: str):
    """The new array ``arr`` (C-contiguous, shaped like ``input``) laid out for ``*_like(input,
    memory_format=fmt)``: ``fmt``'s layout, or for ``preserve_format`` (None) the input's when it is
    channels-last (torch keeps any dense layout; ember keeps these two)."""
    import numpy as np
    check(fmt, fn)
    if fmt is None or fmt is preserve_format:
        d = input._data
        if type(d) is not np.ndarray:
            return arr
        st = tuple(s // d.itemsize for s in d.strides)
        fmt = next((f for f in (channels_last, channels_last_3d)
                    if d.ndim == _RANK[f] and is_contiguous_as(d.shape, st, f)), None)
        if fmt is None:
            return arr
    if fmt is contiguous_format:
        return arr
    rank = _RANK[fmt]
    if arr.ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    order = tuple(reversed(_ORDER[fmt]))
    back = tuple(order.index(d) for d in range(rank))
    return np.ascontiguousarray(arr.transpose(order)).transpose(back)


def lay_out_new(t, fmt, fn: str):
    """A fresh factory result ``t`` (C order) laid out in ``fmt``: ``torch.empty(..., memory_format=)``.
    torch's ``zeros``/``ones`` take no memory format (its TypeError); ``preserve_format`` has nothing to
    preserve (its RuntimeError)."""
    if fn != "empty":
        raise TypeError(f"{fn}() got an unexpected keyword argument 'memory_format'")
    check(fmt, fn)
    if fmt is preserve_format:
        raise RuntimeError("unsupported memory format Preserve")
    if fmt is contiguous_format:
        return t
    rank = _RANK[fmt]
    if t.dim() != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    import numpy as np
    d = t._data
    order = tuple(reversed(_ORDER[fmt]))
    back = tuple(order.index(k) for k in range(rank))
    if type(d) is np.ndarray:
        t._data = np.ascontiguousarray(d.transpose(order)).transpose(back)
    elif getattr(d, "is_meta", False):
        st = [0] * rank
        acc = 1
        for k in _ORDER[fmt]:
            st[k] = acc
            acc *= d.shape[k]
        d.strides = tuple(st)
    else:
        return to_format(t, fmt, fn)
    return t
