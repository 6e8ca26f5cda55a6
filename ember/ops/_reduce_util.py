"""Helpers shared by the reduction families (reduce_values, reduce_order, reduce_scan, reduce_softmax,
reduce_norm): constants, computing half precision in float32, ``out=`` and ``dim`` arguments."""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import dtype_name
from ._util import dims_arg, wrap_dim


_INF = float("inf")
_HALF = (np.dtype(np.float16), _dt.bfloat16.np)


# ---- small helpers -------------------------------------------------------------------------------


def _const(arr, dtype: _dt.dtype) -> Tensor:
    """A constant (no-grad) tensor of ``dtype`` from a NumPy array (masks and scales in derivatives)."""
    return wrap(np.asarray(arr).astype(dtype.np, copy=False), dtype)


def _up(x: np.ndarray):
    """Compute half-precision types in float32 (torch accumulates them in float); returns (x, cast_back)."""
    if x.dtype in _HALF:
        return x.astype(np.float32), x.dtype
    return x, None


def _down(r, od):
    r = np.asarray(r)
    return r if od is None else r.astype(od)


def _accumulation(x: np.ndarray, dtype):
    """How the sum-like kernels (prod, nansum, cumsum, cumprod) accumulate: integers and bools in int64
    unless ``dtype`` is given; without a dtype, half precision in float32. Returns (x, dtype, cast_back
    for ``_down``)."""
    if dtype is not None:
        return x, dtype, None
    if x.dtype.kind in "biu":
        return x, np.int64, None
    x, od = _up(x)
    return x, None, od


def _name(d) -> str:
    return dtype_name(d)


def _out(result, out):
    from .inplace import copy_out
    return copy_out(result, out)


def _out_dtype(dtype, out):
    """Sum-like ops with ``out=`` and no ``dtype`` compute in ``out``'s dtype, as torch does."""
    if dtype is None and isinstance(out, Tensor):
        return out._dtype
    return dtype


def _reduce_axes(dim, nd: int, empty_means_all: bool = True) -> tuple:
    """``dim`` (None, int or sequence) as a sorted tuple; ``()`` means every dim where torch says so."""
    if nd == 0:
        if dim is not None:
            for d in ((dim,) if isinstance(dim, (int, np.integer)) else dim):
                wrap_dim(d, 0)
        return ()
    if dim is not None and not isinstance(dim, (int, np.integer)) and len(dim) == 0:
        return tuple(range(nd)) if empty_means_all else ()
    return dims_arg(dim, nd)


def _int_dim(dim, op: str, arg: str = "dim") -> int:
    if isinstance(dim, Tensor):
        dim = dim.item()
    if isinstance(dim, builtins.bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{arg}' must be int, not {type(dim).__name__}")
    return int(dim)


def numpy_names(op: str, dim, keepdim, axis, keepdims, default=None, required: bool = False):
    """torch's NumPy spellings: ``axis=`` stands for ``dim`` and ``keepdims=`` for ``keepdim`` when those
    are not given too (both at once is a TypeError, as torch's argument parser says); a required ``dim``
    given by neither is a TypeError. Returns (dim, keepdim). Called only when a NumPy name was given (or
    a required dim is missing), so calls without them pay one check."""
    if axis is not None:
        if dim is not default and dim != default:
            raise TypeError(f"{op}() got an unexpected keyword argument 'axis'")
        dim = axis
    if keepdims is not None:
        if keepdim:
            raise TypeError(f"{op}() got an unexpected keyword argument 'keepdims'")
        keepdim = keepdims
    if required and dim is None:
        raise TypeError(f'{op}() missing 1 required positional arguments: "dim"')
    return dim, keepdim


def dim_from_axis(op: str, dim, axis, **required):
    """``axis=`` standing for a ``dim`` that comes before other required arguments (``index_select(x,
    axis=1, index=i)``): those functions take ``dim=None`` and their later required arguments with a
    None default, and call this only when ``axis`` is given or one of them is missing. Returns dim;
    a missing required argument is torch's TypeError."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{op}() got an unexpected keyword argument 'axis'")
        dim = axis
    missing = [name for name, v in (("dim", dim),) + tuple(required.items()) if v is None]
    if missing:
        names = ", ".join(f'"{m}"' for m in missing)
        raise TypeError(f"{op}() missing {len(missing)} required positional argument: {names}")
    return dim


class _AllDims:
    """The default ``dim`` of sum/mean/prod: all dims, told apart from an explicit ``dim=None`` because
    torch refuses ``keepdim=`` when no dim is given at all (``x.sum(keepdim=True)``) but not after
    ``dim=None``."""
    __slots__ = ()

    def __repr__(self):
        return "None"


ALL_DIMS = _AllDims()


def dim_keepdim_dtype(op: str, dim, keepdim, dtype, axis, keepdims):
    """The leading arguments of sum / mean / prod: torch's NumPy spellings (``numpy_names``), a dtype in
    dim's place (``x.sum(ember.float64)``), and ``keepdim``/``keepdims`` given without a dim (nor ``axis``):
    torch's TypeError (its overloads without a dim take no keepdim). Returns (dim, keepdim, dtype), dim
    None for all dims."""
    if dim is ALL_DIMS:
        if axis is None and (keepdim or keepdims is not None):
            name = "keepdim" if keepdim else "keepdims"
            raise TypeError(f"{op}() received an invalid combination of arguments - got (Tensor, {name}=bool), "
                            f"but expected one of: (Tensor input, *, torch.dtype dtype = None) or (Tensor input, "
                            f"tuple of ints dim, bool keepdim = False, *, torch.dtype dtype = None)")
        dim = None
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names(op, dim, keepdim, axis, keepdims)
    if isinstance(dim, _dt.dtype):
        dtype, dim = dim, None
    return dim, keepdim, dtype
