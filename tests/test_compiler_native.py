"""The native backend (ember.compile's default): generated C against eager, fusion, caching, semantics.

Each compiled function costs one C compilation (a fraction of a second, then disk-cached), so tests
group many ops into one function where they can.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import logs

E = ember
RTOL = 1e-5


def _rng(seed=0):
    return np.random.default_rng(seed)


def T(*shape, dt=np.float32, lo=-2.0, hi=2.0, rg=False, seed=None, rng=[_rng(0)]):
    r = rng[0] if seed is None else _rng(seed)
    t = ember.tensor(r.uniform(lo, hi, shape).astype(dt))
    if rg:
        t.requires_grad_(True)
    return t


def native(cf):
    """The NativeRunner behind a compiled function's latest entry (fails if it fell back)."""
    run = cf.entries[-1].runner
    assert hasattr(run, "native"), "the program did not compile natively"
    return run.native


def fwd_kernels(cf):
    return [k for k in native(cf).kernels if k.name.startswith("f_")]


def close(a, b, rtol=RTOL, atol=1e-6):
    an = a.detach().numpy() if isinstance(a, ember.Tensor) else np.asarray(a)
    bn = b.detach().numpy() if isinstance(b, ember.Tensor) else np.asarray(b)
    assert an.dtype == bn.dtype and an.shape == bn.shape, (an.dtype, bn.dtype, an.shape, bn.shape)
    if an.dtype.kind == "f":
        np.testing.assert_allclose(bn, an, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(bn, an)


def compare(fn, *args, grads=False, calls=2, expect_native=True):
    """Run fn eagerly and compiled on equal copies of args; compare outputs (and input gradients)."""
    a1 = list(args)
    a2 = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, ember.Tensor) else a for a in args]
    cf = ember.compile(fn)
    for _ in range(calls):
        r1, r2 = fn(*a1), cf(*a2)
        r1 = r1 if isinstance(r1, tuple) else (r1,)
        r2 = r2 if isinstance(r2, tuple) else (r2,)
        assert len(r1) == len(r2)
        for i, (x, y) in enumerate(zip(r1, r2)):
            close(x, y)
        for x, y in zip(a1, a2):
            if isinstance(x, ember.Tensor):
                close(x, y)
        if grads:
            sum((r * (k + 1)).sum() for k, r in enumerate(r1) if r.dtype.is_floating_point).backward()
            sum((r * (k + 1)).sum() for k, r in enumerate(r2) if r.dtype.is_floating_point).backward()
            for x, y in zip(a1, a2):
                if isinstance(x, ember.Tensor) and x.requires_grad:
                    close(x.grad, y.grad)
                    x.grad = None
                    y.grad = None
    if expect_native:
        native(cf)
    return cf


# ---- fusion -----------------------------------------------------------------------------------------------

def test_elementwise_chain_is_one_kernel():
    def chain(x, y):
        return ((((x * 2 + y).exp() - 1).tanh() * 0.5 + x).sigmoid() / (y.abs() + 1)).sqrt().neg()
    cf = compare(chain, T(33, 17), T(17))
    assert len(fwd_kernels(cf)) == 1
    assert native(cf).extern_count == 0


def test_softmax_is_at_most_two_kernels_and_grads_match():
    cf = compare(lambda x: x.softmax(-1), T(8, 37, rg=True), grads=True)
    assert len(fwd_kernels(cf)) <= 2
    cf = compare(lambda x: F.log_softmax(x * 3, dim=1), T(5, 11, rg=True), grads=True)
    assert len(fwd_kernels(cf)) <= 2


def test_layer_norm_forward_is_one_or_two_kernels():
    def ln(x, w, b):
        return F.layer_norm(x, (24,), w, b)
    cf = compare(ln, T(6, 24, rg=True), T(24, rg=True), T(24, rg=True), grads=True)
    assert 1 <= len(fwd_kernels(cf)) <= 2


def test_linear_bias_activation_fuses_into_the_matmul():
    def mlp_layer(x, w, b):
        return F.gelu(F.linear(x, w, b))
    cf = compare(mlp_layer, T(16, 12, rg=True), T(20, 12, rg=True), T(20, rg=True), grads=True)
    ks = fwd_kernels(cf)
    # one kernel: the GEMM, then bias + gelu (and the pre-activation the backward reads) in its epilogue
    assert len(ks) == 1 and ks[0].kind == "matmul" and len(ks[0].stmts) >= 2


# ---- op coverage against eager --------------------------------------------------------------------------------

def _unary(x):
    p = x.abs() + 0.1
    return (x.exp(), p.log(), p.sqrt(), p.rsqrt(), x.tanh(), x.sigmoid(), x.relu(), x.abs(), x.neg(), x.sin(),
            x.cos(), x.floor(), x.ceil(), x.trunc(), x.round(), x.sign(), x.frac(), x.expm1(), p.log1p(), p.log2(),
            p.log10(), x.exp2(), p.reciprocal(), x.square(), x.erf(), x.erfc(), x.atan(), x.sinh(), x.cosh(),
            x.asinh(), x.clamp(-0.5, 0.7), x.clamp(min=0.1), x ** 2, x ** 3, p ** 0.5, 2 ** x, x.isnan(),
            x.isfinite(), x > 0.3, x <= -0.1, (x > 0) & (x < 1), ~(x > 0), E.where(x > 0, x, 0.0),
            x.lerp(x * 2, 0.3), x.addcmul(x, x, value=0.5), x.addcdiv(x, p, value=2), F.softshrink(x),
            F.hardshrink(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.mish(x), F.softplus(x),
            F.elu(x), F.selu(x), F.leaky_relu(x, 0.1), F.hardtanh(x), F.hardswish(x), F.hardsigmoid(x),
            F.logsigmoid(x), F.relu6(x), x.deg2rad(), x.nan_to_num(), x.logit(eps=0.1), F.threshold(x, 0.1, 20.0),
            x.to(ember.float64), x.to(ember.int64), x.masked_fill(x > 1, 3.0), x.tril(), x.triu(1), x.flip(0),
            x.t(), x[1:3, ::2], x[:, None, 1], x.reshape(-1), x.expand(2, *x.shape))


def _binary(x, y):
    return (x + y, x - y, x * y, x / y, E.maximum(x, y), E.minimum(x, y), E.atan2(x, y), x.fmod(y),
            x.remainder(y), E.hypot(x, y), x.pow(y.abs()), x > y, x.copysign(y), E.fmax(x, y), x + 1, 2 - x,
            x * 3.5, 1 / (y.abs() + 1), x.add(y, alpha=2), x.sub(y, alpha=0.5), E.xlogy(x.abs(), y.abs()),
            E.cat([x, y], 0), E.cat([x, y, x], 1), E.stack([x, y]), F.pad(x, (1, 2)),
            F.pad(x, (1, 1, 2, 0), value=3.0), F.pad(x, (-1, 1)))


def _reductions(x):
    return (x.sum(), x.sum(0), x.sum(1), x.sum((0, 1), keepdim=True), x.mean(), x.mean(-1), x.amax(0), x.amin(1),
            x.argmax(), x.argmax(1), x.argmin(0), x.max(), x.amin(), x.prod(1),
            x.var(1), x.std(0), x.logsumexp(1), (x > 0).all(1), (x > 0).any(0), x.softmax(1), x.log_softmax(1),
            x.softmax(0), x.norm(), x.cumsum(0), x.nansum())


@pytest.mark.parametrize("fn,shapes", [(_unary, [(4, 6)]), (_binary, [(4, 6), (4, 6)]), (_reductions, [(5, 7)])])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_ops_match_eager(fn, shapes, dt):
    cf = compare(fn, *[T(*s, dt=dt) for s in shapes])
    assert native(cf).kernel_count >= 1


def test_reductions_over_middle_and_leading_dims():
    def f(x):
        return x.sum(1), x.mean(0), x.sum((0, 2)), x.var(1), x.softmax(1)
    compare(f, T(3, 300, 5, rg=True), grads=True)
    compare(lambda x: (x.sum(0), x.argmin(0), x.amax(0), x.amax((0, 2)), x[:, :2].argmax(1)),
            T(700, 3, 2))


def test_matmul_layouts_and_gradients():
    def f(a, b, c, v):
        return (a @ b, a.t() @ a, b.t() @ a.t(), E.bmm(c, c.transpose(1, 2)), c @ b[:5], a @ v, v @ b,
                E.matmul(c[0], c.transpose(1, 2)), E.addmm(v[:4], a, b, beta=0.5, alpha=2.0))
    compare(f, T(3, 5, rg=True), T(5, 4, rg=True), T(2, 3, 5, rg=True), T(5, rg=True), grads=True)



# A view materialised as a GEMM operand (a permute BLAS cannot read in place) that is also returned or
# saved for backward must get a fresh array: issue 9's wrong gradient came from the backward reading the
# arena slot a later reduction had reused (w.grad == [-2, 10] instead of [6, 22] from the second call on).
_GEMM_VIEW_PROGRAMS = {
    "permute_matmul_sum_dim": lambda x, w: E.matmul(x.permute(2, 1, 0), w).sum(dim=1).sum(),
    "permute_matmul_returns_view": lambda x, w: (E.matmul(x.permute(2, 1, 0), w).sum(1), x.permute(2, 1, 0)),
    "permute_matmul_mean_keepdim": lambda x, w: E.matmul(x.permute(1, 2, 0), w).mean(0, keepdim=True).exp(),
    "permute_bmm_amax": lambda x, w: E.matmul(x.permute(2, 0, 1), x.permute(2, 1, 0)).amax(-1).sum() * w.sum(),
    "sliced_permute_matmul": lambda x, w: E.matmul(x[:, 1:].permute(2, 1, 0), w).sum(1).sum(),
}


@pytest.mark.parametrize("name", sorted(_GEMM_VIEW_PROGRAMS))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gemm_operand_views_saved_for_backward_get_fresh_arrays(name, dt):
    fn = _GEMM_VIEW_PROGRAMS[name]
    cf = ember.compile(fn)
    for call in range(3):
        xs = (np.arange(8.0) * (call + 1) - 3).reshape(2, 2, 2).astype(dt)
        ws = np.array([1.0, -1.0 - call], dtype=dt)
        outs = []
        for f in (fn, cf):
            x = ember.tensor(xs, requires_grad=True)
            w = ember.tensor(ws, requires_grad=True)
            r = f(x, w)
            r = r if isinstance(r, tuple) else (r,)
            sum((o * (k + 1)).sum() for k, o in enumerate(r)).backward()
            outs.append([o.detach() for o in r] + [x.grad, w.grad])
        for a, b in zip(*outs):
            close(a, b)
    native(cf)


def test_issue9_compiled_gradient_of_permuted_gemm_operand():
    f = lambda x, w: E.matmul(x.permute(2, 1, 0), w).sum(dim=1).sum()
    cf = ember.compile(f)
    for _ in range(3):
        x = E.arange(8.0).reshape(2, 2, 2).requires_grad_()
        w = E.tensor([1., -1.], requires_grad=True)
        cf(x, w).backward()
        assert w.grad.tolist() == [6.0, 22.0]
        assert x.grad.tolist() == [[[1.0, 1.0], [1.0, 1.0]], [[-1.0, -1.0], [-1.0, -1.0]]]

def test_float64_and_int_paths():
    def f(x, i):
        return (x * 2).sum(1), (i * 3 + 1).sum(), i.amax(0), (i > 2).sum(), x.exp(), i.abs() - i // 1
    compare(f, T(4, 3, dt=np.float64), ember.tensor(_rng(3).integers(0, 5, (4, 3))))


# ---- semantics: in-place writes, views, graph breaks, externs -------------------------------------------------

def test_inplace_writes_into_arguments_and_views():
    def f(x, y):
        x.add_(1)
        y.mul_(x)
        x[0].mul_(2)
        x[:, 1].add_(5)
        return x * y, x.sum(0)
    compare(f, T(3, 4), T(3, 4), calls=3)


def test_values_computed_before_a_write_keep_their_value():
    def f(x):
        y = x * 2
        c = x.clone()
        v = x.view(-1)
        x.add_(1)
        return y + x, c, v * 1
    compare(f, T(3, 4), calls=3)


def test_write_reading_its_own_target_elsewhere():
    def f(x):
        x.copy_(x.flip(0) + 1)
        x[1:].add_(x[:-1])
        return x
    compare(f, T(5, 3), calls=2)


def test_graph_break_guards_and_undo():
    def f(x, w):
        w.add_(1)                      # written before the break: undone if the guard fails
        if (x.sum() > 0).item():
            return x * w
        return x - w
    x_pos = ember.ones(3, 3)
    x_neg = -ember.ones(3, 3)
    w1, w2 = ember.zeros(3, 3), ember.zeros(3, 3)
    cf = ember.compile(f)
    for x in (x_pos, x_pos, x_neg, x_pos, x_neg):
        close(f(x, w1), cf(x, w2))
        close(w1, w2)


def test_extern_ops_between_native_segments():
    def f(x):
        y = x.roll(1, 1) * 2 + ember.einsum("ij,ij->i", x, x)[:, None]
        return y.tanh(), ember.linalg.cross(x[:, :3], y[:, 1:4]).exp()
    cf = compare(f, T(3, 5, rg=True), grads=True)
    assert native(cf).extern_count >= 1


def test_cross_entropy_bad_target_raises_like_eager():
    x = T(4, 3)
    y = ember.tensor(np.array([0, 1, 5, 2]))
    cf = ember.compile(lambda x, y: F.cross_entropy(x, y))
    cf(x, ember.tensor(np.array([0, 1, 2, 2])))
    with pytest.raises(IndexError) as eager:
        F.cross_entropy(x, y)
    with pytest.raises(IndexError) as comp:
        cf(x, y)
    assert str(eager.value) == str(comp.value)


def test_embedding_and_its_gradient():
    def f(idx, w):
        return F.embedding(idx, w, padding_idx=1).sum(1)
    compare(f, ember.tensor(_rng(5).integers(0, 10, (4, 3))), T(10, 5, rg=True), grads=True)


# ---- training steps ---------------------------------------------------------------------------------------------

def _mlp_steps(opt_name, steps, batch=64, compiled=True, seed=0):
    ember.manual_seed(seed)
    model = nn.Sequential(nn.Linear(784, 256), nn.Softshrink(), nn.Linear(256, 256), nn.Softshrink(),
                          nn.Linear(256, 256), nn.Softshrink(), nn.Linear(256, 10))
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if opt_name == "sgd" else \
        ember.optim.Adam(model.parameters(), lr=1e-3)
    r = _rng(1)
    x = ember.tensor(r.standard_normal((batch, 784)).astype(np.float32))
    y = ember.tensor(r.integers(0, 10, batch))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    f = ember.compile(step) if compiled else step
    losses = [f(x, y).item() for _ in range(steps)]
    return losses, model, f


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_mlp_training_matches_eager(opt_name):
    le, me, _ = _mlp_steps(opt_name, 20, compiled=False)
    lc, mc, cf = _mlp_steps(opt_name, 20, compiled=True)
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for pe, pc in zip(me.parameters(), mc.parameters()):
        close(pe, pc, rtol=1e-4, atol=1e-6)
    run = native(cf)
    assert run.extern_count == 0
    assert all(not k.kind == "loop" or len(k.stmts) >= 1 for k in run.kernels)


def test_gpt_like_training_step_is_native():
    from ember.bench import models as M
    cfg = M.GPTConfig(n_layer=1, n_embd=32, n_head=4, block_size=8, vocab_size=50)

    def run(compiled):
        ember.manual_seed(0)
        model = M.gpt(ember, cfg)
        opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
        idx, tgt = M.gpt_batch(ember, batch=2, block_size=8, vocab_size=50)

        def step(idx, tgt):
            opt.zero_grad()
            _, loss = model(idx, tgt)
            loss.backward()
            opt.step()
            return loss.detach()
        f = ember.compile(step) if compiled else step
        return [f(idx, tgt).item() for _ in range(4)], f
    le, _ = run(False)
    lc, cf = run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    assert native(cf).extern_count == 0


# ---- caching, logs, autotune -----------------------------------------------------------------------------------

def test_second_process_hits_the_disk_cache(tmp_path):
    script = textwrap.dedent("""
        import ember
        from ember.compiler import build
        f = ember.compile(lambda x: (x * 3 + 1).tanh().sum(0))
        f(ember.ones(5, 4))            # traces (runs eagerly)
        r = f(ember.ones(5, 4))        # runs the compiled code: builds it, or loads it from the cache
        print("RESULT", float(r.sum()), build.STATS["compiles"], build.STATS["disk_hits"])
    """)
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), EMBER_LOGS="")
    outs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")][0].split()
        outs.append((float(line[1]), int(line[2]), int(line[3])))
    (v1, c1, _), (v2, c2, h2) = outs
    assert v1 == v2
    assert c1 >= 1            # the first process compiled
    assert c2 == 0 and h2 >= 1   # the second only loaded from the cache


def test_logs_print_the_code_and_the_kernels(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))     # (a plan cache hit renders no code to print)
    logs.set_logs("kernels,output_code")
    try:
        f = ember.compile(lambda x: (x.exp() * 2).sum(1))
        f(ember.ones(3, 4))           # traces
        f(ember.ones(3, 4))           # the first replay generates and builds the code
    finally:
        logs.set_logs("")
    err = capsys.readouterr().err
    assert "void f_seg0(void **bufs)" in err
    assert "kernel(s)" in err and "[row]" in err


def test_max_autotune_matches_eager(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    w = T(6, 5)
    w_c = w.clone()

    def step(x, w):
        y = (x @ w).relu().sum()
        w.sub_(x.t() @ ember.ones(4, 5) * 0.01)
        return y
    x = T(4, 6)
    cf = ember.compile(step, mode="max-autotune")
    for _ in range(3):
        close(step(x, w), cf(x, w_c))
        close(w, w_c)
    tuner = native(cf).autotuner
    assert tuner.done and tuner.choice is not None and tuner.timings


def test_declined_programs_fall_back_to_the_interpreter():
    def f(x):
        x.mul_(2)                      # an in-place write in float16: not computed natively
        return x + 1
    cf = ember.compile(f)
    a = T(3, 3).half()
    b = a.clone()
    close(f(a), cf(b))
    close(a, b)
    assert not hasattr(cf.entries[-1].runner, "native")


def test_codegen_variants_agree():
    """Every variant autotuning may pick computes the same values (split GEMMs, generated matmul loops,
    OpenMP thresholds)."""
    from ember.compiler.render_c import Options
    from ember.compiler.native import _render, _build_lib

    def f(x, w, w2):
        h = F.relu(x @ w.t())            # non-negative: the products below have no cancellation
        return (h @ w2).tanh(), h.t() @ h, h.sum(0)
    args = (T(128, 96), T(80, 96, lo=-0.2, hi=0.2), T(80, 40, lo=-0.2, hi=0.2))
    cf = compare(f, *args)
    run = native(cf)
    want = [r.numpy() for r in f(*args)]
    for opts in (Options(gemm_split_min=0, parallel_min=1), Options(small_gemm_loops=1 << 62),
                 Options(blas_threads=2, parallel_min=1 << 62)):
        src, uses_blas = _render(run.parts, opts, "variant")
        run.use_library(_build_lib(src, "variant", uses_blas), src)
        got = cf(*args)
        for g, w_ in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w_, rtol=1e-5, atol=1e-6)


def test_integer_advanced_indexing_runs_natively_with_its_backward():
    def f(x, t, r):
        return x[r, t], x[:, t] * 2, x[t[2:4]], x[ember.tensor([-1, 2])]
    x = T(5, 7, rg=True)
    t = ember.tensor([1, 6, 0, 3, 3])
    cf = compare(f, x, t, ember.arange(5), grads=True)
    assert native(cf).extern_count == 0
    # new index values replay; an out-of-range one raises torch's exception type
    close(cf(x, ember.tensor([2, 5, 4, 0, 1]), ember.arange(5))[1], f(x, ember.tensor([2, 5, 4, 0, 1]), ember.arange(5))[1])
    with pytest.raises(IndexError, match="out of bounds"):
        cf(x, ember.tensor([1, 9, 0, 3, 3]), ember.arange(5))


def test_kernel_times_when_built_with_timing(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_KERNEL_TIMING", "1")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    cf = ember.compile(lambda x, w: (x @ w).relu().sum())
    x, w = T(32, 16), T(16, 8)
    for _ in range(3):
        close(cf(x, w), (x @ w).relu().sum())
    rows = ember.compiler.kernel_times(cf)
    assert rows and all(calls == 2 and s > 0 for _, _, calls, s in rows)    # built on the 2nd call, ran twice
    assert any("matmul" in what for _, what, _, _ in rows)
    monkeypatch.delenv("EMBER_KERNEL_TIMING")
    cg = ember.compile(lambda x: x * 2)
    cg(x), cg(x)
    assert ember.compiler.kernel_times(cg) == []


@pytest.mark.parametrize("native_gemm", ["1", "0"])
def test_large_float32_gemms_in_every_layout(native_gemm, monkeypatch, tmp_path):
    """GEMMs above gemm.MIN_WORK run ember's AVX-512 kernel (where the CPU has it; else the BLAS): every
    transpose combination, odd sizes that leave partial register tiles, and K spanning several blocks.
    Values and gradients against eager; the tolerance allows float32 sums over K=517 taken in another
    order (each GEMM's error against float64 is the BLAS's: ~1e-6 here), a wrong tile would be off by O(1)."""
    monkeypatch.setenv("EMBER_NATIVE_GEMM", native_gemm)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))

    def f(a, b, c):
        return a @ b, a.T @ c, (b.T @ a.T).relu(), ember.nn.functional.linear(a, b.T) * 2

    shapes = ((131, 517), (517, 67), (131, 45))
    cf = ember.compile(f)
    for seed in range(3):
        xs = [T(*s, lo=-0.25, hi=0.25, rg=True, seed=seed * 10 + i) for i, s in enumerate(shapes)]
        ys = [x.detach().clone().requires_grad_(True) for x in xs]
        r1, r2 = f(*xs), cf(*ys)
        for u, v in zip(r1, r2):
            np.testing.assert_allclose(v.detach().numpy(), u.detach().numpy(), rtol=1e-4, atol=1e-5)
        sum((r * (k + 1)).sum() for k, r in enumerate(r1)).backward()
        sum((r * (k + 1)).sum() for k, r in enumerate(r2)).backward()
        for x, y in zip(xs, ys):
            np.testing.assert_allclose(y.grad.numpy(), x.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert ("EM_SGEMM_OR" in native(cf).source) == (native_gemm == "1")
