"""Programs: ``build`` (memory cache, trusted disk cache of driver binaries, source builds) and
``launch`` (setting a kernel's arguments and enqueueing it).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time

import numpy as np

from ._arrays import DeviceArray
from ._device_runtime import _runtime
from ._devices import _LOCK, _label
from ._records import KERNEL_HOOKS, _note_kernel

cl = None                  # pyopencl, bound by _devices._load_cl on first use
_CACHE_MAGIC = b"EMBER-OPENCL-PROGRAM 1\n"

_BUILD_STATS = {"source_builds": 0, "binary_loads": 0, "memory_hits": 0, "disk_writes": 0,
                "rejected_binaries": 0, "build_seconds": 0.0}
_DISK_NOTE: list = [None]   # why the disk cache is not used (None when it is)


def build_stats() -> dict:
    """Counters of ``build``: source_builds (driver compiles from source), binary_loads (programs
    loaded from the disk cache), memory_hits, disk_writes, rejected_binaries (corrupt or refused cache
    files that were rebuilt), build_seconds (time in source builds), disk_cache (None when the disk
    cache is used, else why not)."""
    return dict(_BUILD_STATS, disk_cache=_DISK_NOTE[0])


def _log(message: str) -> None:
    from ember.compiler.logs import log
    log("kernels", "opencl: " + message)


def _program_dir() -> str | None:
    """``<cache dir>/opencl`` when it can be trusted (created 0700 where missing), else None."""
    from ember.compiler import build as cbuild
    root = cbuild.cache_dir()
    try:
        cbuild._mkdir_private(root)
        root = os.path.realpath(root)
        why = (cbuild._why_untrusted_ancestors(root) or
               cbuild._why_untrusted(root, "the cache directory", directory=True))
        if not why:
            d = os.path.join(root, "opencl")
            cbuild._mkdir_private(d)
            why = cbuild._why_untrusted(d, "the OpenCL program directory", directory=True)
            if not why:
                cbuild._mkdir_private(os.path.join(d, ".locks"))
    except OSError as e:
        why = f"cannot create or inspect the program cache under {root}: {e}"
    if why != _DISK_NOTE[0]:
        _DISK_NOTE[0] = why
        if why:
            _log(f"not using the disk cache: {why}")
    return None if why else d


def _cache_key(rt, source: str, options: str) -> str:
    h = hashlib.sha256()
    for part in ("ember-opencl-1", source, options, rt.platform.version, rt.device.name,
                 rt.device.driver_version):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def _read_binary(path: str) -> bytes | None:
    """The program binary in a cache file, or None when missing, untrusted or corrupt."""
    from ember.compiler import build as cbuild
    try:
        why = cbuild._why_untrusted(path, "the program binary", directory=False)
        if why:
            _log(why + "; not loaded")
            return None
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        _log(f"cannot read {path}: {e}")
        return None
    head = len(_CACHE_MAGIC)
    payload = data[head + 32:]
    if not data.startswith(_CACHE_MAGIC) or hashlib.sha256(payload).digest() != data[head:head + 32]:
        _BUILD_STATS["rejected_binaries"] += 1
        _log(f"{path} is corrupt (bad header or checksum); rebuilding")
        return None
    return payload


def _write_binary(directory: str, path: str, binary: bytes) -> None:
    from ember.compiler import build as cbuild
    tmp = os.path.join(directory, f".tmp-{os.getpid()}-{threading.get_ident()}-{os.path.basename(path)}")
    try:
        with open(cbuild._create_private(tmp), "wb") as f:
            f.write(_CACHE_MAGIC + hashlib.sha256(binary).digest() + binary)
        os.replace(tmp, path)
        _BUILD_STATS["disk_writes"] += 1
    except OSError as e:
        _log(f"cannot write {path}: {e}")
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _from_binary(rt, binary: bytes, options: str, path: str):
    try:
        prg = cl.Program(rt.context, [rt.device], [binary]).build(options=options)
    except cl.Error as e:
        _BUILD_STATS["rejected_binaries"] += 1
        _log(f"the driver refused the cached binary {path} ({str(e).splitlines()[0]}); rebuilding")
        return None
    _BUILD_STATS["binary_loads"] += 1
    return prg


def build(source: str, options: str = "", device=None):
    """A built ``cl.Program`` for ``source`` on ``device``, from the memory cache, the disk cache, or
    the driver's compiler (whose binary is then cached on disk). Compile errors raise RuntimeError
    with the driver's build log."""
    rt = _runtime(device)
    key = (source, options)
    prg = rt.programs.get(key)
    if prg is not None:
        _BUILD_STATS["memory_hits"] += 1
        return prg
    with _LOCK:
        prg = rt.programs.get(key)
        if prg is not None:
            _BUILD_STATS["memory_hits"] += 1
            return prg
        digest = _cache_key(rt, source, options)
        directory = _program_dir()
        path = None if directory is None else os.path.join(directory, digest + ".bin")
        if path is not None:
            from ember.compiler.build import _build_lock
            with _build_lock(directory, digest):    # one process builds a key; the others then load it
                binary = _read_binary(path)
                prg = None if binary is None else _from_binary(rt, binary, options, path)
                if prg is None:
                    prg = _build_source(rt, source, options)
                    binary = prg.get_info(cl.program_info.BINARIES)[0]
                    if binary:
                        _write_binary(directory, path, bytes(binary))
        else:
            prg = _build_source(rt, source, options)
        rt.programs[key] = prg
    return prg


def _build_source(rt, source: str, options: str):
    t0 = time.perf_counter()
    try:
        prg = cl.Program(rt.context, source).build(options=options)
    except cl.Error as e:
        raise RuntimeError(f"ember.opencl: building an OpenCL program for {_label(rt.index)} failed:\n{e}") from None
    _BUILD_STATS["source_builds"] += 1
    _BUILD_STATS["build_seconds"] += time.perf_counter() - t0
    return prg


def _arg(a):
    if isinstance(a, DeviceArray):
        return a.block.buffer
    if isinstance(a, np.generic):
        return a
    if isinstance(a, int) and not isinstance(a, bool):
        return np.int64(a)
    if cl is not None and isinstance(a, (cl.MemoryObjectHolder, cl.LocalMemory)):
        return a
    raise TypeError(f"launch: cannot pass {type(a).__name__} {a!r} to a kernel: pass a DeviceArray, a "
                    "cl.Buffer, a NumPy scalar (np.float32(x), np.int32(n), ...) or a Python int (a long)")


def launch(program, name: str, global_size, local_size=None, args=(), device=None):
    """Enqueue kernel ``name`` of ``program`` (built by :func:`build` for the same device) over
    ``global_size`` work items (an int or a tuple; ``local_size`` None lets the driver choose).
    Returns the ``cl.Event``; nothing is enqueued for an empty range."""
    rt = _runtime(device)
    gs = (int(global_size),) if isinstance(global_size, (int, np.integer)) else tuple(int(g) for g in global_size)
    k = rt.kernel(program, name)
    k.set_args(*[_arg(a) for a in args])
    if 0 in gs:
        return None
    if not KERNEL_HOOKS:
        return cl.enqueue_nd_range_kernel(rt.queue, k, gs, None if local_size is None else tuple(local_size))
    host_ns = time.perf_counter_ns()
    evt = cl.enqueue_nd_range_kernel(rt.queue, k, gs, None if local_size is None else tuple(local_size))
    _note_kernel(rt, name, evt, host_ns)
    return evt
