"""Device tensors in the op dispatcher: where ``ember.Tensor`` meets the device runtimes.

A tensor's ``_data`` is a NumPy array on "cpu" and a :class:`ember.devices.opencl.DeviceArray` on
"opencl". The eager dispatcher (``ember/ops/registry.py``) pays nothing for devices until the first
device tensor exists: then :func:`activate` installs a marker in ``registry.HOOKS`` (so ``apply`` takes
its hooked path, and shortcuts that bypass ``apply`` are off) and :func:`run` in ``registry.DEVICE_RUN``,
which ``apply_unhooked`` (the innermost step of every op) asks first. ``run`` returns ``NotImplemented``
when no argument lives on a device, and the op runs on NumPy as before.

For an op with device arguments, ``run``:

1. checks that all tensors are on one device (0-dim CPU tensors count as scalars, as in torch) and
   raises torch's "Expected all tensors to be on the same device" RuntimeError otherwise;
2. runs a **view op** (called through ``apply_view``) by running its NumPy kernel on a *shadow*: a
   lazily-zeroed host array with the device block's layout. The view it returns has offsets and
   strides into the shadow, which are the same offsets and strides into the device block; an op that
   copied instead of viewing (a reshape of a non-contiguous tensor) is run as a kernel below;
3. runs a **device kernel** when the device has one for the op (``KERNELS``: name -> function of the
   device arrays and attrs);
4. otherwise **falls back to the CPU**, counted and never silent: ``ember.opencl.fallback_counts()``,
   one warning per op, and ``EMBER_OPENCL_FALLBACK=0`` (or ``set_fallback_allowed(False)``) makes it a
   NotImplementedError naming the op and the device. The inputs are copied to the host, the NumPy
   kernel runs, and the results are copied back;
5. records autograd exactly as on the CPU: derivatives are ember ops, so the backward runs on the
   device through this same path.

Moving tensors between devices is :func:`to_device` (``Tensor.to``/``.cpu()``), an autograd op whose
derivative moves the gradient back.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap, device as _device, CPU
from ..autograd.grad_mode import GRAD
from ..ops import registry as R
from . import opencl as _cl
from ._results import wrap_results

__all__ = ["activate", "deactivate", "run", "to_device", "device_of", "is_device_array", "KERNELS",
           "FORCE_FALLBACK"]

DeviceArray = _cl.DeviceArray
KERNELS: dict = {}          # op name -> fn(op, device arrays and values, attrs) -> DeviceArray or tuple
FORCE_FALLBACK: set = set()  # op names whose generated device kernel is not used (they fall back, counted):
                             # a switch to measure what a device kernel saves (examples/custom_softshrink.py)
_DEVICES: dict = {}         # index -> ember.device("opencl", index)
_ACTIVE = [False]


def _marker(op, args, attrs, run_next):
    """In ``registry.HOOKS`` while device tensors exist: it makes ``apply`` take the hooked path (whose
    innermost step asks :func:`run`) and turns off shortcuts that bypass ``apply``."""
    return run_next()


def activate() -> None:
    """Route ops through :func:`run` from now on (called when the first device tensor is made)."""
    if not _ACTIVE[0]:
        _ACTIVE[0] = True
        R.DEVICE_RUN[0] = run
        R.HOOKS.append(_marker)
        from ..optim import optimizer as _optimizer
        from ..compiler import cl_optim
        _optimizer.DEVICE_STEP[0] = cl_optim.step_group
        from . import recurrent, ctc, sampling, joins, masks
        masks.install(KERNELS)
        recurrent.install(KERNELS)
        ctc.install(KERNELS)
        sampling.install(KERNELS)
        joins.install(KERNELS)


def deactivate() -> bool:
    """Take the device dispatcher out of ``apply`` again when no device memory is in use (every device
    tensor is gone), so the CPU path is back to its unhooked speed; returns whether it did."""
    if not _ACTIVE[0]:
        return True
    import gc
    gc.collect()
    # (issubclass of type(o), not isinstance: isinstance reads __class__, which some proxies warn about)
    if any(issubclass(type(o), Tensor) and type(o._data) is DeviceArray for o in gc.get_objects()):
        return False
    _ACTIVE[0] = False
    R.DEVICE_RUN[0] = None
    from ..optim import optimizer as _optimizer
    _optimizer.DEVICE_STEP[0] = None
    if _marker in R.HOOKS:
        R.HOOKS.remove(_marker)
    return True


def is_device_array(a) -> bool:
    return type(a) is DeviceArray


def device_of(t: Tensor):
    """The ``ember.device`` a tensor's data lives on."""
    a = t._data
    if type(a) is DeviceArray:
        return _device_obj(a.device)
    if getattr(a, "is_meta", False):
        from ..tensor import META
        return META
    return CPU


def _device_obj(index: int):
    d = _DEVICES.get(index)
    if d is None:
        d = _DEVICES[index] = _device("opencl", index)
    return d


# ---- the dispatcher ------------------------------------------------------------------------------------

def run(op, args, attrs):
    """Run ``op`` on device arguments (see the module docstring); NotImplemented when none is on a device."""
    dev = None
    mixed = None
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            if type(d) is DeviceArray:
                if dev is None:
                    dev = d.device
                elif d.device != dev:
                    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                                       f"devices, opencl:{dev} and opencl:{d.device}!")
            elif d.ndim:
                mixed = a
    if dev is None:
        return NotImplemented
    if mixed is not None:
        args = _mixed(op, args, dev)
    res = None
    if R.VIEW_CALL[0] is op:
        res = _view(op, args, attrs)
    if res is None:
        fn = KERNELS.get(op.name)
        if fn is not None:
            res = fn(op, [a._data if isinstance(a, Tensor) else a for a in args], attrs)
        if res is None:
            res = _generated(op, args, attrs, dev)
        if res is None:
            res = _fallback(op, args, attrs, dev)
    return wrap_results(op, args, attrs, res)


def _generated(op, args, attrs, dev):
    """The op as a generated OpenCL kernel (``ember.compiler.cl_eager``: its decomposition into the
    compiler's primitives, rendered as OpenCL C, built once per op, shapes, dtypes and attributes), or
    None when it has none. Inputs are made contiguous first; 0-dim CPU tensors are copied over; device
    data passed as an attribute (a saved buffer a derivative reads) becomes an input after the others.

    A call whose tensors are all device arrays is remembered under a cheap key (``_fast_key``: shapes,
    strides, dtypes, values) with the runner's lean launcher (``CLRunner.eager_launcher``) and whether
    its inputs needed contiguous copies: the next call with the same key skips the kernel cache's key
    building and the general runner."""
    from ..compiler import cl_eager
    if op.name in FORCE_FALLBACK:
        _WHY[0] = "forced to the CPU by ember.devices.dispatch.FORCE_FALLBACK"
        return None
    key = _fast_key(op, args, attrs)
    if key is not None:
        entry = cl_eager.FAST.get(key)
        if entry is not None and not _cl.KERNEL_HOOKS:
            fast, convert = entry
            ins = [a._data for a in args if isinstance(a, Tensor)]
            outs = fast([_contiguous(d, dev, op) for d in ins] if convert else ins)
            return outs[0] if op.nout == 1 else tuple(outs)
    specs, inputs = [], []
    converted = False
    for a in args:
        if isinstance(a, Tensor):
            d = _contiguous(a._data, dev, op)
            converted = converted or d is not a._data
            specs.append((d.shape, d.dtype))
            inputs.append(d)
        else:
            specs.append(a)
    dev_attrs = sorted(k for k, v in attrs.items() if type(v) is DeviceArray)
    if dev_attrs:
        attrs = dict(attrs)
        for k in dev_attrs:                # (in name order, as cl_eager numbers them)
            if attrs[k].device != dev:
                _WHY[0] = f"attribute {k} is on another device"
                return None
            d = _contiguous(attrs[k], dev, op)
            attrs[k] = cl_eager._Spec(d.shape, d.dtype)
            inputs.append(d)
    fn = cl_eager.kernel_for(op, specs, attrs, device=dev)
    if fn is None:
        _WHY[0] = cl_eager.LAST_DECLINE[0]
        return None
    if key is not None:
        cl_eager.FAST[key] = (fn.runner.eager_launcher() or fn, converted)
    outs = fn(inputs)
    return outs[0] if op.nout == 1 else tuple(outs)


def _odd_float(v) -> bool:
    """NaN (never equal to itself) and zeros (-0.0 == 0.0, but another constant in a kernel)."""
    return type(v) is float and (v != v or v == 0)


def _fast_key(op, args, attrs):
    """A cheap key for a call whose tensor arguments are all device arrays, or None (not cacheable: a
    host array, device data as an attribute, unhashable attributes, NaN or zero floats). Values carry
    their type (1, 1.0 and True are equal in Python but give different result dtypes)."""
    ks = [op]
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            if type(d) is not DeviceArray:
                return None
            ks.append((d.shape, d.strides, d.dtype))
        else:
            if _odd_float(a):
                return None
            ks.append((type(a), a))
    for k, v in attrs.items():
        t = type(v)
        if t is DeviceArray or _odd_float(v) or (t is tuple and any(_odd_float(x) for x in v)):
            return None
        ks.append((k, t, v))
    key = tuple(ks)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _contiguous(d, dev, op):
    """``d`` as a contiguous device array (a host array is copied over, a strided one copied)."""
    if type(d) is not DeviceArray:
        return _cl.from_numpy(d, dev, op=op.name)
    if not d.is_contiguous():
        c = _cl.empty(d.shape, d.dtype, dev, op=op.name)
        _cl.copy_(c, d)
        return c
    return d


_CROSS_DEVICE = frozenset({"copy_"})     # ops torch lets read from another device (dst.copy_(src))


def _mixed(op, args, dev):
    """Arguments on the CPU next to device ones: torch's error, except for constants that the library
    makes on the host (marked ``_host_const``: resampling indices, weights) or that a derivative rule
    makes while backward runs (zeros to scatter into, masks), which are copied over."""
    from ..autograd.engine import _FINAL_CALLBACKS
    out = []
    for a in args:
        if isinstance(a, Tensor) and type(a._data) is not DeviceArray and a._data.ndim:
            if (op.name not in _CROSS_DEVICE and (not _FINAL_CALLBACKS or a._rg)
                    and not getattr(a, "_host_const", False)):
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                                   f"devices, opencl:{dev} and cpu! (when checking the arguments of {op.name})")
            a = wrap(_cl.from_numpy(a._data, dev, op=op.name), a._dtype)
        out.append(a)
    return tuple(out)


def _host(a):
    """A NumPy copy of a device argument (0-dim CPU tensors and Python values pass through)."""
    if isinstance(a, Tensor):
        d = a._data
        return _cl.to_numpy(d) if type(d) is DeviceArray else d
    return a


_WHY = [""]                  # why the last op had no device kernel (the fallback's reason)


def _fallback(op, args, attrs, dev):
    """The NumPy kernel on host copies of the arguments; results copied to the device."""
    _cl.record_fallback(op.name, f"no device kernel: {_WHY[0]}" if _WHY[0] else "no device kernel", device=dev)
    _WHY[0] = ""
    attrs = {k: _cl.to_numpy(v) if type(v) is DeviceArray else v for k, v in attrs.items()}
    res = op.kernel(*[_host(a) for a in args], **attrs)
    if op.nout == 1:
        return _cl.from_numpy(np.asarray(res), dev, op=op.name)
    return tuple(_cl.from_numpy(np.asarray(r), dev, op=op.name) for r in res)


# ---- views: the NumPy kernel on a shadow of the block ---------------------------------------------------

def _shadow(d: DeviceArray) -> np.ndarray:
    """A host array with ``d``'s layout over a zeroed buffer the size of its block. Large zeroed
    allocations are lazily mapped by the OS, so an untouched shadow costs no memory; it is only read by
    a kernel that copies instead of viewing, whose result is then discarded."""
    blk = d.block
    base = blk._shadow
    if base is None:
        base = blk._shadow = np.zeros(max(blk.nbytes, 16), np.uint8)
    isz = d.dtype.itemsize
    start = base[d.offset:d.offset + (len(base) - d.offset) // isz * isz].view(d.dtype)
    return np.lib.stride_tricks.as_strided(start, d.shape, tuple(s * isz for s in d.strides))


def _view(op, args, attrs):
    """The view ``op`` makes of ``args[0]`` on the device, or None when its kernel copied."""
    src = args[0]._data
    sh = _shadow(src)
    res = op.kernel(*[sh if a is args[0] else _host(a) for a in args], **attrs)
    base_ptr = src.block._shadow.__array_interface__["data"][0]
    limit = base_ptr + src.block.nbytes

    def as_view(r):
        r = np.asarray(r)
        ptr = r.__array_interface__["data"][0]
        if r.size and not (base_ptr <= ptr < limit and np.shares_memory(r, src.block._shadow)):
            return None
        isz = r.dtype.itemsize
        off = ptr - base_ptr if r.size else src.offset
        return src.view(off, r.shape, tuple(s // isz for s in r.strides) if r.size else
                        _contig(r.shape), dtype=r.dtype)
    if op.nout == 1:
        return as_view(res)
    outs = tuple(as_view(r) for r in res)
    return None if any(o is None for o in outs) else outs


def _contig(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


# ---- moving tensors between devices ---------------------------------------------------------------------

def _copy_to_bw(ctx, g):
    return (to_device(g, ctx.attrs["src"]),)


# an autograd node type, not a dispatchable op (never run through apply, so not in the registry)
TO_DEVICE = R.OpDef("_to_copy", lambda x, **_: x, _copy_to_bw)
TO_DEVICE.node_name = "ToCopyBackward0"


def to_device(t: Tensor, device, non_blocking: bool = False) -> Tensor:
    """``t`` on ``device`` (itself when it is there already); autograd moves the gradient back."""
    dst = device if isinstance(device, _device) else _device(device)
    src = device_of(t)
    if dst.type == src.type and (dst.index or 0) == (src.index or 0):
        return t
    a = t._data
    if dst.type == "meta" or src.type == "meta":
        from .meta import move
        return move(t, src, dst)
    if dst.type == "cpu":
        arr = _cl.to_numpy(a)
    elif dst.type == "opencl":
        activate()
        host = _cl.to_numpy(a) if type(a) is DeviceArray else a
        arr = _cl.from_numpy(host, dst.index or 0, non_blocking=non_blocking, op="to")
    else:
        raise RuntimeError(f"to(): ember has no '{dst.type}' device (available: cpu, opencl)")
    out = wrap(arr, t._dtype)
    if R.CAPTURE_MOVE[0] is not None:            # ember.compile capturing: fn(source, result, src, dst)
        R.CAPTURE_MOVE[0](t, out, src, dst)
    if GRAD[0] and t._rg:
        from ..autograd.node import Node
        Node.record(TO_DEVICE, (t,), {"src": src}, (out,))
    return out
