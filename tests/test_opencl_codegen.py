"""Generated OpenCL kernels (ember.compiler.render_cl / cl_runner / cl_eager / cl_gemm) against ember's
CPU results. Many ops share one compiled program (one build); the binary cache makes later runs load
instead of build. Skipped only when no OpenCL platform with a device exists."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import cl_device

pytestmark = pytest.mark.skipif(not cl_device.available(),
                                reason=f"no OpenCL platform/device: {cl_device.unavailable_reason()}")

RTOL, ATOL = 2e-5, 2e-6
# "gpu_style": the kernels rendered for a GPU (grid-stride loops, work-group row reductions in local
# memory, local-memory GEMM tiles), run on whatever device there is
TARGETS = ["device", "gpu_style"]


@pytest.fixture(scope="module")
def rt():
    return cl_device.runtime()


def T(a):
    return ember.tensor(np.asarray(a))


def _program(fn, args):
    """The program ember.compile captured for ``fn(*args)`` (CPU), and its CPU result."""
    cf = ember.compile(fn)
    ref = cf(*args)
    return cf.entries[-1].program, ref


def _target(name):
    from ember.compiler import render_cl
    if name == "gpu_style":
        return render_cl.Device(fp64=cl_device.runtime().fp64, is_cpu=False, compute_units=8, max_work_group=256)
    return None


def _run(rt, prog, args, target="device"):
    from ember.compiler.cl_runner import CLRunner
    r = CLRunner(prog, target=_target(target))
    res = r([rt.to_device(a.detach().numpy()) for a in args], [rt.to_device(v.ref.detach().numpy())
                                                                for v in prog.lifted])
    return r, res


def _same(got, want, name=""):
    want = np.asarray(want)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


def _inputs(rng, dt=np.float32):
    return dict(
        x=T(rng.standard_normal((6, 37)).astype(dt)),
        y=T(rng.standard_normal((6, 37)).astype(dt)),
        pos=T(rng.uniform(0.1, 3.0, (6, 37)).astype(dt)),
        b=T(rng.standard_normal((37,)).astype(dt)),
        c=T(rng.standard_normal((6, 1)).astype(dt)),
        i=T(rng.integers(-50, 50, (6, 37))),
    )


def _many_ops(x, y, pos, b, c, i):
    """Elementwise (broadcasting, comparisons, where), reductions (dims, keepdim, arg-, bool), row ops
    (softmax, log_softmax, layer norm), casts and integer arithmetic: one program."""
    return dict(
        exp=x.exp(), log=pos.log(), sqrt=pos.sqrt(), tanh=x.tanh(), sigmoid=x.sigmoid(), sin=x.sin(),
        cos=x.cos(), abs=x.abs(), neg=-x, floor=(x * 3).floor(), ceil=(x * 3).ceil(), round=(x * 3).round(),
        erf=x.erf(), recip=pos.reciprocal(), rsqrt=pos.rsqrt(), expm1=x.expm1(), log1p=pos.log1p(),
        sign=x.sign(), addb=x + b, mulc=x * c, div=x / pos, pow2=x ** 2, powf=pos ** 1.7,
        maximum=ember.maximum(x, y), minimum=ember.minimum(x, y), atan2=ember.atan2(x, y),
        fmod=ember.fmod(x, pos), rem=ember.remainder(x, pos), lt=x < y, ge=x >= b, eq=i == 3,
        where=ember.where(x > 0, x, y), clamp=x.clamp(-0.5, 0.5),
        sum0=x.sum(0), sum1=x.sum(1), sumall=x.sum(), sumk=x.sum(1, keepdim=True), mean=x.mean(0),
        var=x.var(1), amax=x.amax(1), amin=x.amin(0), argmax=x.argmax(1), argmin=x.argmin(0),
        prod=(pos * 0.5 + 0.75).prod(1), anyb=(x > 1.5).any(1), allb=(x > -3).all(0),
        softmax=x.softmax(-1), logsm=F.log_softmax(x, 0), ln=F.layer_norm(x, (37,)),
        toint=(x * 10).to(ember.int32), toi8=(x * 10).to(ember.int8), tou8=(pos * 10).to(ember.uint8),
        tofl=i.float(), boolf=(x > 0).float(), i16=i.to(ember.int16) * 2, iadd=i + 3, imul=i * i,
        ineg=-i, iabs=i.abs(), imax=i.amax(0), isum=i.sum(1), ge_i=i >= 0, ibool=(i > 0) & (x > 0),
        relu=F.relu(x), gelu=F.gelu(x), silu=F.silu(x), softplus=F.softplus(x),
    )


@pytest.mark.parametrize("target", TARGETS)
def test_many_ops_one_program(rt, target):
    rng = np.random.default_rng(0)
    ins = _inputs(rng)
    args = tuple(ins.values())
    prog, ref = _program(_many_ops, args)
    r, res = _run(rt, prog, args, target)
    assert r.extern_count == 0
    eager = _many_ops(*args)
    for k in eager:
        _same(rt.to_host(res.outputs[k]), eager[k].numpy(), k)
        _same(rt.to_host(res.outputs[k]), ref[k].numpy(), k)


@pytest.mark.parametrize("target", TARGETS)
def test_long_rows(rt, target):
    """Reductions over rows long enough for work-group reductions (GPU style), with NaN, ties and
    constant rows for max/argmax, integer rows, per-row values read back in the same kernel, and whole-
    tensor reductions."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 300)).astype(np.float32)
    x[1, 17] = np.nan
    x[2, 5] = x[2, 250] = 9.0
    x[3, :] = 1.0
    args = (T(x), T(rng.integers(-9, 9, (5, 300))), T(rng.standard_normal((300,)).astype(np.float32)))

    def f(x, xi, w):
        xn = x.nan_to_num()
        return dict(sm=x.softmax(-1), lsm=F.log_softmax(x, 1), ln=F.layer_norm(x, (300,), w), s=x.sum(1),
                    mx=x.amax(1), mn=x.amin(1), am=x.argmax(1), ami=x.argmin(1), pr=(x * 0.01 + 1).prod(1),
                    an=(x > 2).any(1), al=(x > -5).all(1), isum=xi.sum(1), imax=xi.amax(1), iam=xi.argmax(1),
                    tot=xn.sum(), mean=x.mean(1, keepdim=True), var=x.var(1), one=xn[0].amax(),
                    rs=(xn * xn.sum(1, keepdim=True)).sum(1))
    prog, ref = _program(f, args)
    _, res = _run(rt, prog, args, target)
    for k in ref:
        _same(rt.to_host(res.outputs[k]), ref[k].numpy(), k)


def test_float64(rt):
    if not rt.fp64:
        pytest.skip("the OpenCL device has no cl_khr_fp64")
    rng = np.random.default_rng(1)
    x, y = T(rng.standard_normal((5, 33))), T(rng.standard_normal((33, 7)))

    def f(x, y):
        return dict(exp=x.exp(), sum=x.sum(1), sm=x.softmax(0), mm=x @ y, f32=x.float(), var=x.var(0),
                    erf=x.erf(), back=(x.float() * 2).double() - x)
    prog, ref = _program(f, (x, y))
    _, res = _run(rt, prog, (x, y))
    for k in ref:
        _same(rt.to_host(res.outputs[k]), ref[k].numpy(), k)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_tails_and_layouts(rt, target):
    """Sizes that are not tile multiples, batched, and operands transposed through strides (the four
    layouts: A @ B, A.T @ B, A @ B.T, A.T @ B.T), with a fused epilogue; one program."""
    rng = np.random.default_rng(2)
    args = []
    for nb, M, K, N in [(1, 1, 1, 1), (3, 17, 13, 19), (2, 64, 40, 33), (1, 5, 70, 9)]:
        args += [T(rng.standard_normal(s).astype(np.float32)) for s in ((nb, M, K), (nb, K, M), (nb, K, N), (nb, N, K))]

    def f(*ts):
        out = []
        for j in range(0, len(ts), 4):
            a, at, b, bt = ts[j:j + 4]
            out += [a @ b, at.transpose(1, 2) @ b, a @ bt.transpose(1, 2), at.transpose(1, 2) @ bt.transpose(1, 2),
                    (a @ b).relu() + 1]
        return out
    prog, ref = _program(f, tuple(args))
    _, res = _run(rt, prog, tuple(args), target)
    for k, (got, want) in enumerate(zip(res.outputs, ref)):
        np.testing.assert_allclose(rt.to_host(got), want.numpy(), rtol=1e-4, atol=1e-4, err_msg=str(k))


def _mlp(seed=0):
    ember.manual_seed(seed)
    return nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, 48), nn.Tanh(), nn.Linear(48, 5))


def test_mlp_forward_backward(rt):
    """A compiled MLP forward with its ahead-of-time backward: device outputs and gradients against
    ember's CPU eager ones."""
    model = _mlp()
    rng = np.random.default_rng(3)
    x = T(rng.standard_normal((37, 20)).astype(np.float32))
    y = T(rng.integers(0, 5, (37,)))

    def f(x, y):
        return F.cross_entropy(model(x), y)
    prog, ref = _program(f, (x, y))
    assert prog.backward is not None
    from ember.compiler.cl_runner import CLRunner
    r = CLRunner(prog)
    params = [rt.to_device(v.ref.detach().numpy()) for v in prog.lifted]
    res = r([rt.to_device(x.numpy()), rt.to_device(y.numpy())], params)
    loss = f(x, y)
    loss.backward()
    np.testing.assert_allclose(rt.to_host(res.outputs), loss.item(), rtol=1e-5)
    bw_lifted = [rt.to_device(v.ref.detach().numpy()) for v in prog.backward.lifted]
    grads = r.backward(res, [rt.to_device(np.ones((), np.float32))], bw_lifted)
    by_param = {id(p): p for p in model.parameters()}
    for v, g in zip(prog.backward.grad_targets, grads):
        p = by_param[id(v.ref)]
        np.testing.assert_allclose(rt.to_host(g), p.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_training_step(rt, opt_name):
    """A whole compiled training step (zero_grad, forward, loss, backward, optimizer step) on the
    device against ember.compile on the CPU: same losses and parameters after 3 steps."""
    model = _mlp(1)
    opt = (ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if opt_name == "sgd"
           else ember.optim.Adam(model.parameters(), lr=1e-2))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    cs = ember.compile(step)
    rng = np.random.default_rng(4)
    x = T(rng.standard_normal((64, 20)).astype(np.float32))
    y = T(rng.integers(0, 5, (64,)))
    for _ in range(3):                  # trace, state initialised, retrace: the steady-state program
        cs(x, y)
    prog = cs.entries[-1].program
    lifted = [v.ref for v in prog.lifted]
    snap = [rt.to_device(t.detach().numpy()) for t in lifted]
    ref_losses = [cs(x, y).item() for _ in range(3)]
    from ember.compiler.cl_runner import CLRunner
    r = CLRunner(prog)
    assert r.extern_count == 0
    dx, dy = rt.to_device(x.numpy()), rt.to_device(y.numpy())
    losses = [float(rt.to_host(r([dx, dy], snap).outputs)) for _ in range(3)]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for t, d in zip(lifted, snap):
        np.testing.assert_allclose(rt.to_host(d), t.detach().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_embedding_backward(rt, target):
    """Embedding forward (a checked gather) and backward (a scatter-add, parallel over columns on the
    device), with a padding index and repeated indices."""
    from ember.compiler.cl_runner import CLRunner
    ember.manual_seed(2)
    emb = nn.Embedding(11, 19, padding_idx=3)
    idx = T(np.array([[1, 3, 4, 1], [10, 0, 3, 1]]))

    def f(i):
        return emb(i).tanh().sum()
    prog, ref = _program(f, (idx,))
    r = CLRunner(prog, target=_target(target))
    res = r([rt.to_device(idx.numpy())], [rt.to_device(v.ref.detach().numpy()) for v in prog.lifted])
    emb.weight.grad = None
    loss = f(idx)
    loss.backward()
    np.testing.assert_allclose(rt.to_host(res.outputs), loss.item(), rtol=1e-5)
    grads = r.backward(res, [rt.to_device(np.ones((), np.float32))],
                       [rt.to_device(v.ref.detach().numpy()) for v in prog.backward.lifted])
    np.testing.assert_allclose(rt.to_host(grads[0]), emb.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(IndexError):
        r([rt.to_device(np.array([[1, 3, 4, 1], [10, 0, 11, 1]]))],
          [rt.to_device(v.ref.detach().numpy()) for v in prog.lifted])


def test_extern_runs_on_host_counted(rt):
    from ember.compiler.cl_runner import STATS
    x = T(np.random.default_rng(5).standard_normal((4, 9)).astype(np.float32))

    def f(x):
        return (x.exp().mode(1).values * 2).sum(0)
    prog, ref = _program(f, (x,))
    before = STATS["host_fallbacks"]
    r, res = _run(rt, prog, (x,))
    assert r.extern_count == 1 and STATS["host_fallbacks"] == before + 1
    _same(rt.to_host(res.outputs), ref.numpy())


def test_strided_and_overlapping_inputs(rt):
    """A strided input runs from a contiguous copy (copied back when the program writes it); a written
    input sharing memory with another input is refused."""
    from ember.compiler.cl_runner import CLRunner
    rng = np.random.default_rng(8)
    x0 = rng.standard_normal((3, 5)).astype(np.float32)
    y0 = rng.standard_normal((3, 5)).astype(np.float32)

    def f(x, y):
        x.mul_(2)
        return x + y
    prog, _ = _program(f, (T(x0), T(y0)))
    r = CLRunner(prog)
    base = rt.to_device(np.ascontiguousarray(x0.T))           # x is a transposed view of it
    xt = base.view(base.offset, (3, 5), (1, 3))
    out = r([xt, rt.to_device(y0)]).outputs
    np.testing.assert_allclose(rt.to_host(out), x0 * 2 + y0, rtol=1e-6)
    np.testing.assert_allclose(rt.to_host(base), (x0 * 2).T, rtol=1e-6)   # written back through the view
    shared = rt.to_device(y0)
    with pytest.raises(ValueError, match="share memory"):
        r([shared, shared])


# ---- eager ops ---------------------------------------------------------------------------------------

def _call(fn, *args):
    """(op, args, attrs) of the op the public call ``fn(*args)`` dispatches (what the dispatcher sees)."""
    from ember.ops import registry
    calls = []

    def hook(op, a, attrs, run):
        calls.append((op, a, attrs))
        return run()
    registry.HOOKS.insert(0, hook)
    try:
        out = fn(*args)
    finally:
        registry.HOOKS.remove(hook)
    assert len(calls) == 1, [c[0].name for c in calls]
    return calls[0] + (out,)


EAGER = [
    ("exp", lambda a: a.exp(), [(7, 33)]),
    ("add_bcast", lambda a, b: a + b, [(7, 33), (33,)]),
    ("mul_scalar", lambda a: a * 2.5, [(7, 33)]),
    ("sum_keepdim", lambda a: a.sum(0, keepdim=True), [(7, 33)]),
    ("softmax", lambda a: a.softmax(-1), [(7, 33)]),
    ("matmul", lambda a, b: a @ b, [(7, 33), (33, 9)]),
    ("to_int64", lambda a: a.to(ember.int64), [(7, 33)]),
    ("gt", lambda a, b: a > b, [(7, 33), (7, 33)]),
]


@pytest.mark.parametrize("name,fn,shapes", EAGER, ids=[e[0] for e in EAGER])
def test_eager_kernel_for(rt, name, fn, shapes):
    from ember.compiler import cl_eager
    rng = np.random.default_rng(6)
    ins = [T((rng.standard_normal(s) * 4).astype(np.float32)) for s in shapes]
    op, args, attrs, out = _call(fn, *ins)
    specs = [(tuple(a.shape), a.dtype) if isinstance(a, ember.Tensor) else a for a in args]
    run = cl_eager.kernel_for(op, specs, attrs)
    assert run is not None, op.name
    assert cl_eager.kernel_for(op, specs, attrs) is run          # cached
    got = run([rt.to_device(a.numpy()) for a in args if isinstance(a, ember.Tensor)])
    want = out if isinstance(out, tuple) else (out,)
    for g, w in zip(got, want):
        if w.dtype.is_floating_point:
            np.testing.assert_allclose(rt.to_host(g), w.numpy(), rtol=1e-5, atol=1e-6)
        else:
            _same(rt.to_host(g), w.numpy())


def test_eager_declines(rt):
    from ember.compiler import cl_eager
    x = T(np.ones((3, 4), np.float32))
    op, args, attrs, _ = _call(lambda a: a.mode(1).values, x)
    assert cl_eager.kernel_for(op, [((3, 4), ember.float32)], attrs) is None       # no decomposition
    h = T(np.ones((3, 4), np.float16))
    op, args, attrs, _ = _call(lambda a: a.exp(), h)
    assert cl_eager.kernel_for(op, [((3, 4), ember.float16)], attrs) is None       # float16 is not native


def test_eager_index_check(rt):
    """A gather with an index out of range raises IndexError from the device's error record."""
    from ember.compiler import cl_eager
    w = T(np.arange(12, dtype=np.float32).reshape(4, 3))
    idx = T(np.array([0, 3, 1]))
    op, args, attrs, out = _call(lambda w, i: ember.index_select(w, 0, i), w, idx)
    specs = [(tuple(a.shape), a.dtype) if isinstance(a, ember.Tensor) else a for a in args]
    run = cl_eager.kernel_for(op, specs, attrs)
    assert run is not None
    tensors = [a for a in args if isinstance(a, ember.Tensor)]
    got = run([rt.to_device(a.numpy()) for a in tensors])
    _same(rt.to_host(got[0]), out.numpy())
    with pytest.raises(IndexError):
        run([rt.to_device(w.numpy()), rt.to_device(np.array([0, 7, 1]))])


def test_second_process_builds_nothing(rt, tmp_path):
    """Program binaries are cached on disk: a second process loads what the first built."""
    code = (
        "import numpy as np, ember\n"
        "from ember.compiler import cl_eager\n"
        "from ember.devices import opencl\n"
        "run = cl_eager.kernel_for('tanh', [((5, 11), ember.float32)], {})\n"
        "out = run([opencl.from_numpy(np.ones((5, 11), np.float32))])\n"
        "assert abs(opencl.to_numpy(out[0])[0, 0] - np.tanh(1.0)) < 1e-6\n"
        "print(opencl.build_stats()['source_builds'])\n")
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
    outs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for o in outs:
        assert o.returncode == 0, o.stderr
    assert int(outs[0].stdout.split()[-1]) >= 1
    assert int(outs[1].stdout.split()[-1]) == 0
