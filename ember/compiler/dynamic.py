"""Dynamic shapes for ``ember.compile``: which sizes are symbolic, matching calls to a symbolic entry,
checking a symbolic program against a real trace, and running it at each size.

Which dimensions are symbolic (``plan``):

- ``dynamic=False``: none; ``dynamic=True``: every dimension of every tensor argument;
- ``dynamic=None`` (the default, *automatic dynamic*): the dimensions ``mark_dynamic`` marked, and the
  dimensions whose size changed between calls (the recompile that sees a new size makes them symbolic);
- never a dimension ``mark_static`` marked, and never a size 0 or 1 (specialised, as torch does);
- equal sizes share a symbol (torch's "duck sizing"): a call where they differ traces again.

A symbolic trace is *trusted* (``verify``) only once the program it recorded, evaluated at a second
size, equals a real trace at that size, node for node (ops, attributes, shapes, constants, guards, and
the ahead-of-time backward). The second size is the earlier static trace (automatic dynamic) or the next
call with another size (``dynamic=True``, ``mark_dynamic``). This catches what the SymInts cannot see
(a ``range(s0)`` loop, a size computed from ``x._data.shape``); when the programs differ, the symbols
are given up and each size is compiled on its own (logged under ``EMBER_LOGS=dynamic``).

A trusted entry replays at every size its guards accept. Under ``backend="inductor"`` it makes ONE
native build whose C takes the sizes as arguments (``native_sym.py``) and runs it at every size (a
runner per size, cached). Where that build is declined, or a size falls outside its guards, the
program is evaluated at the call's sizes (cached per size) and run by the interpreter, and a size
seen again gets the native build of that evaluated program. A device program (OpenCL tensors) builds
its generated OpenCL at each size the entry meets (``cl_compile.device_runner``, kept per size).
"""
from __future__ import annotations

import copy
import hashlib

import numpy as np

from ..tensor import Tensor
from ..autograd.grad_mode import GRAD
from . import logs
from .ir import Value, AttrRef, OpNode, WriteNode, SetGradNode, ReadNode, Graph, Program
from . import symbolic as S
from .symbolic import SymInt
from .runtime import Interpreter, GuardFailure
from .dynamic_capture import SymState, build_const


# ---- marks on tensors ----------------------------------------------------------------------------------------

def _dims(t, index, what):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(t).__name__}")
    idx = list(index) if isinstance(index, (list, tuple)) else [index]
    out = []
    for d in idx:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{what}: dim must be an int, got {type(d).__name__}")
        n = t._data.ndim
        if not -n <= d < n:
            raise IndexError(f"{what}: dim {d} out of range for a tensor with {n} dimension(s)")
        out.append(d % n)
    return out


def mark_dynamic(t, index, min=None, max=None):
    """Make dimension(s) ``index`` of ``t`` symbolic when a compiled function is called with it (between
    ``min`` and ``max`` inclusive when given; a size outside the range traces again)."""
    marks = t.__dict__.setdefault("_ember_dynamic", {})
    for d in _dims(t, index, "mark_dynamic"):
        marks[d] = (min, max)
        t.__dict__.setdefault("_ember_dynamic_strict", set()).add(d)
        t.__dict__.get("_ember_static", set()).discard(d)


def maybe_mark_dynamic(t, index):
    """As ``mark_dynamic``, but no error when the marked dimension ends up specialised."""
    mark_dynamic(t, index)
    strict = t.__dict__["_ember_dynamic_strict"]
    for d in _dims(t, index, "maybe_mark_dynamic"):
        strict.discard(d)


def mark_static(t, index=None):
    """Keep dimension(s) ``index`` (all when None) of ``t`` static, whatever ``dynamic=`` says."""
    dims = range(t._data.ndim) if index is None else _dims(t, index, "mark_static")
    st = t.__dict__.setdefault("_ember_static", set())
    for d in dims:
        st.add(d)
        t.__dict__.get("_ember_dynamic", {}).pop(d, None)
        t.__dict__.get("_ember_dynamic_strict", set()).discard(d)


class ConstraintViolationError(RuntimeError):
    """A dimension ``mark_dynamic`` marked was specialised to a constant by the traced code (torch's
    ``torch.fx.experimental.symbolic_shapes.ConstraintViolationError``)."""


def _pinned(name, guards, values) -> bool:
    """True when no other size of symbol ``name`` (the others kept, or all scaled alike) passes ``guards``."""
    v = values[name]
    for k in (v + 1, v - 1, 2 * v, 3 * v, v + 4, 2, 3, 64):
        if k < 2 or k == v:
            continue
        trials = [{**values, name: k}, {n: (k if n == name else max(2, x * k // v)) for n, x in values.items()}]
        if any(all(g.holds(env) for g in guards) for env in trials):
            return False
    return True


def check_constraints(fn_name, params, state, dims, paths) -> None:
    """Raise ConstraintViolationError when a ``mark_dynamic`` dimension (not ``maybe_mark_dynamic``) was
    specialised by the trace; ``params`` are the function's positional parameter names."""
    bad = []
    for t, path in paths:
        for d in sorted(t.__dict__.get("_ember_dynamic_strict", ())):
            name = dims.get((path, d))
            if name is None or name not in state.values or not _pinned(name, state.guards, state.values):
                continue
            bad.append((_source(path, params) + f".size()[{d}]", state.values[name]))
    if not bad:
        return
    where = ", ".join(src for src, _ in bad)
    lines = "".join(f"\n  - You marked {src} as dynamic but your code specialized it to be a constant ({n}). If "
                    f"you're using mark_dynamic, either remove it or use maybe_mark_dynamic." for src, n in bad)
    raise ConstraintViolationError(f"Constraints violated ({where})! For more information, run with "
                                   f"EMBER_LOGS=\"dynamic,guards\" (ember.compile({fn_name})).{lines}")


def _source(path, params) -> str:
    """``L['x']`` for argument path ``(0,)`` of ``f(x)``; nested containers add ``[i]``."""
    head, rest = path[0], path[1:]
    if head == "kw":
        head, rest = rest[0], rest[1:]
    elif isinstance(head, int) and head < len(params):
        head = params[head]
    return f"L[{head!r}]" + "".join(f"[{q!r}]" for q in rest)


# ---- which dimensions are symbolic --------------------------------------------------------------------------

def plan(dynamic, auto_dims, paths):
    """``(dims, ranges)``: (arg path, dim) -> symbol name, and symbol -> (min, max), for a call whose tensor
    arguments are ``paths`` [(tensor, path)]. Empty when nothing is dynamic."""
    dims, ranges, by_size = {}, {}, {}
    if dynamic is False:
        return dims, ranges
    for t, path in paths:
        d_ = t.__dict__
        marks = d_.get("_ember_dynamic", {})
        static = d_.get("_ember_static", ())
        for d, n in enumerate(t._data.shape):
            if d in static or n < 2:
                continue
            if not (dynamic is True or d in marks or (path, d) in auto_dims):
                continue
            name = by_size.get(n)
            if name is None:
                name = by_size[n] = f"s{len(by_size)}"
            dims[(path, d)] = name
            lo, hi = marks.get(d, (None, None))
            plo, phi = ranges.get(name, (None, None))
            ranges[name] = (_pick(lo, plo, _max), _pick(hi, phi, _min))
    return dims, ranges


def _pick(a, b, f):
    return b if a is None else a if b is None else f(a, b)


def _max(a, b):
    return a if a >= b else b


def _min(a, b):
    return a if a <= b else b


def changed_dims(sig, entries) -> set:
    """(path, dim) of the tensor arguments whose size differs from an entry traced with the same
    arguments otherwise (same paths, dtypes, ranks): what automatic dynamic makes symbolic."""
    out = set()
    for e in entries:
        if len(e.sig) != len(sig):
            continue
        diff = set()
        for (p1, k1), (p2, k2) in zip(e.sig, sig):
            if p1 != p2:
                break
            if k1 == k2:
                continue
            if not (_is_tkey(k1) and _is_tkey(k2)) or k1[1:] != k2[1:] or len(k1[0]) != len(k2[0]):
                break
            for d, (a, b) in enumerate(zip(k1[0], k2[0])):
                if a != b:
                    diff.add((p1, d))
        else:
            out |= diff
    return out


def _is_tkey(k) -> bool:
    return type(k) is tuple and len(k) in (5, 6) and type(k[0]) is tuple and hasattr(k[1], "np")


def pattern(sig, dims):
    """The call signature with each symbolic dimension's size replaced by its symbol's name."""
    if not dims:
        return sig
    out = []
    for path, key in sig:
        if _is_tkey(key) and any((path, d) in dims for d in range(len(key[0]))):
            shape = tuple(dims.get((path, d), n) for d, n in enumerate(key[0]))
            key = (shape,) + key[1:]
        out.append((path, key))
    return tuple(out)


def bind(pat, sig):
    """The symbol values under which call signature ``sig`` matches pattern ``pat``, or None."""
    if len(pat) != len(sig):
        return None
    env = {}
    for (p1, k1), (p2, k2) in zip(pat, sig):
        if p1 != p2:
            return None
        if k1 == k2:
            continue
        if not (_is_tkey(k1) and _is_tkey(k2)) or k1[1:] != k2[1:] or len(k1[0]) != len(k2[0]):
            return None
        for a, b in zip(k1[0], k2[0]):
            if type(a) is str:
                if b < 2 or env.setdefault(a, b) != b:
                    return None
            elif a != b:
                return None
    return env


# ---- evaluating a symbolic program at sizes -------------------------------------------------------------------

def instantiate(p: Program, env: dict, memo=None, keep=False) -> Program:
    """A concrete copy of symbolic program ``p`` at the symbol values ``env`` (lifted tensors, op
    definitions and guards are shared; Values, nodes and evaluated constants are new; the backward
    program shares the forward's memo, as it names forward Values). With ``keep``, sizes stay SymInts
    (valued at ``env``): the program the native code generator renders with sizes as arguments."""
    memo = {} if memo is None else memo

    def size(e):
        v = e.eval(env)
        return SymInt(v, e) if keep and e.kind != "const" else v

    def val(v):
        nv = memo.get(id(v))
        if nv is None:
            nv = memo[id(v)] = copy.copy(v)
            s = getattr(v, "sym", None)
            if s:
                nv.shape = tuple(n if e is None else size(e) for n, e in zip(v.shape, s))
                nv.sym = None
                if getattr(v, "recipe", None) is not None:
                    nv.ref = build_const(v.recipe, nv.shape, v.ref.dtype)
        return nv

    def node(n):
        m = copy.copy(n)
        t = type(n)
        if t is OpNode:
            m.inputs = [x(i) for i in n.inputs]
            m.outputs = [val(o) for o in n.outputs]
            m.attrs = {k: x(a) for k, a in n.attrs.items()}
            for k in getattr(n, "shape_attrs", ()):
                m.attrs[k] = m.outputs[0].shape
        elif t is WriteNode:
            m.target, m.source = val(n.target), val(n.source)
        elif t is SetGradNode:
            m.leaf = val(n.leaf)
            m.source = None if n.source is None else val(n.source)
        elif t is ReadNode:
            m.value = val(n.value)
            m.seen = x(n.seen)          # (a symbolic count: a boolean mask's, capture._guard_mask_counts)
        return m

    def x(a):
        t = type(a)
        if t is Value:
            return val(a)
        if t is SymInt:
            return size(a.expr)
        if t is AttrRef:
            return AttrRef(val(a.value))
        if t is tuple or t is list:
            return t(x(i) for i in a)
        if t is dict:
            return {k: x(v) for k, v in a.items()}
        if t is slice:
            return slice(x(a.start), x(a.stop), x(a.step))
        if t is Program:
            return instantiate(a, env, memo, keep)
        if t is Graph:
            return Graph([node(n) for n in a.nodes], None if a.ended_by is None else node(a.ended_by))
        if t in (OpNode, WriteNode, SetGradNode, ReadNode):
            return node(a)
        if isinstance(a, tuple):
            if hasattr(a, "_fields"):
                return type(a)(*[x(i) for i in a])
            return tuple.__new__(t, [x(i) for i in a])        # (ember.Size)
        return a

    q = copy.copy(p)
    for k, a in p.__dict__.items():
        if k in ("outputs",):
            q.outputs = _map_values(a, val)
        elif k != "sym":
            setattr(q, k, x(a))
    q.sym = None
    return q


def _map_values(struct, fn):
    from .ir import map_struct
    return map_struct(struct, lambda v: type(v) is Value, fn)


# ---- comparing a symbolic program with a real trace -----------------------------------------------------------

def fingerprint(p: Program) -> list:
    """Rows describing a concrete program completely enough that equal rows mean the same computation."""
    rows = []
    for v in p.values:
        ref = v.ref
        if v.kind == "const":
            ref = _fp(np.asarray(ref))
        elif v.kind == "lifted":
            ref = id(ref)
        rows.append(("value", v.id, v.kind, v.dtype, tuple(v.shape), v.requires_grad, _fp(ref)))
    for gi, g in enumerate(p.graphs):
        for n in g.nodes:
            t = type(n)
            if t is OpNode:
                rows.append(("op", n.op.name, _fp(n.inputs), _fp(n.attrs), tuple(o.id for o in n.outputs),
                             n.grad_enabled, n.phase, getattr(n, "view", False), getattr(n, "aliases", None)))
            elif t is WriteNode:
                rows.append(("write", n.target.id, n.source.id, getattr(n, "aliases", None)))
            elif t is SetGradNode:
                rows.append(("setgrad", n.leaf.id, None if n.source is None else n.source.id))
        e = g.ended_by
        rows.append(("break", gi) if e is None else ("break", gi, e.value.id, e.kind, _fp(e.seen), e.guard))
    rows.append(("outputs", _fp(p.outputs)))
    rows.append(("guards", tuple((d, _fp(seen)) for d, _, seen in getattr(p, "extra_guards", ()))))
    for k in ("output_aliases", "output_detached", "grad_outputs", "grad_targets", "grad_outputs_of"):
        rows.append((k, _fp(getattr(p, k, None))))
    if getattr(p, "backward", None) is not None:
        rows.append(("backward",))
        rows.extend(fingerprint(p.backward))
        rows.append(("backward outputs", _fp(p.backward.outputs)))
    return rows


def _fp(x):
    t = type(x)
    if t is Value:
        return ("%", x.id)
    if t is AttrRef:
        return ("ref", x.value.id)
    if t is np.ndarray:
        return ("array", x.shape, x.dtype.str, hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest())
    if isinstance(x, Tensor):
        return ("tensor", id(x))
    if t is tuple or t is list or isinstance(x, tuple):
        name = t.__name__ if t is list or hasattr(x, "_fields") else "tuple"     # (ember.Size is a tuple)
        return (name,) + tuple(_fp(i) for i in x)
    if t is dict:
        return ("dict",) + tuple((k, _fp(v)) for k, v in x.items())
    if t is float and x != x:
        return ("nan",)
    if t is slice:
        return ("slice", _fp(x.start), _fp(x.stop), _fp(x.step))
    if t is SymInt:
        return int(x)
    try:
        hash(x)
        return x
    except TypeError:
        return ("object", t.__name__, repr(x)[:200])


def first_difference(a: list, b: list) -> str:
    for i, (ra, rb) in enumerate(zip(a, b)):
        if ra != rb:
            return f"row {i}: {_short(ra)} vs {_short(rb)}"
    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} rows (a different number of values or nodes)"
    return ""


def _short(r):
    s = repr(r)
    return s if len(s) < 160 else s[:157] + "..."


def size_exprs(p: Program, out: set) -> set:
    """Every size expression of a symbolic program (Value shapes, SymInt attributes and inputs)."""
    for v in p.values:
        for e in getattr(v, "sym", None) or ():
            if e is not None:
                out.add(e)
    for g in p.graphs:
        for n in g.nodes:
            if type(n) is OpNode:
                for x in S.sym_leaves((n.inputs, n.attrs), []):
                    out.add(x.expr)
    if getattr(p, "backward", None) is not None:
        size_exprs(p.backward, out)
    return out


def inconclusive(sym_program: Program, env: dict) -> str:
    """A size expression with the same value at ``env`` as where it was traced (``s0 // 2 + 1`` at 10
    and 11): a size that should follow it but was taken as a constant would agree there too, so the
    comparison proves nothing about it. '' when every expression separates the two."""
    here = sym_program.sym.values
    moved = {k for k in here if env[k] != here[k]}
    for e in size_exprs(sym_program, set()):
        if e.symbols() & moved and e.eval(env) == e.eval(here):
            return f"{e!r} is {e.eval(env)} at both {fmt_env(env)} and {fmt_env(here)}"
    return ""


def verify(sym_program: Program, env: dict, reference: Program) -> str:
    """'' when the symbolic program evaluated at ``env`` equals the concrete ``reference`` trace, else
    what differs first."""
    state = sym_program.sym
    bad = [g for g in state.guards if not g.holds(env)]
    if bad:
        return f"its guard {bad[0]!r} does not hold at {fmt_env(env)}"
    ref = reference if getattr(reference, "sym", None) is None else instantiate(reference, reference.sym.values)
    return first_difference(fingerprint(instantiate(sym_program, env)), fingerprint(ref))


def fmt_env(env) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items())


# ---- running a symbolic program --------------------------------------------------------------------------------

class DynamicEntry:
    """A cache entry over many sizes: the call pattern, its symbolic program and one runner per size."""

    __slots__ = ("sig", "program", "runner", "kind", "state", "checked", "make_runner", "per_size", "seen",
                 "broken", "shared", "shared_build", "build_at_once")
    MAX_SIZES = 32

    def __init__(self, pat, program, state: SymState, make_runner, shared=None, build_at_once=False):
        self.sig = pat
        self.program = program
        self.state = state
        self.kind = "dynamic"
        self.checked: set = set()           # symbols a real trace at another value of agreed on
        self.broken = ""                    # why a replay found a size the program got wrong
        self.make_runner = make_runner      # (concrete program, native: bool) -> runner(tensors)
        self.per_size: dict = {}            # env key -> runner
        self.seen: dict = {}                # env key -> calls
        self.runner = self
        # (program, state, env) -> native_sym.SharedBuild or None: one native build for every size
        self.shared = shared
        self.shared_build = None
        # (a device program: make_runner gives its OpenCL build at the first call of a size, never the
        # interpreter, so a size seen again keeps it)
        self.build_at_once = build_at_once

    @property
    def verified(self) -> bool:
        return self.checked >= set(self.state.values)

    def needs_check(self, env) -> bool:
        """Whether ``env`` moves a symbol no real trace has checked yet (only then is a trace needed)."""
        vals = self.state.values
        return any(env[k] != vals[k] for k in vals if k not in self.checked)

    def agreed(self, env) -> None:
        vals = self.state.values
        self.checked |= {k for k in vals if env[k] != vals[k]}

    def match(self, sig):
        """The symbol values for a call, or None when its signature, ranges or guards rule it out."""
        env = bind(self.sig, sig)
        if env is None or self.broken:
            return None
        for name, (lo, hi) in self.state.ranges.items():
            v = env.get(name)
            if v is not None and (lo is not None and v < lo or hi is not None and v > hi):
                return None
        for g in self.state.guards:
            if not g.holds(env):
                logs.log("guards", f"dynamic guard {g!r} fails at {fmt_env(env)}")
                return None
        return env

    def run(self, tensors, env):
        key = tuple(env.values())
        r = self.per_size.get(key)
        n = self.seen.get(key, 0) + 1
        self.seen[key] = n
        if r is None or (n == 2 and not r[1]):
            if len(self.per_size) >= self.MAX_SIZES:
                self.per_size.pop(next(iter(self.per_size)))
            r = self._shared_runner(env)
            if r is None:
                q = instantiate(self.program, env)
                # a size seen once runs in the interpreter; seen again, it gets the native build
                native = n >= 2 or self.build_at_once
                r = (self.make_runner(q, native), native)
            self.per_size[key] = r
        try:
            return r[0](tensors)
        except ShapeMismatch as e:
            self.broken = str(e)            # never again: the caller traces this call (and sizes stay static)
            raise


    def _shared_runner(self, env):
        """(runner, True) on the entry's one native build with sizes as arguments (made on first use), or
        None where there is none (declined, or ``env`` outside its guards)."""
        if self.shared is None:
            return None
        if self.shared_build is None:
            self.shared_build = self.shared(self.program, self.state, env)
            if self.shared_build is None:
                self.shared = None
                return None
        r = self.shared_build.runner(env)
        if r is None:
            return None
        call = lambda tensors: r(tensors, GRAD[0])    # noqa: E731
        call.native = r
        return call, True


class ShapeMismatch(GuardFailure):
    """A replay of a symbolic program computed a value whose shape is not the one its formula gives."""


class CheckedInterpreter(Interpreter):
    """The interpreter for a size a dynamic entry meets the first time: after the forward, every value's
    shape must be the one the symbolic program gives (else the writes are undone and ShapeMismatch
    raised): the native build, made for a size seen again, then runs a program checked at that size."""

    def __init__(self, program):
        super().__init__(program)
        self.has_reads = True               # (so every replay keeps an undo log)

    def run_slots(self, slots, undo=None):
        super().run_slots(slots, undo)
        for v in self.program.values:
            a = slots[v.id]
            if v.kind == "node" and a is not None and tuple(a.shape) != tuple(v.shape):
                raise ShapeMismatch(f"symbolic shape {v} was {tuple(v.shape)} by its formula, "
                                    f"{tuple(a.shape)} when run")


def shared_builder(backend, name):
    """What a dynamic entry calls to make its one native build (``native_sym.SharedBuild``), or None
    for the backends that run no native code."""
    if backend != "inductor":
        return None

    def make(program, state, env):
        from .native_sym import SharedBuild
        return SharedBuild.make(program, state, name, env)
    return make


def describe(state: SymState, dims: dict) -> str:
    where = ", ".join(f"args{''.join(f'[{p!r}]' for p in path)}.size({d})={name}"
                      for (path, d), name in dims.items())
    return f"{where}; {state.describe()}"
