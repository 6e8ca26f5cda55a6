"""``ember.memory``: memory statistics and a per-process limit for the storages ember tensors use.

The API is ``torch.cuda``'s (``memory_allocated``, ``max_memory_allocated``, ``memory_stats``,
``memory_summary``, ``set_per_process_memory_fraction`` ...); on the CPU it counts the NumPy arrays that
hold ember tensors' data.

    >>> import ember
    >>> before = ember.memory.memory_allocated()
    >>> x = ember.zeros(1000)                   # float32: 4000 bytes
    >>> ember.memory.memory_allocated() - before
    4000
    >>> y = x[10:20]                            # a view shares x's storage: not counted again
    >>> del x, y
    >>> ember.memory.memory_allocated() - before
    0

What is counted
    One *storage* per distinct memory block: a tensor's array is followed to the array that owns its
    memory (``ndarray.base``), so views, ``detach()`` and ``.data`` aliases are counted once. A storage
    is counted when ember first wraps it in a tensor and uncounted when the last array using it is freed
    (a weak reference with a callback on the owning array), which is "when the last tensor that uses it
    goes" -- or later, if autograd still keeps it saved for backward. Memory borrowed from a foreign
    buffer (``np.frombuffer`` over ``bytes``, say) is not ember's and is not counted. Arrays shared with
    NumPy through ``from_numpy`` are counted (ember cannot tell them apart from its own).

When counting happens (design: why this is cheap when unused)
    Counting every storage costs about 0.5-1 microseconds per new tensor (a weak reference and a
    callback), a large fraction of a small op's ~1.2 microseconds, so it is not always on. Instead the
    eager hot path (``ember.tensor.wrap``) pays one ``is not None`` check; statistics switch counting on
    the first time they are needed: any call to this module's query functions, a memory limit
    (``set_per_process_memory_fraction``), or ``ember.profiler.profile(profile_memory=True)``. When
    counting starts, the storages of all live tensors (and the arrays autograd saved) are found once
    through ``gc`` and counted, so the current figure is exact from the first query on; peaks and
    totals ("allocated", "freed") cover the time since counting started (or the last reset).
    ``disable_tracking()`` turns counting off again (the hot path is back to the single check).

Peaks and limits
    ``max_memory_allocated`` is the highest count seen since counting started or
    ``reset_peak_memory_stats()``. ``set_per_process_memory_fraction(f)`` caps the count at ``f`` times the
    machine's physical RAM (``os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")``). A new storage
    that would pass the cap first triggers a garbage collection and one retry (counted in
    ``num_alloc_retries``, as torch's allocator retries after freeing its cache); if it still does not
    fit it raises ``ember.OutOfMemoryError`` naming the requested size, shape and dtype, the limit, what
    is allocated and cached, and the op that asked. Nothing already allocated is touched, and the
    process carries on.

    The check comes *before* the memory is allocated: factories size their result from their arguments
    (``_alloc``/``_check_new``), and while a limit is set one dispatch hook (``_limit_hook``) sizes each
    op's outputs with its meta rule (``ember.ops.meta``) before the kernel runs. An op without a rule is
    checked when its result is wrapped, after its kernel ran. In-place ops write into their tensor
    (``x.add_(1)`` uses NumPy's ``out=``); those that compute a temporary result first may pass the
    limit by that temporary, at most their tensor's size (``_scratch``), so a legal in-place op is never
    refused for memory it does not keep.

Sizes no machine can hold
    With or without a limit, a factory asking for more bytes than an int64 counts, or more than the
    machine's RAM + swap, raises ``RuntimeError`` before allocating (torch's CPU allocator raises
    ``RuntimeError`` too); an op whose NumPy kernel fails to allocate (``MemoryError``) raises
    ``RuntimeError`` naming the op, shape, dtype and bytes.

Reserved memory
    ember keeps no cache on the CPU: storages go back to the system allocator as soon as they are freed,
    so ``memory_reserved() == memory_allocated()``, ``empty_cache()`` has nothing to release, and every
    storage is its own "segment" in ``memory_stats()``.
"""
from __future__ import annotations

import collections
import gc
import importlib
import os
import sys
import weakref

import numpy as np

__all__ = ["OutOfMemoryError", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "memory_cached", "max_memory_cached", "reset_peak_memory_stats",
           "reset_max_memory_allocated", "reset_max_memory_cached", "reset_accumulated_memory_stats",
           "memory_stats", "memory_summary", "empty_cache", "set_per_process_memory_fraction",
           "get_per_process_memory_fraction", "mem_get_info", "enable_tracking", "disable_tracking",
           "is_tracking"]

_tensor_mod = importlib.import_module("ember.tensor")    # the module (``ember.tensor`` is the function)


class OutOfMemoryError(RuntimeError):
    """Raised when an allocation would pass the limit set by ``set_per_process_memory_fraction``
    (``torch.OutOfMemoryError``; a ``RuntimeError``)."""


# ---- counters (plain lists: the allocation path reads and writes them without attribute lookups) ----
# _C: current bytes, peak bytes, total allocated bytes, total freed bytes,
#     current count, peak count, total allocations, total frees
_C = [0, 0, 0, 0, 0, 0, 0, 0]
_EXTRA = {"num_ooms": 0, "num_alloc_retries": 0}
_LIMIT = [None]               # bytes, or None when no limit is set
_FRACTION = [None]
_LIVE: dict = {}              # id(owning array) -> _Ref
_LISTENERS: list = []         # callables f(delta_bytes, current_bytes): the profiler's memory events
_REASONS: set = set()         # why counting is on: "stats", "limit", "profiler"
_SCRATCH = [0]                # bytes an in-place op's temporary result may pass the limit by (``_scratch``)
_SYSTEM = [None]              # physical RAM + swap in bytes, read on first use (``_system_bytes``)
_INT64_MAX = (1 << 63) - 1


class _Ref(weakref.ref):
    """A weak reference to an owning array that remembers its key and size for the free callback."""

    __slots__ = ("key", "nbytes")


def _freed(ref):
    # the owning array is being deallocated: uncount it
    if _LIVE.pop(ref.key, None) is not ref:
        return
    n = ref.nbytes
    cur = _C[0] = _C[0] - n
    _C[3] += n
    _C[4] -= 1
    _C[7] += 1
    if _LISTENERS:
        for f in _LISTENERS:
            f(-n, cur)


def _owner(arr):
    """The array that owns ``arr``'s memory, or None when the memory is a foreign buffer."""
    root = arr
    while True:
        b = root.base
        if b is None:
            return root if isinstance(root, np.ndarray) else None
        if not hasattr(b, "base"):
            return None       # bytes, mmap, memoryview: memory ember did not allocate
        root = b


def _track(arr, check_limit=True):
    """Count ``arr``'s storage if it is new (installed as ``ember.tensor._mem_track``); device and meta
    arrays are not host memory (a device allocator counts its own)."""
    if type(arr) is not np.ndarray:
        return
    root = arr.base
    if root is None:
        root = arr
    elif type(root) is not np.ndarray or root.base is not None:
        root = _owner(arr)
        if root is None:
            return
    k = id(root)
    if k in _LIVE:
        return
    n = root.nbytes
    if not n:
        return
    cur = _C[0] + n
    lim = _LIMIT[0]
    if lim is not None and cur > lim and check_limit:
        _over_limit(n, arr)
        cur = _C[0] + n
    r = _LIVE[k] = _Ref(root, _freed)
    r.key = k
    r.nbytes = n
    _C[0] = cur
    if cur > _C[1]:
        _C[1] = cur
    _C[2] += n
    c = _C[4] = _C[4] + 1
    if c > _C[5]:
        _C[5] = c
    _C[6] += 1
    if _LISTENERS:
        for f in _LISTENERS:
            f(n, cur)


def _over_limit(n, arr, shape=None, dtype=None):
    if _C[0] + n <= _LIMIT[0] + _SCRATCH[0]:
        return                  # the temporary result of an in-place op (see ``_scratch``)
    # like torch's allocator: free what can be freed (here: collect garbage cycles) and retry once
    _EXTRA["num_alloc_retries"] += 1
    gc.collect()
    if _C[0] + n <= _LIMIT[0]:
        return
    _EXTRA["num_ooms"] += 1
    op = _asking_op()
    total = _physical_memory()
    if shape is None and arr is not None:
        shape, dtype = arr.shape, arr.dtype
    what = f" for a tensor of shape {list(shape)} and dtype {_dtype_name(dtype)}" if shape is not None else ""
    raise OutOfMemoryError(
        f"CPU out of memory: ember op {op} tried to allocate {_human(n)} ({n} bytes){what}, but the "
        f"per-process memory limit is {_human(_LIMIT[0])} ({_LIMIT[0]} bytes; "
        f"set_per_process_memory_fraction({_FRACTION[0]}) of {_human(total)} physical memory). "
        f"{_human(_C[0])} is already allocated by ember tensors and 0 bytes is cached "
        f"(reserved but unallocated). Free tensors you no longer need (del), or raise the limit with "
        f"ember.memory.set_per_process_memory_fraction().")


def _reserve(n: int, shape=None, dtype=None) -> None:
    """Refuse, before anything is allocated, ``n`` new bytes that would pass the per-process limit
    (``ember.OutOfMemoryError``, after one garbage collection). Only called while a limit is set."""
    if _C[0] + n > _LIMIT[0]:
        _over_limit(n, None, shape, dtype)


def _scratch(nbytes: int, fn, *args):
    """Run ``fn(*args)`` letting ``nbytes`` more than the limit be held meanwhile: an in-place op computes
    its result out of place and copies it into the tensor, so that temporary (at most the tensor's size)
    must not make a legal in-place op fail. Anything else it allocates counts as usual."""
    _SCRATCH[0] += nbytes
    try:
        return fn(*args)
    finally:
        _SCRATCH[0] -= nbytes


def _check_new(shape, dtype) -> int:
    """Check a new storage of ``shape`` and NumPy ``dtype`` before it is allocated and return its size in
    bytes: a size that overflows int64 or exceeds the machine's RAM + swap raises ``RuntimeError`` (as
    torch's CPU allocator does), one past the per-process limit ``ember.OutOfMemoryError``."""
    n = np.dtype(dtype).itemsize
    for s in shape:
        n *= s
    if n > _system_bytes():
        raise _too_big(shape, dtype, n)
    if _LIMIT[0] is not None and _C[0] + n > _LIMIT[0]:
        _over_limit(n, None, shape, dtype)
    return n


def _alloc(shape, dtype, make, *args):
    """``make(*args)``, a NumPy call creating a new array of ``shape`` and ``dtype``, after ``_check_new``;
    NumPy's own allocation failures become torch's ``RuntimeError`` too."""
    _check_new(shape, dtype)
    try:
        return make(*args)
    except (MemoryError, ValueError) as e:
        err = _alloc_failed(e, shape, dtype)
        if err is None:
            raise
    raise err


def _alloc_failed(e, shape=None, dtype=None, op=None):
    """The ``RuntimeError`` for NumPy's failure ``e`` to allocate an array (``MemoryError``, or the
    ``ValueError`` for a size past the address space), or None when ``e`` is another error."""
    if isinstance(e, ValueError):
        msg = str(e)
        if "too big" not in msg and "Maximum allowed size" not in msg:
            return None
    shape = getattr(e, "shape", shape)           # NumPy's _ArrayMemoryError knows what it was asked for
    dtype = getattr(e, "dtype", dtype)
    n = None
    if shape is not None and dtype is not None:
        n = np.dtype(dtype).itemsize
        for s in shape:
            n *= int(s)
    err = _too_big(shape, dtype, n, op, system=False)
    err.__cause__ = e
    return err


def _too_big(shape, dtype, n, op=None, system=True) -> RuntimeError:
    op = f"'{op}'" if op is not None else _asking_op()
    what = f"a tensor of shape {list(shape)} and dtype {_dtype_name(dtype)}" if shape is not None else "a tensor"
    if n is not None and n > _INT64_MAX:
        return RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)}: ember op {op} asked "
                            f"for {what}, {n} bytes, more than an int64 can count")
    size = f"{n} bytes ({_human(n)})" if n is not None else "more memory than the system could give"
    why = (f", more than this machine's {_human(_system_bytes())} of physical memory and swap" if system
           else " (the system refused it)")
    return RuntimeError(f"DefaultCPUAllocator: can't allocate memory: ember op {op} tried to allocate {size} "
                        f"for {what}{why}")


def _dtype_name(dtype) -> str:
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def _system_bytes() -> int:
    """Physical RAM + swap: no single allocation bigger than this can ever be backed."""
    n = _SYSTEM[0]
    if n is None:
        try:
            n = _physical_memory()
        except RuntimeError:
            n = _SYSTEM[0] = _INT64_MAX         # unknown: let the allocator decide
            return n
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("SwapTotal:"):
                        n += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        n = _SYSTEM[0] = n
    return n


def _limit_hook(op, args, attrs, run):
    """The dispatch hook installed while a limit is set: size the op's new outputs with its meta rule
    (``ember.ops.meta``) and refuse them before the kernel runs."""
    meta = op.meta
    if meta is not None and _LIMIT[0] is not None:
        from .ops.meta import output_bytes
        n, shape, dtype = output_bytes(op, args, attrs)
        if n and _C[0] + n > _LIMIT[0]:
            _over_limit(n, None, shape, dtype)
    return run()


def _asking_op() -> str:
    """Which op asked for the memory: the op ``registry.apply`` is running, else the outermost ember
    function on the stack; with the caller's file, line and call expression when they are known."""
    from .ops import registry
    codes = {registry.apply.__code__, registry.apply_unhooked.__code__, registry._apply_hooked.__code__}
    f = sys._getframe(1)
    name = outer = None
    while f is not None:
        if name is None and f.f_code in codes and f.f_locals.get("op") is not None:
            op = f.f_locals["op"]
            name = getattr(op, "name", str(op))
        mod = f.f_globals.get("__name__", "")
        if mod == "ember" or mod.startswith("ember."):
            if mod != __name__ and not (mod == "ember.tensor" and f.f_code.co_name in ("wrap", "__new__")):
                outer = f               # the outermost ember frame seen so far
        elif outer is not None:
            break
        f = f.f_back
    site = _call_site(f) if f is not None else ""
    if name is None and outer is not None:
        name = _function_name(outer.f_code, site)
    name = f"'{name}'" if name else "'<unknown>'"
    return f"{name} (called from {site})" if site else name


def _function_name(code, site: str) -> str:
    # several functions can share one code object (factories): pick the one the call names. The
    # public functions and Tensor methods are looked up first: gc.get_referrers misses functions that
    # gc.freeze() has moved out of the collector's reach
    from .ops.registry import FUNCTIONS
    from .tensor import Tensor
    names = sorted({n for table in (FUNCTIONS, vars(Tensor)) for n, fn in list(table.items())
                    if getattr(fn, "__code__", None) is code})
    if not names:
        fns = [r for r in gc.get_referrers(code) if type(r).__name__ == "function"]
        names = sorted({fn.__name__ for fn in fns})
    if len(names) == 1:
        return names[0]
    for n in names:
        if f"{n}(" in site:
            return n
    return code.co_qualname


def _call_site(f) -> str:
    """``file:line: expression`` of the call running in frame ``f``."""
    import linecache
    try:
        pos = next(p for i, p in enumerate(f.f_code.co_positions()) if 2 * i == f.f_lasti)
        line = linecache.getline(f.f_code.co_filename, pos[0]).rstrip("\n")
        expr = line[pos[2]:pos[3]] if pos[0] == pos[1] and pos[2] is not None else line.strip()
    except (StopIteration, TypeError, IndexError):
        expr = ""
    where = f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"
    return f"{where}: {expr}" if expr else where


def _human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} bytes" if unit == "bytes" else f"{n:.2f} {unit}"
        n /= 1024.0
    return str(n)


def _physical_memory() -> int:
    """Total physical RAM in bytes (the "device capacity" the memory fraction refers to)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        raise RuntimeError("ember.memory: cannot read the physical memory size on this platform "
                           "(os.sysconf SC_PHYS_PAGES is unavailable)") from None


# ---- switching counting on and off --------------------------------------------------------------
def _enable(reason: str) -> None:
    if not _REASONS:
        _start()
    _REASONS.add(reason)


def _disable(reason: str) -> None:
    _REASONS.discard(reason)
    if not _REASONS:
        _stop()


def _start() -> None:
    """Count the storages of every live tensor (found through gc), then count new ones as they come."""
    from .tensor import Tensor
    from .autograd.node import Node
    for o in gc.get_objects():
        # type(o), not isinstance: some foreign objects warn when their __class__ is read
        if issubclass(type(o), Tensor):
            d = getattr(o, "_data", None)
            if isinstance(d, np.ndarray):
                _track(d, check_limit=False)
        elif issubclass(type(o), Node) and getattr(o, "saved_out", None):   # nodes are per-name subclasses
            # autograd keeps its saved outputs as raw arrays
            for s in o.saved_out:
                if isinstance(s[0], np.ndarray):
                    _track(s[0], check_limit=False)
    _C[1] = max(_C[1], _C[0])
    _C[5] = max(_C[5], _C[4])
    _tensor_mod._mem_track = _track


def _stop() -> None:
    _tensor_mod._mem_track = None
    _LIVE.clear()             # dropping the weak references also drops their callbacks
    for i in range(len(_C)):
        _C[i] = 0


def enable_tracking() -> None:
    """Start counting storages now (the query functions do this on their first call)."""
    _enable("stats")


def disable_tracking() -> None:
    """Stop counting (unless a memory limit or a memory-profiling profiler still needs it) and forget
    the counts; the eager hot path goes back to a single check."""
    _disable("stats")


def is_tracking() -> bool:
    """Whether ember is counting storages right now."""
    return _tensor_mod._mem_track is not None


def _check_device(device, fn: str):
    """None for the CPU, the device index for an OpenCL device (whose allocator answers), else an error."""
    if device is None or (isinstance(device, int) and not isinstance(device, bool) and device in (0, -1)):
        return None
    from .tensor import device as _device
    try:
        d = device if isinstance(device, _device) else _device(device)
    except (TypeError, RuntimeError):
        raise TypeError(f"ember.memory.{fn}: expected a device (None, 'cpu', 'opencl[:N]', ember.device or 0), "
                        f"got {device!r}") from None
    if d.type == "opencl":
        return d.index or 0
    if d.type != "cpu" or d.index not in (None, 0):
        raise RuntimeError(f"ember.memory.{fn}: device '{d}' is not available; ember keeps memory "
                           "statistics for the 'cpu' device only so far")


# ---- queries -------------------------------------------------------------------------------------
_DEVICE_KEYS = {"memory_allocated": "allocated_bytes.all.current", "max_memory_allocated": "allocated_bytes.all.peak",
                "memory_reserved": "reserved_bytes.all.current", "max_memory_reserved": "reserved_bytes.all.peak"}


def _counter(device, op: str, slot: int) -> int:
    """Counter ``_C[slot]`` (0: bytes held now, 1: peak) after checking ``device`` for ``op``; counting starts.
    An OpenCL device answers from its allocator (``_DEVICE_KEYS``)."""
    idx = _check_device(device, op)
    if idx is not None:
        return _device_stats(idx)[_DEVICE_KEYS[op]]
    _enable("stats")
    return _C[slot]


def _device_stats(idx: int):
    from .devices.opencl._memory_stats import torch_memory_stats
    return torch_memory_stats(idx)


def memory_allocated(device=None) -> int:
    """Bytes currently held by the storages of ember tensors (``torch.cuda.memory_allocated``).

        >>> n = ember.memory.memory_allocated()
    """
    return _counter(device, "memory_allocated", 0)


def max_memory_allocated(device=None) -> int:
    """Peak of ``memory_allocated`` since counting started or the last ``reset_peak_memory_stats``."""
    return _counter(device, "max_memory_allocated", 1)


def memory_reserved(device=None) -> int:
    """Bytes reserved by ember's allocator: equal to ``memory_allocated`` (no cache on the CPU)."""
    return _counter(device, "memory_reserved", 0)


def max_memory_reserved(device=None) -> int:
    """Peak of ``memory_reserved`` (equal to ``max_memory_allocated`` on the CPU)."""
    return _counter(device, "max_memory_reserved", 1)


def memory_cached(device=None) -> int:
    """Deprecated torch name of ``memory_reserved``."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated torch name of ``max_memory_reserved``."""
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None) -> None:
    """Reset the peaks (bytes and counts) to the current values."""
    idx = _check_device(device, "reset_peak_memory_stats")
    if idx is not None:
        from .devices import opencl
        return opencl._device_runtime.reset_peak_memory_stats(idx)
    _enable("stats")
    _C[1] = _C[0]
    _C[5] = _C[4]


def reset_max_memory_allocated(device=None) -> None:
    """Reset the peak of ``memory_allocated`` (torch's older name; same as ``reset_peak_memory_stats``)."""
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    """Reset the peak of ``memory_reserved`` (torch's older name; same as ``reset_peak_memory_stats``)."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    """Reset the running totals (bytes/allocations made and freed) and the OOM and retry counters."""
    idx = _check_device(device, "reset_accumulated_memory_stats")
    if idx is not None:
        from .devices import opencl
        return opencl._device_runtime.reset_accumulated_memory_stats(idx)
    _enable("stats")
    _C[2] = _C[3] = _C[6] = _C[7] = 0
    _EXTRA["num_ooms"] = _EXTRA["num_alloc_retries"] = 0


def memory_stats(device=None) -> "collections.OrderedDict[str, int]":
    """A dictionary of statistics with torch's keys, e.g. ``"allocated_bytes.all.current"``,
    ``"allocated_bytes.all.peak"``, ``"allocation.all.current"``, ``"num_alloc_retries"``, ``"num_ooms"``.

    Only the ``all`` pool exists on the CPU. Allocated, active, requested and reserved bytes are equal
    (no cache, no rounding); every storage is one allocation and one segment.

        >>> ember.memory.memory_stats()["num_ooms"]
        0
    """
    idx = _check_device(device, "memory_stats")
    if idx is not None:
        return _device_stats(idx)
    _enable("stats")
    cur, peak, alloc, freed, ncur, npeak, nalloc, nfreed = _C
    stats = {}
    for key in ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes"):
        stats.update({f"{key}.all.current": cur, f"{key}.all.peak": peak,
                      f"{key}.all.allocated": alloc, f"{key}.all.freed": freed})
    for key in ("allocation", "active", "segment"):
        stats.update({f"{key}.all.current": ncur, f"{key}.all.peak": npeak,
                      f"{key}.all.allocated": nalloc, f"{key}.all.freed": nfreed})
    for key in ("inactive_split", "inactive_split_bytes", "oversize_allocations", "oversize_segments"):
        stats.update({f"{key}.all.{k}": 0 for k in ("current", "peak", "allocated", "freed")})
    stats.update({"num_alloc_retries": _EXTRA["num_alloc_retries"], "num_ooms": _EXTRA["num_ooms"],
                  "num_sync_all_streams": 0, "num_device_alloc": nalloc, "num_device_free": nfreed,
                  "max_split_size": -1})
    return collections.OrderedDict(sorted(stats.items()))


def _fmt_size(n: int) -> str:
    # torch's summary style: an integer and a binary unit, moving up a unit from 768 of the next
    units = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    i = 0
    while i + 1 < len(units) and abs(n) >= 768 * 1024 ** (i + 1):
        i += 1
    return f"{n // 1024 ** i:6d} {units[i]}"


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A readable table of ``memory_stats`` (torch.cuda.memory_summary's layout).

        >>> print(ember.memory.memory_summary())      # doctest: +SKIP
    """
    idx = _check_device(device, "memory_summary")
    st = memory_stats(device)
    width = 75
    lim = "none" if _LIMIT[0] is None else f"{_human(_LIMIT[0])} ({_FRACTION[0]} of RAM)"
    where = "CPU"
    if idx is not None:
        from .devices import opencl
        frac = opencl.get_per_process_memory_fraction()
        where = f"opencl:{idx}"
        lim = "none" if not frac else f"{_human(frac * opencl.recommended_max_memory(idx))} ({frac} of the device)"
    lines = ["|" + "=" * width + "|",
             "|" + f"ember {where} memory summary".center(width) + "|",
             "|" + "-" * width + "|",
             "|" + f"{where} OOMs: {st['num_ooms']}".center(37) + "|"
             + f"alloc retries: {st['num_alloc_retries']}".center(37) + "|",
             "|" + f"per-process limit: {lim}".center(width) + "|",
             "|" + "=" * width + "|",
             "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
             "|" + "-" * width + "|"]
    rows = [("Allocated memory", "allocated_bytes", True), ("Active memory", "active_bytes", True),
            ("Requested memory", "requested_bytes", True), ("Reserved memory", "reserved_bytes", True),
            ("Non-releasable memory", "inactive_split_bytes", True),
            ("Allocations", "allocation", False), ("Active allocs", "active", False),
            ("Segments", "segment", False), ("Non-releasable allocs", "inactive_split", False)]
    if abbreviated:
        rows = [r for r in rows if r[1] in ("allocated_bytes", "reserved_bytes", "allocation")]
    for i, (label, key, is_bytes) in enumerate(rows):
        vals = [st[f"{key}.all.{k}"] for k in ("current", "peak", "allocated", "freed")]
        cells = [_fmt_size(v) if is_bytes else f"{v:10d}" for v in vals]
        lines.append(f"| {label:<21s} | " + " | ".join(f"{c:>10s}" for c in cells) + " |")
        if i + 1 == len(rows) or rows[i + 1][2] != is_bytes:
            lines.append("|" + "-" * width + "|")    # between the byte rows and the count rows
    lines[-1] = "|" + "=" * width + "|"
    return "\n".join(lines) + "\n"


def empty_cache() -> None:
    """Release cached memory: nothing to do on the CPU, where ember keeps no cache (storages are
    returned to the system allocator as soon as they are freed)."""


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Cap what ember tensors may hold at ``fraction`` of physical RAM; an allocation beyond the cap
    raises ``ember.OutOfMemoryError``. ``1.0`` caps at all of RAM.

        >>> ember.memory.set_per_process_memory_fraction(0.5)
    """
    idx = _check_device(device, "set_per_process_memory_fraction")
    if idx is not None:      # the device allocator's limit (torch.mps's rule: 0 removes it, up to 2 allowed)
        from .devices import opencl
        return opencl.set_per_process_memory_fraction(fraction)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _FRACTION[0] = fraction
    _LIMIT[0] = int(fraction * _physical_memory())
    _enable("limit")
    from .ops import registry, meta  # noqa: F401 - importing meta attaches the size rules to the ops
    if _limit_hook not in registry.HOOKS:
        registry.HOOKS.append(_limit_hook)
        registry.QUIET_HOOKS.add(_limit_hook)


def get_per_process_memory_fraction(device=None) -> float:
    """The fraction set by ``set_per_process_memory_fraction`` (1.0 when none was set)."""
    if _check_device(device, "get_per_process_memory_fraction") is not None:
        from .devices import opencl
        return opencl.get_per_process_memory_fraction()
    return 1.0 if _FRACTION[0] is None else _FRACTION[0]


def _clear_limit() -> None:
    """Remove the limit (tests and tools; torch has no public way back besides setting 1.0)."""
    _LIMIT[0] = _FRACTION[0] = None
    _disable("limit")
    from .ops import registry
    if _limit_hook in registry.HOOKS:
        registry.HOOKS.remove(_limit_hook)


def mem_get_info(device=None) -> tuple:
    """``(free, total)`` bytes of physical memory, as the operating system reports them; for an OpenCL
    device, its global memory and what the allocator does not hold of it."""
    idx = _check_device(device, "mem_get_info")
    if idx is not None:
        from .devices import opencl
        total = opencl.recommended_max_memory(idx)
        return max(total - opencl.driver_allocated_memory(idx), 0), total
    total = _physical_memory()
    try:
        free = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        free = total - _C[0]
    return free, total
