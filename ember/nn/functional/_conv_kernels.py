"""NumPy kernels of the convolution family for any number of spatial dims (2-d and 3-d ops share them).

Geometry arrives as per-dim tuples: ``stride``, ``dil``, the kernel size ``k``, and ``pad`` flattened as
``(before0, after0, before1, after1, ...)`` (for 2-d that is torch's (top, bottom, left, right)). Arrays
are (N, C, *spatial). ``im2col`` is a strided view of the zero-padded input copied once into columns
(N, C*prod(k), prod(out)); ``col2im`` sums columns back with one strided slice-add per kernel offset. For float32 in 2-d both are
one call into the native window kernels (``ember/_native``, the same values), NumPy the fallback.
float16/bfloat16 accumulate in float32 and round once at the end, as torch's CPU kernels do.
"""
from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ... import dtypes as _dt
from ..._native import eager_kernels as _native

_LOW = (np.dtype(_dt.float16.np), np.dtype(_dt.bfloat16.np))

# im2col columns are about C*prod(k) times the input: past this many elements per call, go a batch slice
# at a time so memory stays bounded (the result is the same)
_COLS_LIMIT = 1 << 25


def up(a):
    return a.astype(np.float32) if a.dtype in _LOW else a


def _prod(v) -> int:
    n = 1
    for x in v:
        n *= int(x)
    return n


def out_size(n: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def out_sizes(sizes, k, stride, pad, dil) -> tuple:
    return tuple(out_size(n, k[i], stride[i], pad[2 * i], pad[2 * i + 1], dil[i]) for i, n in enumerate(sizes))


def _padded(x, pad):
    """Zero-pad the spatial dims of (N, C, *spatial) by ``pad`` = (before0, after0, ...)."""
    if not any(pad):
        return x
    nsp = x.ndim - 2
    shape = x.shape[:2] + tuple(x.shape[2 + i] + pad[2 * i] + pad[2 * i + 1] for i in range(nsp))
    xp = np.zeros(shape, dtype=x.dtype)
    xp[(slice(None), slice(None)) + tuple(slice(pad[2 * i], pad[2 * i] + x.shape[2 + i]) for i in range(nsp))] = x
    return xp


def _windows(xp, k, stride, dil, out):
    """A read-only strided view (N, C, *k, *out) of every kernel window of ``xp``."""
    st = xp.strides
    sp = st[2:]
    return as_strided(xp, xp.shape[:2] + tuple(k) + tuple(out),
                      st[:2] + tuple(s * d for s, d in zip(sp, dil)) + tuple(s * t for s, t in zip(sp, stride)),
                      writeable=False)


def im2col(x, k, stride, pad, dil):
    """Columns (N, C*prod(k), prod(out)) of the zero-padded input, and the output size ``out``."""
    N, C = x.shape[:2]
    out = out_sizes(x.shape[2:], k, stride, pad, dil)
    if len(out) == 2:
        cols = _native.im2col(x, k, stride, pad, dil, out)     # float32 2-d: one C pass (None: NumPy runs)
        if cols is not None:
            return cols, out
    cols = _windows(_padded(x, pad), k, stride, dil, out).reshape(N, C * _prod(k), _prod(out))
    return cols, out


def col2im(cols, out_sp, stride, pad, dil):
    """Sum columns (N, C, *k, *o) back into an (N, C, *out_sp) image: one slice-add per kernel offset."""
    nsp = len(out_sp)
    if nsp == 2:
        x = _native.col2im(cols, out_sp, stride, pad, dil)     # float32 2-d: one C pass (None: NumPy runs)
        if x is not None:
            return x
    N, C = cols.shape[:2]
    k, o = cols.shape[2:2 + nsp], cols.shape[2 + nsp:]
    full = tuple(max(out_sp[i] + pad[2 * i] + pad[2 * i + 1], (o[i] - 1) * stride[i] + dil[i] * (k[i] - 1) + 1)
                 for i in range(nsp))
    xp = np.zeros((N, C) + full, dtype=cols.dtype)
    lead = (slice(None), slice(None))
    for off in itertools.product(*(range(kk) for kk in k)):
        sl = tuple(slice(j * d, j * d + s * (n - 1) + 1, s) for j, d, s, n in zip(off, dil, stride, o))
        xp[lead + sl] += cols[lead + off]
    if full != tuple(out_sp) or any(pad[0::2]):
        xp = np.ascontiguousarray(xp[lead + tuple(slice(pad[2 * i], pad[2 * i] + out_sp[i]) for i in range(nsp))])
    return xp


def _batch_step(N: int, per_sample: int) -> int:
    return max(1, min(N, _COLS_LIMIT // max(per_sample, 1)))


def conv_kernel(x, w, b, stride, pad, dil, groups):
    """Cross-correlation of (N, C, *sp) with (O, C/groups, *k): im2col times the weight, one batched GEMM."""
    dt = x.dtype
    x, w = up(x), up(w)
    N, C = x.shape[:2]
    O = w.shape[0]
    k = w.shape[2:]
    G = groups
    out_sp = out_sizes(x.shape[2:], k, stride, pad, dil)
    L = _prod(out_sp)
    wm = w.reshape(O, -1) if G == 1 else w.reshape(G, O // G, -1)
    out = np.empty((N, O, L), dtype=np.result_type(x.dtype, w.dtype))
    step = _batch_step(N, C * _prod(k) * L)
    for s in range(0, N, step):
        cols, _ = im2col(x[s:s + step], k, stride, pad, dil)
        n = cols.shape[0]
        if G == 1:
            np.matmul(wm, cols, out=out[s:s + n])                 # one GEMM per sample
        else:
            out[s:s + n] = np.matmul(wm, cols.reshape(n, G, -1, L)).reshape(n, O, L)
    if b is not None:
        out += up(b).reshape(1, O, 1)
    out = out.reshape((N, O) + out_sp)
    return out.astype(dt) if out.dtype != dt else out


def conv_t_kernel(y, w, b, stride, pad, dil, groups, out_hw):
    """The adjoint of ``x -> conv(x, w)`` (transposed convolution) of size ``out_hw``, plus the bias."""
    dt = y.dtype
    y, w = up(y), up(w)
    N, O = y.shape[:2]
    o_sp = y.shape[2:]
    L = _prod(o_sp)
    Cg = w.shape[1]
    k = w.shape[2:]
    G = groups
    wt = w.reshape(O, -1).T if G == 1 else w.reshape(G, O // G, -1).transpose(0, 2, 1)
    out = np.zeros((0, Cg * G) + tuple(out_hw), dtype=np.result_type(y.dtype, w.dtype)) if N == 0 else None
    step = _batch_step(N, Cg * G * _prod(k) * L)
    for s in range(0, N, step):
        ys = y[s:s + step]
        n = ys.shape[0]
        if G == 1:
            cols = np.matmul(wt, ys.reshape(n, O, L))
        else:
            cols = np.matmul(wt, ys.reshape(n, G, O // G, L))
        part = col2im(cols.reshape((n, Cg * G) + tuple(k) + tuple(o_sp)), tuple(out_hw), stride, pad, dil)
        if step >= N:
            out = part
        else:
            if out is None:
                out = np.empty((N,) + part.shape[1:], dtype=part.dtype)
            out[s:s + n] = part
    if b is not None:
        out += up(b).reshape((1, -1) + (1,) * len(k))
    return out.astype(dt) if out.dtype != dt else out


def conv_w_kernel(x, g, stride, pad, dil, groups, kernel):
    """The gradient of ``<g, conv(x, w)>`` with respect to ``w`` (of spatial size ``kernel``)."""
    dt = x.dtype
    x, g = up(x), up(g)
    N, C = x.shape[:2]
    O = g.shape[1]
    L = _prod(g.shape[2:])
    G = groups
    gw = None
    step = _batch_step(N, C * _prod(kernel) * L)
    for s in range(0, N, step):
        cols, _ = im2col(x[s:s + step], tuple(kernel), stride, pad, dil)
        n = cols.shape[0]
        gs = g[s:s + n]
        if G == 1:
            part = np.matmul(gs.reshape(n, O, L), cols.transpose(0, 2, 1)).sum(0)
        else:
            part = np.matmul(gs.reshape(n, G, O // G, L), cols.reshape(n, G, -1, L).transpose(0, 1, 3, 2)).sum(0)
        gw = part if gw is None else gw + part
    if gw is None:          # an empty batch: no contribution
        gw = np.zeros((O, C // G * _prod(kernel)), dtype=np.result_type(x.dtype, g.dtype))
    gw = gw.reshape((O, C // G) + tuple(kernel))
    return gw.astype(dt) if gw.dtype != dt else gw
