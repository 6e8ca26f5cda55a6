"""Copies and casts: clone, contiguous, detach/detach_, to/type/type_as and the dtype shorthands
(float, double, long, ...), and the whole-tensor writes copy_ / fill_ / zero_ (``overwrite`` is the
in-place write other families use)."""
from __future__ import annotations

import builtins

import warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import register, apply, attach
from ._util import fmt_shape, check_scalar_fits, wrap_unsigned
from ._shape_util import _zeros


# ---- copies and casts --------------------------------------------------------------------------------

CLONE = register("clone", lambda x: np.array(x, copy=True, order="K"), lambda ctx, g: (g,), prim="copy")


def clone(input, *, memory_format=None):
    if memory_format is not None:       # (None and preserve_format: the input's layout, as order="K" keeps it)
        from .._memory_format import to_format
        return to_format(input, memory_format, "clone", copy=True)
    return apply(CLONE, (input,))


def contiguous(self, memory_format=None):
    if memory_format is not None:
        from .._memory_format import to_format, contiguous_format
        if memory_format is not contiguous_format:
            return to_format(self, memory_format, "contiguous")
    d = self._data
    if d.flags.c_contiguous if type(d) is np.ndarray else d.is_contiguous():     # (or a device array)
        return self
    return apply(CONTIG, (self,))


CONTIG = register("contiguous", lambda x: np.ascontiguousarray(x), lambda ctx, g: (g,), prim="copy")
CONTIG.node_name = "CloneBackward0"     # torch's contiguous() is a clone


def detach(self):
    out = wrap(self._data, self._dtype)
    out._vc = self._get_vc()
    out._storage_src = self     # shares memory and version, but is not an autograd view
    return out


def detach_(self):
    if self._base is not None:
        raise RuntimeError("Can't detach views in-place. Use detach() instead. If you are using "
                           "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
                           "as True, gradients are views of DDP buckets, and hence detach_() cannot be called "
                           "on these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
                           "function in torch/optim/optimizer.py as the solution.")
    self.grad_fn = None
    self._rg = False
    return self


attach("clone", clone)
attach("contiguous", contiguous, function=False)
attach("detach", detach)
attach("detach_", detach_, function=False)


def _cast_bw(ctx, g):
    dt = ctx.in_dtype(0)
    # real -> complex: the real input gets the real part of the gradient (no warning, as torch)
    return g.to(dt) if not g._dtype.is_complex or dt.is_complex else g.real.to(dt)


CAST = register("to_dtype", lambda x, dt: x.astype(dt), _cast_bw, prim="cast")
CAST.node_name = "ToCopyBackward0"      # torch's to(dtype) runs _to_copy


def _to_dtype(self, dt, copy=False):
    if dt is self._dtype and not copy:
        return self
    if self._dtype.is_complex and not dt.is_complex:
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3)
        self = self.real
    if self._rg and not dt.grad_ok:
        with_grad = apply(CAST, (self.detach(),), {"dt": dt.np})
        return with_grad
    return apply(CAST, (self,), {"dt": dt.np})


def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``."""
    from ..tensor import _check_device, device as _device
    for a in args:
        if isinstance(a, _dt.dtype):
            dtype = a
        elif isinstance(a, (str, _device)):
            device = a
        elif isinstance(a, Tensor):
            dtype, device = a._dtype, a.device      # to(other): other's dtype and device
        elif a is None:
            pass
        else:
            raise TypeError(f"to() received an invalid combination of arguments: {type(a).__name__}")
    if device is not None:
        device = _check_device(device)
        if device != self.device:
            from ..devices.dispatch import to_device
            moved = to_device(self, device, non_blocking)
            moved = moved if dtype is None else _to_dtype(moved, dtype, False)
            if memory_format is not None:
                from .._memory_format import to_format
                moved = to_format(moved, memory_format, "to")
            return moved
    if memory_format is not None:
        from .._memory_format import to_format
        r = self if dtype is None else _to_dtype(self, dtype, copy)
        return to_format(r, memory_format, "to", copy=copy and r is self)
    if dtype is None:
        return clone(self) if copy else self
    return _to_dtype(self, dtype, copy)


def type_(self, dtype=None, non_blocking=False, **kw):
    if dtype is None:
        from .registry import dtype_name
        return f"ember.{dtype_name(self._dtype)}Tensor"
    if isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), _dt.dtype):
        dtype = dtype.dtype          # a legacy type: ``x.type(ember.LongTensor)``
    if isinstance(dtype, str):
        names = {"torch.FloatTensor": _dt.float32, "torch.DoubleTensor": _dt.float64, "torch.LongTensor": _dt.int64,
                 "torch.IntTensor": _dt.int32, "torch.BoolTensor": _dt.bool, "torch.HalfTensor": _dt.float16,
                 "torch.ByteTensor": _dt.uint8}
        name, dtype = dtype, names.get(dtype.replace("ember.", "torch."))
        if dtype is None:
            raise ValueError(f"invalid type: {name!r}")
    return _to_dtype(self, dtype)


def type_as(self, other):
    """``self`` cast to ``other``'s dtype (``self`` itself when the dtypes already match)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"type_as(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    return _to_dtype(self, other._dtype)


attach("to", to, function=False)
attach("type", type_, function=False)
attach("type_as", type_as, function=False)
for _name, _d in [("float", _dt.float32), ("double", _dt.float64), ("half", _dt.float16),
                  ("bfloat16", _dt.bfloat16), ("long", _dt.int64), ("int", _dt.int32), ("short", _dt.int16),
                  ("char", _dt.int8), ("byte", _dt.uint8), ("bool", _dt.bool), ("cfloat", _dt.complex64),
                  ("cdouble", _dt.complex128)]:
    def _mk(d):
        return lambda self, memory_format=None: _to_dtype(self, d)
    attach(_name, _mk(_d), function=False)


# ---- whole-tensor writes: fill_ / zero_ / copy_ ------------------------------------------------------


def _copy_kernel(dst, src, dt):
    # a fresh array in the destination's shape and dtype (NumPy broadcasting, unsafe cast as torch)
    return np.array(np.broadcast_to(src, dst.shape), dtype=dt, copy=True)


def _copy_bw(ctx, g):
    # the old values are overwritten: no gradient for them; src gets the (broadcast-reduced) gradient
    gd = _zeros(ctx.in_shape(0), g._dtype) if ctx.edges[0] is not None else None
    return gd, (g if ctx.edges[1] is not None else None)


COPY = register("copy_", _copy_kernel, _copy_bw)
COPY.node_name = "torch::autograd::CopyBackwards"


def _fill_kernel(dst, value, dt):
    return np.full(dst.shape, value, dtype=dt)


def _fill_bw(ctx, g):
    gd = _zeros(ctx.in_shape(0), g._dtype) if ctx.edges[0] is not None else None
    return gd, (g.sum() if ctx.edges[1] is not None else None)


FILL = register("fill_", _fill_kernel, _fill_bw)
# torch's fill_ overloads: a Number value (2) or a 0-d Tensor value (3)
FILL.node_name = lambda args, attrs: "FillBackward3" if isinstance(args[1], Tensor) else "FillBackward2"
ZERO = register("zero_", lambda dst: np.zeros(dst.shape, dtype=dst.dtype),
                lambda ctx, g: _zeros(ctx.in_shape(0), g._dtype))


def overwrite(self: Tensor, src, name: str = "copy_") -> Tensor:
    """Write ``src`` (a Tensor, broadcastable to ``self``) into ``self`` in place, with autograd:
    the old values of ``self`` get no gradient, ``src`` gets the gradient of the written region."""
    from .inplace import write_result
    if _plain_write(self, src):
        np.copyto(self._data, src._data, casting="unsafe")      # broadcasts; handles overlapping memory
        self._bump()
        return self
    return write_result(self, lambda s: apply(COPY, (s, src), {"dt": s._dtype.np}), name)


def _plain_write(self: Tensor, src=None) -> bool:
    """True when a write needs no autograd record and no hook sees it: then copy the bytes directly."""
    from ..autograd.grad_mode import GRAD
    from .registry import HOOKS, observed
    from .inplace import _writable
    if (HOOKS and observed()) or (GRAD[0] and (self._rg or (isinstance(src, Tensor) and src._rg))):
        return False
    _writable(self, "copy_")
    return True


def copy_(self, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` into ``self`` (broadcasting ``src``, casting to ``self.dtype``)."""
    if not isinstance(src, Tensor):
        from .registry import to_tensor
        src = to_tensor(src)
    shp, sshp = self._data.shape, src._data.shape
    if sshp != shp:
        try:
            bshape = np.broadcast_shapes(shp, sshp)
        except ValueError:
            raise RuntimeError(_size_mismatch(shp, sshp)) from None
        if bshape != shp:
            raise RuntimeError(f"output with shape {fmt_shape(shp)} doesn't match the broadcast shape "
                               f"{fmt_shape(bshape)}")
    _check_no_overlap(self, "copy_")
    if type(src._data) is not type(self._data) and type(self._data) is np.ndarray and src.device.type == "opencl":
        src = src.to(self.device)          # device -> host first (autograd moves the gradient back)
    return overwrite(self, src, "copy_")


def _size_mismatch(a, b) -> str:
    """torch's message for two shapes that do not broadcast."""
    nd = builtins.max(len(a), len(b))
    a = (1,) * (nd - len(a)) + tuple(a)
    b = (1,) * (nd - len(b)) + tuple(b)
    for i in range(nd):
        if a[i] != b[i] and a[i] != 1 and b[i] != 1:
            return (f"The size of tensor a ({a[i]}) must match the size of tensor b ({b[i]}) at non-singleton "
                    f"dimension {i}")
    return f"shapes {fmt_shape(a)} and {fmt_shape(b)} cannot be broadcast"


def _check_no_overlap(self, name):
    d = self._data
    if d.size == 0:
        return
    flags = getattr(d, "flags", None)          # (none on a device array: its strides are in elements)
    if (flags is not None and not flags.writeable) or any(st == 0 and n > 1 for st, n in zip(d.strides, d.shape)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")


def fill_(self, value) -> Tensor:
    """Set every element to ``value`` (a number or a 0-D tensor, which then receives the gradient)."""
    from .inplace import write_result
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value._data.ndim} dimensions.")
    elif isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        _check_fits(value, self._dtype, "fill_")
        if isinstance(value, (complex, np.complexfloating)) and not self._dtype.is_complex:
            value = value.real          # checked above: no imaginary part
        value = wrap_unsigned(value, self._dtype)
    else:
        raise TypeError(f"fill_() received an invalid combination of arguments - got ({type(value).__name__}), "
                        "but expected one of: (Number value) or (Tensor value)")
    _check_no_overlap(self, "fill_")
    if _plain_write(self, value):
        np.copyto(self._data, value._data if isinstance(value, Tensor) else value, casting="unsafe")
        self._bump()
        return self
    return write_result(self, lambda s: apply(FILL, (s, value), {"dt": s._dtype.np}), "fill_")


def _check_fits(value, dt, name):
    check_scalar_fits(value, dt)


def zero_(self) -> Tensor:
    """Set every element to zero."""
    from .inplace import write_result
    _check_no_overlap(self, "zero_")
    if _plain_write(self):
        self._data[...] = 0
        self._bump()
        return self
    return write_result(self, lambda s: apply(ZERO, (s,)), "zero_")


def fill(input, value) -> Tensor:
    """``torch.fill``: a new tensor shaped like ``input`` filled with ``value``."""
    return fill_(input.clone(), value)


attach("fill_", fill_)
attach("zero_", zero_)
attach("copy_", copy_, function=False)
attach("fill", fill, method=False)
