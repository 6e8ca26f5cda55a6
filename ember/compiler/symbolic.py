"""Symbolic sizes for ``ember.compile``'s dynamic shapes: expressions over size symbols and ``SymInt``.

A dynamic dimension of an argument is a *symbol* (``s0``, ``s1``, ...). While a trace runs, the sizes
Python reads from traced tensors (``x.shape[1]``, ``x.size(-1)``, ``len(x)``, ``x.numel()``) are
``SymInt``: ints holding the traced value, so every line of user and library code runs as usual, that
also carry an ``Expr`` over the symbols. Arithmetic on them builds expressions (``s0 // 2``,
``s0 * 64``); a Python decision on one (``s0 > 1``, ``s0 == s1``, ``s0 % 4 == 0``) becomes a *guard*,
checked before every replay.

What a SymInt cannot follow (``float(s0)``, ``s0 / 2``, ``range(s0)``: Python and NumPy read the plain
int underneath) is caught by the check in ``dynamic.verify``: a dynamic program is only trusted once it
agrees with a real trace at a second size. ``len(x)`` specialises its size (a guard ``s0 == 8``).
"""
from __future__ import annotations

import operator

GUARD_SINK = [None]        # set while a symbolic trace runs: fn(lhs Expr, op name, rhs Expr, result bool)
C_TEXT = [False]           # set while a symbolic program is rendered: a SymInt formats as its C expression


class Expr:
    """An integer expression over size symbols: ``sym`` (a name), ``const``, or an operation on two."""

    __slots__ = ("kind", "a", "b", "_h")

    def __init__(self, kind, a, b=None):
        self.kind = kind
        self.a = a
        self.b = b
        self._h = hash((kind, a, b))

    def __hash__(self):
        return self._h

    def __eq__(self, other):
        return (type(other) is Expr and self._h == other._h and self.kind == other.kind and self.a == other.a
                and self.b == other.b)

    def eval(self, env: dict) -> int:
        k = self.kind
        if k == "sym":
            return env[self.a]
        if k == "const":
            return self.a
        if k == "poly":
            total = 0
            for m, c in self.a:
                for x in m:
                    c *= env[x]
                total += c
            return total
        return _OPS[k](self.a.eval(env), self.b.eval(env))

    def symbols(self) -> set:
        if self.kind == "sym":
            return {self.a}
        if self.kind == "const":
            return set()
        if self.kind == "poly":
            return {x for m, _ in self.a for x in m}
        return self.a.symbols() | self.b.symbols()

    def __repr__(self):
        return _fmt(self, 0)


_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
        "mod": operator.mod}
_SYM = {"add": " + ", "sub": " - ", "mul": "*", "floordiv": "//", "mod": " % "}
_PREC = {"add": 1, "sub": 1, "mul": 2, "floordiv": 2, "mod": 2}


def _fmt(e: Expr, outer: int) -> str:
    if e.kind == "sym":
        return e.a
    if e.kind == "const":
        return str(e.a)
    if e.kind == "poly":
        terms = []
        for m, c in e.a:
            t = "*".join(([str(abs(c))] if abs(c) != 1 or not m else []) + list(m))
            terms.append((" - " if c < 0 else " + ") + t if terms else ("-" if c < 0 else "") + t)
        s = "".join(terms)
        m, c = e.a[0]
        product = len(e.a) == 1 and len(m) + (abs(c) != 1) > 1
        return f"({s})" if outer > 1 and (len(e.a) > 1 or c < 0) or outer > 2 and product else s
    p = _PREC[e.kind]
    s = _fmt(e.a, p) + _SYM[e.kind] + _fmt(e.b, p + 1)
    return f"({s})" if p < outer else s


_C_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "/", "mod": "%"}


def c_expr(e: Expr) -> str:
    """C text of ``e`` (int64_t arithmetic) with symbol ``sK`` read as the local ``em_sK`` (sizes are
    non-negative, so C's ``/`` and ``%`` agree with Python's ``//`` and ``%`` on them)."""
    k = e.kind
    if k == "sym":
        return "em_" + e.a
    if k == "const":
        return f"{e.a}LL" if e.a >= 0 else f"({e.a}LL)"
    if k == "poly":
        terms = []
        for m, c in e.a:
            terms.append("*".join([f"({c}LL)" if c < 0 else f"{c}LL"] + ["em_" + x for x in m]))
        return "(" + " + ".join(terms) + ")"
    return f"({c_expr(e.a)} {_C_OPS[k]} {c_expr(e.b)})"


def symbol_index(name: str) -> int:
    """Position of symbol ``sK`` in the sizes array a symbolic build reads (``K``)."""
    return int(name[1:])


class collect_guards:
    """``with collect_guards() as gs:`` the decisions Python code makes on SymInts inside become Guards
    in ``gs`` (the previous sink, such as a trace's, is set aside meanwhile)."""

    def __init__(self):
        self.guards: list = []
        self._keys: set = set()

    def _sink(self, lhs, op, rhs, result):
        g = Guard(lhs, op, rhs, result)
        if g.key() not in self._keys:
            self._keys.add(g.key())
            self.guards.append(g)

    def __enter__(self):
        self._saved = GUARD_SINK[0]
        GUARD_SINK[0] = self._sink
        return self.guards

    def __exit__(self, *exc):
        GUARD_SINK[0] = self._saved


class untracked:
    """``with untracked():`` decisions on SymInts inside record no guard (their outcome is recomputed at
    every size, e.g. the memory plan)."""

    def __enter__(self):
        self._saved = GUARD_SINK[0]
        GUARD_SINK[0] = None

    def __exit__(self, *exc):
        GUARD_SINK[0] = self._saved


class c_text:
    """``with c_text():`` SymInts format as C expressions (rendering a symbolic program)."""

    def __enter__(self):
        self._saved = C_TEXT[0]
        C_TEXT[0] = True

    def __exit__(self, *exc):
        C_TEXT[0] = self._saved


def sym(name: str) -> Expr:
    return Expr("sym", name)


def const(c: int) -> Expr:
    return Expr("const", int(c))


def _poly(e: Expr):
    """``e`` as a polynomial {monomial (sorted symbol names): coefficient}, or None (a // or % inside)."""
    k = e.kind
    if k == "const":
        return {(): e.a} if e.a else {}
    if k == "sym":
        return {(e.a,): 1}
    if k == "poly":
        return dict(e.a)
    return None


def _from_poly(p: dict) -> Expr:
    p = {m: c for m, c in p.items() if c}
    if not p:
        return const(0)
    if len(p) == 1:
        (m, c), = p.items()
        if not m:
            return const(c)
        if c == 1 and len(m) == 1:
            return sym(m[0])
    return Expr("poly", tuple(sorted(p.items(), key=lambda mc: (-len(mc[0]), mc[0]))))


def _padd(p, q, sign=1):
    out = dict(p)
    for m, c in q.items():
        out[m] = out.get(m, 0) + sign * c
    return out


def _pmul(p, q):
    out = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = tuple(sorted(m1 + m2))
            out[m] = out.get(m, 0) + c1 * c2
    return out


def _pdiv_exact(p, q):
    """p / q when q is one term c*m dividing every term of p exactly (else None)."""
    if len(q) != 1:
        return None
    (m, c), = q.items()
    out = {}
    for m1, c1 in p.items():
        rest = list(m1)
        for x in m:
            if x not in rest:
                return None
            rest.remove(x)
        if c1 % c:
            return None
        out[tuple(rest)] = c1 // c
    return out


def combine(kind: str, a: Expr, b: Expr) -> Expr:
    """``a <kind> b``, kept as a polynomial in the symbols where it is one (so ``3*s0*8 // (3*s0*2)``
    is ``4``), with exact divisions by one term done."""
    if a.kind == "const" and b.kind == "const":
        if kind in ("floordiv", "mod") and b.a == 0:
            return Expr(kind, a, b)
        return const(_OPS[kind](a.a, b.a))
    p, q = _poly(a), _poly(b)
    if p is not None and q is not None:
        if kind == "add":
            return _from_poly(_padd(p, q))
        if kind == "sub":
            return _from_poly(_padd(p, q, -1))
        if kind == "mul":
            return _from_poly(_pmul(p, q))
        d = _pdiv_exact(p, q)
        if d is not None:
            return _from_poly(d) if kind == "floordiv" else const(0)
        if kind == "floordiv" and len(p) == 1 and len(q) == 1:
            # (a*k) // (b*k) == a // b for a size product k > 0: cancel the common symbols
            (m1, c1), = p.items()
            (m2, c2), = q.items()
            rest1, rest2 = list(m1), []
            for x in m2:
                if x in rest1:
                    rest1.remove(x)
                else:
                    rest2.append(x)
            if len(rest1) < len(m1):
                return combine("floordiv", _from_poly({tuple(rest1): c1}), _from_poly({tuple(rest2): c2}))
    if kind == "floordiv" and b.kind == "const" and b.a == 1:
        return a
    return Expr(kind, a, b)


def as_expr(x):
    """The Expr of a SymInt, a constant Expr for a plain int, None for anything else."""
    if type(x) is SymInt:
        return x.expr
    if isinstance(x, int) and not isinstance(x, bool):
        return const(x)
    return None


def _guard(lhs, opname, rhs, result):
    sink = GUARD_SINK[0]
    if sink is not None:
        a, b = as_expr(lhs), as_expr(rhs)
        if a is not None and b is not None and a != b:
            sink(a, opname, b, result)
    return result


class SymInt(int):
    """An int that also remembers how it was computed from size symbols (see the module docstring)."""

    def __new__(cls, value: int, expr: Expr):
        s = int.__new__(cls, value)
        s.expr = expr
        return s

    # ---- integer arithmetic keeps the expression -----------------------------------------------------
    def _bin(self, other, kind, reverse=False):
        b = as_expr(other)
        if b is None:               # a float, a sequence repeated: the value leaves the integers
            return _OPS[kind](other, int(self)) if reverse else _OPS[kind](int(self), other)
        v = _OPS[kind](int(other), int(self)) if reverse else _OPS[kind](int(self), int(other))
        e = combine(kind, b, self.expr) if reverse else combine(kind, self.expr, b)
        return v if e.kind == "const" else SymInt(v, e)

    def __add__(self, o): return self._bin(o, "add")
    def __radd__(self, o): return self._bin(o, "add", True)
    def __sub__(self, o): return self._bin(o, "sub")
    def __rsub__(self, o): return self._bin(o, "sub", True)
    def __mul__(self, o): return self._bin(o, "mul")
    def __rmul__(self, o): return self._bin(o, "mul", True)
    def __floordiv__(self, o): return self._bin(o, "floordiv")
    def __rfloordiv__(self, o): return self._bin(o, "floordiv", True)
    def __mod__(self, o): return self._bin(o, "mod")
    def __rmod__(self, o): return self._bin(o, "mod", True)

    def __divmod__(self, o):
        return self // o, self % o

    def __rdivmod__(self, o):
        return o // self, o % self

    def __neg__(self):
        return SymInt(-int(self), combine("mul", const(-1), self.expr))

    def __pos__(self):
        return self

    def __abs__(self):
        return self if _guard(self, "ge", 0, int(self) >= 0) else -self

    # ---- leaving the integers: plain values (not followed; ``dynamic.verify`` sees what they change) ----
    def __truediv__(self, o):
        return int(self) / o

    def __rtruediv__(self, o):
        return o / int(self)

    def __pow__(self, o, mod=None):
        return pow(int(self), o, mod)

    def __rpow__(self, o):
        return pow(o, int(self))

    # ---- decisions become guards ---------------------------------------------------------------------
    def __eq__(self, o):
        if not isinstance(o, int):
            return NotImplemented
        return _guard(self, "eq", o, int(self) == int(o))

    def __ne__(self, o):
        if not isinstance(o, int):
            return NotImplemented
        return _guard(self, "ne", o, int(self) != int(o))

    def __lt__(self, o):
        if not isinstance(o, int):
            return int(self) < o
        return _guard(self, "lt", o, int(self) < int(o))

    def __le__(self, o):
        if not isinstance(o, int):
            return int(self) <= o
        return _guard(self, "le", o, int(self) <= int(o))

    def __gt__(self, o):
        if not isinstance(o, int):
            return int(self) > o
        return _guard(self, "gt", o, int(self) > int(o))

    def __ge__(self, o):
        if not isinstance(o, int):
            return int(self) >= o
        return _guard(self, "ge", o, int(self) >= int(o))

    def __bool__(self):
        return _guard(self, "ne", 0, int(self) != 0)

    __hash__ = int.__hash__

    def __repr__(self):
        return int.__repr__(self)

    def __str__(self):
        return f"({c_expr(self.expr)})*1" if C_TEXT[0] else int.__repr__(self)

    def __format__(self, spec):
        # ``(expr)*1``: valid C wherever an integer literal is, also with a suffix (``{n}LL``)
        if C_TEXT[0] and not spec:
            return f"({c_expr(self.expr)})*1"
        return int.__format__(self, spec)

    def __reduce__(self):
        return (int, (int(self),))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


from ..ops import _util as _ops_util
_ops_util.INT_TYPES.add(SymInt)


def specialise(s) -> None:
    """A SymInt used where its expression cannot follow (a float, a power): guard on its value."""
    if type(s) is SymInt:
        _guard(s, "eq", int(s), True)


_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
        "ge": operator.ge}
_CMP_SYM = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class Guard:
    """``lhs <op> rhs`` had the value ``result`` while tracing; a replay needs the same value."""

    __slots__ = ("lhs", "op", "rhs", "result")

    def __init__(self, lhs, op, rhs, result):
        self.lhs, self.op, self.rhs, self.result = lhs, op, rhs, bool(result)

    def holds(self, env) -> bool:
        try:
            return _CMP[self.op](self.lhs.eval(env), self.rhs.eval(env)) == self.result
        except ZeroDivisionError:
            return False

    def key(self):
        return (self.lhs, self.op, self.rhs, self.result)

    def __repr__(self):
        s = f"{self.lhs!r} {_CMP_SYM[self.op]} {self.rhs!r}"
        return s if self.result else f"not ({s})"


def sym_leaves(x, out):
    """Collect the SymInts in a nested structure."""
    t = type(x)
    if t is SymInt:
        out.append(x)
    elif t is tuple or t is list or isinstance(x, tuple):
        for i in x:
            sym_leaves(i, out)
    elif t is dict:
        for v in x.values():
            sym_leaves(v, out)
    elif t is slice:
        sym_leaves((x.start, x.stop, x.step), out)
    return out
