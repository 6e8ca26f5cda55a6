"""Counting, binning and small statistics: bincount, histc, histogram, searchsorted, bucketize, isin,
quantile / nanquantile, diff, trapezoid / trapz / cumulative_trapezoid, dist, cov, corrcoef, renorm.

Counting and binning ops return integers or counts and are registered ``differentiable=False`` with
NumPy kernels. The differentiable ones (quantile, diff, trapezoid, dist, cov, corrcoef, renorm) are
compositions of existing ember ops, as torch defines them, so autograd (and double backward) comes
from those ops' derivatives; quantile follows torch's algorithm (sort, ranks in the input dtype,
gather below/above, lerp) so values, NaN handling and gradients agree.
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import register, apply, attach, dtype_name, node_class, rename
from ._reduce_util import numpy_names, dim_from_axis
from ._util import wrap_dim
from .inplace import copy_out

_INTEGRAL = (_dt.uint8, _dt.int8, _dt.int16, _dt.int32, _dt.int64)


def _tensor(x, op: str, arg: str, pos: int = 1) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")
    return x


def _scalar_tensor(x, like: Tensor | None = None) -> Tensor:
    """A Python number as a 0-d tensor (ints -> int64, floats -> the default dtype, bools -> bool)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, np.bool_)):
        return wrap(np.asarray(x, dtype=np.bool_), _dt.bool)
    if isinstance(x, (int, np.integer)):
        return wrap(np.asarray(x, dtype=np.int64), _dt.int64)
    if isinstance(x, (float, np.floating)):
        d = _dt.get_default_dtype()
        return wrap(np.asarray(x, dtype=d.np), d)
    raise TypeError(f"expected a Tensor or a Python number, got {type(x).__name__}")


def _out(result: Tensor, out):
    return result if out is None else copy_out(result, out)


# ---- searchsorted / bucketize -------------------------------------------------------------------------------


def _torch_bsearch(seq, vals, side):
    """torch's binary search (``!(mid >= v)`` moves right, ``mid > v`` for side='right'), vectorised over
    ``vals``. It differs from NumPy's only around NaN: NumPy sorts NaN last, torch's comparisons with NaN
    are false, so a NaN value lands at the end and values above the last number skip the NaNs."""
    n = seq.shape[0]
    lo = np.zeros(vals.shape, np.int64)
    hi = np.full(vals.shape, n, np.int64)
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = lo + ((hi - lo) >> 1)
        mv = seq[np.minimum(mid, n - 1)]
        right = ~(mv >= vals) if side == "left" else ~(mv > vals)
        lo = np.where(active & right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)


def _searchsorted_kernel(seq, vals, sorter, side, odt, nan_last=False):
    # (nan_last: NumPy's order, NaN after everything; isin relies on it)
    if not nan_last and seq.dtype.kind == "f" and seq.size and vals.size and (np.isnan(seq).any() or np.isnan(vals).any()):
        if sorter is not None:
            seq = np.take_along_axis(seq, sorter, axis=-1)
        if seq.ndim == 1:
            return _torch_bsearch(seq, vals, side).astype(odt, copy=False)
        s2 = seq.reshape(-1, seq.shape[-1])
        v2 = vals.reshape(s2.shape[0], -1)
        r = np.stack([_torch_bsearch(s2[i], v2[i], side) for i in range(s2.shape[0])])
        return r.reshape(seq.shape[:-1] + vals.shape[-1:]).astype(odt, copy=False)
    if seq.ndim == 1:
        r = np.searchsorted(seq, vals, side=side, sorter=sorter)
    else:
        if sorter is not None:
            seq = np.take_along_axis(seq, sorter, axis=-1)
        lead = seq.shape[:-1]
        s2 = seq.reshape(-1, seq.shape[-1])
        v2 = vals.reshape(s2.shape[0], -1)
        r = np.stack([np.searchsorted(s2[i], v2[i], side=side) for i in range(s2.shape[0])])
        r = r.reshape(lead + vals.shape[-1:])
    return np.asarray(r).astype(odt, copy=False)


SEARCHSORTED = register("searchsorted", _searchsorted_kernel, differentiable=False)


def _side(side, right: bool) -> str:
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if side == "left" and right:
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        return side
    return "right" if right else "left"


def _common(a: Tensor, b: Tensor):
    """Both operands in their promoted dtype (torch compares in the common type)."""
    d = _dt.promote_types(a._dtype, b._dtype)
    return (a if a._dtype is d else a.to(d)), (b if b._dtype is d else b.to(d))


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False,  # noqa: A002
                 side=None, out=None, sorter=None) -> Tensor:
    """Indices where ``input`` values would be inserted into the innermost dimension of
    ``sorted_sequence`` to keep it sorted (``side="right"``/``right=True``: after equal values).

        >>> ember.searchsorted(ember.tensor([1., 3, 5]), ember.tensor([3., 6]))
        tensor([1, 3])
    """
    _tensor(sorted_sequence, "searchsorted", "sorted_sequence")
    scalar = not isinstance(input, Tensor)
    vals = _scalar_tensor(input)
    sd = _side(side, right)
    seq = sorted_sequence._data
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {list(vals._data.shape)}")
    if seq.ndim > 1 and (scalar or vals._data.shape[:-1] != seq.shape[:-1] or vals._data.ndim != seq.ndim):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {list(vals._data.shape)}")
    if sorter is not None:
        _tensor(sorter, "searchsorted", "sorter")
        if sorter._dtype is not _dt.int64:
            raise RuntimeError("torch.searchsorted(): sorter must be a tensor of long dtype but got "
                               f"{dtype_name(sorter._dtype)}")
        if sorter._data.shape != seq.shape:
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size, but got "
                               f"boundary tensor {list(seq.shape)}and got sorter tensor {list(sorter._data.shape)}")
    seq_t, val_t = _common(sorted_sequence, vals)
    odt = _dt.int32 if out_int32 else _dt.int64
    res = apply(SEARCHSORTED, (seq_t, val_t, sorter), {"side": sd, "odt": odt.np})
    return _out(res, out)


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False, out=None) -> Tensor:  # noqa: A002
    """The index of the bucket each value of ``input`` falls in, for the 1-D increasing ``boundaries``:
    ``boundaries[i-1] < x <= boundaries[i]`` (``right=True``: ``boundaries[i-1] <= x < boundaries[i]``).

        >>> ember.bucketize(ember.tensor([3., 6]), ember.tensor([1., 3, 5]))
        tensor([1, 3])
    """
    _tensor(boundaries, "bucketize", "boundaries", 2)
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries._data.ndim})")
    vals = _scalar_tensor(input)
    seq_t, val_t = _common(boundaries, vals)
    odt = _dt.int32 if out_int32 else _dt.int64
    res = apply(SEARCHSORTED, (seq_t, val_t, None), {"side": "right" if right else "left", "odt": odt.np})
    return _out(res, out)


# ---- isin ------------------------------------------------------------------------------------------------


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False, out=None) -> Tensor:
    """A bool tensor shaped like ``elements``: True where the element occurs in ``test_elements``.

        >>> ember.isin(ember.tensor([1, 2, 3]), ember.tensor([2, 3]))
        tensor([False,  True,  True])
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() received an invalid combination of arguments - got (elements and test_elements "
                        "both Python numbers): at least one of them must be a Tensor")
    e, t = _common(_scalar_tensor(elements), _scalar_tensor(test_elements))
    if e._dtype is _dt.bool:
        raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    flat = t.reshape(-1)
    if flat._data.size == 0:
        found = wrap(np.zeros(e._data.shape, dtype=np.bool_), _dt.bool)
    else:
        # binary search in the sorted test values (NaN sorts last and never equals anything)
        from .reduce_order import sort
        srt = sort(flat).values
        idx = apply(SEARCHSORTED, (srt, e, None), {"side": "left", "odt": np.int64, "nan_last": True})
        idx = idx.clamp(max=flat._data.size - 1)
        found = srt[idx] == e
    if invert:
        found = found.logical_not()
    return _out(found, out)


# ---- quantile / nanquantile ---------------------------------------------------------------------------------

_INTERP = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, op):
    from .reduce_order import sort
    _tensor(input, op, "input")
    if input._dtype not in (_dt.float32, _dt.float64):
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype")
    if isinstance(q, Tensor):
        if q._data.ndim > 1:
            raise RuntimeError(f"{op}() q must be a scalar or 1D tensor")
        if q._dtype is not input._dtype:
            raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor")
        qv = q.detach().cpu()._data.astype(input._dtype.np)       # (read on the host, as torch's checks)
        if qv.size and not ((qv >= 0) & (qv <= 1)).all():
            raise RuntimeError(f"{op}() q values must be in the range [0, 1]")
        q_scalar = q._data.ndim == 0
    else:
        if not (0 <= q <= 1):
            raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {q}")
        qv = np.asarray(q, dtype=input._dtype.np)
        q_scalar = True
    if interpolation not in _INTERP:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest, but "
                           f"got {interpolation}")
    if input._data.size == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    nd = input._data.ndim
    if dim is None:
        x = input.reshape(-1)
        out_shape = (1,) * nd if keepdim else ()
    else:
        d = wrap_dim(dim, max(nd, 1))
        x = input.unsqueeze(0) if nd == 0 else input
        x = x.movedim(d, -1)
        shp = list(input._data.shape)
        if nd and keepdim:
            shp[d] = 1
        elif nd:
            del shp[d]
        out_shape = tuple(shp)
    srt = sort(x, dim=-1).values
    n = srt._data.shape[-1]
    s = srt._data
    qv1 = qv.reshape(-1)
    batch = s.shape[:-1]
    ty = s.dtype.type
    on_host = type(s) is np.ndarray       # (a device tensor's NaN counts are read back; the gathers stay there)
    if ignore_nan:
        valid = ((~np.isnan(s)).sum(-1, keepdims=True) if on_host else
                 (~srt.isnan()).sum(-1, keepdim=True).cpu()._data).astype(s.dtype)   # (*batch, 1)
        ranks = qv1 * (valid - ty(1))
        ranks = np.where(valid == 0, ty(n - 1), ranks)                         # all NaN: the last (NaN) one
    else:
        ranks = np.broadcast_to(qv1 * ty(n - 1), batch + qv1.shape).copy()
        has_nan = np.isnan(s[..., -1:]) if on_host else srt[..., -1:].isnan().cpu()._data    # NaNs sort last
        ranks = np.where(has_nan, ty(n - 1), ranks)
    ranks = ranks.astype(s.dtype, copy=False)
    if interpolation == "lower":
        ranks = np.floor(ranks)
    elif interpolation == "higher":
        ranks = np.ceil(ranks)
    elif interpolation == "nearest":
        ranks = np.round(ranks)                                                # half to even, as torch
    below = np.floor(ranks).astype(np.int64)
    dev = srt.device

    def there(a, dt):
        t = wrap(a, dt)
        return t if on_host else t.to(dev)
    res = srt.gather(-1, there(below, _dt.int64))
    if interpolation in ("linear", "midpoint"):
        above = np.ceil(ranks).astype(np.int64)
        hi = srt.gather(-1, there(above, _dt.int64))
        w = np.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below
        res = res.lerp(hi, there(w.astype(s.dtype), input._dtype))
    # res: (*batch, nq) -> (nq, *out_shape), or out_shape for a scalar q
    res = res.movedim(-1, 0)
    nq = qv1.shape[0]
    return res.reshape(out_shape if q_scalar else (nq,) + out_shape)


def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear", out=None,  # noqa: A002
             axis=None, keepdims=None):
    """The ``q``-th quantiles of ``input`` (over all elements, or along ``dim``); a 1-D ``q`` adds a
    leading dimension. A slice containing NaN gives NaN (see ``nanquantile``).

        >>> ember.quantile(ember.tensor([1., 2, 3, 4]), 0.5)
        tensor(2.5000)
    """
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("quantile", dim, keepdim, axis, keepdims)
    return _out(rename(_quantile(input, q, dim, keepdim, interpolation, False, "quantile"), _QUANTILE), out)


def nanquantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear", out=None,  # noqa: A002
                axis=None, keepdims=None):
    """``quantile`` ignoring NaN values (NaN only where a slice is all NaN)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("nanquantile", dim, keepdim, axis, keepdims)
    return _out(rename(_quantile(input, q, dim, keepdim, interpolation, True, "nanquantile"), _QUANTILE), out)


_QUANTILE = node_class("SqueezeBackward4")      # torch's quantile ends with an in-place squeeze_


# ---- diff / trapezoid -----------------------------------------------------------------------------------------


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None, *, out=None, axis=None) -> Tensor:  # noqa: A002
    """The ``n``-th forward difference along ``dim`` (``logical_xor`` for bool), after concatenating
    ``prepend`` / ``append``.

        >>> ember.diff(ember.tensor([1, 3, 6]))
        tensor([2, 3])
    """
    if axis is not None:
        dim, _ = numpy_names("diff", dim, False, axis, None, -1)
    from .shape_join import cat as _cat
    _tensor(input, "diff", "input")
    if input._data.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, input._data.ndim)
    parts = []
    for extra in (prepend, append):
        if extra is not None:
            extra = _scalar_tensor(extra)
            if extra._data.ndim != input._data.ndim:
                raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    if prepend is not None or append is not None:
        parts = ([_scalar_tensor(prepend)] if prepend is not None else []) + [input] + \
                ([_scalar_tensor(append)] if append is not None else [])
        x = _cat(parts, d)
    else:
        x = input
    for _ in range(n):
        L = x._data.shape[d]
        if L == 0:
            break
        hi, lo = x.narrow(d, 1, L - 1), x.narrow(d, 0, L - 1)
        x = hi.logical_xor(lo) if x._dtype is _dt.bool else hi - lo
    if n == 0:
        x = x.clone() if x is input else x
    return _out(x, out)


def _check_dx_x(op, x, dx):
    if x is not None and dx is not None:
        raise TypeError(f"{op}() received an invalid combination of arguments - got (Tensor, "
                        f"dx={type(dx).__name__}, x=Tensor), "
                        "but expected one of:\n * (Tensor y, Tensor x, *, int dim = -1)\n"
                        " * (Tensor y, *, Number dx = 1, int dim = -1)")


def _x_spacing(op, y: Tensor, x: Tensor, d: int) -> Tensor:
    """The spacings ``x[i+1] - x[i]`` shaped to broadcast against the slices of ``y`` along ``d``."""
    L = y._data.shape[d]
    if x._data.ndim == 1:
        if x._data.shape[0] != L:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
        shp = [1] * y._data.ndim
        shp[d] = L
        x = x.view(*shp)
    elif x._data.shape[wrap_dim(d - y._data.ndim, x._data.ndim)] != L:
        raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
    return diff(x, dim=d - y._data.ndim)


def trapezoid(y, x=None, *, dx=None, dim: int = -1, axis=None) -> Tensor:
    """The trapezoidal rule along ``dim``: sample points ``x`` (a tensor) or a constant spacing ``dx``.

        >>> ember.trapezoid(ember.tensor([1., 2, 3]))
        tensor(4.)
    """
    if axis is not None:
        dim, _ = numpy_names("trapezoid", dim, False, axis, None, -1)
    _tensor(y, "trapezoid", "y")
    _check_dx_x("trapezoid", x, dx)
    d = wrap_dim(dim, builtins.max(y._data.ndim, 1))
    L = y._data.shape[d] if y._data.ndim else 1
    if x is not None and isinstance(x, Tensor):
        if L == 0:
            return y.sum(d) * 0
        sp = _x_spacing("trapezoid", y, x, d)
        return (sp * (y.narrow(d, 1, L - 1) + y.narrow(d, 0, L - 1))).sum(d) / 2.0
    if x is not None:
        dx = x          # trapz(y, dx) positional form
    dx = 1 if dx is None else dx
    if L == 0:
        return y.sum(d) * 0
    return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * dx


def trapz(y, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Alias of ``trapezoid``: ``trapz(y, x, *, dim=-1)`` or ``trapz(y, *, dx=1, dim=-1)``."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1, axis=None) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one element shorter than ``y`` there)."""
    if axis is not None:
        dim, _ = numpy_names("cumulative_trapezoid", dim, False, axis, None, -1)
    _tensor(y, "cumulative_trapezoid", "y")
    _check_dx_x("cumulative_trapezoid", x, dx)
    d = wrap_dim(dim, builtins.max(y._data.ndim, 1))
    L = y._data.shape[d]
    if L == 0:
        return y.narrow(d, 0, 0) * 1
    left, right = y.narrow(d, 0, L - 1), y.narrow(d, 1, L - 1)
    if x is not None:
        sp = _x_spacing("cumulative_trapezoid", y, x, d)
        return ((sp * (left + right)) / 2.0).cumsum(d)
    dx = 1 if dx is None else dx
    return (dx / 2.0 * (left + right)).cumsum(d)


# ---- dist / cov / corrcoef / renorm -------------------------------------------------------------------------------


def dist(input, other, p=2) -> Tensor:  # noqa: A002
    """The ``p``-norm of ``input - other`` (broadcast)."""
    from .reduce_norm import vector_norm
    _tensor(input, "dist", "input")
    _tensor(other, "dist", "other", 2)
    for t in (input, other):
        if not t._dtype.is_floating_point:
            raise RuntimeError(f"norm(): input dtype should be either floating point or complex. Got "
                               f"{dtype_name(t._dtype)} instead.")
    return rename(vector_norm(input - other, p), _DIST)     # torch's dist is an op of its own


_DIST = node_class("DistBackward0")


def _check_cov_weights(w, name: str, n_obs: int, dtype_ok, kind: str) -> None:
    """cov's ``fweights``/``aweights``: a vector of ``kind`` dtype, one non-negative weight per observation."""
    _tensor(w, "cov", name)
    if w._data.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                           f"{w._data.ndim} dimensions")
    if not dtype_ok(w._dtype):
        raise RuntimeError(f"cov(): expected {name} to have {kind} dtype but got {name} with "
                           f"{dtype_name(w._dtype)} dtype")
    if w._data.size != n_obs:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                           f"input but got {w._data.size} != {n_obs}")
    if w._data.size and w._data.min() < 0:
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:  # noqa: A002
    """The covariance matrix of the variables in the rows of ``input`` (observations in columns).

        >>> ember.cov(ember.tensor([[0., 1, 2], [2, 1, 0]]))
        tensor([[ 1., -1.],
                [-1.,  1.]])
    """
    _tensor(input, "cov", "input")
    if input._data.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input._data.ndim} dimensions")
    x = input.view(1, -1) if input._data.ndim < 2 else input
    if not x._dtype.is_floating_point:
        x = x.to(_dt.get_default_dtype())
    n_obs = x._data.shape[1]
    w = None
    if fweights is not None:
        _check_cov_weights(fweights, "fweights", n_obs, lambda d: d in _INTEGRAL, "integral")
        w = fweights
    if aweights is not None:
        _check_cov_weights(aweights, "aweights", n_obs, lambda d: d.is_floating_point, "floating point")
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.mean(1)
        w_sum = n_obs
        norm = n_obs - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if aweights is not None and correction:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
        else:
            norm = w_sum - correction
    if (float(norm) if isinstance(norm, Tensor) else norm) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", stacklevel=2)
        norm = norm * 0 if isinstance(norm, Tensor) else 0
    xm = x - avg.unsqueeze(1)
    c = xm.matmul((xm if w is None else xm * w).t())
    return (c / norm).squeeze()


def corrcoef(input) -> Tensor:  # noqa: A002
    """Pearson correlation coefficients of the variables in the rows of ``input``."""
    c = cov(input)
    if c._data.ndim == 0:
        return c / c
    sd = c.diagonal().sqrt()
    c = c / sd.unsqueeze(1)
    c = c / sd.unsqueeze(0)
    return c.clamp(-1, 1)


def renorm(input, p, dim=None, maxnorm=None, *, axis=None) -> Tensor:  # noqa: A002
    """Rescale each slice ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` to norm ``maxnorm``."""
    if axis is not None or dim is None or maxnorm is None:
        dim = dim_from_axis("renorm", dim, axis, maxnorm=maxnorm)
    from .reduce_norm import vector_norm
    from .binary import where
    from .creation import ones_like
    _tensor(input, "renorm", "input")
    if not input._dtype.is_floating_point:
        raise RuntimeError(f"renorm: expected a floating point tensor, got {dtype_name(input._dtype)}")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    nd = input._data.ndim
    if nd <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {nd} dimensions")
    d = wrap_dim(dim, nd)
    rdims = [i for i in range(nd) if i != d]
    norm = vector_norm(input, p, rdims, keepdim=True)
    # torch's derivative includes the norm's dependence on input, as this composition does
    factor = where(norm > maxnorm, maxnorm / (norm + 1e-7), ones_like(norm))
    return rename(input * factor, node_class("RenormBackward0"))


def renorm_(self, p, dim: int, maxnorm) -> Tensor:
    """In-place ``renorm``."""
    from .inplace import write_result
    return write_result(self, lambda t: renorm(t, p, dim, maxnorm), "renorm_")


# ---- gradient / vander ------------------------------------------------------------------------------------------


def _grad_along(f: Tensor, d: int, h, edge_order: int) -> Tensor:
    """NumPy's second-order central differences along ``d``; ``h`` is a number or 1-D coordinates."""
    from .shape_join import cat
    n = f._data.shape[d]
    nd = f._data.ndim

    def sl(start, length):
        return f.narrow(d, start, length)

    def along(v: Tensor) -> Tensor:             # a 1-D tensor shaped to broadcast along d
        shp = [1] * nd
        shp[d] = -1
        return v.reshape(shp)

    if isinstance(h, Tensor):
        dx = diff(h.to(f._dtype))
        dx1, dx2 = dx.narrow(0, 0, n - 2), dx.narrow(0, 1, n - 2)
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        interior = along(a) * sl(0, n - 2) + along(b) * sl(1, n - 2) + along(c) * sl(2, n - 2)
        if edge_order == 1:
            first = (sl(1, 1) - sl(0, 1)) / dx[0]
            last = (sl(n - 1, 1) - sl(n - 2, 1)) / dx[n - 2]
        else:
            d1, d2 = dx[0], dx[1]
            first = (-(2 * d1 + d2) / (d1 * (d1 + d2)) * sl(0, 1) + (d1 + d2) / (d1 * d2) * sl(1, 1)
                     - d1 / (d2 * (d1 + d2)) * sl(2, 1))
            d1, d2 = dx[n - 3], dx[n - 2]
            last = (d2 / (d1 * (d1 + d2)) * sl(n - 3, 1) - (d2 + d1) / (d1 * d2) * sl(n - 2, 1)
                    + (2 * d2 + d1) / (d2 * (d1 + d2)) * sl(n - 1, 1))
    else:
        interior = (sl(2, n - 2) - sl(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first = (sl(1, 1) - sl(0, 1)) / h
            last = (sl(n - 1, 1) - sl(n - 2, 1)) / h
        else:
            first = (-1.5 * sl(0, 1) + 2.0 * sl(1, 1) - 0.5 * sl(2, 1)) / h
            last = (0.5 * sl(n - 3, 1) - 2.0 * sl(n - 2, 1) + 1.5 * sl(n - 1, 1)) / h
    return cat([first, interior, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order: int = 1):  # noqa: A002
    """Estimate the derivative of sampled values along each dim (or those in ``dim``) with second-order
    central differences inside and first/second-order one-sided differences at the edges (NumPy's
    ``gradient``). ``spacing``: a number, one number per dim, or one 1-D coordinate tensor per dim."""
    _tensor(input, "gradient", "input")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    nd = input._data.ndim
    dims = list(range(nd)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    dims = [wrap_dim(d, nd) for d in dims]
    for d in dims:
        if input._data.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
        hs = list(spacing)
    else:
        hs = [spacing] * len(dims)
    f = input if input._dtype.is_floating_point else input.to(_dt.get_default_dtype())
    out = []
    for d, h in zip(dims, hs):
        if isinstance(h, Tensor) and h._data.ndim == 0:
            h = float(h.item())
        if isinstance(h, Tensor) and h._data.shape[0] != input._data.shape[d]:
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and to have the same "
                               f"size as input at dim {d}")
        out.append(_grad_along(f, d, h, edge_order))
    return tuple(out)


def vander(x, N=None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of the 1-D ``x``: columns ``x**(N-1), ..., x, 1`` (reversed if ``increasing``)."""
    from .shape_join import stack
    _tensor(x, "vander", "x")
    if x._data.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._data.shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    xx = x if x._dtype is not _dt.bool else x.long()
    if xx._dtype in _INTEGRAL and xx._dtype is not _dt.int64:
        xx = xx.long()
    cols = []
    cur = None
    for k in range(n):
        cur = (xx * 0 + 1) if k == 0 else cur * xx
        cols.append(cur)
    if not cols:
        return wrap(np.zeros((x._data.shape[0], 0), dtype=xx._dtype.np), xx._dtype)
    res = stack(cols, 1)
    return res if increasing else res.flip(1)


def linalg_vander(x, *, N=None) -> Tensor:
    """``linalg.vander``: increasing powers ``x**0 .. x**(N-1)`` along a new last dim (batches allowed)."""
    from .shape_join import stack
    _tensor(x, "linalg.vander", "x")
    if x._data.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x._data.shape[-1] if N is None else int(N)
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    xx = x.long() if x._dtype is _dt.bool or (x._dtype in _INTEGRAL and x._dtype is not _dt.int64) else x
    cols, cur = [], None
    for k in range(n):
        cur = (xx * 0 + 1) if k == 0 else cur * xx
        cols.append(cur)
    return stack(cols, -1)


for _name, _fn in [("quantile", quantile),
                   ("nanquantile", nanquantile), ("diff", diff), ("dist", dist), ("cov", cov),
                   ("corrcoef", corrcoef), ("renorm", renorm)]:
    attach(_name, _fn)
for _name, _fn in [("searchsorted", searchsorted), ("bucketize", bucketize), ("isin", isin), ("gradient", gradient),
                   ("vander", vander),
                   ("trapezoid", trapezoid), ("trapz", trapz), ("cumulative_trapezoid", cumulative_trapezoid)]:
    attach(_name, _fn, method=False)
attach("renorm_", renorm_, function=False)
