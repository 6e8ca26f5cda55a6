"""The rest of torch's CPU autocast "fp32" list: ops that autocast runs in float32.

Inside ``ember.autocast("cpu")`` torch casts the float16/bfloat16 tensor arguments of these ops up to
float32 first (reductions that lose precision fast, such as ``prod`` and ``trace``; the linear-algebra
decompositions and solvers, which have no low-precision kernels; the FFTs; ``quantile``, ``stft``,
``polar``, ``view_as_complex``), so a program that calls ``torch.linalg.inv`` on a bfloat16 activation
inside autocast gets a float32 result instead of an error. The losses, poolings and paddings of the list
wrap themselves where they are defined (``ember.nn.functional._autocast_fp32``); :func:`install`, run
once when ember is imported, wraps the functions and Tensor methods named here the same way. Outside
autocast the wrapper costs one check.
"""
from __future__ import annotations

__all__ = ["install", "TOP_LEVEL", "LINALG", "FFT"]

# torch.<name> and, where it exists, Tensor.<name>
TOP_LEVEL = ("prod", "trace", "inverse", "cholesky", "cholesky_inverse", "cholesky_solve", "lu_solve", "pinverse",
             "quantile", "nanquantile", "stft", "istft", "cdist", "polar", "view_as_complex", "geqrf", "qr", "svd",
             "triangular_solve", "orgqr", "ormqr", "lu_unpack")
LINALG = ("cond", "matrix_rank", "solve", "cholesky", "svdvals", "eigvals", "eigvalsh", "inv", "householder_product",
          "tensorinv", "tensorsolve", "qr", "cholesky_ex", "svd", "eig", "eigh", "lstsq", "inv_ex")
FFT = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
       "hfft", "ihfft")
_DONE = [False]


def _wrap(owner, name, wrap) -> None:
    fn = getattr(owner, name, None)
    if fn is None or getattr(fn, "_autocast_fp32", False):
        return
    w = wrap(fn)
    w._autocast_fp32 = True
    setattr(owner, name, w)


def install() -> None:
    """Wrap the listed functions of ``ember``, ``ember.linalg``, ``ember.fft`` and ``ember.Tensor``."""
    if _DONE[0]:
        return
    _DONE[0] = True
    import ember
    from ..nn.functional._autocast_fp32 import autocast_fp32
    for name in TOP_LEVEL:
        _wrap(ember, name, autocast_fp32)
        _wrap(ember.Tensor, name, autocast_fp32)
    for name in LINALG:
        _wrap(ember.linalg, name, autocast_fp32)
    for name in FFT:
        _wrap(ember.fft, name, autocast_fp32)
