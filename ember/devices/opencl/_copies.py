"""Copies: ``from_numpy`` (host -> device), ``to_numpy`` (device -> host), ``copy_`` (device ->
device, broadcasting), the generated strided-copy kernel, and the ``fill_`` / ``arange`` kernels.
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from ._arrays import _ITEM_TYPES, DeviceArray, _check_dtype, empty
from ._device_runtime import _runtime
from ._devices import _label
from ._programs import build, launch
from ._records import KERNEL_HOOKS, _note_copy, _note_kernel

cl = None                  # pyopencl, bound by _devices._load_cl on first use


def _host_bytes(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array's memory as a flat uint8 array (pyopencl cannot read every dtype's buffer
    format, e.g. bfloat16's)."""
    return a.reshape(-1).view(np.uint8)


def from_numpy(arr, device=None, non_blocking: bool = False, *, op=None) -> DeviceArray:
    """Copy a host array to a new contiguous DeviceArray on ``device``.

    With ``non_blocking=True`` the call returns once the copy is queued; the host array must then not
    be modified until the device has read it (``synchronize()``), as with a pinned-memory copy in torch.
    A non-contiguous input is first made contiguous on the host (that copy is private, so it is safe).
    """
    a = np.asarray(arr)
    _check_dtype(a.dtype)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    out = empty(a.shape, a.dtype, device, op=op)
    if a.nbytes:
        rt = out.block._rt
        host_ns = time.perf_counter_ns()
        evt = cl.enqueue_copy(rt.queue, out.block.buffer, _host_bytes(a), is_blocking=not non_blocking)
        _note_copy(rt, "h2d", a.nbytes, evt, host_ns)
    return out


def to_numpy(darr: DeviceArray) -> np.ndarray:
    """A new host array with ``darr``'s values (waits for the device)."""
    dt, shape = darr.dtype, darr.shape
    out = np.empty(shape, dt)
    if out.size == 0:
        return out
    rt = darr.block._rt
    if darr.is_contiguous():
        host_ns = time.perf_counter_ns()
        evt = cl.enqueue_copy(rt.queue, _host_bytes(out), darr.block.buffer, src_offset=darr.offset,
                              is_blocking=True)
        _note_copy(rt, "d2h", out.nbytes, evt, host_ns)
        return out
    lo, hi = darr._extent()
    span = (hi - lo) * dt.itemsize
    if span > 4 * out.nbytes + (1 << 16):
        # a sparse view: gather on the device rather than read everything it spans
        tmp = empty(shape, dt, darr.device, op="to_numpy")
        copy_(tmp, darr)
        return to_numpy(tmp)
    raw = np.empty(hi - lo, dt)
    host_ns = time.perf_counter_ns()
    evt = cl.enqueue_copy(rt.queue, _host_bytes(raw), darr.block.buffer, src_offset=lo * dt.itemsize,
                          is_blocking=True)
    _note_copy(rt, "d2h", span, evt, host_ns)
    start = darr.offset // dt.itemsize - lo
    picked = np.lib.stride_tricks.as_strided(raw[start:], shape, tuple(s * dt.itemsize for s in darr.strides))
    out[...] = picked
    return out


def _broadcast_strides(dst_shape, src_shape, src_strides) -> tuple:
    nd, ns = len(dst_shape), len(src_shape)
    if ns > nd:
        raise RuntimeError(f"output with shape {list(dst_shape)} doesn't match the broadcast shape "
                           f"{list(np.broadcast_shapes(tuple(dst_shape), tuple(src_shape)))}")
    out = [0] * (nd - ns)
    for k, (n, s) in enumerate(zip(src_shape, src_strides)):
        d = dst_shape[nd - ns + k]
        if n == d:
            out.append(s)
        elif n == 1:
            out.append(0)
        elif d == 1:
            raise RuntimeError(f"output with shape {list(dst_shape)} doesn't match the broadcast shape "
                               f"{list(np.broadcast_shapes(tuple(dst_shape), tuple(src_shape)))}")
        else:
            raise RuntimeError(f"The size of tensor a ({d}) must match the size of tensor b ({n}) at "
                               f"non-singleton dimension {k + nd - ns}")
    return tuple(out)


def _coalesce(shape, *stride_lists) -> tuple:
    """Drop size-1 dims and merge neighbours that are contiguous in every stride list."""
    dims = [(n, [st[k] for st in stride_lists]) for k, n in enumerate(shape) if n != 1]
    if not dims:
        return (1,), tuple((0,) for _ in stride_lists)
    merged = [dims[0]]
    for n, sts in dims[1:]:
        pn, psts = merged[-1]
        if all(ps == s * n for ps, s in zip(psts, sts)):
            merged[-1] = (pn * n, sts)
        else:
            merged.append((n, sts))
    return (tuple(n for n, _ in merged),
            tuple(tuple(sts[j] for _, sts in merged) for j in range(len(stride_lists))))


def _copy_source(ndim: int, chunk: int) -> str:
    """OpenCL C for strided copies of ``ndim`` dims, one kernel per item size (raw bits). Each work
    item copies ``chunk`` consecutive elements: it splits its first index into per-dim indices once
    (divisions are slow) and then steps through the rest with carries."""
    dims = range(ndim)
    last = ndim - 1
    params = ", ".join([f"long n{k}" for k in dims] + [f"long ds{k}" for k in dims] +
                       [f"long ss{k}" for k in dims])
    split = "".join(f"    long i{k} = r % n{k}; r /= n{k};\n" for k in range(last, 0, -1)) + "    long i0 = r;\n"
    offsets = "".join(f"    d += i{k} * ds{k}; s += i{k} * ss{k};\n" for k in dims)
    step = ""
    for k in range(last, 0, -1):
        step += (f"        if (++i{k} < n{k}) {{ d += ds{k}; s += ss{k}; continue; }}\n"
                 f"        i{k} = 0; d -= (n{k} - 1) * ds{k}; s -= (n{k} - 1) * ss{k};\n")
    step += "        ++i0; d += ds0; s += ss0;\n"
    parts = [f"/* ember strided copy, {ndim} dims, {chunk} elements per work item */\n"]
    for size, t in _ITEM_TYPES.items():
        parts.append(
            f"__kernel void ember_copy_{size}(__global {t} *dst, long dst_off, __global const {t} *src,\n"
            f"        long src_off, long numel, {params})\n{{\n"
            f"    long first = (long)get_global_id(0) * {chunk};\n    if (first >= numel) return;\n"
            f"    long stop = min(first + {chunk}L, numel);\n"
            f"    long r = first, d = dst_off, s = src_off;\n{split}{offsets}"
            f"    for (long t = first; t < stop; ++t) {{\n        dst[d] = src[s];\n{step}    }}\n}}\n")
    return "".join(parts)


def _global_size(n: int) -> tuple:
    return (-(-n // 256) * 256,)


def _strided_copy(rt, dst_buf, dst_off, dst_strides, src_buf, src_off, src_strides, shape, itemsize):
    shape, (ds, ss) = _coalesce(shape, dst_strides, src_strides)
    n = 1
    for s in shape:
        n *= s
    k = rt.copy_kernel(len(shape), itemsize)
    i64 = np.int64
    k.set_args(dst_buf, i64(dst_off), src_buf, i64(src_off), i64(n),
               *[i64(x) for x in shape], *[i64(x) for x in ds], *[i64(x) for x in ss])
    host_ns = time.perf_counter_ns()     # before the enqueue: the profiler's clock offset is a lower bound
    evt = cl.enqueue_nd_range_kernel(rt.queue, k, _global_size(-(-n // rt.copy_chunk)), None)
    if KERNEL_HOOKS:
        _note_kernel(rt, f"ember_copy_{itemsize}", evt, host_ns)
    return evt


def _check_writable(dst: DeviceArray) -> None:
    for n, s in zip(dst.shape, dst.strides):
        if n > 1 and s == 0:
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers "
                               "to a single memory location. Please clone() the tensor before performing "
                               "the operation.")


def copy_(dst: DeviceArray, src: DeviceArray) -> DeviceArray:
    """Copy ``src`` (broadcast to ``dst.shape``) into ``dst``; both DeviceArrays of the same dtype.
    Returns ``dst``. Arrays on different devices go through the host."""
    if not isinstance(dst, DeviceArray) or not isinstance(src, DeviceArray):
        raise TypeError(f"copy_: expected two DeviceArrays, got {type(dst).__name__} and {type(src).__name__}")
    if dst.dtype != src.dtype:
        raise RuntimeError(f"copy_: dtypes differ (destination {dst.dtype.name}, source {src.dtype.name}); "
                           "the raw copy does not convert: cast with a kernel first")
    src_strides = _broadcast_strides(dst.shape, src.shape, src.strides)
    _check_writable(dst)
    if dst.size == 0:
        return dst
    if src.device != dst.device:
        staged = from_numpy(to_numpy(src), dst.device, op="copy_")
        return copy_(dst, staged)
    rt = dst.block._rt
    isz = dst.itemsize
    if src.block is dst.block:
        slo, shi = src._extent()
        dlo, dhi = dst._extent()
        if slo < dhi and dlo < shi:            # overlapping memory: read everything before writing
            tmp = empty(src.shape, src.dtype, src.device, op="copy_")
            copy_(tmp, src)
            return copy_(dst, tmp)
    host_ns = time.perf_counter_ns()
    if src.shape == dst.shape and src.is_contiguous() and dst.is_contiguous():
        evt = cl.enqueue_copy(rt.queue, dst.block.buffer, src.block.buffer, byte_count=dst.nbytes,
                              src_offset=src.offset, dst_offset=dst.offset)
    else:
        evt = _strided_copy(rt, dst.block.buffer, dst.offset // isz, dst.strides, src.block.buffer,
                            src.offset // isz, src_strides, dst.shape, isz)
    _note_copy(rt, "d2d", dst.nbytes, evt, host_ns)
    return dst


def fill_(darr: DeviceArray, value) -> DeviceArray:
    """Set every element of ``darr`` to ``value`` (converted to its dtype). Returns ``darr``."""
    _check_writable(darr)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # NumPy warns (or raises) on an out-of-range conversion
            pattern = np.array(value, dtype=darr.dtype)
    except (OverflowError, ValueError, TypeError, RuntimeWarning, DeprecationWarning):
        raise RuntimeError(f"value cannot be converted to type {darr.dtype.name} without overflow") from None
    if darr.size == 0:
        return darr
    rt = darr.block._rt
    if darr.is_contiguous():
        host_ns = time.perf_counter_ns()     # (taken before the enqueue, as for every record)
        evt = cl.enqueue_fill_buffer(rt.queue, darr.block.buffer, _host_bytes(pattern), darr.offset, darr.nbytes)
        if KERNEL_HOOKS:
            _note_kernel(rt, "ember_fill", evt, host_ns)
        return darr
    one = rt.malloc(darr.itemsize, "fill_")
    cl.enqueue_fill_buffer(rt.queue, one.buffer, _host_bytes(pattern), 0, darr.itemsize)
    _strided_copy(rt, darr.block.buffer, darr.element_offset, darr.strides, one.buffer, 0,
                  (0,) * darr.ndim, darr.shape, darr.itemsize)
    return darr


_ARANGE_TYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long", np.dtype(np.float32): "float",
                 np.dtype(np.float64): "double"}


def arange(n: int, dtype=np.int64, device=None, *, start=0, step=1) -> DeviceArray:
    """A new 1-d DeviceArray ``start + i * step`` for i < n (int32, int64, float32, float64)."""
    dt = np.dtype(dtype)
    if dt not in _ARANGE_TYPES:
        raise TypeError(f"arange: dtype {dt.name} is not supported (int32, int64, float32, float64)")
    rt = _runtime(device)
    if dt == np.float64 and not rt.has_fp64:
        raise TypeError(f"arange: {_label(rt.index)} has no float64 support (cl_khr_fp64)")
    out = empty((int(n),), dt, rt.index, op="arange")
    if n:
        types = [t for d, t in _ARANGE_TYPES.items() if t != "double" or rt.has_fp64]
        src = "".join(f"__kernel void ember_arange_{t}(__global {t} *out, long off, long n, {t} start, "
                      f"{t} step) {{ long i = get_global_id(0); if (i < n) out[off + i] = start + ({t})i * step; }}\n"
                      for t in types)
        if rt.has_fp64:
            src = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + src
        launch(build(src, device=rt.index), f"ember_arange_{_ARANGE_TYPES[dt]}", _global_size(n), None,
               [out, 0, int(n), dt.type(start), dt.type(step)], device=rt.index)
    return out
