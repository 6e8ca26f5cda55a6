"""Capture: run the user's function once, eagerly, and record every op it calls.

Tracing uses real values: ember's dispatch (``ops.registry.apply``) calls the tracer's hook for each
op, which runs the op and records a node. Because autograd's derivative rules are ember ops too, a
``loss.backward()`` inside the function is recorded op by op (the backward graph is derived at
capture time from the same rules eager mode uses). In-place writes, gradient accumulation into
leaves, and Python reads of tensor values reach the tracer through small hooks in
``ops.inplace``/``autograd.engine`` and patched Tensor methods, installed only while tracing.

A trace is refused (and the function runs eagerly, with the reason logged) when something happened
that a replay could not repeat: a random draw outside an op, or a tensor written behind the
dispatcher's back. See ``UnsupportedTrace``.
"""
from __future__ import annotations

import functools
import operator
import os
import sys
import weakref
from contextlib import contextmanager

import numpy as np

from ..tensor import Tensor
from ..ops import registry as _registry
from ..ops import inplace as _inplace
from ..autograd import engine as _engine
from ..autograd.grad_mode import no_grad, GRAD as _GRAD
from .. import random as _random
from ..nn.parameter import is_lazy, Parameter as _Parameter
from ..devices.opencl import DeviceArray as _DeviceArray
_tensor_mod = sys.modules["ember.tensor"]   # (ember.tensor the name is the factory function)
from . import symbolic as _symbolic, dynamic_capture as _dyn, python_guards as _python_guards
from .ir import paused_gc, map_struct, AttrRef, Value, OpNode, WriteNode, SetGradNode, ReadNode, Graph, Program, BreakReason

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class UnsupportedTrace(RuntimeError):
    """The function did something a compiled replay cannot reproduce (the message says what)."""

    def __init__(self, reason: str, where: tuple = ("<unknown>", 0), suggestion: str = ""):
        self.reason = reason
        self.where = where
        self.suggestion = suggestion
        super().__init__(f"{where[0]}:{where[1]}: {reason}" + (f". {suggestion}" if suggestion else ""))


class GraphBreakError(RuntimeError):
    """Raised under ``fullgraph=True`` when the function needs a graph break."""


_IN_EMBER: dict = {}    # code filename -> whether the file is in the ember package (asked once per file)


def user_frame() -> tuple:
    """(filename, lineno) of the innermost stack frame outside the ember package."""
    f = sys._getframe(1)
    inside = _IN_EMBER
    while f is not None:
        name = f.f_code.co_filename
        ours = inside.get(name)
        if ours is None:
            ours = inside[name] = os.path.abspath(name).startswith(_EMBER_DIR + os.sep)
        if not ours:
            return (name, f.f_lineno)
        f = f.f_back
    return ("<unknown>", 0)


_READ_SUGGESTIONS = {
    "item": "return the tensor from the compiled function and call .item() outside it",
    "bool": "use ember.where(cond, a, b) instead of Python control flow on a tensor's value",
    "tolist": "return the tensor and convert it outside the compiled function",
    "numpy": "return the tensor and convert it outside the compiled function",
    "float": "return the tensor and convert it outside the compiled function",
    "int": "pass the number as a Python int argument instead of reading it from a tensor",
    "index": "pass the number as a Python int argument instead of reading it from a tensor",
    "print": "print outside the compiled function (inside it, printing happens only while tracing)",
}

# the Tensor methods through which Python reads values
_READ_METHODS = {"item": "item", "tolist": "tolist", "numpy": "numpy", "__bool__": "bool",
                 "__float__": "float", "__int__": "int", "__index__": "index", "__array__": "numpy",
                 "__repr__": "print", "__format__": "print"}


# Ops whose result depends on tensor values in a way a replay cannot repeat: a trace that uses them is
# refused and the function runs eagerly. Empty now: selection ops, batch norm, eigh/svd and histc compute
# such values inside ops, and data-dependent sizes (masked_select, x[mask]) are guarded on the count
# (tests/test_compiler_capturable_ops.py). tests/test_compiler_optable.py, which compiles every case of
# the op table, finds new entries; fix them at the op (values as tensors, never attributes).
NOT_CAPTURABLE: dict = {}


class Tracer:
    """Records one call of a function into a ``Program``."""

    active: "Tracer | None" = None

    def __init__(self, fullgraph: bool = False):
        self.fullgraph = fullgraph
        self.values: list = []
        self.t2v: dict = {}              # id(tensor) -> Value
        self.a2v: dict = {}              # id(ndarray) -> Value of an op output (saved outputs are re-wrapped)
        self.parent: "Tracer | None" = None   # the forward trace, when this one records a backward
        self.fwd_refs: list = []         # forward Values this (backward) trace reads
        self.keep: list = []             # tensors kept alive so their ids stay unique (see _watch)
        self._weak: dict = {}            # id -> weakref of an op output / new array: its entries go when it dies
        self._me = weakref.ref(self)
        self._made_seq = 0               # created_arrays: the order arrays were first seen in
        self._alias_count = 0
        self.args: list = []
        self.lifted: list = []
        self.consts: list = []
        self.graphs = [Graph()]
        self.reasons: list = []
        self.created_arrays: dict = {}   # id(ndarray) -> its sequence number, for arrays made during the trace
        self.safe_arrays: set = set()    # ids of arrays made by constant factories (zeros, arange, ...)
        self.in_kernel = 0
        self.reading = 0
        self.vc_start: dict = {}         # id(vc list) -> (vc list, version when first seen)
        self.vc_writes: dict = {}        # id(vc list) -> number of recorded writes
        self.phase = "forward"
        self.unsupported: UnsupportedTrace | None = None
        self.extra_guards: list = []     # (description, fn() -> value, value seen while tracing)
        self.grad_assigned: set = set()  # ids of tensors whose .grad the function assigned itself
        self.grad_owner: dict = {}       # id(grad tensor) -> (owner, grad) for .grad reads
        self.grad_rebinds: list = []     # (lifted Value, weakref to owner): the Value is owner._grad per replay
        self.modules_seen: list = []     # (weakref to a module called while tracing, its training flag then)
        self.module_ids: set = set()
        self.module_states: list = []    # python_guards.module_state of each module called
        self.device = None               # the OpenCL device index of the device values, if any
        self.d2v: dict = {}              # (block, offset, shape, strides, dtype) -> Value of device arrays
        self.op_outs: list = []          # (OpNode, its output tensors) of the last op: views are marked next
        self.aliases: dict = {}          # id(tensor) -> index of a detached alias of a value (see _alias)
        self.sym = None                  # dynamic_capture.SymState of a trace with symbolic sizes

    def add_guard(self, description: str, fn):
        """Guard on Python state the trace depended on (checked before every replay)."""
        self.extra_guards.append((description, fn, fn()))

    @contextmanager
    def untraced(self):
        """Run code whose tensors are state made outside the traced program: its ops are not recorded
        and the tensors it makes are used by reference afterwards, like parameters (optimizer state
        created on a first step, so that the trace serves the later steps as well)."""
        made = self.created_arrays
        start = self._made_seq    # (an id enters once while its array lives: later entries are the last ones)
        self.reading += 1
        try:
            yield
        finally:
            self.reading -= 1
            new = []
            for k in reversed(made):
                if made[k] < start:
                    break
                new.append(k)
            for k in new:
                made.pop(k, None)
                self.safe_arrays.discard(k)

    # ---- what the trace remembers by id --------------------------------------------------------------
    # Tensors and arrays are known by id (t2v, a2v, aliases, created_arrays, safe_arrays). An id must not
    # stand for a dead object whose id a new one reuses: arguments, lifted and other values are kept
    # alive (keep), while op outputs, their arrays and new arrays are watched instead (a weak reference
    # whose callback forgets the id when the object dies). The trace then frees intermediates when eager
    # code would (a training step's trace held every intermediate and optimizer temporary: 250 MB and
    # 50,000 page faults for the small GPT, a third of the trace's time).
    def _watch(self, obj) -> None:
        key = id(obj)
        if key in self._weak:
            return
        try:
            self._weak[key] = weakref.ref(obj, lambda wr, me=self._me, key=key: _forget(me, key, wr))
        except TypeError:           # (an object without weak references: kept alive instead)
            self.keep.append(obj)

    def _made(self, arr) -> None:
        """Note an array made during the trace (an op's result, a factory's, a wrapped NumPy array)."""
        key = id(arr)
        if key not in self.created_arrays:
            if type(arr) is np.ndarray:
                self._watch(arr)
            else:
                self.keep.append(arr)
            self.created_arrays[key] = self._made_seq
            self._made_seq += 1

    def _flush_outs(self) -> None:
        """Mark the last op's outputs that apply_view made views of its first input (set after the op's
        hook returned): backend="eager" replays that op as a view too."""
        for node, outs in self.op_outs:
            if any(o._base is not None for o in outs):
                node.view = True
        self.op_outs.clear()

    # ---- values --------------------------------------------------------------------------------
    def _new_value(self, kind, t: Tensor, ref=None) -> Value:
        d = t._data
        v = Value(len(self.values), kind, tuple(d.shape), t._dtype, ref, t._rg)
        if type(d) is _DeviceArray:
            # the device the value lived on while tracing (None: the CPU); a program with any device
            # value is a device program (``Program.device``: the runners bind device arrays)
            v.device = d.device
            self.device = d.device
        if self.sym is not None and kind == "fwd":
            v.sym = getattr(self.parent.values[ref], "sym", None)
        elif self.sym is not None and kind == "lifted":
            self.sym.note_static(v.shape, None)
        self.values.append(v)
        self.t2v[id(t)] = v
        if kind == "node" and type(d) is np.ndarray:
            self._watch(t)
        else:
            self.keep.append(t)
        vc = t._get_vc()
        self.vc_start.setdefault(id(vc), (vc, vc[0]))
        return v

    def _parent_alias(self, arr):
        """The forward Value whose buffer ``arr`` merely re-wraps (``detach()`` of a forward value inside a
        backward trace gives a new view with the same memory, shape and strides)."""
        if type(arr) is _DeviceArray:
            return self.parent.d2v.get(_dkey(arr))
        a = arr.base
        while isinstance(a, np.ndarray):
            pv = self.parent.a2v.get(id(a))
            if pv is not None:
                same = (a.shape == arr.shape and a.strides == arr.strides and a.dtype == arr.dtype and
                        a.__array_interface__["data"][0] == arr.__array_interface__["data"][0])
                return pv if same else None
            a = a.base
        return None

    def add_arg(self, t: Tensor, path) -> Value:
        v = self.t2v.get(id(t))
        if v is not None:
            return v
        v = self._new_value("arg", t, path)
        if self.sym is not None:
            v.sym = self.sym.arg_sym(path, t._data.shape)
            self.sym.note_static(v.shape, v.sym)
        self.args.append(v)
        return v

    def value_of(self, t: Tensor) -> Value:
        v = self.t2v.get(id(t))
        if v is not None:
            return v
        v = self.a2v.get(id(t._data))
        if v is not None and v.shape == tuple(t._data.shape):
            return v
        src = getattr(t, "_storage_src", None)
        if src is not None and (src._data is not t._data or src is t):
            src = None                  # (t re-wraps src's buffer: x.detach() of an argument or parameter)
        if self.parent is not None:
            pv = self.parent.t2v.get(id(t)) or self.parent.a2v.get(id(t._data)) or self._parent_alias(t._data)
            if pv is None and src is not None:      # (a derivative saved such a detach: its source's value)
                pv = self.parent.t2v.get(id(src))
            if pv is not None:
                v = self._new_value("fwd", t, pv.id)
                self.fwd_refs.append(v)
                return v
        if src is not None and self.parent is None:
            # x.detach() of an argument or a parameter re-wraps its buffer (the wrap looked like a new
            # array): the same value, used without history (see _alias)
            if id(src) in self.t2v:
                return self.t2v[id(src)]
            if isinstance(src, _Parameter):
                v = self._new_value("lifted", src, src)
                self.lifted.append(v)
                return v
        base = t._data
        made_here = any(id(a) in self.created_arrays for a in _array_chain(base))
        if made_here:
            if not any(id(a) in self.safe_arrays for a in _array_chain(base)):
                user = getattr(self, "consumer", None)
                self.refuse(f"a tensor {tuple(t._data.shape)} {t._dtype}"
                            + (f" (an argument of op {user})" if user else "")
                            + " was computed outside ember's ops from other tensors' values (in Python or "
                            "NumPy code of an op or derivative that is not capturable yet); a replay would reuse "
                            "the traced value", "run this function eagerly, or use ops that compute it")
            v = self._new_value("const", t, _host_copy(t._data))
            self.consts.append(v)
            if self.sym is not None:
                _dyn.const_sym(self.sym, v, v.ref)
        else:
            v = self._new_value("lifted", t, t)
            self.lifted.append(v)
            owner = self.grad_owner.get(id(t))
            if owner is not None and owner[1] is t and id(owner[0]) not in self.grad_assigned:
                # a .grad read by reference is lifted by its access path: each replay reads the owner's
                # current .grad (backward makes a new one each step), guarded on its shape and dtype
                import weakref
                oref = weakref.ref(owner[0])
                shape, dt = tuple(t._data.shape), t._dtype
                self.add_guard(f".grad of a tensor {tuple(owner[0]._data.shape)} is a {dt} tensor of shape {shape}",
                               lambda oref=oref, shape=shape, dt=dt: _grad_matches(oref, shape, dt))
                self.grad_rebinds.append((v, oref))
        return v

    # ---- hooks -----------------------------------------------------------------------------------
    def op_hook(self, op, args, attrs, run):
        if self.reading:
            return run()
        self.in_kernel += 1
        try:
            out = run()
        finally:
            self.in_kernel -= 1
        if self.in_kernel:
            return out
        outs = out if type(out) is tuple else (out,)
        if self.op_outs:
            self._flush_outs()
        self.consumer = op.name
        ins = [self.value_of(a) if isinstance(a, Tensor) else a for a in args]
        self.consumer = None
        if op.name in NOT_CAPTURABLE:
            self.refuse(f"op {op.name} is not capturable yet: {NOT_CAPTURABLE[op.name]}",
                        "run this part eagerly (outside the compiled function)")
        if op.name in ("index", "index_put") and (_has_array(attrs) or self.parent is None):
            # the indices are the op's tensor arguments (after x, and after the values for index_put)
            if _has_array(attrs):
                self.refuse(f"op {op.name} got index arrays as attributes: a replay would reuse the traced "
                            "indices", "pass the indices as tensor arguments of the op")
            self._guard_mask_counts(args, ins, range(1 if op.name == "index" else 2, len(args)),
                                    "indexing with a boolean mask")
        elif op.name in ("masked_select", "masked_scatter") and self.parent is None:
            self._guard_mask_counts(args, ins, (1,), op.name)
        if attrs:
            attrs = self._attr_refs(op, attrs)
        vals = []
        for o in outs:
            v = self._new_value("node", o)
            self.a2v[id(o._data)] = v
            if type(o._data) is np.ndarray:
                self._watch(o._data)
            elif type(o._data) is _DeviceArray:
                self.d2v.setdefault(_dkey(o._data), v)
            vals.append(v)
        if self.sym is not None:
            sym_attrs = _dyn.symbolic_attrs(op, ins, attrs)
            if sym_attrs is not attrs:
                attrs = sym_attrs
                gf = getattr(outs[0], "grad_fn", None)
                if gf is not None and getattr(gf, "op", None) is op:
                    gf.attrs = attrs            # (the derivative reads them: cat's backward narrows by sizes)
            _dyn.infer_outputs(self.sym, op, ins, attrs, vals)
        filename, lineno = user_frame()
        node = OpNode(op, ins, dict(attrs), vals, f"{filename}:{lineno}", self.phase)
        if self.sym is not None:
            _dyn.mark_shape_attrs(node)
            _dyn.symbolic_node_meta(self, args, outs)
        node.grad_enabled = _GRAD[0]
        if _registry.VIEW_CALL[0] is op:
            node.view = True        # called through apply_view: a device replay makes a view, not a copy
        self.graphs[-1].nodes.append(node)
        # for backend="eager" (which replays ops with autograd): inputs that are detached aliases, and
        # (in program()) outputs that are views
        al = tuple((i, k) for i, a in enumerate(args) if isinstance(a, Tensor) and (k := self._alias(a)) is not None)
        if al:
            node.aliases = al
        self.op_outs.append((node, outs))
        return out

    def _alias(self, t: Tensor):
        """The index of the detached alias ``t`` is, or None. (Call after ``value_of(t)``.) A tensor that
        shares a traced value's buffer without being the tensor the value stands for, first used without
        autograd history (``v.detach()``, a saved tensor re-wrapped by a derivative), is the same value to
        the kernels but has its own history: none at first, then what in-place writes into it give it.
        A replay with autograd (backend="eager") uses one ``detach()`` of the value for all its uses."""
        k = self.aliases.get(id(t))
        if k is None and not t._rg and id(t) not in self.t2v:
            k = self.aliases[id(t)] = self._alias_count
            self._alias_count += 1
            self._watch(t)
        return k

    def _guard_mask_counts(self, args, ins, positions, what):
        """A bool mask's number of True values sets a result's size (``x[mask]``, masked_select) or how
        values are laid out (``x[mask] = v``, masked_scatter). Guard the count like a Python read: a graph
        break whose replay retraces when the count differs. (The backward of a forward guarded here reuses
        the same masks, so a backward trace, whose parent is set, guards nothing.)"""
        guarded = self.__dict__.setdefault("mask_guards", set())
        for k in positions:
            mask = args[k]
            if mask._data.dtype != np.bool_ or ins[k].id in guarded or ins[k].kind == "const":
                continue                            # (a constant mask, e.g. from a list, keeps its count)
            guarded.add(ins[k].id)
            count = mask.sum()                      # recorded in the current graph
            filename, lineno = user_frame()
            n_true = int(_host_copy(count._data))
            br = BreakReason(f"{what}: the number of True values ({n_true} when traced) sets the "
                             "shape of the result", filename, lineno,
                             "keep shapes fixed where you can (ember.where(mask, x, 0), masked_fill); a call "
                             "whose count differs retraces")
            if self.fullgraph:
                raise GraphBreakError(f"ember.compile(fullgraph=True): graph break at {filename}:{lineno}: "
                                      f"{br.reason}. Suggestion: {br.suggestion}")
            self.reasons.append(br)
            # under dynamic shapes, a count equal to a symbolic size (the rows the masked values come in)
            # is guarded as that size: dynamic.verify checks the guess against a trace at another size
            e = self.sym.guess(n_true) if self.sym is not None and n_true >= 2 else None
            seen = n_true if e is None else _symbolic.SymInt(n_true, e)
            self.graphs[-1].ended_by = ReadNode(self.value_of(count), "int", seen, f"{filename}:{lineno}")
            self.graphs.append(Graph())

    def _attr_refs(self, op, attrs):
        """Attributes holding a traced value's buffer become references resolved at replay."""
        out = None
        for k, a in attrs.items():
            if type(a) is _DeviceArray:
                # device data as an attribute (a saved forward output): always a reference
                v = self._array_value(a) or self.d2v.get(_dkey(a))
                if v is None and self.parent is not None:
                    pv = self.parent.d2v.get(_dkey(a))
                    if pv is not None:
                        v = self._new_value("fwd", _tensor_mod.wrap(a), pv.id)
                        self.a2v[id(a)] = v
                        self.fwd_refs.append(v)
                if v is not None and tuple(a.shape) == v.shape:
                    out = dict(attrs) if out is None else out
                    out[k] = AttrRef(v)
                else:
                    self.refuse(f"op {op.name} takes device data that is not a traced value as attribute {k!r}",
                                "pass the tensor as an argument of the op")
                continue
            if isinstance(a, np.ndarray) and a.size > 1:
                v = self._array_value(a)
                if v is None:
                    for arr in _array_chain(a.base):
                        v = self._array_value(arr)
                        if v is not None:
                            break
                if v is not None and tuple(a.shape) == v.shape:
                    out = dict(attrs) if out is None else out
                    out[k] = AttrRef(v)
                elif v is not None:
                    self.refuse(f"op {op.name} takes a view of a traced tensor's buffer as attribute {k!r}",
                                "pass the tensor as an argument of the op")
        return attrs if out is None else out

    def _array_value(self, arr):
        """The Value whose buffer is ``arr`` (in this trace, or in the forward trace of a backward)."""
        v = self.a2v.get(id(arr))
        if v is None and self.parent is not None:
            pv = self.parent.a2v.get(id(arr))
            if pv is not None:
                v = self._new_value("fwd", _tensor_mod.wrap(arr), pv.id)
                self.a2v[id(arr)] = v
                self.fwd_refs.append(v)
        return v

    def write_hook(self, target: Tensor, value: Tensor):
        if self.reading:
            return
        tv = self.value_of(target)
        sv = self.value_of(value)
        w = WriteNode(tv, sv)
        w.grad_enabled = _GRAD[0]
        al = tuple((i, k) for i, t in enumerate((target, value)) if (k := self._alias(t)) is not None)
        if al:
            w.aliases = al          # (0: the target, 1: the source) -> detached alias, as for OpNode
        self.graphs[-1].nodes.append(w)
        vc = target._get_vc()
        self.vc_writes[id(vc)] = self.vc_writes.get(id(vc), 0) + 1

    def acc_hook(self, leaf: Tensor, g: Tensor):
        """Gradient accumulation into a leaf during a captured backward."""
        cur = leaf.grad
        lv0 = self.t2v.get(id(leaf))
        if lv0 is not None and lv0.kind == "arg":
            # an argument's .grad is checked by the call signature (a new leaf each call replays);
            # accumulating into an existing .grad of an argument would write the traced call's tensor
            if cur is not None and id(leaf) not in self.grad_assigned:
                self.refuse("backward accumulates into the existing .grad of an argument of the compiled "
                            "function", "set the argument's .grad to None before the call (or return the "
                            "gradient instead)")
        elif id(leaf) not in self.grad_assigned:
            import weakref
            ref = weakref.ref(leaf)
            if cur is None:
                self.add_guard("leaf.grad is None", lambda ref=ref: ref() is not None and ref()._grad is None)
            else:
                self.add_guard("leaf.grad is the same tensor", lambda ref=ref, gid=id(cur): ref() is not None and id(ref()._grad) == gid)
        if cur is None:
            gv = self.value_of(g)
            new = _tensor_mod.wrap(_copy_data(g._data), g._dtype)
            leaf._grad = new
            lv = self.value_of(leaf)
            self.graphs[-1].nodes.append(SetGradNode(lv, gv))
            self.t2v[id(new)] = gv
            self.keep.append(new)
        else:
            with no_grad():
                cur.add_(g)

    def gen_hook(self, generator):
        if not self.in_kernel and not self.reading:
            self.refuse("a random draw outside a capturable op (in-place fills such as uniform_/normal_/"
                        "bernoulli_, multinomial): a replay would repeat the same numbers",
                        "use the factories, which draw inside an op (ember.rand/randn/randint/rand_like, "
                        "dropout, ember.normal(mean_tensor, std), ember.bernoulli), or draw outside the "
                        "compiled function and pass the numbers in")

    def factory_hook(self, arr):
        if not self.in_kernel:
            self._made(arr)
            self.safe_arrays.add(id(arr))

    def move_hook(self, t: Tensor, out: Tensor, src, dst):
        """A tensor moved between the CPU and a device (``.to``, ``.cpu()``, a factory's ``device=``).
        A constant factory's array becomes a constant on the device; anything else is recorded as a
        ``_to_copy`` node (a copy where the whole program runs on one device)."""
        if self.reading or self.in_kernel:
            return
        a = t._data
        if (id(t) not in self.t2v and id(a) not in self.a2v and type(a) is np.ndarray
                and any(id(x) in self.safe_arrays for x in _array_chain(a))):
            self._made(out._data)
            self.safe_arrays.add(id(out._data))
            return
        from ..devices.dispatch import TO_DEVICE
        iv = self.value_of(t)
        ov = self._new_value("node", out)
        self.a2v[id(out._data)] = ov
        if type(out._data) is np.ndarray:
            self._watch(out._data)
        elif type(out._data) is _DeviceArray:
            self.d2v.setdefault(_dkey(out._data), ov)
        filename, lineno = user_frame()
        node = OpNode(TO_DEVICE, [iv], {"src": src, "dst": dst}, [ov], f"{filename}:{lineno}", self.phase)
        node.grad_enabled = _GRAD[0]
        self.graphs[-1].nodes.append(node)

    def wrap_hook(self, arr):
        self._made(arr)

    def read_hook(self, t: Tensor, kind: str, result):
        """Python read a tensor's value: a graph break. The value seen becomes a guard."""
        filename, lineno = user_frame()
        reason = f"Tensor.{kind}() needs the tensor's value in Python" if kind != "print" else \
            "printing a tensor needs its value in Python"
        br = BreakReason(reason, filename, lineno, _READ_SUGGESTIONS.get(kind, "avoid reading tensor values"))
        if self.fullgraph:
            raise GraphBreakError(f"ember.compile(fullgraph=True): graph break at {filename}:{lineno}: {reason}. "
                                  f"Suggestion: {br.suggestion}")
        v = self.value_of(t)
        self.reasons.append(br)
        seen = _freeze(result)
        self.graphs[-1].ended_by = ReadNode(v, kind, seen, f"{filename}:{lineno}", guard=kind != "print")
        self.graphs.append(Graph())

    def refuse(self, reason: str, suggestion: str = ""):
        where = user_frame()
        if self.unsupported is None:
            self.unsupported = UnsupportedTrace(reason, where, suggestion)
            self.reasons.append(BreakReason(reason, where[0], where[1], suggestion))

    # ---- install / uninstall -----------------------------------------------------------------------
    def __enter__(self):
        if Tracer.active is not None:
            raise RuntimeError("ember.compile: nested capture is not supported (a compiled function called "
                               "another compiled function while tracing)")
        Tracer.active = self
        _registry.HOOKS.insert(0, self.op_hook)
        _inplace.CAPTURE_WRITE[0] = self.write_hook
        _engine.CAPTURE_ACC[0] = self.acc_hook
        self._prev_mem = _tensor_mod._mem_track
        prev = self._prev_mem

        def mem(arr, _self=self, _prev=prev):
            if id(arr) not in _self.created_arrays:
                _self._made(arr)
            if _prev is not None:
                _prev(arr)
        _tensor_mod._mem_track = mem
        _random._GEN_HOOK[0] = self.gen_hook
        _registry.FACTORY[0] = self.factory_hook
        _registry.CAPTURE_MOVE[0] = self.move_hook
        from ..optim import optimizer as _opt
        from . import optim_capture
        _opt.CAPTURE_STEP[0] = optim_capture.step_group
        self._patch_reads()
        if self.sym is not None:
            self._sym_saved = _dyn.install(self)
            _symbolic.GUARD_SINK[0] = self._sym_guard
        from ..nn.modules import module as _module
        self._module_hook = _module.register_module_forward_pre_hook(self._module_called)
        self._gc = paused_gc(kept=True)    # (a trace's objects all stay alive: collecting them is wasted work)
        self._gc.__enter__()
        return self

    def _sym_guard(self, lhs, op, rhs, result):
        if not self.reading and not self.in_kernel:
            self.sym.add_guard(lhs, op, rhs, result)

    def __exit__(self, *exc):
        if getattr(self, "_gc", None) is not None:
            self._gc.__exit__(None, None, None)
            self._gc = None
        if getattr(self, "_sym_saved", None) is not None:
            _symbolic.GUARD_SINK[0] = None
            _dyn.uninstall(self._sym_saved)
            self._sym_saved = None
        self._unpatch_reads()
        if getattr(self, "_module_hook", None) is not None:
            self._module_hook.remove()
            self._module_hook = None
        _random._GEN_HOOK[0] = None
        _registry.FACTORY[0] = None
        _registry.CAPTURE_MOVE[0] = None
        from ..optim import optimizer as _opt
        _opt.CAPTURE_STEP[0] = None
        _tensor_mod._mem_track = self._prev_mem
        _engine.CAPTURE_ACC[0] = None
        _inplace.CAPTURE_WRITE[0] = None
        if self.op_hook in _registry.HOOKS:
            _registry.HOOKS.remove(self.op_hook)
        Tracer.active = None
        return False

    def _patch_reads(self):
        self._saved_methods = {}
        for meth, kind in _READ_METHODS.items():
            orig = getattr(Tensor, meth)
            self._saved_methods[meth] = orig

            def make(orig=orig, kind=kind):
                def patched(t, *a, **k):
                    tr = Tracer.active
                    if tr is None or tr.reading or tr.in_kernel:
                        return orig(t, *a, **k)
                    tr.reading += 1
                    try:
                        res = orig(t, *a, **k)
                    finally:
                        tr.reading -= 1
                    if id(t) in tr.t2v or kind != "print":
                        tr.read_hook(t, kind, res)
                    return res
                return patched
            setattr(Tensor, meth, make())

        orig_grad = Tensor.__dict__["grad"]
        self._saved_methods["grad"] = orig_grad

        def set_grad(t, value, _orig=orig_grad, _self=self):
            _orig.fset(t, value)
            if is_lazy(t):
                return      # a lazy module's parameter before its first forward: no value yet
            if not _self.reading and not _self.in_kernel:
                _self.grad_assigned.add(id(t))
                lv = _self.value_of(t)
                _self.graphs[-1].nodes.append(SetGradNode(lv, None if value is None else _self.value_of(value)))
        def get_grad(t, _orig=orig_grad, _self=self):
            g = _orig.fget(t)
            # remember whose .grad this is; if the trace then uses it by reference, guard its identity
            if g is not None and not _self.reading and not _self.in_kernel:
                _self.grad_owner.setdefault(id(g), (t, g))
            return g
        Tensor.grad = property(get_grad, set_grad, orig_grad.fdel)

    def _unpatch_reads(self):
        for meth, orig in self._saved_methods.items():
            setattr(Tensor, meth, orig)

    # ---- result ------------------------------------------------------------------------------------
    def check_mutations(self):
        """Refuse the trace if a tensor was written without going through a recorded write."""
        for key, (vc, start) in self.vc_start.items():
            if vc[0] - start > self.vc_writes.get(key, 0):
                self.refuse("a tensor was modified in place by code that ember.compile cannot capture "
                            "(a direct write to its NumPy buffer)",
                            "use ember's in-place ops (add_, copy_, index_put_) inside compiled functions")
                return

    def program(self, outputs) -> Program:
        self._flush_outs()
        aliases = []
        out_struct = _map_struct(outputs, lambda t: (self.value_of(t), aliases.append((self._alias(t), t._rg)))[0])
        p = Program(self.values, self.graphs, out_struct, self.args, self.lifted, self.consts, self.reasons)
        if any(k is not None for k, _ in aliases):
            # per output tensor, in map_struct order: the detached alias it is (backend="eager"), and
            # whether it is one without history (the other backends return a detach() of the value)
            p.output_aliases = [k for k, _ in aliases]
            p.output_detached = [k is not None and not rg for k, rg in aliases]
        p.fwd_refs = self.fwd_refs
        p.extra_guards = self.extra_guards
        p.grad_rebinds = self.grad_rebinds
        p.device = self.device
        if self.parent is None:
            # tensors used by reference (parameters, optimizer state) are guarded on their device: a
            # module moved with .to() after the trace retraces instead of binding the wrong storage
            rebound = {id(v) for v, _ in self.grad_rebinds}
            refs = [v.ref for v in self.lifted if id(v) not in rebound]
            if refs:
                p.extra_guards = list(p.extra_guards) + [(
                    "the tensors used by reference are on the devices they were traced on",
                    lambda refs=refs, nd=np.ndarray: tuple([-1 if type(t._data) is nd else t._data.device
                                                            for t in refs]),
                    tuple(_where(t._data) for t in refs))]
        if self.modules_seen:
            refs = [r for r, _ in self.modules_seen]
            seen = tuple(t for _, t in self.modules_seen)
            p.extra_guards = list(p.extra_guards) + [(
                f"the training flags of the {len(refs)} module(s) called are as traced",
                functools.partial(_training_flags, tuple(refs)), seen)]
        if self.module_states:
            p.extra_guards = list(p.extra_guards) + [_python_guards.modules_guard(self.module_states)]
        return p

    def _module_called(self, module, args):
        """Global forward pre-hook while tracing: every module called gets its ``training`` flag guarded
        (a module passed as an argument or closed over switches to eval: a retrace, not the training graph)."""
        if id(module) not in self.module_ids:
            import weakref
            self.module_ids.add(id(module))
            self.keep.append(module)
            self.modules_seen.append((weakref.ref(module), module.training))
            self.module_states.append(_python_guards.module_state(module))


def _training_flags(refs) -> tuple:
    """The ``training`` flags of the modules ``refs`` (weak references) point at; None for a freed one."""
    try:
        return tuple(map(_TRAINING, map(operator.call, refs)))
    except AttributeError:                      # a module was freed
        return tuple(None if r() is None else r().training for r in refs)


_TRAINING = operator.attrgetter("training")


def _where(d) -> int:
    """-1 for CPU storage, else the OpenCL device index."""
    return d.device if type(d) is _DeviceArray else -1


def _dkey(d) -> tuple:
    """Identity of a device array's memory and layout (views made anew by each op compare equal)."""
    return (id(d.block), d.offset, d.shape, d.strides, d.dtype)


def _host_copy(d) -> np.ndarray:
    """A NumPy copy of a CPU or device array."""
    if type(d) is _DeviceArray:
        from ..devices.opencl import to_numpy
        return to_numpy(d)
    return np.array(d, copy=True)


def _copy_data(d):
    """A fresh copy of a tensor's storage on the same device."""
    if type(d) is _DeviceArray:
        from ..devices import opencl
        return opencl.copy_(opencl.empty(d.shape, d.dtype, d.device, op="grad"), d)
    return np.array(d, copy=True)


def _grad_matches(oref, shape, dt) -> bool:
    o = oref()
    g = None if o is None else o._grad
    return g is not None and g._dtype is dt and tuple(g._data.shape) == shape


def _forget(me, key, wr) -> None:
    """A watched tensor or array died: its id no longer stands for it."""
    tr = me()
    if tr is None or tr._weak.get(key) is not wr:
        return
    del tr._weak[key]
    tr.t2v.pop(key, None)
    tr.aliases.pop(key, None)
    tr.a2v.pop(key, None)
    tr.created_arrays.pop(key, None)
    tr.safe_arrays.discard(key)


def _array_chain(a: np.ndarray):
    if type(a) is _DeviceArray:
        yield a
        return
    while isinstance(a, np.ndarray):
        yield a
        a = a.base


def _has_array(x) -> bool:
    if isinstance(x, np.ndarray):
        return True
    if isinstance(x, dict):
        return any(_has_array(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(_has_array(v) for v in x)
    return False


def _freeze(x):
    if isinstance(x, np.ndarray):
        return x.copy()
    return x


def _map_struct(x, fn):
    """Apply ``fn`` to every tensor in a nested output structure."""
    return map_struct(x, lambda t: isinstance(t, Tensor), fn)