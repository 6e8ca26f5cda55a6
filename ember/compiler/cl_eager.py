"""Eager ops on an OpenCL device as generated kernels: one small compiled program per op instance.

``kernel_for(op, arg_specs, attrs)`` is what the op dispatcher calls for a device tensor op. It builds a
one-op ``Program`` (the same IR ``ember.compile`` captures: ``arg`` values of the given shapes and dtypes,
one ``OpNode``, its outputs), runs it through the compiler's pipeline (decompose -> schedule ->
``render_cl``) and returns ``run(inputs) -> outputs`` (lists of ``cl_device.DeviceArray``), or None when
the op has no decomposition into primitives for these dtypes (or it needs a host step): the dispatcher
then falls back. Results are cached in memory per (op, argument specs, attributes) -- a miss costs a
pipeline run and a program build, which the binary cache (``cl_device.Runtime.build``) turns into a load
in later processes -- and a declined instance is remembered too.

``arg_specs`` holds one entry per positional argument of the op: ``(shape, dtype)`` for a tensor (inputs
are contiguous; dtype an ember or NumPy dtype), any other value (a Python scalar, None, a tuple of
ints) as it is. An attribute may be a ``_Spec`` too (device data an op takes as an attribute, such as
``cross_entropy_backward``'s saved log-probabilities): it becomes an input after the positional
ones, in the order of the attribute names, referenced from the op node as the compiler's ``AttrRef``.
Output shapes and dtypes come from running the op's NumPy kernel once on zeros of those shapes (zeros
are valid indices for gather-like ops). In-place ops are not generated here: the dispatcher computes
the out-of-place op and copies.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from .ir import Value, OpNode, Graph, Program, AttrRef
from .decompose import DECOMPOSITIONS, DEVICE_DECOMPOSITIONS, Declined
from . import cl_decomp  # noqa: F401  (registers the device-only decompositions)

STATS = {"hits": 0, "built": 0, "declined": 0}
_CACHE: dict = {}
FAST: dict = {}              # the dispatcher's cache: (op, argument key, attributes) -> (launch, convert)
_REASONS: dict = {}          # cache key -> why the op instance has no kernel
LAST_DECLINE = [""]          # why the last kernel_for call returned None (the dispatcher's fallback reason)
_MISSING = object()


class _Spec:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype if hasattr(dtype, "np") else _dt.from_numpy_dtype(np.dtype(dtype))


def _is_spec(x) -> bool:
    if not (isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], (tuple, list))):
        return False
    d = x[1]
    if hasattr(d, "np"):
        return True
    try:
        return isinstance(d, (np.dtype, type, str)) and np.dtype(d) is not None
    except TypeError:
        return False


def _key_of(x):
    if isinstance(x, _Spec):
        return ("spec", x.shape, x.dtype.name)
    if isinstance(x, np.ndarray):
        return ("nd", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, dict):
        return ("dict",) + tuple((k, _key_of(v)) for k, v in sorted(x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(_key_of(v) for v in x)
    if hasattr(x, "np"):                      # an ember dtype
        return ("dtype", x.name)
    if isinstance(x, (float, np.floating)):
        # (NaN never equals itself; -0.0 equals 0.0 but is another constant in the kernel)
        return (type(x).__name__, "nan") if x != x else (type(x).__name__, float(x), math.copysign(1.0, x))
    hash(x)
    return (type(x).__name__, x)


def kernel_for(op, arg_specs, attrs=None, device=None):
    """A cached ``run(inputs) -> [outputs]`` for ``op`` (an OpDef or its name) on these argument specs on
    OpenCL device ``device`` (an index or "opencl:N"; default 0), or None (the dispatcher falls back).
    ``inputs`` are the DeviceArrays of the tensor arguments, in order; the outputs are new DeviceArrays
    (or views of an input, for ops that return one)."""
    from ..ops.registry import REGISTRY
    from .cl_device import runtime
    if isinstance(op, str):
        op = REGISTRY[op]
    rt = runtime(device)
    attrs = dict(attrs or {})
    specs = [(_Spec(*a) if _is_spec(a) else a) for a in arg_specs]
    try:
        key = (rt.index, op.name, _key_of(attrs),
               tuple(("T", s.shape, s.dtype.name) if isinstance(s, _Spec) else ("P", _key_of(s)) for s in specs))
    except TypeError:
        key = None                            # unhashable attributes: not cached
    if key is not None:
        hit = _CACHE.get(key, _MISSING)
        if hit is not _MISSING:
            STATS["hits"] += 1
            if hit is None:
                LAST_DECLINE[0] = _REASONS.get(key, "")
            return hit
    why = [""]
    fn = _make(op, specs, attrs, rt, why)
    if fn is None:
        STATS["declined"] += 1
        LAST_DECLINE[0] = why[0]
        if key is not None:
            _REASONS[key] = why[0]
    else:
        STATS["built"] += 1
    if key is not None:
        _CACHE[key] = fn
    return fn


def clear_cache() -> None:
    _CACHE.clear()
    FAST.clear()
    _REASONS.clear()


def one_op_program(op, specs, attrs) -> Program | None:
    """The Program of one call of ``op`` (None when its NumPy kernel rejects zeros of these shapes)."""
    values = []

    def new(kind, shape, dtype, ref=None):
        v = Value(len(values), kind, tuple(shape), dtype, ref)
        values.append(v)
        return v
    args, inputs, np_args = [], [], []
    for i, s in enumerate(specs):
        if isinstance(s, _Spec):
            v = new("arg", s.shape, s.dtype, (i,))
            args.append(v)
            inputs.append(v)
            np_args.append(np.zeros(s.shape, dtype=s.dtype.np))
        else:
            inputs.append(s)
            np_args.append(s)
    node_attrs, np_attrs = dict(attrs), dict(attrs)
    for k in sorted(attrs):
        s = attrs[k]
        if isinstance(s, _Spec):
            v = new("arg", s.shape, s.dtype, (len(args),))
            args.append(v)
            node_attrs[k] = AttrRef(v)
            np_attrs[k] = np.zeros(s.shape, dtype=s.dtype.np)
    try:
        with np.errstate(all="ignore"):
            res = op.kernel(*np_args, **np_attrs)
    except Exception:
        return None
    outs = (res,) if op.nout == 1 else tuple(res)
    out_values = []
    for r in outs:
        r = np.asarray(r)
        try:
            dt = _dt.from_numpy_dtype(r.dtype)
        except Exception:
            return None
        out_values.append(new("node", r.shape, dt))
    node = OpNode(op, inputs, node_attrs, out_values, "<eager>", "forward", False)
    return Program(values, [Graph(nodes=[node])], list(out_values), args, [], [], [])


def _make(op, specs, attrs, rt, why):
    if op.name not in DECOMPOSITIONS and op.name not in DEVICE_DECOMPOSITIONS:
        why[0] = "no decomposition into the compiler's primitives"
        return None
    prog = one_op_program(op, specs, attrs)
    if prog is None:
        why[0] = "its output shapes could not be inferred from zeros"
        return None
    if any(v.dtype.is_complex for v in prog.values):
        why[0] = "complex dtypes have no OpenCL kernels"
        return None
    from .cl_runner import CLRunner
    try:
        runner = CLRunner(prog, name=f"eager_{op.name}", rt=rt, require_native=True)
    except Declined as e:
        why[0] = str(e)
        return None

    def run(inputs):
        return list(runner(list(inputs)).outputs)
    run.runner = runner
    return run
