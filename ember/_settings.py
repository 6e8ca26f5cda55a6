"""Top-level helpers real PyTorch programs call: default device, thread counts, determinism and
matmul-precision switches, type predicates (``is_tensor``, ``is_floating_point``, ``numel``) and the
``ember.version`` record.

ember computes on the CPU with NumPy, so the switches are stored and reported back; where they can
act they do (``set_num_threads`` limits NumPy's BLAS threads when threadpoolctl is installed).
"""
from __future__ import annotations

import builtins
import sys
import os
import types
import warnings

import numpy as np

from .tensor import Tensor, device as _device_cls, CPU

__all__ = ["set_default_device", "get_default_device", "get_num_threads", "set_num_threads",
           "get_num_interop_threads", "set_num_interop_threads", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
           "set_deterministic_debug_mode", "get_deterministic_debug_mode", "set_float32_matmul_precision",
           "get_float32_matmul_precision", "is_tensor", "is_floating_point", "is_complex", "numel", "version",
           "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype",
           "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
           "get_autocast_cpu_dtype", "is_autocast_cpu_enabled", "set_autocast_cpu_enabled", "set_autocast_cpu_dtype",
           "get_autocast_gpu_dtype", "autocast_increment_nesting", "autocast_decrement_nesting"]

from .amp.autocast_mode import (is_autocast_enabled, get_autocast_dtype, set_autocast_enabled,  # noqa: E402
                                set_autocast_dtype, is_autocast_cache_enabled, set_autocast_cache_enabled,
                                clear_autocast_cache, get_autocast_cpu_dtype, is_autocast_cpu_enabled,
                                set_autocast_cpu_enabled, set_autocast_cpu_dtype, get_autocast_gpu_dtype,
                                autocast_increment_nesting, autocast_decrement_nesting)


# ---- default device -------------------------------------------------------------------------------


def set_default_device(device) -> None:
    """Set the device factory functions use when no ``device=`` is given: ``"cpu"``, ``"opencl"``,
    ``"opencl:N"``, an ``ember.device``, an int (an OpenCL device index), or None (back to the CPU).

        >>> ember.set_default_device("opencl")
    """
    from .tensor import _DEFAULT_DEVICE, _check_device
    if device is None:
        _DEFAULT_DEVICE[0] = CPU
        return
    if isinstance(device, bool) or not isinstance(device, (str, int, _device_cls)):
        raise TypeError(f"set_default_device(): expected a device (str, int or ember.device) or None, "
                        f"got {type(device).__name__}")
    d = _device_cls("opencl", device) if isinstance(device, int) else _device_cls(device)
    _DEFAULT_DEVICE[0] = _check_device(d)


def get_default_device() -> _device_cls:
    """The device factory functions use when none is given (``cpu`` unless set)."""
    from .tensor import _DEFAULT_DEVICE
    return _DEFAULT_DEVICE[0]


# ---- threads --------------------------------------------------------------------------------------


def _cpu_count() -> int:
    from ._threads import affinity_count
    return affinity_count()


_THREADS = {"intra": _cpu_count(), "inter": _cpu_count(), "blas": 0}   # blas: the limit set (0: none)
_LIMITER: list = []    # the threadpoolctl limiter in force, kept alive so the limit stays


def get_num_threads() -> int:
    """The number of threads used for intra-op parallelism: the cores this process may use unless set
    (``EMBER_NUM_THREADS`` / ``OMP_NUM_THREADS`` or ``set_num_threads``). See ember/_threads.py."""
    return _THREADS["intra"]


def limit_blas(n: int) -> None:
    """Limit NumPy's BLAS to ``n`` threads (when ``threadpoolctl`` is installed and finds a BLAS)."""
    _THREADS["blas"] = n
    try:
        import threadpoolctl
        _LIMITER[:] = [threadpoolctl.threadpool_limits(limits=n, user_api="blas")]
    except Exception:      # threadpoolctl missing or no BLAS found: keep NumPy's default
        pass


def _thread_count(n, op: str, nonpositive: str):
    """``n`` checked as a thread count for ``op``: a positive int (not a bool), else RuntimeError as torch
    raises it (``nonpositive`` is torch's message for n <= 0, which differs between the two setters)."""
    if isinstance(n, bool) or not isinstance(n, builtins.int):
        raise RuntimeError(f"{op} expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError(nonpositive)
    return n


def set_num_threads(int) -> None:  # noqa: A002 - torch's parameter name
    """Set the number of intra-op threads: the compiled kernels' OpenMP pool (their parallel loops and
    ember's GEMM), eager float32 matmuls, and NumPy's BLAS (through ``threadpoolctl``)."""
    n = _thread_count(int, "set_num_threads", "set_num_threads expects a positive integer")
    _THREADS["intra"] = n
    # the compiler's OpenMP runtime, if it is loaded (it applies get_num_threads() when it loads)
    _build = sys.modules.get("ember.compiler.build")
    if _build is not None:
        try:
            _build.omp_set_num_threads(n)
        except Exception:
            pass
    limit_blas(n)


def get_num_interop_threads() -> int:
    """The number of inter-op threads (stored; ember runs ops one at a time)."""
    return _THREADS["inter"]


def set_num_interop_threads(int) -> None:  # noqa: A002
    """Set the number of inter-op threads (stored; ember runs ops one at a time)."""
    _THREADS["inter"] = _thread_count(int, "set_num_interop_threads", "Expected positive number of threads")


# ---- determinism and precision switches -------------------------------------------------------------

_DET = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms. ember's NumPy kernels are deterministic already (the same
    inputs give the same bits, run after run), so the flag is stored and reported back."""
    if not isinstance(mode, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, "
                        f"not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {type(warn_only).__name__}")
    _DET["mode"], _DET["warn_only"] = mode, warn_only


def are_deterministic_algorithms_enabled() -> bool:
    return _DET["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _DET["warn_only"]


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/"default": off; 1/"warn": deterministic with warnings; 2/"error": deterministic."""
    names = {"default": 0, "warn": 1, "error": 2}
    if isinstance(debug_mode, str):
        if debug_mode not in names:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = names[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _DET["mode"]:
        return 0
    return 1 if _DET["warn_only"] else 2


_MATMUL_PRECISION = ["highest"]


def set_float32_matmul_precision(precision: str) -> None:
    """Store the float32 matmul precision ("highest", "high", "medium"). ember's float32 matmuls always
    run in full float32 precision (the "highest" behaviour)."""
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", stacklevel=2)
        return
    _MATMUL_PRECISION[0] = precision


def get_float32_matmul_precision() -> str:
    return _MATMUL_PRECISION[0]


# ---- type predicates --------------------------------------------------------------------------------


def _tensor_only(fn: str, x) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")


def is_tensor(obj) -> bool:
    """True if ``obj`` is an ``ember.Tensor`` (parameters included).

        >>> ember.is_tensor(ember.ones(1)), ember.is_tensor([1])
        (True, False)
    """
    return isinstance(obj, Tensor)


def is_floating_point(input) -> bool:  # noqa: A002
    """True if ``input``'s dtype is a floating type (float16, bfloat16, float32, float64)."""
    _tensor_only("is_floating_point", input)
    return input._dtype.is_floating_point


def is_complex(input) -> bool:  # noqa: A002
    """True if ``input``'s dtype is complex (complex64 or complex128)."""
    _tensor_only("is_complex", input)
    return input._dtype.is_complex


def numel(input) -> int:  # noqa: A002
    """The number of elements of ``input``."""
    _tensor_only("numel", input)
    return int(input._data.size)


def _make_version():
    from . import __version__
    return types.SimpleNamespace(__version__=__version__, cuda=None, hip=None, xpu=None, debug=False,
                                 git_version="unknown")


version = _make_version()


# ---- legacy tensor types (torch.FloatTensor & co.) ------------------------------------------------------


class _LegacyTensorType(type):
    """``torch.FloatTensor``-style constructors: ``FloatTensor(2, 3)`` (uninitialised), ``FloatTensor(data)``;
    ``isinstance(t, FloatTensor)`` checks the dtype; ``t.type(FloatTensor)`` casts."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj._dtype is cls.dtype

    def __call__(cls, *args, device=None):
        from .ops.creation import empty, tensor
        import numpy as _np
        from .tensor import Size as _Size
        if device is not None:
            from .tensor import _check_device
            _check_device(device)
        if not args:
            return empty(0, dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], Tensor):
            src = args[0]
            if src._dtype is not cls.dtype:
                raise TypeError(f"expected {cls.dtype} (got {src._dtype})")
            return src.detach()
        if all(isinstance(a, (builtins.int, _np.integer)) and not isinstance(a, builtins.bool) for a in args) \
                or (len(args) == 1 and isinstance(args[0], _Size)):
            shape = tuple(args[0]) if isinstance(args[0], _Size) else tuple(builtins.int(a) for a in args)
            return empty(shape, dtype=cls.dtype)
        if len(args) == 1:
            return tensor(args[0], dtype=cls.dtype)
        raise TypeError(f"{cls.__name__}() received an invalid combination of arguments")


def _legacy_types():
    from . import dtypes as _d
    out = {}
    for name, dt in [("FloatTensor", _d.float32), ("DoubleTensor", _d.float64), ("HalfTensor", _d.float16),
                     ("BFloat16Tensor", _d.bfloat16), ("LongTensor", _d.int64), ("IntTensor", _d.int32),
                     ("ShortTensor", _d.int16), ("CharTensor", _d.int8), ("ByteTensor", _d.uint8),
                     ("BoolTensor", _d.bool)]:
        out[name] = _LegacyTensorType(name, (), {"dtype": dt, "__module__": "ember",
                                                 "__doc__": f"Legacy constructor for {dt} tensors."})
    return out


globals().update(_legacy_types())
# the legacy types are defined through globals() just above
__all__ += ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
            "CharTensor", "ByteTensor", "BoolTensor"]


# ---- the rest of the real-tensor surface: layout/complex predicates and small aliases -----------------------

def _install_tensor_surface():
    from .ops.registry import attach, node_class, rename

    def _false(self):
        return False
    # storage kinds ember does not have: the predicates libraries check before special-casing them
    for name in ("is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn", "is_nested", "is_xpu", "is_mps",
                 "is_ipu", "is_xla", "is_vulkan", "is_maia", "is_mtia"):
        setattr(Tensor, name, property(_false))
    for name in ("is_inference", "is_conj", "is_neg"):
        setattr(Tensor, name, _false)

    # real/imag/conj/resolve_conj live in ember/ops/complex_ops.py
    def _same(self):
        return self
    attach("resolve_neg", _same, function=False)

    def split_with_sizes(self, split_sizes, dim: int = 0):
        """``split`` with an explicit list of sizes (which must add up to the dim's length)."""
        total = builtins.sum(split_sizes)
        if total != self.shape[dim]:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {self.shape[dim]} (input "
                               f"tensor's size at dimension {dim}), but got split_sizes={list(split_sizes)}")
        return self.split(list(split_sizes), dim)

    narrow_copy_node = node_class("NarrowCopyBackward0")     # an op of its own in torch

    def narrow_copy(self, dim: int, start: int, length: int):
        """``narrow`` followed by a copy (the result shares no memory)."""
        return rename(self.narrow(dim, start, length).clone(), narrow_copy_node)

    def is_nonzero(self) -> bool:
        """True if the single-element tensor is non-zero."""
        n = int(self._data.size)
        if n == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if n > 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return builtins.bool(self._data.reshape(-1)[0] != 0)

    def is_same_size(self, other) -> bool:
        """True if both tensors have the same shape."""
        return tuple(self._data.shape) == tuple(other._data.shape)

    def apply_(self, callable):  # noqa: A002
        """Apply a Python function to every element, in place (CPU only, slow; no autograd)."""
        if self._rg:
            raise RuntimeError("Can't call apply_() on Variable that requires grad. Use var.detach().apply_() "
                               "instead.")
        flat = self._data.reshape(-1) if self._data.flags.c_contiguous else None
        vals = [callable(v.item()) for v in np.nditer(self._data, order="C")]
        new = np.asarray(vals, dtype=self._data.dtype).reshape(self._data.shape)
        if flat is not None:
            flat[...] = new.reshape(-1)
        else:
            self._data[...] = new
        self._bump()
        return self

    def map_(self, tensor, callable):  # noqa: A002
        """``self[i] = callable(self[i], tensor[i])`` elementwise, in place (``tensor`` broadcasts)."""
        if self._rg:
            raise RuntimeError("Can't call map_() on Variable that requires grad. Use var.detach().map_() instead.")
        other = np.broadcast_to(tensor._data, self._data.shape)
        vals = [callable(a.item(), b.item()) for a, b in np.nditer([self._data, other], order="C")]
        self._data[...] = np.asarray(vals, dtype=self._data.dtype).reshape(self._data.shape)
        self._bump()
        return self

    for name, fn in [("split_with_sizes", split_with_sizes), ("narrow_copy", narrow_copy),
                     ("apply_", apply_), ("map_", map_)]:
        setattr(Tensor, name, fn)
    Tensor.unsafe_chunk = Tensor.chunk
    Tensor.unsafe_split = Tensor.split
    Tensor.is_nonzero = is_nonzero
    Tensor.is_same_size = is_same_size
    return {"resolve_neg": _same, "is_nonzero": is_nonzero,
            "is_same_size": is_same_size, "is_conj": lambda input: False, "is_neg": lambda input: False,
            "split_with_sizes": split_with_sizes,
            "narrow_copy": narrow_copy, "unsafe_chunk": Tensor.chunk, "unsafe_split": Tensor.split}


_surface = _install_tensor_surface()
globals().update(_surface)
__all__ += list(_surface)
