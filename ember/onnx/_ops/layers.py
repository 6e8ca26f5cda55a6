"""Linear algebra and network layers: matmul, einsum, linear, convolutions, pooling, the attention
softmax and the normalizations.
"""
from __future__ import annotations

import numpy as np

from ...compiler.ir import Value
from ._registry import conv, _inp, _out, _is_float, _ndim, _scalar, _unsupported


@conv("matmul")
def _matmul(b, node, node2):
    dt = node.outputs[0].dtype.np
    _out(b, node, b.op("MatMul", [_inp(b, node, 0, dt), _inp(b, node, 1, dt)]))


@conv("einsum")
def _einsum(b, node, node2):
    subs = node.attrs["subs"]
    out = node.attrs.get("out")
    eq = ",".join(subs) + "->" + out if isinstance(subs, (list, tuple)) else str(subs)
    ins = [b.name(v) for v in node.inputs if isinstance(v, Value)]
    _out(b, node, b.op("Einsum", ins, equation=eq))


@conv("linear")
def _linear(b, node, node2):
    x, w, bias = node.inputs[0], node.inputs[1], node.inputs[2]
    wv = b.const_value(w)
    if _ndim(x) == 2 and _ndim(w) == 2:
        ins = [b.name(x), b.name(w)] + ([b.name(bias)] if bias is not None else [])
        _out(b, node, b.op("Gemm", ins, transB=1))
        return
    if wv is not None and _ndim(w) == 2:
        wt = b.initializer(np.ascontiguousarray(wv.T), b.name(w) + "_t")
    else:
        wt = b.op("Transpose", [b.name(w)])
    r = b.op("MatMul", [b.name(x), wt])
    if bias is not None:
        r = b.op("Add", [r, b.name(bias)])
    _out(b, node, r)


def _onnx_pads(pad) -> list:
    """ember's (before0, after0, before1, after1, ...) as ONNX's [before0, before1, ..., after0, after1, ...]."""
    p = [int(v) for v in pad]
    return p[0::2] + p[1::2]


@conv("conv2d", "conv3d")
def _conv2d(b, node, node2):
    x, w, bias = node.inputs[:3]
    a = node.attrs
    ins = [b.name(x), b.name(w)] + ([b.name(bias)] if bias is not None else [])
    _out(b, node, b.op("Conv", ins, kernel_shape=[int(k) for k in w.shape[2:]], strides=list(a["stride"]),
                       pads=_onnx_pads(a["pad"]), dilations=list(a["dil"]), group=int(a["groups"])))


@conv("conv_transpose2d", "conv_transpose3d", dynamic=("out_hw",))
def _conv_t(b, node, node2):
    y, w, bias = node.inputs[:3]
    a = node.attrs
    pad = [int(v) for v in a["pad"]]
    k = [int(v) for v in w.shape[2:]]
    s, d = list(a["stride"]), list(a["dil"])
    opad = [int(o - ((n - 1) * s[i] + d[i] * (k[i] - 1) + 1 - pad[2 * i] - pad[2 * i + 1]))
            for i, (n, o) in enumerate(zip(y.shape[2:], a["out_hw"]))]
    ins = [b.name(y), b.name(w)] + ([b.name(bias)] if bias is not None else [])
    _out(b, node, b.op("ConvTranspose", ins, kernel_shape=k, strides=s, pads=_onnx_pads(pad), dilations=d,
                       group=int(a["groups"]), output_padding=opad))


@conv("max_pool2d", "max_pool3d")
def _max_pool(b, node, node2):
    a = node.attrs
    p = [int(v) for v in a["p"]]
    _out(b, node, b.op("MaxPool", [b.name(node.inputs[0])], kernel_shape=list(a["k"]), strides=list(a["s"]),
                       pads=p + p, dilations=list(a["d"]), ceil_mode=int(bool(a["ceil"]))))
    # output 1 (torch-style per-plane indices) is left unset: ONNX's indices count over the whole tensor


@conv("avg_pool2d", "avg_pool3d")
def _avg_pool(b, node, node2):
    a = node.attrs
    if a.get("div"):
        raise _unsupported(b, node, f"{node.op.name} with divisor_override")
    p = [int(v) for v in a["p"]]
    _out(b, node, b.op("AveragePool", [b.name(node.inputs[0])], kernel_shape=list(a["k"]), strides=list(a["s"]),
                       pads=p + p, ceil_mode=int(bool(a["ceil"])), count_include_pad=int(bool(a["cip"]))))


@conv("adaptive_max_pool2d", "adaptive_max_pool3d")
def _adaptive_max(b, node, node2):
    if any(int(o) != 1 for o in node.attrs["out_hw"]):
        raise _unsupported(b, node, f"{node.op.name} to a size other than 1")
    _out(b, node, b.op("GlobalMaxPool", [b.name(node.inputs[0])]))


@conv("sdpa_softmax")
def _sdpa_softmax(b, node, node2):
    x, bias = node.inputs[0], node.inputs[1]
    dt = x.dtype.np
    s = b.name(x)
    scale = float(node.attrs.get("scale", 1.0))
    if scale != 1.0:
        s = b.op("Mul", [s, _scalar(b, scale, dt)])
    if bias is not None:
        s = b.op("Add", [s, b.cast(b.name(bias), bias.dtype.np, dt)])
    _out(b, node, b.op("Softmax", [s], axis=-1))


# normalization: norm_stats gives mean and variance of x seen in a canonical shape; the normalize op applies
# them. LayerNormalization / BatchNormalization when the pattern allows, else the formula.

@conv("norm_stats", dynamic=("shape",))
def _norm_stats(b, node, node2):
    x = node.inputs[0]
    dt = x.dtype.np
    xc = b.op("Reshape", [b.name(x), b.shape_tensor(b.attr_pairs(node2, "shape"), "the statistics' view",
                                                    infer_one=True)])
    if _is_float(dt) and dt != np.float32 and dt.itemsize < 4:
        xc = b.cast(xc, dt, np.float32)
    axes = list(node.attrs["axes"])
    if node.attrs.get("center", True):
        mean = b.reduce("ReduceMean", xc, axes, True)
        d = b.op("Sub", [xc, mean])
        _out(b, node, mean, 0)
        _out(b, node, b.reduce("ReduceMean", b.op("Mul", [d, d]), axes, True), 1)
    else:
        _out(b, node, b.reduce("ReduceMean", b.op("Mul", [xc, xc]), axes, True), 1)


def _from_stats(b, node, v, x):
    """True when Value ``v`` is an output of a norm_stats node over ``x``."""
    p = b.producer.get(v.id) if isinstance(v, Value) else None
    return p is not None and p.op.name == "norm_stats" and p.inputs[0] is x


@conv("native_layer_norm", "native_batch_norm", "native_group_norm", "rms_norm",
      dynamic=("shape", "sshape"))
def _normalize(b, node, node2):
    x, w, bias, mean, var = node.inputs[:5]
    a = node.attrs
    eps = float(a["eps"])
    dt = x.dtype.np
    nd = _ndim(x)
    center = a.get("center", True)
    if node.op.name == "native_layer_norm" and b.opset >= 17 and center and tuple(a["axes"]) == (1,) \
            and _from_stats(b, node, mean, x) and _from_stats(b, node, var, x):
        D = int(a["shape"][1])
        k = next((k for k in range(nd + 1) if int(np.prod(x.shape[k:])) == D), None)
        if k is not None and k < nd and (w is None or tuple(w.shape) == tuple(x.shape[k:])):
            scale = b.name(w) if w is not None else b.const(np.ones(x.shape[k:], dt))
            ins = [b.name(x), scale] + ([b.name(bias)] if bias is not None else [])
            _out(b, node, b.op("LayerNormalization", ins, axis=k, epsilon=eps))
            return
    if node.op.name == "native_batch_norm" and a.get("const") and center and nd >= 2 and mean is not None \
            and tuple(mean.shape) == (x.shape[1],):
        C = x.shape[1]
        scale = b.name(w) if w is not None else b.const(np.ones(C, dt))
        shift = b.name(bias) if bias is not None else b.const(np.zeros(C, dt))
        _out(b, node, b.op("BatchNormalization", [b.name(x), scale, shift, b.name(mean), b.name(var)], epsilon=eps))
        return
    # the formula, in the canonical shape
    xc = b.op("Reshape", [b.name(x), b.shape_tensor(b.attr_pairs(node2, "shape"), "the normalized view",
                                                    infer_one=True)])
    sshape = b.shape_tensor(b.attr_pairs(node2, "sshape"), "the statistics' shape", infer_one=True)
    cdt = np.float32 if dt.itemsize < 4 and _is_float(dt) else dt
    xc = b.cast(xc, dt, cdt)
    v = b.op("Reshape", [b.cast(b.name(var), var.dtype.np, cdt), sshape])
    if center:
        m = b.op("Reshape", [b.cast(b.name(mean), mean.dtype.np, cdt), sshape])
        xc = b.op("Sub", [xc, m])
    y = b.op("Div", [xc, b.op("Sqrt", [b.op("Add", [v, _scalar(b, eps, cdt)])])])
    wshape = b.ints(a["wshape"])
    if w is not None:
        y = b.op("Mul", [y, b.op("Reshape", [b.cast(b.name(w), w.dtype.np, cdt), wshape])])
    if bias is not None:
        y = b.op("Add", [y, b.op("Reshape", [b.cast(b.name(bias), bias.dtype.np, cdt), wshape])])
    y = b.op("Reshape", [y, b.op("Shape", [b.name(x)])])
    _out(b, node, y, natural=cdt)
