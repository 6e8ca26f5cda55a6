"""ember: a deep-learning framework with PyTorch's API, written in Python on NumPy.

    >>> import ember
    >>> x = ember.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4.])
"""
from __future__ import annotations

__version__ = "0.1.0"

import os as _os

# OpenMP threads that spin-wait collapse throughput 20-100x when this 2-core class of machine is shared;
# ember's generated kernels (and any OpenMP runtime loaded after this) wait passively unless told otherwise.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from . import _malloc  # noqa: E402,F401  (allocator tuning; see the module docstring)

from . import dtypes as _dtypes
from .dtypes import (dtype, float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8,  # noqa: F401
                     promote_types, result_type, can_cast, get_default_dtype, set_default_dtype, finfo, iinfo)
from .dtypes import bool, float, double, half, long, int, short, complex64, complex128, cfloat, cdouble  # noqa: F401,A004
from .tensor import Tensor, Size, device  # noqa: F401
from .autograd.grad_mode import (no_grad, enable_grad, set_grad_enabled, inference_mode,  # noqa: F401
                                 is_grad_enabled, is_inference_mode_enabled)
from .ops import registry as _registry
from .ops import _load_all as _load_ops
_load_ops()
from . import autograd  # noqa: E402,F401
from ._tensor_str import set_printoptions  # noqa: E402,F401

globals().update({k: v for k, v in _registry.FUNCTIONS.items() if not k.startswith("_")})
from .ops.foreach import *  # noqa: E402,F401,F403  (torch._foreach_add_, ...: their names start with "_")
from .ops.fused_optim import _fused_adam_, _fused_adamw_  # noqa: E402,F401  (torch._fused_adam_, torch._fused_adamw_)
from math import pi, e, inf, nan  # noqa: E402,F401  (torch.pi, torch.e, torch.inf, torch.nan)
newaxis = None
from .random import manual_seed, seed, initial_seed, Generator, get_rng_state, set_rng_state, default_generator  # noqa: E402,F401

uint16 = uint32 = uint64 = None
from ._layout import layout, strided, sparse_coo  # noqa: E402,F401
from ._memory_format import (memory_format, contiguous_format, preserve_format, channels_last,  # noqa: E402,F401
                             channels_last_3d)
from . import linalg  # noqa: E402,F401
from . import fft  # noqa: E402,F401  (ember.fft: torch.fft on numpy.fft)

from . import nn, optim  # noqa: E402,F401
from . import sparse  # noqa: E402
sparse._install(globals())   # ember.sparse_coo_tensor, ember.spmm; ember.mm/matmul accept a sparse operand
from .ops.complex_ops import install_conventions as _complex_conventions  # noqa: E402
_complex_conventions()      # again for the ops ember.nn registers (linear, conv2d): complex derivatives
from .serialization import save, load, serialize, deserialize  # noqa
from . import amp, cuda, cpu, accelerator, backends, utils  # noqa: E402,F401
from . import distributions, func, special, jit, distributed  # noqa: E402,F401
from . import signal  # noqa: E402,F401  (torch.signal.windows)
from . import multiprocessing  # noqa: E402,F401  (torch.multiprocessing: spawn, Queue, ...)
from . import library  # noqa: E402,F401  (custom ops: ember.library.custom_op)
from .special import mvlgamma, gammainc as igamma, gammaincc as igammac  # noqa: E402,F401
from .amp import autocast  # noqa: E402,F401
from .amp import fp32_ops as _fp32_ops  # noqa: E402
_fp32_ops.install()     # (torch's CPU autocast fp32 list: prod, trace, linalg, fft, ...)
from ._settings import *  # noqa: E402,F401,F403
from . import _threads  # noqa: E402
_threads.apply_default()
from . import memory, profiler  # noqa: E402,F401
from .autograd import profiler as _autograd_profiler  # noqa: E402,F401  (torch.autograd.profiler)
from . import testing  # noqa: E402,F401
from .func import vmap  # noqa: E402,F401
from .memory import OutOfMemoryError  # noqa: E402,F401
from .events import Event, Stream, synchronize  # noqa: E402,F401
from . import compiler  # noqa: E402,F401
from .compiler import compile  # noqa: E402,F401
from . import _dynamo, _inductor  # noqa: E402,F401
from . import onnx  # noqa: E402,F401  (ember.onnx.export; the onnx package itself is imported only when exporting)
from . import opencl  # noqa: E402,F401  (the OpenCL device: torch.mps's API; pyopencl is imported on first use)
from . import _legacy_toplevel  # noqa: E402  (torch.range, set_default_tensor_type, frombuffer, svd/pca_lowrank, ...)
_legacy_toplevel.install(globals())
