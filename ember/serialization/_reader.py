"""Reading checkpoints: ``load``, ``deserialize`` and ``get_unsafe_globals_in_checkpoint``.

:class:`_CheckpointReader` checks every zip member's declared sizes against the directory, the file and
the limits before a byte of it is read or inflated, and serves the storages to the unpickler.
"""
from __future__ import annotations

import contextlib
import io
import mmap as _mmap
import os
import pickle
import pickletools
import struct
import sys
import zipfile
import zlib

import numpy as np

from ..tensor import device
from ._files import _CHUNK, _is_path
from ._limits import _CheckpointLimitError, _limit
from ._storage import CheckpointStorage, _StorageType
from ._unpickler import (_WeightsOnlyUnpickler, _decode, _fix_py2_name, _lookup_default, _unrestricted_unpickler,
                         _user_allowed_globals, _weights_only_message)


def _restore_location(map_location):
    """A function ``(storage, location) -> storage`` implementing torch's ``map_location``: storages saved
    on an OpenCL device go back there (``None``), or where ``map_location`` sends them; locations of
    devices ember lacks (cuda, mps) load on the CPU."""
    from ..tensor import _check_device, CPU

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



def deserialize(data, weights_only: bool = True, map_location=None):
    """``ember.load`` from bytes produced by :func:`serialize` (or a ``torch.save`` into a buffer)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"ember.deserialize expects bytes, got {type(data).__name__}")
    return load(io.BytesIO(bytes(data)), map_location=map_location, weights_only=weights_only)
