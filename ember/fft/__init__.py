"""ember.fft: torch.fft's discrete Fourier transforms on NumPy's pocketfft, with autograd.

fft/ifft/fft2/ifft2/fftn/ifftn (complex to complex), rfft/rfft2/rfftn and ihfft (real input, one-sided
output), irfft/irfft2/irfftn and hfft (one-sided input, real output), fftfreq/rfftfreq, fftshift and
ifftshift. Arguments follow torch: ``n`` / ``s`` trim or zero-pad the input along the transformed dims
(``-1`` in ``s`` keeps a size), ``dim`` picks the dims, ``norm`` is "backward" (default: the inverse
scales by 1/n), "ortho" (both by 1/sqrt(n)) or "forward" (the forward scales by 1/n). Real float32
inputs give complex64 results, float64 complex128; integer inputs compute in the default dtype.
Gradients are torch's (see ``_ops``).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ..ops.registry import dtype_name
from ._ops import c2c, r2c, c2r

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn",
           "irfftn", "hfft", "ihfft", "hfft2", "hfftn", "ihfft2", "ihfftn", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]

# scaling mode for torch's norm string, by direction (forward transform?)
_SCALE = {(None, True): "none", ("backward", True): "none", ("ortho", True): "sqrt", ("forward", True): "n",
          (None, False): "n", ("backward", False): "n", ("ortho", False): "sqrt", ("forward", False): "none"}


def _scale(norm, forward):
    s = _SCALE.get((norm, forward)) if norm is None or isinstance(norm, str) else None
    if s is None:
        raise RuntimeError(f"Invalid normalization mode: \"{norm}\"")
    return s


def _tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"fft_{op}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    return x


def _floating(x, op):
    """``x`` in a dtype the transforms compute in: float32/64 or complex64/128 (integers promote)."""
    d = x._dtype
    if d is _dt.float16 or d is _dt.bfloat16:
        raise RuntimeError(f"Unsupported dtype {dtype_name(d)}")
    if d.category < 2:
        return x.to(_dt.get_default_dtype())
    return x


def _to_complex(x):
    return x if x._dtype.is_complex else x.to(x._dtype.to_complex())


def _wrap_dim(d, nd):
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
        raise TypeError(f"fft: dim must be int, not {type(d).__name__}")
    if nd == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    if not -nd <= d < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
    return int(d) % nd


def _resize(x, dims, sizes):
    """Trim or zero-pad ``x`` along each of ``dims`` to ``sizes`` (None: keep)."""
    for d, n in zip(dims, sizes):
        if n is None:
            continue
        cur = x._data.shape[d]
        if n < cur:
            x = x.narrow(d, 0, n)
        elif n > cur:
            from ..ops.shape_join import cat
            shape = list(x._data.shape)
            shape[d] = n - cur
            x = cat([x, wrap(np.zeros(shape, dtype=x._dtype.np), x._dtype)], d)
    return x


def _check_n(n):
    if n is not None and n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return n


def _one_dim(x, n, dim):
    return [_wrap_dim(dim, x._data.ndim)], [_check_n(n)]


def _many_dims(x, s, dim, default_all: bool):
    """torch's (dims, sizes) for the n-dimensional transforms."""
    nd = x._data.ndim
    if dim is not None:
        dims = [dim] if isinstance(dim, (int, np.integer)) else list(dim)
        dims = [_wrap_dim(d, nd) for d in dims]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > nd:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {nd} dimensions.")
        dims = list(range(nd - len(s), nd))
    else:
        dims = list(range(nd)) if default_all else [_wrap_dim(-2, nd), _wrap_dim(-1, nd)]
    sizes = [None] * len(dims) if s is None else [None if int(v) == -1 else _check_n(int(v)) for v in s]
    return dims, sizes


# ---- complex to complex -------------------------------------------------------------------------------

def _c2c_public(x, dims, sizes, norm, forward, op):
    x = _floating(_tensor(x, op), op)
    x = _resize(x, dims, sizes)
    if not x._dtype.is_complex:
        if forward:            # a real signal: torch runs the full (two-sided) real-to-complex transform
            return r2c(x, dims, _scale(norm, True), False)
        x = _to_complex(x)
    return c2c(x, dims, _scale(norm, forward), forward)


def fft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002 - torch's names
    """The 1-D discrete Fourier transform along ``dim``."""
    dims, sizes = _one_dim(_tensor(input, "fft"), n, dim)
    return _out(_c2c_public(input, dims, sizes, norm, True, "fft"), out)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The 1-D inverse discrete Fourier transform along ``dim``."""
    dims, sizes = _one_dim(_tensor(input, "ifft"), n, dim)
    return _out(_c2c_public(input, dims, sizes, norm, False, "ifft"), out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    """The 2-D discrete Fourier transform (over the last two dims by default)."""
    _dims_tuple(dim, "fft2")
    return fftn(input, s, dim, norm, out=out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    _dims_tuple(dim, "ifft2")
    return ifftn(input, s, dim, norm, out=out)


def fftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The N-D discrete Fourier transform (over all dims, or the last ``len(s)``, or ``dim``)."""
    dims, sizes = _many_dims(_tensor(input, "fftn"), s, dim, True)
    return _out(_c2c_public(input, dims, sizes, norm, True, "fftn"), out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    dims, sizes = _many_dims(_tensor(input, "ifftn"), s, dim, True)
    return _out(_c2c_public(input, dims, sizes, norm, False, "ifftn"), out)


# ---- real input, one-sided output ---------------------------------------------------------------------

def _need_real(x, op):
    if x._dtype.is_complex:
        what = "real-valued" if op == "rfftn" else "real"
        raise RuntimeError(f"{op} expects a {what} input tensor, but got {dtype_name(x._dtype)}")


def _dims_tuple(dim, op):
    if dim is None:
        raise TypeError(f"fft_{op}(): argument 'dim' must be tuple of ints, not {type(dim).__name__}")


def _r2c_public(x, dims, sizes, norm, op, forward=True):
    x = _floating(_tensor(x, op), op)
    _need_real(x, op)
    x = _resize(x, dims, sizes)
    return r2c(x, dims, _scale(norm, forward), True)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The FFT of a real signal: the ``n // 2 + 1`` non-negative frequency bins."""
    dims, sizes = _one_dim(_tensor(input, "rfft"), n, dim)
    return _out(_r2c_public(input, dims, sizes, norm, "rfft"), out)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    _dims_tuple(dim, "rfft2")
    return rfftn(input, s, dim, norm, out=out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The N-D FFT of a real signal, one-sided along the last transformed dim."""
    dims, sizes = _many_dims(_tensor(input, "rfftn"), s, dim, True)
    return _out(_r2c_public(input, dims, sizes, norm, "rfftn"), out)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The inverse of ``hfft``: the one-sided inverse FFT of a real signal."""
    dims, sizes = _one_dim(_tensor(input, "ihfft"), n, dim)
    return _out(_r2c_public(input, dims, sizes, norm, "ihfft", forward=False).conj(), out)


# ---- one-sided input, real output ---------------------------------------------------------------------

def _c2r_public(x, dims, sizes, norm, op, forward=False, conj=False):
    """``sizes[-1]`` is the output length along the last dim (default ``2 * (m - 1)``)."""
    x = _floating(_tensor(x, op), op)
    last = dims[-1]
    out_n = sizes[-1] if sizes[-1] is not None else 2 * (x._data.shape[last] - 1)
    _check_n(out_n)
    x = _resize(_to_complex(x), dims, sizes[:-1] + [out_n // 2 + 1])
    if conj:
        x = x.conj()
    return c2r(x, dims, _scale(norm, forward), out_n)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``)."""
    dims, sizes = _one_dim(_tensor(input, "irfft"), n, dim)
    return _out(_c2r_public(input, dims, sizes, norm, "irfft"), out)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    _dims_tuple(dim, "irfft2")
    return irfftn(input, s, dim, norm, out=out)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The inverse of ``rfftn``."""
    dims, sizes = _many_dims(_tensor(input, "irfftn"), s, dim, True)
    return _out(_c2r_public(input, dims, sizes, norm, "irfftn"), out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The FFT of a Hermitian-symmetric signal given by its one-sided half: a real result of length ``n``."""
    dims, sizes = _one_dim(_tensor(input, "hfft"), n, dim)
    return _out(_c2r_public(input, dims, sizes, norm, "hfft", forward=True, conj=True), out)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    _dims_tuple(dim, "hfft2")
    return hfftn(input, s, dim, norm, out=out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The N-D FFT of a Hermitian-symmetric signal given by its one-sided half along the last dim."""
    dims, sizes = _many_dims(_tensor(input, "hfftn"), s, dim, True)
    return _out(_c2r_public(input, dims, sizes, norm, "hfftn", forward=True, conj=True), out)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    _dims_tuple(dim, "ihfft2")
    return ihfftn(input, s, dim, norm, out=out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The inverse of ``hfftn``: the one-sided N-D inverse FFT of a real signal."""
    dims, sizes = _many_dims(_tensor(input, "ihfftn"), s, dim, True)
    return _out(_r2c_public(input, dims, sizes, norm, "ihfftn", forward=False).conj(), out)


# ---- helpers ------------------------------------------------------------------------------------------

def _out(r, out):
    if out is None:
        return r
    from ..ops.inplace import copy_out
    return copy_out(r, out)


def _freq(values, d, dtype, device, requires_grad, name):
    from ..ops.creation import tensor
    dt = dtype or _dt.get_default_dtype()
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"{name} requires a floating point or complex dtype, got {dtype_name(dt)}")
    return tensor(values / d, dtype=dt, device=device, requires_grad=requires_grad)


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point FFT: ``[0, 1, ..., -2, -1] / (d * n)``."""
    k = np.arange(n, dtype=np.float64)
    k[(n + 1) // 2:] -= n
    return _out(_freq(k / n, d, dtype, device, requires_grad, "fftfreq"), out)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point ``rfft``: ``[0, 1, ..., n // 2] / (d * n)``."""
    k = np.arange(n // 2 + 1, dtype=np.float64)
    return _out(_freq(k / n, d, dtype, device, requires_grad, "rfftfreq"), out)


def _shift(x, dim, inverse):
    nd = x._data.ndim
    dims = list(range(nd)) if dim is None else ([dim] if isinstance(dim, (int, np.integer)) else list(dim))
    dims = [_wrap_dim(d, nd) for d in dims]
    shifts = [((x._data.shape[d] + 1) // 2 if inverse else x._data.shape[d] // 2) for d in dims]
    if not dims:
        return x
    return x.roll(shifts, dims)


def fftshift(input, dim=None):  # noqa: A002
    """Move the zero-frequency bin to the centre (a roll by ``n // 2`` along each dim)."""
    return _shift(_tensor(input, "fftshift"), dim, False)


def ifftshift(input, dim=None):  # noqa: A002
    """The inverse of ``fftshift``."""
    return _shift(_tensor(input, "ifftshift"), dim, True)
