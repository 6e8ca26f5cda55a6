"""The last step a device dispatcher shares with ``apply``: wrap an op's result arrays as tensors and
record the autograd node (``ember.devices.dispatch`` for OpenCL, ``ember.devices.meta``)."""
from __future__ import annotations

from ..tensor import wrap
from ..ops import registry as R

__all__ = ["wrap_results"]


def wrap_results(op, args, attrs, res):
    """``res`` (one array, or a sequence of ``op.nout`` arrays) as tensors, recorded for autograd."""
    if op.nout == 1:
        out = wrap(res)
        outs = (out,)
    else:
        outs = tuple(wrap(r) for r in res)
        out = outs
    R.record_grad(op, args, attrs, outs)
    return out
