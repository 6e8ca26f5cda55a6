"""NumPy kernels of pooling for any number of spatial dims (the 2-d and 3-d ops share them).

Arrays are (N, C, *spatial); geometry is per-dim tuples ``k`` (kernel), ``s`` (stride), ``p`` (padding,
symmetric) and ``d`` (dilation). The kernels walk the kernel offsets (a handful of vectorised strided
slices of the padded input) rather than copying every window, which is both faster and gives torch's scan
order for ties and NaN (a NaN wins, the last one seen). Max-pooling indices are flat positions in each
input plane (``(z * H + y) * W + x`` in 3-d), as torch's. Float32 2-d max pooling, and the gather and
scatter of windows that do not overlap, are one call each into the native window kernels
(``ember/_native``, the same results); NumPy runs the rest.
"""
from __future__ import annotations

import itertools

import numpy as np

from ... import dtypes as _dt
from ..._native import eager_kernels as _native

LOW = (np.dtype(_dt.float16.np), np.dtype(_dt.bfloat16.np))


def pool_out(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = n + 2 * p - d * (k - 1) - 1
    o = (num + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= n + p:
        # the last window must start inside the input or the left padding
        o -= 1
    return o


def pool_outs(sizes, k, s, p, d, ceil) -> tuple:
    return tuple(pool_out(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate(sizes))


def _padded(x, outs, k, s, p, d, fill):
    """x placed at ``p`` in a ``fill`` canvas large enough for every (ceil-mode) window."""
    sizes = x.shape[2:]
    full = tuple(max(n + 2 * pp, (o - 1) * ss + dd * (kk - 1) + 1)
                 for n, o, kk, ss, pp, dd in zip(sizes, outs, k, s, p, d))
    if full == tuple(sizes):
        return x
    xp = np.full(x.shape[:2] + full, fill, dtype=x.dtype)
    xp[(slice(None), slice(None)) + tuple(slice(pp, pp + n) for pp, n in zip(p, sizes))] = x
    return xp


def _offsets(k, s, d, outs):
    """(flat offset in the kernel, slices) for every kernel offset, in torch's scan order."""
    lead = (slice(None), slice(None))
    for pos, off in enumerate(itertools.product(*(range(kk) for kk in k))):
        yield pos, lead + tuple(slice(j * dd, j * dd + ss * (o - 1) + 1, ss) for j, dd, ss, o in zip(off, d, s, outs))


def _plane_strides(sizes):
    """Element strides of a C-ordered plane of ``sizes``."""
    st = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        st[i] = st[i + 1] * sizes[i + 1]
    return st


def _grid(vals, i, n):
    """``vals`` shaped to broadcast along axis ``i`` of an n-d grid."""
    shape = [1] * n
    shape[i] = -1
    return np.asarray(vals).reshape(shape)


def max_pool_kernel(x, k, s, p, d, ceil):
    """(values, flat in-plane indices of the arg-max) of max pooling."""
    dt = x.dtype
    if dt in LOW:
        x = x.astype(np.float32)         # exact: comparisons only
    sizes = x.shape[2:]
    nsp = len(sizes)
    outs = pool_outs(sizes, k, s, p, d, ceil)
    if nsp == 2:
        r = _native.max_pool(x, k, s, p, d, outs)     # float32: one C pass, the same scan (None: NumPy runs)
        if r is not None:
            return r
    is_float = x.dtype.kind == "f"
    fill = -np.inf if is_float else np.iinfo(x.dtype).min
    xp = _padded(x, outs, k, s, p, d, fill)
    nan = is_float and bool(np.isnan(x).any())
    K = int(np.prod(k))
    best = arg = None
    for pos, sl in _offsets(k, s, d, outs):
        v = xp[sl]
        if best is None:
            best = v.copy()
            arg = np.zeros(best.shape, dtype=np.int8 if K < 128 else np.int32)
            continue
        pos = arg.dtype.type(pos)
        if nan:
            upd = (v > best) | np.isnan(v)      # torch: a NaN always takes over
            best = np.where(upd, v, best)
        else:
            upd = v > best
            np.maximum(best, v, out=best)
        arg -= upd * (arg - pos)                # arg = where(upd, pos, arg) without a masked copy
    # flat index = (window origin) + (offset of the arg-max within the window), per spatial dim
    off = np.unravel_index(np.arange(K), k)
    pst = _plane_strides(sizes)
    starts = [_grid(np.arange(o) * ss - pp, i, nsp) for i, (o, ss, pp) in enumerate(zip(outs, s, p))]
    idx = sum(starts[i] * pst[i] for i in range(nsp)) + sum(off[i] * d[i] * pst[i] for i in range(nsp))[arg]
    if (any(p) or ceil) and bool((best == fill).any()):
        # a padded position may have won a window whose every value equals the fill: torch reports the
        # window's first in-bounds element there
        oob = False
        first = 0
        for i in range(nsp):
            c = starts[i] + (off[i] * d[i])[arg]
            oob = oob | (c < 0) | (c >= sizes[i])
            st = starts[i]
            first = first + np.where(st < 0, st + ((-st + d[i] - 1) // d[i]) * d[i], st) * pst[i]
        idx = np.where(oob, first, idx)
    return (best.astype(dt) if best.dtype != dt else best), idx


def scatter_kernel(g, idx, in_hw, unique):
    """Each gradient value added at its flat in-plane index of an (N, C, *in_hw) zero array."""
    if unique:
        out = _native.scatter_planes(g, idx, in_hw)     # float32: one C pass (None: NumPy runs)
        if out is not None:
            return out
    N, C = g.shape[:2]
    HW = int(np.prod(in_hw))
    L = int(np.prod(g.shape[2:]))           # (explicit sizes: an empty batch has no -1 to infer)
    g2 = g.reshape(N * C, L)
    i2 = idx.reshape(N * C, L)
    flat = (i2 + (np.arange(N * C, dtype=np.int64) * HW)[:, None]).ravel()
    if unique:
        out = np.zeros(N * C * HW, dtype=g.dtype)
        out[flat] = g2.ravel()
    else:
        # overlapping windows: sum the contributions (bincount accumulates in float64)
        out = np.bincount(flat, weights=g2.ravel().astype(np.float64), minlength=N * C * HW).astype(g.dtype)
    return out.reshape((N, C) + tuple(in_hw))


def gather_kernel(x, idx, unique):
    if unique:                                          # indices from max pooling: in range
        y = _native.gather_planes(x, idx)
        if y is not None:
            return y
    N, C = x.shape[:2]
    picked = np.take_along_axis(x.reshape(N * C, int(np.prod(x.shape[2:]))),
                                idx.reshape(N * C, int(np.prod(idx.shape[2:]))), axis=1)
    return picked.reshape(idx.shape)


def _avg_divisor(sizes, outs, k, s, p, cip, div):
    """Per-output divisors (shape ``outs``) with torch's rules for padding and ceil-mode windows."""
    if div:
        return np.full(outs, div, dtype=np.int64)
    r = None
    for n, no, kk, ss, pp in zip(sizes, outs, k, s, p):
        start = np.arange(no) * ss - pp
        end = np.minimum(start + kk, n + pp)
        v = end - start if cip else np.minimum(end, n) - np.maximum(start, 0)
        r = v if r is None else np.multiply.outer(r, v)
    return r


def avg_pool_kernel(x, k, s, p, ceil, cip, div):
    dt = x.dtype
    sizes = x.shape[2:]
    ones = (1,) * len(k)
    outs = pool_outs(sizes, k, s, p, ones, ceil)
    acc_dt = np.float32 if dt in LOW else dt
    xp = _padded(x.astype(acc_dt, copy=False), outs, k, s, p, ones, 0)
    acc = None
    for _, sl in _offsets(k, s, ones, outs):
        v = xp[sl]
        if acc is None:
            acc = v.copy()
        else:
            acc += v
    divisor = _avg_divisor(sizes, outs, k, s, p, cip, div)
    if dt.kind in "iu":
        # integer average pooling truncates toward zero, as torch does
        return (np.sign(acc) * (np.abs(acc) // divisor)).astype(dt)
    out = acc / divisor.astype(acc.dtype)
    return out.astype(dt) if out.dtype != dt else out


def avg_pool_bw_kernel(g, in_hw, k, s, p, ceil, cip, div):
    dt = g.dtype
    outs = g.shape[2:]
    ones = (1,) * len(k)
    acc_dt = np.float32 if dt in LOW else dt
    gd = g.astype(acc_dt) / _avg_divisor(in_hw, outs, k, s, p, cip, div).astype(acc_dt)
    full = tuple(max(n + 2 * pp, (o - 1) * ss + kk) for n, o, kk, ss, pp in zip(in_hw, outs, k, s, p))
    xp = np.zeros(g.shape[:2] + full, dtype=acc_dt)
    for _, sl in _offsets(k, s, ones, outs):
        xp[sl] += gd
    out = np.ascontiguousarray(xp[(slice(None), slice(None)) + tuple(slice(pp, pp + n) for pp, n in zip(p, in_hw))])
    return out.astype(dt) if out.dtype != dt else out


def bounds(n: int, no: int):
    """torch's adaptive windows: [floor(i*n/no), ceil((i+1)*n/no)) for each output i."""
    i = np.arange(no)
    return (i * n) // no, ((i + 1) * n + no - 1) // no


def adaptive_max_kernel(x, out_hw):
    dt = x.dtype
    if dt in LOW:
        x = x.astype(np.float32)
    N, C = x.shape[:2]
    sizes = x.shape[2:]
    nsp = len(sizes)
    bnds = [bounds(n, no) for n, no in zip(sizes, out_hw)]
    pst = _plane_strides(sizes)
    vals = np.empty((N, C) + tuple(out_hw), dtype=x.dtype)
    idx = np.empty((N, C) + tuple(out_hw), dtype=np.int64)
    for o in itertools.product(*(range(no) for no in out_hw)):
        lo = [bnds[i][0][o[i]] for i in range(nsp)]
        hi = [bnds[i][1][o[i]] for i in range(nsp)]
        win = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in zip(lo, hi))].reshape(N, C, -1)
        a = win.argmax(-1)
        if x.dtype.kind == "f":
            isn = np.isnan(win)
            if isn.any():
                # torch lets the last NaN of the window win
                last = isn.shape[-1] - 1 - isn[..., ::-1].argmax(-1)
                a = np.where(isn.any(-1), last, a)
        coords = np.unravel_index(a, tuple(b - c for b, c in zip(hi, lo)))
        at = (slice(None), slice(None)) + o
        idx[at] = sum((lo[i] + coords[i]) * pst[i] for i in range(nsp))
        vals[at] = np.take_along_axis(win, a[..., None], -1)[..., 0]
    return (vals.astype(dt) if vals.dtype != dt else vals), idx
