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

Where it lives: ``_devices`` (pyopencl, device enumeration), ``_device_runtime`` (context, queue, the
caching allocator), ``_arrays`` (DeviceArray, empty), ``_copies``, ``_programs`` (build, launch),
``_records`` (profiling hooks), ``_events``, ``_random``, ``_fallback``.
"""
from __future__ import annotations

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

from ._arrays import DeviceArray, empty
from ._copies import arange, copy_, fill_, from_numpy, to_numpy
from ._device_runtime import (Block, driver_allocated_memory, empty_cache, get_per_process_memory_fraction,
                              memory_allocated, memory_stats, recommended_max_memory, set_per_process_memory_fraction,
                              synchronize)
from ._devices import device_count, get_device_name, is_available, unavailable_reason
from ._events import Event
from ._fallback import (FALLBACK_HOOKS, FallbackRecord, fallback_allowed, fallback_counts, record_fallback,
                        reset_fallback_counts, set_fallback_allowed)
from ._programs import build, build_stats, launch
from ._random import default_generator, manual_seed_all
from ._records import COPY_HOOKS, KERNEL_HOOKS, CopyRecord, KernelRecord, copy_stats, reset_copy_stats

# private names other modules and the tests use
from ._device_runtime import _RUNTIMES, _create_buffer, _runtime, _size_class  # noqa: F401
from ._devices import _enumerate, _index, _label  # noqa: F401
from ._fallback import _FALLBACK_WARNED  # noqa: F401
from ._programs import _CACHE_MAGIC, _read_binary  # noqa: F401
from ._records import _PENDING, _WAIT_EACH, _flush_records, _note_kernel  # noqa: F401

for _cls in (DeviceArray, Block, Event, CopyRecord, KernelRecord, FallbackRecord):
    _cls.__module__ = __name__   # reprs and pickles name the package, as before the split
del _cls
