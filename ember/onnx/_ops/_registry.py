"""The registry of converters (``CONVERTERS``, ``MIN_OPSET_OF``, the ``@conv`` decorator) and the
helpers every op family uses to read inputs, set outputs and make constants.
"""
from __future__ import annotations

import numpy as np

from ...compiler.ir import Value

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


class _Conv:
    __slots__ = ("fn", "dynamic")

    def __init__(self, fn, dynamic):
        self.fn = fn
        self.dynamic = frozenset(dynamic)


CONVERTERS: dict = {}
MIN_OPSET_OF: dict = {}


def conv(*names, dynamic=(), min_opset=None):
    def deco(fn):
        for n in names:
            CONVERTERS[n] = _Conv(fn, dynamic)
            if min_opset:
                MIN_OPSET_OF[n] = min_opset
        return fn
    return deco


# ---- helpers ----------------------------------------------------------------------------------------

def _inp(b, node, i, dt=None):
    """Input ``i`` of the node as an ONNX name, cast to NumPy dtype ``dt`` when given."""
    x = node.inputs[i]
    if isinstance(x, Value):
        n = b.name(x)
        return b.cast(n, x.dtype.np, dt) if dt is not None else n
    if x is None:
        return None
    return b.const(np.asarray(x, dtype=dt if dt is not None else node.outputs[0].dtype.np))


def _out(b, node, name, k=0, natural=None):
    """Set output ``k``; ``natural`` is the dtype the ONNX op produced (cast to the captured dtype)."""
    v = node.outputs[k]
    if natural is not None:
        name = b.cast(name, natural, v.dtype.np)
    b.set(v, name)


def _dt(v):
    return v.dtype.np if isinstance(v, Value) else None


def _is_float(dt) -> bool:
    return np.dtype(dt).kind == "f" or np.dtype(dt).name == "bfloat16"


def _ndim(v) -> int:
    return len(v.shape)


def _scalar(b, value, dt):
    return b.const(np.asarray(value, dtype=dt))


def _rank_axes(axes, nd):
    if axes is None:
        return list(range(nd))
    if isinstance(axes, int):
        axes = (axes,)
    return [a % nd if nd else 0 for a in axes]


def _unsupported(b, node, what):
    from .._export import UnsupportedOperatorError
    return UnsupportedOperatorError(f"ember.onnx.export: op '{node.op.name}' ({what}) has no ONNX mapping at opset "
                                    f"{b.opset}")
