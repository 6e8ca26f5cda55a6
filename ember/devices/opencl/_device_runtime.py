"""One OpenCL device's runtime (:class:`_Runtime`): its context, its in-order queue, the caching
allocator (size classes, free lists, the memory fraction) and the kernel caches; ``synchronize`` and
the allocator's public counters.
"""
from __future__ import annotations

import collections
import threading

from ._devices import _LOCK, _UNAVAILABLE, _device_entry, _enumerate, _index, _label
from ._records import _flush_records

cl = None                  # pyopencl, bound by _devices._load_cl on first use
_RUNTIMES: dict = {}             # index -> _Runtime

_SMALL_LIMIT = 1 << 20     # requests up to this size round to _SMALL_ROUND, larger ones to _LARGE_ROUND
_SMALL_ROUND = 512
_LARGE_ROUND = 1 << 20
_CPU_COPY_CHUNK = 64       # see _Runtime.copy_chunk


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
                          num_driver_frees=0, num_alloc_retries=0, num_ooms=0, peak_driver_bytes=0,
                          num_frees=0, allocated_bytes_total=0, freed_bytes_total=0, peak_blocks=0,
                          driver_bytes_total=0, driver_freed_bytes_total=0)
        self.blocks = 0                            # live blocks (torch's "allocation.all.current")
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
                self.blocks -= 1
                self.stats["num_frees"] += 1
                self.stats["freed_bytes_total"] += size
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
            self.blocks += 1
            st = self.stats
            st["num_allocs"] += 1
            st["allocated_bytes_total"] += size
            if self.allocated > st["peak_allocated_bytes"]:
                st["peak_allocated_bytes"] = self.allocated
            if self.blocks > st["peak_blocks"]:
                st["peak_blocks"] = self.blocks
            if self.allocated + self.cached > st["peak_driver_bytes"]:
                st["peak_driver_bytes"] = self.allocated + self.cached
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
        self.stats["driver_bytes_total"] += size
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
            for size, bucket in self.free.items():
                for buf in bucket:
                    buf.release()
                    self.stats["num_driver_frees"] += 1
                    self.stats["driver_freed_bytes_total"] += size
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
            from ._copies import _copy_source   # (they need the runtime: imported here, not at the top)
            from ._programs import build
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


def reset_peak_memory_stats(device=None) -> None:
    """Set the peaks (allocated and driver bytes, live blocks) to the current values."""
    rt = _existing(device)
    if rt is not None:
        with rt.lock:
            rt.stats.update(peak_allocated_bytes=rt.allocated, peak_driver_bytes=rt.allocated + rt.cached,
                            peak_blocks=rt.blocks)


def reset_accumulated_memory_stats(device=None) -> None:
    """Zero the running totals (allocations and frees, bytes allocated and freed, retries, refusals)."""
    rt = _existing(device)
    if rt is not None:
        with rt.lock:
            rt.stats.update(num_allocs=0, num_frees=0, allocated_bytes_total=0, freed_bytes_total=0,
                            num_driver_allocs=0, num_driver_frees=0, driver_bytes_total=0,
                            driver_freed_bytes_total=0, num_alloc_retries=0, num_ooms=0, num_cache_hits=0)


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
