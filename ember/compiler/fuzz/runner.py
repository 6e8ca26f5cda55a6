"""Running and comparing: :func:`check` runs a program eagerly and compiled and compares outputs, gradients
and arguments after the call with :func:`compare` (a tolerance that respects the dtype); :class:`Result`
says what differed; :func:`c_opt_level` builds the generated C at another optimisation level."""
from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np

from .harness import _H

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
    from .. import build
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
