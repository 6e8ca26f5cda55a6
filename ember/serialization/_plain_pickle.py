"""Plain pickling of tensors (``pickle.dumps``, ``copy.copy``, multiprocessing), outside ``ember.save``.

A tensor pickles as a call of ``ember.serialization._rebuild_tensor_from_bytes`` on its raw bytes; the
package re-exports that function under that name so pickles written by any ember version load.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from ._writer import _tensor_state


def _reduce_tensor(t: Tensor):
    """``Tensor.__reduce_ex__`` outside ``ember.save``: rebuild from the raw bytes (a contiguous copy)."""
    arr = np.ascontiguousarray(t._host())
    cls = type(t)
    state = _tensor_state(t, cls)
    args = (cls, arr.tobytes(), t._dtype.name, tuple(arr.shape), t._rg, state or None)
    return (_rebuild_tensor_from_bytes, args if t.is_cpu else args + (str(t.device),))


def _rebuild_tensor_from_bytes(cls, data: bytes, dtype_name: str, shape, requires_grad: bool, state=None,
                               device_name=None):
    """Recreate a tensor (of class ``cls``) pickled by :func:`_reduce_tensor` (on its device)."""
    dt = _dt._dtype_by_name(dtype_name)
    arr = np.frombuffer(bytearray(data), dtype=dt.np).reshape(shape)
    if device_name is not None:
        from ..devices import opencl
        from ..tensor import _check_device
        arr = opencl.from_numpy(arr, _check_device(device_name).index)
    t = object.__new__(cls)
    t._data = arr
    t._dtype = dt
    t._rg = bool(requires_grad)
    t.grad_fn = None
    if state:
        t.__dict__.update(state)
    return t
