"""The three transforms behind ember.fft, as torch defines them: complex-to-complex (``fft_c2c``),
real-to-complex (``fft_r2c``, one-sided or full) and complex-to-real (``fft_c2r``), each over a list of
dims with a scaling mode: "none", "sqrt" (1/sqrt(n)) or "n" (1/n), n the product of the signal sizes.

The math is NumPy's pocketfft (``numpy.fft``). The derivatives are torch's, written in ember ops:

- c2c: the same transform in the other direction with the same scaling (the adjoint);
- r2c: the gradient is zero-padded back to the full length along the last dim (one-sided case), run
  through the inverse c2c, and its real part taken;
- c2r: the gradient goes through a one-sided r2c, and the bins that stand for two conjugate bins of
  the full spectrum (all but the first and, for even lengths, the last) are doubled.
"""
from __future__ import annotations

import numpy as np

from ..tensor import wrap
from ..ops.registry import register, apply

# NumPy's ``norm`` argument for a scaling mode, by direction (forward transform, inverse transform)
_NP_NORM = {("none", True): "backward", ("sqrt", True): "ortho", ("n", True): "forward",
            ("none", False): "forward", ("sqrt", False): "ortho", ("n", False): "backward"}


def _complex_np(x):
    return np.complex64 if x.dtype in (np.float32, np.complex64) else np.complex128


def _c2c_kernel(x, axes, scale, forward):
    f = np.fft.fftn if forward else np.fft.ifftn
    if not axes:
        return x.copy()
    return f(x, axes=axes, norm=_NP_NORM[scale, forward]).astype(x.dtype, copy=False)


def _r2c_kernel(x, axes, scale, onesided):
    cdt = _complex_np(x)
    if not onesided:
        return np.fft.fftn(x, axes=axes, norm=_NP_NORM[scale, True]).astype(cdt, copy=False)
    return np.fft.rfftn(x, axes=axes, norm=_NP_NORM[scale, True]).astype(cdt, copy=False)


def _c2r_kernel(x, axes, scale, last_size):
    rdt = np.float32 if x.dtype == np.complex64 else np.float64
    s = [x.shape[a] for a in axes[:-1]] + [last_size]
    return np.fft.irfftn(x, s=s, axes=axes, norm=_NP_NORM[scale, False]).astype(rdt, copy=False)


def _c2c_bw(ctx, g):
    a = ctx.attrs
    return (c2c(g, a["axes"], a["scale"], not a["forward"]),)


def _r2c_bw(ctx, g):
    a = ctx.attrs
    axes = a["axes"]
    if a["onesided"]:
        last = axes[-1]
        full = ctx.in_shape(0)[last]
        missing = full - g._data.shape[last]
        if missing > 0:
            from ..ops.shape_join import cat
            shape = list(g._data.shape)
            shape[last] = missing
            g = cat([g, wrap(np.zeros(shape, dtype=g._dtype.np), g._dtype)], last)
    return (c2c(g, axes, a["scale"], False).real,)


def _c2r_bw(ctx, g):
    a = ctx.attrs
    axes = a["axes"]
    gi = r2c(g, axes, a["scale"], True)
    last = axes[-1]
    n_in = ctx.in_shape(0)[last]
    double = g._data.shape[last] - n_in
    if double > 0:
        w = np.ones(n_in, dtype=g._dtype.np)
        w[1:1 + double] = 2
        shape = [1] * gi._data.ndim
        shape[last] = n_in
        gi = gi * wrap(w.reshape(shape), g._dtype)
    return (gi,)


FFT_C2C = register("fft_c2c", _c2c_kernel, _c2c_bw)
FFT_R2C = register("fft_r2c", _r2c_kernel, _r2c_bw)
FFT_C2R = register("fft_c2r", _c2r_kernel, _c2r_bw)
FFT_C2C.node_name, FFT_R2C.node_name, FFT_C2R.node_name = "FftC2CBackward0", "FftR2CBackward0", "FftC2RBackward0"


def c2c(x, axes, scale, forward):
    return apply(FFT_C2C, (x,), {"axes": tuple(axes), "scale": scale, "forward": bool(forward)})


def r2c(x, axes, scale, onesided):
    return apply(FFT_R2C, (x,), {"axes": tuple(axes), "scale": scale, "onesided": bool(onesided)})


def c2r(x, axes, scale, last_size):
    return apply(FFT_C2R, (x,), {"axes": tuple(axes), "scale": scale, "last_size": int(last_size)})
