"""Reductions, core set: sum, mean, and ``sum_to_size`` (the backward of broadcasting).

Reductions take ``dim`` (int, tuple or None) and ``keepdim``; their derivatives expand the gradient
back with ember ops (unsqueeze + expand), so they are traceable for double backward and the compiler.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import register, apply, attach, node_class, rename
from ._reduce_util import ALL_DIMS, dim_keepdim_dtype
from ._util import dims_arg, dtype_arg


def _expand_back(g, in_shape, dims, keepdim):
    """Broadcast a reduced gradient back to ``in_shape`` (reduced leading dims need no unsqueeze: expand
    adds them, e.g. a full sum's 0-d gradient or a bias gradient's)."""
    if not keepdim and dims and sorted(dims) != list(range(len(dims))):
        shp = list(g._data.shape)
        for d in sorted(dims):
            shp.insert(d, 1)
        g = g.reshape(tuple(shp))
    return g.expand(in_shape)


_BF16 = _dt.bfloat16.np


def _sum_kernel(x, axis, keepdims, dtype=None):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    # the ufunc's own reduce (np.sum is a Python wrapper around it: a few microseconds per call here)
    if dtype is None and x.dtype == _BF16:      # accumulate in float32 and round once, as torch
        return np.add.reduce(x, axis=axis, keepdims=keepdims, dtype=np.float32).astype(_BF16)
    r = np.add.reduce(x, axis=axis, keepdims=keepdims, dtype=dtype)
    # torch's reductions are C-contiguous whatever x's layout (NumPy keeps a permuted x's)
    return r if r.flags.c_contiguous else np.ascontiguousarray(r)


def _sum_bw(ctx, g):
    return _expand_back(g, ctx.in_shape(0), ctx.attrs["axis"], ctx.attrs["keepdims"])


SUM = register("sum", _sum_kernel, _sum_bw, prim="reduce_sum")
_SUM_DIM = node_class("SumBackward1")


def sum(input, dim=ALL_DIMS, keepdim: bool = False, *, dtype=None, out=None, axis=None, keepdims=None):  # noqa: A001
    """Sum over ``dim`` (all dims by default); integers and bools accumulate in int64, as in torch."""
    dim, keepdim, dtype = dim_keepdim_dtype("sum", dim, keepdim, dtype, axis, keepdims)
    if out is not None and dtype is None:
        dtype = out._dtype              # torch sums in out's dtype
    nd = input._data.ndim
    axis = dims_arg(dim, nd) if nd else (dims_arg(dim, 0), ())[1]    # (a 0-dim tensor still checks dim)
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        axis = tuple(range(nd))
    attrs = {"axis": axis, "keepdims": keepdim}
    if dtype is not None:
        attrs["dtype"] = dtype_arg(dtype, "sum").np
    r = apply(SUM, (input,), attrs)
    if dim is not None:
        rename(r, _SUM_DIM)      # torch's sum.dim_IntList overload
    if input._dtype is _dt.bfloat16 and dtype is None and r._dtype is not _dt.bfloat16:
        r = r.to(_dt.bfloat16)
    if out is not None:
        from .inplace import copy_out
        return copy_out(r, out)
    return r


def _mean_kernel(x, axis, keepdims, dtype=None):
    # np.mean's steps (float16 and bfloat16 summed in float32, as torch) with the ufuncs called here, so
    # their fp warnings are ember's (filtered, see ember/_numpy_quiet.py); an empty reduction is 0 / 0 = nan,
    # without np.mean's "Mean of empty slice" warning
    acc = dtype if dtype is not None else (np.float32 if x.dtype == np.float16 or x.dtype == _BF16 else None)
    s = np.add.reduce(x, axis=axis, keepdims=keepdims, dtype=acc)
    count = x.size // s.size if s.size else 1
    r = np.true_divide(s, count)
    if not r.flags.c_contiguous:
        r = np.ascontiguousarray(r)
    return r.astype(dtype or x.dtype, copy=False) if r.dtype != (dtype or x.dtype) else r


def _mean_bw(ctx, g):
    shp = ctx.in_shape(0)
    n = 1
    for d in ctx.attrs["axis"]:
        n *= shp[d]
    return _expand_back(g / n if n else g * float("nan"), shp, ctx.attrs["axis"], ctx.attrs["keepdims"])


MEAN = register("mean", _mean_kernel, _mean_bw)
_MEAN_DIM = node_class("MeanBackward1")


def mean(input, dim=ALL_DIMS, keepdim: bool = False, *, dtype=None, out=None, axis=None, keepdims=None):
    dim, keepdim, dtype = dim_keepdim_dtype("mean", dim, keepdim, dtype, axis, keepdims)
    if out is not None and dtype is None and out._dtype.is_floating_point:
        dtype = out._dtype              # torch averages in out's (floating) dtype
    dt = dtype_arg(dtype, "mean") or input._dtype
    if not dt.grad_ok:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
            f"dtype. Got: {_name(input._dtype)}")
    nd = input._data.ndim
    axis = dims_arg(dim, nd) if nd else (dims_arg(dim, 0), ())[1]
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        axis = tuple(range(nd))
    x = input if dtype is None else input.to(dtype)
    r = apply(MEAN, (x,), {"axis": axis, "keepdims": keepdim})
    if dim is not None:
        rename(r, _MEAN_DIM)
    if r._dtype is not dt:
        r = r.to(dt)
    if out is not None:
        from .inplace import copy_out
        return copy_out(r, out)
    return r


def _name(d):
    from .registry import dtype_name
    return dtype_name(d)


def sum_to_size(input, *size):
    """Sum ``input`` down to ``size`` (the shape it was broadcast from)."""
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0])
    shp = input.shape           # (symbolic sizes while ember.compile traces)
    if shp == size:
        return input
    lead = len(shp) - len(size)
    if lead < 0:
        raise RuntimeError(f"size {list(size)} is not expandable to size {list(shp)}.")
    dims = list(range(lead))
    for i, s in enumerate(size):
        if s == 1 and shp[lead + i] != 1:
            dims.append(lead + i)
        elif s != shp[lead + i]:
            raise RuntimeError(f"size {list(size)} is not expandable to size {list(shp)}.")
    r = sum(input, tuple(dims), keepdim=True) if dims else input
    return r.reshape(size) if r.shape != size else r


attach("sum", sum)
attach("mean", mean)
attach("sum_to_size", sum_to_size, function=False)
