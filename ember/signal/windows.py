"""``ember.signal.windows``: torch.signal.windows' window functions (scipy.signal.windows' definitions).

Each takes the window length ``M`` and ``sym``: a symmetric window (for filter design) or, with
``sym=False``, the periodic one (for spectral analysis: the symmetric window of length ``M + 1`` without
its last sample). Values are computed in float64 and returned in ``dtype`` (the default float type).
"""
from __future__ import annotations


import numpy as np

from .. import dtypes as _dt

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _check(M, dtype, name):
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    dt = dtype or _dt.get_default_dtype()
    if dt not in (_dt.float32, _dt.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dt}")
    return dt


def _make(M, sym, dtype, device, requires_grad, name, values):
    """``values(n, N)`` on sample positions ``n = 0..N-1`` of a symmetric window of length ``N``."""
    from ..ops.creation import tensor
    dt = _check(M, dtype, name)
    if M == 0:
        arr = np.zeros(0)
    elif M == 1:
        arr = np.ones(1)
    else:
        N = M if sym else M + 1
        arr = values(np.arange(N, dtype=np.float64), N)[:M]
    return tensor(arr, dtype=dt, device=device, requires_grad=requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``sum_k (-1)^k a_k cos(2 pi k n / (N - 1))``."""
    if not isinstance(a, (list, tuple)):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")

    def values(n, N):
        return sum((-1) ** k * c * np.cos(2 * np.pi * k * n / (N - 1)) for k, c in enumerate(a))
    return _make(M, sym, dtype, device, requires_grad, "general_cosine", values)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``alpha - (1 - alpha) cos(2 pi n / (N - 1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_hamming(M, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``sin(pi (n + 1/2) / N)``."""
    return _make(M, sym, dtype, device, requires_grad, "cosine", lambda n, N: np.sin(np.pi * (n + 0.5) / N))


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window ``1 - |2 n / (N - 1) - 1|``."""
    return _make(M, sym, dtype, device, requires_grad, "bartlett", lambda n, N: 1 - np.abs(2 * n / (N - 1) - 1))


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``exp(-(n - (N - 1)/2)^2 / (2 std^2))``."""
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    return _make(M, sym, dtype, device, requires_grad, "gaussian",
                 lambda n, N: np.exp(-((n - (N - 1) / 2) ** 2) / (2 * std * std)))


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``exp(-|n - center| / tau)``, centred in the window unless ``center`` is given."""
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    return _make(M, sym, dtype, device, requires_grad, "exponential",
                 lambda n, N: np.exp(-np.abs(n - ((N - 1) / 2 if center is None else center)) / tau))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)``."""
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    return _make(M, sym, dtype, device, requires_grad, "kaiser",
                 lambda n, N: np.i0(beta * np.sqrt(np.clip(1 - (2 * n / (N - 1) - 1) ** 2, 0, None))) / np.i0(beta))


