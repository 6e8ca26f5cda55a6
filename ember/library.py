"""ember.library: user-defined operators with torch.library's decorator API.

    @ember.library.custom_op("mylib::softshrink", mutates_args=())
    def softshrink(x: Tensor, lambd: float) -> Tensor: ...

    @softshrink.register_fake
    def _(x, lambd): return ember.empty_like(x)

    softshrink.register_autograd(backward, setup_context=setup_context)
    softshrink.register_kernel("cpu")(fn)        # the implementation used for CPU tensors
    softshrink.register_kernel("opencl")(fn)     # ... for OpenCL tensors (e.g. an ember.opencl.compile_shader kernel)

    ember.ops.mylib.softshrink(x, 0.5)            # callable by its qualified name once registered

A custom op is one ``OpDef`` (``ember.ops.registry``), kept in ``CUSTOM_OPS`` (not in the builtin
``REGISTRY``). Its kernel wraps the NumPy arrays as tensors, calls the user's function with grad off and
unwraps the results, so ``ember.compile`` captures the op as ONE node and, having no decomposition, runs it
as an extern step between the native segments (no graph break). While capturing, the fake impl is
required (RuntimeError naming ``register_fake`` otherwise) and the kernel's outputs are checked against
it; a CPU kernel that only allocates its outputs and calls ``cpp_extension`` C functions is called by the
generated native program itself (``ember/compiler/c_externs.py``). Its derivative is the user's
``backward`` (written in ember ops or other custom ops, so it is traced into compiled backward graphs
too). ``setup_context(ctx, inputs, output)`` runs when the derivative is needed.

Tensor arguments are the op's inputs; other arguments (numbers, bools, None, strings) are attributes.
On device tensors, an "opencl" kernel gets the device tensors (dispatcher entry in
``ember.devices.dispatch.KERNELS``; in compiled device programs the extern step runs it on the device
arrays: no copies); without one the op runs its CPU kernel on host copies, a counted fallback
(``ember.opencl.fallback_counts()``). ``custom_op(..., device_types=d)`` makes the function the kernel
of ``d`` only (as in torch); without ``device_types`` it serves the CPU.
Ops with ``mutates_args`` run eagerly only (their writes bump the arguments' version counters); inside
``ember.compile`` they raise NotImplementedError, and so does recording autograd through them.
"""
from __future__ import annotations

import inspect
import types
import typing

import numpy as np

from .tensor import Tensor, wrap
from .ops import registry as _registry
from .ops.registry import OpDef, _camel
from .autograd.grad_mode import GRAD

__all__ = ["custom_op", "CustomOpDef", "register_fake", "register_autograd", "register_kernel", "opcheck",
           "CUSTOM_OPS"]

CUSTOM_OPS: dict = {}      # "ns::name" -> CustomOpDef
_DEVICE_TYPES = ("cpu", "opencl")
_CAPTURE_DEPTH = [0]       # > 0 while a custom op called under ember.compile's capture runs its kernel


class _Namespace(types.SimpleNamespace):
    """``ember.ops.<ns>``: the custom ops of one namespace as attributes."""

    def __init__(self, ns):
        super().__init__()
        object.__setattr__(self, "_ns", ns)

    def __getattr__(self, name):
        op = CUSTOM_OPS.get(f"{self._ns}::{name}")
        if op is None:
            raise AttributeError(f"'_OpNamespace' '{self._ns}' object has no attribute '{name}'")
        return op


NAMESPACES: dict = {}


def _namespace(ns):
    return NAMESPACES.get(ns)


class _Ctx:
    """The ``ctx`` of ``setup_context``/``backward``: attributes plus ``save_for_backward``."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tuple(tensors)

    def mark_non_differentiable(self, *args):
        pass

    def set_materialize_grads(self, value):
        pass


def _capturing() -> bool:
    """Whether ember.compile is capturing (its tracer's hook is in the op hooks)."""
    for h in _registry.HOOKS:
        if getattr(h, "__name__", "") == "op_hook":
            from .compiler.capture import Tracer
            if isinstance(getattr(h, "__self__", None), Tracer):
                return True
    return False


def _nout_of(fn) -> int:
    try:
        ret = typing.get_type_hints(fn).get("return", inspect.signature(fn).return_annotation)
    except Exception:
        ret = inspect.signature(fn).return_annotation
    if typing.get_origin(ret) in (tuple, typing.Tuple):
        args = typing.get_args(ret)
        if args and args[-1] is not Ellipsis:
            return len(args)
    return 1


class _CustomOpDef(OpDef):
    """A custom op's OpDef: ``device_kernel(arrays, attrs) -> [DeviceArray]`` is set once an "opencl"
    kernel is registered (compiled OpenCL programs run it in place of a host fallback)."""
    __slots__ = ("device_kernel", "c_plans")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.device_kernel = None
        self.c_plans = {}       # the C calls of the CPU kernel, for compiled programs (compiler/c_externs.py)


class CustomOpDef:
    """What ``custom_op`` returns: callable like the function, with the ``register_*`` methods."""

    def __init__(self, name: str, fn, mutates_args, device_types, schema):
        if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
            raise ValueError(f"custom_op: expected a qualified name 'namespace::name', got {name!r}")
        if isinstance(mutates_args, str):
            mutates_args = (mutates_args,) if mutates_args != "unknown" else ()
        self._namespace, self._name = name.split("::")
        self._qualname = name
        self._init_fn = fn
        self._default = fn if device_types is None else None   # torch: fn serves every device type unless named
        self._sig = inspect.signature(fn)
        self._params = list(self._sig.parameters)
        for m in mutates_args:
            if m not in self._params:
                raise ValueError(f"custom_op {name}: mutates_args names {m!r}, which is not a parameter of "
                                 f"{fn.__name__} ({', '.join(self._params)})")
        self._mutates_args = tuple(mutates_args)
        self._schema = schema
        self._kernels: dict = {}
        self._fake = None
        self._backward = None
        self._setup_context = None
        self._opdef = _CustomOpDef(name, self._kernel, self._backward_rule, save="io", nout=_nout_of(fn))
        if device_types is not None:
            for d in ([device_types] if isinstance(device_types, str) else device_types):
                self._set_kernel(d, fn)
        self._opdef.node_name = _camel(f"{self._namespace}_{self._name}") + "Backward0"
        self.__name__ = self._name
        self.__doc__ = fn.__doc__

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    # ---- registration ---------------------------------------------------------------------------------
    def register_fake(self, fn=None, /):
        """The shape/dtype function: given the op's arguments, returns empty tensors of the outputs'
        shapes and dtypes (used by ``opcheck``; capture runs the real kernel)."""
        def deco(f):
            self._fake = f
            return f
        return deco(fn) if fn is not None else deco

    def register_autograd(self, backward, /, *, setup_context=None):
        """``backward(ctx, *grads)`` returns one gradient (or None) per positional input;
        ``setup_context(ctx, inputs, output)`` saves what it needs on ctx."""
        if not callable(backward):
            raise TypeError(f"register_autograd({self._qualname}): backward must be callable, got "
                            f"{type(backward).__name__}")
        if setup_context is not None and not callable(setup_context):
            raise TypeError(f"register_autograd({self._qualname}): setup_context must be callable or None")
        self._backward = backward
        self._setup_context = setup_context

    def register_kernel(self, device_types, fn=None, /):
        """The implementation for ``device_types`` ("cpu", "opencl" or a list); as a decorator or with
        ``fn``. An "opencl" kernel gets the device tensors themselves (it typically allocates its outputs
        with ``ember.empty_like`` and runs a ``compile_shader`` kernel): no fallback, no copies."""
        devs = [device_types] if isinstance(device_types, str) or device_types is None else list(device_types)

        def deco(f):
            for d in devs:
                self._set_kernel("cpu" if d is None else d, f)
            return f
        return deco(fn) if fn is not None else deco

    def _set_kernel(self, device_type, f):
        if device_type not in _DEVICE_TYPES:
            raise NotImplementedError(f"register_kernel({self._qualname}): ember runs custom ops on "
                                      f"{' and '.join(map(repr, _DEVICE_TYPES))}, not {device_type!r}")
        self._kernels[device_type] = f
        self._opdef.c_plans.clear()         # recorded from the kernel this one replaces
        if device_type == "opencl":
            from .devices import dispatch
            dispatch.KERNELS[self._qualname] = self._device_dispatch
            self._opdef.device_kernel = self._device_kernel

    # ---- calling --------------------------------------------------------------------------------------
    def _bind(self, args, kwargs):
        if not kwargs and len(args) == len(self._params):
            return dict(zip(self._params, args))
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self._qualname}(): {e}") from None
        bound.apply_defaults()
        return bound.arguments

    def _impl(self):
        return self._kernels.get("cpu", self._default)

    def __call__(self, *args, **kwargs):
        vals = self._bind(args, kwargs)
        if self._mutates_args:
            for k, v in vals.items():
                if isinstance(v, Tensor) and v.device.type != "cpu":
                    raise NotImplementedError(f"{self._qualname}: argument '{k}' is on {v.device}; custom ops "
                                              "with mutates_args run on CPU tensors only so far")
            return self._call_mutating(vals)
        if _registry.HOOKS and _capturing():
            return self._call_captured(vals)
        # on device tensors the dispatcher runs the "opencl" kernel when one is registered, else the CPU
        # kernel on host copies (a counted fallback, ember.opencl.fallback_counts())
        tensors = tuple(v for v in vals.values() if isinstance(v, Tensor))
        attrs = {k: v for k, v in vals.items() if not isinstance(v, Tensor)}
        return _registry.apply(self._opdef, tensors, attrs)

    def _call_captured(self, vals):
        """The call while ember.compile captures: the fake impl is required; the kernel (which runs with
        the hooks cleared) checks its outputs against it and records its C calls."""
        if self._fake is None:
            raise RuntimeError(f"{self._qualname} has no fake implementation, which ember.compile needs to "
                               f"capture it: register one with @{self._name}.register_fake (or "
                               f"ember.library.register_fake({self._qualname!r})) returning empty tensors of "
                               "the outputs' shapes and dtypes")
        tensors = tuple(v for v in vals.values() if isinstance(v, Tensor))
        attrs = {k: v for k, v in vals.items() if not isinstance(v, Tensor)}
        _CAPTURE_DEPTH[0] += 1
        try:
            return _registry.apply(self._opdef, tensors, attrs)
        finally:
            _CAPTURE_DEPTH[0] -= 1

    def _call_mutating(self, vals):
        if _capturing():
            raise NotImplementedError(f"{self._qualname} mutates {', '.join(self._mutates_args)}: custom ops "
                                      "with mutates_args are not supported inside ember.compile yet; call it "
                                      "outside the compiled function")
        if GRAD[0] and any(isinstance(v, Tensor) and v.requires_grad for v in vals.values()):
            raise NotImplementedError(f"{self._qualname}: autograd through a custom op with mutates_args is not "
                                      "supported; call it under ember.no_grad() or on tensors that do not "
                                      "require grad")
        from .autograd.grad_mode import no_grad
        impl = self._impl()
        if impl is None:
            raise NotImplementedError(f"{self._qualname}: no kernel registered for 'cpu'; use register_kernel")
        with no_grad():
            res = impl(*vals.values())
        for m in self._mutates_args:
            t = vals[m]
            if isinstance(t, Tensor):
                t._bump()
        return res

    def _kernel(self, *arrays, **attrs):
        # the OpDef's kernel: NumPy arrays in (the tensor arguments in order), arrays out
        datas = self._run(self._impl(), arrays, attrs, "cpu")
        return datas[0] if self._opdef.nout == 1 else tuple(datas)

    def _device_kernel(self, arrays, attrs) -> list:
        """The "opencl" kernel on device arrays (the tensor arguments in order): the output arrays."""
        return self._run(self._kernels["opencl"], arrays, attrs, "opencl")

    def _device_dispatch(self, op, arrays, attrs):
        # ember.devices.dispatch.KERNELS entry; 0-dim CPU tensors among the arguments stay on the CPU
        datas = self._device_kernel(arrays, attrs)
        return datas[0] if self._opdef.nout == 1 else tuple(datas)

    def _run(self, impl, arrays, attrs, device_type) -> list:
        """``impl`` on tensors wrapping ``arrays`` (grad off); its outputs' data, checked (tensors on
        ``device_type``, as many as the signature declares, the fake's shapes and dtypes while
        ember.compile captures) and copied where they alias an input."""
        if impl is None:
            raise NotImplementedError(f"{self._qualname}: no kernel registered for '{device_type}' (registered: "
                                      f"{', '.join(self._kernels) or 'none'}); use register_kernel")
        it = iter(arrays)
        call = [attrs[k] if k in attrs else wrap(next(it)) for k in self._params]
        from .autograd.grad_mode import no_grad
        capturing = _CAPTURE_DEPTH[0] > 0
        recorder = None
        if capturing and device_type == "cpu":
            from .compiler.c_externs import Recorder
            recorder = Recorder()
        with no_grad():
            if recorder is None:
                res = impl(*call)
            else:
                with recorder:
                    res = impl(*call)
            fake = self._fake(*call) if self._fake is not None and capturing else None
        outs = res if type(res) is tuple else (res,)
        if len(outs) != self._opdef.nout:
            raise RuntimeError(f"{self._qualname}: the implementation returned {len(outs)} outputs, the "
                               f"op's signature declares {self._opdef.nout}")
        if fake is not None:
            _check_like_fake(self._qualname, outs, fake if type(fake) is tuple else (fake,))
        datas = []
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                raise RuntimeError(f"{self._qualname}: output {i} of the implementation is a "
                                   f"{type(o).__name__}, expected a Tensor")
            if (type(o._data) is np.ndarray) != (device_type == "cpu"):
                raise RuntimeError(f"{self._qualname}: output {i} of the {device_type!r} kernel is on "
                                   f"{o.device}, expected a {device_type} tensor")
            d = o._data
            if device_type == "cpu":
                if any(np.may_share_memory(d, a) for a in arrays):
                    d = d.copy()      # outputs never alias inputs (as torch requires of custom ops)
            elif any(getattr(a, "block", None) is d.block for a in arrays):
                d = o.clone()._data
            datas.append(d)
        if recorder is not None:
            recorder.keep(self._opdef, arrays, attrs, datas)
        return datas

    def _backward_rule(self, node, *grads):
        if self._backward is None:
            raise RuntimeError(f"Autograd not implemented for {self._qualname}: register a derivative with "
                               f"{self._name}.register_autograd(backward, setup_context=...)")
        it = iter(node.inputs)
        attrs = node.attrs
        inputs = tuple(attrs[k] if k in attrs else next(it) for k in self._params)
        outs = node.outputs
        output = outs[0] if self._opdef.nout == 1 else tuple(outs)
        ctx = _Ctx()
        if self._setup_context is not None:
            self._setup_context(ctx, inputs, output)
        gi = self._backward(ctx, *grads)
        if type(gi) is not tuple:
            gi = tuple(gi) if isinstance(gi, list) else (gi,)
        if len(gi) != len(self._params):
            raise RuntimeError(f"{self._qualname}: backward returned {len(gi)} gradients, expected "
                               f"{len(self._params)} (one per input: {', '.join(self._params)})")
        return tuple(g for k, g in zip(self._params, gi) if k not in attrs)


def _check_like_fake(qualname, outs, fake):
    """The real outputs against the fake impl's (RuntimeError naming the output when they differ)."""
    if len(fake) != len(outs):
        raise RuntimeError(f"{qualname}: the fake impl returned {len(fake)} outputs, the kernel {len(outs)}")
    for i, (r, f) in enumerate(zip(outs, fake)):
        if not isinstance(f, Tensor):
            raise RuntimeError(f"{qualname}: fake impl output {i} is a {type(f).__name__}, not a Tensor")
        if isinstance(r, Tensor) and (tuple(r.shape) != tuple(f.shape) or r.dtype != f.dtype):
            raise RuntimeError(f"{qualname}: output {i}: the fake impl gives {tuple(f.shape)} {f.dtype}, the "
                               f"kernel {tuple(r.shape)} {r.dtype}")


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """torch.library.custom_op: turn ``fn`` into the operator ``name`` ("namespace::opname")."""
    def deco(f):
        if name in CUSTOM_OPS:
            raise RuntimeError(f"custom_op: an operator named {name!r} is already registered")
        op = CustomOpDef(name, f, mutates_args, device_types, schema)
        CUSTOM_OPS[name] = op
        NAMESPACES.setdefault(op._namespace, _Namespace(op._namespace))
        return op
    return deco(fn) if fn is not None else deco


def _lookup(op) -> CustomOpDef:
    if isinstance(op, CustomOpDef):
        return op
    found = CUSTOM_OPS.get(op) if isinstance(op, str) else None
    if found is None:
        raise ValueError(f"{op!r} is not a custom op registered with ember.library.custom_op")
    return found


def register_fake(op, fn=None, /):
    return _lookup(op).register_fake(fn) if fn is not None else _lookup(op).register_fake


def register_autograd(op, backward, /, *, setup_context=None):
    return _lookup(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op, device_types, fn=None, /):
    return _lookup(op).register_kernel(device_types, fn)


# ---- opcheck ----------------------------------------------------------------------------------------------

DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
                      "test_aot_dispatch_dynamic", "test_gradcheck")


class OpCheckError(Exception):
    """An opcheck test failed (torch.testing._internal.optests.OpCheckError)."""


def _clone(x):
    if isinstance(x, Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    return x


def _outs(res):
    return res if isinstance(res, tuple) else (res,)


def opcheck(op, args, kwargs=None, *, test_utils=DEFAULT_TEST_UTILS, raise_exception=True, rtol=None, atol=None):
    """torch.library.opcheck for ember custom ops. Runs each test in ``test_utils`` and returns
    ``{test: "SUCCESS" | exception}``; the first failure raises OpCheckError when ``raise_exception``.

    test_schema: arguments not named in mutates_args are not changed (values and version counters);
    test_autograd_registration: inputs requiring grad need a registered derivative;
    test_faketensor: the fake impl's output shapes and dtypes equal the real outputs';
    test_aot_dispatch_dynamic: under ember.compile the op gives eager's outputs and gradients;
    test_gradcheck (ember's addition): the derivative against finite differences, for float64 inputs."""
    from . import ops as _ops  # noqa: F401
    op = _lookup(op)
    kwargs = kwargs or {}
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    results = {}
    for name in test_utils:
        fn = _CHECKS.get(name)
        if fn is None:
            raise ValueError(f"opcheck: unknown test_utils entry {name!r} (known: {', '.join(_CHECKS)})")
        try:
            fn(op, args, kwargs, rtol, atol)
            results[name] = "SUCCESS"
        except Exception as e:
            if raise_exception:
                raise OpCheckError(f"opcheck(op={op._qualname}, ...): {name} failed with {e} "
                                   f"({type(e).__name__})") from e
            results[name] = e
    return results


def _check_schema(op, args, kwargs, rtol, atol):
    vals = op._bind(args, kwargs)
    before = {k: (v.detach().clone(), v._version) for k, v in vals.items() if isinstance(v, Tensor)}
    from .autograd.grad_mode import no_grad
    with no_grad():
        op(*args, **kwargs)
    for k, (copy, ver) in before.items():
        if k in op._mutates_args:
            continue
        now = vals[k]
        if now._version != ver or not np.array_equal(now.detach().numpy(), copy.numpy(), equal_nan=True):
            raise RuntimeError(f"argument '{k}' was modified but is not in mutates_args {op._mutates_args}")


def _check_autograd_registration(op, args, kwargs, rtol, atol):
    vals = op._bind(args, kwargs)
    if any(isinstance(v, Tensor) and v.requires_grad for v in vals.values()) and op._backward is None \
            and not op._mutates_args:
        raise RuntimeError(f"{op._qualname} has inputs that require grad but no derivative: use "
                           "register_autograd")


def _check_fake(op, args, kwargs, rtol, atol):
    if op._fake is None:
        raise RuntimeError(f"{op._qualname} has no fake impl: use register_fake")
    from .autograd.grad_mode import no_grad
    cargs = [_clone(a) for a in args]
    ckw = {k: _clone(v) for k, v in kwargs.items()}
    with no_grad():
        real = _outs(op(*cargs, **ckw))
        fake = _outs(op._fake(*[_clone(a) for a in args], **{k: _clone(v) for k, v in kwargs.items()}))
    if op._mutates_args and real == (None,) and fake == (None,):
        return
    _check_like_fake(op._qualname, real, fake)


def _grads(op, args, kwargs, fn):
    cargs = [_clone(a) for a in args]
    outs = _outs(fn(*cargs, **kwargs))
    leaves = [a for a in cargs if isinstance(a, Tensor) and a.requires_grad]
    diff = [o for o in outs if isinstance(o, Tensor) and o.requires_grad]
    if leaves and diff:
        total = diff[0].sum()
        for i, o in enumerate(diff[1:]):
            total = total + (o * float(i + 2)).sum()
        total.backward()
    return [o.detach().numpy() for o in outs if isinstance(o, Tensor)], [a.grad for a in leaves]


def _check_compiled(op, args, kwargs, rtol, atol):
    if op._mutates_args:
        return
    import ember
    eo, eg = _grads(op, args, kwargs, lambda *a, **k: op(*a, **k))
    co, cg = _grads(op, args, kwargs, ember.compile(lambda *a, **k: op(*a, **k)))
    r = 1.3e-6 if rtol is None else rtol
    t = 1e-5 if atol is None else atol
    for i, (x, y) in enumerate(zip(eo, co)):
        np.testing.assert_allclose(y, x, rtol=r, atol=t, err_msg=f"compiled output {i}")
    for i, (x, y) in enumerate(zip(eg, cg)):
        if (x is None) != (y is None):
            raise RuntimeError(f"gradient {i}: eager gives {x is not None}, compiled {y is not None}")
        if x is not None:
            np.testing.assert_allclose(y.numpy(), x.numpy(), rtol=r, atol=t, err_msg=f"compiled gradient {i}")


def _check_gradcheck(op, args, kwargs, rtol, atol):
    if op._mutates_args or op._backward is None:
        return
    tens = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
    if not tens or any(a.dtype.__repr__() != "ember.float64" for a in tens):
        return
    from .autograd.gradcheck import gradcheck
    pos = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]

    def f(*ts):
        full = list(args)
        for i, t in zip(pos, ts):
            full[i] = t
        return op(*full, **kwargs)
    gradcheck(f, tuple(_clone(a) for a in tens), raise_exception=True)


_CHECKS = {"test_schema": _check_schema, "test_autograd_registration": _check_autograd_registration,
           "test_faketensor": _check_fake, "test_aot_dispatch_dynamic": _check_compiled,
           "test_gradcheck": _check_gradcheck}


# ---- inside compiled device programs ------------------------------------------------------------------------

def run_device_extern(e, resolve, copy) -> dict:
    """An extern step of a compiled OpenCL program whose op has a device kernel (a custom op with a
    registered "opencl" kernel): the kernel on the device arrays ``resolve(node)`` gives, enqueued on the
    device queue between the program's segments (no host copies). Returns ``{buffer id: DeviceArray}``
    for the step's outputs, C-contiguous (``copy`` makes a contiguous copy) and checked against the
    shapes and dtypes the program was specialised for."""
    from .compiler import prims as P
    args = [resolve(a) if isinstance(a, P.PNode) else a for a in e.args]
    attrs = {k: resolve(v) if isinstance(v, P.PNode) else v for k, v in e.attrs.items()}
    op = e.op_node.op
    out = {}
    for buf, r in zip(e.outs, op.device_kernel(args, attrs)):
        if tuple(r.shape) != tuple(buf.shape) or r.dtype != buf.dtype:
            raise RuntimeError(f"ember.compile: {op.name} returned {tuple(r.shape)} {r.dtype} where the compiled "
                               f"program was specialised for {tuple(buf.shape)} {buf.dtype}")
        out[buf.id] = r if r.is_contiguous() and r.offset == 0 else copy(r)
    return out
