"""ember.backends.cuda: CUDA matmul and attention switches (stored; ember has no CUDA)."""
from __future__ import annotations

import contextlib
import warnings

__all__ = ["is_built", "matmul", "enable_flash_sdp", "flash_sdp_enabled", "enable_mem_efficient_sdp",
           "mem_efficient_sdp_enabled", "enable_math_sdp", "math_sdp_enabled", "enable_cudnn_sdp",
           "cudnn_sdp_enabled", "sdp_kernel", "preferred_linalg_library", "preferred_blas_library",
           "allow_fp16_bf16_reduction_math_sdp", "fp16_bf16_reduction_math_sdp_allowed"]


def is_built() -> bool:
    """False: ember is not built with CUDA."""
    return False


class _Matmul:
    """``ember.backends.cuda.matmul``: cuBLAS switches (``allow_tf32``, reduced-precision reductions)."""

    _bools = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
              "allow_fp16_accumulation")

    def __init__(self):
        object.__setattr__(self, "allow_tf32", False)
        object.__setattr__(self, "allow_fp16_reduced_precision_reduction", True)
        object.__setattr__(self, "allow_bf16_reduced_precision_reduction", True)
        object.__setattr__(self, "allow_fp16_accumulation", False)
        object.__setattr__(self, "fp32_precision", "none")

    def __setattr__(self, name, value):
        if name not in self._bools and name != "fp32_precision":
            raise AttributeError("Unknown attribute " + name)
        if name in self._bools and not isinstance(value, bool):
            raise RuntimeError(f"backends.cuda.matmul.{name} expects a bool, but got {type(value).__name__}")
        object.__setattr__(self, name, value)


matmul = _Matmul()

_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True, "fp16_bf16_reduction_math": True}


def _sdp_switch(key: str, setter: str, getter: str):
    """torch's setter/getter pair for one scaled-dot-product backend flag (stored; ember has one kernel)."""
    def set_flag(enabled: bool) -> None:
        _SDP[key] = bool(enabled)

    def get_flag() -> bool:
        return _SDP[key]
    set_flag.__name__ = set_flag.__qualname__ = setter
    get_flag.__name__ = get_flag.__qualname__ = getter
    return set_flag, get_flag


enable_flash_sdp, flash_sdp_enabled = _sdp_switch("flash", "enable_flash_sdp", "flash_sdp_enabled")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _sdp_switch(
    "mem_efficient", "enable_mem_efficient_sdp", "mem_efficient_sdp_enabled")
enable_math_sdp, math_sdp_enabled = _sdp_switch("math", "enable_math_sdp", "math_sdp_enabled")
enable_cudnn_sdp, cudnn_sdp_enabled = _sdp_switch("cudnn", "enable_cudnn_sdp", "cudnn_sdp_enabled")
allow_fp16_bf16_reduction_math_sdp, fp16_bf16_reduction_math_sdp_allowed = _sdp_switch(
    "fp16_bf16_reduction_math", "allow_fp16_bf16_reduction_math_sdp", "fp16_bf16_reduction_math_sdp_allowed")


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
               enable_cudnn: bool = True):
    """Deprecated context manager selecting the attention kernels (the flags are only stored)."""
    warnings.warn("`ember.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be "
                  "removed. Please see `ember.nn.attention.sdpa_kernel()` for the new context manager, with "
                  "updated signature.", FutureWarning, stacklevel=3)
    old = dict(_SDP)
    _SDP.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient, cudnn=enable_cudnn)
    try:
        yield
    finally:
        _SDP.clear()
        _SDP.update(old)


_LINALG = ["default"]
_BLAS = ["cublas"]


def preferred_linalg_library(backend=None) -> str:
    """Store and return the preferred CUDA linear-algebra library ("default", "cusolver", "magma")."""
    if backend is not None:
        if backend not in ("default", "cusolver", "magma"):
            raise RuntimeError(f"Unknown input value. Choose from: default, cusolver, magma. Got {backend!r}")
        _LINALG[0] = backend
    return _LINALG[0]


def preferred_blas_library(backend=None) -> str:
    """Store and return the preferred CUDA BLAS library ("cublas", "cublaslt", "ck")."""
    if backend is not None:
        if backend not in ("cublas", "cublaslt", "hipblaslt", "ck"):
            raise RuntimeError(f"Unknown input value. Choose from: cublas, cublaslt, hipblaslt, ck. Got {backend!r}")
        _BLAS[0] = backend
    return _BLAS[0]
