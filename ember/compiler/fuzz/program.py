"""A program as data: :class:`Step` (one statement), :class:`Program` (inputs, steps, outputs, tolerances;
its source text and the function it defines) and :func:`combine` (several programs as one)."""
from __future__ import annotations

from .harness import _H


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
