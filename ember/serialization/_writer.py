"""Writing checkpoints: ``save`` and ``serialize``.

:class:`_SaveContext` groups the saved tensors by the memory they view (shared memory becomes one
storage), :class:`_CheckpointPickler` writes ``data.pkl`` with torch's global names without importing
torch, and :class:`_ZipWriter` lays the archive out as torch's writer does.
"""
from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import sys
import types
import zlib

import numpy as np

from .. import dtypes as _dt
from ..autograd.views import _extent
from ..tensor import Tensor, Size, device, wrap as _wrap
from ._files import _CHUNK, _atomic_write, _is_path
from ._storage import _STORAGE_NAME, CheckpointStorage

DEFAULT_PROTOCOL = 2
_ALIGNMENT = 64
_ZIP64_LIMIT = 0xFFFFFFFF  # sizes/offsets from here on need zip64 fields (a module constant so tests can lower it)


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
            from ..devices import opencl
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
        if t.is_sparse or t.is_sparse_csr or t.layout == "sparse_csc":
            return _reduce_sparse(t)
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


# ember packages laid out as torch's (every class and function in them lives at torch's path with ``ember``
# for ``torch``, which tests/test_module_paths.py checks): their globals are written under torch's names
_MIRRORED = frozenset({"nn", "optim", "utils", "distributions", "autograd", "amp", "linalg", "special", "fft",
                       "func", "return_types"})

# torch.nn.functional names that are torch._C._nn builtins (torch pickles ``F.gelu`` as ``torch._C._nn gelu``,
# and its weights-only loader matches an allowlisted ``F.gelu`` by that name)
_TORCH_C_NN = frozenset({"avg_pool2d", "avg_pool3d", "elu_", "gelu", "hardtanh_", "leaky_relu_", "linear", "logsigmoid",
                         "one_hot", "scaled_dot_product_attention", "softplus", "softshrink"})


def _reduce_sparse(t):
    """A sparse COO tensor as torch writes it: ``_rebuild_sparse_tensor(layout, (indices, values, size,
    is_coalesced))``, the layout as ``torch.serialization._get_layout("torch.sparse_coo")``."""
    d = t._data
    if t.is_sparse_csr:         # CSR: (crow_indices, col_indices, values, size)
        lay = _TensorRebuild((_g("torch.serialization", "_get_layout"), ("torch.sparse_csr",)))
        parts = (t.crow_indices(), t.col_indices(), _wrap(d.values, t._dtype), Size(d.shape))
        return (_g("torch._utils", "_rebuild_sparse_tensor"), (lay, parts))
    if t.layout == "sparse_csc":  # CSC: (ccol_indices, row_indices, values, size)
        lay = _TensorRebuild((_g("torch.serialization", "_get_layout"), ("torch.sparse_csc",)))
        parts = (t.ccol_indices(), t.row_indices(), _wrap(d.values, t._dtype), Size(d.shape))
        return (_g("torch._utils", "_rebuild_sparse_tensor"), (lay, parts))
    lay = _TensorRebuild((_g("torch.serialization", "_get_layout"), ("torch.sparse_coo",)))
    parts = (t._indices(), _wrap(d.values, t._dtype), Size(d.shape), d.coalesced)
    return (_g("torch._utils", "_rebuild_sparse_tensor"), (lay, parts))


def _torch_name(obj, name=None):
    """The torch global (module, name) that ``obj`` (an ember class or function) is written as, or None
    to write it under its own name: ``ember.nn.modules.linear.Linear`` -> ``torch.nn.modules.linear
    Linear``, ``ember.nn.functional.relu`` -> ``torch.nn.functional relu``, a function re-exported at
    ember's top level (``ember.tanh``) -> ``torch tanh``. Only names that resolve back to ``obj`` in ember
    are mapped, so ember reads its own checkpoints (torch.X -> ember.X) whatever torch has."""
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str) or not module.startswith("ember"):
        return None
    qual = name or getattr(obj, "__qualname__", None)
    mod = sys.modules.get(module)
    parts = module.split(".")
    if (isinstance(qual, str) and "." not in qual and mod is not None and getattr(mod, qual, None) is obj
            and (module == "ember" or parts[1] in _MIRRORED)):
        if module == "ember.nn.functional" and qual in _TORCH_C_NN:
            return "torch._C._nn", qual
        return "torch" + module[5:], qual
    # a function ember makes in a factory (qualname ``_float_unary.<locals>.fn``) and exports at its top level
    short = getattr(obj, "__name__", None)
    top = sys.modules.get("ember")
    if isinstance(short, str) and top is not None and getattr(top, short, None) is obj:
        return "torch", short
    return None


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

    def save_global(self, obj, name=None):
        """Classes and functions: ember's under torch's names (:func:`_torch_name`), others as pickle does."""
        mapped = _torch_name(obj, name)
        if mapped is None:
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{mapped[0]}\n{mapped[1]}\n".encode("utf-8"))
        self.memoize(obj)

    dispatch[types.FunctionType] = save_global

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
