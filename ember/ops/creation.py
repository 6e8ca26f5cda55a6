"""Creation ops, core set: tensor/as_tensor/from_numpy, zeros/ones/full/empty (+ _like, new_*), arange.

``ember.tensor(data)`` copies; ``as_tensor``/``from_numpy`` share memory with a NumPy array.
Results never require grad unless asked with ``requires_grad=True``.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes as _dt
from .._numpy_quiet import ensure as _fp_quiet
from ..tensor import Tensor, wrap, _check_device, _on_device, CPU, _DEFAULT_DEVICE
from ..memory import _alloc
from .registry import attach, FACTORY
from ._util import shape_arg, check_scalar_fits, check_tensor, dtype_arg, wrap_unsigned


def _finish(arr, dtype, requires_grad, device=None, derived=False):
    dev = _check_device(device)
    t = wrap(arr, dtype)
    if FACTORY[0] is not None and not derived:
        FACTORY[0](arr)        # a constant a compiled replay may rebuild from its traced value
    if dev is not CPU:
        t = _on_device(t, dev)
    if requires_grad:
        if not t._dtype.grad_ok:
            # factories word this differently from requires_grad_ (as torch does)
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad_(True)
    return t


def _device_empty(shape, dt, device, requires_grad, fill=None):
    """An uninitialised tensor (filled with ``fill`` unless None) made on a device at once (no host
    array uploaded), or None where the host path is needed: on the CPU, and while ember.compile
    captures (it records factories' arrays). ``device`` may be ``-1 - index`` (a device tensor's)."""
    if FACTORY[0] is not None:
        return None
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        index = -1 - device             # -1 - index: the device of an existing device tensor (empty_like)
    else:
        dev = _check_device(device)
        if dev is CPU:
            return None
        if dev.type == "meta":
            from ..devices import meta
            return meta.empty(shape, dt, requires_grad)
        index = dev.index or 0
    from ..devices import dispatch, opencl
    dispatch.activate()
    arr = opencl.empty(shape, dt.np, index, op="empty")
    t = wrap(arr if fill is None else opencl.fill_(arr, fill), dt)
    return t.requires_grad_(True) if requires_grad else t


def _infer_dtype(data):
    """torch's dtype inference for nested Python data: bool < int64 < default float < default complex."""
    kind = 0
    leaves = False      # no element at all (``tensor([])``, ``tensor([[], []])``): the default float dtype
    stack = [data]
    while stack:
        x = stack.pop()
        if not isinstance(x, (list, tuple)):
            leaves = True
        if isinstance(x, Tensor):
            d = x._dtype
            kind = builtins.max(kind, d.category)
            continue
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, (bool, np.bool_)):
            pass
        elif isinstance(x, (int, np.integer)):
            kind = builtins.max(kind, 1)
        elif isinstance(x, (float, np.floating)):
            kind = builtins.max(kind, 2)
        elif isinstance(x, (complex, np.complexfloating)):
            kind = 3
        elif isinstance(x, np.ndarray):
            kind = builtins.max(kind, _dt.from_numpy_dtype(x.dtype).category)
        elif isinstance(x, str):
            raise TypeError("new(): invalid data type 'str'")
        else:
            raise RuntimeError(f"Could not infer dtype of {type(x).__name__}")
    if not leaves or kind == 2:
        return _dt.get_default_dtype()
    if kind == 3:
        return _dt.scalar_dtype(1j)
    return _dt.int64 if kind == 1 else _dt.bool


def _to_array(data, dtype):
    if isinstance(data, Tensor):
        return data._data.astype(dtype.np) if dtype is not None else data._data.copy()
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
        data = [_to_array(x, dtype) if isinstance(x, (Tensor, list, tuple)) else x for x in data]
    _fp_quiet()  # 1e40 -> float32 is inf without a warning, as in torch
    try:
        return np.array(data, dtype=dtype.np)
    except (ValueError, OverflowError) as e:
        if dtype.category == 1:
            _check_int_leaves(data, dtype)
            if isinstance(e, OverflowError):      # negative ints wrapping into uint8, as torch lets them
                return np.array(data, dtype=np.int64).astype(dtype.np)
        msg = _ragged_message(data)
        raise ValueError(msg or f"expected sequence of equal-length lists to build a tensor: {e}") from None


def _ragged_message(data):
    """torch's message for nested sequences of unequal lengths: the first sequence (depth first) whose
    length differs from the length the first elements gave its depth."""
    shape, d = [], data
    while isinstance(d, (list, tuple)):
        shape.append(len(d))
        if not d:
            break
        d = d[0]

    def walk(seq, dim):
        if dim >= len(shape) or not isinstance(seq, (list, tuple)):
            return None
        if len(seq) != shape[dim]:
            return f"expected sequence of length {shape[dim]} at dim {dim} (got {len(seq)})"
        for item in seq:
            m = walk(item, dim + 1)
            if m:
                return m
        return None
    return walk(data, 0)


def _check_int_leaves(data, dtype):
    """Why NumPy could not store ``data`` as the integer ``dtype``: torch's errors for values beyond int64
    (ValueError) and for NaN, inf and out-of-range numbers (RuntimeError)."""
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and not (
                -2 ** 63 <= int(x) < 2 ** 63):
            raise ValueError("Overflow when unpacking long long")
        elif isinstance(x, (int, float, np.number)):
            check_scalar_fits(x, dtype, dtype.name)


def _has_tensor(data) -> bool:
    if isinstance(data, Tensor):
        return True
    if isinstance(data, (list, tuple)):
        return any(_has_tensor(x) for x in data)
    return False


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Build a tensor by copying ``data`` (nested lists, numbers, ndarrays, tensors)."""
    dtype_arg(dtype, "tensor")
    if isinstance(data, Tensor):
        dt = dtype or data._dtype
        arr = data._data.astype(dt.np, copy=True)
        return _finish(arr, dt, requires_grad, device, derived=True)
    if isinstance(data, np.ndarray):
        dt = dtype or (_dt.from_numpy_dtype(data.dtype) if data.dtype != np.float64 or True else None)
        return _finish(np.array(data, dtype=dt.np, copy=True), dt, requires_grad, device)
    if isinstance(data, (np.generic,)):
        dt = dtype or _dt.from_numpy_dtype(data.dtype)
        return _finish(np.array(data, dtype=dt.np), dt, requires_grad, device)
    dt = dtype or _infer_dtype(data)
    if dt is None:
        dt = _dt.get_default_dtype()
    if isinstance(data, str):
        raise TypeError(f"new(): invalid data type 'str'")
    arr = _to_array(data, dt)
    return _finish(arr, dt, requires_grad, device, derived=_has_tensor(data))


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Share memory with ``data`` when it is an ndarray/tensor of the requested dtype; else copy."""
    dev = _check_device(device)
    if isinstance(data, Tensor):
        t = data if dtype is None or dtype is data._dtype else data.to(dtype)
        return t.to(dev) if device is not None else t
    if dev is not CPU:
        return tensor(data, dtype=dtype, device=dev)
    if isinstance(data, np.ndarray):
        src = _dt.from_numpy_dtype(data.dtype)
        if dtype is None or dtype is src:
            return wrap(data, src)
        return wrap(data.astype(dtype.np), dtype)
    return tensor(data, dtype=dtype)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``ndarray`` (writes go both ways)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return wrap(ndarray, _dt.from_numpy_dtype(ndarray.dtype))


def _factory(fill):
    def f(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
          memory_format=None, generator=None):
        shape = shape_arg(sizes if size is None else (size,), f.__name__)
        for s in shape:
            if s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")
        dt = dtype_arg(dtype, f.__name__) or _dt.get_default_dtype()
        if device is None and _DEFAULT_DEVICE[0] is not CPU:     # (inside ``with ember.device(...)``)
            device = _DEFAULT_DEVICE[0]
        r = None if device is None or (fill is not _EMPTY and getattr(device, "type", device) != "meta") else \
            _device_empty(shape, dt, device, requires_grad)       # (meta: no host array, whatever the fill)
        if r is None:
            r = _finish(_alloc(shape, dt.np, fill, shape, dt.np), dt, requires_grad, device)
        if memory_format is not None:
            from .._memory_format import lay_out_new        # (torch.empty's; zeros/ones refuse it)
            r = lay_out_new(r, memory_format, f.__name__)
        if out is not None:
            from .inplace import copy_out
            return copy_out(r, out)
        return r
    return f


zeros = _factory(lambda s, d: np.zeros(s, dtype=d))
ones = _factory(lambda s, d: np.ones(s, dtype=d))
def _EMPTY(s, d):
    return np.empty(s, dtype=d)


empty = _factory(_EMPTY)
zeros.__name__, ones.__name__, empty.__name__ = "zeros", "ones", "empty"


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    if isinstance(size, (int, np.integer)):
        raise TypeError(f"full(): argument 'size' (position 1) must be tuple of ints, not {type(size).__name__}")
    shape = shape_arg((size,), "full")
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    dtype_arg(dtype, "full")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if dtype is None:
        dtype = _dt.scalar_dtype(fill_value)
    _check_fill(fill_value, dtype, "full")
    if isinstance(fill_value, (complex, np.complexfloating)) and not dtype.is_complex:
        fill_value = fill_value.real    # checked above: no imaginary part
    fill_value = wrap_unsigned(fill_value, dtype)
    r = _finish(_alloc(shape, dtype.np, _full, shape, fill_value, dtype.np), dtype, requires_grad, device)
    if out is not None:
        from .inplace import copy_out
        return copy_out(r, out)
    return r


def _full(shape, value, dt):
    """``np.full`` without its Python wrapper's dtype inference (the dtype is always given here)."""
    a = np.empty(shape, dt)
    a.fill(value)
    return a


def _like(fn_fill):
    def f(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
        check_tensor(input, f.__name__)
        dt = dtype_arg(dtype, f.__name__) or input._dtype
        shape = input._data.shape
        # (as torch: the input's device unless one is given)
        if fn_fill is _EMPTY and (device is not None or input._data.__class__ is not np.ndarray):
            r = _device_empty(shape, dt, -1 - input._data.device if device is None else device, requires_grad)
            if r is not None:
                return r
        arr = _alloc(shape, dt.np, fn_fill, shape, dt.np)
        if memory_format is not None or (type(input._data) is np.ndarray and not input._data.flags.c_contiguous):
            from .._memory_format import like_layout      # (channels_last, or preserved from the input)
            arr = like_layout(arr, input, memory_format, f.__name__)
        return _finish(arr, dt, requires_grad, input.device if device is None else device)
    return f


zeros_like = _like(lambda s, d: np.zeros(s, dtype=d))
ones_like = _like(lambda s, d: np.ones(s, dtype=d))
empty_like = _like(_EMPTY)
zeros_like.__name__, ones_like.__name__, empty_like.__name__ = "zeros_like", "ones_like", "empty_like"


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    check_tensor(input, "full_like")
    dt = dtype_arg(dtype, "full_like") or input._dtype
    _check_fill(fill_value, dt, "full_like")
    fill_value = wrap_unsigned(fill_value, dt)
    shape = input._data.shape
    return _finish(_alloc(shape, dt.np, _full, shape, fill_value, dt.np), dt, requires_grad,
                   input.device if device is None else device)


def _new(fill):
    def f(self, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        shape = shape_arg(sizes if size is None else (size,), f.__name__)
        if any(s < 0 for s in shape):
            raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
        dt = dtype_arg(dtype, f.__name__) or self._dtype
        return _finish(_alloc(shape, dt.np, fill, shape, dt.np), dt, requires_grad,
                       self.device if device is None else device)
    return f


def _check_fill(value, dt, op):
    if isinstance(value, Tensor):
        return
    if not isinstance(value, (bool, int, float, complex, np.bool_, np.number)):
        raise TypeError(f"{op}(): argument 'fill_value' (position 2) must be Number, not {type(value).__name__}")
    check_scalar_fits(value, dt)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    dt = dtype_arg(dtype, "new_full") or self._dtype
    _check_fill(fill_value, dt, "new_full")
    fill_value = wrap_unsigned(fill_value, dt)
    shape = shape_arg((size,), "new_full")
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    return _finish(_alloc(shape, dt.np, _full, shape, fill_value, dt.np), dt, requires_grad,
                   self.device if device is None else device)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=dtype or self._dtype, requires_grad=requires_grad,
                  device=self.device if device is None else device)


def _num(v) -> str:
    """A number as torch's C++ stream prints it (``0``, ``0.5``, ``nan``, ``-inf``)."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def arange(start, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 unless a bound is a float."""
    if end is None:
        start, end = 0, start
    if type(start) is int and type(end) is int and type(step) is int and (dtype is None or dtype is _dt.int64):
        # the usual call, int64 from Python ints: nothing to convert (the general path below agrees)
        if step == 0:
            raise RuntimeError("step must be nonzero")
        if (end - start) * step < 0:
            raise RuntimeError("upper bound and lower bound inconsistent with step sign")
        n = builtins.max(0, -((start - end) // step))
        r = _finish(_alloc((n,), np.int64, np.arange, start, start + n * step, step, np.int64), _dt.int64,
                    requires_grad, device)
        if out is not None:
            from .inplace import copy_out
            return copy_out(r, out)
        return r
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    for v in vals:
        if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool):
            raise TypeError(f"arange() received an invalid combination of arguments - got "
                            f"({', '.join(type(x).__name__ for x in vals)})")
    dtype_arg(dtype, "arange")
    if dtype is _dt.bool:
        raise NotImplementedError("\"arange_cpu\" not implemented for 'Bool'")
    if dtype is _dt.int64 and any(isinstance(v, (float, np.floating)) for v in vals) and all(
            math.isfinite(v) for v in vals):
        vals = [int(v) for v in vals]       # torch reads the bounds and the step as int64 first
        if vals[2] == 0:
            raise ValueError("step must be nonzero")
    start, end, step = vals
    if not (step > 0 or step < 0):
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {_num(start)} -> {_num(end)}")
    if (end - start) * step < 0 and end != start:
        raise RuntimeError(f"upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = _dt.get_default_dtype() if any(isinstance(v, float) for v in vals) else _dt.int64
    if all(isinstance(v, int) for v in vals):
        n = builtins.max(0, -((start - end) // step))      # (integer ceil: exact, and symbolic sizes stay so)
    else:
        n = builtins.max(0, math.ceil((end - start) / step))
    if dtype.is_floating_point:
        arr = _alloc((n,), dtype.np, lambda: (start + np.arange(n, dtype=np.float64) * step).astype(dtype.np))
    else:
        arr = _alloc((n,), dtype.np,
                     lambda: np.arange(start, start + n * step, step, dtype=np.int64)[:n].astype(dtype.np))
    r = _finish(arr, dtype, requires_grad, device)
    if out is not None:
        from .inplace import copy_out
        return copy_out(r, out)
    return r


for _n, _f in [("tensor", tensor), ("as_tensor", as_tensor), ("from_numpy", from_numpy), ("zeros", zeros),
               ("ones", ones), ("empty", empty), ("full", full), ("zeros_like", zeros_like),
               ("ones_like", ones_like), ("empty_like", empty_like), ("full_like", full_like), ("arange", arange)]:
    attach(_n, _f, method=False)
for _n, _fill in [("new_zeros", lambda s, d: np.zeros(s, dtype=d)), ("new_ones", lambda s, d: np.ones(s, dtype=d)),
                  ("new_empty", lambda s, d: np.empty(s, dtype=d))]:
    attach(_n, _new(_fill), function=False)
    getattr(Tensor, _n).__name__ = _n      # names the op in memory errors
attach("new_full", new_full, function=False)
attach("new_tensor", new_tensor, function=False)


def legacy_new(self, *args, device=None) -> Tensor:
    """Legacy ``x.new(...)``: ``x.new(2, 3)`` is an uninitialised tensor of ``x``'s dtype, ``x.new(data)``
    copies ``data`` into ``x``'s dtype, ``x.new()`` is empty; a tensor argument must have ``x``'s dtype."""
    _check_device(device)
    dt = self._dtype
    if not args:
        return wrap(np.empty((0,), dtype=dt.np), dt)
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0]._dtype is not dt:
            raise TypeError(f"expected {dt} (got {args[0]._dtype})")
        return args[0].detach()
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args) or (
            len(args) == 1 and isinstance(args[0], tuple) and type(args[0]).__name__ == "Size"):
        shape = shape_arg(args)
        return wrap(_alloc(shape, dt.np, np.empty, shape, dt.np), dt)
    if len(args) == 1 and not isinstance(args[0], (int, float, bool)):
        return tensor(args[0], dtype=dt)
    raise TypeError(f"new() received an invalid combination of arguments - got ({', '.join(type(a).__name__ for a in args)})")


attach("new", legacy_new, function=False)
