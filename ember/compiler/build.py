"""Build generated C into shared libraries, cache them on disk, load them and call them cheaply.

The public API::

    lib = compile_source(source, name="kernel", extra_flags=(), link_blas=False)   # -> CompiledLibrary
    f = lib.get("saxpy", [ctypes.c_long, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p], None)
    run = lib.entry("graph_main")      # an EntryPoint for ``void graph_main(void **args)``
    run((x, y, out))                   # one foreign call; args[i] = data pointer of the i-th ndarray

Example (runnable)::

    >>> import numpy as np
    >>> from ember.compiler import build
    >>> lib = build.compile_source('''
    ... void add1(void **a) { float *x = a[0], *y = a[1]; for (int i = 0; i < 4; i++) y[i] = x[i] + 1; }
    ... ''', name="add1")
    >>> x, y = np.arange(4, dtype=np.float32), np.empty(4, np.float32)
    >>> lib.entry("add1")((x, y)); y.tolist()
    [1.0, 2.0, 3.0, 4.0]

``CompiledLibrary`` has ``.lib`` (the ``ctypes.CDLL``), ``.path`` (the cached ``.so``), ``.key`` (the cache
key), ``.name``, ``.source_path`` (the kept ``.c``), ``.cache_hit`` and ``.compile_seconds`` (0.0 on a hit).
A failed compilation raises :class:`CompileError` (a RuntimeError) holding the compiler's stderr, the
command and the path where the source was kept (``<cache>/failed/``, or a private temporary
directory when the cache is not trusted).

Compiler and flags
    ``CC`` (default ``cc``; may hold arguments, e.g. ``"ccache gcc"``) with
    ``-O3 -march=native -fopenmp -shared -fPIC -std=gnu11 -fno-math-errno -fno-trapping-math`` then
    ``extra_flags`` (compile flags: they go before the source) and ``-lm``. ``-fno-math-errno`` only stops
    libm from setting errno, which lets ``sqrt`` compile to one instruction; results are unchanged.
    ``-fno-trapping-math`` only drops the promise that floating-point exception FLAGS are raised exactly
    as written (nothing in ember reads them); values are unchanged. It lets gcc if-convert float code it
    has sunk into a branch: without it, ``em_exp_f32``'s range checks (gcc threads the clamped-constant
    and overflow paths into branches) kept every loop that calls it scalar, which made the fused GELU GEMM
    epilogue and the softmax row kernels 5-7x slower than their vectorized form (issue 16). Note that gnu11 (unlike c11)
    implies ``-ffp-contract=fast``: with ``-march=native`` on an FMA machine ``a*b + c`` may become one fused
    multiply-add, rounded once, so results can differ from NumPy's by an ulp (they are slightly more
    accurate); pass ``extra_flags=("-ffp-contract=off",)`` where bit-equality with eager matters.
    ``EMBER_FAST_MATH=1`` adds ``-ffast-math``: this CHANGES NUMERICS (reassociated sums, no NaN/inf or
    signed-zero guarantees, approximate reciprocals; in exchange ``expf``/``logf`` loops vectorize through
    glibc's libmvec). Such kernels are compiled and linked in two steps so that gcc < 13 does not link
    ``crtfastmath.o``, which would switch the whole process (NumPy included) to flush-denormals-to-zero.

Disk cache
    ``EMBER_CACHE_DIR`` (default ``~/.cache/ember``), files under ``kernels/``: ``<name>-<key>.so``, the
    source ``.c`` and a ``.json`` sidecar with the sha256 and size of the ``.so``. The key hashes everything
    that changes the binary: the source, the compiler's resolved path and ``--version`` text (asked once
    per process), every flag, ``CACHE_SCHEMA``, the BLAS library path and version when linked, and the
    host CPU (``-march=native`` code must not run on another CPU sharing the cache directory).
    Builds go to a private temporary directory inside the cache, and finished files are moved into
    place with ``os.replace``, so a reader never sees half a file. A striped ``flock`` lets only one process
    build a given key; the others wait and then load its result. Within a process, a lock per key does
    the same for threads, and builds of different keys run at the same time (each compiler is a
    process). A source given as several translation units is compiled unit by unit, as many compilers
    at once as the process may use cores (the costliest first; ``compilers.py`` runs them), then linked;
    a unit may add flags of its own (``units.Unit``; the entries' unit is built at ``-O0``), and such a
    unit's object is reused by a later build of the same text in this process. ``tiers.py`` builds a
    large graph quickly at ``-O1`` first and at ``-O3`` in the background. An entry whose sidecar is missing or
    disagrees with the ``.so`` (truncated file, wrong checksum, other schema) is rebuilt, and so is one
    that is not a regular file (a directory, a symlink, a fifo: it is replaced). A library is loaded once
    per process (an in-memory cache; ``clear_memory_cache()`` forgets it).

Trust (loading a library runs its code; the checks are in ``cache.py``)
    Missing cache directories (and their missing parents) are created with mode 0700, whatever the
    umask; existing directories keep their mode. A ``.so`` is loaded only if it is a regular file (not
    followed if a symlink) owned by this user and writable by nobody else; otherwise it is rebuilt in
    place. The cache is read and written only when its directory and ``kernels/`` are owned by this user
    and not writable by group or others, and every directory above them is owned by this user or root
    and not writable by others unless sticky (as ``/tmp``). Otherwise nothing in the cache is loaded or
    written: each library is built in a new private temporary directory (removed at exit) and
    ``EMBER_LOGS=kernels`` says once why. Compiled files are written ``0700`` (``.so``) or ``0600``.

Counters
    ``STATS``: ``disk_hits``, ``disk_misses``, ``compiles`` (compiler runs, failed ones included),
    ``compile_seconds`` and ``memory_hits``. ``EMBER_LOGS=kernels`` logs each hit, miss and compile.

OpenMP
    Importing this module sets ``OMP_WAIT_POLICY=PASSIVE`` unless the user set it. OpenMP's default
    lets idle threads spin for a while; on a 2-core machine those spinning threads steal the cores from
    the Python thread and from the next kernel, and throughput drops 20-100x (measured: a 1e6-element
    saxpy between bits of Python takes 232 us with PASSIVE, 6 ms with the default). The variable is read
    when the OpenMP runtime loads, so it must be set before any library linking libgomp is loaded (torch
    ships one); if one was already loaded, a RuntimeWarning says so once. ``OMP_PRELUDE`` is C text for
    generated code: it includes ``<omp.h>`` and defines ``EMBER_PARALLEL_FOR(n)``, an ``omp parallel for``
    that only forks when ``n >= EMBER_PARALLEL_MIN`` (waking the pool costs ~10-20 us).
    ``omp_max_threads()`` / ``omp_set_num_threads(n)`` ask and set the runtime the kernels use (the
    setting applies to regions started from the calling thread, as in OpenMP). Any fork-join costs a
    scheduler time slice when another process holds a core, so a shared machine may want 1 thread.

Calling convention for graph entry points
    ``void entry(void **args)``: one pointer per buffer. ``lib.entry(name)`` returns an
    :class:`EntryPoint`; calling it with a tuple of ndarrays makes ONE foreign call into a small C
    trampoline (the "ember runtime" library, built once and cached) that reads each array's data pointer
    and calls the entry, so the cost does not grow with the number of arrays. Measured on this 2-core
    machine (a bare ctypes call is 0.1-0.2 us): EntryPoint 0.45-1 us whatever the number of arrays;
    :class:`PointerArray` (Python fills the block, reading the data pointer from the ndarray struct)
    about 0.2 + 0.35 us per array; filling from ``__array_interface__`` or ``.ctypes.data`` costs 1-3 us
    per array. The trampoline relies on CPython's tuple layout and NumPy's ndarray layout (data pointer
    first); both are checked on live objects at import, and where they differ (or for an ndarray
    subclass) the PointerArray path is used. Anything that is not an ndarray raises TypeError.
    ``args[i]`` is the address of element [0, 0, ...] of array i: strides are the generated code's job.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import warnings

import numpy as np

from . import blas as _blas
from .logs import log
from . import compilers as _compilers
from .compilers import CompileError, _build
from .cache import (CACHE_SCHEMA, _build_lock, _entry_paths, _kernels_dir, _replace, _try_load,
                    _why_untrusted_ancestors, cache_dir, sweep_leftovers)
# (ember.devices.opencl's program cache reads these here)
from .cache import _create_private, _mkdir_private, _sha256_file, _why_untrusted  # noqa: F401

__all__ = ["CACHE_SCHEMA", "STATS", "CompileError", "CompiledLibrary", "EntryPoint", "PointerArray",
           "compile_source", "call", "clear_memory_cache", "cache_dir", "omp_max_threads",
           "omp_set_num_threads", "OMP_PRELUDE", "BASE_FLAGS"]

BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11", "-fno-math-errno",
              "-fno-trapping-math")
_LINK_LIBS = ("-lm",)

STATS = {"disk_hits": 0, "disk_misses": 0, "compiles": 0, "compile_seconds": 0.0, "memory_hits": 0}


# ---- OpenMP -----------------------------------------------------------------------------------------

def _openmp_runtime_loaded() -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        return False
    return re.search(r"/lib(g|i5|)omp[^/\s]*\.so", maps) is not None


# set before the first OpenMP runtime loads: it reads the variable once, when it is loaded
_OMP_POLICY_TOO_LATE = "OMP_WAIT_POLICY" not in os.environ and _openmp_runtime_loaded()
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_omp_warned = False

OMP_PRELUDE = r"""/* OpenMP prelude (ember.compiler.build.OMP_PRELUDE) */
#ifdef _OPENMP
#include <omp.h>
#endif
#ifndef EMBER_PARALLEL_MIN
/* below this many iterations a loop runs on the calling thread: waking the pool costs ~10-20 us */
#define EMBER_PARALLEL_MIN 65536
#endif
#define EMBER_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
#define EMBER_PARALLEL_FOR(n) EMBER_PRAGMA(omp parallel for schedule(static) if((n) >= EMBER_PARALLEL_MIN))
#else
#define EMBER_PARALLEL_FOR(n)
#endif
"""


def _warn_if_omp_policy_late() -> None:
    global _omp_warned
    if _OMP_POLICY_TOO_LATE and not _omp_warned:
        _omp_warned = True
        warnings.warn("ember.compiler: an OpenMP runtime was loaded before OMP_WAIT_POLICY=PASSIVE could be "
                      "set; its idle threads spin, which can make compiled kernels 20-100x slower on a "
                      "machine with few cores. Set OMP_WAIT_POLICY=PASSIVE in the environment (or import "
                      "ember before torch/sklearn).", RuntimeWarning, stacklevel=3)


# ---- compiler identity, flags and cache keys ---------------------------------------------------------

_COMPILERS: dict = {}     # CC string -> (argv, resolved path, version text); asked once per process


def _compiler() -> tuple:
    cc = os.environ.get("CC", "").strip() or "cc"
    found = _COMPILERS.get(cc)
    if found is None:
        argv = tuple(shlex.split(cc))
        path = shutil.which(argv[0]) if argv else None
        if path is None:
            raise CompileError(f"C compiler {cc!r} not found on PATH; install gcc or set CC")
        try:
            proc = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "LC_ALL": "C"})
            version = (proc.stdout + proc.stderr).strip()
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"C compiler {cc!r} failed to run: {e}") from e
        found = (argv, os.path.realpath(path), version)
        _COMPILERS[cc] = found
    return found


_HOST: list = []


def _host_fingerprint() -> str:
    """The CPU that -march=native targets: machine, model name and feature flags."""
    if not _HOST:
        parts = [platform.machine()]
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                info = f.read()
            for field in ("model name", "flags", "Features", "CPU part"):
                m = re.search(rf"^{field}\s*:\s*(.*)$", info, re.M)
                if m:
                    parts.append(m.group(1).strip())
        except OSError:
            parts.append(platform.processor())
        _HOST.append(hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16])
    return _HOST[0]


def _fast_math() -> bool:
    return os.environ.get("EMBER_FAST_MATH", "").strip().lower() in ("1", "true", "yes", "on")


def _safe_name(name: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".") or "kernel")[:64]


# ---- the loaded library ------------------------------------------------------------------------------

class CompiledLibrary:
    """A loaded shared library built by :func:`compile_source`."""

    def __init__(self, lib: ctypes.CDLL, path: str, key: str, name: str, source_path: str,
                 cache_hit: bool, compile_seconds: float):
        self.lib = lib
        self.path = path
        self.key = key
        self.name = name
        self.source_path = source_path
        self.cache_hit = cache_hit
        self.compile_seconds = compile_seconds
        self._funcs: dict = {}
        self._entries: dict = {}

    def get(self, fn_name: str, argtypes=(), restype=None):
        """The C function ``fn_name`` as a ctypes function with these argtypes and restype (None = void)."""
        sig = (fn_name, tuple(argtypes) if argtypes is not None else None, restype)
        fn = self._funcs.get(sig)
        if fn is None:
            try:
                fn = self.lib[fn_name]    # item access gives a fresh object, so signatures never clash
            except AttributeError:
                raise AttributeError(f"compiled library {self.name!r} ({self.path}) has no function "
                                     f"{fn_name!r}") from None
            if argtypes is not None:
                fn.argtypes = list(argtypes)
            fn.restype = restype
            self._funcs[sig] = fn
        return fn

    def entry(self, fn_name: str) -> "EntryPoint":
        """The graph entry point ``void fn_name(void **args)``, callable with a tuple of ndarrays."""
        ep = self._entries.get(fn_name)
        if ep is None:
            ep = EntryPoint(self, fn_name)
            self._entries[fn_name] = ep
        return ep

    def __repr__(self) -> str:
        how = "cache hit" if self.cache_hit else f"compiled in {self.compile_seconds:.3f}s"
        return f"CompiledLibrary({self.name!r}, {self.path!r}, {how})"


# ---- compile_source ----------------------------------------------------------------------------------

_MEMORY: dict = {}              # key -> CompiledLibrary loaded by this process
_BUILD_LOCK = threading.RLock()  # the runtime library's first build; clearing the memory cache
_KEY_LOCKS: dict = {}           # key -> threading.Lock: one thread builds or loads a key, others wait
_KEY_LOCKS_GUARD = threading.Lock()


def _key_lock(key: str):
    """The lock of one cache key in this process: builds of different keys run at the same time (each
    compiler is a process of its own), a second request for a key waits for the first."""
    with _KEY_LOCKS_GUARD:
        lock = _KEY_LOCKS.get(key)
        if lock is None:
            lock = _KEY_LOCKS[key] = threading.Lock()
        return lock


def compile_source(source, *, name: str = "kernel", extra_flags: tuple = (),
                   link_blas: bool = False, cached_only: bool = False) -> CompiledLibrary | None:
    """Compile one C translation unit into a shared library (or take it from the cache) and load it.

    ``source`` is the C text, or a list of translation units (the first defines what the others
    declare extern): they are compiled at the same time, as many as this process may use cores
    (``EMBER_BUILD_JOBS`` overrides), and linked into one library (see ``units.py``).

    ``link_blas=True`` adds the BLAS include and link flags (see ``ember.compiler.blas``; put
    ``blas.BLAS.prelude`` at the top of the source to call ``cblas_sgemm`` by its plain name).
    Raises :class:`CompileError` when the compiler fails or no BLAS is available.

    ``cached_only=True`` never compiles: the library from this process's memory or the disk cache, or
    None when it is not there (a caller that then builds it in the background, ``ember/_native``).
    """
    argv, cc_path, cc_version = _compiler()
    fast = _fast_math()
    cflags = list(BASE_FLAGS)
    if fast:
        cflags.append("-ffast-math")
    ldflags = list(_LINK_LIBS)
    blas_id = None
    if link_blas:
        info = _blas.find_blas()
        if info is None:
            raise CompileError(f"compile_source({name!r}, link_blas=True): no BLAS found (install the "
                               "scipy-openblas32 package, or check ember.compiler.blas.blas_available() "
                               "and generate the matmul loops instead)")
        cflags.extend(info.cflags)
        ldflags = list(info.ldflags) + ldflags
        blas_id = [info.lib_path, info.version]
    cflags.extend(str(f) for f in extra_flags)
    stem_name = _safe_name(name)
    units = [source] if isinstance(source, str) else list(source)
    if not units:
        raise ValueError(f"compile_source({name!r}): no source")
    # a unit's own flags (units.Unit.cflags) come after the library's: its -O wins
    unit_flags = [tuple(str(f) for f in getattr(u, "cflags", ())) for u in units]
    units = [str(u) for u in units]
    key = hashlib.sha256(json.dumps({
        "schema": CACHE_SCHEMA, "name": stem_name, "cc": [list(argv), cc_path, cc_version],
        **({"source": units[0]} if len(units) == 1 else {"units": units}),
        **({"unit_flags": unit_flags} if any(unit_flags) else {}),
        "cflags": cflags, "ldflags": ldflags, "two_step": fast, "blas": blas_id, "host": _host_fingerprint(),
    }, sort_keys=True).encode()).hexdigest()

    lib = _MEMORY.get(key)
    if lib is not None:
        STATS["memory_hits"] += 1
        return lib
    with _key_lock(key):
        lib = _MEMORY.get(key)
        if lib is None and cached_only:
            lib = _load_cached(stem_name, key)
            if lib is None:
                return None
        if lib is None:
            _warn_if_omp_policy_late()
            lib = _load_or_build(list(zip(units, unit_flags)), stem_name, key, argv, cflags, ldflags, two_step=fast,
                                 meta_extra={"compiler": cc_path, "compiler_version": cc_version,
                                             "blas": blas_id})
            _MEMORY[key] = lib
        return lib


def thread_compiles() -> int:
    """How many libraries the calling thread has compiled (``STATS["compiles"]`` counts every thread's,
    a background build's included)."""
    return getattr(_compilers._THREAD, "compiles", 0)


def clear_memory_cache() -> None:
    """Forget the libraries loaded by this process (the disk cache stays; used by ``ember.compiler.reset``),
    after the background builds in flight have landed (``tiers.py``: none is left to land later)."""
    from . import tiers
    tiers.wait_background()
    with _BUILD_LOCK:
        _MEMORY.clear()
        _CALL_ENTRIES.clear()


_DISTRUST_LOGGED: set = set()
_PRIVATE_DIRS: list = []    # temporary build directories of libraries loaded from them; removed at exit


def _remove_private_dirs() -> None:
    for d in _PRIVATE_DIRS:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_remove_private_dirs)


def _load_or_build(units, stem_name, key, argv, cflags, ldflags, *, two_step, meta_extra) -> CompiledLibrary:
    kernels, distrust = _kernels_dir()
    if kernels is None:
        return _build_private(units, stem_name, key, argv, cflags, ldflags, two_step, meta_extra, distrust)
    paths = _entry_paths(kernels, key, stem_name)
    lib, why = _try_load(paths, key)
    if lib is None:
        with _build_lock(kernels, key):
            lib, why = _try_load(paths, key)    # another process may have built it while we waited
            if lib is None:
                sweep_leftovers(kernels)
                try:
                    tmp = tempfile.mkdtemp(prefix=".build-", dir=kernels)
                except OSError as e:    # a read-only cache: its entries load, new ones are not stored
                    return _build_private(units, stem_name, key, argv, cflags, ldflags, two_step, meta_extra,
                                          f"cannot write the kernel directory {kernels}: {e}")
                STATS["disk_misses"] += 1
                log("kernels", f"build {stem_name}: cache miss ({why})")
                try:
                    seconds = _build(units, paths["stem"], tmp, key, argv, cflags, ldflags, two_step, meta_extra, STATS,
                                     os.path.join(os.path.dirname(kernels), "failed"))
                    # the library first, its sidecar last: a reader that sees the new sidecar sees the new
                    # library. Whatever is in the way (a directory, a fifo, someone else's file) is replaced.
                    for part in ("so", "c", "meta"):
                        _replace(os.path.join(tmp, os.path.basename(paths[part])), paths[part], tmp)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                lib = _load_built(paths)
                log("kernels", f"build {stem_name}: compiled in {seconds:.3f}s -> {paths['so']}")
                return CompiledLibrary(lib, paths["so"], key, stem_name, paths["c"], False, seconds)
    STATS["disk_hits"] += 1
    log("kernels", f"build {stem_name}: disk cache hit {paths['so']}")
    return CompiledLibrary(lib, paths["so"], key, stem_name, paths["c"], True, 0.0)


def _load_cached(stem_name: str, key: str):
    """The library of ``key`` from the trusted disk cache, or None (absent, stale, or no trusted cache)."""
    kernels, _ = _kernels_dir()
    if kernels is None:
        return None
    paths = _entry_paths(kernels, key, stem_name)
    lib, _ = _try_load(paths, key)
    if lib is None:
        return None
    STATS["disk_hits"] += 1
    log("kernels", f"build {stem_name}: disk cache hit {paths['so']}")
    return CompiledLibrary(lib, paths["so"], key, stem_name, paths["c"], True, 0.0)


def _build_private(units, stem_name, key, argv, cflags, ldflags, two_step, meta_extra, distrust):
    """Build into a fresh private temporary directory and load from there: the cache is not trusted."""
    if distrust not in _DISTRUST_LOGGED:
        _DISTRUST_LOGGED.add(distrust)
        log("kernels", f"kernel cache not used: {distrust}; libraries are built in private temporary "
                       "directories and not cached (make the directory yours and writable by you only, "
                       "e.g. chmod 700, or set EMBER_CACHE_DIR to such a directory)")
    tmp = tempfile.mkdtemp(prefix="ember-build-")    # mode 0700, a new name
    try:
        bad = _why_untrusted_ancestors(os.path.realpath(tmp))
    except OSError as e:
        bad = str(e)
    if bad:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CompileError(f"cannot build {stem_name}: the kernel cache is not trusted ({distrust}) and neither "
                           f"is the temporary directory ({bad}); set EMBER_CACHE_DIR or TMPDIR")
    _PRIVATE_DIRS.append(tmp)
    STATS["disk_misses"] += 1
    paths = _entry_paths(tmp, key, stem_name)
    seconds = _build(units, paths["stem"], tmp, key, argv, cflags, ldflags, two_step, meta_extra, STATS, None)
    lib = _load_built(paths)
    log("kernels", f"build {stem_name}: compiled in {seconds:.3f}s -> {paths['so']} (not cached)")
    return CompiledLibrary(lib, paths["so"], key, stem_name, paths["c"], False, seconds)


def _load_built(paths: dict) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(paths["so"])
    except OSError as e:
        raise CompileError(f"built {paths['so']} but could not load it: {e}", source_path=paths["c"]) from e


# ---- calling entry points ----------------------------------------------------------------------------

_VOIDP_AT = ctypes.c_void_p.from_address
_NDARRAY = np.ndarray


def _layout_offsets():
    """(ob_type, tuple size, tuple items, ndarray data) offsets when this interpreter's layout is the
    one the C trampoline assumes (checked on live objects), else None."""
    if platform.python_implementation() != "CPython":
        return None
    ob_type = ctypes.sizeof(ctypes.c_ssize_t)          # after ob_refcnt
    tuple_size = object.__basicsize__                  # PyObject_VAR_HEAD: ob_size after the head
    tuple_items = tuple.__basicsize__
    nd_data = object.__basicsize__                     # PyArrayObject_fields: `char *data` first
    try:
        base = np.arange(12, dtype=np.float64).reshape(3, 4)
        samples = (base, base[1:, ::2], np.zeros(0, np.float32), base.T)
        t = tuple(samples)
        ok = (ctypes.c_ssize_t.from_address(id(t) + tuple_size).value == len(t)
              and all(_VOIDP_AT(id(t) + tuple_items + i * ctypes.sizeof(ctypes.c_void_p)).value == id(a)
                      for i, a in enumerate(t))
              and all(_VOIDP_AT(id(a) + ob_type).value == id(type(a)) for a in t)
              and all(_VOIDP_AT(id(a) + nd_data).value == a.__array_interface__["data"][0] for a in t))
    except Exception:    # any surprise means: do not trust the layout
        ok = False
    return (ob_type, tuple_size, tuple_items, nd_data) if ok else None


_OFFSETS = _layout_offsets()
_ND_DATA = _OFFSETS[3] if _OFFSETS else None


def _data_pointer(a, position: int = 0) -> int:
    """The address of element [0, ...] of an ndarray (subclasses included)."""
    if type(a) is _NDARRAY and _ND_DATA is not None:
        return _VOIDP_AT(id(a) + _ND_DATA).value or 0
    if isinstance(a, _NDARRAY):
        return a.__array_interface__["data"][0]
    # a NumPy scalar or Python number would need a temporary buffer of a guessed dtype: refuse
    raise TypeError(f"argument {position} must be a numpy.ndarray, got {type(a).__name__}")


class PointerArray:
    """A reusable ``void *[n]`` argument block for ``void entry(void **args)``.

    Not thread-safe: ctypes releases the GIL during the call, so give each thread its own::

        pa = PointerArray(2)
        pa.call(lib.get("entry", [ctypes.c_void_p]), (x, y))   # args[0], args[1] = data pointers
    """

    __slots__ = ("n", "buf")

    def __init__(self, n: int):
        self.n = int(n)
        self.buf = (ctypes.c_void_p * max(self.n, 1))()

    def fill(self, arrays):
        """Store the data pointer of each array; returns the ctypes array."""
        if len(arrays) != self.n:
            raise ValueError(f"PointerArray({self.n}) got {len(arrays)} arrays")
        buf, off = self.buf, _ND_DATA
        i = 0
        for a in arrays:
            # the exact-ndarray read is inlined: this loop is on the per-call path
            buf[i] = (_VOIDP_AT(id(a) + off).value or 0) if type(a) is _NDARRAY and off is not None \
                else _data_pointer(a, i)
            i += 1
        return buf

    def call(self, fn, arrays) -> None:
        """``fn(args)`` after filling args from ``arrays`` (fn: a ctypes function taking one pointer)."""
        fn(self.fill(arrays))


_RUNTIME: list = []


def _runtime_source(offsets) -> str:
    tramp = ""
    if offsets is not None:
        ob_type, tuple_size, tuple_items, nd_data = offsets
        tramp = f"""
typedef void (*ember_entry_fn)(void **);
/* fn(args) with args[i] = the data pointer of the i-th item of a tuple of exact numpy.ndarray objects.
   Returns 0, or i + 1 when item i is not an exact ndarray (then fn is not called). Offsets are the ones
   ember.compiler.build checked on live objects at import. */
int ember_call_tuple(ember_entry_fn fn, const char *tuple, const void *ndarray_type) {{
    intptr_t n = *(const intptr_t *)(tuple + {tuple_size});
    const char *const *items = (const char *const *)(tuple + {tuple_items});
    void *args[n > 0 ? n : 1];
    for (intptr_t i = 0; i < n; i++) {{
        if (*(const void *const *)(items[i] + {ob_type}) != ndarray_type) return (int)(i + 1);
        args[i] = *(void *const *)(items[i] + {nd_data});
    }}
    fn(args);
    return 0;
}}
"""
    return f"""/* ember runtime support (ember.compiler.build) */
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
int ember_omp_max_threads(void) {{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}}
void ember_omp_set_num_threads(int n) {{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}}
{tramp}"""


def _runtime():
    """(CompiledLibrary, trampoline or None) for the runtime support library, built on first use."""
    if not _RUNTIME:
        with _BUILD_LOCK:
            if not _RUNTIME:
                lib = compile_source(_runtime_source(_OFFSETS), name="ember_runtime")
                tramp = None
                if _OFFSETS is not None:
                    tramp = lib.get("ember_call_tuple", (ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p),
                                    ctypes.c_int)
                _RUNTIME.append((lib, tramp))
                try:     # the kernels' pool follows ember.get_num_threads() (set before it loaded)
                    from .._settings import get_num_threads
                    lib.get("ember_omp_set_num_threads", (ctypes.c_int,), None)(get_num_threads())
                except ImportError:
                    pass
    return _RUNTIME[0]


def omp_max_threads() -> int:
    """``omp_get_max_threads()`` of the OpenMP runtime the compiled kernels use."""
    return _runtime()[0].get("ember_omp_max_threads", (), ctypes.c_int)()


# f(n) for every omp_set_num_threads(n): ember's work pool counts its threads itself (render_par.py)
THREAD_LISTENERS: list = []


def omp_set_num_threads(n: int) -> None:
    """Set the number of threads OpenMP regions in compiled kernels (and ember's work pool) use from now on."""
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"omp_set_num_threads expects a positive int, got {n!r}")
    _runtime()[0].get("ember_omp_set_num_threads", (ctypes.c_int,), None)(n)
    for f in THREAD_LISTENERS:
        f(n)


class EntryPoint:
    """``void name(void **args)`` in a compiled library, called as ``ep(arrays)`` (a tuple of ndarrays).

    Thread-safe (the argument block lives on the C stack). See the module docstring for the cost.
    """

    __slots__ = ("library", "name", "fn", "address", "_tramp")

    def __init__(self, library: CompiledLibrary | None, name: str, fn=None):
        self.library = library
        self.name = name
        self.fn = fn if fn is not None else library.get(name, (ctypes.c_void_p,), None)
        self.address = ctypes.cast(self.fn, ctypes.c_void_p).value
        self._tramp = _runtime()[1]

    def __call__(self, arrays) -> None:
        if type(arrays) is not tuple:
            arrays = tuple(arrays)    # the trampoline reads a tuple's layout
        tramp = self._tramp
        if tramp is None or tramp(self.address, arrays, _NDARRAY_ID):
            # no trampoline, or an argument is not an exact ndarray (the entry was not called)
            try:
                args = PointerArray(len(arrays)).fill(arrays)
            except TypeError as e:
                raise TypeError(f"compiled entry point {self.name!r}: {e}") from None
            self.fn(args)

    def __repr__(self) -> str:
        where = self.library.path if self.library is not None else "a ctypes function"
        return f"EntryPoint({self.name!r} in {where!r})"


_NDARRAY_ID = id(_NDARRAY)
_CALL_ENTRIES: dict = {}    # id(ctypes function) -> (function, EntryPoint); the function is kept alive


def call(fn, arrays) -> None:
    """Call ``void fn(void **args)`` with the data pointers of ``arrays`` in one foreign call.

    ``fn`` is an :class:`EntryPoint` (fastest: ``lib.entry(name)``) or a ctypes function taking one
    pointer (``lib.get(name, [ctypes.c_void_p])``).
    """
    if type(fn) is EntryPoint:
        return fn(arrays)
    found = _CALL_ENTRIES.get(id(fn))
    if found is None:
        found = _CALL_ENTRIES[id(fn)] = (fn, EntryPoint(None, getattr(fn, "__name__", "entry"), fn))
    return found[1](arrays)
