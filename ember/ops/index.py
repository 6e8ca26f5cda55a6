"""Indexing: ``Tensor.__getitem__`` / ``__setitem__`` and the gather/scatter/index_*/masked_* family.

Indexing follows torch's rules (which differ from NumPy's in places):

* A key is walked left to right. Integers, slices, ``None`` and ``...`` are *basic*: they build one
  NumPy key applied as a view (``getitem_basic``), so ``x[1:, 0]`` shares memory with ``x``. Integers
  are applied before any advanced index, so ``x[0, :, [1, 2]]`` has shape ``(n1, 2)`` (NumPy would
  give ``(2, n1)``).
* Integer/bool tensors, lists, tuples-inside-the-key and ndarrays are *advanced*: after the basic view,
  the ``index`` op gathers a copy. Bool masks become their ``nonzero`` coordinates; Python ``True`` /
  ``False`` add a dim of size 1 / 0. Advanced results go where the indexed dims were when those dims
  are adjacent, else in front (the same rule as NumPy applied to the view).
* Index tensors are tensor ARGUMENTS of the ``index`` / ``index_put`` ops (the kernels turn masks into
  coordinates), never arrays in their attributes, so ``ember.compile`` replays them with each call's own
  indices.

Every op is registered once with a NumPy kernel and a derivative written with ember ops: the gather
family's derivatives are scatter-adds into zeros and vice versa, so double backward works.
"""
from __future__ import annotations

import builtins
import operator
import warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import GRAD, no_grad
from .registry import register, apply, attach, dtype_name, FUNCTIONS, FACTORY, node_class, rename
from ._util import wrap_dim, broadcast_error, fmt_shape, check_scalar_fits
from .shape import getitem_basic, SLICE_BACKWARD
from .inplace import write_result, copy_out, _writable, CAPTURE_WRITE as _CAPTURING

_NUMBER = (bool, int, float, np.bool_, np.number)


# ---- small helpers ---------------------------------------------------------------------------------


def _zeros(shape, dtype) -> Tensor:
    return _literal(np.zeros(shape, dtype=dtype.np), dtype)


def _literal(arr: np.ndarray, dtype=None) -> Tensor:
    """Wrap an array made from Python values or shapes only (a list index, an assigned number, zeros):
    a constant that a compiled replay may reuse (unlike arrays computed from tensor values)."""
    if FACTORY[0] is not None:
        FACTORY[0](arr)
    return wrap(arr, dtype)


def _const(arr: np.ndarray) -> Tensor:
    """Wrap a NumPy array computed inside a derivative (a constant: it never requires grad)."""
    return wrap(np.ascontiguousarray(arr))


def _pad_to(g: Tensor, shape) -> Tensor:
    """Place ``g`` in the leading corner of zeros of ``shape`` (a differentiable ember op)."""
    if g._data.shape == tuple(shape):
        return g
    key = tuple(slice(0, n) for n in g._data.shape)
    return apply(SLICE_BACKWARD, (g,), {"in_shape": tuple(shape), "key": key, "dtype": None})


def _tensor_arg(x, op: str, arg: str, pos: int) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")
    return x


def _coords(idx: np.ndarray, dim: int) -> tuple:
    """Full coordinates for scatter/gather: ``idx`` along ``dim``, the element's own position elsewhere."""
    nd = idx.ndim
    out = []
    for d, n in enumerate(idx.shape):
        if d == dim:
            out.append(idx)
        else:
            out.append(np.arange(n).reshape([n if k == d else 1 for k in range(nd)]))
    return tuple(out)


def _corner(a: np.ndarray, shape) -> np.ndarray:
    """The leading ``shape`` block of ``a`` (scatter/gather use only that part of src/self)."""
    if a.shape == tuple(shape):
        return a
    return a[tuple(slice(0, n) for n in shape)]


def _first_bad(idx: np.ndarray, size: int, allow_negative: bool):
    lo = -size if allow_negative else 0
    bad = (idx < lo) | (idx >= size)
    if bad.any():
        return int(idx.reshape(-1)[np.argmax(bad.reshape(-1))])
    return None


# ---- the advanced-index ops: index and index_put ----------------------------------------------------
# The index tensors are ARGUMENTS of the ops (after the indexed tensor, and after the values for
# index_put), never attributes: a compiled replay then reads each call's own indices. ``pos`` gives the
# view dim each index starts at. A bool index is a mask over ``mask.ndim`` dims; the kernel turns it
# into its coordinates (nonzero). Negative indices are left to NumPy, which counts them from the end as
# torch does. The Python wrappers check the key first (torch's messages); a kernel that meets bad
# indices on its own (a compiled replay with new values) raises the same messages.


def _adv_key(ndim, idx, pos):
    key = [slice(None)] * ndim
    for p, i in zip(pos, idx):
        key[p] = i
    return tuple(key)


def _coords_of(idx, pos):
    """Masks (bool arrays) become one coordinate array per mask dim; integer indices pass through."""
    for a in idx:
        if a.dtype == np.bool_:
            break
    else:
        return idx, pos
    out_i, out_p = [], []
    for a, p in zip(idx, pos):
        if a.dtype == np.bool_:
            for j, c in enumerate(np.nonzero(a)):
                out_i.append(c)
                out_p.append(p + j)
        else:
            out_i.append(a)
            out_p.append(p)
    return tuple(out_i), tuple(out_p)


def _index_kernel(x, *idx, pos):
    idx, pos = _coords_of(idx, pos)
    try:
        shape = _adv_result_shape(x.shape, idx, pos)
        if 0 in shape:
            return np.empty(shape, dtype=x.dtype)   # empty result: its (unchecked) indices are never read
        return x[_adv_key(x.ndim, idx, pos)]
    except (IndexError, ValueError):
        _check_adv(x.shape, [(p, "adv", a) for p, a in zip(pos, idx)])   # torch's message for the bad index
        raise


def _index_bw(ctx, g):
    # scatter-add the gradient back into zeros: duplicated indices accumulate
    zero = _zeros(ctx.in_shape(0), g._dtype)
    return (apply(INDEX_PUT, (zero, g) + tuple(ctx.inputs[1:]), {"pos": ctx.attrs["pos"], "accumulate": True}),)


def _put_into(out, v, idx, pos, accumulate):
    """Write (or, with ``accumulate``, add) ``v`` into ``out`` at the advanced key, in place."""
    idx, pos = _coords_of(idx, pos)
    try:
        if 0 in _adv_result_shape(out.shape, idx, pos):
            return
        key = _adv_key(out.ndim, idx, pos)
        v = np.asarray(v).astype(out.dtype, copy=False)
        if accumulate:
            np.add.at(out, key, v)
        else:
            out[key] = v
    except (IndexError, ValueError):
        _check_adv(out.shape, [(p, "adv", a) for p, a in zip(pos, idx)])
        raise


def _index_put_kernel(x, v, *idx, pos, accumulate):
    out = np.array(x, copy=True)
    _put_into(out, v, idx, pos, accumulate)
    return out


def _index_put_bw(ctx, g):
    a = ctx.attrs
    idx = tuple(ctx.inputs[2:])
    attrs = {"pos": a["pos"], "accumulate": False}
    gx = gv = None
    if ctx.edges[0] is not None:
        if a["accumulate"]:
            gx = g
        else:
            # overwritten positions get no gradient
            gx = apply(INDEX_PUT, (g, _zeros((), g._dtype)) + idx, attrs)
    if ctx.edges[1] is not None:
        gv = apply(INDEX, (g,) + idx, {"pos": a["pos"]})
    return gx, gv


# The derivatives read the index arguments (``ctx.inputs``); the first index's version is checked, as
# gather checks its index (torch checks every saved index).
INDEX = register("index", _index_kernel, _index_bw, save="1", prim="gather")
INDEX_PUT = register("index_put", _index_put_kernel, _index_put_bw, save="2", prim="scatter")


# ---- key parsing --------------------------------------------------------------------------------------
# Index tensors stay tensors all the way to the op (see above). Index data given as Python values (lists,
# ndarrays, True/False) becomes a constant tensor (``_literal``). A 0-dim tensor used as an integer or a
# bool is read in Python through ``operator.index`` / ``bool`` (under ember.compile: a guarded read).


def _seq_is_tuple(key) -> bool:
    """torch treats a short list holding tensors, sequences, slices, None or ... as a tuple of indices."""
    if isinstance(key, tuple):
        return True
    if not isinstance(key, list) or len(key) >= 32:
        return False
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, (Tensor, slice, list, tuple, np.ndarray)):
            return True
    return False


def _seq_to_index(seq) -> np.ndarray:
    """A Python sequence used as an index: a bool mask if it holds only bools, else int64."""
    try:
        arr = np.array(_unwrap(seq))
    except ValueError:
        raise IndexError("an index sequence must be rectangular (equal-length nested lists)") from None
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind == "U":
        raise TypeError("new(): invalid data type 'str'")
    if arr.dtype.kind not in "biuf":
        raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                         f"valid indices (got {type(seq).__name__})")
    return arr.astype(np.int64)


def _unwrap(seq):
    if isinstance(seq, Tensor):
        return seq.tolist()          # Python reads the values (under ember.compile: a guarded read)
    if isinstance(seq, (list, tuple)):
        return [_unwrap(s) for s in seq]
    return seq


def _classify(k):
    """Return (kind, value) for one key element: int, slice, none, ell, bool, mask, adv (mask/adv: a Tensor)."""
    if k is None:
        return "none", None
    if k is Ellipsis:
        return "ell", None
    t = type(k)
    if t is bool:
        return "bool", k
    if t is int or (isinstance(k, np.integer)):
        return "int", int(k)
    if t is slice:
        return "slice", k
    if isinstance(k, Tensor):
        dt = k._dtype
        if dt.category == 1 and dt is not _dt.uint8 and k._data.ndim == 0:
            if dt not in (_dt.int64, _dt.int32):
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            return "int", operator.index(k)
        return _classify_tensor(k)
    if isinstance(k, np.ndarray):
        return _classify_tensor(_literal(k, _dt.from_numpy_dtype(k.dtype)))
    if isinstance(k, (list, tuple)):
        arr = _seq_to_index(k)
        return _classify_tensor(_literal(arr))
    if t is str:
        raise TypeError("new(): invalid data type 'str'")     # (torch tries to build an index tensor of it)
    name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                     f"indices (got {name})")


def _classify_tensor(t: Tensor):
    dt = t._dtype
    if dt is _dt.bool or dt is _dt.uint8:
        if dt is _dt.uint8:
            warnings.warn("indexing with dtype ember.uint8 is now deprecated, please use a dtype ember.bool instead.",
                          UserWarning, stacklevel=4)
            t = t.to(_dt.bool)
        if t._data.ndim == 0:
            return "bool", bool(t)
        return "mask", t
    if dt in (_dt.int64, _dt.int32):
        return "adv", t
    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")


def _slice_bounds(s: slice):
    start = None if s.start is None else operator.index(s.start)
    stop = None if s.stop is None else operator.index(s.stop)
    step = 1 if s.step is None else operator.index(s.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step < 0:
        raise ValueError("step must be greater than zero")
    return slice(start, stop, step)


class _Plan:
    """A parsed key: the NumPy basic key for the view and the advanced indices on that view."""

    __slots__ = ("basic", "trivial", "adv")

    def __init__(self, basic, trivial, adv):
        self.basic = basic        # tuple: NumPy basic key (ints, slices, None)
        self.trivial = trivial    # the basic key selects everything unchanged
        self.adv = adv            # list of (view_pos, kind, tensor) with kind "adv" or "mask"


def _parse(x: Tensor, key) -> _Plan:
    if type(key) is Tensor and key._data.ndim and x._data.ndim:
        # x[index_tensor] / x[mask]: the most common advanced key
        kind, v = _classify(key)
        if kind == "adv" or (kind == "mask" and v._data.ndim <= x._data.ndim):
            return _Plan((), True, [(0, kind, v)])
    if not isinstance(key, tuple):
        key = tuple(key) if _seq_is_tuple(key) else (key,)
    items = [_classify(k) for k in key]
    shape = x._data.shape
    nd = len(shape)
    specified = 0
    for kind, v in items:
        if kind in ("int", "slice", "adv"):
            specified += 1
        elif kind == "mask":
            specified += v._data.ndim
    if specified > nd:
        if nd == 0:
            first = next(kind for kind, _ in items if kind in ("int", "slice", "adv", "mask"))
            if first == "int":
                raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                                 "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
            if first == "slice":
                raise IndexError("slice() cannot be applied to a 0-dim tensor.")
        raise IndexError(f"too many indices for tensor of dimension {nd}")
    basic = []
    adv = []
    src = 0       # dims of x consumed so far
    vdim = 0      # dims of the view produced so far
    real = 0      # torch's dim counter used in error messages
    trivial = True
    for kind, v in items:
        if kind == "none":
            basic.append(None)
            trivial = False
            vdim += 1
            real += 1
        elif kind == "ell":
            k = builtins.min(nd - specified, nd - src)
            basic.extend([slice(None)] * k)
            src += k
            vdim += k
            real += k
        elif kind == "int":
            size = shape[src]
            if not -size <= v < size:
                raise IndexError(f"index {v} is out of bounds for dimension {real} with size {size}")
            basic.append(v + size if v < 0 else v)
            trivial = False
            src += 1
            real += 1
        elif kind == "slice":
            s = _slice_bounds(v)
            basic.append(s)
            if s != slice(None, None, 1) and s.indices(shape[src]) != (0, shape[src], 1):
                trivial = False
            src += 1
            vdim += 1
            real += 1
        elif kind == "bool":
            # True/False: a new dim of size 1 or 0 (an advanced index into a new unit dim)
            basic.append(None)
            trivial = False
            adv.append((vdim, "adv", _literal(np.arange(1 if v else 0, dtype=np.int64))))
            vdim += 1
            real += 1
        elif kind == "mask":
            m = v._data.ndim
            basic.extend([slice(None)] * m)
            adv.append((vdim, "mask", v))
            src += m
            vdim += m
            real += m
        else:
            basic.append(slice(None))
            adv.append((vdim, "adv", v))
            src += 1
            vdim += 1
            real += 1
    return _Plan(tuple(basic), trivial, adv)


def _check_adv(view_shape, adv):
    """Check an advanced key against the view (masks, broadcast, bounds: torch's messages) without
    building it: return the op's index arguments, their positions and the result's shape.

    ``adv`` holds (view_pos, kind, index) with tensors (from the wrappers) or arrays (from a kernel)."""
    args, apos = [], []
    shapes, pos, ints = [], [], []     # per coordinate array: shape, view dim; (k, array) for integer ones
    for p, kind, t in adv:
        a = t._data if isinstance(t, Tensor) else t
        args.append(t)
        apos.append(p)
        if kind == "mask":
            for j, n in enumerate(a.shape):
                if n != view_shape[p + j]:
                    raise IndexError(f"The shape of the mask {fmt_shape(a.shape)} at index {j} does not match "
                                     f"the shape of the indexed tensor {fmt_shape(view_shape)} at index {p + j}")
            count = int(np.count_nonzero(a))
            for j in range(a.ndim):
                shapes.append((count,))
                pos.append(p + j)
        else:
            ints.append((len(shapes), a))
            shapes.append(a.shape)
            pos.append(p)
    if len(shapes) > 1:
        try:
            b = np.broadcast_shapes(*shapes)
        except ValueError:
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                             + ", ".join(fmt_shape(s) for s in shapes)) from None
    else:
        b = shapes[0]
    res = _result_shape(view_shape, b, pos)
    # like torch, indices are not checked when the result is empty (nothing is read)
    if 0 not in b:
        ints = dict(ints)
        empty = 0 in res
        for k, p in enumerate(pos):
            size = view_shape[p]
            if size == 0:
                raise IndexError("index is out of bounds for dimension with size 0")
            a = ints.get(k)
            if a is not None and a.size and not empty:
                mn, mx = _min_max(a)
                if mn < -size or mx >= size:
                    bad = _first_bad(a, size, True)
                    raise IndexError(f"index {bad} is out of bounds for dimension {k} with size {size}")
    return tuple(args), tuple(apos), res


def _min_max(a: np.ndarray):
    if a.size <= 32:     # small index arrays: Python is faster than two NumPy reductions
        lst = a.ravel().tolist()
        return builtins.min(lst), builtins.max(lst)
    return int(a.min()), int(a.max())


def _result_shape(shape, b, pos):
    """The shape of an advanced-index result: ``b`` (the broadcast index shape) replaces the indexed
    dims where they are adjacent, else goes in front."""
    adjacent = list(pos) == list(range(pos[0], pos[0] + len(pos)))
    if adjacent:
        return tuple(shape[:pos[0]]) + tuple(b) + tuple(shape[pos[-1] + 1:])
    return tuple(b) + tuple(s for d, s in enumerate(shape) if d not in pos)


def _adv_result_shape(shape, idx, pos):
    b = np.broadcast_shapes(*[a.shape for a in idx]) if idx else ()
    return _result_shape(shape, b, pos)


def _fast_basic(shape, key):
    """The NumPy key for the common keys (in-range ints and plain slices), or None to take the full parser."""
    t = type(key)
    if t is not tuple:
        if t is slice or t is int:
            key = (key,)
        else:
            return None
    if len(key) > len(shape):
        return None
    out = None
    for d, k in enumerate(key):
        tk = type(k)
        if tk is int:
            n = shape[d]
            if not -n <= k < n:
                return None
            if k < 0:
                out = out or list(key)
                out[d] = k + n
        elif tk is slice:
            if not ((k.step is None or (type(k.step) is int and k.step > 0))
                    and (k.start is None or type(k.start) is int) and (k.stop is None or type(k.stop) is int)):
                return None
        else:
            return None
    return tuple(out) if out else key


def _getitem(self: Tensor, key) -> Tensor:
    """``x[key]``: a view for basic keys, a copy (the ``index`` op) for advanced ones."""
    basic = _fast_basic(self._data.shape, key)
    if basic is not None:
        return getitem_basic(self, basic)
    plan = _parse(self, key)
    if not plan.adv:
        return getitem_basic(self, plan.basic)
    view = self if plan.trivial else getitem_basic(self, plan.basic)
    args, pos, _ = _check_adv(view._data.shape, plan.adv)
    return apply(INDEX, (view,) + args, {"pos": pos})


def _type_name(t: Tensor) -> str:
    return f"ember.{dtype_name(t._dtype)}Tensor"


def _strip_leading_ones(v: Tensor, ndim: int) -> Tensor:
    """torch drops leading size-1 dims of an assigned value that has more dims than the target."""
    shp = v._data.shape
    k = 0
    while len(shp) - k > ndim and shp[k] == 1:
        k += 1
    return v.reshape(shp[k:]) if k else v


def _setitem(self: Tensor, key, value) -> None:
    """``x[key] = value``: write through the basic view, or ``index_put_`` for advanced keys."""
    if isinstance(value, Tensor):
        pass
    elif isinstance(value, _NUMBER):
        check_scalar_fits(value, self._dtype)
    else:
        t = type(value)
        name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
        raise TypeError(f"can't assign a {name} to a {_type_name(self)}")
    basic = _fast_basic(self._data.shape, key)
    plan = _Plan(basic, False, ()) if basic is not None else _parse(self, key)
    if not plan.adv:
        # (under ember.compile the write goes through write_result, which records it)
        if not (GRAD[0] and (self._rg or (isinstance(value, Tensor) and value._rg))) and _CAPTURING[0] is None:
            _set_basic_nograd(self, plan.basic, value)
            return
        view = getitem_basic(self, plan.basic)
        _no_partial_overlap(view, value)
        write_result(view, lambda s: _filled(s, value), "copy_")
        return
    target = self if plan.trivial else getitem_basic(self, plan.basic)
    args, pos, res = _check_adv(target._data.shape, plan.adv)
    _index_put_impl_(target, args, pos, res, value, False, "index_put_", check_dtype=isinstance(value, Tensor))


def _set_basic_nograd(self: Tensor, key, value) -> None:
    """``x[key] = value`` without autograd: write straight into the buffer (no temporaries)."""
    _writable(self, "copy_")
    arr = self._data
    if isinstance(value, Tensor):
        dst = arr[key + (Ellipsis,)]
        _no_partial_overlap(wrap(dst, self._dtype), value)
        v = _strip_leading_ones(value, dst.ndim)._data
        try:
            np.copyto(dst, v, casting="unsafe")
        except ValueError:
            # not broadcastable: raise torch's expand error
            wrap(v, value._dtype).expand(dst.shape)
            raise
    else:
        arr[key] = np.array(value).astype(arr.dtype)
    self._bump()


def _no_partial_overlap(dst: Tensor, src) -> None:
    """torch refuses writes whose source partly aliases the destination (the result would be order-dependent)."""
    if not isinstance(src, Tensor) or not np.may_share_memory(dst._data, src._data):
        return
    a, b = dst._data, src._data
    if a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides \
            and a.shape == b.shape:
        return
    if np.shares_memory(a, b):
        raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                           "refer to a single memory location. Please clone() the tensor before performing the "
                           "operation.")


def _filled(s: Tensor, value) -> Tensor:
    """``value`` broadcast to ``s``'s shape in ``s``'s dtype (what a copy into ``s`` writes)."""
    if isinstance(value, Tensor):
        v = _strip_leading_ones(value, s._data.ndim)
        if v._dtype is not s._dtype:
            v = v.to(s._dtype)
        return v.expand(s._data.shape)
    arr = np.broadcast_to(np.array(value).astype(s._dtype.np), s._data.shape)
    return _literal(arr, s._dtype)


Tensor.__getitem__ = _getitem
Tensor.__setitem__ = _setitem


# ---- index_put / index_put_ ------------------------------------------------------------------------


def _indices_arg(self: Tensor, indices, op: str):
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}(): argument 'indices' must be tuple of Tensors, not {type(indices).__name__}")
    adv = []
    vdim = 0
    nd = self._data.ndim
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
        kind, a = _classify_tensor(t)
        if kind == "bool":
            raise IndexError(f"{op}(): 0-dim bool index tensors are not supported by ember; use a mask with dims")
        adv.append((vdim, kind, a))
        vdim += a._data.ndim if kind == "mask" else 1
    if vdim > nd:
        raise IndexError(f"too many indices for tensor of dimension {nd} (got {vdim})")
    if not adv:
        raise RuntimeError(f"{op}(): expected at least one index tensor in 'indices'")
    return _check_adv(self._data.shape, adv)


def _values_arg(self: Tensor, values, res, check_dtype=True) -> Tensor:
    """``values`` as a tensor of ``self``'s dtype that broadcasts to the indexing result's shape ``res``."""
    if not isinstance(values, Tensor):
        if isinstance(values, _NUMBER):
            return _literal(np.array(values).astype(self._dtype.np), self._dtype)
        raise TypeError(f"index_put(): argument 'values' must be Tensor, not {type(values).__name__}")
    if values._dtype is not self._dtype:
        if check_dtype:
            raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                               f"{dtype_name(self._dtype)} for the destination and {dtype_name(values._dtype)} "
                               f"for the source.")
        values = values.to(self._dtype)
    values = _strip_leading_ones(values, len(res))
    try:
        np.broadcast_shapes(values._data.shape, res)
        ok = np.broadcast_shapes(values._data.shape, res) == tuple(res)
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {fmt_shape(values._data.shape)} cannot be "
                           f"broadcast to indexing result of shape {fmt_shape(res)}")
    return values


def _mask_where(self: Tensor, args, pos, values, accumulate):
    """``self[mask] = values`` as ``where(mask, values, self)`` when ``values`` does not depend on the
    number of True values (a number, or one value per position of the dims after the mask's). Used
    under ember.compile: every shape stays fixed, so the capture needs no guard on the mask's count.
    Returns the function ``s -> where(...)``, or None when the write is not of that form."""
    if accumulate or len(args) != 1 or args[0]._dtype is not _dt.bool:
        return None
    mask, p = args[0], pos[0]
    m = mask._data.ndim
    post = self._data.ndim - p - m          # dims after the mask's
    vs = values._data.shape
    k = len(vs) - post - 1                  # the dim of values that lines up with the masked positions
    if k >= 0 and vs[k] != 1:
        return None
    vb = values if k < 0 else values.reshape(vs[:k] + (1,) * m + vs[k + 1:])
    mb = mask if post == 0 else mask.reshape(mask._data.shape + (1,) * post)
    where = FUNCTIONS["where"]
    return lambda s: where(mb, vb, s)


def _index_put_impl(self, args, pos, res, values, accumulate, check_dtype=True):
    values = _values_arg(self, values, res, check_dtype)
    if _CAPTURING[0] is not None:
        fill = _mask_where(self, args, pos, values, accumulate)
        if fill is not None:
            return fill(self)
    return apply(INDEX_PUT, (self, values) + args, {"pos": pos, "accumulate": builtins.bool(accumulate)})


def _index_put_impl_(self, args, pos, res, values, accumulate, name, check_dtype=True):
    values = _values_arg(self, values, res, check_dtype)
    _no_partial_overlap(self, values)
    if _CAPTURING[0] is not None:
        # ember.compile is recording: go through write_result, which records the write
        fill = _mask_where(self, args, pos, values, accumulate)
        if fill is not None:
            return write_result(self, fill, name)
    elif not (GRAD[0] and (self._rg or values._rg)):
        # no autograd: write in place instead of copying the whole tensor
        _writable(self, name)
        if 0 in res:
            return self
        _put_into(self._data, values._data, tuple(a._data for a in args), pos, accumulate)
        self._bump()
        return self
    attrs = {"pos": pos, "accumulate": builtins.bool(accumulate)}
    return write_result(self, lambda s: apply(INDEX_PUT, (s, values) + args, attrs), name)


def index_put(input, indices, values, accumulate: bool = False) -> Tensor:
    """Out-of-place ``input[indices] = values`` (``+=`` with duplicates summed when ``accumulate``)."""
    _tensor_arg(input, "index_put", "input", 1)
    args, pos, res = _indices_arg(input, indices, "index_put")
    return _index_put_impl(input, args, pos, res, values, accumulate)


def index_put_(input, indices, values, accumulate: bool = False) -> Tensor:
    """In-place ``input[indices] = values`` (or ``+=`` with ``accumulate=True``)."""
    _tensor_arg(input, "index_put_", "input", 1)
    args, pos, res = _indices_arg(input, indices, "index_put_")
    return _index_put_impl_(input, args, pos, res, values, accumulate, "index_put_")


attach("index_put", index_put)
attach("index_put_", index_put_)


# ---- gather / scatter family ----------------------------------------------------------------------


def _check_index_dtype(index: Tensor, op: str):
    if index._data.size and index._dtype not in (_dt.int64, _dt.int32):
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index")


def _nd1(shape):
    return tuple(shape) if len(shape) else (1,)


def _scatter_checks(self, dim, index, src):
    """torch's shape/dtype/bounds checks shared by scatter, scatter_add and scatter_reduce."""
    nd = self._data.ndim
    d = wrap_dim(dim, nd)
    _check_index_dtype(index, "scatter")
    if isinstance(src, Tensor) and src._dtype is not self._dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    ishape = _nd1(index._data.shape)
    sshape = _nd1(self._data.shape)
    if index._data.size == 0:
        return d
    if len(ishape) != len(sshape):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if isinstance(src, Tensor):
        srcshape = _nd1(src._data.shape)
        if len(srcshape) != len(ishape):
            raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
        if any(i > s for k, (i, s) in enumerate(zip(ishape, sshape)) if k != d) or \
                any(i > s for i, s in zip(ishape, srcshape)):
            raise RuntimeError(f"Expected index {fmt_shape(index._data.shape)} to be no larger than self "
                               f"{fmt_shape(self._data.shape)} apart from dimension {d} and to be no larger size "
                               f"than src {fmt_shape(src._data.shape)}")
    elif any(i > s for k, (i, s) in enumerate(zip(ishape, sshape)) if k != d):
        raise RuntimeError(f"Expected index {fmt_shape(index._data.shape)} to be no larger than self "
                           f"{fmt_shape(self._data.shape)} apart from dimension {d}")
    bad = _first_bad(index._data, sshape[d], False)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {sshape[d]}")
    return d


def _gather_kernel(x, index, dim):
    xa = np.atleast_1d(x)
    ia = np.atleast_1d(index)
    return xa[_coords(ia.astype(np.intp, copy=False), dim)].reshape(index.shape)


def _gather_bw(ctx, g):
    index = ctx.inputs[1]
    zero = _zeros(ctx.in_shape(0), g._dtype)
    return apply(SCATTER_ADD, (zero, index, g), {"dim": ctx.attrs["dim"]}), None


GATHER = register("gather", _gather_kernel, _gather_bw, save="1", prim="gather")


def gather(input, dim: int, index, *, sparse_grad: bool = False, out=None) -> Tensor:
    """``out[i][j] = input[index[i][j]][j]`` (for dim 0): pick values along ``dim`` at ``index``."""
    _tensor_arg(input, "gather", "input", 1)
    _tensor_arg(index, "gather", "index", 2)
    if sparse_grad:
        raise RuntimeError("gather(): sparse_grad=True is not supported: ember has no sparse tensors")
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    if index._data.size:
        _check_index_dtype(index, "gather")
        ishape, sshape = _nd1(index._data.shape), _nd1(input._data.shape)
        if len(ishape) != len(sshape):
            raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
        for k, (i, s) in enumerate(zip(ishape, sshape)):
            if k != d and i > s:
                raise RuntimeError(f"Size does not match at dimension {k} expected index "
                                   f"{fmt_shape(index._data.shape)} to be no larger than self "
                                   f"{fmt_shape(input._data.shape)} apart from dimension {d}")
        bad = _first_bad(index._data, sshape[d], False)
        if bad is not None:
            raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {sshape[d]}")
    r = apply(GATHER, (input, index), {"dim": d})
    return r if out is None else copy_out(r, out)


def _scatter_kernel(x, index, src, dim, reduce=None):
    out = np.array(x, copy=True)
    if index.size == 0:
        return out
    o = np.atleast_1d(out)
    ia = np.atleast_1d(index).astype(np.intp, copy=False)
    c = _coords(ia, dim)
    s = _corner(np.atleast_1d(src), ia.shape) if isinstance(src, np.ndarray) else np.array(src).astype(o.dtype)
    if reduce is None:
        o[c] = s
    elif reduce == "add":
        np.add.at(o, c, s)
    else:
        np.multiply.at(o, c, s)
    return out


def _scatter_bw(ctx, g):
    a = ctx.attrs
    if a.get("reduce") is not None:
        raise RuntimeError("derivative for aten::scatter is not implemented")
    index = ctx.inputs[1]
    gx = gs = None
    if ctx.edges[0] is not None:
        gx = apply(SCATTER, (g, index, 0), {"dim": a["dim"]})
    if len(ctx.edges) > 2 and ctx.edges[2] is not None:
        gs = _pad_to(apply(GATHER, (g, index), {"dim": a["dim"]}), ctx.in_shape(2))
    return gx, None, gs


SCATTER = register("scatter", _scatter_kernel, _scatter_bw, save="1", prim="scatter")
# torch's overloads: scatter.src (a tensor) / scatter.value (a number); the legacy reduce= has no derivative
SCATTER.node_name = lambda args, attrs: (
    "torch::autograd::NotImplemented" if "reduce" in attrs else
    "ScatterBackward0" if isinstance(args[2], Tensor) else "ScatterBackward1")


def scatter(input, dim: int, index, src=None, value=None, *, reduce=None, out=None) -> Tensor:
    """Write ``src`` (a tensor) or ``value`` (a number) into ``input`` at ``index`` along ``dim``.

    ``reduce="add"`` / ``"multiply"`` (torch's legacy argument) combines instead of overwriting.
    """
    _tensor_arg(input, "scatter", "input", 1)
    _tensor_arg(index, "scatter", "index", 3)
    if src is None and value is None:
        raise TypeError("scatter() missing required argument: 'src' or 'value'")
    if src is None:
        src = value
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if not isinstance(src, (Tensor,) + _NUMBER):
        raise TypeError(f"scatter(): argument 'src' must be Tensor or Number, not {type(src).__name__}")
    d = _scatter_checks(input, dim, index, src)
    attrs = {"dim": d} if reduce is None else {"dim": d, "reduce": reduce}
    r = apply(SCATTER, (input, index, src), attrs)
    return r if out is None else copy_out(r, out)


def _scatter_add_kernel(x, index, src, dim):
    return _scatter_kernel(x, index, src, dim, "add")


def _scatter_add_bw(ctx, g):
    index = ctx.inputs[1]
    gs = None
    if ctx.edges[2] is not None:
        gs = _pad_to(apply(GATHER, (g, index), {"dim": ctx.attrs["dim"]}), ctx.in_shape(2))
    return (g if ctx.edges[0] is not None else None), None, gs


SCATTER_ADD = register("scatter_add", _scatter_add_kernel, _scatter_add_bw, save="1", prim="scatter_add")


def scatter_add(input, dim: int, index, src, *, out=None) -> Tensor:
    """Add ``src`` into ``input`` at ``index`` along ``dim`` (duplicates accumulate)."""
    _tensor_arg(input, "scatter_add", "input", 1)
    _tensor_arg(index, "scatter_add", "index", 3)
    _tensor_arg(src, "scatter_add", "src", 4)
    d = _scatter_checks(input, dim, index, src)
    r = apply(SCATTER_ADD, (input, index, src), {"dim": d})
    return r if out is None else copy_out(r, out)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f" or dtype == _dt.bfloat16.np:
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_kernel(x, index, src, dim, reduce, include_self):
    out = np.array(x, copy=True)
    if index.size == 0:
        return out
    o = np.atleast_1d(out)
    ia = np.atleast_1d(index).astype(np.intp, copy=False)
    c = _coords(ia, dim)
    s = _corner(np.atleast_1d(src), ia.shape)
    if not include_self:
        o[c] = _identity(reduce, o.dtype)
    if reduce in ("sum", "mean"):
        np.add.at(o, c, s)
    elif reduce == "prod":
        np.multiply.at(o, c, s)
    elif reduce == "amax":
        np.maximum.at(o, c, s)
    else:
        np.minimum.at(o, c, s)
    if reduce == "mean":
        n = _scatter_counts(o.shape, c, include_self)
        if o.dtype.kind in "iu":
            np.floor_divide(o, n.astype(o.dtype), out=o)
        else:
            np.divide(o, n.astype(o.dtype), out=o)
    return out


def _scatter_counts(shape, c, include_self):
    """How many values were combined at each position (self counts once when included)."""
    n = np.zeros(shape, dtype=np.int64)
    np.add.at(n, c, 1)
    if include_self:
        n += 1
    else:
        n[n == 0] = 1
    return n


def _scatter_reduce_bw(ctx, g):
    a = ctx.attrs
    dim, reduce, incl = a["dim"], a["reduce"], a["include_self"]
    x, index, src = ctx.inputs
    idx = np.atleast_1d(index._data).astype(np.intp, copy=False)
    c = _coords(idx, dim)
    need_x, need_s = ctx.edges[0] is not None, ctx.edges[2] is not None
    gx = gs = None
    if reduce in ("sum", "mean"):
        if reduce == "mean":
            # how many values were averaged at each position, counted with ops on the index tensor (a
            # compiled replay recounts for new indices); self counts once when included
            dt = g._dtype
            n = apply(SCATTER_ADD, (_zeros(x._data.shape, dt), index, _literal(np.ones(index._data.shape, dt.np), dt)),
                      {"dim": dim})
            n = n + 1 if incl else n.clamp(min=1)
            g = g / n
        if need_x:
            gx = g if incl else apply(SCATTER, (g, index, 0), {"dim": dim})
        if need_s:
            gs = apply(GATHER, (g, index), {"dim": dim})
    elif reduce in ("amax", "amin") and x._data.ndim and index._data.ndim:
        # the masks of who attained the extreme, from ember ops on the tensors (a compiled replay recomputes
        # them for new values and indices); ties share the gradient evenly, and like torch, self is counted
        # among the ties even when excluded
        dt = g._dtype
        with no_grad():
            xd, sd = x, src                 # (under no_grad: nothing is recorded)
            r = apply(SCATTER_REDUCE, (xd, index, sd), a)
            s_used = sd[tuple(slice(0, k) for k in index._data.shape)]
            self_is = (xd == r).to(dt)
            src_is = (s_used == apply(GATHER, (r, index), {"dim": dim})).to(dt)
            n = apply(SCATTER_ADD, (self_is, index, src_is), {"dim": dim}).clamp(min=1)
        gd = g / n
        if need_x:
            gx = gd * self_is
            if not incl:
                gx = apply(SCATTER, (gx, index, 0), {"dim": dim})
        if need_s:
            gs = apply(GATHER, (gd, index), {"dim": dim}) * src_is
    elif reduce in ("amax", "amin"):
        r = _scatter_reduce_kernel(x._data, index._data, src._data, **a)   # 0-dim operands: NumPy masks
        r1 = np.atleast_1d(r)
        s_used = _corner(np.atleast_1d(src._data), idx.shape)
        self_is = np.atleast_1d(x._data) == r1
        src_is = s_used == r1[c]
        n = self_is.astype(np.int64)
        np.add.at(n, c, src_is.astype(np.int64))
        n[n == 0] = 1
        gd = g / _const(n.reshape(r.shape).astype(g._dtype.np))
        if need_x:
            gx = gd * _const(self_is.reshape(x._data.shape).astype(g._dtype.np))
            if not incl:
                gx = apply(SCATTER, (gx, index, 0), {"dim": dim})
        if need_s:
            gs = apply(GATHER, (gd, index), {"dim": dim}) * _const(src_is.reshape(index._data.shape).astype(g._dtype.np))
    else:  # prod: divide the product by each factor, with care for zeros
        gx, gs = _prod_bw(ctx, g, x, index, src, dim, incl, need_x, need_s)
    if gs is not None:
        gs = _pad_to(gs, ctx.in_shape(2))
    return gx, None, gs


def _prod_bw(ctx, g, x, index, src, dim, incl, need_x, need_s):
    gx = gs = None
    attrs = {"dim": dim, "reduce": "prod", "include_self": incl}
    idx = np.atleast_1d(index._data).astype(np.intp, copy=False)
    c = _coords(idx, dim)
    if src._data.shape != index._data.shape:
        src = getitem_basic(src, tuple(slice(0, n) for n in index._data.shape))
    if need_x:
        # d(result)/d(self) = product of the scattered values (self's zeros replaced by 1 to get it)
        xz = _const(x._data == 0)
        masked_x = masked_fill(x, xz, 1)
        gx = g * apply(SCATTER_REDUCE, (masked_x, index, src), attrs) / masked_x
        if not incl:
            gx = apply(SCATTER, (gx, index, 0), {"dim": dim})
    if need_s:
        result = apply(SCATTER_REDUCE, (x, index, src), attrs)   # recomputed so double backward flows through it
        s = src._data
        s_zero = s == 0
        nz = np.zeros(_nd1(x._data.shape), dtype=np.int64)
        np.add.at(nz, c, np.atleast_1d(s_zero).astype(np.int64))
        single = np.atleast_1d(s_zero) & (nz[c] == 1)
        single = single.reshape(s.shape)
        single_t = _const(single)
        # the lone zero at a position: its derivative is the product of the others
        masked_src_result = apply(SCATTER_REDUCE, (x, index, masked_fill(src, single_t, 1)), attrs)
        a_term = apply(GATHER, (g * masked_src_result, index), {"dim": dim})
        b_term = apply(GATHER, (g * result, index), {"dim": dim}) / masked_fill(src, _const(s_zero), 1)
        m = _const(single.astype(g._dtype.np))
        gs = a_term * m + b_term * (1 - m)
    return gx, gs


SCATTER_REDUCE = register("scatter_reduce", _scatter_reduce_kernel, _scatter_reduce_bw, save="i",
                          prim="scatter_reduce")


def scatter_reduce(input, dim: int, index, src, reduce: str, *, include_self: bool = True, out=None) -> Tensor:
    """Reduce ``src`` into ``input`` at ``index`` along ``dim`` with sum/prod/mean/amax/amin."""
    _tensor_arg(input, "scatter_reduce", "input", 1)
    _tensor_arg(index, "scatter_reduce", "index", 3)
    _tensor_arg(src, "scatter_reduce", "src", 4)
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    d = _scatter_checks(input, dim, index, src)
    r = apply(SCATTER_REDUCE, (input, index, src), {"dim": d, "reduce": reduce, "include_self": builtins.bool(include_self)})
    return r if out is None else copy_out(r, out)


def _scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    """In-place ``scatter``."""
    return write_result(self, lambda s: scatter(s, dim, index, src, value, reduce=reduce), "scatter_")


def _scatter_add_(self, dim, index, src):
    """In-place ``scatter_add``."""
    return write_result(self, lambda s: scatter_add(s, dim, index, src), "scatter_add_")


def _scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    """In-place ``scatter_reduce``."""
    return write_result(self, lambda s: scatter_reduce(s, dim, index, src, reduce, include_self=include_self),
                        "scatter_reduce_")


def index_reduce(input, dim: int, index, source, reduce: str, *, include_self: bool = True, out=None) -> Tensor:
    """Reduce the slices ``source.select(dim, i)`` into ``input.select(dim, index[i])`` with prod / mean /
    amax / amin: ``scatter_reduce`` with the 1-D ``index`` spread along ``dim``."""
    _tensor_arg(input, "index_reduce", "input", 1)
    _tensor_arg(index, "index_reduce", "index", 3)
    _tensor_arg(source, "index_reduce", "source", 4)
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index._dtype not in (_dt.int32, _dt.int64):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: {dtype_name(index._dtype)}")
    nd = builtins.max(source._data.ndim, 1)
    d = wrap_dim(dim, nd)
    if index._data.ndim > 1:
        raise RuntimeError("index_reduce_(): Index is supposed to be a vector")
    n_src = source._data.shape[d] if source._data.ndim else 1
    if index._data.size != n_src:
        raise RuntimeError(f"index_reduce_(): Number of indices ({index._data.size}) should be equal to "
                           f"source.size(dim): ({n_src}), for dim: {d}")
    shp = [1] * source._data.ndim
    if shp:
        shp[d] = -1
    idx = index.long().reshape(shp).expand(*source._data.shape) if shp else index.long().reshape(())
    return scatter_reduce(input, d, idx, source, reduce, include_self=include_self, out=out)


def _index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    """In-place ``index_reduce``."""
    return write_result(self, lambda s: index_reduce(s, dim, index, source, reduce, include_self=include_self),
                        "index_reduce_")


attach("index_reduce", index_reduce)
attach("index_reduce_", _index_reduce_, function=False)
attach("gather", gather)
attach("scatter", scatter)
attach("scatter_add", scatter_add)
attach("scatter_reduce", scatter_reduce)
attach("scatter_", _scatter_, function=False)
attach("scatter_add_", _scatter_add_, function=False)
attach("scatter_reduce_", _scatter_reduce_, function=False)


# ---- index_select / index_add / index_copy / index_fill ---------------------------------------------


def _dim_key(dim, idx):
    return (slice(None),) * dim + (idx,)


def _index_select_kernel(x, index, dim):
    return np.take(x, index.astype(np.intp, copy=False), axis=dim)


def _index_select_bw(ctx, g):
    index = ctx.inputs[1]
    zero = _zeros(ctx.in_shape(0), g._dtype)
    return apply(INDEX_ADD, (zero, index, g), {"dim": ctx.attrs["dim"], "alpha": 1}), None


INDEX_SELECT = register("index_select", _index_select_kernel, _index_select_bw, save="1", prim="gather")


def _vector_index(index: Tensor) -> Tensor:
    return index.reshape((1,)) if index._data.ndim == 0 else index


def index_select(input, dim: int, index, *, out=None) -> Tensor:
    """The slices of ``input`` along ``dim`` at the positions in the 1-D ``index``."""
    _tensor_arg(input, "index_select", "input", 1)
    _tensor_arg(index, "index_select", "index", 3)
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    if index._dtype not in (_dt.int64, _dt.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index._data.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    x = input.reshape((1,)) if nd == 0 else input
    size = x._data.shape[d]
    if index._data.size and size == 0:
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if _first_bad(index._data, size, False) is not None:
        raise IndexError("index out of range in self")
    r = apply(INDEX_SELECT, (x, _vector_index(index)), {"dim": d})
    if nd == 0:
        r = r.reshape(())
    return r if out is None else copy_out(r, out)


def _index_add_kernel(x, index, source, dim, alpha):
    out = np.array(x, copy=True)
    src = source if alpha == 1 else source * np.asarray(alpha).astype(out.dtype)
    np.add.at(out, _dim_key(dim, index.astype(np.intp, copy=False)), src.astype(out.dtype, copy=False))
    return out


def _index_add_bw(ctx, g):
    a = ctx.attrs
    index = ctx.inputs[1]
    gs = None
    if ctx.edges[2] is not None:
        gs = apply(INDEX_SELECT, (g, index), {"dim": a["dim"]})
        if a["alpha"] != 1:
            gs = gs * a["alpha"]
    return (g if ctx.edges[0] is not None else None), None, gs


INDEX_ADD = register("index_add", _index_add_kernel, _index_add_bw, save="1", prim="scatter_add")


def _index_source_checks(op, x, d, index, source, long_only=False):
    nd = x._data.ndim
    if long_only:
        if index._dtype is not _dt.int64:
            raise RuntimeError(f"{op}(): Expected a long tensor for index, but got {dtype_name(index._dtype)}")
    elif index._dtype not in (_dt.int64, _dt.int32):
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index but got: {dtype_name(index._dtype)}")
    if index._data.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, but got dim: {index._data.ndim} with type: "
                         f"{dtype_name(index._dtype)} and size: {fmt_shape(index._data.shape)}")
    if source._dtype is not x._dtype:
        if op == "index_copy_":
            raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                               f"{dtype_name(x._dtype)} and (source) {dtype_name(source._dtype)}")
        raise RuntimeError(f"{op}(): self ({dtype_name(x._dtype)}) and source ({dtype_name(source._dtype)}) must "
                           f"have the same scalar type")
    n = index._data.size
    sshape = _nd1(source._data.shape) if nd else (source._data.size,)
    xshape = _nd1(x._data.shape)
    if len(sshape) != len(xshape) and source._data.ndim:
        raise RuntimeError(f"{op}(): source and self must have the same number of dimensions, got source "
                           f"{fmt_shape(source._data.shape)} and self {fmt_shape(x._data.shape)}")
    if sshape[d] != n:
        if op == "index_copy_":
            raise IndexError(f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) ({sshape[d]})")
        raise RuntimeError(f"{op}(): Number of indices ({n}) should be equal to source.size(dim): ({sshape[d]}), "
                           f"for dim: {d}")
    for k, (a, b) in enumerate(zip(xshape, sshape)):
        if k != d and a != b:
            if op == "index_copy_":
                raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes. "
                                   f"Destination slice shape: {fmt_shape(xshape[:d] + xshape[d + 1:])[1:-1]} at "
                                   f"dimension {d} and source slice shape: "
                                   f"{fmt_shape(sshape[:d] + sshape[d + 1:])[1:-1]} at dimension 0.")
            raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified "
                               f"dimension. Got self.shape = {fmt_shape(x._data.shape)} source.shape = "
                               f"{fmt_shape(source._data.shape)}")
    bad = _first_bad(index._data, xshape[d], False)
    if bad is not None and op == "index_add_" and nd <= 1:
        raise IndexError("index out of range in self")     # torch's 1-D index_add_ kernel words it so
    if bad is not None:
        prefix = "index_copy_(): " if op == "index_copy_" else ""
        exc = IndexError if op == "index_copy_" else RuntimeError
        raise exc(f"{prefix}index {bad} is out of bounds for dimension {d} with size {xshape[d]}")


def _as_1d_pair(x, index, source):
    """0-dim self/index/source are handled as 1-element vectors (as torch does)."""
    index = _vector_index(index)
    if x._data.ndim == 0:
        x = x.reshape((1,))
    if source._data.ndim == 0:
        source = source.reshape((1,))
    return x, index, source


def index_add(input, dim: int, index, source, *, alpha=1, out=None) -> Tensor:
    """``input`` with ``alpha * source`` added at ``index`` along ``dim`` (duplicates accumulate)."""
    _tensor_arg(input, "index_add", "input", 1)
    _tensor_arg(index, "index_add", "index", 3)
    _tensor_arg(source, "index_add", "source", 4)
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    _index_source_checks("index_add_", input, d, index, source)
    x, idx, src = _as_1d_pair(input, index, source)
    r = apply(INDEX_ADD, (x, idx, src), {"dim": d, "alpha": alpha})
    if nd == 0:
        r = r.reshape(())
    return r if out is None else copy_out(r, out)


def _index_copy_kernel(x, index, source, dim):
    out = np.array(x, copy=True)
    out[_dim_key(dim, index.astype(np.intp, copy=False))] = source
    return out


def _index_copy_bw(ctx, g):
    index = ctx.inputs[1]
    dim = ctx.attrs["dim"]
    gx = gs = None
    if ctx.edges[0] is not None:
        gx = apply(INDEX_FILL, (g, index, 0), {"dim": dim})
    if ctx.edges[2] is not None:
        gs = apply(INDEX_SELECT, (g, index), {"dim": dim})
    return gx, None, gs


INDEX_COPY = register("index_copy", _index_copy_kernel, _index_copy_bw, save="1", prim="scatter")


def index_copy(input, dim: int, index, source, *, out=None) -> Tensor:
    """``input`` with the slices at ``index`` along ``dim`` replaced by ``source``'s."""
    _tensor_arg(input, "index_copy", "input", 1)
    _tensor_arg(index, "index_copy", "index", 3)
    _tensor_arg(source, "index_copy", "source", 4)
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    _index_source_checks("index_copy_", input, d, index, source, long_only=True)
    x, idx, src = _as_1d_pair(input, index, source)
    r = apply(INDEX_COPY, (x, idx, src), {"dim": d})
    if nd == 0:
        r = r.reshape(())
    return r if out is None else copy_out(r, out)


def _index_fill_kernel(x, index, value, dim):
    out = np.array(x, copy=True)
    out[_dim_key(dim, index.astype(np.intp, copy=False))] = np.asarray(value).astype(out.dtype)
    return out


def _index_fill_bw(ctx, g):
    index = ctx.inputs[1]
    dim = ctx.attrs["dim"]
    gx = gv = None
    if ctx.edges[0] is not None:
        gx = apply(INDEX_FILL, (g, index, 0), {"dim": dim})
    if ctx.edges[2] is not None:
        # every filled slice received the value once (repeated or negative indices fill once)
        filled = apply(INDEX_FILL, (_zeros(g._data.shape, g._dtype), index, 1), {"dim": dim})
        gv = (g * filled).sum()
    return gx, None, gv


INDEX_FILL = register("index_fill", _index_fill_kernel, _index_fill_bw, save="1", prim="scatter")


def index_fill(input, dim: int, index, value) -> Tensor:
    """``input`` with the slices at ``index`` along ``dim`` set to ``value`` (a number or 0-dim tensor)."""
    _tensor_arg(input, "index_fill", "input", 1)
    _tensor_arg(index, "index_fill", "index", 3)
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    if index._dtype is not _dt.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index._data.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value._data.ndim} dimension(s).")
    elif not isinstance(value, _NUMBER):
        raise TypeError(f"index_fill(): argument 'value' must be Number or Tensor, not {type(value).__name__}")
    else:
        check_scalar_fits(value, input._dtype)
    x = input.reshape((1,)) if nd == 0 else input
    size = x._data.shape[d]
    bad = _first_bad(index._data, size, True)
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    # (negative indices count from the end in the kernel, as NumPy reads them)
    r = apply(INDEX_FILL, (x, _vector_index(index), value), {"dim": d})
    return r.reshape(()) if nd == 0 else r


def _index_add_(self, dim, index, source, *, alpha=1):
    """In-place ``index_add``."""
    return write_result(self, lambda s: index_add(s, dim, index, source, alpha=alpha), "index_add_")


def _index_copy_(self, dim, index, source):
    """In-place ``index_copy``."""
    return write_result(self, lambda s: index_copy(s, dim, index, source), "index_copy_")


def _index_fill_(self, dim, index, value):
    """In-place ``index_fill``."""
    return write_result(self, lambda s: index_fill(s, dim, index, value), "index_fill_")


attach("index_select", index_select)
attach("index_add", index_add)
attach("index_copy", index_copy)
attach("index_fill", index_fill)
attach("index_add_", _index_add_, function=False)
attach("index_copy_", _index_copy_, function=False)
attach("index_fill_", _index_fill_, function=False)


# ---- masked_fill / masked_select / masked_scatter ---------------------------------------------------


def _bshape(op, *shapes):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise broadcast_error(op, shapes) from None


def _masked_fill_kernel(x, mask, value):
    v = np.asarray(value).astype(x.dtype)
    return np.where(mask, v, x)


def _masked_fill_bw(ctx, g):
    mask = ctx.inputs[1]
    gx = gv = None
    if ctx.edges[0] is not None:
        gx = apply(MASKED_FILL, (g, mask, 0))
    if ctx.edges[2] is not None:
        gv = apply(MASKED_FILL, (g, mask.logical_not(), 0))
    return gx, None, gv


MASKED_FILL = register("masked_fill", _masked_fill_kernel, _masked_fill_bw, save="1", prim="where")


def _check_mask(mask, op_msg):
    if not isinstance(mask, Tensor):
        raise TypeError(f"argument 'mask' must be Tensor, not {type(mask).__name__}")
    if mask._dtype is not _dt.bool:
        raise RuntimeError(op_msg(mask))


def masked_fill(input, mask, value) -> Tensor:
    """``input`` with ``value`` where ``mask`` is True (the mask broadcasts)."""
    _tensor_arg(input, "masked_fill", "input", 1)
    _check_mask(mask, lambda m: f"masked_fill_ only supports boolean masks, but got mask with dtype "
                                f"{_c_type(m._dtype)}")
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value._data.ndim} dimension(s).")
    elif not isinstance(value, _NUMBER):
        raise TypeError(f"masked_fill(): argument 'value' must be Number or Tensor, not {type(value).__name__}")
    else:
        check_scalar_fits(value, input._dtype)
    _bshape("masked_fill", input._data.shape, mask._data.shape)
    return apply(MASKED_FILL, (input, mask, value))


def _c_type(d) -> str:
    return {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "int16": "short int",
            "int8": "signed char", "uint8": "unsigned char", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16"}.get(d.name, d.name)


def _masked_fill_(self, mask, value):
    """In-place ``masked_fill`` (the mask must broadcast to ``self``)."""
    _check_mask(mask, lambda m: f"masked_fill_ only supports boolean masks, but got mask with dtype "
                                f"{_c_type(m._dtype)}")
    return write_result(self, lambda s: masked_fill(s, mask, value), "masked_fill_")


def _masked_select_kernel(x, mask):
    xb, mb = np.broadcast_arrays(x, mask)
    return xb[mb]


def _masked_select_bw(ctx, g):
    mask = ctx.inputs[1]
    shape = np.broadcast_shapes(ctx.in_shape(0), mask._data.shape)
    mb = mask if mask._data.shape == tuple(shape) else mask.expand(shape)     # (a view: a graph value)
    return apply(MASKED_SCATTER, (_zeros(shape, g._dtype), mb, g)), None


MASKED_SELECT = register("masked_select", _masked_select_kernel, _masked_select_bw, save="1", prim="compress")


def masked_select(input, mask, *, out=None) -> Tensor:
    """The 1-D tensor of ``input``'s values where ``mask`` is True (both broadcast)."""
    _tensor_arg(input, "masked_select", "input", 1)
    _check_mask(mask, lambda m: "masked_select: expected BoolTensor for mask")
    _bshape("masked_select", input._data.shape, mask._data.shape)
    r = apply(MASKED_SELECT, (input, mask))
    return r if out is None else copy_out(r, out)


def _masked_scatter_kernel(x, mask, source):
    shape = np.broadcast_shapes(x.shape, mask.shape)
    out = np.array(np.broadcast_to(x, shape), copy=True)
    mb = np.broadcast_to(mask, shape)
    n = int(np.count_nonzero(mb))
    out[mb] = source.reshape(-1)[:n]
    return out


def _masked_scatter_bw(ctx, g):
    mask = ctx.inputs[1]
    gx = gs = None
    if ctx.edges[0] is not None:
        gx = apply(MASKED_FILL, (g, mask, 0))
    if ctx.edges[2] is not None:
        shape = ctx.in_shape(2)
        numel = int(np.prod(shape, dtype=np.int64))
        sel = apply(MASKED_SELECT, (g, mask))
        gs = _pad_to(sel, (numel,)).reshape(shape)
    return gx, None, gs


MASKED_SCATTER = register("masked_scatter", _masked_scatter_kernel, _masked_scatter_bw, save="1", prim="scatter")


def masked_scatter(input, mask, source) -> Tensor:
    """``input`` with ``source``'s leading values copied, in order, where ``mask`` is True."""
    _tensor_arg(input, "masked_scatter", "input", 1)
    _tensor_arg(source, "masked_scatter", "source", 3)
    _check_mask(mask, lambda m: f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                                f"{dtype_name(m._dtype)}")
    if source._dtype is not input._dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{dtype_name(input._dtype)} and {dtype_name(source._dtype)}")
    shape = _bshape("masked_scatter", input._data.shape, mask._data.shape)
    if np.count_nonzero(np.broadcast_to(mask._data, shape)) > source._data.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    return apply(MASKED_SCATTER, (input, mask, source))


def _masked_scatter_(self, mask, source):
    """In-place ``masked_scatter`` (the mask must broadcast to ``self``)."""
    _check_mask(mask, lambda m: f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                                f"{dtype_name(m._dtype)}")
    if not _bcast_ok(self, mask) or np.broadcast_shapes(self._data.shape, mask._data.shape) != self._data.shape:
        raise RuntimeError(f"masked_scatter_: mask of shape {fmt_shape(mask._data.shape)} cannot be broadcast to "
                           f"self of shape {fmt_shape(self._data.shape)}")
    return write_result(self, lambda s: masked_scatter(s, mask, source), "masked_scatter_")


def _bcast_ok(a, b):
    try:
        np.broadcast_shapes(a._data.shape, b._data.shape)
        return True
    except ValueError:
        return False


def fill_diagonal_(self, fill_value, wrap: bool = False):
    """Fill the main diagonal (``self[i, i, ...]``) with ``fill_value`` in place; every dimension must have
    the same length beyond two dims. ``wrap=True`` restarts the diagonal every ``width + 1`` rows of a
    tall matrix, as torch (and NumPy) do. Differentiable: the gradient is zero on the diagonal."""
    _tensor_arg(self, "fill_diagonal_", "self", 1)
    shape = self._data.shape
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and any(n != shape[0] for n in shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(shape, dtype=np.bool_)
    np.fill_diagonal(mask, True, wrap=bool(wrap) and len(shape) == 2)
    mask_t = _const(mask)
    return write_result(self, lambda s: masked_fill(s, mask_t, fill_value), "fill_diagonal_")


attach("fill_diagonal_", fill_diagonal_, function=False)
attach("masked_fill", masked_fill)
attach("masked_select", masked_select)
attach("masked_scatter", masked_scatter)
attach("masked_fill_", _masked_fill_, function=False)
attach("masked_scatter_", _masked_scatter_, function=False)


# ---- take / take_along_dim / put ---------------------------------------------------------------------


def _check_flat_index(index: Tensor, numel: int) -> None:
    a = index._data
    bad = _first_bad(a, numel, True) if a.size else None
    if bad is not None:
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {numel} elements.")


_TAKE, _PUT = node_class("TakeBackward0"), node_class("PutBackward0")     # ops of their own in torch


def take(input, index, *, out=None) -> Tensor:
    """Values of ``input`` (read as 1-D in C order) at ``index``; the result has ``index``'s shape."""
    _tensor_arg(input, "take", "input", 1)
    _tensor_arg(index, "take", "index", 2)
    if index._dtype is not _dt.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {dtype_name(index._dtype)}")
    numel = input._data.size
    if index._data.size and numel == 0:
        raise IndexError("take(): tried to take from an empty tensor")
    _check_flat_index(index, numel)
    r = rename(apply(INDEX, (input.reshape(-1), index), {"pos": (0,)}), _TAKE)
    return r if out is None else copy_out(r, out)


def take_along_dim(input, indices, dim=None, *, out=None) -> Tensor:
    """Pick values along ``dim`` at ``indices`` (broadcast against ``input`` except along ``dim``)."""
    _tensor_arg(input, "take_along_dim", "input", 1)
    _tensor_arg(indices, "take_along_dim", "indices", 2)
    if indices._dtype is not _dt.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{dtype_name(indices._dtype)}")
    if dim is None:
        r = _gather_neg(input.reshape(-1), 0, indices.reshape(-1))
        return r if out is None else copy_out(r, out)
    nd = input._data.ndim
    if nd != indices._data.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of "
                           f"dimensions, but got {nd} dimensions for input, and {indices._data.ndim} dimensions "
                           f"for indices")
    d = wrap_dim(dim, nd)
    ish, xsh = list(indices._data.shape), list(input._data.shape)
    ish[d] = xsh[d] = 1
    b = list(_bshape("take_along_dim", tuple(ish), tuple(xsh)))
    xs = b.copy()
    xs[d] = input._data.shape[d]
    js = b.copy()
    js[d] = indices._data.shape[d]
    x = input.expand(tuple(xs)) if tuple(xs) != input._data.shape else input
    j = indices.expand(tuple(js)) if tuple(js) != indices._data.shape else indices
    r = _gather_neg(x, d, j)
    return r if out is None else copy_out(r, out)


def _gather_neg(x: Tensor, d: int, index: Tensor) -> Tensor:
    """``gather`` whose negative indices count from the end. The gather op reads them so itself (as NumPy
    does), so they are not rewritten in Python; the message names the index wrapped once, as torch's."""
    size = x._data.shape[d]
    bad = _first_bad(index._data, size, True) if index._data.size else None
    if bad is not None:
        raise RuntimeError(f"index {bad + size if bad < 0 else bad} is out of bounds for dimension {d} with "
                           f"size {size}")
    return apply(GATHER, (x, index), {"dim": d})


def put(input, index, source, accumulate: bool = False) -> Tensor:
    """Out-of-place ``put_``: ``input`` (read as 1-D) with ``source`` written at ``index``."""
    _tensor_arg(input, "put", "input", 1)
    return _put(input, index, source, accumulate, "put")


def _put(x, index, source, accumulate, name):
    _tensor_arg(index, name, "index", 2)
    _tensor_arg(source, name, "source", 3)
    if index._dtype is not _dt.int64:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {dtype_name(index._dtype)}")
    if source._dtype is not x._dtype:
        raise RuntimeError(f"{name}(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {dtype_name(x._dtype)} and source.dtype = {dtype_name(source._dtype)}")
    if index._data.size != source._data.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source._data.size}, index.numel() = {index._data.size}")
    _check_flat_index(index, x._data.size)
    flat = apply(INDEX_PUT, (x.reshape(-1), source.reshape(-1), index.reshape(-1)),
                 {"pos": (0,), "accumulate": builtins.bool(accumulate)})
    return rename(flat.reshape(x._data.shape), _PUT)


def put_(self, index, source, accumulate: bool = False) -> Tensor:
    """Write ``source`` into ``self`` (read as 1-D) at ``index``; ``accumulate`` adds instead."""
    return write_result(self, lambda s: _put(s, index, source, accumulate, "put_"), "put_")


attach("take", take)
attach("take_along_dim", take_along_dim)
attach("put", put)
attach("put_", put_, function=False)


# ---- nonzero / argwhere / where(condition) ----------------------------------------------------------


def _nonzero_kernel(x):
    return np.argwhere(x != 0).astype(np.int64, copy=False)


NONZERO = register("nonzero", _nonzero_kernel, differentiable=False)


def nonzero(input, *, out=None, as_tuple: bool = False):
    """Coordinates of the non-zero elements: an ``(n, ndim)`` int64 tensor, or one 1-D tensor per dim."""
    _tensor_arg(input, "nonzero", "input", 1)
    if as_tuple:
        x = input.reshape((1,)) if input._data.ndim == 0 else input
        coords = apply(NONZERO, (x,))
        return tuple(wrap(np.ascontiguousarray(coords._data[:, k])) for k in range(x._data.ndim))
    r = apply(NONZERO, (input,))
    if out is not None:
        if isinstance(out, Tensor) and out._dtype is not _dt.int64:
            raise RuntimeError(f"nonzero: Expected out tensor to have scalar type Long but got scalar type"
                               f"{dtype_name(out._dtype)}")
        return copy_out(r, out)
    return r


def argwhere(input) -> Tensor:
    """Same as ``nonzero(input)``: the ``(n, ndim)`` coordinates of non-zero elements."""
    return nonzero(input)


def nonzero_static(input, *, size: int, fill_value: int = -1) -> Tensor:
    """``nonzero`` padded with ``fill_value`` (or truncated) to exactly ``size`` rows."""
    r = nonzero(input)._data
    nd = input._data.ndim
    out = np.full((size, nd), fill_value, dtype=np.int64)
    k = builtins.min(size, r.shape[0])
    out[:k] = r[:k]
    return wrap(out)


def _where_single(condition):
    """``where(condition)``: the same as ``nonzero(condition, as_tuple=True)``."""
    return nonzero(condition, as_tuple=True)


attach("nonzero", nonzero)
attach("argwhere", argwhere)
attach("nonzero_static", nonzero_static)

if "where" not in FUNCTIONS:
    # the 3-argument where lives in ops/binary.py; until it is loaded, offer the 1-argument form only
    def where(condition, input=None, other=None, *, out=None):
        """``where(condition)`` = ``nonzero(condition, as_tuple=True)`` (the 3-argument form is in binary)."""
        if input is None and other is None:
            return _where_single(condition)
        raise RuntimeError("where(condition, input, other): the 3-argument form is not available: "
                           "ember.ops.binary was not loaded")

    attach("where", where)
