"""Index arithmetic for lowering: affine forms over loop variables, and views as index maps.

A kernel loops over a domain with one variable per dimension (``i0``, ``i1`` ...). Every element it
reads or writes is addressed by an *affine form* ``sum(coef * atom) + const`` whose atoms are loop
variables or, where a reshape cannot be expressed affinely, opaque ``(form / D)`` / ``(form % S)``
atoms (their ranges are known, so later simplifications still see through them). Views
(``reshape``/``permute``/``expand``/``slice``, see ``prims.py``) are maps from an output index vector
to an input index vector; composing them down to a buffer gives the buffer offset of each access.
The scheduler compares these offsets to decide whether statements can share a loop (same offset on
the same buffer, or no shared buffer), and the renderer prints them.
"""
from __future__ import annotations

from .symbolic import SymInt

VIEWS = ("reshape", "permute", "expand", "slice")      # the view primitives (see prims.py)


class Aff:
    """``sum(coef * atom) + const`` with integer coefficients; atoms are hashable (str or tuples)."""

    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const: int = 0):
        self.terms = terms if terms is not None else {}
        self.const = const if type(const) is SymInt else int(const)

    @staticmethod
    def var(atom) -> "Aff":
        return Aff({atom: 1}, 0)

    @staticmethod
    def k(c: int) -> "Aff":
        return Aff({}, c)

    def __add__(self, other: "Aff") -> "Aff":
        t = dict(self.terms)
        for a, c in other.terms.items():
            v = t.get(a, 0) + c
            if v:
                t[a] = v
            else:
                t.pop(a, None)
        return Aff(t, self.const + other.const)

    def scale(self, k: int) -> "Aff":
        if k == 0:
            return Aff()
        return Aff({a: c * k for a, c in self.terms.items()}, self.const * k)

    def shift(self, k: int) -> "Aff":
        return Aff(dict(self.terms), self.const + k)

    def is_const(self) -> bool:
        return not self.terms

    def key(self) -> tuple:
        return (tuple(sorted(self.terms.items(), key=lambda kv: repr(kv[0]))), self.const)

    def atoms(self):
        return self.terms.keys()

    def __eq__(self, other):
        return isinstance(other, Aff) and self.terms == other.terms and self.const == other.const

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"Aff({render(self, str)})"


def atom_range(atom, ranges: dict) -> tuple:
    """(lo, hi) inclusive of an atom."""
    r = ranges.get(atom)
    if r is not None:
        return r
    if isinstance(atom, tuple):
        kind = atom[0]
        if kind == "mod":
            return (0, atom[2] - 1)
        if kind == "div":
            lo, hi = bounds(_from_key(atom[1]), ranges)
            return (lo // atom[2], hi // atom[2])
        if kind == "val":
            return (0, atom[2] - 1)
    raise KeyError(f"no range for index atom {atom!r}")


def bounds(a: Aff, ranges: dict) -> tuple:
    lo = hi = a.const
    for atom, c in a.terms.items():
        alo, ahi = atom_range(atom, ranges)
        if c > 0:
            lo += c * alo
            hi += c * ahi
        else:
            lo += c * ahi
            hi += c * alo
    return lo, hi


def _from_key(key) -> Aff:
    terms, const = key
    return Aff(dict(terms), const)


def floordiv(a: Aff, d: int, ranges: dict) -> Aff:
    """``a // d`` for a non-negative form, simplified when the low part cannot carry."""
    if d == 1:
        return a
    hi_terms, lo_terms = {}, {}
    for atom, c in a.terms.items():
        if c % d == 0:
            hi_terms[atom] = c // d
        else:
            lo_terms[atom] = c
    q, r = divmod(a.const, d)
    low = Aff(lo_terms, r)
    lo, hi = bounds(low, ranges)
    if 0 <= lo and hi < d:
        return Aff(hi_terms, q)
    if not lo_terms and not hi_terms:
        return Aff({}, a.const // d)
    return Aff.var(_div_atom(a.key(), d))


def mod(a: Aff, s: int, ranges: dict) -> Aff:
    """``a % s`` for a non-negative form, simplified where terms vanish or cannot wrap."""
    if s == 1:
        return Aff()
    terms = {atom: c for atom, c in a.terms.items() if c % s != 0}
    b = Aff(terms, a.const)
    lo, hi = bounds(b, ranges)
    if lo >= 0:
        if hi < s:
            return b
        b1 = Aff(terms, a.const % s)
        lo1, hi1 = bounds(b1, ranges)
        if lo1 >= 0 and hi1 < s:
            return b1
        return Aff.var(("mod", b.key(), s))
    # dropping multiples of s would leave a form that may be negative (C's % differs there)
    return Aff.var(("mod", a.key(), s))


def cstrides(shape) -> tuple:
    st = []
    acc = 1
    for n in reversed(shape):
        st.append(acc)
        acc *= n
    return tuple(reversed(st))


def offset(idx: list, strides) -> Aff:
    out = Aff()
    for a, s in zip(idx, strides):
        if s and not (a.is_const() and a.const == 0):
            out = out + a.scale(s)
    return _merge_divmod(out)


def _div_atom(key, d):
    """The atom of ``form // d``, a division of a division folded into one (``(L / c) / d = L / (c d)``)."""
    inner = _from_key(key)
    if inner.const == 0 and len(inner.terms) == 1:
        (atom, c), = inner.terms.items()
        if c == 1 and isinstance(atom, tuple) and atom[0] == "div":
            return ("div", atom[1], atom[2] * d)
    return ("div", key, d)


def _merge_divmod(a: Aff) -> Aff:
    """Fold ``c*d*(L / d) + c*(L % d)`` into ``c*L`` (C's ``/`` and ``%`` satisfy ``(L/d)*d + L%d == L``):
    a reshape that splits a dim and a view that merges it back address memory affinely again, so a
    transpose of a reshaped tensor stays a strided view (BLAS reads it in place) instead of a copy."""
    while True:
        for atom, cm in a.terms.items():
            if not (isinstance(atom, tuple) and atom[0] == "mod"):
                continue
            d = atom[2]
            datom = _div_atom(atom[1], d)
            if a.terms.get(datom) == cm * d:
                t = dict(a.terms)
                del t[atom]
                del t[datom]
                a = Aff(t, a.const) + _from_key(atom[1]).scale(cm)
                break
        else:
            return a


def reshape_index(in_shape, out_shape, idx: list, ranges: dict) -> list:
    """Input index vector of a row-major reshape, from the output index vector."""
    in_idx = [Aff() for _ in in_shape]
    if 0 in in_shape or 0 in out_shape:
        return in_idx
    odims = [d for d, n in enumerate(out_shape) if n != 1]
    idims = [d for d, n in enumerate(in_shape) if n != 1]
    i = j = 0
    while i < len(odims) and j < len(idims):
        # the smallest pair of dim groups covering the same number of elements
        go, gi = [odims[i]], [idims[j]]
        po, pi = out_shape[odims[i]], in_shape[idims[j]]
        i += 1
        j += 1
        while po != pi:
            if po < pi:
                go.append(odims[i]); po *= out_shape[odims[i]]; i += 1
            else:
                gi.append(idims[j]); pi *= in_shape[idims[j]]; j += 1
        if len(go) == 1 and len(gi) == 1:
            in_idx[gi[0]] = idx[go[0]]
            continue
        lin = Aff()
        acc = 1
        for d in reversed(go):
            lin = lin + idx[d].scale(acc)
            acc *= out_shape[d]
        acc = 1
        for d in reversed(gi):
            n = in_shape[d]
            in_idx[d] = mod(floordiv(lin, acc, ranges), n, ranges)
            acc *= n
    return in_idx


def view_index(node, idx: list, ranges: dict, stop=None):
    """Walk views from ``node`` down to a non-view node, or to one where ``stop(node)`` holds (a
    materialised view): (that node, its index vector)."""
    while node.op in VIEWS:
        src = node.inputs[0]
        if node.op == "permute":
            new = [None] * len(idx)
            for d, a in enumerate(node.attrs["axes"]):
                new[a] = idx[d]
            idx = new
        elif node.op == "expand":
            idx = [a if src.shape[d] == node.shape[d] else Aff() for d, a in enumerate(idx)]
        elif node.op == "slice":
            starts, steps = node.attrs["starts"], node.attrs["steps"]
            idx = [a.scale(st).shift(s0) if (st != 1 or s0) else a
                   for a, s0, st in zip(idx, starts, steps)]
        else:
            idx = reshape_index(src.shape, node.shape, idx, ranges)
        node = src
        if stop is not None and stop(node):
            break
    return node, idx


def render(a: Aff, name_of) -> str:
    """C text of a form; ``name_of(atom)`` renders a loop-variable atom."""
    parts = []
    for atom, c in sorted(a.terms.items(), key=lambda kv: repr(kv[0])):
        s = render_atom(atom, name_of)
        parts.append(s if c == 1 else f"{c}*{s}" if c > 0 else f"({c})*{s}")
    if a.const or not parts:
        parts.append(str(a.const) if a.const >= 0 or not parts else f"({a.const})")
    return " + ".join(parts)


def render_atom(atom, name_of) -> str:
    if isinstance(atom, tuple):
        kind = atom[0]
        if kind == "div":
            return f"(({render(_from_key(atom[1]), name_of)}) / {atom[2]})"
        if kind == "mod":
            return f"(({render(_from_key(atom[1]), name_of)}) % {atom[2]})"
        if kind == "val":
            return atom[1]
    return name_of(atom)


def atom_vars(atom) -> set:
    """Loop variables an atom depends on."""
    if isinstance(atom, tuple):
        if atom[0] in ("div", "mod"):
            out = set()
            for a in dict(atom[1][0]):
                out |= atom_vars(a)
            return out
        if atom[0] == "val":
            return set(atom[3]) if len(atom) > 3 else set()
        return set()
    return {atom}


def aff_vars(a: Aff) -> set:
    out = set()
    for atom in a.terms:
        out |= atom_vars(atom)
    return out


# ---- layouts of views over buffers -------------------------------------------------------------------------

def view_root(n, mat=()):
    """The node under a chain of views (stopping at a materialised view)."""
    while n.op in VIEWS and n.id not in mat:
        n = n.inputs[0]
    return n


def strided_layout(n, is_leaf):
    """(leaf, strides, offset) when ``n`` is a strided view of a leaf (load or materialised node)."""
    if is_leaf(n):
        return n, cstrides(n.shape), 0
    vars_ = [f"_d{i}" for i in range(len(n.shape))]
    ranges = {v: (0, max(s - 1, 0)) for v, s in zip(vars_, n.shape)}
    idx = [Aff.var(v) if s > 1 else Aff() for v, s in zip(vars_, n.shape)]
    leaf, lidx = view_index(n, idx, ranges, stop=is_leaf)
    if not is_leaf(leaf):
        return None
    off = offset(lidx, cstrides(leaf.shape))
    for a in off.terms:
        if not isinstance(a, str):
            return None
    strides = tuple(off.terms.get(v, 0) for v in vars_)
    return leaf, strides, off.const


def gemm_operand(s0, s1, rows, cols):
    """(transpose flag, leading dim) to pass a (rows x cols) matrix with element strides (s0, s1) to a
    row-major cblas call, or None when BLAS cannot read that layout in place."""
    if (s1 == 1 or cols == 1) and (rows == 1 or s0 >= max(cols, 1)):
        return "CblasNoTrans", (s0 if rows > 1 else max(cols, 1))
    if (s0 == 1 or rows == 1) and (cols == 1 or s1 >= max(rows, 1)):
        return "CblasTrans", (s1 if cols > 1 else max(rows, 1))
    return None


