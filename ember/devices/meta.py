"""The "meta" device: tensors with a shape, dtype and strides but no data (torch's ``device="meta"``).

A meta tensor's ``_data`` is a :class:`MetaArray` (shape, NumPy dtype, strides and offset in elements).
Programs use them to build a large model without allocating it (``with ember.device("meta"):`` or
``nn.Linear(..., device="meta")``, then ``module.to_empty(device="cpu")``, ``nn.utils.skip_init``) and
to ask which shapes a model produces (``model(ember.empty(1, 3, 224, 224, device="meta")).shape``).

Nothing is paid on the CPU path until the first meta array exists: then :func:`_activate` puts
:func:`_hook` in ``registry.HOOKS`` (one check per op while meta tensors live; it is taken out again when
the last one is collected). For an op with a meta argument the hook

1. refuses a CPU argument that is not 0-dim, as torch does ("Tensor on device cpu is not on the expected
   device meta!"), and ops whose result shape depends on the values (nonzero, masked_select, unique...);
2. runs a view op (called through ``apply_view``) on a *shadow*: a zeroed host buffer with the meta
   array's layout, lazily mapped by the OS, so the view's strides and offset come out as torch's;
3. otherwise sizes the outputs with the op's meta rule (``ember.ops.meta``: elementwise, matmul, linear,
   embedding, cat, ...) or, where it has none, by running its NumPy kernel on read-only stand-ins of the
   inputs (zero-stride arrays of the right shape: no memory for the inputs; the outputs are dropped);
4. records autograd as on the CPU, so a meta forward pass has a graph.

Reading values (``tolist``, ``item``, ``numpy``, ``.cpu()``, printing the values) raises torch's errors.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap, device as _device, _empty_strides as _contig
from ._strided import StridedInfo
from ._results import wrap_results
from ..ops import registry as R
from ..ops._layout_rule import result_strides
from ..ops.meta import EW_NAMES as _ELEMENTWISE

__all__ = ["MetaArray", "empty", "move", "is_meta_array", "obey_layout", "META"]

META = _device("meta")
_LIVE = [0]             # MetaArrays alive: the hook leaves HOOKS when this drops to zero
_NO_DATA = "Cannot copy out of meta tensor; no data!"
# ops whose output shape depends on the input values: torch's meta kernels refuse them too
_DATA_DEPENDENT = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive", "bincount",
                             "histc", "multinomial", "argwhere", "index_put_bool", "getitem_bool"})

# meta rules that give the right byte count but not the shape (reshape_copy's is flat; cat's of empties)
_SIZE_ONLY_RULES = frozenset({"reshape_copy", "cat"})
# ops that may take CPU index tensors next to meta data (torch's indexing accepts CPU indices)
_INDEXING = ("index", "gather", "scatter", "embedding", "take", "getitem", "setitem")
# view kernels that only do strides arithmetic (never read, never copy: NumPy views or a ValueError)
_NO_READ_VIEWS = frozenset({"view", "permute", "expand", "split", "unbind", "unfold", "diagonal"})
_SHAPES: dict = {}      # op name -> shape rule for layers (ember.devices.meta_shapes), filled on activation


class MetaArray(StridedInfo):
    """Shape, dtype, strides and offset (in elements) of data that does not exist."""

    __slots__ = ("shape", "dtype", "strides", "offset", "__weakref__")
    is_meta = True
    device = None          # (set below: -1, torch's get_device() of a meta tensor)

    def __init__(self, shape, dtype, strides=None, offset=0):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = _contig(self.shape) if strides is None else tuple(int(s) for s in strides)
        self.offset = int(offset)
        if not _LIVE[0]:
            _activate()
        _LIVE[0] += 1

    def __del__(self):
        _LIVE[0] -= 1
        if not _LIVE[0]:
            _deactivate()

    def reshape(self, shape, order="C", copy=None):
        """The view NumPy would make with this layout (its strides on a one-element shadow, never read);
        NumPy's ValueError when the layout needs a copy."""
        isz = self.dtype.itemsize
        sh = np.lib.stride_tricks.as_strided(np.zeros(1, self.dtype), self.shape, tuple(s * isz for s in self.strides))
        r = np.reshape(sh, shape, copy=False)
        return MetaArray(r.shape, self.dtype, tuple(s // isz for s in r.strides) if r.size else None, self.offset)

    def copy(self, order="K"):
        """Another meta array with this one's shape, dtype and strides (``copy.deepcopy`` of a meta tensor
        or parameter, as torch's keeps the layout)."""
        return MetaArray(self.shape, self.dtype, self.strides if self.size else None)

    def __array__(self, *a, **k):
        raise NotImplementedError(_NO_DATA)

    def no_data_error(self) -> Exception:
        """torch's error for reading the values (one element: a scalar read, as torch words it)."""
        if self.size == 1:
            return RuntimeError("Tensor.item() cannot be called on meta tensors")
        return NotImplementedError(_NO_DATA)

    def __repr__(self):
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"


class _MetaIndex(int):
    """The ``device`` of a MetaArray: -1 (torch's ``get_device()`` of a meta tensor). Code written for
    device arrays passes ``-1 - arr.device`` (an OpenCL index coded below zero) to the factories as "the
    device of this tensor": for a meta array that expression gives the meta device itself."""

    def __rsub__(self, other):
        return META


MetaArray.device = _MetaIndex(-1)


def is_meta_array(a) -> bool:
    return type(a) is MetaArray


def stand_in(a: MetaArray) -> np.ndarray:
    """A read-only NumPy array with ``a``'s shape and dtype that takes no memory (every element is one zero)."""
    return np.broadcast_to(np.zeros((), a.dtype), a.shape)


def empty(shape, dt, requires_grad: bool = False) -> Tensor:
    """An ember tensor on the meta device (``dt`` an ember dtype)."""
    t = wrap(MetaArray(shape, dt.np), dt)
    return t.requires_grad_(True) if requires_grad else t


def obey_layout(grad: Tensor, leaf: Tensor) -> None:
    """Give the fresh meta ``grad`` of ``leaf`` the leaf's strides when the leaf is dense (torch's
    AccumulateGrad layout contract: a channels-last parameter gets a channels-last ``.grad``)."""
    a, la = grad._data, leaf._data
    if a.shape == la.shape and a.strides != la.strides and _dense(la.shape, la.strides):
        a.strides = la.strides
        a.offset = 0


def _dense(shape, strides) -> bool:
    """Non-overlapping and dense: the strides sorted are a contiguous layout (size-1 dims ignored)."""
    expected = 1
    for st, n in sorted((st, n) for n, st in zip(shape, strides) if n != 1):
        if st != expected:
            return False
        expected *= n
    return True


def move(t: Tensor, src, dst) -> Tensor:
    """``t.to(dst)`` where one side is the meta device: to meta keeps shape, dtype and strides (a leaf,
    as torch's copy to meta is); out of meta there is no data to copy."""
    if src.type == "meta":
        raise NotImplementedError(_NO_DATA + " Please use torch.nn.Module.to_empty() instead when moving "
                                  "module from meta to a different device.")
    a = t._data
    isz = getattr(a, "itemsize", 1)
    strides = tuple(s // isz for s in a.strides) if type(a) is np.ndarray else None
    return wrap(MetaArray(a.shape, a.dtype, strides if a.size else None), t._dtype)


# ---- the hook in registry.HOOKS ---------------------------------------------------------------------------

def _activate() -> None:
    if _hook not in R.HOOKS:
        from ..ops import meta as rules
        from . import meta_shapes
        rules.attach_rules()
        _SHAPES.update(meta_shapes.build())
        R.HOOKS.append(_hook)
        if R.DEVICE_RUN[0] is None:     # apply_view marks view calls (VIEW_CALL) only while a device runs
            R.DEVICE_RUN[0] = _no_device


def _no_device(op, args, attrs):
    return NotImplemented


def _deactivate() -> None:
    try:
        R.HOOKS.remove(_hook)
        if R.DEVICE_RUN[0] is _no_device:
            R.DEVICE_RUN[0] = None
    except (ValueError, AttributeError, TypeError):     # (interpreter shutdown)
        pass


def _hook(op, args, attrs, run_next):
    for a in args:
        if type(a) is Tensor or isinstance(a, Tensor):
            if type(a._data) is MetaArray:
                return _run(op, args, attrs)
    for v in attrs.values():
        if type(v) is MetaArray:
            return _run(op, args, attrs)
    return run_next()


def _run(op, args, attrs):
    if op.name == "copy_":          # across devices as torch: into meta is a no-op, out of meta has no data
        if type(args[0]._data) is not MetaArray:
            raise NotImplementedError(_NO_DATA)
        args = args[:1] + tuple(a for a in args[1:] if not isinstance(a, Tensor) or type(a._data) is MetaArray)
    for a in args:
        if (isinstance(a, Tensor) and type(a._data) is not MetaArray and a._data.ndim
                and not getattr(a, "_host_const", False) and not any(w in op.name for w in _INDEXING)):
            raise RuntimeError(f"Tensor on device {a.device} is not on the expected device meta! (when running "
                               f"{op.name})")
    if op.name in _DATA_DEPENDENT:
        raise NotImplementedError(f"{op.name}: the output shape depends on the tensor's values, which a meta "
                                  "tensor does not have")
    res = _view(op, args, attrs) if R.VIEW_CALL[0] is op else None
    if res is None:
        res = _sized(op, args, attrs)
    return wrap_results(op, args, attrs, res[0] if op.nout == 1 else res)


def _sized(op, args, attrs):
    """New MetaArrays for ``op``'s outputs: from its meta rule, else from its kernel on stand-ins."""
    xs = [stand_in(a._data) if isinstance(a, Tensor) and type(a._data) is MetaArray else
          (a._data if isinstance(a, Tensor) else a) for a in args]
    shaped = _SHAPES.get(op.name) if _SHAPES else None
    if shaped is not None:                  # the layers' rules (meta_shapes): on the raw arguments
        try:
            got = shaped(*[a._data if isinstance(a, Tensor) else a for a in args], **attrs)
        except Exception:       # noqa: BLE001 - the kernel below raises the real error for bad arguments
            got = None
        if got is not None and len(got) == op.nout:
            return [MetaArray(*g) for g in got]
    kw = {k: stand_in(v) if type(v) is MetaArray else v for k, v in attrs.items()}
    rule = op.meta
    if rule is not None and op.name not in _SIZE_ONLY_RULES:
        try:
            got = rule(*xs, **kw)
        except Exception:       # noqa: BLE001 - the kernel below raises the real error for bad arguments
            got = None
        if got is not None:
            got = [got] if isinstance(got, tuple) else got
            if len(got) == op.nout:
                if op.name in _ELEMENTWISE and len(got[0][0]) > 1:
                    return [MetaArray(s, d, _ew_strides(s, args)) for s, d in got]
                return [MetaArray(s, d) for s, d in got]
    r = op.kernel(*xs, **kw)
    rs = [r] if op.nout == 1 else list(r)
    return [MetaArray(np.shape(x), np.asarray(x).dtype if not hasattr(x, "dtype") else x.dtype,
                      _ew_strides(np.shape(x), args) if op.name in _ELEMENTWISE and np.ndim(x) > 1 else None)
            for x in rs]


def _ew_strides(shape, args):
    """torch's layout for an elementwise result over ``args`` (the first operand that tells two dims
    apart decides: a channels-last meta input gives a channels-last result)."""
    ops = [(a._data.shape, a._data.strides if type(a._data) is MetaArray
            else tuple(st // a._data.itemsize for st in a._data.strides))
           for a in args if isinstance(a, Tensor) and a._data.ndim]
    return result_strides(tuple(shape), ops)


def _view(op, args, attrs):
    """The view ``op`` makes of a meta ``args[0]`` (strides and offset as torch's), or None when its kernel
    copies (or the shadow buffer cannot be mapped)."""
    src = args[0]._data
    if type(src) is not MetaArray:
        return None
    isz = src.itemsize
    no_read = op.name in _NO_READ_VIEWS
    # a kernel that never reads (only strides arithmetic) gets a one-element shadow; others a lazily
    # mapped zero buffer spanning the whole layout (a kernel that copies reads it)
    extent = 1 if no_read else (src.offset + 1 + sum((n - 1) * s for n, s in zip(src.shape, src.strides))
                                if src.size else 1)
    try:
        buf = np.zeros(extent, src.dtype)
    except (MemoryError, ValueError):
        return None
    sh = np.lib.stride_tricks.as_strided(buf if no_read else buf[src.offset:], src.shape,
                                         tuple(s * isz for s in src.strides))
    xs = [sh if a is args[0] else (stand_in(a._data) if isinstance(a, Tensor) and type(a._data) is MetaArray
                                   else (a._data if isinstance(a, Tensor) else a)) for a in args]
    res = op.kernel(*xs, **attrs)
    base = buf.__array_interface__["data"][0]

    def as_meta(r):
        r = np.asarray(r)
        if r.size and not no_read and not np.shares_memory(r, buf):
            return None
        if not r.size:
            return MetaArray(r.shape, r.dtype)
        risz = r.dtype.itemsize
        off = (r.__array_interface__["data"][0] - base) // risz + (src.offset if no_read else 0)
        return MetaArray(r.shape, r.dtype, tuple(s // risz for s in r.strides), off)
    outs = [as_meta(r) for r in ([res] if op.nout == 1 else res)]
    return None if any(o is None for o in outs) else outs
