"""Indexing: ``Tensor.__getitem__`` / ``__setitem__`` and ``index_put``, on the ``index`` / ``index_put`` ops.
The rest of the family lives next door and shares this file's helpers: ``index_scatter.py`` (gather,
scatter, scatter_add/reduce, index_reduce, take/put), ``index_dim.py`` (index_select/add/copy/fill) and
``index_masked.py`` (masked_fill/select/scatter, fill_diagonal_, nonzero/argwhere).

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
from ..autograd.grad_mode import GRAD
from .registry import register, apply, attach, dtype_name, FUNCTIONS, FACTORY
from ._util import fmt_shape, check_scalar_fits, INT_TYPES
from ._along import first_out_of_range
from ._reduce_util import dim_from_axis
from .shape import getitem_basic, SLICE_BACKWARD
from .inplace import write_result, _writable, CAPTURE_WRITE as _CAPTURING
from .._numpy_quiet import ensure as _fp_quiet


_NUMBER = (bool, int, float, complex, np.bool_, np.number)


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
    t = wrap(np.ascontiguousarray(arr))
    t._host_const = True        # the device dispatcher copies it next to device operands
    return t


def _pad_to(g: Tensor, shape) -> Tensor:
    """Place ``g`` in the leading corner of zeros of ``shape`` (a differentiable ember op)."""
    if g._data.shape == tuple(shape):
        return g
    key = tuple(slice(0, n) for n in g._data.shape)
    return apply(SLICE_BACKWARD, (g,), {"in_shape": tuple(shape), "key": key, "dtype": None})


def _check_fill_value(op: str, value, dtype) -> None:
    """A fill value (``index_fill``, ``masked_fill``) is a number that fits ``dtype`` or a 0-d tensor."""
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError(f"{op}_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value._data.ndim} dimension(s).")
    elif not isinstance(value, _NUMBER):
        raise TypeError(f"{op}(): argument 'value' must be Number or Tensor, not {type(value).__name__}")
    else:
        check_scalar_fits(value, dtype)


def _tensor_arg(x, op: str, arg: str, pos: int) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")
    return x


def _dim_index_args(op: str, input, dim, axis, index, index_pos: int = 3, **required):
    """The leading arguments of ``op(input, dim, index, ...)`` (index_select, gather, scatter, index_add,
    ...): ``axis=`` for ``dim`` and torch's TypeError for a missing one (``required``: the later required
    arguments in signature order), then ``input``, ``index`` and a ``src``/``source`` among them checked
    to be tensors. Returns dim."""
    if axis is not None or dim is None or index is None or (required and any(v is None for v in required.values())):
        dim = dim_from_axis(op, dim, axis, index=index, **required)
    if type(input) is not Tensor or type(index) is not Tensor:      # (the usual case: one check each)
        _tensor_arg(input, op, "input", 1)
        _tensor_arg(index, op, "index", index_pos)
    if required:
        for name in ("src", "source"):
            if name in required:
                _tensor_arg(required[name], op, name, index_pos + 1)
    return dim


def _first_bad(idx: np.ndarray, size: int, allow_negative: bool):
    if type(idx) is not np.ndarray:
        # device indices: checked on a host copy (torch checks them in the kernel; the message is the same)
        from ..devices.opencl import to_numpy
        idx = to_numpy(idx)
    return first_out_of_range(idx, size, allow_negative)


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
    if len(idx) == 1 and x.size:
        # one index array (integers, or a mask over leading dims): NumPy's own indexing is torch's here,
        # and the result is empty only when the index is; anything it refuses takes the path below
        try:
            return x[idx[0]] if pos[0] == 0 else x[(slice(None),) * pos[0] + idx]
        except IndexError:
            pass
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
    if type(a) is not np.ndarray:           # device indices: checked on a host copy
        from ..devices.opencl import to_numpy
        a = to_numpy(a)
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
        if t is slice or t in INT_TYPES:
            key = (key,)
        else:
            return None
    if len(key) > len(shape):
        return None
    out = None
    for d, k in enumerate(key):
        tk = type(k)
        if tk in INT_TYPES:
            n = shape[d]
            if not -n <= k < n:
                return None
            if k < 0:
                out = out or list(key)
                out[d] = k + n
        elif tk is slice:
            if not ((k.step is None or (type(k.step) in INT_TYPES and k.step > 0))
                    and (k.start is None or type(k.start) in INT_TYPES)
                    and (k.stop is None or type(k.stop) in INT_TYPES)):
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
    if plan.trivial and len(plan.adv) == 1 and _one_index_ok(self._data, plan.adv[0]):
        return apply(INDEX, (self, plan.adv[0][2]), {"pos": (0,)})
    view = self if plan.trivial else getitem_basic(self, plan.basic)
    args, pos, _ = _check_adv(view._data.shape, plan.adv)
    return apply(INDEX, (view,) + args, {"pos": pos})


def _one_index_ok(x, adv) -> bool:
    """Whether ``x[index]`` (one index tensor at dim 0 of a non-empty ``x``) passes ``_check_adv``'s
    checks: a mask matching x's leading dims, or integers in range (checked here without its
    bookkeeping; False sends the key through ``_check_adv``, which raises torch's message)."""
    p, kind, t = adv
    a = t._data
    if p or not x.size:
        return False
    if kind == "mask":
        return a.shape == x.shape[:a.ndim]
    if not a.size:
        return True
    mn, mx = _min_max(a)
    return -x.shape[0] <= mn and mx < x.shape[0]


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
    _fp_quiet()  # a number cast to the destination's dtype may overflow to inf: silent, as in torch
    if isinstance(value, Tensor):
        pass
    elif isinstance(value, _NUMBER):
        if not self._dtype.is_floating_point:        # (a float destination takes an overflow as inf, as torch)
            check_scalar_fits(value, self._dtype)
    else:
        t = type(value)
        name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
        raise TypeError(f"can't assign a {name} to a {_type_name(self)}")
    if key is False:
        return                                        # torch writes nothing (and checks no shape)
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
    # torch copies into the view of a True key, and masked_fill_s a lone mask with a one-element value:
    # both cast the value; other advanced writes need matching dtypes
    check = isinstance(value, Tensor) and key is not True and not (
        value._data.size == 1 and isinstance(key, Tensor) and key._dtype is _dt.bool)
    _index_put_impl_(target, args, pos, res, value, False, "index_put_", check_dtype=check)


def _set_basic_nograd(self: Tensor, key, value) -> None:
    """``x[key] = value`` without autograd: write straight into the buffer (no temporaries)."""
    _writable(self, "copy_")
    arr = self._data
    if type(arr) is not np.ndarray:                  # a device tensor: copy_ into its view, on the device
        view = getitem_basic(self, key)
        if isinstance(value, Tensor):
            _no_partial_overlap(view, value)
            view.copy_(_strip_leading_ones(value, view._data.ndim))
        else:
            view.fill_(value)
        return
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


_PARTIAL_OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to "
                    "a single memory location. Please clone() the tensor before performing the operation.")


def _no_partial_overlap(dst: Tensor, src) -> None:
    """torch refuses writes whose source partly aliases the destination (the result would be order-dependent)."""
    if not isinstance(src, Tensor):
        return
    a, b = dst._data, src._data
    if type(a) is not np.ndarray:
        if type(b) is type(a) and _device_partial_overlap(a, b):
            raise RuntimeError(_PARTIAL_OVERLAP)
        return
    if not np.may_share_memory(a, b):
        return
    if a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides \
            and a.shape == b.shape:
        return
    if np.shares_memory(a, b):
        raise RuntimeError(_PARTIAL_OVERLAP)


def _device_partial_overlap(a, b) -> bool:
    """torch's rule on device arrays: two dense arrays of one block whose element ranges overlap without
    being the same range (strided ones are not judged, as torch's 'too hard' case)."""
    if a.block is not b.block or not (a.is_contiguous() and b.is_contiguous()) or not a.size or not b.size:
        return False
    (alo, ahi), (blo, bhi) = a._extent(), b._extent()
    isa, isb = a.dtype.itemsize, b.dtype.itemsize
    alo, ahi, blo, bhi = alo * isa, ahi * isa, blo * isb, bhi * isb
    return alo < bhi and blo < ahi and (alo, ahi) != (blo, bhi)


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
            _fp_quiet()
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
    elif not (GRAD[0] and (self._rg or values._rg)) and type(self._data) is np.ndarray:
        # no autograd (on the CPU): write in place instead of copying the whole tensor
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
