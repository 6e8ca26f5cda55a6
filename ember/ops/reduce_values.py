"""Value reductions beyond sum and mean (reduce.py): prod, var/std (and var_mean/std_mean), all/any,
count_nonzero, nansum/nanmean.

Each has a NumPy kernel and a derivative built from ember ops, expanded back with ``_expand_back``.
Integer inputs follow torch: sum-like results (prod, nansum) accumulate in int64; var/std/nanmean
refuse them.
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from ..tensor import Tensor
from ..autograd.grad_mode import no_grad
from .registry import register, apply, attach, node_class, rename
from ._layout_rule import contiguous_results
from ._util import wrap_dim
from .reduce import _expand_back, mean as _mean, SUM
from .creation import ones as _ones
from ._reduce_util import _INF, _accumulation, _down, _int_dim, _name, _out, _out_dtype, _reduce_axes, _up
from ._reduce_util import numpy_names, ALL_DIMS, dim_keepdim_dtype
from .reduce_scan import CUMPROD


# ---- prod ------------------------------------------------------------------------------------------


def _prod_kernel(x, axis, keepdims, dtype=None):
    x, dtype, od = _accumulation(x, dtype)
    return _down(np.multiply.reduce(x, axis=axis, keepdims=keepdims, dtype=dtype), od)  # the ufunc in this frame: fp warnings filtered


def _shift(t: Tensor, d: int, reverse: bool) -> Tensor:
    """``t`` moved one step along ``d`` (forward: out[k] = t[k-1]), the vacated slot filled with 1."""
    from .shape_join import cat
    n = t._data.shape[d]
    one = _ones(t._data.shape[:d] + (1,) + t._data.shape[d + 1:], dtype=t._dtype)
    if reverse:
        return cat([t.narrow(d, 1, n - 1), one], d)
    return cat([one, t.narrow(d, 0, n - 1)], d)


def _prod_others(x: Tensor, d: int) -> Tensor:
    """Product of all other elements along ``d`` (exclusive cumprods from both ends; safe with zeros)."""
    left = _shift(apply(CUMPROD, (x,), {"axis": d, "reverse": False}), d, False)
    right = _shift(apply(CUMPROD, (x,), {"axis": d, "reverse": True}), d, True)
    return left * right


def _prod_bw(ctx, g):
    x = ctx.inputs[0]
    axis, keep = ctx.attrs["axis"], ctx.attrs["keepdims"]
    shp = x._data.shape
    if not shp:
        return g
    gk = _expand_back(g, shp, axis, keep)
    if x._data.size == 0:
        return gk
    # always the zero-safe form: a compiled replay must not keep a branch taken on the traced values
    if len(axis) == 1:
        return gk * _prod_others(x, axis[0])
    return gk * _prod_others(x.reshape(-1), 0).reshape(shp)


PROD = register("prod", _prod_kernel, _prod_bw, save="i")
_PROD_DIM = node_class("ProdBackward1")


def prod(input, dim=ALL_DIMS, keepdim: bool = False, *, dtype=None, out=None, axis=None, keepdims=None):
    """Product of all elements, or along one ``dim``; integers and bools accumulate in int64."""
    dim, keepdim, dtype = dim_keepdim_dtype("prod", dim, keepdim, dtype, axis, keepdims)
    dtype = _out_dtype(dtype, out)
    nd = input._data.ndim
    if dim is None:
        axis = tuple(range(nd))
    else:
        d = wrap_dim(_int_dim(dim, "prod"), nd)
        axis = (d,) if nd else ()
    attrs = {"axis": axis, "keepdims": keepdim if dim is not None else False}
    if dtype is not None:
        attrs["dtype"] = dtype.np
    r = apply(PROD, (input,), attrs)
    if dim is not None:
        rename(r, _PROD_DIM)     # torch's prod.dim_int overload
    return r if out is None else _out(r, out)


# ---- var / std -----------------------------------------------------------------------------------------


def _var_kernel(x, axis, correction, keepdims, sqrt=False):
    x, od = _up(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = int(np.prod([x.shape[d] for d in axis], dtype=np.int64))
        m = np.mean(x, axis=axis, keepdims=True) if n else np.zeros((), x.dtype)
        ss = np.sum((x - m) ** 2, axis=axis, keepdims=keepdims)
        r = ss / builtins.max(n - correction, 0) if n else np.full(ss.shape, np.nan, ss.dtype)
        if sqrt:
            r = np.sqrt(r)
    return _down(np.asarray(r, dtype=x.dtype), od)


def _var_grad(gv, x, axis, correction, keep):
    shp = x._data.shape
    n = 1
    for d in axis:
        n *= shp[d]
    denom = n - correction
    scale = 2.0 / denom if denom != 0 else _INF
    centered = x - _mean(x, axis, keepdim=True)
    return _expand_back(gv, shp, axis, keep) * (scale * centered)


def _var_bw(ctx, g):
    a = ctx.attrs
    return _var_grad(g, ctx.inputs[0], a["axis"], a["correction"], a["keepdims"])


def _std_bw(ctx, g):
    a = ctx.attrs
    y = ctx.output
    with no_grad():
        zero = y == 0
        nonzero = (~zero).to(y._dtype)
        zero = zero.to(y._dtype)
    # torch: d std = d var / (2 std), with 0 where std == 0
    gv = g / (2 * (y + zero)) * nonzero
    return _var_grad(gv, ctx.inputs[0], a["axis"], a["correction"], a["keepdims"])


VAR = register("var", _var_kernel, _var_bw, save="i")
STD = register("std", lambda x, axis, correction, keepdims: _var_kernel(x, axis, correction, keepdims, True),
               _std_bw, save="io")


def _var_args(input, dim, unbiased, keepdim, correction, op):
    if not input._dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    if isinstance(dim, builtins.bool):          # var(x, True): the unbiased overload
        unbiased, dim = dim, None
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}(): cannot pass both 'unbiased' and 'correction'")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    nd = input._data.ndim
    axis = _reduce_axes(dim, nd)
    n = 1
    for d in axis:
        n *= input._data.shape[d]
    if n - correction <= 0:
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=3)
    return {"axis": axis, "correction": correction, "keepdims": keepdim}


def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, out=None, axis=None, keepdims=None):
    """Variance over ``dim`` with Bessel's ``correction`` (default 1; ``unbiased=False`` means 0); real for
    complex input (the variances of the real and imaginary parts added)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("var", dim, keepdim, axis, keepdims)
    if input._dtype.is_complex:
        r = var(input.real, dim, unbiased, keepdim, correction=correction) + \
            var(input.imag, dim, unbiased, keepdim, correction=correction)
        return r if out is None else _out(r, out)
    r = apply(VAR, (input,), _var_args(input, dim, unbiased, keepdim, correction, "var"))
    return r if out is None else _out(r, out)


def std(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, out=None, axis=None, keepdims=None):
    """Standard deviation over ``dim`` (see ``var``)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("std", dim, keepdim, axis, keepdims)
    if input._dtype.is_complex:
        r = var(input, dim, unbiased, keepdim, correction=correction).sqrt()
        return r if out is None else _out(r, out)
    r = apply(STD, (input,), _var_args(input, dim, unbiased, keepdim, correction, "std"))
    return r if out is None else _out(r, out)


# torch computes each pair in one op (one node with two outputs); here two nodes of that name
_VAR_MEAN, _STD_MEAN = node_class("VarMeanBackward0"), node_class("StdMeanBackward0")


def _with_mean(op, node, name, input, dim, unbiased, keepdim, correction, out, axis, keepdims):
    """(``op``, mean) over ``dim``: var_mean / std_mean."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names(name, dim, keepdim, axis, keepdims)
    attrs = _var_args(input, dim, unbiased, keepdim, correction, name)
    res = rename((apply(op, (input,), attrs), _mean(input, attrs["axis"], keepdim)), node)
    return res if out is None else tuple(_out(r, o) for r, o in zip(res, out))


def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, out=None, axis=None,
             keepdims=None):
    """(var, mean) over ``dim``."""
    return _with_mean(VAR, _VAR_MEAN, "var_mean", input, dim, unbiased, keepdim, correction, out, axis, keepdims)


def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, out=None, axis=None,
             keepdims=None):
    """(std, mean) over ``dim``."""
    return _with_mean(STD, _STD_MEAN, "std_mean", input, dim, unbiased, keepdim, correction, out, axis, keepdims)


# ---- all / any / count_nonzero / nansum / nanmean ------------------------------------------------------


def _logical_reduce_kernel(x, axis, keepdims, any_=False):
    f = np.any if any_ else np.all
    r = f(x, axis=axis, keepdims=keepdims)
    return np.asarray(r).astype(np.uint8) if x.dtype == np.uint8 else np.asarray(r)


ALL = register("all", _logical_reduce_kernel, differentiable=False)
ANY = register("any", lambda x, axis, keepdims: _logical_reduce_kernel(x, axis, keepdims, True),
               differentiable=False)


def _all_any(op, input, dim, keepdim, out):
    nd = input._data.ndim
    axis = _reduce_axes(dim, nd, empty_means_all=False)
    r = apply(op, (input,), {"axis": axis, "keepdims": keepdim})
    return r if out is None else _out(r, out)


def all(input, dim=None, keepdim: bool = False, *, out=None, axis=None, keepdims=None):  # noqa: A001
    """True where every element over ``dim`` is non-zero (uint8 inputs give uint8, as in torch)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("all", dim, keepdim, axis, keepdims)
    return _all_any(ALL, input, dim, keepdim, out)


def any(input, dim=None, keepdim: bool = False, *, out=None, axis=None, keepdims=None):  # noqa: A001
    """True where some element over ``dim`` is non-zero (uint8 inputs give uint8, as in torch)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("any", dim, keepdim, axis, keepdims)
    return _all_any(ANY, input, dim, keepdim, out)


COUNT_NONZERO = register("count_nonzero",
                         lambda x, axis: np.asarray(np.count_nonzero(x, axis=axis), dtype=np.int64),
                         differentiable=False)


def count_nonzero(input, dim=None, *, axis=None):
    """Number of non-zero elements over ``dim`` (all by default), as int64."""
    if axis is not None:
        dim, _ = numpy_names("count_nonzero", dim, False, axis, None)
    return apply(COUNT_NONZERO, (input,), {"axis": _reduce_axes(dim, input._data.ndim)})


def _nansum_kernel(x, axis, keepdims, dtype=None):
    x, dtype, od = _accumulation(x, dtype)
    if x.dtype.kind == "f":
        return _down(np.nansum(x, axis=axis, keepdims=keepdims, dtype=dtype), od)
    return _down(np.sum(x, axis=axis, keepdims=keepdims, dtype=dtype), od)


def _nansum_bw(ctx, g):
    x = ctx.inputs[0]
    with no_grad():
        keep = (~x.isnan()).to(x._dtype)
    return _expand_back(g, x._data.shape, ctx.attrs["axis"], ctx.attrs["keepdims"]) * keep


NANSUM = register("nansum", _nansum_kernel, _nansum_bw, save="i")


def nansum(input, dim=None, keepdim: bool = False, *, dtype=None, out=None, axis=None, keepdims=None):
    """Sum over ``dim`` treating NaN as zero."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("nansum", dim, keepdim, axis, keepdims)
    dtype = _out_dtype(dtype, out)
    attrs = {"axis": _reduce_axes(dim, input._data.ndim), "keepdims": keepdim}
    if dtype is not None:
        attrs["dtype"] = dtype.np
    r = apply(NANSUM, (input,), attrs)
    return r if out is None else _out(r, out)


def _nanmean_kernel(x, axis, keepdims):
    x, od = _up(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.nansum(x, axis=axis, keepdims=keepdims) / np.sum(~np.isnan(x), axis=axis, keepdims=keepdims)
    return _down(np.asarray(r, dtype=x.dtype), od)


def _nanmean_bw(ctx, g):
    x = ctx.inputs[0]
    axis = ctx.attrs["axis"]
    with no_grad():
        keep = (~x.isnan()).to(x._dtype)
        scale = keep / (apply(SUM, (keep,), {"axis": axis, "keepdims": True}) if axis else keep)
    return _expand_back(g, x._data.shape, axis, ctx.attrs["keepdims"]) * scale


NANMEAN = register("nanmean", _nanmean_kernel, _nanmean_bw, save="i")
contiguous_results(PROD, VAR, STD, ALL, ANY, NANSUM, NANMEAN)
NANMEAN.node_name = "DivBackward0"      # torch's nanmean is nansum(x) / count(x not NaN)


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None, out=None, axis=None, keepdims=None):
    """Mean over ``dim`` of the non-NaN elements."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("nanmean", dim, keepdim, axis, keepdims)
    if not (dtype or input._dtype).is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_name(input._dtype)}")
    x = input if dtype is None else input.to(dtype)
    r = apply(NANMEAN, (x,), {"axis": _reduce_axes(dim, x._data.ndim), "keepdims": keepdim})
    return r if out is None else _out(r, out)


# ---- exports ------------------------------------------------------------------------------------------

for _name_, _fn in [("prod", prod), ("var", var), ("std", std), ("all", all), ("any", any),
                    ("count_nonzero", count_nonzero), ("nansum", nansum), ("nanmean", nanmean)]:
    attach(_name_, _fn)
attach("var_mean", var_mean, method=False)
attach("std_mean", std_mean, method=False)
