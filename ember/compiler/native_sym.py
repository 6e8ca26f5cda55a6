"""Native code with sizes as run-time arguments: one C build serves every size of a dynamic entry.

A trusted dynamic entry (``dynamic.py``) holds a symbolic program. ``SharedBuild.make`` runs the native
pipeline (``native.compile_programs``) on that program evaluated at a *hint* size whose sizes stay
``SymInt`` (``dynamic.instantiate(keep=True)``), so the schedule's loop extents, strides, offsets and
GEMM dimensions are SymInts, and renders it with SymInts formatted as C expressions over the symbols
(``em_s0``, ... read from an ``int64_t`` array in slot 2; see ``symbolic.c_text``). Every decision the
pipeline makes on a SymInt (a dimension of size 1 or not, two strides equal or not) is collected as a
guard (``symbolic.collect_guards``): the build is valid wherever those guards hold.

The same is done at a second hint (every symbol moved): the two C sources must be equal, and each
hint's guards must hold at the other. A size that leaked into the code as a plain number (a NumPy call
on a shape, ``range(n)``) makes the sources differ: then this entry keeps one build per size, as
before (logged under ``EMBER_LOGS=dynamic``). The source names no hint value, so the disk cache,
keyed on the source, keys on the symbolic program: a new size or a new process builds nothing.

Per size (``SharedBuild.runner(env)``, cached by the entry) the runner gets concrete copies of what
the Python side reads (buffer shapes, strided views of outputs, extern arguments), a memory plan of
the arena at those sizes (``memplan.first_fit``: its offsets follow the symbols in the sizes array),
and the sizes array itself; the C library is the one build. ``EMBER_DYNAMIC_CHECK=1`` renders the
program again at every new size and requires the same source (a test of the guards, for fuzzing).
"""
from __future__ import annotations

import copy
import dataclasses
import os

import numpy as np

from . import logs
from . import symbolic as S
from .symbolic import SymInt
from .prims import PNode, Buffer, Effect, VIEWS
from .native import Compiled, NativeRunner, compile_programs, _build_lib, Declined
from .memplan import first_fit
from .ir import ReadNode

STATS = {"shared_builds": 0, "declined": 0, "size_runners": 0}
# hint sizes: unusual values first, so a hint rarely equals a static size (which would make a guard)
_HINTS = (37, 43, 53, 29, 61, 23, 47, 59, 31, 41, 19, 17, 13, 11, 7, 5, 3, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64,
          96, 128, 100, 1000, 1024, 2048)


class SymCompiled(Compiled):
    """A Compiled whose slot 2 is the sizes array: the symbols, then the arena offsets of its temps."""

    FIRST_SLOT = 3

    def __init__(self, program, pg, sched, prefix, nsym=0):
        super().__init__(program, pg, sched, prefix)
        self.temp_index = {}
        n = nsym
        for bid in sorted(self.buffers):
            b = self.buffers[bid]
            if b.kind == "temp" and not b.escapes:
                self.temp_index[bid] = n
                n += 1
        self.nsizes = n

    def slot_expr(self, buf) -> str:
        if buf.kind == "temp" and not buf.escapes:
            return f"(char *)bufs[0] + ((const int64_t *)bufs[2])[{self.temp_index[buf.id]}]"
        return f"bufs[{self.slots[buf.id]}]"


def hint_envs(state, extra=()) -> list:
    """Two environments satisfying the entry's guards and ranges, each symbol moved between them."""
    pinned = {}                 # symbols a guard fixes (``s1 == 8``): the same value in both
    for g in state.guards:
        if (g.op == "eq") == g.result and g.op in ("eq", "ne") and {g.lhs.kind, g.rhs.kind} == {"sym", "const"}:
            x, c = (g.lhs, g.rhs) if g.lhs.kind == "sym" else (g.rhs, g.lhs)
            pinned[x.a] = c.a
    names = sorted((n for n in state.values if n not in pinned), key=S.symbol_index)
    static = state.static_sizes

    def ok(env):
        for n, (lo, hi) in state.ranges.items():
            v = env.get(n)
            if v is not None and (lo is not None and v < lo or hi is not None and v > hi):
                return False
        return all(v >= 2 for v in env.values()) and all(g.holds(env) for g in state.guards)

    found = []
    for avoid in (True, False):
        pool = [h for h in _HINTS if not (avoid and h in static)]
        for j in range(len(pool)):
            env = {**pinned, **{n: pool[(j + 5 * i) % len(pool)] for i, n in enumerate(names)}}
            if ok(env) and all(all(env[n] != f[n] for n in names) for f in found):
                found.append(env)
                if len(found) == 2:
                    return found
    for env in list(extra) + [dict(state.values)]:
        if ok(env) and all(all(env[n] != f[n] for n in names) for f in found):
            found.append(env)
            if len(found) == 2:
                return found
    return found


def _render_at(program, env, name, options):
    """(the program at hint ``env`` with SymInt sizes, its SymCompiled parts, C source, uses BLAS?, the
    code generator's guards) with sizes as arguments; raises Declined where that cannot be done."""
    from .dynamic import instantiate
    q = instantiate(program, env, keep=True)
    nsym = max(S.symbol_index(n) for n in env) + 1

    def compiled(*a):
        return SymCompiled(*a, nsym=nsym)
    with S.collect_guards() as guards, S.c_text():
        parts, src, uses_blas = compile_programs(q, name, options, cls=compiled)
    if q.backward is not None and len(parts) < 2:
        raise Declined("its backward runs in the interpreter")
    for c in parts:
        if getattr(c, "c_externs", None):
            raise Declined("a custom op's C kernel is called from the generated code")
    return q, parts, src, uses_blas, guards


def _always(g) -> bool:
    """True when guard ``g`` holds at every size >= 2 (a polynomial difference with no negative
    coefficient once each symbol is written 2 + t): such guards need no check."""
    d = S.combine("sub", g.rhs, g.lhs)
    p = S._poly(d)
    if p is None:
        return False
    # substitute s = 2 + t in every monomial and collect the coefficients over t
    out = {}
    for m, c in p.items():
        terms = {(): c}
        for x in m:
            nxt = {}
            for mm, cc in terms.items():
                nxt[mm] = nxt.get(mm, 0) + 2 * cc
                k = tuple(sorted(mm + (x,)))
                nxt[k] = nxt.get(k, 0) + cc
            terms = nxt
        for mm, cc in terms.items():
            out[mm] = out.get(mm, 0) + cc
    const = out.pop((), 0)
    nonneg = all(c >= 0 for c in out.values())
    pos = {"ge": nonneg and const >= 0, "gt": nonneg and const > 0}   # rhs - lhs >= 0 / > 0
    neg = all(c <= 0 for c in out.values())
    op, res = g.op, g.result
    if op in ("le", "lt"):           # lhs <= rhs: rhs - lhs >= 0
        holds = pos["ge"] if op == "le" else pos["gt"]
        fails = neg and (const < 0 if op == "le" else const <= 0)
    elif op in ("ge", "gt"):         # lhs >= rhs: rhs - lhs <= 0
        holds = neg and (const <= 0 if op == "ge" else const < 0)
        fails = pos["gt"] if op == "ge" else pos["ge"]
    elif op in ("eq", "ne"):
        differ = pos["gt"] or (neg and const < 0)
        holds, fails = (differ, False) if op == "ne" else (False, differ)
    else:
        return False
    return holds if res else fails


class SharedBuild:
    """One C build of a symbolic program, and the runners of each size (see the module docstring)."""

    def __init__(self, program, name, rendered, lib, guards, options):
        self.program = program          # the symbolic program
        self.name = name
        # its instance at the first hint (SymInt sizes), the SymCompiled parts, the C source
        self.q, self.parts, self.src, self.uses_blas = rendered
        self.lib, self.guards, self.options = lib, guards, options

    @staticmethod
    def make(program, state, name, env):
        """The shared build of ``program`` (a trusted entry's), or None (the reason is logged)."""
        from . import blas as _blas
        from .render_c import Options
        try:
            from .autotune import learned_defaults
            opts = Options(blas_available=_blas.blas_available(), **learned_defaults())
            envs = hint_envs(state, [env])
            if len(envs) < 2:
                raise Declined("no two sizes satisfy its guards with every symbol moved")
            q, parts, src, uses_blas, g1 = _render_at(program, envs[0], name, opts)
            _, _, src2, _, g2 = _render_at(program, envs[1], name, opts)
            if src2 != src:
                raise Declined(f"its C differs between sizes {_fmt(envs[0])} and {_fmt(envs[1])} (a size "
                               f"the code generator used as a plain number): {_first_diff(src, src2)}")
            guards = [g for g in _dedup(g1 + g2) if not _always(g)]
            for env_, other in ((envs[1], g1), (envs[0], g2)):
                bad = [g for g in other if not g.holds(env_)]
                if bad:
                    raise Declined(f"the code generator decided {bad[0]!r}, which fails at {_fmt(env_)}")
            lib = _build_lib(src, name, uses_blas)
        except Declined as d:
            STATS["declined"] += 1
            logs.log("dynamic", f"ember.compile({name}): one build per size: {d}")
            return None
        except Exception as e:         # a code generation bug must not break the user's program
            STATS["declined"] += 1
            import traceback
            logs.log("dynamic", f"ember.compile({name}): one build per size: sizes as arguments failed:\n"
                                f"{traceback.format_exc()}")
            logs.log("kernels", f"ember.compile({name}): symbolic native build failed: {type(e).__name__}: {e}")
            return None
        STATS["shared_builds"] += 1
        if logs.enabled("output_code"):
            logs.log("output_code", f"ember.compile({name}) with sizes as arguments:\n{src}")
        logs.log("dynamic", f"ember.compile({name}): one native build for every size"
                            + (f" where {'; '.join(map(repr, guards))}" if guards else ""))
        return SharedBuild(program, name, (q, parts, src, uses_blas), lib, guards, opts)

    def accepts(self, env) -> bool:
        return all(g.holds(env) for g in self.guards)

    def runner(self, env):
        """A NativeRunner for the sizes ``env`` on the shared library, or None outside the guards."""
        if not self.accepts(env):
            logs.log("dynamic", f"ember.compile({self.name}): {_fmt(env)} is outside the shared build's "
                                "guards: a build of its own")
            return None
        if os.environ.get("EMBER_DYNAMIC_CHECK", "") not in ("", "0"):
            _, _, src, _, _ = _render_at(self.program, env, self.name, self.options)
            if src != self.src:
                raise AssertionError(f"ember.compile({self.name}): the C at {_fmt(env)} differs from the "
                                     f"shared build's: {_first_diff(self.src, src)}")
        STATS["size_runners"] += 1
        sizes = [0] * (max(S.symbol_index(n) for n in env) + 1)
        for n, v in env.items():
            sizes[S.symbol_index(n)] = v
        parts = [_concrete(c, env, sizes) for c in self.parts]
        r = _SizedRunner(self.q, parts, self.lib, self.src, self.name, self.uses_blas)
        r.sym_env = env
        r.sym_program = self.program
        for b, c in zip((r.fwd, r.bwd), parts):
            if b is not None:
                b.consts.append((2, c.size_array, False))
        return r


class _SizedRunner(NativeRunner):
    """A NativeRunner over a shared build at one size (its interpreter runs the program at that size)."""

    def interp_program(self):
        from .dynamic import instantiate
        return instantiate(self.sym_program, self.sym_env)


def _dedup(guards):
    seen, out = set(), []
    for g in guards:
        if g.key() not in seen:
            seen.add(g.key())
            out.append(g)
    return out


def _fmt(env) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items())


def _first_diff(a, b) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for x, y in zip(la, lb):
        if x != y:
            return f"{x.strip()[:160]!r} vs {y.strip()[:160]!r}"
    return f"{len(la)} vs {len(lb)} lines"


# ---- the Python side at one size ---------------------------------------------------------------------------

class _Concretizer:
    """Copies of a SymCompiled's buffers, nodes and effects with every SymInt evaluated at ``env``."""

    def __init__(self, c, env, offsets):
        self.env = env
        self.mat = c.sched.mat
        self.offsets = offsets
        self.memo: dict = {}

    def val(self, x):
        t = type(x)
        if t is SymInt:
            return x.expr.eval(self.env)
        if t is tuple or t is list:
            return t(self.val(i) for i in x)
        if t is dict:
            return {k: self.val(v) for k, v in x.items()}
        if t is PNode:
            return self.node(x)
        if t is Buffer:
            return self.buf(x)
        if t is slice:
            return slice(self.val(x.start), self.val(x.stop), self.val(x.step))
        if t is ReadNode:           # a graph break: what Python read while tracing, at these sizes
            return dataclasses.replace(x, seen=self.val(x.seen))
        if isinstance(x, tuple):
            if hasattr(x, "_fields"):
                return t(*[self.val(i) for i in x])
            return tuple.__new__(t, [self.val(i) for i in x])      # (ember.Size)
        return x

    def _once(self, x, fill):
        """The copy of ``x`` (one per object), ``fill(x, copy)`` run when it is made."""
        out = self.memo.get(id(x))
        if out is None:
            out = self.memo[id(x)] = copy.copy(x)
            fill(x, out)
        return out

    def buf(self, b):
        return self._once(b, self._buf)

    def node(self, n):
        return self._once(n, self._node)

    def effect(self, e):
        return self._once(e, self._effect)

    def _buf(self, b, out):
        out.shape = self.val(b.shape)
        if b.kind == "temp" and not b.escapes:
            out.data = ("arena", self.offsets.get(b.id, 0))
        elif b.kind == "const" and b.data is not None:
            out.data = _const_at(b, out.shape)

    def _node(self, n, out):
        out.shape = self.val(n.shape)
        out.attrs = self.val(n.attrs)
        if n.buffer is not None:
            out.buffer = self.buf(n.buffer)
        if n.op in VIEWS and n.id not in self.mat:
            out.inputs = tuple(self.node(i) for i in n.inputs)

    def _effect(self, e, out):
        for k in ("buffer", "target", "source", "args", "attrs", "outs", "grad_buffer", "read_node"):
            v = getattr(e, k)
            if v is not None:
                setattr(out, k, self.val(v))


def _const_at(b, shape):
    """A baked constant at the sizes of this run: a constant built from its recipe (``tril(ones(t, t))``)
    is built again at ``shape``; others do not depend on the sizes."""
    v = b.value
    recipe = getattr(v, "recipe", None) if v is not None else None
    if recipe is None or tuple(b.data.shape) == tuple(shape):
        if tuple(b.data.shape) != tuple(shape):
            raise RuntimeError(f"ember.compile: a constant of shape {b.data.shape} where {shape} is needed")
        return b.data
    from .dynamic_capture import build_const
    return np.ascontiguousarray(build_const(recipe, shape, b.data.dtype))


def _concrete(c: SymCompiled, env, sizes):
    """A copy of ``c`` whose Python-side data is at the sizes ``env`` (what native._Bound reads), with
    ``size_array``: the symbol values, then the arena offsets of the temps."""
    order, first, last = c.sched.lifetimes
    nbytes = {bid: _ev(c.buffers[bid].nbytes, env) for bid in order}
    offsets, total = first_fit(order, first, last, nbytes)
    k = _Concretizer(c, env, offsets)
    out = copy.copy(c)
    out.buffers = {bid: k.buf(b) for bid, b in c.buffers.items()}
    pg = out.pg = copy.copy(c.pg)
    pg.inputs = {vid: k.buf(b) for vid, b in c.pg.inputs.items()}
    pg.outputs = {vid: k.node(n) for vid, n in c.pg.outputs.items()}
    pg.fwd_needed = {vid: k.node(n) for vid, n in c.pg.fwd_needed.items()}
    pg.buffers = [k.buf(b) for b in c.pg.buffers]
    sched = out.sched = copy.copy(c.sched)
    sched.node_buffer = {nid: k.buf(b) for nid, b in c.sched.node_buffer.items()}
    segs = []
    for ks, step in c.sched.segments:
        if step is not None:
            step = copy.copy(step)
            step.effect = k.effect(step.effect)
        segs.append((ks, step))
    sched.segments = segs
    sched.setgrads = [k.effect(e) for e in c.sched.setgrads]
    sched.arena_size = total
    arr = np.zeros(c.nsizes, dtype=np.int64)
    arr[:len(sizes)] = sizes
    for bid, i in c.temp_index.items():
        arr[i] = offsets.get(bid, 0)
    out.size_array = arr
    return out


def _ev(x, env):
    return x.expr.eval(env) if type(x) is SymInt else int(x)
