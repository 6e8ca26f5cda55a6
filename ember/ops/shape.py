"""Views and layout: view/reshape, permute/transpose, expand, squeeze/unsqueeze, slicing views (and
split/chunk), as_strided and friends, and the in-place view ops. The other shape ops live in
shape_join.py (cat/stack, repeat/tile, atleast_*d, broadcasting, grids) and shape_rearrange.py (flip,
roll, rot90, diagonals); copies and casts (clone, contiguous, detach, to, copy_/fill_) in copies.py.

View outputs are NumPy views of the input's buffer (``apply_view`` shares the version counter).
Backward rules are ember ops: reshape, permute, ``sum_to_size`` for expand, and for slicing views a
``slice_backward`` op that places the gradient into zeros. Views that can overlap (unfold, as_strided)
scatter-add through logical flat indices (``index_put_flat``).
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import GRAD
from .registry import register, apply, apply_view, attach, node_class, rename, dtype_name
from ._reduce_util import numpy_names, dim_from_axis
from ._util import wrap_dim, shape_arg, fmt_shape, int_arg, dims_arg


# ---- view / reshape --------------------------------------------------------------------------------


def _infer_shape(shape, numel, op="view"):
    n = 1
    for s in shape:
        if s < 0:
            break
        n *= s
    else:
        if n == numel:      # (the usual call: sizes given in full)
            return shape if type(shape) is tuple else tuple(shape)
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    if neg:
        rest = 1
        for i, s in enumerate(shape):
            if i != neg[0]:
                rest *= s
        if rest == 0 or numel % rest:
            raise RuntimeError(f"shape '{fmt_shape(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // rest
    n = 1
    for s in shape:
        n *= s
    if n != numel:
        raise RuntimeError(f"shape '{fmt_shape(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _view_kernel(x, shape):
    if x.flags.c_contiguous:    # (a contiguous array reshapes without a copy; the copy=False check costs)
        return x.reshape(shape)
    try:
        return x.reshape(shape, copy=False)
    except ValueError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension "
            "spans across two contiguous subspaces). Use .reshape(...) instead.") from None


def reshape_to(t, shape: tuple):
    """``reshape`` for derivative rules: ``shape`` is a tuple of sizes known to hold ``t``'s elements,
    so nothing is parsed or checked (a view where the layout allows it, else a copy)."""
    d = t._data
    if type(d) is not np.ndarray or not d.flags.c_contiguous:
        try:
            # (NumPy's function also asks device and meta arrays, whose layouts it knows)
            d.reshape(shape, copy=False) if type(d) is np.ndarray else np.reshape(d, shape, copy=False)
        except ValueError:
            return apply(RESHAPE_COPY, (t,), {"shape": shape})
    return apply_view(VIEW, (t,), {"shape": shape})


def _reshape_bw(ctx, g):
    return reshape_to(g, ctx.in_meta[0][0])


VIEW = register("view", _view_kernel, _reshape_bw, prim="reshape")
def _reshape_copy_kernel(x, shape):
    # one reshape (a copy where the layout needs one; a view is copied so the result owns its data)
    r = np.reshape(x, shape)
    return r.copy() if np.may_share_memory(r, x) else r


RESHAPE_COPY = register("reshape_copy", _reshape_copy_kernel, _reshape_bw)
RESHAPE_COPY.node_name = "UnsafeViewBackward0"     # torch's reshape that must copy: clone + _unsafe_view
_VIEW_NODE = node_class("ViewBackward0")


def view(self, *shape, size=None, dtype=None):
    """A view with a new shape (or ``view(dtype)``: reinterpret the bits)."""
    if not shape:                           # torch's keyword forms: view(size=...), view(dtype=...)
        shape = (dtype,) if dtype is not None else (size,) if size is not None else ()
    if len(shape) == 1 and isinstance(shape[0], _dt.dtype):
        return _view_dtype(self, shape[0])
    shape = _infer_shape(shape_arg(shape), self.numel())  # (numel: symbolic while tracing)
    return apply_view(VIEW, (self,), {"shape": shape})


def _view_dtype(self, dt):
    a, b = self._dtype.itemsize, dt.itemsize
    if a != b:
        if self._data.ndim == 0:
            raise RuntimeError("self.dim() cannot be 0 to view a tensor as a dtype with a different element size")
        what = f"to view {dtype_name(self._dtype)} as {dtype_name(dt)} (different element sizes)"
        if self._data.shape[-1] != 1 and self._data.strides[-1] != a:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {self._data.strides[-1] // a}")
        if b > a and self._data.shape[-1] % (b // a):
            raise RuntimeError(f"self.size(-1) must be divisible by {b // a} {what}, but got {self._data.shape[-1]}")
        if b > a and self.storage_offset() % (b // a):
            raise RuntimeError(f"self.storage_offset() must be divisible by {b // a} {what}, but got "
                               f"{self.storage_offset()}")
    from .registry import view_of
    try:
        arr = self._data.view(dt.np)
    except ValueError as e:
        raise RuntimeError(f"view(): cannot view {dtype_name(self._dtype)} as {dtype_name(dt)} for a tensor of "
                           f"shape {fmt_shape(self._data.shape)}: {e}") from None
    return view_of(self, arr, dt)


def reshape(input, *sizes, shape=None):
    """Like view when the layout allows it, else a copy."""
    shape = _infer_shape(shape_arg(sizes if shape is None else (shape,)), input.numel())
    return reshape_to(input, shape)


def view_as(self, other):
    return view(self, other._data.shape)


def reshape_as(self, other):
    return reshape(self, other._data.shape)


attach("view", view, function=False)
attach("reshape", reshape)
attach("view_as", view_as)
attach("reshape_as", reshape_as, function=False)


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    nd = input._data.ndim
    if nd == 0:
        return reshape(input, (1,))
    s = wrap_dim(start_dim, nd)
    e = wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    shp = input._data.shape
    n = 1
    for d in shp[s:e + 1]:
        n *= d
    return reshape(input, shp[:s] + (n,) + shp[e + 1:])


def unflatten(input, dim=None, sizes=None, *, axis=None):
    if axis is not None or dim is None or sizes is None:
        dim = dim_from_axis("unflatten", dim, axis, sizes=sizes)
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    sizes = tuple(sizes)
    shp = input._data.shape
    if -1 in sizes:
        known = 1
        for x in sizes:
            if x != -1:
                known *= x
        sizes = tuple(shp[d] // known if x == -1 else x for x in sizes)
    n = 1
    for x in sizes:
        n *= x
    if n != shp[d]:
        raise RuntimeError(f"unflatten: Provided sizes {fmt_shape(sizes)} don't multiply up to the size of dim {dim} ({shp[d]}) in the input tensor")
    return view(input, shp[:d] + sizes + shp[d + 1:]) if _can_view(input, shp[:d] + sizes + shp[d + 1:]) else reshape(input, shp[:d] + sizes + shp[d + 1:])


def _can_view(t, shape):
    try:
        np.reshape(t._data, shape, copy=False)
        return True
    except ValueError:
        return False


def ravel(input):
    # torch's ravel is contiguous() then view: a copy shows as a view, not as reshape's _unsafe_view
    return rename(reshape(input, (-1,)), _VIEW_NODE)


attach("flatten", flatten)
attach("unflatten", unflatten)
attach("ravel", ravel)

# ---- permute / transpose --------------------------------------------------------------------------


def _permute_bw(ctx, g):
    dims = ctx.attrs["axes"]
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return apply_view(PERMUTE, (g,), {"axes": tuple(inv)})


PERMUTE = register("permute", lambda x, axes: np.transpose(x, axes), _permute_bw, prim="permute")
# transpose and t() run permute; torch names their nodes after themselves
_TRANSPOSE, _T = node_class("TransposeBackward0"), node_class("TBackward0")


def permute(input, *order, dims=None):
    nd = input._data.ndim
    dims = shape_arg(order) if order else shape_arg((dims,)) if dims is not None else ()
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match "
                           f"the length of the desired ordering of dimensions i.e. input.dim() = {nd} is not "
                           f"equal to len(dims) = {len(dims)}")
    axes = tuple(wrap_dim(d, nd) for d in dims)
    if len(set(axes)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return apply_view(PERMUTE, (input,), {"axes": axes})


def transpose(input, dim0: int, dim1: int):
    nd = input._data.ndim
    a, b = wrap_dim(dim0, nd), wrap_dim(dim1, nd)
    if nd == 0:
        return input
    axes = list(range(nd))
    axes[a], axes[b] = axes[b], axes[a]
    return rename(apply_view(PERMUTE, (input,), {"axes": tuple(axes)}), _TRANSPOSE)


def t(input):
    nd = input._data.ndim
    if nd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {nd}D")
    return rename(apply_view(PERMUTE, (input,), {"axes": (1, 0)}), _T) if nd == 2 else input


def movedim(input, source, destination):
    nd = input._data.ndim
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain the same number of dims as destination ({dst} dims)")
    src = [wrap_dim(s, nd) for s in src]
    dst = [wrap_dim(d, nd) for d in dst]
    order = [d for d in range(nd) if d not in src]
    result = [None] * nd
    for s, d in zip(src, dst):
        result[d] = s
    it = iter(order)
    axes = tuple(r if r is not None else next(it) for r in result)
    return apply_view(PERMUTE, (input,), {"axes": axes})


attach("permute", permute)
attach("transpose", transpose)
def swapaxes(input, axis0: int, axis1: int):
    """``transpose`` under NumPy's argument names (torch's ``swapaxes`` takes ``axis0``/``axis1``)."""
    return transpose(input, axis0, axis1)


def swapdims(input, dim0: int, dim1: int):
    return transpose(input, dim0, dim1)


attach("swapaxes", swapaxes)
attach("swapdims", swapdims)
attach("t", t)
attach("movedim", movedim)
attach("moveaxis", movedim)
Tensor.T = property(lambda self: permute(self, tuple(reversed(range(self._data.ndim)))))


def _mT(self):
    """``transpose(self, -2, -1)`` (hot in matmul derivatives: the axes are made here directly)."""
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {nd}-D tensor.")
    axes = (*range(nd - 2), nd - 1, nd - 2)
    return rename(apply_view(PERMUTE, (self,), {"axes": axes}), _TRANSPOSE)


Tensor.mT = property(_mT)
Tensor.H = property(lambda self: Tensor.T.fget(self))
Tensor.mH = property(_mT)


def adjoint(input):
    return _mT(input)


attach("adjoint", adjoint)

# ---- expand / squeeze / unsqueeze ------------------------------------------------------------------


def _expand_bw(ctx, g):
    from .reduce import sum_to_size
    return sum_to_size(g, ctx.in_shape(0))


def _expand_kernel(x, shape):
    """``np.broadcast_to`` (read-only, as its views' elements share memory) built directly: NumPy's
    function runs an nditer and costs several microseconds on a small tensor; the array constructor on a
    contiguous input (stride 0 on the stretched and the new leading dims) is a fraction of that."""
    if not x.flags.c_contiguous or not x.size:
        return np.broadcast_to(x, shape)
    xs = x.shape
    pad = len(shape) - len(xs)
    if shape[pad:] == xs:           # (new leading dims only: x's own strides after them)
        st = (0,) * pad + x.strides
    else:
        st = (0,) * pad + tuple([s if h == w else 0 for h, w, s in zip(xs, shape[pad:], x.strides)])
    r = np.ndarray(shape, x.dtype, x, 0, st)
    r.setflags(write=False)         # (cheaper than going through r.flags)
    return r


EXPAND = register("expand", _expand_kernel, _expand_bw, prim="expand")
_EXPAND = node_class("ExpandBackward0")
# squeeze / unsqueeze are views; torch numbers squeeze's overloads: (), (int), (dims)
_SQUEEZE = (node_class("SqueezeBackward0"), node_class("SqueezeBackward1"), node_class("SqueezeBackward2"))
_UNSQUEEZE = node_class("UnsqueezeBackward0")


def expand(self, *sizes, size=None):
    sizes = shape_arg(sizes if size is None else (size,))
    shp = self._data.shape
    nd = len(sizes)
    if nd < len(shp):
        raise RuntimeError(f"expand({self._type_str()}{{{fmt_shape(shp)}}}, size={fmt_shape(sizes)}): the number of sizes provided ({nd}) must be greater or equal to the number of dimensions in the tensor ({len(shp)})")
    pad = (1,) * (nd - len(shp)) + shp
    out = [0] * nd
    for i in range(nd - 1, -1, -1):         # (torch checks from the last dim)
        want, have = sizes[i], pad[i]
        if want == -1:
            if i < nd - len(shp):
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension {i}")
            want = have
        elif have != 1 and want != have:
            raise RuntimeError(f"The expanded size of the tensor ({want}) must match the existing size ({have}) at non-singleton dimension {i}.  Target sizes: {fmt_shape(sizes)}.  Tensor sizes: {fmt_shape(shp)}")
        out[i] = want
    out = tuple(out)
    if out == shp:
        return rename(apply_view(VIEW, (self,), {"shape": shp}), _EXPAND)
    return apply_view(EXPAND, (self,), {"shape": out})


def expand_as(self, other):
    return expand(self, other._data.shape)


def broadcast_to(input, *shape):
    return expand(input, shape_arg(shape))


Tensor._type_str = lambda self: f"ember.{self._dtype.name}"
attach("expand", expand, function=False)
attach("expand_as", expand_as, function=False)
attach("broadcast_to", broadcast_to)


def squeeze(input, dim=None, *, axis=None):
    if axis is not None:
        dim, _ = numpy_names("squeeze", dim, False, axis, None)
    shp = input._data.shape
    nd = len(shp)
    if dim is None:
        new = tuple(s for s in shp if s != 1)
        cls = _SQUEEZE[0]
    else:
        # (a 0-d tensor accepts dims -1 and 0, as torch; a repeated dim is an error)
        ds = {wrap_dim(dim, nd)} if isinstance(dim, int) else set(dims_arg(dim, nd))
        new = tuple(s for i, s in enumerate(shp) if not (i in ds and s == 1)) if nd else shp
        cls = _SQUEEZE[1 if isinstance(dim, int) else 2]
    return rename(apply_view(VIEW, (input,), {"shape": new}), cls)


def unsqueeze(input, dim=None, *, axis=None):
    if axis is not None or dim is None:
        dim, _ = numpy_names("unsqueeze", dim, False, axis, None, required=True)
    shp = input._data.shape
    d = wrap_dim(dim, len(shp) + 1)
    return rename(apply_view(VIEW, (input,), {"shape": shp[:d] + (1,) + shp[d:]}), _UNSQUEEZE)


attach("squeeze", squeeze)
attach("unsqueeze", unsqueeze)

# ---- slicing views (basic indexing keys) -----------------------------------------------------------


def _slice_bw_kernel(g, in_shape, key, dtype):
    out = np.zeros(in_shape, dtype=g.dtype)
    out[key] = g
    return out


def _slice_bw_bw(ctx, gg):
    return (gg[ctx.attrs["key"]] if not isinstance(ctx.attrs["key"], tuple) else getitem_basic(gg, ctx.attrs["key"]),)


SLICE_BACKWARD = register("slice_backward", _slice_bw_kernel, _slice_bw_bw)


def _getitem_bw(ctx, g):
    return apply(SLICE_BACKWARD, (g,), {"in_shape": ctx.in_shape(0), "key": ctx.attrs["key"], "dtype": None})


GETITEM = register("getitem_basic", lambda x, key: x[key], _getitem_bw, prim="slice")


def _getitem_node(op, args, attrs, nout):
    """The node for ``x[key]`` (``GETITEM.node_cls``: a hot op, so the common one-entry keys, to which
    getitem_basic appends ``...``, are named here in one call)."""
    key = attrs["key"]
    cls = None
    if type(key) is tuple and len(key) == 2 and key[1] is Ellipsis:
        cls = _ONE_STEP.get(type(key[0]))
    if cls is None:
        cls = node_class(_getitem_node_name(args[0]._data.shape, key))
    return cls(op, args, attrs, nout)


def _getitem_node_name(shape, key):
    """torch's node for ``x[key]`` with a basic key: torch applies the key one step per entry, so the
    node is the last step's: select (int), slice (a slice not spanning its whole dim), unsqueeze
    (None). With only no-op steps it is an alias, except a lone ``x[:]``, which torch slices."""
    if type(key) is not tuple:
        key = (key,)
    used = 0
    for k in key:
        if k is not None and k is not Ellipsis:
            used += 1
    d = 0
    last = None
    for k in key:
        if k is Ellipsis:
            d += len(shape) - used
        elif k is None:
            last = "UnsqueezeBackward0"
        elif type(k) is slice:
            if not (k.start in (None, 0) and k.step in (None, 1) and (k.stop is None or k.stop >= shape[d])):
                last = "SliceBackward0"
            d += 1
        else:
            last = "SelectBackward0"
            d += 1
    if last is None:
        return "SliceBackward0" if len(key) <= 2 and type(key[0]) is slice else "AliasBackward0"
    return last


_ONE_STEP = {int: node_class("SelectBackward0"), slice: node_class("SliceBackward0"),
             type(None): node_class("UnsqueezeBackward0")}
GETITEM.node_cls = _getitem_node
# functions built on slicing views, named as torch names them
_SLICE, _SPLIT, _SPLIT_SIZES, _UNBIND = (node_class(n) for n in (
    "SliceBackward0", "SplitBackward0", "SplitWithSizesBackward0", "UnbindBackward0"))


def getitem_basic(x, key):
    """A view selected by a basic key (ints, slices with positive steps, None, Ellipsis)."""
    if type(key) is tuple and Ellipsis not in key:   # (a basic key: ints, slices, None compare cheaply)
        key = key + (Ellipsis,)  # NumPy returns a scalar copy, not a 0-d view, when ints select every dim
    return apply_view(GETITEM, (x,), {"key": key})


def _dim_of_non_scalar(input, dim, op: str, error) -> tuple:
    """``(dim wrapped, its size)`` for narrow/select, which torch refuses on 0-d tensors (with ``error``)."""
    nd = input._data.ndim
    if nd == 0:
        raise error(f"{op}() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, nd)
    return d, input._data.shape[d]


def narrow(input, dim=None, start=None, length=None, *, axis=None):
    if axis is not None or dim is None or start is None or length is None:
        dim = dim_from_axis("narrow", dim, axis, start=start, length=length)
    d, size = _dim_of_non_scalar(input, dim, "narrow", RuntimeError)
    size = input.shape[d]           # (symbolic while ember.compile traces)
    start = int_arg(start, "narrow", "start")
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return rename(getitem_basic(input, (slice(None),) * d + (slice(start, start + length),)), _SLICE)


def select(input, dim=None, index=None, *, axis=None):
    if axis is not None or dim is None or index is None:
        dim = dim_from_axis("select", dim, axis, index=index)
    d, size = _dim_of_non_scalar(input, dim, "select", IndexError)
    index = int_arg(index, "select", "index")
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input._data.shape)} at dimension {d}")
    return getitem_basic(input, (slice(None),) * d + (index if index >= 0 else index + size,))


attach("narrow", narrow)
attach("select", select)


# ---- general strided views via logical flat indices -------------------------------------------------


def _logical_index(shape):
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)


def _take_flat_kernel(x, idx):
    return np.ascontiguousarray(x).reshape(-1)[idx]


def _take_flat_bw(ctx, g):
    return apply(PUT_FLAT, (g,), {"idx": ctx.attrs["idx"], "shape": ctx.in_shape(0)})


def _put_flat_kernel(g, idx, shape):
    out = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=g.dtype)
    np.add.at(out, idx.reshape(-1), g.reshape(-1))
    return out.reshape(shape)


def _put_flat_bw(ctx, gg):
    return apply(TAKE_FLAT, (gg,), {"idx": ctx.attrs["idx"]})


TAKE_FLAT = register("take_flat", _take_flat_kernel, _take_flat_bw, prim="gather")
PUT_FLAT = register("put_flat_add", _put_flat_kernel, _put_flat_bw, prim="scatter_add")

# a strided view: the data is a NumPy view, the derivative goes through logical indices
AS_STRIDED = register("as_strided", lambda x, geom: x.reshape(-1)[geom],
                      lambda ctx, g: apply(PUT_FLAT, (g,), {"idx": ctx.attrs["geom"], "shape": ctx.in_shape(0)}))


def _copy_slices_kernel(base, src, geom):
    out = np.array(base, copy=True, order="C")
    out.reshape(-1)[geom] = src
    return out


def _fill_flat_kernel(g, idx):
    out = np.array(g, copy=True, order="C")
    out.reshape(-1)[idx] = 0
    return out


FILL_FLAT = register("fill_flat_zero", _fill_flat_kernel, lambda ctx, gg: apply(FILL_FLAT, (gg,), {"idx": ctx.attrs["idx"]}))


def _copy_slices_bw(ctx, g):
    geom = ctx.attrs["geom"]
    return (apply(FILL_FLAT, (g,), {"idx": geom}), apply(TAKE_FLAT, (g,), {"idx": geom}))


COPY_SLICES = register("copy_slices", _copy_slices_kernel, _copy_slices_bw, prim="scatter")
COPY_SLICES.node_name = "torch::autograd::CopySlices"   # torch's name for this node


def _data_ptr(a) -> int:
    """The address of ``a``'s first element (a device array's: its byte offset in its block)."""
    return a.__array_interface__["data"][0] if type(a) is np.ndarray else a.offset


def _byte_strides(a) -> tuple:
    return a.strides if type(a) is np.ndarray else tuple(s * a.dtype.itemsize for s in a.strides)


def _byte_offsets(a: np.ndarray, ptr0: int) -> np.ndarray:
    """Byte offset (from ``ptr0``) of every element of ``a``, in logical C order."""
    offs = np.full(a.shape, _data_ptr(a) - ptr0, dtype=np.int64)
    nd = a.ndim
    for k, (n, st) in enumerate(zip(a.shape, _byte_strides(a))):
        offs += (np.arange(n, dtype=np.int64) * st).reshape([n if i == k else 1 for i in range(nd)])
    return offs


def view_geometry(base: Tensor, v: Tensor) -> np.ndarray:
    """Logical flat indices (into ``base``'s C order) of each element of ``v``, a view of its memory."""
    b = base._data
    ptr0 = _data_ptr(b)
    boffs = _byte_offsets(b, ptr0).reshape(-1)
    voffs = _byte_offsets(v._data, ptr0).reshape(-1)
    order = np.argsort(boffs, kind="stable")
    sorted_offs = boffs[order]
    pos = np.searchsorted(sorted_offs, voffs)
    pos = np.minimum(pos, len(sorted_offs) - 1) if len(sorted_offs) else pos
    if len(voffs) and (len(sorted_offs) == 0 or not np.array_equal(sorted_offs[pos], voffs)):
        raise RuntimeError("as_strided/in-place view: the view addresses memory outside its input; "
                           "ember's autograd supports views that stay within their input")
    return order[pos].reshape(v._data.shape)


def as_strided(input, size, stride, storage_offset=None):
    """A view with explicit sizes and strides (in elements) over the input's storage."""
    size = shape_arg((size,), "as_strided")
    stride = shape_arg((stride,), "as_strided", "stride")
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape")
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {fmt_shape(size)}")
    if builtins.min(stride, default=0) < 0:
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: "
                           f"{fmt_shape(stride)}")
    if storage_offset is not None and storage_offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {storage_offset}")
    base = input._base if input._base is not None else input
    bd = input._storage_root()._data
    if not bd.flags.c_contiguous:
        raise RuntimeError("as_strided: ember supports it only on tensors whose storage is contiguous")
    if storage_offset is None:
        storage_offset = input.storage_offset()
    isz = bd.itemsize
    need = storage_offset + builtins.sum((s - 1) * st for s, st in zip(size, stride) if s > 0) + 1
    if builtins.min(size, default=1) > 0 and need > bd.size:
        raise RuntimeError(f"setStorage: sizes {fmt_shape(size)}, strides {fmt_shape(stride)}, storage offset "
                           f"{storage_offset}, and itemsize {isz} requiring a storage size of {need * isz} are "
                           f"out of bounds for storage of size {bd.size * isz}")
    flat = bd.reshape(-1)
    arr = np.lib.stride_tricks.as_strided(flat[storage_offset:], shape=size, strides=tuple(s * isz for s in stride))
    out = wrap(arr, input._dtype)
    out._vc = base._get_vc()
    out._base = base
    if GRAD[0] and input._rg:
        from ..autograd.node import Node
        Node.record(AS_STRIDED, (input,), {"geom": view_geometry(input, out)}, (out,))
    return out


attach("as_strided", as_strided)


def _unfold_kernel(x, dimension, size, step):
    n = (x.shape[dimension] - size) // step + 1
    shp = x.shape[:dimension] + (n,) + x.shape[dimension + 1:] + (size,)
    st = x.strides[:dimension] + (x.strides[dimension] * step,) + x.strides[dimension + 1:] + (x.strides[dimension],)
    return np.lib.stride_tricks.as_strided(x, shape=shp, strides=st, writeable=x.flags.writeable)


def _unfold_bw(ctx, g):
    idx = _unfold_kernel(_logical_index(ctx.in_shape(0)), **ctx.attrs)
    return apply(PUT_FLAT, (g,), {"idx": np.array(idx), "shape": ctx.in_shape(0)})


UNFOLD = register("unfold", _unfold_kernel, _unfold_bw)


def unfold(self, dimension: int, size: int, step: int):
    """Sliding windows of ``size`` along ``dimension`` (a view), as Tensor.unfold."""
    nd = self._data.ndim
    d = wrap_dim(dimension, nd) if nd else 0
    L = self._data.shape[d] if nd else 1
    if size > L:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {L} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if nd == 0:
        return apply_view(VIEW, (self,), {"shape": (1,)})
    return apply_view(UNFOLD, (self,), {"dimension": d, "size": size, "step": step})


attach("unfold", unfold, function=False)


def _diag_kernel(x, offset, dim1, dim2):
    d = np.diagonal(x, offset, dim1, dim2)
    if x.flags.writeable:       # (NumPy's diagonal view is read-only; torch's is written through: .fill_)
        d.flags.writeable = True
    return d


def _diag_bw(ctx, g):
    idx = np.diagonal(_logical_index(ctx.in_shape(0)), **{"offset": ctx.attrs["offset"], "axis1": ctx.attrs["dim1"], "axis2": ctx.attrs["dim2"]})
    return apply(PUT_FLAT, (g,), {"idx": np.array(idx), "shape": ctx.in_shape(0)})


DIAGONAL = register("diagonal", _diag_kernel, _diag_bw)


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    nd = input._data.ndim
    a, b = wrap_dim(dim1, nd), wrap_dim(dim2, nd)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply_view(DIAGONAL, (input,), {"offset": offset, "dim1": a, "dim2": b})


attach("diagonal", diagonal)


# ---- in-place view ops (metadata changes: the buffer is shared, only shape/strides move) ----------------


def _inplace_view(self, out_fn, name: str):
    """Give ``self`` the geometry of the view ``out_fn(self)``; with autograd, ``self`` takes the view's
    history (as torch's in-place view ops do), and a leaf that requires grad is refused."""
    from .inplace import check_inplace_allowed
    if not isinstance(self, Tensor):
        raise TypeError(f"{name}(): expected a Tensor, got {type(self).__name__}")
    check_inplace_allowed(self, name)
    out = out_fn(self)
    self._data = out._data
    if out._rg and out.grad_fn is not None:
        self.grad_fn = out.grad_fn
        self._output_nr = out._output_nr
    return self


# torch numbers the in-place view ops' nodes after the out-of-place overloads
_INPLACE_VIEW_NODES = {n: node_class(n) for n in (
    "UnsqueezeBackward1", "SqueezeBackward3", "SqueezeBackward4", "SqueezeBackward5", "TransposeBackward1",
    "TBackward1")}


def unsqueeze_(self, dim: int):
    """In-place ``unsqueeze``."""
    return _inplace_view(self, lambda x: rename(unsqueeze(x, dim), _INPLACE_VIEW_NODES["UnsqueezeBackward1"]),
                         "unsqueeze_")


def squeeze_(self, dim=None):
    """In-place ``squeeze`` (all size-1 dims, or those in ``dim``)."""
    node = _INPLACE_VIEW_NODES["SqueezeBackward" + ("3" if dim is None else "4" if isinstance(dim, int) else "5")]
    return _inplace_view(self, lambda x: rename(squeeze(x) if dim is None else squeeze(x, dim), node), "squeeze_")


def transpose_(self, dim0: int, dim1: int):
    """In-place ``transpose``."""
    return _inplace_view(self, lambda x: rename(transpose(x, dim0, dim1), _INPLACE_VIEW_NODES["TransposeBackward1"]),
                         "transpose_")


def swapaxes_(self, axis0: int, axis1: int):
    return transpose_(self, axis0, axis1)


def t_(self):
    """In-place ``t``."""
    if self._data.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self._data.ndim}D")
    return _inplace_view(self, lambda x: rename(t(x), _INPLACE_VIEW_NODES["TBackward1"]) if x._data.ndim == 2 else x,
                         "t_")


def as_strided_(self, size, stride, storage_offset=None):
    """In-place ``as_strided``."""
    return _inplace_view(self, lambda x: as_strided(x, size, stride, storage_offset), "as_strided_")


def resize_(self, *sizes, memory_format=None):
    """Legacy ``resize_``: reinterpret the tensor as ``sizes``, keeping the leading elements in row-major
    order; a larger size grows the buffer with uninitialised values. Not allowed on tensors that
    require grad (as in torch)."""
    if self._rg:
        raise RuntimeError("cannot resize variables that require grad")
    shape = shape_arg(sizes)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    n = 1
    for s in shape:
        n *= s
    flat = self._data.reshape(-1) if self._data.flags.c_contiguous else np.ascontiguousarray(self._data).reshape(-1)
    if n <= flat.size:
        new = flat[:n].reshape(shape)
    else:
        new = np.empty(n, dtype=self._data.dtype)
        new[:flat.size] = flat
        new = new.reshape(shape)
    self._data = new
    self._bump()
    return self


def resize_as_(self, other, memory_format=None):
    """``resize_`` to ``other``'s shape."""
    return resize_(self, tuple(other._data.shape))


for _n, _f in [("unsqueeze_", unsqueeze_), ("squeeze_", squeeze_), ("transpose_", transpose_), ("t_", t_),
               ("swapaxes_", swapaxes_), ("swapdims_", transpose_), ("as_strided_", as_strided_),
               ("resize_", resize_), ("resize_as_", resize_as_)]:
    attach(_n, _f, function=False)
