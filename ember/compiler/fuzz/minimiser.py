"""The minimiser: :func:`minimise` greedily takes smaller variants of a differing program (fewer programs of
a batch, outputs and steps, values turned into inputs, smaller sizes, no requires_grad) while it still differs."""
from __future__ import annotations

import math
import re
import time
import warnings

from .harness import _H
from .program import Step
from .runner import check
from .values import FLOATS, INTS, _dt


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
