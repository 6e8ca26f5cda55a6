"""Decomposition of ``adam_update`` (ember/ops/fused_optim.py, the op a captured Adam/AdamW step records per
parameter) into elementwise primitives: the same steps, order and dtypes as its NumPy kernel, which are
those of the per-op capture it replaced (lerp, mul + addcmul, the float64 bias corrections), so the
generated C fuses the update as it did before."""
from __future__ import annotations

import numpy as np

from . import prims as P
from .decompose import decomp, Unsupported, _finish
from .prims import PNode

_F64 = np.dtype(np.float64)


@decomp("adam_update")
def _adam_update(b, n, args, at):
    p, g, m, v, step = args
    if not all(isinstance(x, PNode) for x in args):
        raise Unsupported("adam_update of Python values")
    f = p.dtype
    if f.kind != "f" or not P.native_dtype(f) or any(x.dtype != f for x in (g, m, v)):
        raise Unsupported(f"adam_update on {f}")
    lr, b1, b2, eps, wd = at["lr"], at["beta1"], at["beta2"], at["eps"], at["weight_decay"]
    if wd != 0:
        if at["decoupled"]:
            p = b.ew("mul", p, 1 - lr * wd, dtype=f)
        else:
            g = b.ew("add", g, b.ew("mul", p, wd, dtype=f), dtype=f)
    w = 1 - b1
    diff = b.ew("sub", g, m, dtype=f)
    if abs(w) < 0.5:
        m = b.ew("add", m, b.ew("mul", diff, w, dtype=f), dtype=f)
    else:
        m = b.ew("sub", g, b.ew("mul", diff, 1 - w, dtype=f), dtype=f)
    v = b.ew("mul", v, b2, dtype=f)
    v = b.ew("add", v, b.ew("mul", b.ew("mul", g, 1 - b2, dtype=f), g, dtype=f), dtype=f)
    s = b.cast(step, _F64)
    bc1 = b.ew("sub", 1.0, b.ew("pow", b1, s, dtype=_F64), dtype=_F64)
    bc2 = b.ew("sub", 1.0, b.ew("pow", b2, s, dtype=_F64), dtype=_F64)
    denom = b.ew("add", b.ew("div", b.ew("sqrt", v, dtype=f), b.cast(b.ew("sqrt", bc2, dtype=_F64), f), dtype=f),
                 eps, dtype=f)
    scale = b.cast(b.ew("div", lr, bc1, dtype=_F64), f)
    p = b.ew("sub", p, b.ew("mul", b.ew("div", m, denom, dtype=f), scale, dtype=f), dtype=f)
    return [_finish(b, n, p, 0), _finish(b, n, m, 1), _finish(b, n, v, 2)]
