"""Reductions: sum/mean/max/min, arg-reductions, var/std, norms, all/any, cumsum, topk, sort.
"""
from __future__ import annotations

import numpy as np

from ._registry import conv, _out, _ndim, _scalar, _rank_axes


_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
           "prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}


@conv(*_REDUCE)
def _reduce(b, node, node2):
    x = node.inputs[0]
    out_dt = node.outputs[0].dtype.np
    n = b.cast(b.name(x), x.dtype.np, out_dt)
    axes = _rank_axes(node.attrs.get("axis"), _ndim(x))
    if not axes and _ndim(x) == 0:
        _out(b, node, b.op("Identity", [n]))
        return
    _out(b, node, b.reduce(_REDUCE[node.op.name], n, axes, bool(node.attrs.get("keepdims", False))))


@conv("max_dim", "min_dim")
def _max_dim(b, node, node2):
    x = b.name(node.inputs[0])
    axis = int(node.attrs["axis"]) % max(_ndim(node.inputs[0]), 1)
    keep = bool(node.attrs["keepdims"])
    red = "ReduceMax" if node.op.name == "max_dim" else "ReduceMin"
    _out(b, node, b.reduce(red, x, [axis], keep))
    _out(b, node, b.op("ArgMax" if node.op.name == "max_dim" else "ArgMin", [x], axis=axis, keepdims=int(keep)), 1)


@conv("argmax", "argmin")
def _argmax(b, node, node2):
    x = b.name(node.inputs[0])
    axis = node.attrs.get("axis")
    keep = bool(node.attrs.get("keepdims", False))
    op = "ArgMax" if node.op.name == "argmax" else "ArgMin"
    if axis is None or (isinstance(axis, tuple) and len(axis) != 1):
        flat = b.op("Reshape", [x, b.ints([-1])])
        r = b.op(op, [flat], axis=0, keepdims=0)
        if keep:
            r = b.op("Reshape", [r, b.ints([1] * _ndim(node.inputs[0]))])
    else:
        axis = axis[0] if isinstance(axis, tuple) else axis
        r = b.op(op, [x], axis=int(axis) % _ndim(node.inputs[0]), keepdims=int(keep))
    _out(b, node, r)


def _count(b, x, axes):
    """Number of elements over ``axes`` of Value ``x`` as a float tensor (from its run-time shape if needed)."""
    dt = x.dtype.np
    pairs = b.shape(x)
    if all(pairs[a][0] == pairs[a][1] for a in axes):
        return None, float(np.prod([pairs[a][0] for a in axes]))
    sizes = b.op("Gather", [b.op("Shape", [b.name(x)]), b.ints(axes)], axis=0)
    return b.cast(b.reduce("ReduceProd", sizes, [0], False), np.int64, dt), None


@conv("var", "std")
def _var(b, node, node2):
    x = node.inputs[0]
    dt = x.dtype.np
    n = b.name(x)
    axes = _rank_axes(node.attrs.get("axis"), _ndim(x))
    corr = float(node.attrs.get("correction", 1))
    keep = bool(node.attrs.get("keepdims", False))
    d = b.op("Sub", [n, b.reduce("ReduceMean", n, axes, True)])
    ss = b.reduce("ReduceSum", b.op("Mul", [d, d]), axes, keep)
    cnt_t, cnt = _count(b, x, axes)
    if cnt_t is None:
        v = b.op("Div", [ss, _scalar(b, max(cnt - corr, 0.0), dt)])
    else:
        v = b.op("Div", [ss, b.op("Sub", [cnt_t, _scalar(b, corr, dt)])])
    if node.op.name == "std" or node.attrs.get("sqrt"):
        v = b.op("Sqrt", [v])
    _out(b, node, v)


@conv("norm")
def _norm(b, node, node2):
    x = node.inputs[0]
    dt = node.outputs[0].dtype.np
    n = b.cast(b.name(x), x.dtype.np, dt)
    axes = _rank_axes(node.attrs.get("axis"), _ndim(x))
    keep = bool(node.attrs.get("keepdims", False))
    p = node.attrs.get("ord", 2)
    p = 2.0 if p is None or p == "fro" else p
    if p == 2:
        r = b.reduce("ReduceL2", n, axes, keep)
    elif p == 1:
        r = b.reduce("ReduceL1", n, axes, keep)
    elif p == float("inf"):
        r = b.reduce("ReduceMax", b.op("Abs", [n]), axes, keep)
    elif p == float("-inf"):
        r = b.reduce("ReduceMin", b.op("Abs", [n]), axes, keep)
    elif p == 0:
        nz = b.cast(b.op("Not", [b.op("Equal", [n, _scalar(b, 0, dt)])]), np.bool_, dt)
        r = b.reduce("ReduceSum", nz, axes, keep)
    else:
        s = b.reduce("ReduceSum", b.op("Pow", [b.op("Abs", [n]), _scalar(b, p, dt)]), axes, keep)
        r = b.op("Pow", [s, _scalar(b, 1.0 / p, dt)])
    _out(b, node, r)


@conv("all", "any")
def _all_any(b, node, node2):
    x = node.inputs[0]
    n = b.cast(b.cast(b.name(x), x.dtype.np, np.bool_), np.bool_, np.int64)
    axes = _rank_axes(node.attrs.get("axis"), _ndim(x))
    keep = bool(node.attrs.get("keepdims", False))
    is_any = node.op.name == "any" or node.attrs.get("any_")
    r = b.reduce("ReduceMax" if is_any else "ReduceMin", n, axes, keep) if axes else n
    _out(b, node, b.cast(r, np.int64, np.bool_))


@conv("cumsum")
def _cumsum(b, node, node2):
    x = node.inputs[0]
    dt = node.outputs[0].dtype.np
    n = b.cast(b.name(x), x.dtype.np, dt)
    axis = int(node.attrs["axis"]) % max(_ndim(x), 1)
    _out(b, node, b.op("CumSum", [n, b.const(np.array(axis, np.int64))],
                       reverse=int(bool(node.attrs.get("reverse", False)))))


@conv("topk")
def _topk(b, node, node2):
    x = node.inputs[0]
    a = node.attrs
    axis = int(a["axis"]) % _ndim(x)
    vals, idx = b.op("TopK", [b.name(x), b.ints([int(a["k"])])], n_out=2, axis=axis,
                     largest=int(bool(a.get("largest", True))), sorted=1)
    _out(b, node, vals)
    _out(b, node, idx, 1)


@conv("sort")
def _sort(b, node, node2):
    x = node.inputs[0]
    axis = int(node.attrs["axis"]) % _ndim(x)
    k1, k2 = b.shape(x)[axis]
    b.node = node
    k = b.shape_tensor([(k1, k2)], "the sorted dim")
    vals, idx = b.op("TopK", [b.name(x), k], n_out=2, axis=axis,
                     largest=int(bool(node.attrs.get("descending", False))), sorted=1)
    _out(b, node, vals)
    _out(b, node, idx, 1)
