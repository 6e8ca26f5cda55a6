"""Counting values: bincount, histc and histogram (torch's range rules for each, and its errors)."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import register, apply, attach, dtype_name
from .inplace import copy_out
from .stats import _INTEGRAL, _out, _tensor


# ---- bincount --------------------------------------------------------------------------------------------


def _bincount_kernel(x, w, minlength, odt):
    if w is not None:
        w = w.astype(np.float64)
    r = np.bincount(x.astype(np.int64, copy=False), weights=w, minlength=minlength)
    return r.astype(odt, copy=False)


BINCOUNT = register("bincount", _bincount_kernel, differentiable=False)


def bincount(input, weights=None, minlength: int = 0) -> Tensor:  # noqa: A002
    """Count occurrences of each non-negative integer in the 1-D ``input`` (weighted by ``weights``).

        >>> ember.bincount(ember.tensor([1, 3, 3]))
        tensor([0, 1, 0, 2])
    """
    _tensor(input, "bincount", "input")
    if input._dtype not in _INTEGRAL:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{dtype_name(input._dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    x = input._data
    if x.ndim != 1 or (x.size and (x.min() if type(x) is np.ndarray else input.min().item()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    odt = _dt.int64
    if weights is not None:
        _tensor(weights, "bincount", "weights", 2)
        if weights._data.ndim != 1 or weights._data.shape[0] != x.shape[0]:
            raise RuntimeError("weights should be 1-d and have the same length as input")
        # torch keeps float32 weights in float32 and accumulates every other weight dtype in float64
        odt = _dt.float32 if weights._dtype is _dt.float32 else _dt.float64
    return apply(BINCOUNT, (input, weights), {"minlength": int(minlength), "odt": odt.np})


# ---- histc / histogram -------------------------------------------------------------------------------------


def _histc_kernel(x, bins, lo, hi):
    """``lo``/``hi`` as the caller gave them: the range rules (min == max: the data's own range) apply
    here, inside the op, so a compiled replay takes the range from each call's data."""
    x = x.reshape(-1)
    lo, hi = _histogram_range("torch.histc", x, lo, hi)      # NaN data: a NaN range, an error, as torch
    x = x[(x >= lo) & (x <= hi)]                               # NaN and out-of-range values drop out
    # torch's bin position: (x - min) * bins / (max - min), in the input's precision
    pos = ((x - x.dtype.type(lo)) * x.dtype.type(bins) / (x.dtype.type(hi) - x.dtype.type(lo))).astype(np.int64)
    pos = np.minimum(pos, bins - 1)                            # x == max belongs to the last bin
    return np.bincount(pos, minlength=bins).astype(x.dtype)


HISTC = register("histc", _histc_kernel, differentiable=False)


def _histogram_range(op: str, data: np.ndarray, lo, hi):
    """torch's range rules: min == max means the data's own range; a degenerate range widens by 1."""
    lo, hi = float(lo), float(hi)
    if lo > hi:
        raise RuntimeError(f"{op}: max must be larger than min")
    if lo == hi and data.size:
        lo, hi = float(np.min(data)), float(np.max(data))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"{op}: range of [{_num(lo)}, {_num(hi)}] is not finite")
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    return lo, hi


def _histogramdd_range(data: np.ndarray, range):  # noqa: A002
    """torch.histogram's range rules (its histogramdd's, unlike histc's): the data's min and max (NaN
    included) or [0, 1] for no data when no range is given; a given range is used as is; a degenerate
    range widens by 0.5 on each side."""
    if range is None:
        lo, hi = (float(np.min(data)), float(np.max(data))) if data.size else (0.0, 1.0)
    else:
        lo, hi = float(range[0]), float(range[1])
        if lo > hi:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {_num(lo)} max "
                               f"{_num(hi)} for dimension 0")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histogramdd: dimension 0's range [{_num(lo)}, {_num(hi)}] is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def _num(v: float) -> str:
    if not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")
    return str(int(v)) if v == int(v) else repr(v)


def histc(input, bins: int = 100, min=0, max=0, *, out=None) -> Tensor:  # noqa: A002
    """Histogram with ``bins`` equal-width bins over [min, max] (the data's range when min == max).

        >>> ember.histc(ember.tensor([1., 2, 1]), bins=4, min=0, max=3)
        tensor([0., 2., 1., 0.])
    """
    _tensor(input, "histc", "input")
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{dtype_name(input._dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if float(min) > float(max):
        raise RuntimeError("torch.histc: max must be larger than min")
    return _out(apply(HISTC, (input,), {"bins": int(bins), "lo": float(min), "hi": float(max)}), out)


def _histogram_kernel(x, edges, w, density):
    hist, _ = np.histogram(x.reshape(-1).astype(np.float64), bins=edges.astype(np.float64),
                           weights=None if w is None else w.reshape(-1).astype(np.float64), density=density)
    return hist.astype(x.dtype)


HISTOGRAM = register("histogram", _histogram_kernel, differentiable=False)


class _HistogramResult(tuple):
    """``torch.return_types.histogram``: a (hist, bin_edges) pair with named fields."""

    def __new__(cls, hist, bin_edges):
        return tuple.__new__(cls, (hist, bin_edges))

    hist = property(lambda self: self[0])
    bin_edges = property(lambda self: self[1])

    def __repr__(self):
        return f"ember.return_types.histogram(\nhist={self[0]!r},\nbin_edges={self[1]!r})"


def histogram(input, bins=100, *, range=None, weight=None, density: bool = False, out=None):  # noqa: A002
    """``(hist, bin_edges)``: ``bins`` equal-width bins over ``range`` (default: the data's range), or
    the given 1-D tensor of bin edges; optional per-element ``weight`` and ``density`` normalisation."""
    _tensor(input, "histogram", "input")
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{dtype_name(input._dtype)}'")
    data = input._data
    if isinstance(bins, Tensor):
        if bins._data.ndim != 1 or bins._data.shape[0] < 2:
            raise RuntimeError("torch.histogram(): bins tensor should have one dimension and at least 2 elements")
        edges = bins._data.astype(data.dtype)
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        lo, hi = _histogramdd_range(data, range)
        edges = np.linspace(lo, hi, int(bins) + 1).astype(data.dtype)
    if weight is not None:
        _tensor(weight, "histogram", "weight")
        if weight._data.shape != data.shape:
            raise RuntimeError("torch.histogram(): if weight tensor is provided it should have the same shape "
                               "as the input tensor excluding its innermost dimension")
    hist = apply(HISTOGRAM, (input, wrap(edges, input._dtype), weight), {"density": bool(density)})
    res = _HistogramResult(hist, wrap(edges.copy(), input._dtype))
    if out is not None:
        copy_out(res[0], out[0])
        copy_out(res[1], out[1])
        return _HistogramResult(out[0], out[1])
    return res


for _name, _fn in [("bincount", bincount), ("histc", histc), ("histogram", histogram)]:
    attach(_name, _fn)
