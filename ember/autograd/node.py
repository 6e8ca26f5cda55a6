"""Autograd graph nodes.

A ``Node`` is made by ``apply`` when an op's input requires grad. It keeps what the op's derivative
reads (inputs and/or outputs, chosen by the op's ``save`` spec), the version of each saved tensor, and
one edge per argument: ``(node, output_nr)`` for a computed tensor, the tensor itself for a leaf, or
``None``. Outputs are saved as raw data and rebuilt on access, so a node never holds its own output
alive in a reference cycle.
"""
from __future__ import annotations

import re

from ..tensor import Tensor, _RemovableHandle
from . import anomaly as _anomaly

_seq = [0]


class Node:
    """One recorded op. Recorded nodes are instances of a subclass named as torch names the node
    (``AddBackward0``: see ``node_class``), so ``type(y.grad_fn).__name__`` reads as in torch."""

    # hot fields in slots; fields most nodes never set live in the instance dict behind the class
    # defaults below, so recording a node stores five attributes (and edges, in_meta)
    __slots__ = ("op", "args", "attrs", "edges", "in_meta", "seq", "nout", "__dict__", "__weakref__")
    _full_name = None    # what name() returns; set on the per-name subclasses
    saved_out = None
    versions = None
    released = False
    tensor_hooks = None
    hooks = None
    pre_hooks = None
    trace = None
    _metadata = None
    ctx_data = None
    _name = None

    def __init__(self, op, args, attrs, nout):
        self.op = op
        self.args = args if op.save else None
        self.attrs = attrs
        self.nout = nout
        _seq[0] += 1
        self.seq = _seq[0]

    @staticmethod
    def record(op, args, attrs, outs) -> "Node":
        """Make a node for ``outs = op(*args)`` and link outputs to it."""
        # node_cls is the op's Node subclass, or for ops whose name depends on the call, a function
        # picking the subclass (see OpDef.node_name). A class made by ``node_class`` has no __init__ of
        # its own: its fields are stored here, without the Python call into Node.__init__.
        nc = op.node_cls
        save = op.save
        if nc in _PLAIN:
            node = _new(nc)
            node.op = op
            node.args = args if save else None
            node.attrs = attrs
            node.nout = len(outs)
            seq = _seq[0] + 1
            _seq[0] = seq
            node.seq = seq
        else:
            node = nc(op, args, attrs, len(outs))
        edges = []
        meta = []
        for a in args:      # one pass for edges and input metadata
            if isinstance(a, Tensor) and a._rg:
                fn = a.grad_fn
                edges.append((fn, a._output_nr) if fn is not None else a)
                meta.append((a._data.shape, a._dtype))
            else:
                edges.append(None)
                meta.append(None)
        node.edges = edges
        node.in_meta = meta
        if save:
            _record_saved(node, save, args, outs)
        nondiff = op.nondiff_outputs
        if len(outs) == 1:
            t = outs[0]
            if t._dtype.grad_ok and (not nondiff or 0 not in nondiff):
                t._rg = True
                t.grad_fn = node
        else:
            for i, t in enumerate(outs):
                if i in nondiff or not t._dtype.grad_ok:
                    continue
                t._rg = True
                t.grad_fn = node
                if i:
                    t._output_nr = i
            node.ctx_data = {"out_meta": [None if i in nondiff else (t._data.shape, t._dtype)
                                          for i, t in enumerate(outs)]}
        if _anomaly.ENABLED[0]:
            node.trace = _anomaly.capture_stack()
        return node

    # ---- what derivative rules read -----------------------------------------------------
    def _check(self):
        if self.released:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors "
                "after they have already been freed). Saved intermediate values of the graph are freed "
                "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
                "backward through the graph a second time or if you need to access saved tensors after "
                "calling backward.")
        if self.versions:
            for t, vc, v in self.versions:
                if vc[0] != v:
                    _version_error(t, self, vc[0], v)

    @property
    def inputs(self) -> tuple:
        """All positional arguments the op was called with (saved tensors checked for in-place changes)."""
        self._check()
        cd = self.ctx_data
        if cd is not None and cd.get("packed_in"):
            from .graph import unpack_args
            return unpack_args(self.args)
        return self.args

    def inputs_reading(self, *idx) -> tuple:
        """All positional arguments, checking for in-place changes only those at ``idx`` (the ones the
        rule will read): torch saves ``x`` of ``x * y`` only when ``y`` needs a gradient, so changing ``x``
        in place afterwards is fine when it does not."""
        cd = self.ctx_data
        if self.released or (cd is not None and cd.get("packed_in")) or not self.versions:
            return self.inputs
        args = self.args
        for t, vc, v in self.versions:
            if vc[0] != v and any(args[i] is t for i in idx):
                _version_error(t, self, vc[0], v)
        return args

    @property
    def outputs(self) -> tuple:
        """The op's outputs, rebuilt from the saved data (checked for in-place changes)."""
        self._check()
        cd = self.ctx_data
        if cd is not None and "packed_out" in cd:
            from .graph import unpack_args
            return unpack_args(cd["packed_out"])
        outs = []
        for i, (data, dt, vc, v) in enumerate(self.saved_out):
            if vc[0] != v:
                _version_error((data.shape, dt), self, vc[0], v, output=i)
            t = Tensor.__new__(Tensor)
            t._data = data
            t._dtype = dt
            t._vc = vc
            if dt.grad_ok and i not in self.op.nondiff_outputs:
                t._rg = True
                t.grad_fn = self
                t._output_nr = i
            outs.append(t)
        return tuple(outs)

    @property
    def output(self) -> Tensor:
        return self.outputs[0]

    @property
    def needs_input_grad(self) -> tuple:
        return tuple(e is not None for e in self.edges)

    def in_shape(self, i: int) -> tuple:
        return self.in_meta[i][0]

    def in_dtype(self, i: int):
        return self.in_meta[i][1]

    # ---- torch's public Node API -------------------------------------------------------
    def name(self) -> str:
        return self._name or self._full_name or self.op.node_name

    @property
    def metadata(self) -> dict:
        """A dict the user may annotate the node with (torch's ``Node.metadata``)."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    @property
    def next_functions(self) -> tuple:
        """``((node, output_nr), ...)`` per input: the producing node, a leaf's AccumulateGrad, or None."""
        res = []
        for e in self.edges:
            if e is None:
                res.append((None, 0))
            elif isinstance(e, Tensor):
                res.append((AccumulateGrad.of(e), 0))
            else:
                res.append(e)
        return tuple(res)

    def _add_hook(self, table: str, hook):
        """Add ``hook`` to the dict in attribute ``table`` (made on first use); its removable handle."""
        d = getattr(self, table)
        if d is None:
            d = {}
            setattr(self, table, d)
        k = object()
        d[k] = hook
        return _RemovableHandle(d, k)

    def register_hook(self, hook):
        """``hook(grad_inputs, grad_outputs)`` after this node runs; may return new grad_inputs."""
        return self._add_hook("hooks", hook)

    def register_prehook(self, hook):
        """``hook(grad_outputs)`` before this node runs; may return new grad_outputs."""
        return self._add_hook("pre_hooks", hook)

    def _add_tensor_hook(self, output_nr, hook, retain=False):
        if self.tensor_hooks is None:
            self.tensor_hooks = {}
        d = self.tensor_hooks.setdefault(output_nr, {})
        k = ("retain", object()) if retain else object()
        d[k] = hook
        return _RemovableHandle(d, k)

    def release(self) -> None:
        """Free what backward saved (called after a backward pass without ``retain_graph``)."""
        self.released = True
        self.args = None
        if self.saved_out is not None:
            self.saved_out = None
        if self.versions is not None:
            self.versions = None
        cd = self.ctx_data
        if cd is not None:
            if "ctx" in cd:
                cd["ctx"]._release()
            cd.pop("packed_out", None)

    def __call__(self, *grads):
        """Run this node's derivative on ``grads`` (one per output): one gradient per input, as the
        formula gives it (broadcast inputs are reduced later by the engine, as in torch)."""
        gi = self.op.backward(self, *grads)
        if type(gi) is not tuple:
            gi = (gi,) if not isinstance(gi, list) else tuple(gi)
        gi = gi + (None,) * (len(self.edges) - len(gi))
        return tuple(None if e is None else g for e, g in zip(self.edges, gi))

    def __repr__(self):
        return f"<{self.name().rsplit('::', 1)[-1]} object at {hex(id(self))}>"


def _record_saved(node, save, args, outs):
    """``Node.record``'s saved values for an op whose derivative reads some (``save``: "i" every input,
    digits the inputs at those positions, "o" the outputs), with the version of each saved tensor."""
    versions = []
    if "i" in save:
        for a in args:
            if isinstance(a, Tensor):
                vc = a._vc
                if vc is None:
                    vc = a._vc = [0]
                versions.append((a, vc, vc[0]))
    else:
        for ch in save:
            if ch.isdigit():
                a = args[int(ch)]
                if isinstance(a, Tensor):
                    vc = a._get_vc()
                    versions.append((a, vc, vc[0]))
    if "o" in save:
        so = []
        for t in outs:
            vc = t._get_vc()
            so.append((t._data, t._dtype, vc, vc[0]))
        node.saved_out = so
    node.versions = versions


_CLASSES: dict = {}
_PLAIN: set = set()     # the classes node_class made (Node.record fills their fields itself)
_new = object.__new__


def node_class(name: str) -> type:
    """The Node subclass for nodes torch calls ``name``, made once per name and cached.

    The class is named as ``type(grad_fn).__name__`` reads in torch: the name without a
    ``torch::autograd::`` prefix (``CopySlices``); ``name()`` returns the full name.
    """
    cls = _CLASSES.get(name)
    if cls is None:
        short = name.rsplit("::", 1)[-1]
        cls = type(short, (Node,), {"__slots__": (), "_full_name": name, "__module__": __name__,
                                    "__qualname__": short})
        _CLASSES[name] = cls
        _PLAIN.add(cls)
    return cls


def name_by(fn):
    """A ``node_cls`` for an op whose node name depends on the call: ``fn(args, attrs) -> name`` is
    evaluated when a node is recorded (only then, so ops without autograd pay nothing)."""
    classes = _CLASSES

    def make(op, args, attrs, nout):
        name = fn(args, attrs)
        cls = classes.get(name)         # inline: this runs for every recorded node of the op
        if cls is None:
            cls = node_class(name)
        return cls(op, args, attrs, nout)
    return make


def rename(out, cls):
    """Give the node just recorded for ``out`` (a Tensor or tuple of them, fresh from ``apply``) the
    class ``cls``, for public functions that run a shared op under another torch name (``transpose``
    runs ``permute``; torch calls the node ``TransposeBackward0``). A no-op without autograd."""
    if type(out) is tuple:
        for o in out:
            fn = o.grad_fn
            if fn is not None:
                fn.__class__ = cls
        return out
    fn = out.grad_fn
    if fn is not None:
        fn.__class__ = cls
    return out


class AccumulateGrad(Node):
    """The node torch shows for a leaf in ``next_functions`` (one per leaf, made on first request).

    The engine accumulates into leaves directly; this object exists for graph inspection. Its hooks
    map onto the leaf's tensor hooks (pre-hooks) and post-accumulate-grad hooks.
    """

    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable
        self.edges = ()
        self.nout = 1
        self._name = None
        self._metadata = None

    @staticmethod
    def of(t: Tensor) -> "AccumulateGrad":
        acc = t._acc_node
        if acc is None or acc.variable is not t:
            acc = AccumulateGrad(t)
            t._acc_node = acc
        return acc

    def name(self):
        return "torch::autograd::AccumulateGrad"

    @property
    def next_functions(self):
        return ()

    def register_prehook(self, hook):
        """``hook((grad,)) -> (new_grad,) | None`` before the gradient is accumulated."""
        def tensor_hook(g):
            r = hook((g,))
            return None if r is None else r[0]
        return self.variable.register_hook(tensor_hook)

    def register_hook(self, hook):
        """``hook(grad_inputs=(), grad_outputs=(grad,))`` after the gradient is accumulated."""
        v = self.variable

        def post(t):
            hook((), (t.grad,))
        return v.register_post_accumulate_grad_hook(post)

    def __call__(self, *grads):
        raise RuntimeError("AccumulateGrad nodes cannot be called directly in ember")

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


def _type_name(t) -> str:
    from ..ops.registry import dtype_name
    return f"ember.{dtype_name(t._dtype)}Tensor"


def _short_name(node) -> str:
    # torch names the op in this message: "MulBackward0" -> "Mul", "MyFnBackward" -> "MyFn"
    return re.sub(r"Backward\d*$", "", node.name())


def _version_error(t, node, now, expected, output=None):
    """torch's error for a saved tensor modified in place. ``t`` is the saved tensor, or for a saved
    output ``(shape, dtype)`` with ``node`` the node that saved it."""
    from ..ops.registry import dtype_name
    if isinstance(t, Tensor):
        desc = f"[ember.{dtype_name(t._dtype)}Tensor [{', '.join(map(str, t._data.shape))}]]"
        if t.grad_fn is not None:
            desc += f", which is output {t._output_nr} of {_short_name(t.grad_fn)},"
    else:
        shape, dt = t
        desc = (f"[ember.{dtype_name(dt)}Tensor [{', '.join(map(str, shape))}]], which is output {output} "
                f"of {_short_name(node)},")
    if _anomaly.ENABLED[0]:
        hint = ("Hint: the backtrace further above shows the operation that failed to compute its gradient. "
                "The variable in question was changed in there or anywhere later. Good luck!")
    else:
        hint = ("Hint: enable anomaly detection to find the operation that failed to compute its gradient, "
                "with ember.autograd.set_detect_anomaly(True, check_nan=False).")
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: {desc} is at version {now}; expected version {expected} instead. {hint}")
