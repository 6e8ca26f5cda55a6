"""ember.save / ember.load: PyTorch's zip checkpoint format, read and written without torch.

A checkpoint (``torch.save`` since 1.6) is an uncompressed zip archive::

    <archive>/data.pkl                 pickle (protocol 2) of the object; tensors point at storages
    <archive>/.format_version          "1"
    <archive>/.storage_alignment       "64" (every record's data starts on a 64-byte boundary)
    <archive>/byteorder                "little" or "big"
    <archive>/data/<key>               the raw bytes of storage <key>
    <archive>/version                  "3\\n"
    <archive>/.data/serialization_id   a 40-digit id

Inside ``data.pkl`` a tensor is ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size,
stride, requires_grad, backward_hooks)`` where ``storage`` is a persistent id
``('storage', torch.<X>Storage, key, location, numel)``. Tensors that share memory share one storage,
so views survive a round trip in both directions. ember writes torch's global names itself (a small
pickler that emits ``GLOBAL torch._utils _rebuild_tensor_v2`` without importing torch) and maps
them back to its own implementations when loading.

Loading is safe by default (``weights_only=True``): the unpickler resolves only an allowlist of
globals (the tensor rebuild functions, storage types, dtypes, ``torch.Size``, ``torch.device``,
``collections.OrderedDict``, a few builtins) plus what the user allows with :func:`add_safe_globals`,
and it refuses to call, build or extend anything else, as torch's weights-only unpickler does.

``save_safetensors`` / ``load_safetensors`` read and write the safetensors format through the
``safetensors`` package's NumPy API.
"""
from __future__ import annotations

import _compat_pickle
import collections
import contextlib
import importlib
import io
import mmap as _mmap
import operator
import os
import pickle
import pickletools
import struct
import sys
import tempfile
import zipfile
import zlib

import numpy as np

from . import dtypes as _dt
from .tensor import Tensor, Size, device, wrap

_device = device  # load_safetensors' ``device`` argument shadows the class

__all__ = [
    "save", "load", "serialize", "deserialize", "add_safe_globals", "get_safe_globals",
    "clear_safe_globals", "safe_globals", "get_unsafe_globals_in_checkpoint", "save_safetensors",
    "load_safetensors", "CheckpointStorage", "DEFAULT_PROTOCOL",
]

DEFAULT_PROTOCOL = 2
_ALIGNMENT = 64
_ZIP64_LIMIT = 0xFFFFFFFF  # sizes/offsets from here on need zip64 fields (a module constant so tests can lower it)
_CHUNK = 1 << 24

# Bounds on what a checkpoint can make ember allocate beyond its own size on disk. They are module
# attributes: raise them (``ember.serialization.MAX_INFLATE_RATIO = 2000``) to load a file you trust.
# torch.save and ember.save write every member uncompressed, so their files never come near them.
MAX_INFLATE_RATIO = 100  # a compressed zip member may inflate to this many times its stored bytes ...
INFLATE_ALLOWANCE = 64 << 20  # ... or to this many bytes, whichever is more
MAX_CALL_ALLOCATION = 64 << 20  # bytes one call of an allowlisted global (bytearray(n), Tensor(n)) may allocate


def _limit(name: str) -> int:
    """The current value of limit ``name`` (``MAX_INFLATE_RATIO`` ...): read from ``ember.serialization`` at
    call time, so a value the user sets there applies to the next load."""
    return getattr(sys.modules["ember.serialization"], name)


class _CheckpointLimitError(pickle.UnpicklingError):
    """A zip member whose declared sizes are out of bounds: refused before anything is inflated.

    Raised as is (not as a weights-only failure): loading with ``weights_only=False`` would not help.
    """

# torch's storage class for each ember dtype (the class names a typed storage in a checkpoint)
_STORAGE_NAME = {
    _dt.float32: "FloatStorage", _dt.float64: "DoubleStorage", _dt.float16: "HalfStorage",
    _dt.bfloat16: "BFloat16Storage", _dt.int8: "CharStorage", _dt.int16: "ShortStorage",
    _dt.int32: "IntStorage", _dt.int64: "LongStorage", _dt.uint8: "ByteStorage", _dt.bool: "BoolStorage",
}
# torch dtype names (including aliases) that ember has
_TORCH_DTYPES = {
    "float32": _dt.float32, "float": _dt.float32, "float64": _dt.float64, "double": _dt.float64,
    "float16": _dt.float16, "half": _dt.float16, "bfloat16": _dt.bfloat16, "int8": _dt.int8,
    "int16": _dt.int16, "short": _dt.int16, "int32": _dt.int32, "int": _dt.int32, "int64": _dt.int64,
    "long": _dt.int64, "uint8": _dt.uint8, "bool": _dt.bool,
}
_UNSUPPORTED_TORCH_DTYPES = {
    "complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf", "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits8", "bits16",
    "bits1x8", "bits2x4", "bits4x2", "int1", "int2", "int3", "int4", "int5", "int6", "int7", "uint1",
    "uint2", "uint3", "uint4", "uint5", "uint6", "uint7",
}
# modules whose globals are refused even if the user allowlists them (as in torch)
_BLOCKED_MODULES = ("sys", "os", "posix", "nt")


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
        from .devices.dispatch import to_device
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
        from .nn.parameter import Parameter
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


_SAFE_ENCODINGS = frozenset({"latin1", "latin-1", "iso-8859-1", "utf-8", "utf8", "ascii"})


def _encode(obj, encoding="utf-8", errors="strict"):
    """_codecs.encode, limited to the text encodings pickle uses for ``bytes`` (protocol 2)."""
    if not isinstance(obj, str) or encoding.lower() not in _SAFE_ENCODINGS:
        raise pickle.UnpicklingError(f"_codecs.encode is only allowed on str with latin1/utf-8, got {encoding!r}")
    return obj.encode(encoding, errors)


def _build_allowed_globals() -> dict:
    g = {
        "torch._utils._rebuild_tensor": _rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.Tensor": Tensor,
        "torch._tensor.Tensor": Tensor,
        "torch.Size": Size,
        "torch.device": device,
        "collections.OrderedDict": collections.OrderedDict,
        "collections.Counter": collections.Counter,
        "_codecs.encode": _encode,
        "builtins.set": set,
        "builtins.frozenset": frozenset,
        "builtins.slice": slice,
        "builtins.complex": complex,
        "builtins.bytearray": bytearray,
        "builtins.bytes": bytes,
    }
    for name, d in _TORCH_DTYPES.items():
        g[f"torch.{name}"] = d
    for name, st in _STORAGE_TYPES.items():
        g[f"torch.{name}"] = st
        g[f"torch.cuda.{name}"] = st  # storages saved from the GPU load on the CPU
    g["torch.storage.UntypedStorage"] = _STORAGE_TYPES["UntypedStorage"]
    return g


_ALLOWED = _build_allowed_globals()
_LAZY_ALLOWED = {"torch.nn.parameter.Parameter": _parameter_class, "torch.nn.Parameter": _parameter_class}


def _lookup_default(full: str):
    """The ember object for an allowlisted torch/builtin global name, or None."""
    obj = _ALLOWED.get(full)
    if obj is None and full in _LAZY_ALLOWED:
        obj = _LAZY_ALLOWED[full]()
    return obj


def _refuse_unsupported_torch(module: str, name: str) -> None:
    """Name the torch dtypes/storages ember cannot represent instead of a generic refusal."""
    if module in ("torch", "torch.cuda"):
        if name in _UNSUPPORTED_TORCH_DTYPES:
            raise pickle.UnpicklingError(f"the checkpoint uses torch.{name}, a dtype ember does not support")
        if name.endswith("Storage"):
            raise pickle.UnpicklingError(
                f"the checkpoint uses {module}.{name}, whose dtype ember does not support (ember has "
                f"{', '.join(d.name for d in _STORAGE_NAME)})")


# ==================================================================================================
# Safe globals (the user's allowlist for weights_only=True)
# ==================================================================================================

_user_safe_globals: set = set()


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes/functions when loading with ``weights_only=True``.

    Entries are objects (matched by ``f"{obj.__module__}.{obj.__qualname__}"``) or
    ``(obj, "module.name")`` pairs to allow ``obj`` under another name. A global named
    ``torch.X.Y`` in a checkpoint also matches an allowed ``ember.X.Y``.
    """
    global _user_safe_globals
    for g in safe_globals:
        _global_key(g)  # validate early
    _user_safe_globals = _user_safe_globals | set(safe_globals)


def get_safe_globals() -> list:
    """The user's allowlist (see :func:`add_safe_globals`)."""
    return list(_user_safe_globals)


def clear_safe_globals() -> None:
    """Empty the user's allowlist."""
    global _user_safe_globals
    _user_safe_globals = set()


def _remove_safe_globals(globals_to_remove: list) -> None:
    global _user_safe_globals
    _user_safe_globals = _user_safe_globals - set(globals_to_remove)


class safe_globals:
    """Context manager that allows ``safe_globals`` for ``weights_only`` loads inside its block."""

    def __init__(self, safe_globals: list):  # noqa: F811 - mirrors torch's parameter name
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        _remove_safe_globals(self.safe_globals)
        return False


def _global_key(g):
    if isinstance(g, tuple):
        if len(g) != 2:
            raise ValueError("Expected tuple of length 2 (global, str of callable full path), but got tuple of "
                             f"length: {len(g)}")
        if type(g[1]) is not str:
            raise TypeError(f"Expected second item in tuple to be str of callable full path, but got: {type(g[1])}")
        return g[1], g[0]
    return f"{g.__module__}.{g.__qualname__}", g


def _user_allowed_globals() -> dict:
    return dict(_global_key(g) for g in _user_safe_globals)


# ==================================================================================================
# Unpicklers
# ==================================================================================================

def _fix_py2_name(module: str, name: str) -> tuple[str, str]:
    # protocol-2 pickles name builtins "__builtin__" (what the stdlib unpickler's fix_imports maps)
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def _decode(v):
    return v.decode("ascii") if isinstance(v, (bytes, bytearray)) else v


class _OpcodeTable(dict):
    """The unpickler's opcode dispatch table: an opcode it lacks is an UnpicklingError (as in torch's
    weights-only unpickler and the C unpickler), not the Python unpickler's KeyError."""

    def __missing__(self, op):
        raise pickle.UnpicklingError(f"Unsupported operand {op}")


def _index(v):
    try:
        return operator.index(v)
    except Exception:
        return None


def _call_allocation(func, args: tuple) -> int:
    """A lower bound on the bytes calling allowed global ``func`` on ``args`` allocates beyond the
    objects the pickle itself holds: ``bytearray(n)``/``bytes(n)`` make n bytes, ``Tensor(*sizes)``
    an uninitialized tensor, and the builtins that iterate an argument materialize a tensor's elements
    (a zero-stride view of one element can claim any size)."""
    if (func is bytes or func is bytearray) and len(args) == 1:
        n = _index(args[0])
        if n is not None:
            return n
    if func is Tensor and args and (len(args) > 1 or isinstance(args[0], int)):
        sizes = [_index(a) for a in args]
        if all(n is not None and n >= 0 for n in sizes):
            total = _dt.get_default_dtype().itemsize
            for n in sizes:
                total *= n
            return total
    if any(func is f for f in _ITERATING_GLOBALS):
        return sum(a._data.size * a._dtype.itemsize for a in args if isinstance(a, Tensor))
    return 0


_ITERATING_GLOBALS = (bytes, bytearray, set, frozenset, collections.Counter, collections.OrderedDict, Size, Tensor)


class _WeightsOnlyUnpickler(pickle._Unpickler):
    """The stdlib's Python unpickler with torch's weights-only restrictions.

    Globals resolve only through the allowlist; REDUCE/NEWOBJ may only call allowlisted globals,
    BUILD only touches tensors, OrderedDicts and allowlisted classes, and APPEND/SETITEM only extend
    lists and dicts, so a checkpoint can never reach code the allowlist does not name.
    """

    dispatch = _OpcodeTable(pickle._Unpickler.dispatch)

    def __init__(self, file, loader, **kwargs):
        super().__init__(file, **kwargs)
        self._loader = loader
        self._user = _user_allowed_globals()
        self._allowed_ids: dict[int, object] = {}
        self._names: dict[int, str] = {}

    def find_class(self, module, name):
        module, name = _fix_py2_name(module, name)
        full = f"{module}.{name}"
        if module.split(".")[0] in _BLOCKED_MODULES:
            raise pickle.UnpicklingError(f"Unsupported global: GLOBAL {full} whose module {module} is blocked "
                                         "(never allowed, even with add_safe_globals).")
        obj = _lookup_default(full)
        if obj is None:
            obj = self._user.get(full)
            if obj is None and (module == "torch" or module.startswith("torch.")):
                obj = self._user.get("ember" + full[5:])  # a torch class the user allowed as its ember twin
        if obj is None:
            _refuse_unsupported_torch(module, name)
            shown = full[len("builtins."):] if full.startswith("builtins.") else full
            raise pickle.UnpicklingError(
                f"Unsupported global: GLOBAL {shown} was not an allowed global by default. Please use "
                f"`ember.serialization.add_safe_globals([{shown}])` or the "
                f"`ember.serialization.safe_globals([{shown}])` context manager to allowlist this global "
                "if you trust this class/function.")
        self._allowed_ids[id(obj)] = obj
        self._names.setdefault(id(obj), full)
        return obj

    def persistent_load(self, pid):
        return self._loader.storage(pid)

    def _is_allowed(self, obj) -> bool:
        return id(obj) in self._allowed_ids

    def _check_allocation(self, func, args) -> None:
        """Refuse a call of an allowed global that would allocate more than ``MAX_CALL_ALLOCATION``."""
        if not isinstance(args, tuple):
            return  # not a call pickle would make (REDUCE/NEWOBJ raise on it themselves)
        cost = _call_allocation(func, args)
        bound = _limit("MAX_CALL_ALLOCATION")
        if cost > bound:
            name = self._names.get(id(func), repr(func))
            shown = ", ".join(str(a) if type(a) is int else f"<{type(a).__name__}>" for a in args)
            raise pickle.UnpicklingError(
                f"{name}({shown}) would allocate {cost} bytes, more than the {bound} bytes "
                "(ember.serialization.MAX_CALL_ALLOCATION) one call of an allowed global may allocate")

    def load_reduce(self):
        func = self.stack[-2]
        if not self._is_allowed(func):
            raise pickle.UnpicklingError(f"Trying to call reduce for unrecognized function {func!r}")
        self._check_allocation(func, self.stack[-1])
        pickle._Unpickler.load_reduce(self)
    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_newobj(self):
        cls = self.stack[-2]
        if not self._is_allowed(cls):
            raise pickle.UnpicklingError(
                f"Can only create new object for classes allowlisted via `add_safe_globals` but got {cls!r}")
        self._check_allocation(cls, self.stack[-1])
        pickle._Unpickler.load_newobj(self)
    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self):
        cls = self.stack[-3]
        if not self._is_allowed(cls):
            raise pickle.UnpicklingError(
                f"Can only create new object for classes allowlisted via `add_safe_globals` but got {cls!r}")
        self._check_allocation(cls, self.stack[-2])
        pickle._Unpickler.load_newobj_ex(self)
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def load_obj(self):
        cls = self.stack[0] if self.stack else None  # OBJ calls the first item after MARK
        if not self._is_allowed(cls):
            raise pickle.UnpicklingError(f"Trying to instantiate unrecognized class {cls!r}")
        pickle._Unpickler.load_obj(self)
    dispatch[pickle.OBJ[0]] = load_obj

    def _instantiate(self, klass, args):  # INST and OBJ
        self._check_allocation(klass, tuple(args))
        pickle._Unpickler._instantiate(self, klass, args)

    def load_build(self):
        inst = self.stack[-2]
        t = type(inst)
        if not (isinstance(inst, Tensor) or t is collections.OrderedDict or t is collections.Counter
                or self._is_allowed(t)):
            raise pickle.UnpicklingError(
                f"Can only build Tensor, Parameter, OrderedDict or types allowlisted via `add_safe_globals`, but got {t}")
        pickle._Unpickler.load_build(self)
    dispatch[pickle.BUILD[0]] = load_build

    def _check_list(self, target, op):
        if not (type(target) is list or (isinstance(target, list) and self._is_allowed(type(target)))):
            raise pickle.UnpicklingError(f"Can only {op} to lists, but got {type(target)}")

    def load_append(self):
        self._check_list(self.stack[-2], "append")
        pickle._Unpickler.load_append(self)
    dispatch[pickle.APPEND[0]] = load_append

    def load_appends(self):
        self._check_list(self.metastack[-1][-1], "extend")
        pickle._Unpickler.load_appends(self)
    dispatch[pickle.APPENDS[0]] = load_appends

    def _check_dict(self, target, op):
        t = type(target)
        if not (t in (dict, collections.OrderedDict, collections.Counter)
                or (isinstance(target, dict) and self._is_allowed(t))):
            raise pickle.UnpicklingError(
                f"Can only {op} for dict, collections.OrderedDict, collections.Counter, but got {t}")

    def load_setitem(self):
        self._check_dict(self.stack[-3], "SETITEM")
        pickle._Unpickler.load_setitem(self)
    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        self._check_dict(self.metastack[-1][-1], "SETITEMS")
        pickle._Unpickler.load_setitems(self)
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def load_additems(self):
        if type(self.metastack[-1][-1]) is not set:
            raise pickle.UnpicklingError(f"Can only ADDITEMS to sets, but got {type(self.metastack[-1][-1])}")
        pickle._Unpickler.load_additems(self)
    dispatch[pickle.ADDITEMS[0]] = load_additems

    def _refuse(self):
        raise pickle.UnpicklingError("Unsupported operand: extension codes and text persistent ids are not "
                                     "allowed in weights_only checkpoints")
    for _op in (pickle.EXT1, pickle.EXT2, pickle.EXT4, pickle.PERSID):
        dispatch[_op[0]] = _refuse
    del _op


def _unrestricted_unpickler(base):
    """An unpickler on ``base`` (any pickle module's Unpickler) that maps torch names to ember's."""

    class _CheckpointUnpickler(base):
        def __init__(self, file, loader, **kwargs):
            super().__init__(file, **kwargs)
            self._loader = loader

        def find_class(self, module, name):
            module, name = _fix_py2_name(module, name)
            full = f"{module}.{name}"
            obj = _lookup_default(full)
            if obj is not None:
                return obj
            if module == "torch" or module.startswith("torch."):
                _refuse_unsupported_torch(module, name)
                try:  # torch.nn.modules.linear.Linear -> ember.nn.modules.linear.Linear
                    obj = importlib.import_module("ember" + module[5:])
                    for part in name.split("."):
                        obj = getattr(obj, part)
                    return obj
                except (ImportError, AttributeError):
                    raise pickle.UnpicklingError(
                        f"the checkpoint refers to {full}, a torch object ember has no equivalent for") from None
            return super().find_class(module, name)

        def persistent_load(self, pid):
            return self._loader.storage(pid)

    return _CheckpointUnpickler


def _weights_only_message(message: str) -> str:
    unsafe = ("Re-running `ember.load` with `weights_only` set to `False` will likely succeed, but it can result "
              "in arbitrary code execution. Do it only if you got the file from a trusted source.")
    if "was not an allowed global by default" in message:
        return ("Weights only load failed. This file can still be loaded, to do so you have two options, do those "
                f"steps only if you trust the source of the checkpoint. \n\t(1) {unsafe}\n\t(2) Alternatively, to "
                "load with `weights_only=True` please check the recommended steps in the following error message."
                "\n\tWeightsUnpickler error: " + message)
    return f"Weights only load failed. {unsafe}\nWeightsUnpickler error: {message}"


# ==================================================================================================
# Reading checkpoints
# ==================================================================================================

def _restore_location(map_location):
    """A function ``(storage, location) -> storage`` implementing torch's ``map_location``: storages saved
    on an OpenCL device go back there (``None``), or where ``map_location`` sends them; locations of
    devices ember lacks (cuda, mps) load on the CPU."""
    from .tensor import _check_device, CPU

    def check(target):
        if isinstance(target, (str, device)):
            d = device(target)
            if d.type in ("cpu", "opencl"):
                return _check_device(d)
            raise RuntimeError(f"ember.load: map_location asks for device '{d}', but ember has the 'cpu' and "
                               "'opencl' devices")
        raise TypeError(f"ember.load: map_location values must be str or ember.device, got {type(target).__name__}")

    def place(storage, target):
        storage._target = None if target is CPU else target
        return storage

    if map_location is None:
        return lambda storage, location: place(storage, check(location) if str(location).startswith("opencl")
                                                else CPU)
    if isinstance(map_location, (str, device)):
        target = check(map_location)
        return lambda storage, location: place(storage, target)
    if isinstance(map_location, dict):
        targets = {k: check(v) for k, v in map_location.items()}
        return lambda storage, location: place(storage, targets.get(location, CPU))
    if callable(map_location):
        def restore(storage, location):
            result = map_location(storage, location)
            if result is None:
                return storage
            if not isinstance(result, CheckpointStorage):
                raise TypeError(f"ember.load: the map_location function returned {type(result).__name__}; "
                                "it must return the storage it was given (or None): ember keeps storages on the CPU")
            return result
        return restore
    raise TypeError(f"ember.load: map_location must be None, a str, an ember.device, a dict or a callable, "
                    f"got {type(map_location).__name__}")


class _CheckpointReader:
    """Reads the records of one checkpoint and serves its storages to the unpickler.

    Every member's sizes are checked against the zip directory and the file before a byte of it is
    read or inflated (:meth:`info`), and reads never inflate past the declared size, so a small file
    cannot make ember allocate much more than it holds.
    """

    def __init__(self, zf: zipfile.ZipFile, mm, restore):
        self.zf = zf
        self.mm = mm
        self.restore = restore
        names = zf.namelist()
        if not names:
            raise RuntimeError("ember.load: the checkpoint zip archive is empty")
        zf.fp.seek(0, os.SEEK_END)
        self.file_size = zf.fp.tell()
        self.prefix = names[0].split("/", 1)[0]
        self._names = set(names)
        if f"{self.prefix}/data.pkl" not in self._names:
            if f"{self.prefix}/constants.pkl" in self._names or any(n.startswith(f"{self.prefix}/code/") for n in names):
                raise RuntimeError("ember.load: this is a TorchScript archive (torch.jit.save); ember loads "
                                   "checkpoints written by torch.save")
            raise RuntimeError("PytorchStreamReader failed locating file data.pkl: file not found")
        order = b"little"
        if self.has("byteorder"):
            info = self.info("byteorder")
            order = self.record("byteorder", info).tobytes() if info.file_size <= 16 else b"<too long>"
        if order not in (b"little", b"big"):
            raise ValueError("Unknown endianness type: " + order.decode(errors="replace"))
        self.swap = order.decode() != sys.byteorder
        self._storages: dict[tuple, CheckpointStorage] = {}
        self._bufs: dict[str, np.ndarray] = {}

    def has(self, name: str) -> bool:
        return f"{self.prefix}/{name}" in self._names

    def info(self, name: str) -> zipfile.ZipInfo:
        """The zip entry of record ``name``, refused if its declared sizes are out of bounds."""
        full = f"{self.prefix}/{name}"
        try:
            info = self.zf.getinfo(full)
        except KeyError:
            raise RuntimeError(f"PytorchStreamReader failed locating file {name}: file not found") from None
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise RuntimeError(f"ember.load: zip member {full} uses compression method {info.compress_type}; "
                               "checkpoints are stored or deflated (methods 0 and 8)")
        n, packed = info.file_size, info.compress_size
        if info.header_offset + packed > self.file_size:
            raise _CheckpointLimitError(
                f"ember.load: zip member {full} declares {packed} bytes of data at offset {info.header_offset}, "
                f"past the end of the {self.file_size}-byte file")
        if info.compress_type == zipfile.ZIP_STORED and n != packed:
            raise _CheckpointLimitError(f"ember.load: zip member {full} is stored uncompressed but declares "
                                        f"{n} bytes of content in {packed} bytes of data")
        ratio, allowance = _limit("MAX_INFLATE_RATIO"), _limit("INFLATE_ALLOWANCE")
        if n > max(allowance, ratio * packed):
            raise _CheckpointLimitError(
                f"ember.load: zip member {full} declares {n} bytes inflated from {packed} compressed bytes, more "
                f"than ember.serialization.MAX_INFLATE_RATIO ({ratio}) times its size and more than "
                f"INFLATE_ALLOWANCE ({allowance} bytes); refusing to inflate it (raise the bound to load a "
                "file you trust)")
        return info

    def record(self, name: str, info: zipfile.ZipInfo | None = None) -> np.ndarray:
        """A record's bytes as a writable uint8 array (a private copy-on-write map when mmap'ed).

        Both ways check the record's CRC-32 (``zipfile.BadZipFile`` on a mismatch)."""
        if info is None:
            info = self.info(name)
        n = info.file_size
        if self.mm is not None and n and info.compress_type == zipfile.ZIP_STORED:
            return self._mapped(name, info)
        buf = np.empty(n, dtype=np.uint8)
        mv = memoryview(buf)
        with self.zf.open(info) as src:
            pos = 0
            while pos < n:  # zipfile inflates at most what each read asks for, and checks the CRC at the end
                chunk = src.read(min(_CHUNK, n - pos))
                if not chunk:
                    raise RuntimeError(f"ember.load: record {name} is truncated")
                mv[pos:pos + len(chunk)] = chunk
                pos += len(chunk)
        return buf

    def _mapped(self, name: str, info: zipfile.ZipInfo) -> np.ndarray:
        mm, n = self.mm, info.file_size
        if info.header_offset + 30 > len(mm):
            raise zipfile.BadZipFile(f"Truncated file header for {info.filename!r}")
        sig, *_, name_len, extra_len = struct.unpack_from("<IHHHHHIIIHH", mm, info.header_offset)
        if sig != 0x04034B50:
            raise zipfile.BadZipFile(f"Bad magic number for file header of {info.filename!r}")
        start = info.header_offset + 30 + name_len + extra_len
        if mm[info.header_offset + 30:info.header_offset + 30 + name_len] != info.orig_filename.encode("utf-8"):
            raise zipfile.BadZipFile(f"File name in directory {info.orig_filename!r} and its local header differ")
        if start + n > len(mm):
            raise RuntimeError(f"ember.load: record {name} is truncated")
        crc = 0
        with memoryview(mm) as view:
            for i in range(start, start + n, _CHUNK):
                crc = zlib.crc32(view[i:min(i + _CHUNK, start + n)], crc)
        if crc != info.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")  # zipfile's message without mmap
        return np.frombuffer(mm, dtype=np.uint8, count=n, offset=start)

    def read_pickle(self) -> bytes:
        """data.pkl's bytes, read with one allocation of its (bounded) declared size."""
        info = self.info("data.pkl")
        with self.zf.open(info) as src:
            data = src.read(info.file_size)
        if len(data) != info.file_size:
            raise RuntimeError("ember.load: record data.pkl is truncated")
        return data

    def storage(self, pid) -> CheckpointStorage:
        """persistent_load: ``('storage', storage_type, key, location, numel)`` -> a storage."""
        if not isinstance(pid, tuple) or not pid or _decode(pid[0]) != "storage":
            raise pickle.UnpicklingError(f"Only persistent_load of storage is allowed, but got {pid!r}")
        if len(pid) != 5:
            raise pickle.UnpicklingError(f"a storage persistent id has 5 fields, got {len(pid)}")
        _, stype, key, location, numel = pid
        if not isinstance(stype, _StorageType):
            raise pickle.UnpicklingError(f"the storage type of a persistent id is {stype!r}, expected a torch storage class")
        key, location = _decode(key), _decode(location)
        if not isinstance(key, str) or isinstance(numel, bool) or not isinstance(numel, int) or numel < 0:
            raise pickle.UnpicklingError(f"malformed storage persistent id {pid!r}")
        dtype = stype.dtype
        cached = self._storages.get((key, dtype))
        if cached is not None:
            return cached
        expected = numel * dtype.itemsize
        buf = self._bufs.get(key)
        info = self.info(f"data/{key}") if buf is None else None
        have = buf.size if buf is not None else info.file_size
        if have != expected:  # as torch: the record holds exactly the storage, checked before reading it
            raise RuntimeError(f"ember.load: record data/{key} has {have} bytes but its storage is declared as "
                               f"{numel} elements of {dtype} ({expected} bytes)")
        if buf is None:
            buf = self.record(f"data/{key}", info)
            if self.swap and dtype.itemsize > 1:  # the file was written on a machine of the other byte order
                buf.view(dtype.np).byteswap(inplace=True)
            self._bufs[key] = buf
        st = self.restore(CheckpointStorage(buf, dtype), location)
        self._storages[(key, dtype)] = st
        return st


def _is_path(f) -> bool:
    return isinstance(f, (str, os.PathLike))


_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"


def _open_zip(fh, what: str) -> zipfile.ZipFile:
    start = fh.tell()
    head = fh.read(4)
    fh.seek(start)
    if head == b"PK\x03\x04":
        return zipfile.ZipFile(fh)
    if not head:
        raise EOFError(f"ember.load: {what} is empty")
    rest = fh.read(len(_LEGACY_MAGIC))
    fh.seek(start)
    if rest == _LEGACY_MAGIC:
        raise RuntimeError(f"ember.load: {what} uses torch's legacy (pre-1.6) checkpoint format, which ember does "
                           "not read; re-save it with a recent torch.save")
    raise pickle.UnpicklingError(f"ember.load: {what} is not a PyTorch zip checkpoint (torch.save / ember.save)")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Load an object saved with ``torch.save`` or ``ember.save``.

    Args:
        f: a path (str or os.PathLike) or a binary file object.
        map_location: ``None``, ``"cpu"``, ``ember.device("cpu")``, a dict mapping saved locations to
            devices, or a callable ``(storage, location) -> storage | None``. Storages always land on
            the CPU (ember's only device); asking for another device raises RuntimeError.
        pickle_module: only with ``weights_only=False``: the module whose Unpickler to use.
        weights_only: refuse every global outside the allowlist (default). ``False`` unpickles
            arbitrary objects, which can run code: only for trusted files.
        mmap: map the file instead of reading storages into memory (``f`` must be a path).
            Tensors are private copy-on-write mappings of the file.
        pickle_load_args: passed to the unpickler (e.g. ``encoding``).
    """
    if weights_only is None:
        weights_only = True
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    pickle_load_args.setdefault("encoding", "utf-8")
    restore = _restore_location(map_location)
    if isinstance(f, (bytes, bytearray, memoryview)):
        raise TypeError("ember.load: expected a path or a binary file object, got bytes "
                        "(use ember.deserialize for checkpoints held in memory)")
    if mmap and not _is_path(f):
        raise ValueError("f must be a file path in order to use the mmap argument")
    opened = open(f, "rb") if _is_path(f) else None
    try:
        fh = opened if opened is not None else f
        if not hasattr(fh, "read"):
            raise TypeError(f"ember.load: expected a path or a binary file object, got {type(f).__name__}")
        if not (hasattr(fh, "seekable") and fh.seekable()):
            fh = io.BytesIO(fh.read())
        what = repr(os.fspath(f)) if opened is not None else "the file object"
        zf = _open_zip(fh, what)
        mm = None
        if mmap:
            mm = _mmap.mmap(opened.fileno(), 0, access=_mmap.ACCESS_COPY)
        reader = _CheckpointReader(zf, mm, restore)
        data = io.BytesIO(reader.read_pickle())
        if weights_only:
            unpickler = _WeightsOnlyUnpickler(data, reader, **pickle_load_args)
            try:
                return unpickler.load()
            except _CheckpointLimitError:
                raise
            except pickle.UnpicklingError as e:
                raise pickle.UnpicklingError(_weights_only_message(str(e))) from None
        base = (pickle_module or pickle).Unpickler
        return _unrestricted_unpickler(base)(data, reader, **pickle_load_args).load()
    finally:
        if opened is not None:
            opened.close()


_STRING_OPS = frozenset({"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
                         "BINUNICODE8"})


def _globals_in_pickle(data: bytes) -> list:
    """(module, name) of every global a pickle names, read without running it: GLOBAL and INST (protocols
    0/1; OBJ calls a class some GLOBAL pushed), and STACK_GLOBAL with its two strings followed through
    the memo, since protocol 4+ pickles memoize a module name once and fetch it for the next global."""
    found = []
    pushed = []  # what the opcodes so far left on the stack, as far as STACK_GLOBAL needs: str or None
    memo = {}
    try:
        for op, arg, _ in pickletools.genops(data):
            name = op.name
            if name in ("GLOBAL", "INST"):
                found.append(tuple(arg.split(" ", 1)))
                pushed.append(None)
            elif name == "STACK_GLOBAL":
                module, qualname = (pushed[-2], pushed[-1]) if len(pushed) >= 2 else (None, None)
                del pushed[-2:]
                if isinstance(module, str) and isinstance(qualname, str):
                    found.append((module, qualname))
                pushed.append(None)
            elif name in _STRING_OPS:
                pushed.append(arg if isinstance(arg, str) else None)
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                pushed.append(memo.get(arg))
            elif name == "MEMOIZE":
                memo[len(memo)] = pushed[-1] if pushed else None
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[arg] = pushed[-1] if pushed else None
            elif op.stack_after:
                pushed.append(None)
    except ValueError as e:  # pickletools: an unknown opcode or a truncated argument
        raise pickle.UnpicklingError(f"data.pkl is not a valid pickle: {e}") from None
    return found


def get_unsafe_globals_in_checkpoint(f) -> list:
    """The globals in a checkpoint that a ``weights_only=True`` load would refuse (read statically)."""
    with (open(f, "rb") if _is_path(f) else contextlib.nullcontext(f)) as fh:
        try:
            zf = _open_zip(fh, "the checkpoint")
        except (pickle.UnpicklingError, EOFError, RuntimeError):
            raise ValueError("Expected input to be a checkpoint returned by torch.save") from None
        reader = _CheckpointReader(zf, None, lambda s, loc: s)
        data = reader.read_pickle()
    user = _user_allowed_globals()
    found = _globals_in_pickle(data)
    unsafe = []
    for module, name in found:
        module, name = _fix_py2_name(module, name)
        full = f"{module}.{name}"
        twin = "ember" + full[5:] if full.startswith("torch.") else None
        if _lookup_default(full) is None and full not in user and twin not in user and full not in unsafe:
            unsafe.append(full)
    return unsafe


# ==================================================================================================
# Writing checkpoints
# ==================================================================================================

class _Global:
    """A global written into data.pkl by name (e.g. ``torch._utils _rebuild_tensor_v2``) without importing it."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module = module
        self.name = name

    def __call__(self, *args, **kwargs):  # pickle requires a reduce function to be callable
        raise TypeError(f"{self.module}.{self.name} is a name written into checkpoints, not callable in ember")


_GLOBALS: dict[tuple, _Global] = {}


def _g(module: str, name: str) -> _Global:
    g = _GLOBALS.get((module, name))
    if g is None:
        g = _GLOBALS[(module, name)] = _Global(module, name)
    return g


class _StorageEntry:
    """One storage being saved: a byte range of memory that one or more tensors view."""

    __slots__ = ("key", "dtype", "lo", "hi", "owner", "pid")

    def __init__(self, key: str, dtype: _dt.dtype, lo: int, hi: int, owner, location: str = "cpu"):
        self.key, self.dtype, self.lo, self.hi, self.owner = key, dtype, lo, hi, owner
        self.pid = ("storage", _g("torch", _STORAGE_NAME[dtype]), key, location, (hi - lo) // dtype.itemsize)

    def data(self) -> np.ndarray:
        return _bytes_at(self.owner, self.lo, self.hi - self.lo)


class _RawBytes:
    """Exposes ``n`` bytes at address ``ptr`` (inside ``base``'s memory) as a NumPy array."""

    def __init__(self, base, ptr: int, n: int):
        self.base = base  # keeps the memory alive while the array exists
        self.__array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, True), "version": 3}


def _bytes_at(owner, ptr: int, n: int) -> np.ndarray:
    if n == 0:
        return np.empty(0, dtype=np.uint8)
    return np.asarray(_RawBytes(owner, ptr, n))


def _memory_root(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory (following views, including as_strided's wrapper objects)."""
    while True:
        b = a.base
        if isinstance(b, np.ndarray):
            a = b
            continue
        inner = getattr(b, "base", None)
        if b is not None and isinstance(inner, np.ndarray) and hasattr(b, "__array_interface__"):
            a = inner
            continue
        return a


def _extent(a: np.ndarray) -> tuple[int, int]:
    """The byte range [lo, hi) the elements of ``a`` occupy."""
    ptr = a.__array_interface__["data"][0]
    if a.size == 0:
        return ptr, ptr
    lo = hi = ptr
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.itemsize


def _contiguous_strides(shape) -> tuple:
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


class _TensorRebuild:
    """A placeholder the pickler writes as a given reduce value (e.g. a Parameter's inner tensor)."""

    __slots__ = ("rv",)

    def __init__(self, rv):
        self.rv = rv


def _is_buffer_marker(t: Tensor) -> bool:
    cls = type(t)
    return cls.__name__ == "Buffer" and cls.__module__ == "ember.nn.parameter"


def _tensor_state(t: Tensor, cls: type) -> dict:
    """The user's Python attributes on a tensor (ember's own bookkeeping fields excluded)."""
    d = t.__dict__
    if not d:
        return {}
    return {k: v for k, v in d.items() if not hasattr(Tensor, k) and not hasattr(cls, k)
            and not (k == "persistent" and _is_buffer_marker(t))}


class _SaveContext:
    """Groups saved tensors by the memory they view, so shared memory becomes one storage."""

    def __init__(self):
        self.entries: list[_StorageEntry] = []
        self._by_root: dict[int, _StorageEntry] = {}
        self._loaded: dict[int, _StorageEntry] = {}

    def _new_entry(self, dtype, lo, hi, owner, location="cpu") -> _StorageEntry:
        e = _StorageEntry(str(len(self.entries)), dtype, lo, hi, owner, location)
        self.entries.append(e)
        return e

    def storage_for(self, t: Tensor):
        """(storage entry, offset, stride) in elements for tensor ``t``."""
        a, dt = t._data, t._dtype
        isz = dt.itemsize
        cstr = _contiguous_strides(a.shape)
        if type(a) is not np.ndarray:
            # a device tensor: its values, copied to the host, saved with the device as the location
            from .devices import opencl
            c = opencl.to_numpy(a)
            clo, chi = _extent(c)
            return self._new_entry(dt, clo, chi, c, str(t.device)), 0, cstr
        stride, ok = [], True
        for n, s, c in zip(a.shape, a.strides, cstr):
            if n <= 1:  # the stride of a dim of size <= 1 never addresses memory
                stride.append(s // isz if s >= 0 and s % isz == 0 else c)
            elif s < 0 or s % isz:
                ok = False
            else:
                stride.append(s // isz)
        ptr = a.__array_interface__["data"][0]
        lo, hi = _extent(a)
        if ok:
            root = _memory_root(a)
            entry = self._by_root.get(id(root))
            if entry is None:
                rlo, rhi = _extent(root)
                if rlo <= lo and hi <= rhi and (ptr - rlo) % isz == 0 and (rhi - rlo) % isz == 0:
                    entry = self._by_root[id(root)] = self._new_entry(dt, rlo, rhi, root)
            elif entry.dtype is not dt:
                raise RuntimeError("Cannot save multiple tensors or storages that view the same data as different types")
            if entry is not None and entry.lo <= lo and hi <= entry.hi and (ptr - entry.lo) % isz == 0:
                return entry, (ptr - entry.lo) // isz, tuple(stride)
        # a layout torch cannot describe (negative or odd strides): save a contiguous copy on its own
        c = np.ascontiguousarray(a)
        clo, chi = _extent(c)
        return self._new_entry(dt, clo, chi, c), 0, cstr

    def reduce_tensor(self, t: Tensor):
        entry, offset, stride = self.storage_for(t)
        size = tuple(t._data.shape)
        cls = type(t)
        is_param = bool(getattr(t, "_is_param", False))
        if _is_buffer_marker(t):
            cls = Tensor
        state = _tensor_state(t, cls)
        v2 = _g("torch._utils", "_rebuild_tensor_v2")
        if is_param:
            data = _TensorRebuild((v2, (entry, offset, size, stride, False, collections.OrderedDict())))
            if state:
                return (_g("torch._utils", "_rebuild_parameter_with_state"),
                        (data, t._rg, collections.OrderedDict(), state))
            return (_g("torch._utils", "_rebuild_parameter"), (data, t._rg, collections.OrderedDict()))
        args = (entry, offset, size, stride, t._rg, collections.OrderedDict())
        if cls is Tensor and not state:
            return (v2, args)
        new_type = _g("torch", "Tensor") if cls is Tensor else cls
        return (_g("torch._tensor", "_rebuild_from_type_v2"), (v2, new_type, args, state))

    def pid_for_loaded(self, st: CheckpointStorage):
        entry = self._loaded.get(id(st))
        if entry is None:
            buf = st._buf
            lo = buf.__array_interface__["data"][0]
            n = buf.size - buf.size % st.dtype.itemsize
            entry = self._loaded[id(st)] = self._new_entry(st.dtype, lo, lo + n, st)
        return entry.pid


def _save_global_marker(pickler, obj) -> None:
    pickler.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
    pickler.memoize(obj)


def _save_dtype(pickler, obj) -> None:
    _save_global_marker(pickler, _g("torch", obj.name))


class _CheckpointPickler(pickle._Pickler):
    """The stdlib's Python pickler, writing ember objects under torch's names."""

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[_Global] = _save_global_marker
    dispatch[_dt.dtype] = _save_dtype

    def __init__(self, file, protocol, ctx: _SaveContext):
        super().__init__(file, protocol=protocol)
        self._ctx = ctx

    def persistent_id(self, obj):
        t = type(obj)
        if t is _StorageEntry:
            return obj.pid
        if t is CheckpointStorage:
            return self._ctx.pid_for_loaded(obj)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return self._ctx.reduce_tensor(obj)
        t = type(obj)
        if t is _TensorRebuild:
            return obj.rv
        if t is Size:
            return (_g("torch", "Size"), (tuple(obj),))
        if t is device:
            return (_g("torch", "device"), (obj.type,) if obj.index is None else (obj.type, obj.index))
        return NotImplemented


class _ZipWriter:
    """Writes a stored (uncompressed) zip laid out as torch's writer (miniz) does.

    Every record's data starts on a 64-byte boundary (padding goes into a local ``FB`` extra field),
    each non-empty record is followed by a data descriptor, and zip64 fields appear when sizes or
    offsets reach 4 GiB, so torch can read ember checkpoints, memory-map them and compute storage
    offsets exactly as it does for its own files.
    """

    def __init__(self, fp, archive: str):
        self.fp = fp
        self.archive = archive
        self.pos = 0
        self.records: list[tuple] = []
        self.crc_all = 0

    def _write(self, b) -> None:
        self.fp.write(b)
        self.pos += len(b)

    def write_record(self, name: str, data) -> None:
        mv = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        n = mv.nbytes
        full = f"{self.archive}/{name}".encode("utf-8")
        offset = self.pos
        lim = _ZIP64_LIMIT
        z64 = b""
        if n >= lim or offset >= lim:
            body = (struct.pack("<QQ", n, n) if n >= lim else b"") + (struct.pack("<Q", offset) if offset >= lim else b"")
            z64 = struct.pack("<HH", 1, len(body)) + body
        pad = -(offset + 30 + len(full) + len(z64) + 4) % _ALIGNMENT
        extra = z64 + b"FB" + struct.pack("<H", pad) + b"Z" * pad
        flags = 0x0808 if n else 0x0800  # bit 3: sizes follow in a data descriptor; bit 11: UTF-8 names
        self._write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, flags, 0, 0, 0, 0, 0, 0, len(full), len(extra)))
        self._write(full)
        self._write(extra)
        crc = self._write_data(mv)
        if n:
            if n >= lim or offset >= lim:
                self._write(struct.pack("<IIQQ", 0x08074B50, crc, n, n))
            else:
                self._write(struct.pack("<IIII", 0x08074B50, crc, n, n))
        self.records.append((full, crc, n, offset, flags))
        self.crc_all = zlib.crc32(struct.pack("<I", crc), self.crc_all)

    def _write_data(self, mv: memoryview) -> int:
        crc = 0
        for i in range(0, mv.nbytes, _CHUNK):
            chunk = mv[i:i + _CHUNK]
            crc = zlib.crc32(chunk, crc)
            self._write(chunk)
        return crc

    def serialization_id(self) -> str:
        # deterministic, like torch's: derived from the records' checksums and the archive size
        return f"{self.crc_all:020d}{self.pos:020d}"

    def finish(self) -> None:
        lim = _ZIP64_LIMIT
        cd_start = self.pos
        for full, crc, n, off, flags in self.records:
            body = (struct.pack("<QQ", n, n) if n >= lim else b"") + (struct.pack("<Q", off) if off >= lim else b"")
            extra = struct.pack("<HH", 1, len(body)) + body if body else b""
            cn = 0xFFFFFFFF if n >= lim else n
            coff = 0xFFFFFFFF if off >= lim else off
            self._write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, flags, 0, 0, 0, crc, cn, cn,
                                    len(full), len(extra), 0, 0, 0, 0, coff))
            self._write(full)
            self._write(extra)
        cd_size = self.pos - cd_start
        count = len(self.records)
        eocd64 = self.pos
        self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, count, count, cd_size, cd_start))
        self._write(struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1))
        self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
                                min(cd_size, 0xFFFFFFFF), min(cd_start, 0xFFFFFFFF), 0))


def _pickle_checkpoint(obj, protocol: int):
    ctx = _SaveContext()
    buf = io.BytesIO()
    _CheckpointPickler(buf, protocol, ctx).dump(obj)
    return buf.getvalue(), ctx.entries


def _write_checkpoint(fp, archive: str, data_pkl: bytes, entries, byteorder_record: bool = True) -> None:
    w = _ZipWriter(fp, archive)
    w.write_record("data.pkl", data_pkl)
    w.write_record(".format_version", b"1")
    w.write_record(".storage_alignment", str(_ALIGNMENT).encode())
    if byteorder_record:
        w.write_record("byteorder", sys.byteorder.encode())
    for e in entries:
        w.write_record(f"data/{e.key}", e.data())
    w.write_record("version", b"3\n")
    w.write_record(".data/serialization_id", w.serialization_id().encode())
    w.finish()


def _umask() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _atomic_write(path, write) -> None:
    """Write a file through a temp file in the same directory, renamed over ``path`` once complete."""
    real = os.path.realpath(os.fspath(path))
    parent = os.path.dirname(real)
    if not os.path.isdir(parent):
        raise RuntimeError(f"Parent directory {os.path.dirname(os.path.abspath(os.fspath(path)))} does not exist.")
    try:
        mode = os.stat(real).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(real) + ".", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh, tmp)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _archive_name(path) -> str:
    base = os.path.basename(os.fspath(path))
    stem = base.rsplit(".", 1)[0] if "." in base else base
    return stem if stem and "/" not in stem else "archive"


def save(obj, f, pickle_module=None, pickle_protocol: int = DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False) -> None:
    """Save ``obj`` in PyTorch's checkpoint format (``torch.load`` reads it).

    Tensors that share memory are written as one storage with offsets and strides, so views and
    tied weights survive. ``f`` is a path (written atomically: a temp file in the same directory
    renamed over the target, so a failure never leaves a partial checkpoint) or a binary file object.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("ember.save writes data.pkl with the standard pickle module; "
                         "other pickle_modules are not supported")
    if not _use_new_zipfile_serialization:
        raise ValueError("ember.save writes only the zip checkpoint format (_use_new_zipfile_serialization=True)")
    if not isinstance(pickle_protocol, int) or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"ember.save: pickle_protocol must be an int in [2, {pickle.HIGHEST_PROTOCOL}], "
                         f"got {pickle_protocol!r}")
    data_pkl, entries = _pickle_checkpoint(obj, pickle_protocol)
    record = not _disable_byteorder_record
    if _is_path(f):
        archive = _archive_name(f)
        _atomic_write(f, lambda fh, tmp: _write_checkpoint(fh, archive, data_pkl, entries, record))
    elif hasattr(f, "write"):
        _write_checkpoint(f, "archive", data_pkl, entries, record)
    else:
        raise AttributeError(f"expected 'f' to be string, path, or a file-like object with a 'write' attribute, "
                             f"got {type(f).__name__}")


def serialize(obj) -> bytes:
    """``ember.save`` into bytes (the same zip checkpoint format)."""
    buf = io.BytesIO()
    save(obj, buf)
    return buf.getvalue()


def deserialize(data, weights_only: bool = True, map_location=None):
    """``ember.load`` from bytes produced by :func:`serialize` (or a ``torch.save`` into a buffer)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"ember.deserialize expects bytes, got {type(data).__name__}")
    return load(io.BytesIO(bytes(data)), map_location=map_location, weights_only=weights_only)


# ==================================================================================================
# Plain pickling of tensors (pickle.dumps, copy.copy, multiprocessing)
# ==================================================================================================

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
        from .devices import opencl
        from .tensor import _check_device
        arr = opencl.from_numpy(arr, _check_device(device_name).index)
    t = object.__new__(cls)
    t._data = arr
    t._dtype = dt
    t._rg = bool(requires_grad)
    t.grad_fn = None
    if state:
        t.__dict__.update(state)
    return t


# ==================================================================================================
# safetensors
# ==================================================================================================

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

