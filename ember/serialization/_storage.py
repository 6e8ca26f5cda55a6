"""Storages read from a checkpoint, and the rebuild functions torch's globals in ``data.pkl`` map to.

``torch.<X>Storage`` names become :class:`_StorageType` stand-ins (only their dtype matters); each
storage record becomes a :class:`CheckpointStorage`; ``torch._utils._rebuild_tensor_v2`` and its
relatives build ember tensors viewing those storages.
"""
from __future__ import annotations

import pickle

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, device, wrap

# torch's storage class for each ember dtype (the class names a typed storage in a checkpoint)
_STORAGE_NAME = {
    _dt.float32: "FloatStorage", _dt.float64: "DoubleStorage", _dt.float16: "HalfStorage",
    _dt.bfloat16: "BFloat16Storage", _dt.int8: "CharStorage", _dt.int16: "ShortStorage",
    _dt.int32: "IntStorage", _dt.int64: "LongStorage", _dt.uint8: "ByteStorage", _dt.bool: "BoolStorage",
    _dt.complex64: "ComplexFloatStorage", _dt.complex128: "ComplexDoubleStorage",
}


# ==================================================================================================
# Storages read from a checkpoint
# ==================================================================================================

class _StorageType:
    """Stands for one of torch's storage classes (``torch.FloatStorage`` ...) named in a checkpoint.

    Only its dtype matters to ember: it says how to read the bytes of the storage it labels.
    """

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: _dt.dtype):
        self.name = name
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"<ember stand-in for torch.{self.name}>"


_STORAGE_TYPES = {name: _StorageType(name, d) for d, name in _STORAGE_NAME.items()}
_STORAGE_TYPES["UntypedStorage"] = _StorageType("UntypedStorage", _dt.uint8)


class CheckpointStorage:
    """A storage loaded from a checkpoint: a byte buffer (a NumPy uint8 array) and a dtype.

    Tensors rebuilt from it are NumPy views of the buffer, so tensors that shared a storage when
    saved share memory after loading. A checkpoint whose top-level object is a bare storage loads
    as one of these; saving it again writes it back as a storage.
    """

    __slots__ = ("_buf", "dtype", "_root", "_target")

    def __init__(self, buf: np.ndarray, dtype: _dt.dtype):
        self._buf = buf
        self.dtype = dtype
        self._root = None
        self._target = None         # an OpenCL device the tensors on it are moved to (map_location)

    def _root_tensor(self, dtype: _dt.dtype) -> Tensor:
        """A 1-D tensor spanning the storage: the ``_storage_src`` of every tensor rebuilt on it, so
        ``storage_offset()`` and storage sharing read as in torch."""
        root = self._root
        if root is None or root._dtype is not dtype:
            n = self._buf.size - self._buf.size % dtype.itemsize
            root = wrap(self._buf[:n].view(dtype.np), dtype)
            if dtype is self.dtype:
                self._root = root
        return root

    @property
    def device(self) -> device:
        return device("cpu") if self._target is None else self._target

    @property
    def is_cuda(self) -> bool:
        return False

    def nbytes(self) -> int:
        return self._buf.size

    def element_size(self) -> int:
        return self.dtype.itemsize

    def size(self) -> int:
        return self._buf.size // self.dtype.itemsize

    __len__ = size

    def data_ptr(self) -> int:
        return self._buf.__array_interface__["data"][0]

    def cpu(self) -> "CheckpointStorage":
        return self

    def cuda(self, *args, **kwargs):
        raise RuntimeError("ember has no CUDA device: checkpoint storages always load on the 'cpu' device")

    def untyped(self) -> "CheckpointStorage":
        return CheckpointStorage(self._buf, _dt.uint8)

    def tolist(self) -> list:
        return wrap(self._buf[: self.size() * self.dtype.itemsize].view(self.dtype.np), self.dtype).tolist()

    def __repr__(self) -> str:
        return f"ember.serialization.CheckpointStorage(dtype={self.dtype}, size={self.size()})"

    def _view(self, dtype: _dt.dtype, size, stride, offset: int) -> np.ndarray:
        """The ndarray a tensor of ``size``/``stride``/``offset`` (in elements) sees in this storage."""
        size = tuple(_as_int(s, "size") for s in size)
        stride = tuple(_as_int(s, "stride") for s in stride)
        offset = _as_int(offset, "storage_offset")
        isz = dtype.itemsize
        if len(size) != len(stride):
            raise RuntimeError(f"mismatch in length of strides and shape: sizes {list(size)}, strides {list(stride)}")
        if min(size, default=0) < 0 or min(stride, default=0) < 0 or offset < 0:
            raise RuntimeError(f"cannot rebuild a tensor with sizes {list(size)}, strides {list(stride)} and "
                               f"storage offset {offset}: negative values are invalid")
        have = self._buf.size // isz
        empty = 0 in size
        need = 0 if empty else offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
        if need > have or (empty and offset > have):
            raise RuntimeError(
                f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and itemsize "
                f"{isz} requiring a storage size of {need * isz} are out of bounds for storage of size "
                f"{self._buf.size}")
        return np.ndarray(size, dtype=dtype.np, buffer=self._buf, offset=offset * isz,
                          strides=tuple(s * isz for s in stride))


def _as_int(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"tensor {what} in a checkpoint must be an int, got {type(v).__name__}")
    return v


# ==================================================================================================
# Rebuild functions: ember's implementations of the torch globals a checkpoint calls
# ==================================================================================================

def _check_storage(storage) -> CheckpointStorage:
    if not isinstance(storage, CheckpointStorage):
        raise pickle.UnpicklingError(
            f"a tensor in the checkpoint is built on {type(storage).__name__}, expected a storage")
    return storage


def _tensor_on(s: CheckpointStorage, dtype: _dt.dtype, size, stride, offset, requires_grad) -> Tensor:
    t = wrap(s._view(dtype, size, stride, offset), dtype)
    t._storage_src = s._root_tensor(dtype)  # shares memory (not history or version) with the storage
    if s._target is not None:
        # each tensor gets its own device copy (views of one storage do not share device memory yet)
        from ..devices.dispatch import to_device
        t = to_device(t, s._target)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_tensor(storage, storage_offset, size, stride):
    """torch._utils._rebuild_tensor: a tensor viewing ``storage``."""
    s = _check_storage(storage)
    return _tensor_on(s, s.dtype, size, stride, storage_offset, False)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    """torch._utils._rebuild_tensor_v2 (what torch.save writes for every tensor)."""
    s = _check_storage(storage)
    return _tensor_on(s, s.dtype, size, stride, storage_offset, requires_grad)


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    """torch._utils._rebuild_tensor_v3: like v2, with the dtype given apart from an untyped storage."""
    s = _check_storage(storage)
    if not isinstance(dtype, _dt.dtype):
        raise pickle.UnpicklingError(f"_rebuild_tensor_v3 expects a dtype, got {type(dtype).__name__}")
    return _tensor_on(s, dtype, size, stride, storage_offset, requires_grad)


def _parameter_class():
    try:
        from ..nn.parameter import Parameter
    except ImportError:  # ember.nn missing: parameters load as tensors that require grad
        return None
    return Parameter


def _make_parameter(data, requires_grad):
    if not isinstance(data, Tensor):
        raise pickle.UnpicklingError(f"a Parameter in the checkpoint wraps {type(data).__name__}, expected a Tensor")
    P = _parameter_class()
    if P is None:
        return data.requires_grad_(bool(requires_grad))
    p = P(data, bool(requires_grad))
    if p._storage_src is None and data._storage_src is not None and p._data is data._data:
        p._storage_src = data._storage_src  # keep the storage identity of the loaded data
    return p


def _rebuild_parameter(data, requires_grad, backward_hooks):
    """torch._utils._rebuild_parameter: an ``ember.nn.Parameter`` around ``data``."""
    return _make_parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    """torch._utils._rebuild_parameter_with_state: a Parameter plus its Python attributes."""
    p = _make_parameter(data, requires_grad)
    _set_obj_state(p, state)
    return p


_TENSOR_REBUILDERS = (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter,
                      _rebuild_parameter_with_state)
# Tensor fields a checkpoint's attribute state may never overwrite
_PROTECTED = frozenset({"_data", "_dtype", "_rg", "grad_fn", "_vc", "_base", "_storage_src", "_acc_node",
                        "__class__", "__dict__"})


def _set_obj_state(obj, state) -> None:
    """torch._utils._set_obj_state: restore the Python attributes saved with a tensor."""
    if isinstance(state, tuple):
        if len(state) != 2:
            raise RuntimeError(f"Invalid serialized state: {state}")
        dict_state, slots_state = state
    else:
        dict_state, slots_state = state, None
    for part in (dict_state, slots_state):
        if part:
            if not isinstance(part, dict):
                raise pickle.UnpicklingError(f"tensor state must be a dict, got {type(part).__name__}")
            for k, v in part.items():
                if not isinstance(k, str) or k in _PROTECTED:
                    raise pickle.UnpicklingError(f"refusing to restore tensor attribute {k!r} from a checkpoint")
                setattr(obj, k, v)


def _as_subclass(t: Tensor, cls: type) -> Tensor:
    new = object.__new__(cls)
    new._data = t._data
    new._dtype = t._dtype
    new._rg = t._rg
    new.grad_fn = None
    if t._storage_src is not None:
        new._storage_src = t._storage_src
    return new


def _rebuild_from_type_v2(func, new_type, args, state):
    """torch._tensor._rebuild_from_type_v2: a tensor of class ``new_type`` carrying Python state."""
    if not any(func is f for f in _TENSOR_REBUILDERS):
        raise pickle.UnpicklingError(f"_rebuild_from_type_v2 got {func!r}, expected a tensor rebuild function")
    if not (isinstance(new_type, type) and issubclass(new_type, Tensor)):
        raise pickle.UnpicklingError(f"_rebuild_from_type_v2 got {new_type!r}, expected a Tensor class")
    ret = func(*args)
    if type(ret) is not new_type:
        ret = _as_subclass(ret, new_type)
    setstate = getattr(type(ret), "__setstate__", None)
    if setstate is not None and setstate is not Tensor.__setstate__:
        ret.__setstate__(state)
    else:
        _set_obj_state(ret, state)
    return ret
