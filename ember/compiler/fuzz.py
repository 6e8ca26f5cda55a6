"""A compile fuzzer: random small programs run eagerly and through ``ember.compile``, compared.

A :class:`Program` is data: input specs (shape, dtype, requires_grad, index bound, non-contiguous) and a
list of :class:`Step` s, each one Python statement over named values (``v3 = ember.matmul(v1, x2)``, or
an in-place statement ``v3.add_(x4)``). ``program.source()`` is the function as text; running a program
executes that same text, and :func:`repro` prints it as a standalone script, so what fails is exactly
what is printed.

The generator (:func:`generate`) tracks shapes, dtypes, value magnitudes, aliasing and which values are
"exact" (computed only with correctly rounded IEEE operations, so eager and compiled code agree bit for
bit, which is what comparisons, casts to int, floor and argmax may read) while it builds a program, and
runs every step on sample values as it goes, so every program it returns is well typed and runs eagerly
forward and backward. It covers elementwise chains with broadcasting (diamonds included), reductions over
random dims with and without keepdim, views (transpose, permute, slices, select, expand, reshape,
squeeze/unsqueeze, flip, repeat, pad) feeding matmuls, einsum and linear layers (often with an operand the
BLAS cannot read in place), softmax, log_softmax, layer_norm, losses, casts and comparisons, indexing
(index tensors, index_select, gather, embedding, constant index lists, masked_fill, boolean masks),
in-place ops and slice assignment on intermediates and on arguments, graph breaks (a branch on a value,
``float(t)``), float32, float64, int32 and int64, non-contiguous arguments, sizes including 0, 1 and odd
SIMD tails (7, 9, 17, 33), and now and then sizes past the generated code's thresholds (a 1M+
multiply-add float32 GEMM, 64K+ element loops).

:func:`check` runs a program eagerly and compiled on the first call (the capture) and on replays with new
values of the same shapes, computes the gradients of every input that requires grad through a random
cotangent, and compares outputs, gradients and the arguments after the call with a tolerance that
respects the dtype (:func:`compare`: integers and booleans exactly, NaN and inf positions equal, floats
relative to the roughest dtype the value went through, growing with its accumulation length).
:func:`minimise` greedily drops programs of a batch, outputs and steps, turns values into inputs, bypasses
steps, shrinks sizes and drops requires_grad while the program still differs. Command line::

    python -m ember.compiler.fuzz --seed 7 --count 200          # fuzz, print minimised repros
    python -m ember.compiler.fuzz --seed 7 --only 12 --show      # program 12 of seed 7, checked alone
    python -m ember.compiler.fuzz --seed 7 --count 600 --opt=-O0 # more programs per minute

Several programs are compiled together as one function (``batch``): their inputs are disjoint so the
results are independent, and one C build serves them all (the C build dominates the cost). A batch that
differs is split; each differing program is minimised on its own, or the batch when only the batch
differs (a memory-planning bug needs the other programs' temporaries).

It found bug 1 (issue 9): on the tree before the fix (8cdc8ab; fixed in c988420), every one of seeds 0-3
x 90 programs had 1-3 differing batches, minimised to repros such as::

    def f(x2, x3):                         # x2 (2, 2, 2) float32, x3 (2, 2, 2) float32 requiring grad
        v4 = x2.permute(2, 0, 1)
        v5 = x3 @ v4
        v6 = v5.mean(dim=(-3, 1))
        return (v6, )                      # x3.grad wrong from the second call on

    def f(p2_x2, p5_x1, x4, x5):           # x5 (4,) float64 requiring grad
        p2_v3 = p2_x2.expand(5, 4, 7)
        p2_v4 = x5 @ p2_v3
        p5_v3 = p5_x1.permute(2, 0, 1)
        p5_v5 = p5_v3 @ x4
        return (p2_v4, p5_v5, )

(a GEMM operand the BLAS cannot read in place is laid out in an arena buffer; when the backward reads
it, a later temporary of the forward had reused that buffer). Known exclusions (compiled-vs-eager
differences the generator avoids, each with the reason and a repro) are listed in ``EXCLUDED``.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import random
import re
import sys
import time
import warnings
import zlib

import numpy as np

# ---- the harness: shared, as text, by the runner and the printed repros -----------------------------------

HARNESS = '''\
import numpy as np
import ember
import ember.nn.functional as F


def make_inputs(specs, seed, call, upcast=False):
    """Fresh inputs for one call: floats N(0, 1), integers in [-4, 4], index tensors in [0, bound);
    ``transposed``: stored with the dimensions reversed (a non-contiguous argument); ``upcast``: floats
    as float64 (the same values)."""
    r = np.random.default_rng([seed, call])
    xs = []
    for shape, dtype, grad, bound, transposed in specs:
        if bound is not None:
            a = r.integers(0, max(bound, 1), shape)
        elif dtype.startswith("float"):
            a = r.standard_normal(shape)
        else:
            a = r.integers(-4, 5, shape)
        a = np.asarray(a).astype(dtype)
        if upcast and dtype.startswith("float"):
            a = a.astype(np.float64)
        if transposed:
            a = np.ascontiguousarray(a.T).T
        t = ember.from_numpy(a)
        xs.append(t.requires_grad_() if grad else t)
    return xs, r


def run(g, specs, seed, call, upcast=False):
    """g's outputs, the inputs' gradients through a random cotangent and the inputs' values after the call
    (as NumPy arrays)."""
    xs, r = make_inputs(specs, seed, call, upcast)
    outs = g(*xs)
    diff = [o for o in outs if o.requires_grad]
    if diff:
        cots = [ember.from_numpy(r.standard_normal(tuple(o.shape)).astype(o.detach().numpy().dtype)) for o in diff]
        ember.autograd.backward(diff, cots)
    return ([o.detach().numpy().copy() for o in outs],
            [None if x.grad is None else x.grad.numpy().copy() for x in xs],
            [x.detach().numpy().copy() for x in xs])
'''

_H: dict = {}
exec(compile(HARNESS, "<ember.compiler.fuzz harness>", "exec"), _H)

# Differences the generator does not produce, with the reason (kept empty when nothing is excluded).
EXCLUDED: dict = {}

FLOATS = ("float32", "float64")
INTS = ("int64", "int32")
_SIZES = [0] * 2 + [1] * 8 + [2] * 8 + [3] * 10 + [4] * 6 + [5] * 6 + [6] * 3 + [7] * 4 + [8] * 3 + [9] * 3 \
    + [15] * 2 + [16] * 2 + [17] * 3 + [31] + [33] * 2
MAX_NUMEL = 2048
_DYADIC = ("0.5", "2.0", "1.5", "-3.0", "0.25", "-1.0")


# ---- programs -----------------------------------------------------------------------------------------------

class Step:
    """One statement: ``out = template.format(*args)``, or the bare statement when ``out`` is None."""
    __slots__ = ("out", "template", "args", "op")

    def __init__(self, out, template, args, op):
        self.out, self.template, self.args, self.op = out, template, tuple(args), op

    def line(self) -> str:
        text = self.template.format(*self.args)
        return text if self.out is None else f"{self.out} = {text}"


class Program:
    """Inputs ``[(name, shape, dtype, requires_grad, bound, transposed)]`` (``bound``: an index tensor's
    values are below it; ``transposed``: a non-contiguous argument), steps, output names and tolerances."""

    def __init__(self, inputs, steps, outputs, acc=1, seed=None, tol=None):
        self.inputs = [(tuple(i) + (False,))[:6] if len(i) == 5 else tuple(i) for i in inputs]
        self.steps = list(steps)
        self.outputs = list(outputs)
        self.acc = acc          # the longest accumulation (reduction or contraction length) in the program
        self.seed = seed
        # name -> (dtype whose rounding the value went through, accumulation length) for outputs and the
        # gradients of inputs; others use their own dtype and ``acc``
        self.tol = dict(tol or {})

    def specs(self):
        return [(tuple(s), d, g, b, t) for _, s, d, g, b, t in self.inputs]

    def source(self, name="f") -> str:
        lines = [f"def {name}({', '.join(i[0] for i in self.inputs)}):"]
        lines += ["    " + s.line() for s in self.steps]
        lines.append(f"    return ({''.join(o + ', ' for o in self.outputs)})")
        return "\n".join(lines) + "\n"

    def function(self, name="f"):
        ns = dict(_H)
        exec(compile(self.source(name), f"<fuzz program {self.seed}>", "exec"), ns)
        return ns[name]

    def copy(self, **kw):
        p = Program(self.inputs, self.steps, self.outputs, self.acc, self.seed, self.tol)
        for k, v in kw.items():
            setattr(p, k, v)
        return p

    def renamed(self, prefix):
        m = {i[0]: prefix + i[0] for i in self.inputs}
        m.update({s.out: prefix + s.out for s in self.steps if s.out is not None})
        return Program([(m[n],) + tuple(rest) for n, *rest in self.inputs],
                       [Step(None if s.out is None else m[s.out], s.template, [m[a] for a in s.args], s.op)
                        for s in self.steps], [m[o] for o in self.outputs], self.acc, self.seed,
                       {m[k]: v for k, v in self.tol.items() if k in m})

    def __len__(self):
        return len(self.steps)


def combine(programs):
    """One program computing all of ``programs`` side by side (disjoint inputs and values)."""
    ins, steps, outs, tol = [], [], [], {}
    for k, p in enumerate(programs):
        q = p.renamed(f"p{k}_")
        ins += q.inputs
        steps += q.steps
        outs += q.outputs
        tol.update({n: q.tol.get(n, ("float64", q.acc)) for n in [i[0] for i in q.inputs] + q.outputs})
    return Program(ins, steps, outs, max([p.acc for p in programs] + [1]), [p.seed for p in programs], tol)


# ---- the generator -------------------------------------------------------------------------------------------

class V:
    """What the generator knows about a named value."""
    __slots__ = ("name", "shape", "dtype", "rg", "mag", "exact", "acc", "root", "saves", "consumed", "overlap",
                 "is_input", "prec")

    def __init__(self, name, shape, dtype, rg, mag, exact, acc, root, saves, overlap, is_input):
        self.name, self.shape, self.dtype, self.rg, self.mag = name, tuple(shape), dtype, rg, mag
        self.exact, self.acc, self.root, self.saves, self.overlap = exact, acc, root, saves, overlap
        self.is_input = is_input
        self.consumed = False
        self.prec = "float32" if dtype == "float32" else "float64"   # the roughest rounding in its history

    @property
    def isfloat(self):
        return self.dtype in FLOATS

    @property
    def isint(self):
        return self.dtype in INTS

    @property
    def numel(self):
        return math.prod(self.shape)


def _dt(t) -> str:
    return str(t.dtype).replace("ember.", "")


def _mag(t) -> float:
    a = t.detach().numpy()
    if a.size == 0 or a.dtype == np.bool_:
        return 1.0
    a = np.abs(a.astype(np.float64))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 1.0


def _idx(d, text):
    """Index text selecting ``text`` in dimension ``d``: ``[:, :, text]``."""
    return "[" + ", ".join([":"] * d + [text]) + "]"


def _tup(xs):
    xs = tuple(xs)
    return f"({xs[0]},)" if len(xs) == 1 else "(" + ", ".join(map(str, xs)) + ")"


def _bshape(s, t):
    """The broadcast shape of s and t (None when they do not broadcast)."""
    n = max(len(s), len(t))
    s, t = (1,) * (n - len(s)) + tuple(s), (1,) * (n - len(t)) + tuple(t)
    out = []
    for a, b in zip(s, t):
        if a != b and a != 1 and b != 1:
            return None
        out.append(b if a == 1 else a)
    return tuple(out)


def _broadcasts(s, t):
    return _bshape(s, t) is not None


class GenerationError(Exception):
    pass


class Generator:
    """Builds one random well-typed program from a seed (``Generator(seed).build()``; see :func:`generate`)."""

    def __init__(self, seed, max_steps=8):
        self.seed = seed
        self.r = random.Random(seed)
        self.np = np.random.default_rng([zlib.crc32(repr(seed).encode())])
        self.max_steps = max_steps
        self.inputs = []
        self.steps = []
        self.vals: dict = {}
        self.env = dict(_H)
        self.nv = 0
        self.focus = None       # the value the next op should use, when it can
        self.bounds = {}        # input name -> index bound (None: not an index tensor)

    # -- choices
    def size(self, allow0=True, lo=0):
        while True:
            s = self.r.choice(_SIZES)
            if (s or allow0) and s >= lo:
                return s

    def shape(self, ndim=None, allow0=True):
        for _ in range(20):
            nd = self.r.choice([0, 1, 1, 2, 2, 2, 3, 3, 4]) if ndim is None else ndim
            s = tuple(self.size(allow0) for _ in range(nd))
            if math.prod(s) <= MAX_NUMEL // 4:
                return s
        return tuple(1 for _ in range(nd))

    def dtype(self):
        return self.r.choices(["float32", "float64", "int64", "int32"], [60, 18, 14, 8])[0]

    def pick(self, pred=lambda v: True, fresh_bias=0.7):
        focus, self.focus = self.focus, None
        if focus is not None and pred(focus):
            return focus
        cands = [v for v in self.vals.values() if pred(v)]
        if not cands:
            return None
        recent = [v for v in cands if not v.consumed and not v.is_input]
        if recent and self.r.random() < fresh_bias:
            return recent[-1] if self.r.random() < 0.6 else self.r.choice(recent)
        return self.r.choice(cands)

    # -- values
    def _input(self, shape, dtype, grad=None, bound=None):
        name = f"x{len(self.inputs)}"
        if grad is None:
            grad = dtype in FLOATS and self.r.random() < 0.85
        grad = bool(grad and dtype in FLOATS)
        tr = len(shape) >= 2 and self.r.random() < 0.1
        self.inputs.append((name, tuple(shape), dtype, grad, bound, tr))
        self.bounds[name] = bound
        xs, _ = _H["make_inputs"]([(tuple(shape), dtype, grad, bound, tr)], self.np.integers(1 << 30), 0)
        self.env[name] = xs[0]
        mag = 4.0 if dtype in FLOATS else float(max(bound or 0, 4))
        v = V(name, shape, dtype, grad, mag, True, 1, name, False, False, True)
        self.vals[name] = v
        return v

    def step(self, template, args, op, *, view=False, saves=False, exact=None, acc=None, overlap=False,
             inplace=False):
        """Run one statement on the sample values and record it; None (nothing recorded) if it raises.
        ``view``: the result aliases args[0]; ``saves``: its producer keeps it for backward (no in-place
        write may follow); ``exact``: computed with correctly rounded operations only (default: when
        all arguments are); ``acc``: the accumulation length it adds; ``inplace``: a statement writing
        args[0]."""
        names = [a.name for a in args]
        out = None if inplace else f"v{self.nv + 1}"
        st = Step(out, template, names, op)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(st.line(), self.env)
        except Exception as e:
            if inplace:     # a failed in-place statement may have written part of its target: give up
                raise GenerationError(f"{st.line()}: {e}")
            return None
        for a in args if not view else ():
            self.vals[a.root].consumed = True
            a.consumed = True
        if view:
            args[0].consumed = True
        if exact is None:
            exact = all(a.exact for a in args)
        acc = max([a.acc for a in args] + [1]) * (acc or 1)
        prec = "float32" if any(a.prec == "float32" for a in args) else "float64"
        if inplace:
            tgt = args[0]
            for v in self.vals.values():
                if v.root == tgt.root:
                    v.prec = "float32" if prec == "float32" or v.prec == "float32" else v.prec
                    v.mag = _mag(self.env[v.name])
                    v.exact = v.exact and exact
                    v.acc = max(v.acc, acc)
                    v.saves = v.saves or saves
                    v.rg = bool(self.env[v.name].requires_grad)
            self.steps.append(st)
            return tgt
        self.nv += 1
        t = self.env[out]
        root = args[0].root if view else out
        v = V(out, tuple(t.shape), _dt(t), bool(t.requires_grad), _mag(t), exact, acc, root, saves,
              overlap or (view and args[0].overlap), False)
        if prec == "float32":
            v.prec = prec
        self.vals[out] = v
        self.steps.append(st)
        return v

    def materialize(self, shape, dtype, grad=None, strided=False):
        """A new input of ``shape``, sometimes (``strided``: always, where the shape allows) reached through
        a permute/transpose, a slice or an expand of a differently shaped input (operands with strides)."""
        shape = tuple(shape)
        nd = len(shape)
        k = self.r.random() * (0.55 if strided else 1.0)
        if nd >= 2 and k < 0.25:
            if self.r.random() < 0.5:
                p = list(range(nd))
                self.r.shuffle(p)
                src = [0] * nd
                for i, j in enumerate(p):
                    src[j] = shape[i]
                x = self._input(src, dtype, grad)
                return self.step("{0}.permute" + _tup(p), [x], "permute", view=True) or x
            i, j = self.r.sample(range(nd), 2)
            src = list(shape)
            src[i], src[j] = src[j], src[i]
            x = self._input(src, dtype, grad)
            if nd == 2 and self.r.random() < 0.5:
                return self.step(self.r.choice(["{0}.t()", "{0}.mT", "{0}.T"]), [x], "transpose", view=True) or x
            return self.step(f"{{0}}.transpose({i}, {j})", [x], "transpose", view=True) or x
        if nd >= 1 and k < 0.42:
            d = self.r.randrange(nd)
            n = shape[d]
            stp = self.r.choice([1, 1, 2, 3])
            start = self.r.choice([0, 1, 2])
            src = list(shape)
            src[d] = start + max(n * stp, 1) + self.r.choice([0, 0, 1, 2])
            if math.prod(src) > MAX_NUMEL:
                return self._input(shape, dtype, grad)
            x = self._input(src, dtype, grad)
            stop = start + n * stp
            text = f"{start}:{stop}" + (f":{stp}" if stp != 1 else "")
            if self.r.random() < 0.3 and stop - src[d] < 0:
                text = f"{start}:{stop - src[d]}" + (f":{stp}" if stp != 1 else "")
            return self.step("{0}" + _idx(d, text), [x], "slice", view=True) or x
        if nd >= 1 and k < 0.55:
            src = [s if self.r.random() < 0.5 else 1 for s in shape]
            lead = self.r.randrange(0, nd + 1) if self.r.random() < 0.3 else 0
            src = src[lead:]
            x = self._input(src, dtype, grad)
            if tuple(src) == shape:
                return x
            return self.step("{0}.expand" + _tup(shape), [x], "expand", view=True, overlap=True) or x
        return self._input(shape, dtype, grad)

    def gemm_operand(self, shape, dtype):
        """A new GEMM operand whose layout the BLAS cannot read in place (no unit stride in either matrix
        dimension), so the compiled code lays it out in a buffer first: a step slice of the last dim, a
        3-D permute that moves the last dim away from the matrix dims, an expand."""
        shape = tuple(shape)
        nd = len(shape)
        k = self.r.random()
        if nd == 3 and k < 0.35:
            p = [2] + self.r.sample([0, 1], 2)      # the source's unit-stride dim becomes the batch dim
            src = [0, 0, 0]
            for o in range(3):
                src[p[o]] = shape[o]
            x = self._input(src, dtype)
            return self.step("{0}.permute" + _tup(p), [x], "permute", view=True) or x
        if k < 0.75 and nd >= 1:
            src = list(shape)
            src[-1] = 2 * shape[-1] + self.r.choice([0, 1])
            if math.prod(src) <= MAX_NUMEL:
                x = self._input(src, dtype)
                return self.step("{0}" + _idx(nd - 1, "::2"), [x], "slice", view=True) or x
        src = [1 if self.r.random() < 0.5 else d for d in shape]
        if tuple(src) == shape and nd:
            src[-1] = 1
        x = self._input(src, dtype)
        if tuple(src) == shape:
            return x
        return self.step("{0}.expand" + _tup(shape), [x], "expand", view=True, overlap=True) or x

    def operand(self, shape, dtype, pred=None):
        """An existing value of exactly this shape and dtype, or a new one."""
        if self.r.random() < 0.35:
            v = self.pick(lambda v: v.shape == tuple(shape) and v.dtype == dtype and (pred is None or pred(v)),
                          fresh_bias=0.3)
            if v is not None:
                return v
        return self.materialize(shape, dtype)

    # -- ops
    def op_unary(self):
        a = self.pick(lambda v: v.dtype != "bool")
        if a is None:
            return None
        if a.isint:
            choices = [("-{0}", True), ("{0}.abs()", True), ("{0} % 3", True), ("{0} // 3", True),
                       ("{0} * 2", a.mag < 1e5), ("{0} * {0}", a.mag < 1000), ("{0}.clamp(-2, 3)", True),
                       ("{0} + 1", True), ("ember.maximum({0}, -{0})", True)]
            t = self.r.choice([c for c, ok in choices if ok])
            return self.step(t, [a], "unary_int")
        big = a.mag > 50
        choices = [
            ("-{0}", True, True), ("{0}.abs()", True, True), ("{0}.relu()", True, True),
            ("{0}.exp()", False, a.mag < 8), ("{0}.tanh()", False, True), ("{0}.sigmoid()", False, True),
            ("{0}.sin()", False, not big), ("{0}.cos()", False, not big), ("{0} * {0}", True, not big),
            ("ember.sqrt({0}.abs() + 1)", True, True), ("ember.log({0}.abs() + 1)", False, True),
            ("{0}.clamp(-0.5, 0.5)", True, True), ("{0}.clamp(min=0.25)", True, True),
            ("F.gelu({0})", False, not big), ("F.silu({0})", False, not big), ("{0}.pow(3)", True, not big),
            ("{0} ** 2", True, not big), ("1 / ({0}.abs() + 0.5)", True, True),
            ("{0} * " + self.r.choice(_DYADIC), True, not big), (self.r.choice(_DYADIC) + " - {0}", True, True),
            ("{0}.sign()", True, a.exact), ("{0}.floor()", True, a.exact), ("{0}.round()", True, a.exact),
            ("F.leaky_relu({0}, 0.25)", True, True), ("{0}.remainder(1.5)", True, a.exact and a.mag < 1e4),
        ]
        t, ex, _ = self.r.choice([c for c in choices if c[2]])
        saves = not any(k in t for k in ("-{0}", "* ", " - ", "clamp", "abs", "relu", "leaky", "sign", "floor",
                                         "round", "remainder"))
        return self.step(t, [a], "unary", exact=ex and a.exact, saves=saves)

    def broadcast_partner(self, shape):
        """A shape that broadcasts with ``shape`` without changing it, or (sometimes) growing it."""
        s = list(shape)
        k = self.r.random()
        if k < 0.3:
            return tuple(s)
        if k < 0.6:
            return tuple(1 if self.r.random() < 0.5 else d for d in s)
        if k < 0.8 and s:
            return tuple(s[self.r.randrange(len(s) + 1):])
        if len(s) < 4 and math.prod(s) * 8 <= MAX_NUMEL:
            return (self.size(lo=1),) + tuple(1 if self.r.random() < 0.3 else d for d in s)
        return tuple(s)

    def op_binary(self):
        a = self.pick(lambda v: v.dtype != "bool")
        if a is None:
            return None
        k = self.r.random()
        if k < 0.15:      # scalar
            if a.isint:
                return self.step(self.r.choice(["{0} + 3", "{0} - 2", "2 * {0}"]), [a], "scalar")
            return self.step(self.r.choice(["{0} + " + self.r.choice(_DYADIC), "{0} * " + self.r.choice(_DYADIC),
                                            "{0} / 4", "{0} - 1"]), [a], "scalar")
        b = None
        if self.r.random() < 0.35:
            # an existing value that broadcasts with a (x - x.mean(d, keepdim=True): diamonds in the graph)
            b = self.pick(lambda v: v is not a and v.dtype != "bool" and _broadcasts(v.shape, a.shape)
                          and math.prod(_bshape(v.shape, a.shape)) <= MAX_NUMEL, fresh_bias=0.2)
        if b is None:
            shape = self.broadcast_partner(a.shape)
            dt = a.dtype if self.r.random() < 0.75 else self.dtype()
            b = self.operand(shape, dt)
        if self.r.random() < 0.5:
            a, b = b, a
        ops = [("{0} + {1}", True), ("{0} - {1}", True),
               ("{0} * {1}", a.mag * b.mag < 1e6 and (a.isfloat or b.isfloat or a.mag * b.mag < 1e5))]
        if a.isfloat or b.isfloat:
            ops += [("{0} / ({1}.abs() + 0.5)", True), ("ember.maximum({0}, {1})", a.dtype == b.dtype),
                    ("ember.minimum({0}, {1})", a.dtype == b.dtype), ("ember.add({0}, {1}, alpha=2)", True)]
            if a.exact and b.exact:
                ops += [("ember.where({0} > {1}, {0}, {1} * 2)", True), ("({0} < {1}).float() * {0}", True)]
        else:
            ops += [("ember.maximum({0}, {1})", a.dtype == b.dtype)]
            if a.exact and b.exact:
                ops += [("ember.where({0} >= {1}, {0}, {1})", True), ("({0} == {1})", True),
                        ("{0} // ({1}.abs() + 1)", True), ("{0} % ({1}.abs() + 1)", True)]
        t = self.r.choice([o for o, ok in ops if ok])
        if len(self.vals[a.name].shape) + 0 > 4:
            return None
        return self.step(t, [a, b], "binary", saves="* {1}" in t or "/" in t or "maximum" in t or "minimum" in t)

    def _dims(self, a, allow_empty_reduce=True):
        nd = len(a.shape)
        if nd == 0:
            return None
        k = self.r.random()
        if k < 0.55:
            d = self.r.randrange(nd)
            dims = [d]
        else:
            dims = sorted(self.r.sample(range(nd), self.r.randint(1, nd)))
        if not allow_empty_reduce and any(a.shape[d] == 0 for d in dims):
            return None
        text = [d - nd if self.r.random() < 0.3 else d for d in dims]
        return dims, (str(text[0]) if len(text) == 1 and k < 0.55 else _tup(text))

    def op_reduce(self):
        a = self.pick(lambda v: v.dtype != "bool" and len(v.shape) >= 1)
        if a is None:
            a = self.pick(lambda v: v.dtype != "bool")
            if a is None:
                return None
            return self.step(self.r.choice(["{0}.sum()", "{0}.float().mean()"] if a.isint
                                           else ["{0}.sum()", "{0}.mean()"]), [a], "reduce", acc=max(a.numel, 1))
        keep = self.r.random() < 0.4
        kd = ", keepdim=True" if keep else ""
        kind = self.r.choices(["sum", "mean", "amax", "max", "var", "std", "logsumexp", "prod", "argmax",
                               "full", "norm"], [30, 12, 10, 6, 5, 3, 5, 3, 3, 8, 3])[0]
        if a.isint and kind not in ("sum", "amax", "max", "argmax", "full"):
            kind = "sum"
        nonempty = kind in ("amax", "max", "argmax", "logsumexp")
        dd = self._dims(a, allow_empty_reduce=not nonempty)
        if dd is None:
            return None
        dims, dt = dd
        n = max(math.prod(a.shape[d] for d in dims), 1)
        if kind == "full":
            return self.step(self.r.choice(["{0}.sum()", "{0}.amax()" if a.numel else "{0}.sum()"]), [a],
                             "reduce", acc=max(a.numel, 1), exact=False, saves=True)
        if kind in ("max", "argmax", "logsumexp", "prod") or (kind == "var" and len(dims) > 1):
            d = dims[0] - (len(a.shape) if self.r.random() < 0.3 else 0)
            n = max(a.shape[dims[0]], 1)
            if kind == "max":
                t = self.r.choice([f"{{0}}.max(dim={d}{kd}).values", f"{{0}}.min({d}{kd})[0]"])
                return self.step(t, [a], "reduce", exact=a.exact, saves=True)
            if kind == "argmax":
                if not a.exact:
                    return None
                return self.step(f"{{0}}.argmax(dim={d}{kd})", [a], "reduce", exact=True)
            if kind == "prod":
                if n > 6 or a.mag > 4:
                    return None
                return self.step(f"{{0}}.prod({d}{kd})", [a], "reduce", acc=n, exact=False, saves=True)
            return self.step(f"{{0}}.logsumexp({d}{kd})" if a.mag < 30 else f"{{0}}.sum({d}{kd})", [a], "reduce",
                             acc=n, exact=False, saves=True)
        if kind == "sum":
            return self.step(f"{{0}}.sum(dim={dt}{kd})", [a], "reduce", acc=n, exact=a.isint)
        if kind == "mean":
            return self.step(f"{{0}}.mean(dim={dt}{kd})", [a], "reduce", acc=n, exact=False)
        if kind == "amax":
            return self.step(self.r.choice([f"{{0}}.amax(dim={dt}{kd})", f"{{0}}.amin(dim={dt}{kd})"]), [a],
                             "reduce", exact=a.exact, saves=True)
        if kind == "norm":
            return self.step(f"{{0}}.norm(dim={dt}{kd})", [a], "reduce", acc=n, exact=False, saves=True)
        corr = self.r.choice([0, 1])
        return self.step(f"{{0}}.{kind}(dim={dt}, correction={corr}{kd})", [a], "reduce", acc=n, exact=False,
                         saves=kind == "std")

    def op_view(self):
        a = self.pick(lambda v: True)
        if a is None:
            return None
        nd = len(a.shape)
        opts = []
        if nd >= 2:
            i, j = self.r.sample(range(nd), 2)
            p = list(range(nd))
            self.r.shuffle(p)
            opts += [(f"{{0}}.transpose({i}, {j})", True), ("{0}.permute" + _tup(p), True), ("{0}.mT", True)]
            if nd == 2:
                opts += [("{0}.t()", True)]
        if nd >= 1:
            d = self.r.randrange(nd)
            n = a.shape[d]
            if n >= 1:
                s0 = self.r.randrange(n)
                s1 = self.r.randrange(s0, n + 1)
                stp = self.r.choice([1, 1, 2])
                opts += [("{0}" + _idx(d, f"{s0}:{s1}" + (f":{stp}" if stp > 1 else "")), True),
                         ("{0}" + _idx(d, str(self.r.choice([s0, -1]))), True),
                         (f"{{0}}.narrow({d}, {s0}, {s1 - s0})", True),
                         ("{0}" + _idx(d, "::-1" if False else f"{s0}:"), True)]
            if a.shape[d] == 1:
                opts += [(f"{{0}}.squeeze({d})", True)]
                new = list(a.shape)
                new[d] = self.size(lo=1)
                if math.prod(new) <= MAX_NUMEL:
                    opts += [("{0}.expand" + _tup(new), True)]
            opts += [("{0}.flatten()", True), ("{0}.reshape(-1)", True), ("{0}.contiguous()", True)]
            if nd >= 2:
                opts += [(f"{{0}}.flatten({d if d < nd - 1 else d - 1}, {d + 1 if d < nd - 1 else d})", True)]
            # split a dimension in two
            n = a.shape[d]
            fs = [f for f in (2, 3, 4) if n % f == 0 and n > f]
            if fs and nd < 4:
                f = self.r.choice(fs)
                new = list(a.shape[:d]) + [f, n // f] + list(a.shape[d + 1:])
                opts += [("{0}.reshape" + _tup(new), True), ("{0}.view" + _tup(new), False)]
        if nd < 4:
            opts += [(f"{{0}}.unsqueeze({self.r.randrange(-nd - 1, nd + 1)})", True)]
        if not opts:
            return None
        t = self.r.choice([o for o, _ in opts])
        return self.step(t, [a], "view", view=True, overlap="expand" in t)

    def op_matmul(self):
        a = self.pick(lambda v: v.isfloat and 1 <= len(v.shape) <= 3) if self.r.random() < 0.6 else None
        if a is None:
            # a new left operand, often permuted, sliced or expanded (GEMM operands that must be laid out)
            shape = self.shape(self.r.choice([1, 2, 2, 3, 3]), allow0=self.r.random() < 0.3)
            dt = self.r.choice(["float32", "float32", "float64"])
            a = self.gemm_operand(shape, dt) if self.r.random() < 0.4 else self.materialize(shape, dt)
        elif len(a.shape) >= 2 and self.r.random() < 0.3:
            nd = len(a.shape)
            p = list(range(nd))
            self.r.shuffle(p)
            a = self.step("{0}.permute" + _tup(p), [a], "view", view=True) or a
        strided = self.r.random() < 0.4
        if a.mag > 1e3:
            return None
        nd = len(a.shape)
        k = a.shape[-1]
        m = self.size()
        kind = self.r.random()
        if nd == 1:
            bshape = self.r.choice([(k,), (k, m), (self.size(lo=1), k, m)])
        elif kind < 0.2:
            bshape = (k,)
        elif kind < 0.6 or nd == 2:
            bshape = (k, m) if nd == 2 or self.r.random() < 0.6 else (a.shape[0], k, m)
        else:
            bshape = (a.shape[0] if self.r.random() < 0.7 else 1, k, m)
        if math.prod(bshape) > MAX_NUMEL:
            return None
        if self.r.random() < 0.2 and nd >= 2:
            # a linear layer
            w = self.materialize((m, k), a.dtype)
            if self.r.random() < 0.6:
                bias = self.materialize((m,), a.dtype)
                return self.step("F.linear({0}, {1}, {2})", [a, w, bias], "linear", acc=k + 1, exact=False)
            return self.step("F.linear({0}, {1})", [a, w], "linear", acc=k, exact=False)
        b = self.gemm_operand(bshape, a.dtype) if strided else self.materialize(bshape, a.dtype)
        args = [a, b]
        if self.r.random() < 0.3 and len(bshape) == 2:
            # b on the left instead: (m2, m) @ ... needs a (k) as columns: use b.T @ a.T when both 2-D
            if nd == 2:
                return self.step("ember.matmul({1}.mT, {0}.mT)", args, "matmul", acc=k, exact=False)
        t = self.r.choice(["ember.matmul({0}, {1})", "{0} @ {1}"])
        if nd == 2 and len(bshape) == 2 and self.r.random() < 0.3:
            t = "ember.mm({0}, {1})"
        if nd == 3 and len(bshape) == 3 and bshape[0] == a.shape[0] and self.r.random() < 0.3:
            t = "ember.bmm({0}, {1})"
        return self.step(t, args, "matmul", acc=k, exact=False)

    def op_norm(self):
        a = self.pick(lambda v: v.isfloat and len(v.shape) >= 1 and v.mag < 1e3)
        if a is None:
            return None
        nd = len(a.shape)
        d = self.r.randrange(nd)
        dt = d - nd if self.r.random() < 0.4 else d
        k = self.r.random()
        n = max(a.shape[d], 1)
        if k < 0.35:
            return self.step(self.r.choice([f"F.softmax({{0}}, dim={dt})", f"{{0}}.softmax({dt})"]), [a], "softmax",
                             acc=n, exact=False, saves=True)
        if k < 0.55:
            return self.step(f"F.log_softmax({{0}}, dim={dt})", [a], "softmax", acc=n, exact=False, saves=True)
        j = self.r.randint(1, min(nd, 2))
        ns = a.shape[nd - j:]
        if math.prod(ns) == 0:
            return None
        acc = math.prod(ns)
        if self.r.random() < 0.6:
            w = self.materialize(ns, a.dtype)
            b = self.materialize(ns, a.dtype) if self.r.random() < 0.7 else None
            if b is not None:
                return self.step(f"F.layer_norm({{0}}, {_tup(ns)}, {{1}}, {{2}})", [a, w, b], "layer_norm", acc=acc,
                                 exact=False)
            return self.step(f"F.layer_norm({{0}}, {_tup(ns)}, {{1}})", [a, w], "layer_norm", acc=acc, exact=False)
        return self.step(f"F.layer_norm({{0}}, {_tup(ns)})", [a], "layer_norm", acc=acc, exact=False)

    def op_cast(self):
        a = self.pick(lambda v: True)
        if a is None:
            return None
        if a.dtype == "bool":
            return self.step(self.r.choice(["{0}.float()", "{0}.long()", "{0}.to(ember.float64)"]), [a], "cast")
        if a.isint:
            return self.step(self.r.choice(["{0}.float()", "{0}.double()", "{0}.int()", "{0}.long()"]), [a], "cast")
        opts = ["{0}.double()" if a.dtype == "float32" else "{0}.float()"]
        if a.exact and a.mag < 1e6:
            opts += ["{0}.long()", "{0}.to(ember.int32)", "({0} > 0)", "({0} * 2).int()"]
        return self.step(self.r.choice(opts), [a], "cast", exact=a.exact and a.dtype == "float32" or None)

    def op_index(self):
        a = self.pick(lambda v: len(v.shape) >= 1 and v.dtype != "bool")
        if a is None:
            return None
        nd = len(a.shape)
        d = self.r.randrange(nd)
        n = a.shape[d]
        k = self.r.random()
        j = self.size(allow0=True)
        if n == 0:
            j = 0
        if k < 0.3:
            ishape = (j,) if self.r.random() < 0.8 else (self.size(lo=1), 2)
            idx = self._input(ishape, "int64", False, bound=n)
            if math.prod(ishape) * a.numel > MAX_NUMEL * 4:
                return None
            return self.step("{0}[{1}]" if d == 0 else f"{{0}}.index_select({d}, {{1}})",
                             [a, idx] if d == 0 or len(ishape) == 1 else [a, self._input((j,), "int64", False, n)],
                             "index")
        if k < 0.5:
            ishape = list(a.shape)
            ishape[d] = j
            idx = self._input(ishape, "int64", False, bound=n)
            return self.step(f"ember.gather({{0}}, {d}, {{1}})", [a, idx], "index")
        if k < 0.7 and n > 0:
            lst = [self.r.randrange(-n, n) for _ in range(self.r.randint(1, 4))]
            return self.step("{0}" + _idx(d, str(lst)), [a], "index")
        if a.exact or a.isint:
            fill = "0.5" if a.isfloat else "7"
            m = self.operand(self.broadcast_partner(a.shape)[-nd:] if nd else (), a.dtype if a.exact else "int64",
                             pred=lambda v: v.exact)
            if not m.exact or len(m.shape) > nd:
                return None
            return self.step(f"{{0}}.masked_fill({{1}} > 0, {fill})", [a, m], "masked_fill")
        return None

    def _inplace_target(self, v):
        """Whether ``v`` may be written in place: an intermediate (or an argument that does not require
        grad, which the call then mutates) that nothing has read yet and whose producer saved nothing of
        it for backward, not an expanded view."""
        r = self.vals[v.root]
        if r.is_input and (r.rg or self.bounds.get(r.name) is not None):
            return False
        return not r.consumed and not r.saves and not v.overlap and v.dtype != "bool"

    def op_inplace(self):
        a = self.pick(self._inplace_target, fresh_bias=0.9)
        if a is None:
            return None
        nd = len(a.shape)
        k = self.r.random()
        if k < 0.45:
            shape = self.broadcast_partner(a.shape)
            if len(shape) > nd or any(s != 1 and s != t for s, t in zip(shape[::-1], a.shape[::-1])):
                shape = a.shape
            b = self.operand(shape, a.dtype if self.r.random() < 0.8 or a.isint else "float32")
            if b.name == a.name or self.vals[b.root].name == a.root:
                return None
            t = self.r.choice(["{0}.add_({1})", "{0}.sub_({1})", "{0}.mul_({1})", "{0} += {1}", "{0} *= {1}"])
            if a.isint and b.mag * a.mag > 1e5 and ("mul" in t or "*" in t):
                t = "{0}.add_({1})"
            return self.step(t, [a, b], "inplace", inplace=True)
        if k < 0.7 and nd >= 1 and a.shape[self.r.randrange(nd)] >= 0:
            d = self.r.randrange(nd)
            n = a.shape[d]
            if n == 0:
                return None
            s0 = self.r.randrange(n)
            s1 = self.r.randrange(s0 + 1, n + 1)
            sl = _idx(d, f"{s0}:{s1}" if self.r.random() < 0.7 else str(s0))
            if self.r.random() < 0.5:
                val = "0.5" if a.isfloat else "3"
                return self.step("{0}" + sl + " = " + val, [a], "setitem", inplace=True)
            sub = self.env[a.name][eval("np.s_" + sl)]
            b = self.operand(tuple(sub.shape), a.dtype)
            if self.vals[b.root].name == a.root:
                return None
            return self.step("{0}" + sl + " = {1}", [a, b], "setitem", inplace=True)
        if a.isfloat:
            t = self.r.choice(["{0}.mul_(2)", "{0}.neg_()", "{0}.clamp_(min=-1)", "{0}.add_(1.5)",
                               "{0}.div_(4)"])
        else:
            t = self.r.choice(["{0}.add_(1)", "{0}.neg_()", "{0}.clamp_(max=2)"])
        if nd >= 1 and a.shape[0] > 1 and self.r.random() < 0.4:
            t = t.replace("{0}.", "{0}[1:].", 1)
        return self.step(t, [a], "inplace", inplace=True)

    def op_cat(self):
        a = self.pick(lambda v: len(v.shape) >= 1)
        if a is None:
            return None
        d = self.r.randrange(len(a.shape))
        shape = list(a.shape)
        if self.r.random() < 0.3:
            b = self.operand(tuple(shape), a.dtype)
            return self.step(f"ember.stack([{{0}}, {{1}}], dim={d})", [a, b], "cat")
        shape[d] = self.size()
        if math.prod(shape) > MAX_NUMEL:
            return None
        b = self.operand(tuple(shape), a.dtype)
        return self.step(f"ember.cat([{{0}}, {{1}}], dim={d})", [a, b], "cat")

    def op_misc(self):
        """Scans, flips, repeats, padding, einsum and the losses and indexing helpers models use."""
        k = self.r.randrange(9)
        if k == 0:      # losses over (N, C) logits and class indices
            n, c = self.size(lo=1), self.size(lo=1)
            a = self.operand((n, c), self.r.choice(["float32", "float64"]))
            t = self._input((n,), "int64", False, bound=c)
            tmpl = self.r.choice(["F.cross_entropy({0}, {1})", "F.nll_loss(F.log_softmax({0}, dim=1), {1})",
                                  "F.cross_entropy({0}, {1}, reduction='sum')",
                                  "F.cross_entropy({0}, {1}, reduction='none')"])
            return self.step(tmpl, [a, t], "loss", acc=n * c, exact=False, saves=True)
        if k == 1:
            a = self.pick(lambda v: v.isfloat)
            if a is None:
                return None
            b = self.operand(a.shape, a.dtype)
            return self.step(self.r.choice(["F.mse_loss({0}, {1})", "F.l1_loss({0}, {1})",
                                            "F.smooth_l1_loss({0}, {1})"]), [a, b], "loss",
                             acc=max(a.numel, 1), exact=False, saves=True)
        if k == 2:      # an embedding lookup
            n, d = self.size(lo=1), self.size(lo=1)
            w = self.materialize((n, d), self.r.choice(["float32", "float64"]))
            idx = self._input(self.shape(self.r.choice([1, 2])), "int64", False, bound=n)
            return self.step("F.embedding({1}, {0})", [w, idx], "index")
        a = self.pick(lambda v: len(v.shape) >= 1 and v.dtype != "bool")
        if a is None:
            return None
        nd = len(a.shape)
        d = self.r.randrange(nd)
        if k == 3:
            if a.isfloat:
                return self.step(f"{{0}}.cumsum({d})", [a], "scan", acc=max(a.shape[d], 1), exact=False)
            return self.step(f"{{0}}.cumsum({d})", [a], "scan")
        if k == 4:
            return self.step(self.r.choice([f"{{0}}.flip({d})", f"{{0}}.roll({self.r.randint(-3, 3)}, {d})"]),
                             [a], "view")
        if k == 5 and a.numel * 4 <= MAX_NUMEL:
            reps = [self.r.choice([1, 1, 2, 3]) for _ in range(nd)]
            return self.step("{0}.repeat" + _tup(reps), [a], "view")
        if k == 6:
            pads = [self.r.randint(0, 2) for _ in range(2 * min(nd, 2))]
            return self.step(f"F.pad({{0}}, {_tup(pads)})" if a.isfloat else f"F.pad({{0}}, {_tup(pads)}, value=1)",
                             [a], "view")
        if k == 7 and nd == 2 and a.isfloat:
            m = self.size()
            b = self.materialize((m, a.shape[1]), a.dtype)
            return self.step(self.r.choice(["ember.einsum('ij,kj->ik', {0}, {1})",
                                            "ember.einsum('ij,kj->ki', {0}, {1})"]), [a, b], "matmul",
                             acc=a.shape[1], exact=False)
        if k == 8 and a.shape[d] > 0 and (a.exact or a.isint):
            j = self.r.randint(1, a.shape[d])
            return self.step(f"{{0}}.topk({j}, dim={d}).values", [a], "reduce", saves=True)
        if nd >= 2:
            return self.step(self.r.choice(["ember.tril({0})", "ember.triu({0}, 1)"]), [a], "view")
        return None

    def op_python(self):
        """Python that reads tensor values (a graph break: replays check the value read as a guard) or
        detaches: a branch on a sum, a scale by an element, a boolean-mask selection (its length is
        data-dependent), ``detach``."""
        a = self.pick(lambda v: v.dtype != "bool" and (v.exact or v.isint))
        if a is None:
            return None
        k = self.r.randrange(4)
        if k == 0:
            b = self.pick(lambda v: v.isint or v.isfloat and v.exact, fresh_bias=0.5)
            return self.step(self.r.choice(["({0} if {1}.sum() >= 0 else -{0})",
                                            "({0} * 2 if bool(({1} > 0).any()) else {0} + 1)"]), [a, b], "python",
                             exact=a.exact and b.exact)
        if k == 1 and a.numel > 0:
            return self.step("{0} * float({0}.flatten()[0].abs())" if a.isfloat else "{0} * int({0}.flatten()[0])",
                             [a], "python")
        if k == 2 and len(a.shape) >= 1 and a.numel > 0:
            return self.step(self.r.choice(["{0}[{0} > 0].sum()", "({0}[{0} >= 0] * 2).sum()"]), [a], "python",
                             acc=a.numel, exact=a.isint)
        b = self.pick(lambda v: v.isfloat)
        if b is None:
            return None
        return self.step(self.r.choice(["{0}.detach() * {0}", "{0}.detach()"]), [b], "python")

    def op_big(self):
        """Sizes past the thresholds of the generated code: a float32 GEMM of 1M+ multiply-adds (ember's
        own AVX-512 sgemm) with odd tile tails, or an elementwise op and reduction over 64K+ elements
        (OpenMP loops)."""
        if self.r.random() < 0.6:
            m, n = self.r.choice([6, 13, 37, 64, 67]), self.r.choice([32, 33, 97, 128, 161])
            k = max(-(-(1 << 20) // (m * n)), 1) + self.r.choice([0, 1, 7])
            if max(m, n) * k > 1 << 17:
                k = (1 << 17) // max(m, n)
                m = n = max(m, n)
            a = self.materialize((m, k), "float32")
            b = self.materialize((k, n), "float32")
            v = self.step(self.r.choice(["ember.matmul({0}, {1})", "{0} @ {1}"]), [a, b], "matmul", acc=k,
                          exact=False)
        else:
            shape = self.r.choice([(257, 300), (65537,), (3, 129, 171)])
            a = self.materialize(shape, self.r.choice(["float32", "float64"]))
            b = self.operand(self.broadcast_partner(shape), a.dtype)
            v = self.step(self.r.choice(["{0} * {1}", "{0} + {1}", "ember.maximum({0}, {1})"]), [a, b], "binary")
        if v is not None:
            self.focus = v
        return v

    OPS = [("op_binary", 20), ("op_unary", 14), ("op_reduce", 15), ("op_view", 14), ("op_matmul", 13),
           ("op_norm", 6), ("op_inplace", 9), ("op_index", 6), ("op_cast", 3), ("op_cat", 3), ("op_misc", 6),
           ("op_python", 2), ("op_big", 1)]

    def build(self):
        self.materialize(self.shape(), self.dtype())
        nsteps = self.r.randint(1, self.max_steps)
        names, weights = zip(*self.OPS)
        done = 0
        for _ in range(nsteps * 4):
            if done >= nsteps:
                break
            op = self.r.choices(names, weights)[0]
            if op == "op_matmul" and self.r.random() < 0.4:
                # a GEMM whose result is reduced (what a loss does with a linear layer's output)
                v = self.op_matmul()
                if v is not None:
                    done += 1
                    self.focus = v
                    op = "op_reduce"
            v = getattr(self, op)()
            if v is not None:
                done += 1
        values = [v for v in self.vals.values() if not v.is_input]
        if not values:
            return None
        last = values[-1]
        outs = [last.name]
        for v in values[:-1]:
            if not v.consumed and self.r.random() < 0.5 and len(outs) < 3:
                outs.append(v.name)
        if self.r.random() < 0.1:
            # an argument returned as it is, or a value returned twice
            outs.append(self.r.choice([i[0] for i in self.inputs] + outs))
        acc = max([v.acc for v in self.vals.values()] + [1])
        prec = "float32" if any(v.prec == "float32" for v in self.vals.values()) else "float64"
        tol = {o: (self.vals[o].prec, self.vals[o].acc) for o in outs}
        tol.update({i[0]: (prec, acc) for i in self.inputs})
        return Program([i for i in self.inputs], self.steps, outs, acc, self.seed, tol)


def generate(seed, max_steps=8):
    """The program of ``seed`` (deterministic): a well-typed program that runs eagerly, backward included."""
    for attempt in range(20):
        s = seed if attempt == 0 else f"{seed}/{attempt}"
        try:
            p = Generator(s, max_steps).build()
        except GenerationError:
            continue
        if p is None:
            continue
        p.seed = seed
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _H["run"](p.function(), p.specs(), 0, 0)
        except Exception:
            continue
        return p
    raise RuntimeError(f"fuzz: no valid program for seed {seed}")


# ---- running and comparing -----------------------------------------------------------------------------------

_TOL = {np.dtype(np.float32): 2e-4, np.dtype(np.float64): 1e-9, np.dtype(np.float16): 2e-2}


def compare(e, c, acc=1, prec=None, ref=None):
    """None when compiled ``c`` matches eager ``e``, else a short description of the difference. Floats are
    compared with a tolerance for the roughest dtype ``prec`` the value went through (its own dtype by
    default), growing with the square root of the accumulation length ``acc``. ``ref``: the same value
    computed eagerly in float64 from the same inputs; where eager itself is that far from it (an
    ill-conditioned value, like the gradient of layer_norm over a constant row) an element only counts
    when compiled is more than 16x further from it than eager, and a NaN/inf only when eager has the
    reference's NaN/inf."""
    if e is None or c is None:
        return None if e is None and c is None else f"eager {'None' if e is None else 'a tensor'}, " \
                                                    f"compiled {'None' if c is None else 'a tensor'}"
    if e.shape != c.shape or e.dtype != c.dtype:
        return f"eager {e.shape} {e.dtype}, compiled {c.shape} {c.dtype}"

    def at(mask, what):
        i = tuple(int(k) for k in np.argwhere(mask)[0])
        return f"{int(mask.sum())} of {e.size} elements {what}, e.g. at {i}: eager {e[i]!s}, compiled {c[i]!s}"
    if e.dtype.kind != "f":
        bad = e != c
        return at(bad, "differ") if bad.any() else None
    if ref is not None and (ref.shape != e.shape or ref.dtype.kind != "f"):
        ref = None
    ne, nc = np.isnan(e), np.isnan(c)
    ie, ic = np.isinf(e), np.isinf(c)
    special = (ne != nc) | (ie != ic) | (ie & ic & (e != c))
    if ref is not None:
        special &= (np.isnan(ref) == ne) & (np.isinf(ref) == ie)
    if special.any():
        return at(special, "differ in NaN/inf")
    fin = ~(ne | ie | nc | ic)
    if not fin.any():
        return None
    e64, c64 = e.astype(np.float64), c.astype(np.float64)
    scale = max(1.0, float(np.abs(e64[fin]).max()))
    tol = max(_TOL.get(e.dtype, 1e-4), _TOL.get(np.dtype(prec or e.dtype), 1e-4)) * max(1.0, math.sqrt(acc))
    err = np.where(fin, np.abs(e64 - c64), 0.0)
    bad = err > tol * (np.abs(e64) + scale)
    if ref is not None and bad.any():
        r64 = ref.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad &= ~np.isfinite(r64) | (np.abs(c64 - r64) > 16 * np.abs(e64 - r64))
    return at(bad, f"differ (tol {tol:.1e} x scale {scale:.3g})") if bad.any() else None


class Result:
    """The outcome of checking one program: ``differs`` and the first ``message``; ``calls`` made."""

    def __init__(self, program):
        self.program = program
        self.message = None
        self.call = None
        self.calls = 0
        self.invalid = None         # eager raised: not a finding about the compiler
        self.fallback = False       # the compiled function ran (part of) the program eagerly or interpreted
        self.noisy = 0              # values past the tolerance where eager is as far from float64 as compiled

    @property
    def differs(self):
        return self.message is not None

    def __repr__(self):
        return f"Result(differs={self.differs}, message={self.message!r})"


@contextlib.contextmanager
def c_opt_level(opt):
    """Build generated C with ``opt`` (e.g. ``"-O0"``) instead of ``-O3`` inside the block (None: unchanged).
    The generated code and its numerics are the same (``-ffp-contract=off``); gcc builds it ~2x faster at
    -O1 and ~4x at -O0, which lets a time-boxed fuzz run check more programs. What only -O3 shows
    (vectorised loops, ``restrict`` taken at its word) needs the default flags."""
    from . import build
    if opt is None:
        yield
        return
    saved = build.BASE_FLAGS
    build.BASE_FLAGS = tuple(opt if f.startswith("-O") else f for f in saved)
    try:
        yield
    finally:
        build.BASE_FLAGS = saved


def check(program, seed=0, calls=3, backend="inductor", mode=None, opt=None):
    """Run ``program`` eagerly and compiled on ``calls`` calls (the first captures, the others replay with
    new values); the Result says whether outputs or gradients differ. ``opt``: see :func:`c_opt_level`."""
    with c_opt_level(opt):
        return _check(program, seed, calls, backend, mode)


def _check(program, seed, calls, backend, mode):
    import ember
    res = Result(program)
    fn = program.function()
    specs = program.specs()
    run = _H["run"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf = ember.compile(fn, backend=backend, mode=mode)
        for call in range(calls):
            try:
                eo, eg, ex = run(fn, specs, seed, call)
            except Exception as e:
                res.invalid = f"call {call}: eager raised {type(e).__name__}: {e}"
                return res
            res.calls += 1
            try:
                with warnings.catch_warnings(record=True) as ws:
                    warnings.simplefilter("always")
                    co, cg, cx = run(cf, specs, seed, call)
            except Exception as e:
                res.message, res.call = f"compiled raised {type(e).__name__}: {e}", call
                return res
            for w in ws:
                if "native code generation failed" in str(w.message):
                    res.message, res.call = f"compiled: {w.message}", call
                    return res
            items = [(f"output {i} ({o})", o, a, b, i, 0) for i, (o, a, b) in enumerate(zip(program.outputs, eo, co))]
            items += [(f"{n[0]}.grad", n[0], a, b, i, 1) for i, (n, a, b) in enumerate(zip(program.inputs, eg, cg))]
            items += [(f"{n[0]} after the call", n[0], a, b, i, 2)
                      for i, (n, a, b) in enumerate(zip(program.inputs, ex, cx))]
            ref = None
            for what, name, a, b, i, kind in items:
                acc, prec = program.tol.get(name, (None, program.acc))[::-1]
                m = compare(a, b, acc, prec)
                if m and ref is None:
                    try:     # eager in float64 from the same values: is eager itself that far off here?
                        ref = run(fn, specs, seed, call, upcast=True)
                    except Exception:
                        ref = False
                if m and ref:
                    m = compare(a, b, acc, prec, ref=ref[kind][i])
                    if m is None:
                        res.noisy += 1
                if m:
                    res.message, res.call = f"{what}: {m}", call
                    return res
    for e in cf.entries:
        if e.kind != "compiled" or not hasattr(e.runner, "native"):
            res.fallback = True
    return res


# ---- minimising ----------------------------------------------------------------------------------------------

def _env_of(program, seed=0):
    """Shapes and dtypes of every named value of ``program`` on the first call's inputs."""
    ns = dict(_H)
    xs, _ = _H["make_inputs"](program.specs(), seed, 0)
    for (name, *_), x in zip(program.inputs, xs):
        ns[name] = x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in program.steps:
            exec(s.line(), ns)
    return ns


def _prune(p):
    """Drop steps whose results nothing uses and inputs no step uses."""
    steps = list(p.steps)
    changed = True
    while changed:
        changed = False
        used = set(p.outputs)
        for s in steps:
            used.update(s.args)
        # an in-place statement keeps the values it writes alive only if they are used after it
        keep = []
        for i, s in enumerate(steps):
            if s.out is not None and s.out not in used:
                changed = True
                continue
            if s.out is None:
                later = set(p.outputs)
                for t in steps[i + 1:]:
                    later.update(t.args)
                if not _aliases_used(s, steps, later):
                    changed = True
                    continue
            keep.append(s)
        steps = keep
    used = set(a for s in steps for a in s.args) | set(p.outputs)
    ins = [i for i in p.inputs if i[0] in used]
    return p.copy(steps=steps, inputs=ins)


def _aliases_used(s, steps, later):
    """Whether anything read after in-place statement ``s`` may alias the value it writes."""
    target = s.args[0]
    views = {target}
    changed = True
    while changed:
        changed = False
        for t in steps:
            if t.out is not None and t.op in ("view", "permute", "transpose", "slice", "expand") and \
                    t.args and t.args[0] in views and t.out not in views:
                views.add(t.out)
                changed = True
            if t.out is not None and t.out in views and t.args and t.args[0] not in views and \
                    t.op in ("view", "permute", "transpose", "slice", "expand"):
                views.add(t.args[0])
                changed = True
    return bool(views & later)


def _candidates(p, seed):
    """Smaller variants of ``p``, most aggressive first."""
    # a batch of programs (combine): without one of them
    subs = sorted({o.split("_", 1)[0] for o in p.outputs if re.match(r"p\d+_", o)})
    if len(subs) > 1:
        for k in subs:
            yield _prune(p.copy(outputs=[o for o in p.outputs if not o.startswith(k + "_")]))
    # fewer outputs: halves first, then quarters, ...
    n = len(p.outputs)
    chunk = n // 2
    while chunk >= 1:
        for start in range(0, n, chunk):
            rest = p.outputs[:start] + p.outputs[start + chunk:]
            if rest:
                yield _prune(p.copy(outputs=rest))
        chunk //= 2
    # return an argument of an output's step instead of the output (cuts the tail of a chain)
    made = {s.out: s for s in p.steps if s.out is not None}
    inputs = {i[0] for i in p.inputs}
    for k, o in enumerate(p.outputs):
        if o in made:
            for a in made[o].args:
                if a not in inputs and a not in p.outputs:
                    yield _prune(p.copy(outputs=p.outputs[:k] + [a] + p.outputs[k + 1:]))
    try:
        env = _env_of(p, seed)
    except Exception:
        env = None
    # drop a step: in-place statements go; a value becomes a new input of its shape and dtype, or is replaced
    # by one of its arguments of the same shape and dtype
    for i in reversed(range(len(p.steps))):
        s = p.steps[i]
        if s.out is None:
            yield _prune(p.copy(steps=p.steps[:i] + p.steps[i + 1:]))
            continue
        if env is None or s.out not in env:
            continue
        t = env[s.out]
        for a in s.args:
            ta = env.get(a)
            if ta is not None and tuple(ta.shape) == tuple(t.shape) and ta.dtype == t.dtype:
                yield _prune(_substitute(p, i, a))
        dt = _dt(t)
        if dt in FLOATS + INTS:
            name = _fresh_input_name(p)
            spec = (name, tuple(t.shape), dt, dt in FLOATS and bool(t.requires_grad), None, False)
            q = _substitute(p, i, name)
            yield _prune(q.copy(inputs=q.inputs + [spec]))
    # smaller sizes: every input dimension of one size shrinks together
    sizes = sorted({d for i in p.inputs if i[4] is None for d in i[1] if d > 1}, reverse=True)
    for s in sizes:
        for new in sorted({1, 2, s // 2, s - 1} - {s, 0}):
            if new >= s:
                continue
            ins = [(n, tuple(new if d == s else d for d in sh), dt, g, b if b is None or b != s else new, t)
                   for n, sh, dt, g, b, t in p.inputs]
            yield p.copy(inputs=ins)
    # no requires_grad, float32 instead of float64
    for k, (n, sh, dt, g, b, t) in enumerate(p.inputs):
        if g:
            yield p.copy(inputs=p.inputs[:k] + [(n, sh, dt, False, b, t)] + p.inputs[k + 1:])
    for k, (n, sh, dt, g, b, t) in enumerate(p.inputs):
        if dt == "float64":
            yield p.copy(inputs=p.inputs[:k] + [(n, sh, "float32", g, b, t)] + p.inputs[k + 1:])
    for k, (n, sh, dt, g, b, t) in enumerate(p.inputs):
        if t:
            yield p.copy(inputs=p.inputs[:k] + [(n, sh, dt, g, b, False)] + p.inputs[k + 1:])


def _fresh_input_name(p):
    names = {i[0] for i in p.inputs}
    k = len(names)
    while f"x{k}" in names:
        k += 1
    return f"x{k}"


def _substitute(p, i, name):
    """Remove step i, reading ``name`` wherever its result was read."""
    out = p.steps[i].out
    steps = [Step(s.out, s.template, [name if a == out else a for a in s.args], s.op) for s in p.steps[:i]] + \
            [Step(s.out, s.template, [name if a == out else a for a in s.args], s.op) for s in p.steps[i + 1:]]
    outs = []
    for o in p.outputs:
        o = name if o == out else o
        if o not in outs:
            outs.append(o)
    return p.copy(steps=steps, outputs=outs)


def minimise(program, seed=0, calls=3, backend="inductor", budget_s=120.0, log=None, opt=None):
    """Greedy: take the first smaller variant that still differs, until none does or the budget is spent.
    Candidates are built at -O0 (faster builds) when the difference shows there too; the result is
    checked with ``opt``. Returns (program, Result)."""
    t0 = time.perf_counter()
    res = check(program, seed, calls, backend, opt=opt)
    if not res.differs:
        return program, res
    fast = "-O0" if opt is None else opt
    if fast != opt and not check(program, seed, calls, backend, opt=fast).differs:
        fast = opt
    best = _greedy(program, seed, calls, backend, fast, t0 + budget_s, log)
    if fast != opt:
        r = check(best, seed, calls, backend, opt=opt)
        if not r.differs:        # shows only at -O0 now: go on from the original with the original flags
            best = _greedy(program, seed, calls, backend, opt, t0 + budget_s, log)
            r = check(best, seed, calls, backend, opt=opt)
        res = r if r.differs else res
        if not r.differs:
            best = program
    else:
        res = check(best, seed, calls, backend, opt=opt)
    return best, res


def _greedy(best, seed, calls, backend, opt, deadline, log):
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for cand in _candidates(best, seed):
            if time.perf_counter() > deadline:
                break
            if _size(cand) >= _size(best):
                continue
            try:
                r = check(cand, seed, calls, backend, opt=opt)
            except Exception:
                continue
            if r.differs and r.invalid is None:
                best = cand
                improved = True
                if log:
                    log(f"  minimise: {len(best.steps)} steps, {len(best.outputs)} outputs, "
                        f"{sum(math.prod(i[1]) for i in best.inputs)} input elements")
                break
    return best


def _size(p):
    return (len(p.steps), len(p.outputs), sum(math.prod(i[1]) for i in p.inputs),
            sum(1 for i in p.inputs if i[3]), sum(1 for i in p.inputs if i[2] == "float64"),
            sum(1 for i in p.inputs if i[5]), len(p.inputs))


def repro(program, seed=0, result=None, calls=3, backend="inductor", opt=None) -> str:
    """A standalone script that shows the difference (``opt``: the C optimisation level it was found
    with, see :func:`c_opt_level`)."""
    head = f"# ember.compile fuzz repro (program seed {program.seed!r}, values seed {seed})"
    if result is not None and result.message:
        head += f"\n# call {result.call}: {result.message}"
    specs = ",\n         ".join(repr(s) for s in program.specs())
    be = "" if backend == "inductor" else f", backend={backend!r}"
    names = [i[0] for i in program.inputs]
    flags = ""
    if opt:
        head += f"\n# found with the generated C built at {opt}"
        flags = f"from ember.compiler.fuzz import c_opt_level\nc_opt_level({opt!r}).__enter__()   # build at {opt}\n"
    return f"""{head}
{HARNESS}

{program.source()}
SPECS = [{specs}]
NAMES = {names!r}
{flags}cf = ember.compile(f{be})
for call in range({calls}):       # call 0 captures (runs eagerly); the others run the compiled code
    (eo, eg, ex), (co, cg, cx) = run(f, SPECS, {seed}, call), run(cf, SPECS, {seed}, call)
    for what, e, c in [(f"output {{i}}", *ec) for i, ec in enumerate(zip(eo, co))] + \\
                      [(f"{{n}}.grad", *ec) for n, ec in zip(NAMES, zip(eg, cg))] + \\
                      [(f"{{n}} after the call", *ec) for n, ec in zip(NAMES, zip(ex, cx))]:
        if (e is None) != (c is None):
            print(f"call {{call}}: {{what}}: eager {{e}}, compiled {{c}}")
        elif e is not None and e.size and not np.array_equal(e, c, equal_nan=e.dtype.kind == "f"):
            print(f"call {{call}}: {{what}}: max |eager - compiled| =", np.abs(e.astype(float) - c.astype(float)).max())
"""


# ---- fuzzing -------------------------------------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.programs = 0
        self.calls = 0
        self.differ = 0
        self.invalid = 0
        self.fallback = 0
        self.builds = 0
        self.seconds = 0.0
        self.found = []        # (program, Result, minimised program, minimised Result)
        self.invalid_reasons = []   # (program seeds, what eager raised)
        self.noisy = 0         # values past the tolerance but no further from float64 than eager's (ill-conditioned)

    def summary(self):
        return (f"{self.programs} programs, {self.calls} compiled calls, {self.differ} differ "
                f"({self.builds} compiled functions, {self.fallback} not fully native, {self.invalid} invalid, "
                f"{self.noisy} ill-conditioned values let through, {self.seconds:.1f} s)")


def program_seed(base, i):
    """The generator seed of program ``i`` of a run with seed ``base`` (``--seed base --only i``)."""
    return f"{base}:{i}"


def fuzz(seed, count, batch=6, calls=3, backend="inductor", minimise_found=True, stats=None, log=None,
         max_steps=8, minimise_budget_s=120.0, opt=None):
    """Generate ``count`` programs from ``seed``, check them in batches, minimise what differs."""
    stats = stats or Stats()
    t0 = time.perf_counter()
    progs = [generate(program_seed(seed, i), max_steps) for i in range(count)]
    for k in range(0, len(progs), batch):
        group = progs[k:k + batch]
        whole = combine(group) if len(group) > 1 else group[0]
        res = check(whole, seed, calls, backend, opt=opt)
        stats.builds += 1
        stats.programs += len(group)
        stats.calls += res.calls * len(group)
        stats.fallback += res.fallback
        stats.noisy += res.noisy
        if res.invalid:
            stats.invalid += 1
            stats.invalid_reasons.append(([p.seed for p in group], res.invalid))
            if log:
                log(f"invalid batch {k // batch}: {res.invalid}")
            continue
        if not res.differs:
            continue
        culprits = []
        if len(group) > 1:
            for p in group:
                r = check(p, seed, calls, backend, opt=opt)
                if r.differs:
                    culprits.append((p, r))
        if not culprits:
            culprits = [(whole, res)]
        for p, r in culprits:
            stats.differ += 1
            if log:
                log(f"program {p.seed}: {r.message}")
            if minimise_found:
                m, mr = minimise(p, seed, calls, backend, budget_s=minimise_budget_s, opt=opt)
            else:
                m, mr = p, r
            stats.found.append((p, r, m, mr))
            if log:
                log(repro(m, seed, mr, calls, backend, opt))
    stats.seconds += time.perf_counter() - t0
    return stats


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ember.compiler.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--batch", type=int, default=6, help="programs compiled together as one function")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8, help="most steps per program")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--no-minimise", action="store_true")
    ap.add_argument("--opt", default=None, help="C optimisation level for the builds, e.g. -O0 (default -O3)")
    ap.add_argument("--only", type=int, default=None, help="only program i of the seed")
    ap.add_argument("--show", action="store_true", help="print the programs")
    a = ap.parse_args(argv)
    log = lambda s: print(s, flush=True)   # noqa: E731
    if a.only is not None:
        p = generate(program_seed(a.seed, a.only), a.steps)
        if a.show:
            print(p.source())
            print("SPECS =", p.specs())
        r = check(p, a.seed, a.calls, a.backend, opt=a.opt)
        print(r.invalid or r.message or "same")
        if r.differs and not a.no_minimise:
            m, mr = minimise(p, a.seed, a.calls, a.backend, log=log, opt=a.opt)
            print(repro(m, a.seed, mr, a.calls, a.backend, a.opt))
        return 1 if r.differs else 0
    if a.show:
        for i in range(a.count):
            p = generate(program_seed(a.seed, i), a.steps)
            print(f"# program {i}\n{p.source()}")
    st = fuzz(a.seed, a.count, a.batch, a.calls, a.backend, not a.no_minimise, log=log, max_steps=a.steps,
              opt=a.opt)
    print(st.summary())
    return 1 if st.differ else 0


if __name__ == "__main__":
    sys.exit(main())
