"""The compile fuzzer (ember.compiler.fuzz) in the suite: random programs run eagerly and through
``ember.compile`` (default backend: generated C), forward and gradients, on the capturing call and on
replays with new values, compared with a dtype-aware tolerance.

- ``test_fuzz_fixed_seed``: the same FIXED_COUNT programs every run (seed FIXED_SEED), built with the
  default C flags (-O3).
- ``test_fuzz_rotating_seed``: ROTATING_COUNT new programs per run, from a random seed (printed;
  ``EMBER_FUZZ_SEED=N`` chooses it), built at -O0 (the same generated C, the same numerics: gcc builds
  it ~4x faster than at -O3, so more programs fit in the time box; the fixed set covers -O3).
- ``test_fuzz_eager_backend_fixed_seed``: EAGER_COUNT programs (seed EAGER_SEED) through backend="eager", the
  op-by-op replay whose autograd the dispatcher rebuilds (detach(), writes into views of intermediates).
- ``EMBER_FUZZ_SCALE=k`` multiplies the counts (a longer local run).

A difference fails the test with the fuzzer's minimised standalone repro. The module prints the counts
(programs, compiled calls, differ) at the end of the run.
"""
import io
import math
import os
import re
import contextlib

import numpy as np
import pytest

import ember
from ember.compiler import fuzz
from ember.compiler.fuzz import Program, Step

from compile_support import _reset  # noqa: F401  (fresh compiler state and a private kernel cache per test)

FIXED_SEED = 0
SCALE = float(os.environ.get("EMBER_FUZZ_SCALE", "1"))
FIXED_COUNT = int(90 * SCALE)
ROTATING_COUNT = int(180 * SCALE)
EAGER_SEED = 201
EAGER_COUNT = int(400 * SCALE)
BATCH = 6

_TOTAL = fuzz.Stats()
_SEEDS = []


@pytest.fixture(scope="module", autouse=True)
def _print_counts(request):
    yield
    if not _TOTAL.programs:
        return
    line = f"compile fuzz: {_TOTAL.summary()}; seeds: {', '.join(_SEEDS)}"
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if tr is None or capman is None:
        print(line)
        return
    with capman.global_and_fixture_disabled():      # past pytest's output capture, also without -s
        tr.write_line("")
        tr.write_line(line)


def _run(seed, count, opt, how, backend="inductor"):
    st = fuzz.fuzz(seed, count, batch=BATCH, backend=backend, opt=opt, minimise_budget_s=90.0)
    for k in ("programs", "calls", "differ", "invalid", "fallback", "builds", "noisy"):
        setattr(_TOTAL, k, getattr(_TOTAL, k) + getattr(st, k))
    _TOTAL.seconds += st.seconds
    _SEEDS.append(f"{how} {seed}")
    print(f"compile fuzz ({how}, seed {seed}): {st.summary()}")
    if st.differ or st.invalid:
        again = f"python -m ember.compiler.fuzz --seed {seed} --count {count}" + (f" --opt={opt}" if opt else "") \
            + (f" --backend {backend}" if backend != "inductor" else "")
        if how == "rotating":
            again += f"  (or EMBER_FUZZ_SEED={seed} pytest tests/test_compile_fuzz.py -k rotating)"
        msg = [f"compile fuzz ({how}, seed {seed}): {st.summary()}; again: {again}"]
        for seeds, why in st.invalid_reasons:
            msg.append(f"\n--- programs {seeds}: the generator made a program eager code rejects: {why}")
        for p, r, m, mr in st.found:
            msg.append(f"\n--- program {p.seed}: {r.message}\n--- minimised repro:\n"
                       f"{fuzz.repro(m, seed, mr, backend=backend, opt=opt)}")
        pytest.fail("\n".join(msg), pytrace=False)
    return st


def test_fuzz_fixed_seed():
    st = _run(FIXED_SEED, FIXED_COUNT, None, "fixed")
    assert st.programs == FIXED_COUNT and st.calls >= 3 * FIXED_COUNT - 3 * BATCH


def test_fuzz_rotating_seed():
    env = os.environ.get("EMBER_FUZZ_SEED")
    seed = int(env) if env else 1 + int.from_bytes(os.urandom(4), "little") % 1_000_000
    st = _run(seed, ROTATING_COUNT, "-O0", "rotating")
    assert st.programs == ROTATING_COUNT


def test_fuzz_eager_backend_fixed_seed():
    """backend="eager" (the program replayed op by op, autograd rebuilt by the dispatcher): seed 201's first
    EAGER_COUNT programs include detach() of intermediates, in-place writes into intermediates and their
    views, and grad-requiring values written into arguments (wrong gradients before the replay knew them)."""
    st = _run(EAGER_SEED, EAGER_COUNT, None, "eager backend", backend="eager")
    assert st.programs == EAGER_COUNT and st.calls >= 3 * EAGER_COUNT - 3 * BATCH


# ---- bug 1: a permuted GEMM operand saved for backward sat in an arena slot a later temporary reused ------

BUG1 = Program(
    inputs=[("x", (2, 2, 2), "float32", True, None), ("w", (2,), "float32", True, None)],
    steps=[Step("v1", "{0}.permute(2, 1, 0)", ["x"], "permute"),
           Step("v2", "ember.matmul({0}, {1})", ["v1", "w"], "matmul"),
           Step("v3", "{0}.sum(dim=1)", ["v2"], "reduce"),
           Step("v4", "{0}.sum()", ["v3"], "reduce")],
    outputs=["v4"], acc=4, seed="bug1")


def test_bug1_program_matches_eager():
    res = fuzz.check(BUG1, seed=0, calls=4)
    assert res.invalid is None
    assert not res.differs, fuzz.repro(BUG1, 0, res)
    assert res.calls == 4


def test_bug1_exact_values():
    f = fuzz.Program.function(BUG1)
    cf = ember.compile(f)
    for call in range(3):
        x = ember.arange(8.0).reshape(2, 2, 2).requires_grad_()
        w = ember.tensor([1., -1.], requires_grad=True)
        (y,) = cf(x, w)
        y.backward()
        assert y.item() == -16.0
        assert w.grad.tolist() == [6.0, 22.0], f"call {call}"
        assert x.grad.tolist() == [[[1.0, 1.0], [1.0, 1.0]], [[-1.0, -1.0], [-1.0, -1.0]]]


def _layout_gemm_then_reduce(p):
    """Bug 1's class: a GEMM operand that is a permuted/transposed/expanded/strided view, another operand
    that may require grad, and a reduction after the GEMM (an arena temporary the operand's slot could go to)."""
    made = {s.out: s for s in p.steps if s.out is not None}
    grads = {i[0] for i in p.inputs if i[3]}

    def laid_out(a):
        s = made.get(a)
        return s is not None and (s.op in ("permute", "transpose", "expand", "slice")
                                  or s.op == "view" and re.search(r"\.(permute|transpose|mT|t\(\)|expand)", s.template))
    for k, s in enumerate(p.steps):
        if s.op not in ("matmul", "linear"):
            continue
        laid = [a for a in s.args if laid_out(a)]
        others = [a for a in s.args if a not in laid]
        if laid and any(a in grads or a in made for a in others + laid[1:]) \
                and any(t.op == "reduce" for t in p.steps[k + 1:]):
            return True
    return False


def test_generator_makes_bug1_class_programs():
    """The fixed set holds many programs of bug 1's class. On the tree before the fix (8cdc8ab) the
    fuzzer found that bug: see the module docstring of ember.compiler.fuzz for the repros it minimised."""
    progs = [fuzz.generate(fuzz.program_seed(FIXED_SEED, i)) for i in range(FIXED_COUNT)]
    n = sum(_layout_gemm_then_reduce(p) for p in progs)
    assert n >= FIXED_COUNT // 10, n
    assert _layout_gemm_then_reduce(BUG1)


# ---- the machinery ---------------------------------------------------------------------------------------

def test_generator_is_deterministic_and_varied():
    a = [fuzz.generate(fuzz.program_seed(3, i)).source() for i in range(20)]
    b = [fuzz.generate(fuzz.program_seed(3, i)).source() for i in range(20)]
    assert a == b
    assert len(set(a)) == 20
    text = "\n".join(a + [fuzz.generate(fuzz.program_seed(4, i)).source() for i in range(60)])
    for op in ("matmul", "sum(", "permute", "softmax", "layer_norm", "expand", "_(", "[", "transpose"):
        assert op in text, op


def test_generated_programs_cover_dtypes_and_sizes():
    progs = [fuzz.generate(fuzz.program_seed(FIXED_SEED, i)) for i in range(FIXED_COUNT)]
    specs = [s for p in progs for s in p.specs()]
    dtypes = {d for _, d, _, _, _ in specs}
    assert {"float32", "float64", "int64", "int32"} <= dtypes
    dims = {d for s, *_ in specs for d in s}
    assert {0, 1, 7, 17} <= dims or {0, 1, 7, 9} <= dims, sorted(dims)
    assert any(g for _, _, g, _, _ in specs) and any(b is not None for _, _, _, b, _ in specs)
    assert any(t for *_, t in specs)                                  # non-contiguous arguments
    assert any(s.out is None for p in progs for s in p.steps)          # in-place statements
    assert any(max(math.prod(s) for s, *_ in p.specs()) > 1 << 16 for p in progs)   # past the OpenMP threshold


def test_compare_respects_dtype():
    f32 = np.array([1.0, 2.0, np.nan], np.float32)
    assert fuzz.compare(f32, f32 + np.float32(1e-5)) is None
    assert fuzz.compare(f32, f32 * np.float32(1.01)) is not None
    assert "NaN" in fuzz.compare(f32, np.array([1.0, 2.0, 3.0], np.float32))
    f64 = np.array([1.0, -2.0])
    assert fuzz.compare(f64, f64 + 1e-12) is None
    assert fuzz.compare(f64, f64 + 1e-7) is not None
    assert fuzz.compare(f64, f64 + 1e-7, prec="float32") is None        # went through float32 on the way
    i = np.array([1, 2, 3])
    assert fuzz.compare(i, i) is None and fuzz.compare(i, i + (i == 3)) is not None
    assert fuzz.compare(f64, f64.astype(np.float32)) is not None        # dtype
    # the tolerance grows with the accumulation length
    assert fuzz.compare(f32[:2], f32[:2] + np.float32(1e-3)) is not None
    assert fuzz.compare(f32[:2], f32[:2] + np.float32(1e-3), acc=400) is None
    # where eager is itself far from the float64 reference (an ill-conditioned value), compiled may be too
    e, c = np.array([0.003, 1.0], np.float32), np.array([0.013, 1.0], np.float32)
    assert fuzz.compare(e, c) is not None
    assert fuzz.compare(e, c, ref=np.array([0.0, 1.0])) is None
    assert fuzz.compare(e, c, ref=np.array([0.003, 1.0])) is not None      # eager is right: compiled is not
    assert fuzz.compare(e, np.array([np.nan, 1.0], np.float32), ref=np.array([0.003, 1.0])) is not None
    assert fuzz.compare(e, np.array([np.nan, 1.0], np.float32), ref=np.array([np.nan, 1.0])) is None


def test_combined_program_keeps_programs_independent():
    ps = [fuzz.generate(fuzz.program_seed(5, i)) for i in range(3)]
    whole = fuzz.combine(ps)
    assert len(whole.steps) == sum(len(p.steps) for p in ps)
    assert len(whole.outputs) == sum(len(p.outputs) for p in ps)
    run = fuzz._H["run"]
    outs, _, _ = run(whole.function(), whole.specs(), 1, 0)
    assert len(outs) == len(whole.outputs)


def test_minimiser_shrinks_an_injected_fault(monkeypatch):
    """A simulated codegen bug (compiled tanh off by a factor) in a 5-step program: the fuzzer reports
    it and the minimiser cuts the program down to the tanh."""
    from ember.compiler import native
    real = native._build_lib
    monkeypatch.setattr(native, "_build_lib", lambda src, name, ub, **kw: real(
        src.replace("tanhf(", "0.5f * tanhf("), name, ub, **kw))
    p = Program(
        inputs=[("x0", (3, 5), "float32", True, None), ("x1", (3, 4), "float32", True, None),
                ("x2", (4,), "float32", False, None)],
        steps=[Step("v1", "{0}.permute(1, 0)", ["x0"], "permute"),
               Step("v2", "ember.matmul({0}, {1})", ["v1", "x1"], "matmul"),
               Step("v3", "{0} + {1}", ["v2", "x2"], "binary"),
               Step("v4", "{0}.tanh()", ["v3"], "unary"),
               Step("v5", "{0}.sum(dim=1)", ["v4"], "reduce"),
               Step("v6", "{0} * 2.0", ["v5"], "scalar")],
        outputs=["v6", "v2"], acc=3, seed="fault")
    res = fuzz.check(p, seed=0)
    assert res.differs and res.call == 1, res     # the first call is the eager capture; replays run the C
    m, mr = fuzz.minimise(p, seed=0, budget_s=120)
    assert mr.differs
    assert len(m.steps) == 1 and ".tanh()" in m.steps[0].template and len(m.outputs) == 1, m.source()
    assert sum(math.prod(i[1]) for i in m.inputs) <= 2, m.inputs
    text = fuzz.repro(m, 0, mr)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(text, "<repro>", "exec"), {})
    diffs = [float(x) for x in re.findall(r"max \|eager - compiled\| = (\S+)", out.getvalue())]
    assert diffs and max(diffs) > 0.1, out.getvalue()
