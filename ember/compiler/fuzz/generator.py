"""The program generator: :class:`Generator` builds one random well-typed program from a seed, running
every step on sample values as it goes; :func:`generate` returns the program of a seed."""
from __future__ import annotations

import math
import random
import warnings
import zlib

import numpy as np

from .harness import _H
from .program import Program, Step
from .values import _DYADIC, _SIZES, FLOATS, MAX_NUMEL, V, _bshape, _broadcasts, _dt, _idx, _mag, _tup

# Differences the generator does not produce, with the reason (kept empty when nothing is excluded).
EXCLUDED: dict = {}


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
