"""Shapes and indexing: views, expand, cat, basic indexing, flip, repeat, tril/triu, padding,
embedding, index_select, gather.
"""
from __future__ import annotations

import numpy as np

from ...compiler.ir import Value
from ._registry import INT64_MAX, INT64_MIN, conv, _out, _ndim, _scalar, _rank_axes


@conv("view", "reshape_copy", dynamic=("shape",))
def _reshape(b, node, node2):
    pairs = b.attr_pairs(node2, "shape")
    shp = b.shape_tensor(pairs, "the target shape", infer_one=True)
    _out(b, node, b.op("Reshape", [b.name(node.inputs[0]), shp]))


@conv("permute")
def _permute(b, node, node2):
    _out(b, node, b.op("Transpose", [b.name(node.inputs[0])], perm=[int(a) for a in node.attrs["axes"]]))


@conv("expand", dynamic=("shape",))
def _expand(b, node, node2):
    x = node.inputs[0]
    pairs = b.attr_pairs(node2, "shape")
    xin = b.shape(x)
    off = len(pairs) - len(xin)
    fixed = []
    for i, (a1, a2) in enumerate(pairs):
        j = i - off
        if a1 != a2 and j >= 0 and xin[j] == (a1, a2):
            fixed.append((1, 1))                # the input already has this (dynamic) size
        else:
            fixed.append((a1, a2))
    shp = b.shape_tensor(fixed, "the expanded shape")
    _out(b, node, b.op("Expand", [b.name(x), shp]))


@conv("cat", dynamic=("sizes",))
def _cat(b, node, node2):
    dt = np.dtype(node.attrs.get("dt") or node.outputs[0].dtype.np)
    ins = [b.cast(b.name(v), v.dtype.np, dt) for v in node.inputs if isinstance(v, Value)]
    _out(b, node, b.op("Concat", ins, axis=int(node.attrs["axis"])), natural=dt)


def _expand_key(key, nd):
    key = list(key) if isinstance(key, tuple) else [key]
    real = sum(1 for k in key if k is not None and k is not Ellipsis)
    pos = next((i for i, k in enumerate(key) if k is Ellipsis), None)
    fill = [slice(None)] * (nd - real)
    if pos is None:
        return key + fill
    return key[:pos] + fill + key[pos + 1:]


@conv("getitem_basic", dynamic=("key",))
def _getitem(b, node, node2):
    x = node.inputs[0]
    nd = _ndim(x)
    k1 = _expand_key(node.attrs["key"], nd)
    k2 = _expand_key(node2.attrs["key"], nd) if node2 is not None else k1
    if len(k1) != len(k2):
        raise ValueError("ember.onnx.export: an index changes with the size of a dynamic axis")
    starts, ends, axes, steps, squeeze, unsq = [], [], [], [], [], []
    d = 0
    out_pos = 0
    for i1, i2 in zip(k1, k2):
        if i1 is None:
            unsq.append(out_pos)
            out_pos += 1
            continue
        if isinstance(i1, slice):
            step = 1 if i1.step is None else int(i1.step)
            s1 = i1.start if i1.start is not None else (0 if step > 0 else -1)
            s2 = i2.start if i2.start is not None else (0 if step > 0 else -1)
            e1 = i1.stop if i1.stop is not None else (INT64_MAX if step > 0 else INT64_MIN)
            e2 = i2.stop if i2.stop is not None else (INT64_MAX if step > 0 else INT64_MIN)
            if not (i1.start in (None, 0) and i1.stop is None and step == 1 and i2.start in (None, 0)
                    and i2.stop is None):
                starts.append((int(s1), int(s2)))
                ends.append((int(e1), int(e2)))
                axes.append(d)
                steps.append(step)
            out_pos += 1
        else:
            i1, i2 = int(i1), int(i2)
            starts.append((i1, i2))
            ends.append((i1 + 1, i2 + 1) if i1 != -1 else (INT64_MAX, INT64_MAX))
            axes.append(d)
            steps.append(1)
            squeeze.append(d)
        d += 1
    r = b.name(x)
    if axes:
        b.node = node
        st = b.shape_tensor(starts, "a slice start")
        en = b.shape_tensor(ends, "a slice end")
        r = b.op("Slice", [r, st, en, b.ints(axes), b.ints(steps)])
    if squeeze:
        r = b.squeeze(r, squeeze)
    if unsq:
        r = b.unsqueeze(r, unsq)
    if r == b.name(x):
        r = b.op("Identity", [r])
    _out(b, node, r)


@conv("flip")
def _flip(b, node, node2):
    axes = _rank_axes(node.attrs["axes"], _ndim(node.inputs[0]))
    n = len(axes)
    _out(b, node, b.op("Slice", [b.name(node.inputs[0]), b.ints([-1] * n), b.ints([INT64_MIN] * n), b.ints(axes),
                                 b.ints([-1] * n)]))


@conv("repeat")
def _repeat(b, node, node2):
    x = node.inputs[0]
    reps = [int(r) for r in node.attrs["reps"]]
    n = b.name(x)
    extra = len(reps) - _ndim(x)
    if extra > 0:
        n = b.unsqueeze(n, list(range(extra)))
    _out(b, node, b.op("Tile", [n, b.ints(reps)]))


@conv("tril", "triu")
def _tri(b, node, node2):
    k = int(node.attrs.get("k", 0))
    _out(b, node, b.op("Trilu", [b.name(node.inputs[0]), b.const(np.array(k, np.int64))],
                       upper=int(node.op.name == "triu")))


@conv("constant_pad_nd")
def _pad(b, node, node2):
    x = node.inputs[0]
    pads = node.attrs["pads"]
    flat = [int(p[0]) for p in pads] + [int(p[1]) for p in pads]
    val = _scalar(b, node.attrs.get("value", 0), x.dtype.np)
    _out(b, node, b.op("Pad", [b.name(x), b.ints(flat), val], mode="constant"))


@conv("embedding")
def _embedding(b, node, node2):
    w, idx = node.inputs[0], node.inputs[1]
    _out(b, node, b.op("Gather", [b.name(w), b.cast(b.name(idx), idx.dtype.np, np.int64)], axis=0))


@conv("index_select")
def _index_select(b, node, node2):
    x, idx = node.inputs[0], node.inputs[1]
    axis = int(node.attrs["dim"]) % max(_ndim(x), 1)
    _out(b, node, b.op("Gather", [b.name(x), b.cast(b.name(idx), idx.dtype.np, np.int64)], axis=axis))


@conv("gather")
def _gather(b, node, node2):
    x, idx = node.inputs[0], node.inputs[1]
    axis = int(node.attrs["dim"]) % max(_ndim(x), 1)
    _out(b, node, b.op("GatherElements", [b.name(x), b.cast(b.name(idx), idx.dtype.np, np.int64)], axis=axis))
