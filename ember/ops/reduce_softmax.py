"""logsumexp, softmax and log_softmax: NumPy kernels (half precision computes in float32) with
derivatives written in ember ops."""
from __future__ import annotations


import numpy as np

from .. import dtypes as _dt
from .._native import eager_kernels as _native
from ..autograd.grad_mode import GRAD
from ..tensor import Tensor, wrap
from .registry import register, apply, attach, HOOKS
from ._layout_rule import contiguous_results
from ._util import wrap_dim
from .reduce import _expand_back, sum as _sum
from ._reduce_util import _down, _int_dim, _name, _out, _reduce_axes, _up
from ._reduce_util import numpy_names


_F32 = np.dtype(np.float32)


def _float_or_default(x: Tensor) -> Tensor:
    return x if x._dtype.is_floating_point else x.to(_dt.get_default_dtype())


# ---- logsumexp / softmax / log_softmax ---------------------------------------------------------------


def _logsumexp_kernel(x, axis, keepdims):
    x, od = _up(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if x.size == 0:
            r = np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))
        else:
            m = np.max(x, axis=axis, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)      # all -inf (or +inf) slices: no shift needed
            r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
            if not keepdims and axis:
                r = np.squeeze(r, axis)
    return _down(np.asarray(r, dtype=x.dtype), od)


def _logsumexp_bw(ctx, g):
    x = ctx.inputs[0]
    axis, keep = ctx.attrs["axis"], ctx.attrs["keepdims"]
    if not axis:
        return g
    return _expand_back(g, x._data.shape, axis, keep) * apply(SOFTMAX, (x,), {"axis": axis})


LOGSUMEXP = register("logsumexp", _logsumexp_kernel, _logsumexp_bw, save="i")


def logsumexp(input, dim=None, keepdim: bool = False, *, out=None, axis=None, keepdims=None):
    """``log(sum(exp(input)))`` over ``dim``, computed stably (integers are promoted to float)."""
    if axis is not None or keepdims is not None or dim is None:
        dim, keepdim = numpy_names("logsumexp", dim, keepdim, axis, keepdims, required=True)
    if input._dtype.is_complex:
        # shifted by the largest real part (a constant: the result does not depend on it)
        shift = input.real.detach().amax(dim, keepdim=True)
        shift = shift.masked_fill(~shift.isfinite(), 0.0)
        r = (input - shift).exp().sum(dim, keepdim=True).log() + shift
        r = r if keepdim else r.squeeze(dim)
        return r if out is None else _out(r, out)
    x = _float_or_default(input)
    axis = _reduce_axes(dim, x._data.ndim)
    r = apply(LOGSUMEXP, (x,), {"axis": axis, "keepdims": keepdim})
    return r if out is None else _out(r, out)


def _softmax_kernel(x, axis):
    x, od = (x, None) if x.dtype == _F32 else _up(x)
    if x.dtype == _F32:
        r = _native.softmax(x, axis, False)     # one native pass over the last dim (ember/_native)
        if r is not None:
            return r if od is None else _down(r, od)
    if x.size == 0:
        return _down(x.copy(), od)
    with np.errstate(invalid="ignore", over="ignore"):
        if x.ndim == 0:
            e = np.exp(x - x)
            return _down(e / e, od)
        # one new array, every pass in place; a multiply by the rows' reciprocal sums, as torch does
        e = np.subtract(x, np.max(x, axis=axis, keepdims=True))
        np.exp(e, out=e)
        s = np.sum(e, axis=axis, keepdims=True)
        np.reciprocal(s, out=s)
        e *= s
        return _down(e, od)


def _native_bw(g, y, axis, log):
    """The derivative in one native call when nothing records or watches it (plain eager backward of
    float32 arrays), else None."""
    if GRAD[0] or HOOKS or type(g._data) is not np.ndarray or type(y._data) is not np.ndarray:
        return None
    if y._data.dtype != _F32 or g._data.dtype != _F32:
        return None
    r = _native.softmax_backward(g._data, y._data, axis, log)
    return None if r is None else wrap(r)


def _softmax_bw(ctx, g):
    y = ctx.output
    axis = ctx.attrs["axis"]
    r = _native_bw(g, y, axis, False)
    if r is not None:
        return r
    return y * (g - _sum(g * y, axis, keepdim=True))


def _log_softmax_kernel(x, axis):
    x, od = (x, None) if x.dtype == _F32 else _up(x)
    if x.dtype == _F32:
        r = _native.softmax(x, axis, True)
        if r is not None:
            return r if od is None else _down(r, od)
    if x.size == 0:
        return _down(x.copy(), od)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s = np.asarray(np.subtract(x, np.max(x, axis=axis, keepdims=True)))
        s -= np.log(np.sum(np.exp(s), axis=axis, keepdims=True))
        return _down(s, od)


def _log_softmax_bw(ctx, g):
    y = ctx.output
    axis = ctx.attrs["axis"]
    r = _native_bw(g, y, axis, True)
    if r is not None:
        return r
    return g - y.exp() * _sum(g, axis, keepdim=True)


SOFTMAX = register("softmax", _softmax_kernel, _softmax_bw, save="o")
LOG_SOFTMAX = register("log_softmax", _log_softmax_kernel, _log_softmax_bw, save="o")
contiguous_results(LOGSUMEXP, SOFTMAX, LOG_SOFTMAX)


def _softmax_common(op, name, input, dim, dtype):
    if dim is None:
        # torch.softmax / Tensor.softmax need a dim (the implicit choice lives in F.softmax only)
        raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
    if dtype is not None:
        input = input.to(dtype)
    nd = input._data.ndim
    d = wrap_dim(_int_dim(dim, name), nd)
    if not input._dtype.is_floating_point:
        if input._data.size == 0:
            return input.clone()         # torch runs no kernel for an empty input: any dtype passes
        raise NotImplementedError(f"\"{name}_lastdim_kernel_impl\" not implemented for '{_name(input._dtype)}'")
    return apply(op, (input,), {"axis": d if nd else ()})


def softmax(input, dim=None, dtype=None, *, _stacklevel=3, axis=None):
    """Softmax along ``dim`` (``dtype`` casts the input first)."""
    if axis is not None:
        dim, _ = numpy_names("softmax", dim, False, axis, None)
    return _softmax_common(SOFTMAX, "softmax", input, dim, dtype)


def log_softmax(input, dim=None, dtype=None, *, _stacklevel=3, axis=None):
    """Log of softmax along ``dim``, computed stably."""
    if axis is not None:
        dim, _ = numpy_names("log_softmax", dim, False, axis, None)
    return _softmax_common(LOG_SOFTMAX, "log_softmax", input, dim, dtype)


for _name_, _fn in [("logsumexp", logsumexp), ("softmax", softmax), ("log_softmax", log_softmax)]:
    attach(_name_, _fn)
