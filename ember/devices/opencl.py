"""``ember.devices.opencl``: the OpenCL device runtime -- devices, storage, copies, a caching
allocator, a program cache, events, kernel launches and CPU-fallback counters.

This layer knows nothing about ``ember.Tensor``: it moves bytes and runs kernels. A device tensor's
storage is a :class:`DeviceArray`; ops are OpenCL C kernels built with :func:`build` and run with
:func:`launch`. ``pyopencl`` is optional: without it (or without an OpenCL driver) this module still
imports, ``is_available()`` is False and ``unavailable_reason()`` says what to install.

Devices
    ``opencl:N`` numbers the devices of all platforms in a stable order (platforms sorted by name,
    vendor and version; each platform's devices in the driver's order). A device's context and its ONE
    in-order command queue (profiling enabled) are created on first use (``_runtime(N)``). Everything
    for a device goes through that queue, so commands run in the order they were enqueued: a kernel
    sees the results of every earlier copy and kernel without explicit events, and a freed block can be
    handed to the next allocation at once (its next user is queued after its last one).

Storage: ``DeviceArray``
    ``block`` (an allocator :class:`Block` owning a ``cl.Buffer``), ``offset`` in BYTES from the start
    of the block, ``shape``, ``strides`` in ELEMENTS (any strides, 0 for expanded dims), ``dtype`` (a
    NumPy dtype; bfloat16 is ``ml_dtypes.bfloat16``, as in ``ember.dtypes``) and ``device`` (the index).
    ``view(offset, shape, strides)`` makes another DeviceArray on the same block; the block stays alive
    while any view references it. OpenCL sub-buffers need aligned origins, so views are not
    sub-buffers: kernels take the buffer and an element offset (``DeviceArray.element_offset``) as two
    arguments and index ``buf[offset + ...]``. Offsets are multiples of the item size.

Copies
    ``from_numpy`` (host -> device; the host array is made C-contiguous first), ``to_numpy`` (device ->
    host; a strided view reads the bytes it spans and picks the elements with ``as_strided`` on the
    host, or, when it spans much more than it holds, gathers on the device first) and ``copy_``
    (device -> device, broadcasting the source; contiguous pairs use ``clEnqueueCopyBuffer``, anything
    else a generated strided-copy kernel per (item size, ndim) after merging dims that are contiguous
    in both). Copies move raw bytes, so every dtype of the same size shares kernels: bool/int8/uint8,
    int16/float16/bfloat16, int32/float32, int64/float64/complex64, complex128. ``copy_stats()``
    counts copies and bytes per direction; functions in ``COPY_HOOKS`` receive a :class:`CopyRecord`
    for each copy (see "Profiling hooks").

Caching allocator
    Requests are rounded to a size class: up to 1 MiB to a multiple of 512 B, above to a multiple of
    1 MiB (waste below 512 B, resp. 1 MiB). Each class has a LIFO free list, so a block freed and asked
    for again is the same ``cl.Buffer``; a free block is never split or handed to another class (simple
    and predictable; ``empty_cache()`` returns all free blocks to the driver). A block goes back to its
    free list when its last ``DeviceArray`` is garbage collected (``Block.__del__`` appends to a
    lock-free pending list that the allocator drains under its lock, so a collection that runs inside
    the allocator cannot corrupt it).

    ``memory_allocated()`` counts the blocks of live arrays (rounded sizes), ``driver_allocated_memory()``
    everything held from the driver (live + cached). ``set_per_process_memory_fraction(f)`` follows
    ``torch.mps``: a float in [0, 2]; the limit is ``f * recommended_max_memory()`` (the device's global
    memory size) and 0 means no limit (the default). The limit is checked BEFORE a new ``cl.Buffer`` is
    created: a request that would take the driver-held bytes past it first empties the cache, then
    raises ``ember.OutOfMemoryError`` naming the size, the limit, the allocated and cached bytes and the
    op. A driver allocation failure (``cl.MemoryError``) empties the cache and retries once. A request
    above the device's ``CL_DEVICE_MAX_MEM_ALLOC_SIZE`` is refused before the driver too. Nothing
    already allocated is touched by a refusal: the process carries on. Note that some drivers only
    reserve memory at first use, so a driver failure can also surface later, from an enqueue.

Programs
    ``build(source, options)`` returns a built ``cl.Program``, cached in memory and on disk under
    ``<ember cache dir>/opencl/`` (``EMBER_CACHE_DIR`` or ``~/.cache/ember``; the same directory and
    trust rules as ``ember.compiler.build``: directories 0700 and owned by this user, nothing writable
    by others). The disk key is sha256 over the source, the options, the platform version, the device
    name and the driver version. A cached file is a magic line, the sha256 of the binary and the
    binary; it is written to a private temporary file and moved into place with ``os.replace``, and a
    file-lock stripe lets one process build a key while the others wait. A file whose checksum does not
    match, or that the driver refuses to build, is rebuilt from source and replaced (the checksum
    matters: some drivers abort the process on a truncated binary instead of returning an error).
    ``build_stats()`` counts source builds, binary loads and memory hits.

Events and kernel launches
    :class:`Event` is ``torch.mps.Event``: ``record()`` enqueues a marker, ``elapsed_time(end)`` is
    the time between the two markers' completion timestamps (OpenCL profiling), in milliseconds and
    never negative. ``launch(program, name, global_size, local_size, args)`` sets the arguments
    (a DeviceArray passes its buffer, a Python int passes a ``long``, NumPy scalars pass themselves) and
    enqueues the kernel. ``fill_`` and ``arange`` are small built-in kernels.

Profiling hooks
    ``KERNEL_HOOKS`` and ``COPY_HOOKS`` are lists of callables; empty by default, which costs one
    truth test per launch or copy. When a hook is installed, the command's event is kept and the hook
    gets a :class:`KernelRecord` / :class:`CopyRecord` (device timestamps in ns, plus the host
    ``perf_counter_ns`` at enqueue) once the command is known to be complete: at ``synchronize()``,
    after a blocking copy, or when 256 records are pending. ``ember.opencl.profiler`` is the consumer.

CPU fallback counters
    An op without an OpenCL kernel calls ``record_fallback(op, reason)`` before running on the CPU:
    it is counted (``fallback_counts()``) and warned about once per op. With ``EMBER_OPENCL_FALLBACK=0``
    or ``set_fallback_allowed(False)`` it raises NotImplementedError instead. Functions in
    ``FALLBACK_HOOKS`` (empty by default) receive a :class:`FallbackRecord` at once, on the thread
    that falls back.

Threads: the allocator and the caches are locked; one ``cl.Kernel`` object per (program, name) is
shared, so concurrent ``launch`` calls of the same kernel from several threads are not supported.
"""
from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import threading
import time
import warnings

import numpy as np

__all__ = [
    "is_available", "unavailable_reason", "device_count", "get_device_name", "synchronize",
    "DeviceArray", "Block", "empty", "from_numpy", "to_numpy", "copy_", "fill_", "arange",
    "copy_stats", "reset_copy_stats", "COPY_HOOKS", "KERNEL_HOOKS", "CopyRecord", "KernelRecord",
    "memory_allocated", "driver_allocated_memory", "memory_stats", "empty_cache", "recommended_max_memory",
    "set_per_process_memory_fraction", "get_per_process_memory_fraction",
    "build", "build_stats", "launch", "Event", "default_generator", "manual_seed_all",
    "fallback_counts", "reset_fallback_counts", "record_fallback", "set_fallback_allowed", "fallback_allowed",
    "FALLBACK_HOOKS", "FallbackRecord",
]

cl = None                  # the pyopencl module once loaded (imported lazily: importing it takes a while)
_CL_ERROR: list = []       # why pyopencl could not be imported
_LOCK = threading.RLock()  # device enumeration, runtime creation, program builds
_DEVICES: list | None = None     # [(platform, device)] in opencl:N order
_UNAVAILABLE: list = [None]      # why there is no device (None when there is one)
_RUNTIMES: dict = {}             # index -> _Runtime

_SMALL_LIMIT = 1 << 20     # requests up to this size round to _SMALL_ROUND, larger ones to _LARGE_ROUND
_SMALL_ROUND = 512
_LARGE_ROUND = 1 << 20
_CPU_COPY_CHUNK = 64       # see _Runtime.copy_chunk
_PENDING_FLUSH = 256       # profiling records delivered at the latest when this many are pending
_CACHE_MAGIC = b"EMBER-OPENCL-PROGRAM 1\n"
_ITEM_TYPES = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}


# ---- devices ------------------------------------------------------------------------------------------

def _load_cl() -> bool:
    global cl
    if cl is not None:
        return True
    if _CL_ERROR:
        return False
    try:
        import pyopencl
    except ImportError as e:
        _CL_ERROR.append(f"pyopencl is not installed ({e}); install it with `pip install pyopencl`")
        return False
    cl = pyopencl
    return True


def _enumerate() -> list:
    global _DEVICES
    if _DEVICES is not None:
        return _DEVICES
    with _LOCK:
        if _DEVICES is not None:
            return _DEVICES
        found, why = [], None
        if not _load_cl():
            why = _CL_ERROR[0]
        else:
            try:
                platforms = cl.get_platforms()
            except cl.Error as e:     # the ICD loader reports "no platform" as an error
                platforms, why = [], f"no OpenCL platform found ({e})"
            for p in sorted(platforms, key=lambda p: (p.name, p.vendor, p.version)):
                try:
                    found.extend((p, d) for d in p.get_devices())
                except cl.Error:      # a platform without devices
                    continue
            if not found:
                why = ((why or "no OpenCL platform with a device found") +
                       "; install an OpenCL driver, e.g. `apt-get install pocl-opencl-icd` (Debian/Ubuntu "
                       "CPU driver), or your GPU vendor's OpenCL ICD")
        _UNAVAILABLE[0] = why
        _DEVICES = found
    return _DEVICES


def is_available() -> bool:
    """True when pyopencl is installed and at least one OpenCL device exists."""
    return bool(_enumerate())


def unavailable_reason() -> str | None:
    """Why ``is_available()`` is False (what to install), or None when it is True."""
    _enumerate()
    return _UNAVAILABLE[0]


def device_count() -> int:
    """The number of OpenCL devices across all platforms (0 without pyopencl or a driver)."""
    return len(_enumerate())


def _index(device) -> int:
    if device is None:
        return 0
    if isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise RuntimeError(f"opencl: device index must be non-negative, got {device}")
        return device
    if isinstance(device, str):
        kind, sep, idx = device.partition(":")
        if kind == "opencl" and (not sep or idx.isdigit()):
            return int(idx) if sep else 0
        raise RuntimeError(f"expected an OpenCL device ('opencl' or 'opencl:N'), got '{device}'")
    kind = getattr(device, "type", None)
    if kind == "opencl":
        return 0 if device.index is None else int(device.index)
    raise RuntimeError(f"expected an OpenCL device ('opencl', 'opencl:N' or an index), got {device!r}")


def _device_entry(i: int) -> tuple:
    devs = _enumerate()
    if not devs:
        raise RuntimeError(f"ember.opencl: no OpenCL device is available: {_UNAVAILABLE[0]}")
    if i >= len(devs):
        raise RuntimeError(f"opencl:{i}: invalid device index; {len(devs)} OpenCL device(s) found "
                           f"(valid: opencl:0 .. opencl:{len(devs) - 1})")
    return devs[i]


def get_device_name(device=None) -> str:
    """The driver's name of device ``device`` (an index, ``"opencl:N"``; default 0)."""
    return _device_entry(_index(device))[1].name.strip()


def _label(i: int) -> str:
    try:
        return f"opencl:{i} ({get_device_name(i)})"
    except RuntimeError:
        return f"opencl:{i}"


class _Runtime:
    """One device: context, queue, allocator state and kernel caches."""

    def __init__(self, index: int, platform, device):
        self.index = index
        self.platform = platform
        self.device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device,
                                     properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.total_memory = int(device.global_mem_size)
        self.max_alloc = int(device.max_mem_alloc_size)
        self.has_fp64 = "cl_khr_fp64" in device.extensions
        # elements per work item of the strided copy: CPUs run work items in loops, where dividing the
        # index once per chunk pays; GPUs want one element per work item (coalesced accesses)
        self.copy_chunk = _CPU_COPY_CHUNK if device.type & cl.device_type.CPU else 1
        self.lock = threading.RLock()
        self.free: dict = {}                       # size class -> [cl.Buffer], LIFO
        self.pending_free = collections.deque()    # (buffer, size) from Block.__del__, drained under lock
        self.allocated = 0                         # bytes in live blocks
        self.cached = 0                            # bytes in free lists
        self.stats = dict(peak_allocated_bytes=0, num_allocs=0, num_cache_hits=0, num_driver_allocs=0,
                          num_driver_frees=0, num_alloc_retries=0, num_ooms=0)
        self.programs: dict = {}                   # (source, options) -> cl.Program
        self.kernels: dict = {}                    # (program int_ptr, name) -> (program, cl.Kernel)
        self.copy_kernels: dict = {}               # (ndim, itemsize) -> cl.Kernel

    # -- allocator --
    def drain(self) -> None:
        pending = self.pending_free
        if not pending:
            return
        with self.lock:
            while pending:
                buf, size = pending.popleft()
                self.allocated -= size
                self.free.setdefault(size, []).append(buf)
                self.cached += size

    def malloc(self, nbytes: int, op=None) -> "Block":
        size = _size_class(nbytes)
        self.drain()
        with self.lock:
            bucket = self.free.get(size)
            if bucket:
                buf = bucket.pop()
                self.cached -= size
                self.stats["num_cache_hits"] += 1
            else:
                buf = self._driver_alloc(nbytes, size, op)
            self.allocated += size
            self.stats["num_allocs"] += 1
            if self.allocated > self.stats["peak_allocated_bytes"]:
                self.stats["peak_allocated_bytes"] = self.allocated
        return Block(buf, size, nbytes, self)

    def limit(self):
        f = _FRACTION[0]
        return None if f == 0.0 else int(f * self.total_memory)

    def _driver_alloc(self, nbytes: int, size: int, op):
        if size > self.max_alloc:
            self.stats["num_ooms"] += 1
            raise _oom_class()(
                f"{_label(self.index)} out of memory: {_op_part(op)}tried to allocate {_human(nbytes)} "
                f"({nbytes} bytes) in one buffer, but the device's largest single allocation "
                f"(CL_DEVICE_MAX_MEM_ALLOC_SIZE) is {_human(self.max_alloc)} ({self.max_alloc} bytes).")
        limit = self.limit()
        if limit is not None and self.allocated + self.cached + size > limit:
            self.empty_cache()                         # the cache first: it may be what is in the way
            if self.allocated + size > limit:
                self.stats["num_ooms"] += 1
                raise self._oom(nbytes, size, limit, op)
        for attempt in (0, 1):
            try:
                buf = _create_buffer(self.context, size)
                break
            except cl.MemoryError as e:
                if attempt == 0:
                    self.stats["num_alloc_retries"] += 1
                    self.empty_cache()
                    continue
                self.stats["num_ooms"] += 1
                raise _oom_class()(
                    f"{_label(self.index)} out of memory: {_op_part(op)}tried to allocate {_human(nbytes)} "
                    f"({nbytes} bytes) and the driver refused even after the cache was emptied ({e}). "
                    f"{_human(self.allocated)} is allocated by live device arrays and 0 bytes is cached."
                ) from None
        self.stats["num_driver_allocs"] += 1
        return buf

    def _oom(self, nbytes, size, limit, op):
        return _oom_class()(
            f"{_label(self.index)} out of memory: {_op_part(op)}tried to allocate {_human(nbytes)} "
            f"({nbytes} bytes; a {size}-byte block), but the per-process limit is {_human(limit)} "
            f"({limit} bytes; set_per_process_memory_fraction({_FRACTION[0]}) of recommended_max_memory "
            f"{_human(self.total_memory)}). {_human(self.allocated)} ({self.allocated} bytes) is allocated "
            f"by live device arrays and {_human(self.cached)} ({self.cached} bytes) is cached (reserved but "
            f"unused). Free arrays you no longer need, or raise the limit with "
            f"ember.opencl.set_per_process_memory_fraction() (0.0 removes it).")

    def empty_cache(self) -> None:
        self.drain()
        with self.lock:
            for bucket in self.free.values():
                for buf in bucket:
                    buf.release()
                    self.stats["num_driver_frees"] += 1
            self.free.clear()
            self.cached = 0

    # -- kernels --
    def kernel(self, program, name: str):
        key = (program.int_ptr, name)
        hit = self.kernels.get(key)
        if hit is None or hit[0] is not program:
            hit = self.kernels[key] = (program, cl.Kernel(program, name))
        return hit[1]

    def copy_kernel(self, ndim: int, itemsize: int):
        k = self.copy_kernels.get((ndim, itemsize))
        if k is None:
            prg = build(_copy_source(ndim, self.copy_chunk), device=self.index)
            k = self.copy_kernels[(ndim, itemsize)] = self.kernel(prg, f"ember_copy_{itemsize}")
        return k


def _create_buffer(context, size: int):
    """A new read-write device buffer (the one place that asks the driver for memory)."""
    return cl.Buffer(context, cl.mem_flags.READ_WRITE, size)


def _runtime(device=None) -> _Runtime:
    i = _index(device)
    rt = _RUNTIMES.get(i)
    if rt is not None:
        return rt
    with _LOCK:
        rt = _RUNTIMES.get(i)
        if rt is None:
            platform, dev = _device_entry(i)
            rt = _RUNTIMES[i] = _Runtime(i, platform, dev)
            _register_synchronizer()
    return rt


def _register_synchronizer() -> None:
    # ember.synchronize("opencl:N") / ember.Event on an OpenCL device wait for the queue
    try:
        from ember import events
    except ImportError:
        return
    events.register_synchronizer("opencl", synchronize)


def synchronize(device=None) -> None:
    """Wait until all queued work is done: on ``device``, or on every device in use when None."""
    if device is None:
        if not _enumerate():
            raise RuntimeError(f"ember.opencl: no OpenCL device is available: {_UNAVAILABLE[0]}")
        runtimes = list(_RUNTIMES.values())
    else:
        runtimes = [_runtime(device)]
    for rt in runtimes:
        rt.queue.finish()
    _flush_records()


# ---- storage -------------------------------------------------------------------------------------------

def _size_class(nbytes: int) -> int:
    if nbytes <= _SMALL_LIMIT:
        return max(_SMALL_ROUND, -(-nbytes // _SMALL_ROUND) * _SMALL_ROUND)
    return -(-nbytes // _LARGE_ROUND) * _LARGE_ROUND


class Block:
    """A ``cl.Buffer`` lent by the caching allocator: ``size`` (its size class, what the driver gave)
    and ``nbytes`` (what was asked for). When the last reference goes, the buffer returns to the free
    list of its size class."""

    __slots__ = ("buffer", "size", "nbytes", "_rt", "_shadow", "__weakref__")

    def __init__(self, buffer, size: int, nbytes: int, rt: _Runtime):
        self.buffer = buffer
        self.size = size
        self.nbytes = nbytes
        self._rt = rt
        self._shadow = None     # a host array of the block's size, for computing views (devices.dispatch)

    @property
    def device(self) -> int:
        return self._rt.index

    def __del__(self):
        try:
            self._rt.pending_free.append((self.buffer, self.size))
        except Exception:      # interpreter shutdown
            pass

    def __repr__(self):
        return f"<opencl Block {self.nbytes}/{self.size} bytes on opencl:{self._rt.index}>"


def _contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


class DeviceArray:
    """The storage of a device tensor: ``block`` + byte ``offset`` + ``shape`` + element ``strides``
    + NumPy ``dtype`` + device index. Views share the block (see the module docstring)."""

    __slots__ = ("block", "offset", "shape", "strides", "dtype", "device", "__weakref__")

    def __init__(self, block: Block, offset: int, shape, strides, dtype, device: int):
        self.block = block
        self.offset = offset
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device

    @property
    def buffer(self):
        """The ``cl.Buffer`` (pass it with ``element_offset`` to kernels)."""
        return self.block.buffer

    @property
    def element_offset(self) -> int:
        return self.offset // self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def is_contiguous(self) -> bool:
        """C-contiguous, ignoring the strides of size-1 dims (torch's rule); empty arrays are."""
        expected = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n == 0:
                return True
            if n != 1:
                if s != expected:
                    return False
                expected *= n
        return True

    def _extent(self) -> tuple:
        """(lowest, highest + 1) element index reached, relative to the block start."""
        lo = hi = self.offset // self.dtype.itemsize
        for n, s in zip(self.shape, self.strides):
            if n == 0:
                return lo, lo
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        return lo, hi + 1

    def view(self, offset: int, shape, strides, dtype=None) -> "DeviceArray":
        """A DeviceArray on the same block: ``offset`` in bytes from the block start, ``strides`` in
        elements of ``dtype`` (default: this array's)."""
        dt = self.dtype if dtype is None else np.dtype(dtype)
        shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
        if len(shape) != len(strides):
            raise RuntimeError(f"mismatch in length of strides and shape: {len(strides)} strides for "
                               f"{len(shape)} dims")
        if any(n < 0 for n in shape):
            raise RuntimeError(f"negative dimension in shape {list(shape)}")
        if offset < 0 or offset % dt.itemsize:
            raise ValueError(f"view: byte offset {offset} must be a non-negative multiple of the item size "
                             f"{dt.itemsize} ({dt.name})")
        out = DeviceArray(self.block, int(offset), shape, strides, dt, self.device)
        lo, hi = out._extent()
        if lo < 0 or hi * dt.itemsize > self.block.nbytes:
            raise RuntimeError(f"setStorage: sizes {list(shape)}, strides {list(strides)}, storage offset "
                               f"{offset // dt.itemsize}, and itemsize {dt.itemsize} requiring a storage size "
                               f"of {hi * dt.itemsize} are out of bounds for storage of size {self.block.nbytes}")
        return out

    def __repr__(self):
        return (f"DeviceArray(shape={self.shape}, strides={self.strides}, dtype={self.dtype.name}, "
                f"offset={self.offset}, device='opencl:{self.device}')")


def _check_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.itemsize not in _ITEM_TYPES or dt.kind not in "biufcV" or dt.hasobject:
        raise TypeError(f"can't store NumPy dtype {dt} on an OpenCL device: the supported item types are "
                        "bool, integers, floating point (incl. float16 and bfloat16) and complex")
    return dt


def empty(shape, dtype, device=None, *, op=None) -> DeviceArray:
    """An uninitialised C-contiguous DeviceArray (``op`` names the caller in out-of-memory errors)."""
    dt = _check_dtype(dtype)
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(shape)}")
    rt = _runtime(device)
    n = 1
    for s in shape:
        n *= s
    return DeviceArray(rt.malloc(n * dt.itemsize, op), 0, shape, _contiguous_strides(shape), dt, rt.index)


# ---- copies --------------------------------------------------------------------------------------------

CopyRecord = collections.namedtuple("CopyRecord", "direction nbytes seconds device start_ns end_ns host_ns")
CopyRecord.__doc__ = ("A finished copy: direction 'h2d', 'd2h' or 'd2d', bytes moved, seconds on the "
                      "device, device index, device start/end timestamps (ns) and host perf_counter_ns "
                      "at enqueue.")
KernelRecord = collections.namedtuple("KernelRecord", "name device queued_ns start_ns end_ns host_ns")
KernelRecord.__doc__ = ("A finished kernel: name, device index, device queued/start/end timestamps (ns) "
                        "and host perf_counter_ns at enqueue.")
COPY_HOOKS: list = []
KERNEL_HOOKS: list = []
_COPY_STATS = {"h2d": [0, 0], "d2h": [0, 0], "d2d": [0, 0]}
_PENDING = collections.deque()   # ("copy"|"kernel", name/direction, nbytes, device, event, host_ns)
_WAIT_EACH = [False]             # profiler's wait_until_completed


def copy_stats() -> dict:
    """``{"h2d"|"d2h"|"d2d": {"count": copies, "bytes": bytes moved}}`` since the last reset."""
    return {k: {"count": v[0], "bytes": v[1]} for k, v in _COPY_STATS.items()}


def reset_copy_stats() -> None:
    for v in _COPY_STATS.values():
        v[0] = v[1] = 0


def _note_copy(rt, direction: str, nbytes: int, event, host_ns: int) -> None:
    st = _COPY_STATS[direction]
    st[0] += 1
    st[1] += nbytes
    if COPY_HOOKS and event is not None:
        _PENDING.append(("copy", direction, nbytes, rt.index, event, host_ns))
        if _WAIT_EACH[0] or len(_PENDING) >= _PENDING_FLUSH:
            _flush_records()


def _flush_records() -> None:
    """Deliver the pending profiling records (waits for their commands)."""
    while _PENDING:
        kind, name, nbytes, dev, evt, host_ns = _PENDING.popleft()
        evt.wait()
        prof = evt.profile
        start, end = prof.start, prof.end
        if kind == "kernel":
            rec = KernelRecord(name, dev, prof.queued, start, end, host_ns)
            hooks = KERNEL_HOOKS
        else:
            rec = CopyRecord(name, nbytes, max(0, end - start) / 1e9, dev, start, end, host_ns)
            hooks = COPY_HOOKS
        for fn in list(hooks):
            fn(rec)


def _host_bytes(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array's memory as a flat uint8 array (pyopencl cannot read every dtype's buffer
    format, e.g. bfloat16's)."""
    return a.reshape(-1).view(np.uint8)


def from_numpy(arr, device=None, non_blocking: bool = False, *, op=None) -> DeviceArray:
    """Copy a host array to a new contiguous DeviceArray on ``device``.

    With ``non_blocking=True`` the call returns once the copy is queued; the host array must then not
    be modified until the device has read it (``synchronize()``), as with a pinned-memory copy in torch.
    A non-contiguous input is first made contiguous on the host (that copy is private, so it is safe).
    """
    a = np.asarray(arr)
    _check_dtype(a.dtype)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    out = empty(a.shape, a.dtype, device, op=op)
    if a.nbytes:
        rt = out.block._rt
        host_ns = time.perf_counter_ns()
        evt = cl.enqueue_copy(rt.queue, out.block.buffer, _host_bytes(a), is_blocking=not non_blocking)
        _note_copy(rt, "h2d", a.nbytes, evt, host_ns)
    return out


def to_numpy(darr: DeviceArray) -> np.ndarray:
    """A new host array with ``darr``'s values (waits for the device)."""
    dt, shape = darr.dtype, darr.shape
    out = np.empty(shape, dt)
    if out.size == 0:
        return out
    rt = darr.block._rt
    if darr.is_contiguous():
        host_ns = time.perf_counter_ns()
        evt = cl.enqueue_copy(rt.queue, _host_bytes(out), darr.block.buffer, src_offset=darr.offset,
                              is_blocking=True)
        _note_copy(rt, "d2h", out.nbytes, evt, host_ns)
        return out
    lo, hi = darr._extent()
    span = (hi - lo) * dt.itemsize
    if span > 4 * out.nbytes + (1 << 16):
        # a sparse view: gather on the device rather than read everything it spans
        tmp = empty(shape, dt, darr.device, op="to_numpy")
        copy_(tmp, darr)
        return to_numpy(tmp)
    raw = np.empty(hi - lo, dt)
    host_ns = time.perf_counter_ns()
    evt = cl.enqueue_copy(rt.queue, _host_bytes(raw), darr.block.buffer, src_offset=lo * dt.itemsize,
                          is_blocking=True)
    _note_copy(rt, "d2h", span, evt, host_ns)
    start = darr.offset // dt.itemsize - lo
    picked = np.lib.stride_tricks.as_strided(raw[start:], shape, tuple(s * dt.itemsize for s in darr.strides))
    out[...] = picked
    return out


def _broadcast_strides(dst_shape, src_shape, src_strides) -> tuple:
    nd, ns = len(dst_shape), len(src_shape)
    if ns > nd:
        raise RuntimeError(f"output with shape {list(dst_shape)} doesn't match the broadcast shape "
                           f"{list(np.broadcast_shapes(tuple(dst_shape), tuple(src_shape)))}")
    out = [0] * (nd - ns)
    for k, (n, s) in enumerate(zip(src_shape, src_strides)):
        d = dst_shape[nd - ns + k]
        if n == d:
            out.append(s)
        elif n == 1:
            out.append(0)
        elif d == 1:
            raise RuntimeError(f"output with shape {list(dst_shape)} doesn't match the broadcast shape "
                               f"{list(np.broadcast_shapes(tuple(dst_shape), tuple(src_shape)))}")
        else:
            raise RuntimeError(f"The size of tensor a ({d}) must match the size of tensor b ({n}) at "
                               f"non-singleton dimension {k + nd - ns}")
    return tuple(out)


def _coalesce(shape, *stride_lists) -> tuple:
    """Drop size-1 dims and merge neighbours that are contiguous in every stride list."""
    dims = [(n, [st[k] for st in stride_lists]) for k, n in enumerate(shape) if n != 1]
    if not dims:
        return (1,), tuple((0,) for _ in stride_lists)
    merged = [dims[0]]
    for n, sts in dims[1:]:
        pn, psts = merged[-1]
        if all(ps == s * n for ps, s in zip(psts, sts)):
            merged[-1] = (pn * n, sts)
        else:
            merged.append((n, sts))
    return (tuple(n for n, _ in merged),
            tuple(tuple(sts[j] for _, sts in merged) for j in range(len(stride_lists))))


def _copy_source(ndim: int, chunk: int) -> str:
    """OpenCL C for strided copies of ``ndim`` dims, one kernel per item size (raw bits). Each work
    item copies ``chunk`` consecutive elements: it splits its first index into per-dim indices once
    (divisions are slow) and then steps through the rest with carries."""
    dims = range(ndim)
    last = ndim - 1
    params = ", ".join([f"long n{k}" for k in dims] + [f"long ds{k}" for k in dims] +
                       [f"long ss{k}" for k in dims])
    split = "".join(f"    long i{k} = r % n{k}; r /= n{k};\n" for k in range(last, 0, -1)) + "    long i0 = r;\n"
    offsets = "".join(f"    d += i{k} * ds{k}; s += i{k} * ss{k};\n" for k in dims)
    step = ""
    for k in range(last, 0, -1):
        step += (f"        if (++i{k} < n{k}) {{ d += ds{k}; s += ss{k}; continue; }}\n"
                 f"        i{k} = 0; d -= (n{k} - 1) * ds{k}; s -= (n{k} - 1) * ss{k};\n")
    step += "        ++i0; d += ds0; s += ss0;\n"
    parts = [f"/* ember strided copy, {ndim} dims, {chunk} elements per work item */\n"]
    for size, t in _ITEM_TYPES.items():
        parts.append(
            f"__kernel void ember_copy_{size}(__global {t} *dst, long dst_off, __global const {t} *src,\n"
            f"        long src_off, long numel, {params})\n{{\n"
            f"    long first = (long)get_global_id(0) * {chunk};\n    if (first >= numel) return;\n"
            f"    long stop = min(first + {chunk}L, numel);\n"
            f"    long r = first, d = dst_off, s = src_off;\n{split}{offsets}"
            f"    for (long t = first; t < stop; ++t) {{\n        dst[d] = src[s];\n{step}    }}\n}}\n")
    return "".join(parts)


def _global_size(n: int) -> tuple:
    return (-(-n // 256) * 256,)


def _strided_copy(rt, dst_buf, dst_off, dst_strides, src_buf, src_off, src_strides, shape, itemsize):
    shape, (ds, ss) = _coalesce(shape, dst_strides, src_strides)
    n = 1
    for s in shape:
        n *= s
    k = rt.copy_kernel(len(shape), itemsize)
    i64 = np.int64
    k.set_args(dst_buf, i64(dst_off), src_buf, i64(src_off), i64(n),
               *[i64(x) for x in shape], *[i64(x) for x in ds], *[i64(x) for x in ss])
    evt = cl.enqueue_nd_range_kernel(rt.queue, k, _global_size(-(-n // rt.copy_chunk)), None)
    if KERNEL_HOOKS:
        _note_kernel(rt, f"ember_copy_{itemsize}", evt, time.perf_counter_ns())
    return evt


def _check_writable(dst: DeviceArray) -> None:
    for n, s in zip(dst.shape, dst.strides):
        if n > 1 and s == 0:
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers "
                               "to a single memory location. Please clone() the tensor before performing "
                               "the operation.")


def copy_(dst: DeviceArray, src: DeviceArray) -> DeviceArray:
    """Copy ``src`` (broadcast to ``dst.shape``) into ``dst``; both DeviceArrays of the same dtype.
    Returns ``dst``. Arrays on different devices go through the host."""
    if not isinstance(dst, DeviceArray) or not isinstance(src, DeviceArray):
        raise TypeError(f"copy_: expected two DeviceArrays, got {type(dst).__name__} and {type(src).__name__}")
    if dst.dtype != src.dtype:
        raise RuntimeError(f"copy_: dtypes differ (destination {dst.dtype.name}, source {src.dtype.name}); "
                           "the raw copy does not convert: cast with a kernel first")
    src_strides = _broadcast_strides(dst.shape, src.shape, src.strides)
    _check_writable(dst)
    if dst.size == 0:
        return dst
    if src.device != dst.device:
        staged = from_numpy(to_numpy(src), dst.device, op="copy_")
        return copy_(dst, staged)
    rt = dst.block._rt
    isz = dst.itemsize
    if src.block is dst.block:
        slo, shi = src._extent()
        dlo, dhi = dst._extent()
        if slo < dhi and dlo < shi:            # overlapping memory: read everything before writing
            tmp = empty(src.shape, src.dtype, src.device, op="copy_")
            copy_(tmp, src)
            return copy_(dst, tmp)
    host_ns = time.perf_counter_ns()
    if src.shape == dst.shape and src.is_contiguous() and dst.is_contiguous():
        evt = cl.enqueue_copy(rt.queue, dst.block.buffer, src.block.buffer, byte_count=dst.nbytes,
                              src_offset=src.offset, dst_offset=dst.offset)
    else:
        evt = _strided_copy(rt, dst.block.buffer, dst.offset // isz, dst.strides, src.block.buffer,
                            src.offset // isz, src_strides, dst.shape, isz)
    _note_copy(rt, "d2d", dst.nbytes, evt, host_ns)
    return dst


def fill_(darr: DeviceArray, value) -> DeviceArray:
    """Set every element of ``darr`` to ``value`` (converted to its dtype). Returns ``darr``."""
    _check_writable(darr)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # NumPy warns (or raises) on an out-of-range conversion
            pattern = np.array(value, dtype=darr.dtype)
    except (OverflowError, ValueError, TypeError, RuntimeWarning, DeprecationWarning):
        raise RuntimeError(f"value cannot be converted to type {darr.dtype.name} without overflow") from None
    if darr.size == 0:
        return darr
    rt = darr.block._rt
    if darr.is_contiguous():
        evt = cl.enqueue_fill_buffer(rt.queue, darr.block.buffer, _host_bytes(pattern), darr.offset, darr.nbytes)
        if KERNEL_HOOKS:
            _note_kernel(rt, "ember_fill", evt, time.perf_counter_ns())
        return darr
    one = rt.malloc(darr.itemsize, "fill_")
    cl.enqueue_fill_buffer(rt.queue, one.buffer, _host_bytes(pattern), 0, darr.itemsize)
    _strided_copy(rt, darr.block.buffer, darr.element_offset, darr.strides, one.buffer, 0,
                  (0,) * darr.ndim, darr.shape, darr.itemsize)
    return darr


_ARANGE_TYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long", np.dtype(np.float32): "float",
                 np.dtype(np.float64): "double"}


def arange(n: int, dtype=np.int64, device=None, *, start=0, step=1) -> DeviceArray:
    """A new 1-d DeviceArray ``start + i * step`` for i < n (int32, int64, float32, float64)."""
    dt = np.dtype(dtype)
    if dt not in _ARANGE_TYPES:
        raise TypeError(f"arange: dtype {dt.name} is not supported (int32, int64, float32, float64)")
    rt = _runtime(device)
    if dt == np.float64 and not rt.has_fp64:
        raise TypeError(f"arange: {_label(rt.index)} has no float64 support (cl_khr_fp64)")
    out = empty((int(n),), dt, rt.index, op="arange")
    if n:
        types = [t for d, t in _ARANGE_TYPES.items() if t != "double" or rt.has_fp64]
        src = "".join(f"__kernel void ember_arange_{t}(__global {t} *out, long off, long n, {t} start, "
                      f"{t} step) {{ long i = get_global_id(0); if (i < n) out[off + i] = start + ({t})i * step; }}\n"
                      for t in types)
        if rt.has_fp64:
            src = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + src
        launch(build(src, device=rt.index), f"ember_arange_{_ARANGE_TYPES[dt]}", _global_size(n), None,
               [out, 0, int(n), dt.type(start), dt.type(step)], device=rt.index)
    return out


# ---- memory --------------------------------------------------------------------------------------------

_FRACTION = [0.0]


def _oom_class():
    from ember.memory import OutOfMemoryError
    return OutOfMemoryError


def _op_part(op) -> str:
    return f"ember op {op} " if op else ""


def _human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{int(n)} bytes" if unit == "bytes" else f"{n:.2f} {unit}"
        n /= 1024.0
    return f"{n:.2f} TiB"


def _existing(device):
    """The runtime if it was created (None if not: nothing allocated yet); validates the index."""
    i = _index(device)
    rt = _RUNTIMES.get(i)
    if rt is None:
        _device_entry(i)
    else:
        rt.drain()
    return rt


def memory_allocated(device=None) -> int:
    """Bytes in the blocks of live DeviceArrays on ``device`` (rounded to size classes)."""
    rt = _existing(device)
    return 0 if rt is None else rt.allocated


def driver_allocated_memory(device=None) -> int:
    """Bytes held from the driver on ``device``: live blocks plus the allocator's cache."""
    rt = _existing(device)
    return 0 if rt is None else rt.allocated + rt.cached


def memory_stats(device=None) -> dict:
    """Allocator counters of ``device``: allocated/cached/driver/peak bytes, the limit, and counts of
    allocations, cache hits, driver allocations and frees, retries and refusals."""
    rt = _existing(device)
    if rt is None:
        rt = _runtime(device)
    with rt.lock:
        return dict(allocated_bytes=rt.allocated, cached_bytes=rt.cached,
                    driver_bytes=rt.allocated + rt.cached, limit_bytes=rt.limit(), **rt.stats)


def empty_cache(device=None) -> None:
    """Release the cached free blocks to the driver (of ``device``, or of every device in use)."""
    if device is None:
        for rt in list(_RUNTIMES.values()):
            rt.empty_cache()
    else:
        rt = _existing(device)
        if rt is not None:
            rt.empty_cache()


def recommended_max_memory(device=None) -> int:
    """The device's global memory size in bytes (the base of the memory fraction)."""
    return int(_device_entry(_index(device))[1].global_mem_size)


def set_per_process_memory_fraction(fraction) -> None:
    """Limit what the allocator holds from the driver (live + cached) on each device to
    ``fraction * recommended_max_memory()``; 0 removes the limit and values up to 2 are allowed
    (``torch.mps.set_per_process_memory_fraction``)."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 2:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~2")
    _FRACTION[0] = fraction


def get_per_process_memory_fraction() -> float:
    """The fraction set by ``set_per_process_memory_fraction`` (0.0: no limit)."""
    return _FRACTION[0]


# ---- programs ------------------------------------------------------------------------------------------

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


# ---- launches and events -------------------------------------------------------------------------------

def _note_kernel(rt, name: str, evt, host_ns: int) -> None:
    _PENDING.append(("kernel", name, 0, rt.index, evt, host_ns))
    if _WAIT_EACH[0] or len(_PENDING) >= _PENDING_FLUSH:
        _flush_records()


def _arg(a):
    if isinstance(a, DeviceArray):
        return a.block.buffer
    if isinstance(a, np.generic):
        return a
    if isinstance(a, int) and not isinstance(a, bool):
        return np.int64(a)
    if cl is not None and isinstance(a, cl.MemoryObjectHolder):
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


class Event:
    """A marker in a device's queue (``torch.mps.Event`` / ``torch.cuda.Event``).

    ``record()`` enqueues the marker (re-recording moves it); ``elapsed_time(end)`` waits for both
    markers and returns the milliseconds between their completion timestamps (never negative)."""

    __slots__ = ("enable_timing", "_device", "_evt", "_rt")

    def __init__(self, enable_timing: bool = False, device=None):
        self.enable_timing = bool(enable_timing)
        self._device = _index(device)
        self._evt = None
        self._rt = None

    def record(self) -> None:
        rt = self._rt or _runtime(self._device)
        self._rt = rt
        self._evt = cl.enqueue_marker(rt.queue)

    def wait(self) -> None:
        """Make work enqueued later wait for this event (already so on the single in-order queue)."""
        if self._evt is not None:
            cl.enqueue_barrier(self._rt.queue, wait_for=[self._evt])

    def query(self) -> bool:
        """True when the work before the marker is done (or the event was never recorded)."""
        if self._evt is None:
            return True
        self._rt.queue.flush()
        return self._evt.command_execution_status == cl.command_execution_status.COMPLETE

    def synchronize(self) -> None:
        """Wait (on the host) for the work before the marker."""
        if self._evt is not None:
            self._evt.wait()

    def elapsed_time(self, end_event: "Event") -> float:
        if not isinstance(end_event, Event):
            raise TypeError(f"elapsed_time(): argument 'end_event' must be Event, not {type(end_event).__name__}")
        from ember.events import EventError
        if not (self.enable_timing and end_event.enable_timing):
            raise EventError("Both events must be created with argument 'enable_timing=True'.")
        if self._evt is None or end_event._evt is None:
            raise EventError("Both events must be recorded before calculating elapsed time.")
        if self._device != end_event._device:
            raise EventError(f"elapsed_time(): the events are on different devices (opencl:{self._device} "
                             f"and opencl:{end_event._device})")
        self._evt.wait()
        end_event._evt.wait()
        return max(0.0, (end_event._evt.profile.end - self._evt.profile.end) / 1e6)

    def __repr__(self):
        state = "recorded" if self._evt is not None else "not recorded"
        return f"ember.opencl.Event(device='opencl:{self._device}', enable_timing={self.enable_timing}, {state})"


# ---- random state --------------------------------------------------------------------------------------

_GENERATORS: dict = {}
_SEED: list = [None]       # the last manual_seed, given to generators created afterwards


def default_generator(device=None):
    """The ``ember.Generator`` holding the random state of ``device`` (created on first use)."""
    i = _index(device)
    g = _GENERATORS.get(i)
    if g is None:
        from ember.random import Generator
        g = _GENERATORS[i] = Generator(device=f"opencl:{i}")
        if _SEED[0] is not None:
            g.manual_seed(_SEED[0])
    return g


def manual_seed_all(seed: int) -> None:
    """Seed every OpenCL device's generator (also those created later)."""
    seed = int(seed)
    _SEED[0] = seed
    for g in _GENERATORS.values():
        g.manual_seed(seed)


# ---- CPU fallback --------------------------------------------------------------------------------------

_FALLBACK_COUNTS: collections.Counter = collections.Counter()
_FALLBACK_WARNED: set = set()
_FALLBACK_ALLOWED: list = [None]   # None: EMBER_OPENCL_FALLBACK decides
FallbackRecord = collections.namedtuple("FallbackRecord", "op reason device host_ns")
FallbackRecord.__doc__ = ("An op sent to the CPU: op name, reason, device index and host perf_counter_ns "
                          "when it fell back.")
FALLBACK_HOOKS: list = []


def set_fallback_allowed(allowed) -> None:
    """Allow (True) or forbid (False) running ops without an OpenCL kernel on the CPU; None goes back
    to the ``EMBER_OPENCL_FALLBACK`` environment variable (default: allowed; "0" forbids)."""
    _FALLBACK_ALLOWED[0] = None if allowed is None else bool(allowed)


def fallback_allowed() -> bool:
    if _FALLBACK_ALLOWED[0] is not None:
        return _FALLBACK_ALLOWED[0]
    return os.environ.get("EMBER_OPENCL_FALLBACK", "1").strip().lower() not in ("0", "false", "no", "off")


def record_fallback(op_name: str, reason: str = "", device=None) -> None:
    """Note that ``op_name`` runs on the CPU instead of the OpenCL device: counted, warned once per op;
    raises NotImplementedError when fallbacks are forbidden."""
    where = _label(_index(device))
    why = f" ({reason})" if reason else ""
    if not fallback_allowed():
        raise NotImplementedError(
            f"The operator '{op_name}' is not currently implemented for the OpenCL device {where}{why}, "
            f"and the CPU fallback is disabled (EMBER_OPENCL_FALLBACK=0 or "
            f"ember.devices.opencl.set_fallback_allowed(False)). Allow it to run this op on the CPU.")
    _FALLBACK_COUNTS[op_name] += 1
    if FALLBACK_HOOKS:
        rec = FallbackRecord(op_name, reason, _index(device), time.perf_counter_ns())
        for fn in list(FALLBACK_HOOKS):
            fn(rec)
    if op_name not in _FALLBACK_WARNED:
        _FALLBACK_WARNED.add(op_name)
        warnings.warn(f"The operator '{op_name}' is not currently supported on the OpenCL device {where}{why} "
                      f"and will fall back to run on the CPU. This may have performance implications.",
                      UserWarning, stacklevel=2)


def fallback_counts() -> dict:
    """``{op name: number of CPU fallbacks}`` since the last reset."""
    return dict(_FALLBACK_COUNTS)


def reset_fallback_counts() -> None:
    """Zero the counters (the once-per-op warnings are not repeated)."""
    _FALLBACK_COUNTS.clear()
