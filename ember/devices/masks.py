"""Ops whose result size depends on values, on the OpenCL device: ``nonzero``, ``masked_select`` and
indexing with a boolean mask (``x[mask]``, ``x[:, mask]``); and ``x[idx] = v`` with one integer index
(``_put_rows``: the last duplicate wins, as on the CPU).

A result size that depends on the values needs one read-back, as on any GPU: the mask (as int64) is
summed with the device's ``cumsum`` and the last prefix sum -- the count -- is read (8 bytes). The rest
stays on the device: a small kernel writes each true element's coordinates at its prefix-sum position
(``nonzero``), and ``x[mask]`` / ``masked_select`` are then the generated ``index`` kernel with those
coordinates as integer indices (torch's own definition of a mask index). Masks that are not bool are
compared with zero first (``nonzero`` of numbers).

Registered in ``dispatch.KERNELS`` by :func:`install` (called when the device dispatcher activates).
"""
from __future__ import annotations

import numpy as np

from . import opencl as _cl

_MAX_DIMS = 8


def _source(nd: int) -> str:
    dims = "".join(f", long d{k}" for k in range(nd))
    body = "".join(f"  out[pos * {nd} + {k}] = r % d{k}; r /= d{k};\n" for k in reversed(range(nd)))
    return (f"__kernel void ember_nonzero_{nd}(__global long *out, __global const long *cs, long cs_off, "
            f"__global const uchar *m, long m_off, long n{dims}) {{\n"
            "  long i = get_global_id(0);\n"
            "  if (i >= n || !m[m_off + i]) return;\n"
            "  long pos = cs[cs_off + i] - 1; long r = i;\n" + body + "}\n")


def _as_tensor(d):
    from ..tensor import wrap
    return wrap(d)


def nonzero(m) -> "_cl.DeviceArray":
    """The (count, ndim) int64 coordinates of the non-zero elements of device array ``m``, in C order."""
    from ..autograd.grad_mode import no_grad
    from .. import dtypes as _dt
    nd = max(m.ndim, 1)
    if nd > _MAX_DIMS:
        return None
    with no_grad():
        t = _as_tensor(m)
        mask = (t if t._dtype is _dt.bool else t != 0).contiguous()
        n = mask._data.size
        if n == 0:
            return _cl.empty((0, m.ndim), np.int64, m.device, op="nonzero")
        cs = mask.reshape(-1).to(_dt.int64).cumsum(0)._data
    count = int(_cl.to_numpy(cs.view(cs.offset + (n - 1) * 8, (), ()))[()])
    out = _cl.empty((count, m.ndim), np.int64, m.device, op="nonzero")
    if count:
        shape = m.shape or (1,)
        md = mask._data
        prog = _cl.build(_source(nd), device=m.device)
        _cl.launch(prog, f"ember_nonzero_{nd}", ((n + 63) // 64) * 64, None,
                   [out, cs, cs.element_offset, md, md.element_offset, n, *[int(s) for s in shape]],
                   device=m.device)
    return out


def _nonzero_kernel(op, args, attrs):
    m = args[0]
    if type(m) is not _cl.DeviceArray:
        return None
    return nonzero(m)


def _generated(op, arrays, attrs):
    """``op``'s generated kernel on contiguous copies of device ``arrays`` (None if it declines)."""
    from ..compiler import cl_eager
    from .dispatch import _contiguous
    dev = arrays[0].device
    ins = [_contiguous(a, dev, op) for a in arrays]
    fn = cl_eager.kernel_for(op, [(a.shape, a.dtype) for a in ins], attrs, device=dev)
    return None if fn is None else fn(ins)[0]


def _generated_index(op, x, idx, pos):
    return _generated(op, [x, *idx], {"pos": tuple(pos)})


def _coordinates(op, idx, pos):
    """The index arrays with each boolean mask replaced by its coordinate columns (``_coords_of`` on the
    device), or None when no mask is among them."""
    if not any(type(a) is _cl.DeviceArray and a.dtype == np.bool_ for a in idx):
        return None
    out_i, out_p = [], []
    for a, p in zip(idx, pos):
        if type(a) is _cl.DeviceArray and a.dtype == np.bool_:
            c = nonzero(a)
            if c is None or c.shape[0] == 0:
                return None                # (an empty result: the host path's shape rules)
            for j in range(a.ndim):
                out_i.append(c.view(c.offset + j * 8, (c.shape[0],), (c.strides[0],)))
                out_p.append(p + j)
        elif type(a) is not _cl.DeviceArray:
            return None
        else:
            out_i.append(a)
            out_p.append(p)
    return out_i, out_p


_BOOL = np.dtype(np.bool_)


def _index(op, args, attrs):
    for a in args[1:]:                     # (cheap first: every device index op comes here)
        if a.dtype is _BOOL:
            break
    else:
        return None
    x, idx = args[0], args[1:]
    if type(x) is not _cl.DeviceArray:
        return None
    coords = _coordinates(op, idx, attrs["pos"])
    if coords is None:
        return None
    out_i, out_p = coords
    if 0 in x.shape or any(0 in a.shape for a in out_i):
        return None                        # (an empty result: the host path's shape rules)
    return _generated_index(op, x, out_i, out_p)


def _index_put(op, args, attrs):
    """``index_put`` with a mask index and ``accumulate`` (the gradient of ``x[mask]``): the generated
    scatter-add with the mask's coordinates; ``x[idx] = v`` with one integer index: :func:`_put_rows`."""
    x, v, idx = args[0], args[1], args[2:]
    if type(x) is not _cl.DeviceArray:
        return None
    if type(v) is np.ndarray and v.ndim == 0:           # a 0-dim CPU value (a scalar, as in torch)
        v = _cl.from_numpy(v, x.device, op=op.name)
    if type(v) is not _cl.DeviceArray:
        return None
    if not attrs["accumulate"]:
        return _put_rows(x, v, idx, attrs["pos"])
    coords = _coordinates(op, idx, attrs["pos"])
    if coords is None or 0 in x.shape:
        return None
    return _generated(op, [x, v, *coords[0]], {"pos": tuple(coords[1]), "accumulate": True})


def _put_rows(x, v, idx, pos):
    """``x[idx] = v`` for one 1-D integer index on dim 0, the last duplicate winning as on the CPU: each
    row's winner (the largest position writing it, by a scatter-reduce amax), then every row is its
    winner's value or its old one. The index bounds are read back once (torch's IndexError)."""
    if len(idx) != 1 or tuple(pos) != (0,) or idx[0].ndim != 1 or idx[0].dtype.kind not in "iu" \
            or type(idx[0]) is not _cl.DeviceArray or not x.ndim or x.dtype != v.dtype:
        return None
    from ..autograd.grad_mode import no_grad
    from ..ops.shape_join import stack
    from ..ops.creation import arange, full
    n, m = x.shape[0], idx[0].shape[0]
    with no_grad():
        i = _as_tensor(idx[0]).long()
        if m:
            lo, hi = (int(a) for a in stack([i.min(), i.max()]).tolist())
            bad = lo if lo < -n else hi if hi >= n else None
            if bad is not None:
                raise IndexError(f"index {bad} is out of bounds for dimension 0 with size {n}")
        xt = _as_tensor(x)
        if not m or not n:
            return xt.clone()._data
        i = i.where(i >= 0, i + n)
        winner = full((n,), -1, device=xt.device).scatter_reduce(0, i, arange(m, device=xt.device), "amax")
        rows = _as_tensor(v).expand((m,) + x.shape[1:]).index_select(0, winner.clamp(min=0))
        hit = (winner >= 0).reshape((n,) + (1,) * (x.ndim - 1))
        return rows.where(hit, xt).contiguous()._data


def _masked_select(op, args, attrs):
    x, m = args[0], args[1]
    if type(x) is not _cl.DeviceArray or type(m) is not _cl.DeviceArray or m.dtype != np.bool_:
        return None
    from ..autograd.grad_mode import no_grad
    with no_grad():
        shape = np.broadcast_shapes(x.shape, m.shape)
        xf = _as_tensor(x).expand(shape).reshape(-1).contiguous()._data
        mf = _as_tensor(m).expand(shape).reshape(-1).contiguous()._data
    c = nonzero(mf)
    if c is None:
        return None
    if c.shape[0] == 0:
        return _cl.empty((0,), x.dtype, x.device, op=op.name)
    from ..ops.registry import REGISTRY
    return _generated_index(REGISTRY["index"], xf, [c.view(c.offset, (c.shape[0],), (1,))], (0,))


def install(kernels: dict) -> None:
    kernels.update({"nonzero": _nonzero_kernel, "index": _index, "index_put": _index_put,
                    "masked_select": _masked_select})
