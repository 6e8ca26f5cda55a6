"""The op registry and the eager dispatch path.

Every operator is one ``OpDef``: its CPU kernel (NumPy arrays in, arrays out), its derivative written
in ember ops (so double backward works and the compiler can trace it), what the derivative needs saved,
and a slot for its decomposition into primitives (filled by the compiler). Public functions such as
``ember.add`` parse their arguments, settle dtypes, and call ``apply``; ``apply`` runs the kernel,
wraps the results and, only when some input requires grad, records an autograd ``Node``.

Keep ``apply`` short: it is the hot path. Optional machinery (profiler, capture, anomaly mode) hangs
off one list, ``HOOKS``, checked once per call.
"""
from __future__ import annotations

import re
import warnings as _warnings

import numpy as np

from .. import dtypes as _dt
from .._numpy_quiet import FILTER as _FP_FILTER, reinstate as _fp_reinstate
from .._layout import SparseLayoutError
from ..tensor import Tensor, wrap, _BY_NP
from ..autograd.grad_mode import GRAD
from ..autograd.node import Node, node_class, name_by, rename  # noqa: F401 - rename is re-exported for ops
from ..autograd.views import track as _track_view

REGISTRY: dict[str, "OpDef"] = {}
HOOKS: list = []
QUIET_HOOKS: set = set()  # hooks in HOOKS that only check (the memory limit's), not watch or record ops
DEVICE_RUN = [None]       # ember.devices.dispatch.run once a device tensor exists: ops on device data
VIEW_CALL = [None]        # the op apply_view is running (the device dispatcher makes views, not copies)
FACTORY = [None]          # set by ember.compiler while capturing: sees arrays made by constant factories          # callables hook(op, args, attrs, run) -> result; profiler/capture install here
CAPTURE_MOVE = [None]     # set by ember.compiler while capturing: sees tensors moved between devices (to_device)
_EMPTY: dict = {}


class OpDef:
    """One operator: kernel, derivative, saved values, and decomposition slot."""

    __slots__ = ("name", "kernel", "backward", "save", "nout", "nondiff_outputs", "decomp",
                 "_node_name", "node_cls", "differentiable", "meta", "doc", "prim", "fake")

    def __init__(self, name, kernel, backward=None, save="", nout=1, nondiff_outputs=(),
                 differentiable=True, meta=None, decomp=None, prim=None, fake=None):
        self.name = name
        self.kernel = kernel
        self.backward = backward
        # which values the derivative reads: "i" inputs, "o" outputs (letters, e.g. "io")
        self.save = save
        self.nout = nout
        self.nondiff_outputs = nondiff_outputs
        self.differentiable = differentiable and backward is not None
        self.meta = meta
        self.decomp = decomp      # filled by ember.compiler: decomposition into primitives
        self.prim = prim          # name of the primitive this op *is*, if it is one
        # the output shapes from the input shapes (``fake(*args, **attrs) -> [shape, ...]``, the tensor
        # arguments as objects with ``shape``): under ember.compile's dynamic shapes they are symbolic
        self.fake = fake
        self.node_name = _camel(name) + "Backward0"

    @property
    def node_name(self):
        """torch's name for this op's autograd node: a string, or ``fn(args, attrs) -> str`` when the
        name depends on the call (torch's overloads, e.g. ``FillBackward2`` / ``FillBackward3``).
        Setting it sets ``node_cls``, what ``Node.record`` calls as ``node_cls(op, args, attrs, nout)``:
        the Node subclass of that name, or a function choosing one. A hot op with a call-dependent
        name may set ``node_cls`` itself to such a function (one Python call less per node)."""
        return self._node_name

    @node_name.setter
    def node_name(self, name):
        self._node_name = name
        self.node_cls = name_by(name) if callable(name) else node_class(name)

    def __repr__(self):
        return f"OpDef({self.name})"


def _camel(name: str) -> str:
    """torch's CamelCase of an op name: ``log_softmax`` -> ``LogSoftmax``, ``avg_pool2d`` -> ``AvgPool2D``,
    ``log1p`` -> ``Log1P`` (a letter after a digit is upper-cased, as in torch's generated names)."""
    s = "".join(p[:1].upper() + p[1:] for p in name.strip("_").split("_"))
    return re.sub(r"(?<=\d)[a-z]", lambda m: m.group(0).upper(), s)


def register(name, kernel, backward=None, save="", **kw) -> OpDef:
    """Register an op. ``differentiable=False`` marks ops with no derivative (comparisons, argmax)."""
    if name in REGISTRY:
        raise RuntimeError(f"op '{name}' is registered twice")
    op = OpDef(name, kernel, backward, save, **kw)
    if backward is None and kw.get("differentiable", True):
        raise RuntimeError(f"op '{name}' needs a backward rule or differentiable=False")
    REGISTRY[name] = op
    return op


def apply(op: OpDef, args: tuple, attrs: dict = _EMPTY):
    """Run ``op`` eagerly on ``args`` (Tensors and Python values) and record autograd if needed."""
    if HOOKS:
        return _apply_hooked(op, args, attrs)
    filters = _warnings.filters
    if not filters or filters[0] is not _FP_FILTER[0]:
        _fp_reinstate()  # a user's filter went in front of ember's fp-warning filter (ember/_numpy_quiet.py)
    n = len(args)
    try:
        # (one and two arguments unwrapped without building a list: most ops take one or two)
        if n == 1:
            a = args[0]
            res = op.kernel(a._data if type(a) is Tensor or isinstance(a, Tensor) else a, **attrs)
        elif n == 2:
            a, b = args
            res = op.kernel(a._data if type(a) is Tensor or isinstance(a, Tensor) else a,
                            b._data if type(b) is Tensor or isinstance(b, Tensor) else b, **attrs)
        else:
            res = op.kernel(*[a._data if type(a) is Tensor or isinstance(a, Tensor) else a for a in args], **attrs)
    except (MemoryError, ValueError) as e:
        _alloc_failed(op, e)
        raise
    except SparseLayoutError as e:      # a sparse tensor's data refused a dense kernel (ember/sparse)
        raise e.for_op(op.name) from None
    if op.nout == 1:
        out = wrap(res if type(res) is np.ndarray else np.asarray(res))
        if GRAD[0] and op.differentiable:
            for a in args:
                if isinstance(a, Tensor) and a._rg:
                    Node.record(op, args, attrs, (out,))
                    break
        return out
    outs = tuple([wrap(r if type(r) is np.ndarray else np.asarray(r)) for r in res])
    record_grad(op, args, attrs, outs)
    return outs


def record_grad(op, args, attrs, outs) -> None:
    """Record an autograd Node for ``outs = op(*args)`` when grad mode is on and an input requires grad
    (``apply`` inlines this for one output: it is the hot path)."""
    if GRAD[0] and op.differentiable:
        for a in args:
            if isinstance(a, Tensor) and a._rg:
                Node.record(op, args, attrs, outs)
                break


def _alloc_failed(op, e):
    # NumPy could not allocate an output (MemoryError, or ValueError past the address space): raise
    # torch's RuntimeError naming the op; any other error goes on as it is
    from ..memory import _alloc_failed as failed
    err = failed(e, op=op.name)
    if err is not None:
        raise err from e


def observed() -> bool:
    """Whether a hook that watches ops (profiler, capture, saved-tensor hooks) is installed: shortcuts
    that bypass ``apply`` must not be taken then. The memory limit's size check does not count."""
    return any(h not in QUIET_HOOKS for h in HOOKS)


def apply_unhooked(op, args, attrs=_EMPTY):
    """``apply`` without the hooks (used by hooks themselves to run the op). Ops with arguments on a
    device go to that device's dispatcher (``ember.devices.dispatch``, installed with the first device
    tensor)."""
    if DEVICE_RUN[0] is not None:
        res = DEVICE_RUN[0](op, args, attrs)
        if res is not NotImplemented:
            return res
    saved = HOOKS[:]
    HOOKS.clear()
    try:
        return apply(op, args, attrs)
    finally:
        HOOKS[:] = saved


def _apply_hooked(op, args, attrs):
    # each hook wraps the next; the innermost runs the op without hooks
    return _run_hooks(list(HOOKS), 0, op, args, attrs)


def _run_hooks(hooks, i, op, args, attrs):
    # (no closure refers to itself: a reference cycle per call kept each op's arguments alive until the
    # cyclic collector ran, and it is off while ember.compile traces)
    if i == len(hooks):
        return apply_unhooked(op, args, attrs)
    return hooks[i](op, args, attrs, lambda: _run_hooks(hooks, i + 1, op, args, attrs))


def apply_view(op: OpDef, args: tuple, attrs: dict = _EMPTY):
    """``apply`` for ops whose output is a view of ``args[0]`` (their only tensor argument): share its
    buffer and version counter. Without hooks or devices the kernel runs here directly: a view kernel
    allocates nothing and computes nothing (no fp-warning filter to keep), so ``apply``'s other work is
    not needed."""
    base = args[0]
    if HOOKS or DEVICE_RUN[0] is not None:
        out = _apply_view_hooked(op, args, attrs)
        outs = out if type(out) is tuple else (out,)
    else:
        try:
            res = op.kernel(base._data, **attrs)
        except (MemoryError, ValueError) as e:
            _alloc_failed(op, e)
            raise
        except SparseLayoutError as e:
            raise e.for_op(op.name) from None
        if op.nout == 1:
            out = wrap(res if type(res) is np.ndarray else np.asarray(res))
            outs = (out,)
        else:
            out = outs = tuple([wrap(r if type(r) is np.ndarray else np.asarray(r)) for r in res])
        if GRAD[0] and base._rg and op.differentiable:
            Node.record(op, args, attrs, outs)
    vc = base._get_vc()
    root = base._base if base._base is not None else base
    for o in outs:
        o._vc = vc
        o._base = root
        if o._rg:
            _track_view(root, o)    # so an in-place write to the base can refresh this view's history
    return out


def _apply_view_hooked(op, args, attrs):
    if DEVICE_RUN[0] is None:
        return apply(op, args, attrs)
    VIEW_CALL[0] = op       # the device dispatcher makes a view of the device buffer, not a copy
    try:
        return apply(op, args, attrs)
    finally:
        VIEW_CALL[0] = None


def view_of(base: Tensor, arr: np.ndarray, dtype=None) -> Tensor:
    """Wrap ``arr`` (a NumPy view of ``base._data``) as an ember view sharing base's version counter."""
    t = wrap(arr, dtype or base._dtype)
    t._vc = base._get_vc()
    t._base = base._base if base._base is not None else base
    return t


def attach(name: str, fn, *, method: bool = True, function: bool = True, namespace=None):
    """Expose ``fn`` as ``ember.<name>`` (function form) and ``Tensor.<name>`` (method form)."""
    if method:
        setattr(Tensor, name, fn)
    if function:
        FUNCTIONS[name] = fn
    return fn


FUNCTIONS: dict[str, object] = {}


def export(*names_or_fns, method=True, function=True):
    """Decorator form of ``attach``: ``@export("add")`` or ``@export`` using the function name."""
    def deco(fn):
        names = [n for n in names_or_fns if isinstance(n, str)] or [fn.__name__]
        for n in names:
            attach(n, fn, method=method, function=function)
        return fn
    if len(names_or_fns) == 1 and callable(names_or_fns[0]):
        fn = names_or_fns[0]
        names_or_fns = ()
        return deco(fn)
    return deco


def to_tensor(x, dtype=None) -> Tensor:
    """Turn a Python number/list/ndarray into a Tensor (for ops that accept array-likes)."""
    if isinstance(x, Tensor):
        return x
    if dtype is None:
        if isinstance(x, np.ndarray):
            return wrap(x)
        dtype = _dt.scalar_dtype(x) if not isinstance(x, (list, tuple)) else None
    if dtype is None:
        from .creation import tensor
        return tensor(x)
    return wrap(np.asarray(x, dtype=dtype.np), dtype)


def dtype_name(d) -> str:
    """torch's capitalised scalar-type name used in messages (Float, Long, ...)."""
    return _NAMES.get(d, str(d))


_NAMES = {_dt.float32: "Float", _dt.float64: "Double", _dt.float16: "Half", _dt.bfloat16: "BFloat16",
          _dt.int64: "Long", _dt.int32: "Int", _dt.int16: "Short", _dt.int8: "Char", _dt.uint8: "Byte",
          _dt.bool: "Bool", _dt.complex64: "ComplexFloat", _dt.complex128: "ComplexDouble"}
