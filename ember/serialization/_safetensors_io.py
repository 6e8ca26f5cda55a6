"""``save_safetensors`` / ``load_safetensors``: the safetensors format, through the ``safetensors``
package's NumPy API.
"""
from __future__ import annotations

import os

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, device, wrap
from ._files import _atomic_write

_device = device  # load_safetensors' ``device`` argument shadows the class


def save_safetensors(tensors: dict, path, metadata: dict | None = None) -> None:
    """Save a ``{name: Tensor}`` dict as a safetensors file (atomically, like :func:`save`).

    ``metadata`` is an optional ``{str: str}`` dict stored in the header. bfloat16 tensors are
    written as safetensors' ``BF16`` (through ml_dtypes).
    """
    from safetensors.numpy import save_file
    if not isinstance(tensors, dict):
        raise TypeError(f"save_safetensors expects a dict of tensors, got {type(tensors).__name__}")
    arrays = {}
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise TypeError(f"save_safetensors: keys must be str, got {type(k).__name__}")
        if not isinstance(v, Tensor):
            raise TypeError(f"save_safetensors: value for {k!r} is {type(v).__name__}, expected a Tensor")
        arrays[k] = np.ascontiguousarray(v._data)
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("save_safetensors: metadata must be a dict of str to str")
    _atomic_write(path, lambda fh, tmp: save_file(arrays, tmp, metadata=metadata))


def load_safetensors(path, device="cpu") -> dict:
    """Load a safetensors file into a ``{name: Tensor}`` dict (tensors own writable memory)."""
    from safetensors.numpy import load_file
    if device is not None:
        d = device if isinstance(device, _device) else _device(device)
        if d.type != "cpu" or d.index not in (None, 0):
            raise RuntimeError(f"load_safetensors: ember only has the 'cpu' device, got '{d}'")
    out = {}
    for k, a in load_file(os.fspath(path)).items():
        if a.dtype not in _dt._BY_NP:
            raise TypeError(f"load_safetensors: tensor {k!r} has dtype {a.dtype}, which ember does not support")
        a = np.array(a, copy=True)  # the loader's arrays are read-only views of a mapping
        out[k] = wrap(a, _dt._BY_NP[a.dtype])
    return out
