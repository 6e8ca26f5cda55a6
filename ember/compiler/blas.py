"""Find a real BLAS (with a C header) that generated kernels can call: ``cblas_sgemm`` / ``cblas_dgemm``.

The BLAS comes from the ``scipy-openblas32`` wheel (a dependency of ember): OpenBLAS with ``cblas.h``,
32-bit integers (``blasint`` is ``int``) and every exported symbol carrying a prefix (``scipy_cblas_sgemm``)
so it never clashes with NumPy's own bundled OpenBLAS (``scipy_openblas64_``, 64-bit integers).

Usage from the code generator::

    from ember.compiler import blas
    if blas.blas_available():
        src = blas.BLAS.prelude + my_kernel_source       # may call cblas_sgemm(...) by its plain name
        lib = build.compile_source(src, link_blas=True)
    else:
        ...                                              # fall back to generated loops

``BLAS`` is a :class:`BlasInfo` (or ``None`` when no BLAS was found): ``include_dir``, ``lib_dir``,
``lib_name`` (for ``-l``), ``lib_path``, ``symbol_prefix`` / ``symbol_suffix`` (read from ``cblas.h``),
``int_bits``, ``version``, ``prelude`` (C text: ``#include <cblas.h>`` plus a ``#define`` giving every
prefixed function its plain name, e.g. ``#define cblas_sgemm scipy_cblas_sgemm`` and
``#define openblas_set_num_threads scipy_openblas_set_num_threads``), ``cflags`` and ``ldflags``.

Set ``EMBER_BLAS=0`` to pretend no BLAS is installed (to test the loop fallback). When the package is
missing, ``blas_available()`` is False and callers must generate their own matmul loops.

Threading note: this OpenBLAS runs its own pthread pool (it is not built with OpenMP). Call BLAS from
outside ``#pragma omp parallel`` regions; inside one, each OpenMP thread would start BLAS threads too.
Its threads spin while they wait, so when the cores are shared with other work a threaded call can be
far slower than a single-threaded one (measured on this 2-core machine under a load average of ~6: a
256x256x256 sgemm took 0.6 ms on one thread and 2.6-32 ms on two). ``set_num_threads(n)`` /
``get_num_threads()`` control that pool (``OPENBLAS_NUM_THREADS`` sets it at load time).
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import re
from dataclasses import dataclass

__all__ = ["BlasInfo", "BLAS", "blas_available", "find_blas", "set_num_threads", "get_num_threads"]

_PACKAGE = "scipy_openblas32"


@dataclass(frozen=True)
class BlasInfo:
    """Where a BLAS lives and how to compile and link against it."""

    include_dir: str
    lib_dir: str
    lib_name: str            # the name for ``-l`` (``scipy_openblas``)
    lib_path: str            # the shared library file itself (part of the build cache key)
    symbol_prefix: str       # "scipy_" for scipy-openblas32, "" for a plain OpenBLAS
    symbol_suffix: str       # "" here; "64_" for the ILP64 scipy-openblas64 build
    int_bits: int            # width of ``blasint`` (lda, M, N, K ...): 32 here
    version: str
    prelude: str             # C text to put at the top of a kernel that calls BLAS

    @property
    def cflags(self) -> tuple:
        return (f"-I{self.include_dir}",)

    @property
    def ldflags(self) -> tuple:
        # the rpath lets the built kernel find the library without LD_LIBRARY_PATH or a Python import
        return (f"-L{self.lib_dir}", f"-l{self.lib_name}", f"-Wl,-rpath,{self.lib_dir}")


def _read_header_names(header: str) -> tuple[str, str, list[str]]:
    """(prefix, suffix, [plain function names]) from the declarations in cblas.h."""
    with open(header, encoding="utf-8", errors="replace") as f:
        text = f.read()
    # (a literal first: a pattern opening with a lazy word at every word boundary took 3 ms here)
    m = re.search(r"cblas_sgemm(\w*)\s*\(", text)
    if m is None:
        raise ValueError(f"{header} does not declare cblas_sgemm")
    start = m.start()
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    prefix, suffix = text[start:m.start()], m.group(1)
    # every declared function carrying the prefix/suffix: cblas_*, openblas_*, goto_* helpers
    pattern = re.compile(r"\b" + re.escape(prefix) + r"((?:cblas|openblas|goto)_\w+)\s*\(")
    names = sorted({n[:len(n) - len(suffix)] for n in pattern.findall(text) if n.endswith(suffix) and len(n) > len(suffix)})
    return prefix, suffix, names


def _make_prelude(prefix: str, suffix: str, names: list[str]) -> str:
    lines = ["/* BLAS prelude (ember.compiler.blas): cblas.h with plain names for the prefixed symbols */",
             "#include <cblas.h>"]
    if prefix or suffix:
        for n in names:
            lines.append(f"#define {n} {prefix}{n}{suffix}")
    return "\n".join(lines) + "\n"


def _package_version(pkg_dir: str) -> str:
    """The installed version of the package at ``pkg_dir``, from the name of its ``.dist-info`` folder
    beside it (``scipy_openblas32-0.3.30.0.1.dist-info``): what ``importlib.metadata.version`` reads, without
    importing importlib.metadata (and the email parser it brings: 40-50 ms of a warm compile here)."""
    site = os.path.dirname(pkg_dir)
    stem = f"{_PACKAGE}-"
    try:
        found = sorted(n[len(stem):-len(".dist-info")] for n in os.listdir(site)
                       if n.startswith(stem) and n.endswith(".dist-info"))
    except OSError:
        found = []
    return found[-1] if len(found) == 1 else "unknown"


def _find_scipy_openblas() -> BlasInfo | None:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    # read from the package's folder, not by importing it: its import reads its version through
    # importlib.metadata and dlopens the library, and a kernel that links the library loads it itself
    pkg_dir = os.path.realpath(list(spec.submodule_search_locations)[0])
    include_dir = os.path.join(pkg_dir, "include")
    lib_dir = os.path.join(pkg_dir, "lib")
    try:
        libs = sorted(f for f in os.listdir(lib_dir) if f.startswith("libscipy_openblas"))
    except OSError:
        return None
    if not libs:
        return None
    fullname = libs[0]                                  # (as the package's get_library() names them)
    lib_name = os.path.splitext(fullname)[0][3:]
    lib_path = os.path.join(lib_dir, fullname)
    header = os.path.join(include_dir, "cblas.h")
    if not (os.path.isfile(header) and os.path.isfile(lib_path)):
        return None
    prefix, suffix, names = _read_header_names(header)
    int_bits = 32
    with open(os.path.join(include_dir, "openblas_config.h"), encoding="utf-8", errors="replace") as f:
        if re.search(r"^#define\s+OPENBLAS_USE64BITINT\b", f.read(), re.M):
            int_bits = 64
    return BlasInfo(include_dir=include_dir, lib_dir=lib_dir, lib_name=lib_name, lib_path=lib_path,
                    symbol_prefix=prefix, symbol_suffix=suffix, int_bits=int_bits,
                    version=_package_version(pkg_dir), prelude=_make_prelude(prefix, suffix, names))


_FOUND: list = []   # [BlasInfo | None] once looked up


def find_blas() -> BlasInfo | None:
    """The BLAS to link generated kernels against, or None (looked up once per process)."""
    if not _FOUND:
        info = None
        if os.environ.get("EMBER_BLAS", "1").strip().lower() not in ("0", "false", "no", "off"):
            try:
                info = _find_scipy_openblas()
            except (OSError, ValueError, ImportError):
                info = None    # a broken install behaves like a missing one: callers use generated loops
        _FOUND.append(info)
    return _FOUND[0]


def blas_available() -> bool:
    """True when generated kernels can call cblas_* (otherwise generate the matmul loops)."""
    return find_blas() is not None


def _thread_function(name: str):
    info = find_blas()
    if info is None:
        raise RuntimeError(f"ember.compiler.blas.{name}: no BLAS found (install scipy-openblas32)")
    lib = ctypes.CDLL(info.lib_path)    # the library is loaded already: this only finds its handle
    return getattr(lib, f"{info.symbol_prefix}openblas_{name}{info.symbol_suffix}")


def set_num_threads(n: int) -> None:
    """Set the number of threads of the BLAS that compiled kernels call."""
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"set_num_threads expects a positive int, got {n!r}")
    fn = _thread_function("set_num_threads")
    fn.argtypes, fn.restype = [ctypes.c_int], None
    fn(n)


def get_num_threads() -> int:
    """The number of threads of the BLAS that compiled kernels call."""
    fn = _thread_function("get_num_threads")
    fn.argtypes, fn.restype = [], ctypes.c_int
    return fn()


def __getattr__(name):
    # ``blas.BLAS`` is resolved on first use so importing this module stays free
    if name == "BLAS":
        return find_blas()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
