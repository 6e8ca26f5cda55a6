"""Collation: turning a list of samples into a batch (``default_collate``) and converting NumPy data
to tensors without batching (``default_convert``), with torch's type rules:

* tensors are stacked along a new first dimension;
* NumPy arrays become tensors and are stacked; NumPy scalars become one tensor of their dtype;
* Python floats -> float64, ints -> int64, bools -> bool tensors;
* str and bytes stay as a list;
* mappings, namedtuples and sequences are collated field by field (tuples come back as lists).

``collate(batch, collate_fn_map=...)`` is the extensible form: ``collate_fn_map`` maps element types to
functions ``fn(batch, *, collate_fn_map)``.
"""
from __future__ import annotations

import collections.abc
import copy
import re

import numpy as np

from ....tensor import Tensor, wrap
from .... import dtypes as _dt

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map", "collate_tensor_fn",
           "collate_numpy_array_fn", "collate_numpy_scalar_fn", "collate_float_fn", "collate_int_fn",
           "collate_str_fn"]

# NumPy dtype codes that cannot become tensors: bytes, strings, unicode, objects
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                                  "lists; found {}")


def _as_tensor(x):
    from ....ops.creation import as_tensor
    return as_tensor(x)


def default_convert(data):
    """Convert NumPy arrays and NumPy scalars inside ``data`` (recursively through mappings,
    namedtuples and sequences) to tensors; everything else is returned unchanged. This is the
    ``DataLoader``'s collate function when automatic batching is off (``batch_size=None``).

        >>> default_convert(np.array([0, 1]))
        tensor([0, 1])
    """
    t = type(data)
    if isinstance(data, Tensor):
        return data
    if t.__module__ == "numpy" and t.__name__ not in ("str_", "string_", "bytes_"):
        if t.__name__ == "ndarray" and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return _as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                # copy first so extra attributes of a custom mapping type survive
                clone = copy.copy(data)
                clone.update({k: default_convert(data[k]) for k in data})
                return clone
            return t({k: default_convert(data[k]) for k in data})
        except TypeError:
            return {k: default_convert(data[k]) for k in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):        # namedtuple
        return t(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]                 # torch returns a list here
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return t([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def collate(batch, *, collate_fn_map: dict | None = None):
    """Collate ``batch`` (a list of samples of one structure) with per-type functions from
    ``collate_fn_map`` (exact type first, then the first key ``isinstance`` matches), recursing into
    mappings, namedtuples and sequences."""
    elem = batch[0]
    t = type(elem)
    if collate_fn_map is not None:
        if t in collate_fn_map:
            return collate_fn_map[t](batch, collate_fn_map=collate_fn_map)
        for key, fn in collate_fn_map.items():
            if isinstance(elem, key):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update({k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map) for k in elem})
                return clone
            return t({k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map) for k in elem})
        except TypeError:
            return {k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):        # namedtuple
        return t(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))     # samples of each field stay tuples (strings come back so, as torch)
        if isinstance(elem, tuple):
            return [collate(s, collate_fn_map=collate_fn_map) for s in transposed]   # tuples -> lists, as torch
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, s in enumerate(transposed):
                    clone[i] = collate(s, collate_fn_map=collate_fn_map)
                return clone
            return t([collate(s, collate_fn_map=collate_fn_map) for s in transposed])
        except TypeError:
            return [collate(s, collate_fn_map=collate_fn_map) for s in transposed]
    raise TypeError(default_collate_err_msg_format.format(t))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    """Stack tensors along a new first dimension."""
    elem = batch[0]
    dt, shape = elem._dtype, elem._data.shape
    if all(type(t) is Tensor and not t._rg and t._dtype is dt and t._data.shape == shape for t in batch):
        # the common case (plain data, no autograd): one NumPy stack instead of an op per sample
        return wrap(np.stack([t._data for t in batch]), dt)
    from ....ops.shape_join import stack
    return stack(list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    """NumPy arrays -> tensors, then collated (stacked); string/object arrays are refused."""
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([_as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    """NumPy scalars -> one 1-D tensor of their dtype."""
    arr = np.asarray(list(batch))     # keeps the scalars' dtype (int16 stays int16)
    if np_str_obj_array_pattern.search(arr.dtype.str) is not None:
        return _as_tensor(list(batch))
    return _as_tensor(arr)


def collate_float_fn(batch, *, collate_fn_map=None):
    """Python floats -> a float64 tensor (torch's choice, whatever the default dtype)."""
    from ....ops.creation import tensor
    return tensor(list(batch), dtype=_dt.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    """Python ints -> an int64 tensor (bools -> a bool tensor)."""
    from ....ops.creation import tensor
    return tensor(list(batch))


def collate_str_fn(batch, *, collate_fn_map=None):
    """Strings and bytes stay as they are (the batch list)."""
    return batch


default_collate_fn_map: dict = {Tensor: collate_tensor_fn}
default_collate_fn_map[np.ndarray] = collate_numpy_array_fn
default_collate_fn_map[(np.bool_, np.number, np.object_)] = collate_numpy_scalar_fn
default_collate_fn_map[float] = collate_float_fn
default_collate_fn_map[int] = collate_int_fn
default_collate_fn_map[str] = collate_str_fn
default_collate_fn_map[bytes] = collate_str_fn


def default_collate(batch):
    """Collate a list of samples into a batch (the ``DataLoader``'s default ``collate_fn``).

        >>> default_collate([0, 1, 2])
        tensor([0, 1, 2])
        >>> default_collate([(ember.ones(2), 0), (ember.zeros(2), 1)])
        [tensor([[1., 1.],
                [0., 0.]]), tensor([0, 1])]
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
