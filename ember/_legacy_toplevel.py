"""Top-level torch functions that older or utility-style programs still call: ``torch.range`` (end
included, deprecated), ``set_default_tensor_type``, ``get_device`` / ``is_inference`` as functions,
``set_warn_always`` / ``is_warn_always_enabled``, ``set_anomaly_enabled`` / ``is_anomaly_check_nan_enabled``,
``frombuffer`` (a tensor sharing a Python buffer's memory), the function forms ``neg_`` / ``negative_`` /
``detach_`` and the in-place ``gcd_`` / ``lcm_`` (functions and methods), and the randomized low-rank
factorizations ``svd_lowrank`` / ``pca_lowrank`` (Halko, Martinsson and Tropp's range finder).
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from . import dtypes as _dt
from .tensor import Tensor, wrap

__all__ = ["range", "set_default_tensor_type", "get_device", "is_inference", "set_warn_always",
           "is_warn_always_enabled", "set_anomaly_enabled", "is_anomaly_check_nan_enabled", "frombuffer",
           "neg_", "negative_", "detach_", "gcd_", "lcm_", "svd_lowrank", "pca_lowrank"]

_WARN_ALWAYS = [False]


def range(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None):  # noqa: A001
    """``torch.range``: ``start, start + step, ...`` up to and including ``end``, in the default float dtype
    (deprecated in torch, which warns; use ``arange``)."""
    from .ops.creation import tensor
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    vals = [float(v.item()) if isinstance(v, Tensor) else float(v) for v in (start, end, step)]
    if vals[2] == 0:
        raise RuntimeError("range: step must be nonzero")
    if (vals[1] - vals[0]) * vals[2] < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    n = int(np.floor((vals[1] - vals[0]) / vals[2])) + 1
    dt = dtype if dtype is not None else _dt.get_default_dtype()
    r = tensor(vals[0] + np.arange(n) * vals[2], dtype=dt, device=device, requires_grad=requires_grad)
    if out is not None:
        out.resize_(r.shape).copy_(r)
        return out
    return r


def set_default_tensor_type(t) -> None:
    """Deprecated torch API: the default floating dtype from a tensor type (``torch.DoubleTensor``) or its
    name (``'torch.FloatTensor'``)."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    import ember
    name = t if isinstance(t, str) else getattr(t, "__name__", None)
    if isinstance(t, str):
        if t.startswith("torch.cuda.") or t.startswith("ember.cuda."):
            raise TypeError(f"type {t} not available. Torch not compiled with CUDA enabled.")
        name = t.split(".")[-1]
    legacy = getattr(ember, name, None) if isinstance(name, str) and name.endswith("Tensor") else None
    dt = getattr(legacy, "dtype", None)
    if dt is None:
        raise TypeError(f"invalid type: '{t}'")
    if not dt.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _dt.set_default_dtype(dt)


def get_device(input) -> int:  # noqa: A002
    """The device index of ``input``: -1 on the CPU."""
    return input.get_device()


def is_inference(input) -> bool:  # noqa: A002
    return input.is_inference()


def set_warn_always(b: bool) -> None:
    """torch's switch for warnings that otherwise show once; ember's warnings follow Python's filters, so
    this only records the setting for ``is_warn_always_enabled``."""
    _WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled() -> bool:
    return _WARN_ALWAYS[0]


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    from .autograd import anomaly
    anomaly.ENABLED[0] = bool(enabled)
    anomaly.CHECK_NAN[0] = bool(check_nan)


def is_anomaly_check_nan_enabled() -> bool:
    from .autograd import anomaly
    return bool(anomaly.CHECK_NAN[0])


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-D tensor over the bytes of a Python buffer (``bytearray``, ``memoryview``, ``array``...), sharing
    its memory: writes to one show in the other."""
    npdt = np.dtype(dtype.np)
    nbytes = memoryview(buffer).nbytes
    if count == 0 or nbytes == 0:
        raise ValueError(f"both buffer length ({nbytes}) and count ({count}) must not be 0")
    if not 0 <= offset < nbytes:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({nbytes} bytes) minus 1")
    if count < 0 and (nbytes - offset) % npdt.itemsize:
        raise ValueError(f"buffer length ({nbytes - offset} bytes) after offset ({offset} bytes) must be a multiple "
                         f"of element size ({npdt.itemsize})")
    if count > 0 and count * npdt.itemsize > nbytes - offset:
        raise ValueError(f"requested buffer length ({count} * {npdt.itemsize} bytes) after offset ({offset} bytes) "
                         f"must not be greater than actual buffer length ({nbytes} bytes)")
    if memoryview(buffer).readonly:
        warnings.warn("The given buffer is not writable, and PyTorch does not support non-writable tensors. "
                      "This means you can write to the underlying (supposedly non-writable) buffer using the tensor. "
                      "You may want to copy the buffer to protect its data or make it writable before converting it "
                      "to a tensor.", UserWarning, stacklevel=2)
    t = wrap(np.frombuffer(buffer, dtype=npdt, count=count, offset=offset), dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def neg_(input):  # noqa: A002
    return input.neg_()


negative_ = neg_


def detach_(input):  # noqa: A002
    return input.detach_()


def gcd_(input, other):  # noqa: A002
    """In-place ``gcd``."""
    from . import gcd
    return input.copy_(gcd(input, other))


def lcm_(input, other):  # noqa: A002
    """In-place ``lcm``."""
    from . import lcm
    return input.copy_(lcm(input, other))


def _approximate_basis(A, q: int, niter: int, M=None):
    """An orthonormal (..., m, q) basis whose span approximates ``A - M``'s range (a Gaussian sketch, then
    ``niter`` power iterations with re-orthonormalisation)."""
    from .ops.random_ops import randn
    from . import linalg
    n = A.shape[-1]
    R = randn(tuple(A.shape[:-2]) + (n, q), dtype=A.dtype)
    X = A @ R if M is None else A @ R - M @ R
    Q = linalg.qr(X).Q
    for _ in builtins.range(niter):
        Ah = A.mH if M is None else (A - M).mH
        Q = linalg.qr(Ah @ Q).Q
        Q = linalg.qr((A if M is None else A - M) @ Q).Q
    return Q


def svd_lowrank(A, q: int = 6, niter: int = 2, M=None):
    """``(U, S, V)`` with ``A - M ~= U diag(S) V^H`` of rank ``q`` (randomized: the factors are exact when the
    rank of ``A - M`` is at most ``q``; signs and the basis of repeated singular values may differ from
    torch's, which draws other random numbers)."""
    from . import linalg
    q = 6 if q is None else int(q)
    m, n = A.shape[-2:]                 # (torch checks q only in pca_lowrank; a larger q gives min(m, n))
    B = A if M is None else A - M
    if m < n:            # work on the tall transpose: the sketch is then the cheaper side
        Q = _approximate_basis(B.mH, q, niter)
        U_, S, Vh = linalg.svd((B @ Q), full_matrices=False)   # B Q = U S (Q^H V)^H
        return U_, S, Q @ Vh.mH
    Q = _approximate_basis(B, q, niter)
    U_, S, Vh = linalg.svd(Q.mH @ B, full_matrices=False)
    return Q @ U_, S, Vh.mH


def pca_lowrank(A, q=None, center: bool = True, niter: int = 2):
    """``(U, S, V)`` of the rank-``q`` PCA of the rows of ``A`` (centred by default): the principal
    directions are ``V``'s columns, the projections ``A @ V``."""
    if not isinstance(A, Tensor):
        raise TypeError(f"pca_lowrank(): argument 'A' must be Tensor, not {type(A).__name__}")
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else q
    if not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter=niter)
    return svd_lowrank(A - A.mean(dim=-2, keepdim=True), q, niter=niter)


def install(namespace: dict) -> None:
    """Put these names into the ``ember`` namespace and the in-place ``gcd_`` / ``lcm_`` on Tensor."""
    for name in __all__:
        namespace.setdefault(name, globals()[name])
    namespace["range"] = range          # (shadows the builtin inside ember's namespace only, as torch.range)
    for name in ("gcd_", "lcm_"):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, globals()[name])
