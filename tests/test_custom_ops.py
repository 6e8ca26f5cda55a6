"""Custom ops (ember.library.custom_op) and C extensions (ember.utils.cpp_extension.load_inline): eager,
autograd, inside ember.compile (one extern node, no graph break), opcheck, argument errors, the cache."""
import numpy as np
import pytest
import torch

import ember
from ember import Tensor
from ember.compiler import build, counters
from ember.library import custom_op, opcheck, OpCheckError
from ember.utils.cpp_extension import load_inline


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    build.clear_memory_cache()
    ember.compiler.reset()
    yield
    build.clear_memory_cache()


# ---- a softshrink custom op written with ember ops ------------------------------------------------------

@custom_op("testlib::softshrink", mutates_args=())
def softshrink(x: Tensor, lambd: float) -> Tensor:
    a = x.numpy()       # NumPy inside the op: fine, the op is opaque to capture
    return ember.from_numpy(np.where(a > lambd, a - lambd, np.where(a < -lambd, a + lambd, 0)).astype(a.dtype))


@softshrink.register_fake
def _(x, lambd):
    return ember.empty_like(x)


def _setup(ctx, inputs, output):
    x, lambd = inputs
    ctx.save_for_backward(x)
    ctx.lambd = lambd


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * (x.abs() > ctx.lambd).to(grad.dtype), None


softshrink.register_autograd(_backward, setup_context=_setup)


def _x(seed=0, n=(4, 6), dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


def test_eager_values_and_grad_match_torch():
    a = _x()
    x = ember.tensor(a, requires_grad=True)
    y = ember.ops.testlib.softshrink(x, 0.5)
    tx = torch.tensor(a, requires_grad=True)
    ty = torch.nn.functional.softshrink(tx, 0.5)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-7)
    w = _x(1)
    (y * ember.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    assert type(y.grad_fn).__name__ == "TestlibSoftshrinkBackward0"
    assert ember.ops.testlib.softshrink is softshrink


def test_gradcheck_float64():
    x = ember.tensor(_x(2, (3, 5), np.float64) * 2, requires_grad=True)
    assert ember.autograd.gradcheck(lambda t: softshrink(t, 0.3), (x,))
    # a real check: a wrong derivative is caught
    bad = custom_op("testlib::badshrink", mutates_args=())(_shrink_impl)
    bad.register_autograd(lambda ctx, g: (g * 2.0, None))
    with pytest.raises(Exception):
        ember.autograd.gradcheck(lambda t: bad(t, 0.3), (x,))


def _shrink_impl(x: Tensor, lambd: float) -> Tensor:
    return ember.where(x.abs() > lambd, x - x.sign() * lambd, ember.zeros_like(x))


def _explain_no_break(fn, *args):
    rep = ember.compiler.explain(fn)(*args)
    assert rep.graph_break_count == 0 and rep.compiled, rep.break_reasons
    return [op for ops in rep.ops_per_graph for op in ops]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_inside_compile_values_and_grads(backend):
    def f(x, w):
        h = (x * 2.0).exp() - 1.0
        return (softshrink(h, 0.5) * w).sum(), softshrink(x, 0.25)

    cf = ember.compile(f, backend=backend)
    for seed in (0, 1, 2):
        a, wa = _x(seed), _x(seed + 10)
        outs = []
        for fn in (f, cf):
            x = ember.tensor(a, requires_grad=True)
            s, y = fn(x, ember.tensor(wa))
            (s + (y * y).sum()).backward()
            outs.append((s.item(), y.detach().numpy(), x.grad.numpy()))
        (se, ye, ge), (sc, yc, gc) = outs
        np.testing.assert_allclose(sc, se, rtol=1e-5)
        np.testing.assert_allclose(yc, ye, rtol=1e-6)
        np.testing.assert_allclose(gc, ge, rtol=1e-5, atol=1e-6)
    assert counters["graph_breaks"] == 0
    assert counters["fallbacks"] == 0, counters["fallback_reasons"]
    assert counters["replays"] >= 2
    ops = _explain_no_break(f, ember.tensor(_x()), ember.tensor(_x(3)))
    assert ops.count("testlib::softshrink") == 2, ops       # one node per call, its insides not traced
    assert "where" not in ops and "abs" not in ops, ops


def test_opcheck_passes_and_catches_a_wrong_fake():
    x = ember.tensor(_x(4, (3, 4), np.float64), requires_grad=True)
    res = opcheck(softshrink, (x, 0.5))
    assert set(res.values()) == {"SUCCESS"} and "test_gradcheck" in res

    @custom_op("testlib::fakebad", mutates_args=())
    def fakebad(x: Tensor) -> Tensor:
        return x * 2.0

    @fakebad.register_fake
    def _(x):
        return ember.empty(x.shape[0])            # wrong: drops a dimension

    with pytest.raises(OpCheckError, match="test_faketensor"):
        opcheck(fakebad, (x.detach(),), test_utils="test_faketensor")
    out = opcheck(fakebad, (x.detach(),), test_utils=("test_faketensor",), raise_exception=False)
    assert isinstance(out["test_faketensor"], RuntimeError)

    @custom_op("testlib::sneaky", mutates_args=())
    def sneaky(x: Tensor) -> Tensor:
        x.add_(1.0)                                 # mutates an argument it did not declare
        return x * 1.0
    with pytest.raises(OpCheckError, match="test_schema"):
        opcheck(sneaky, (ember.zeros(3),), test_utils="test_schema")
    with pytest.raises(OpCheckError, match="test_autograd_registration"):
        opcheck(fakebad, (x,), test_utils="test_autograd_registration")


def test_no_autograd_registered_raises_on_backward():
    @custom_op("testlib::noderiv", mutates_args=())
    def noderiv(x: Tensor) -> Tensor:
        return x * 3.0
    x = ember.ones(3, requires_grad=True)
    y = noderiv(x)
    np.testing.assert_array_equal(y.detach().numpy(), [3, 3, 3])
    with pytest.raises(RuntimeError, match="testlib::noderiv"):
        y.sum().backward()


def test_mutating_op_eager_and_compile_error():
    @custom_op("testlib::fill_shrunk", mutates_args=("out",))
    def fill_shrunk(x: Tensor, out: Tensor, lambd: float) -> None:
        out.copy_(_shrink_impl(x, lambd))

    x = ember.tensor(np.array([-1.0, -0.2, 0.0, 0.3, 2.0], np.float32))
    out = ember.zeros(5)
    v0 = out._version
    assert fill_shrunk(x, out, 0.5) is None
    np.testing.assert_allclose(out.numpy(), [-0.5, 0, 0, 0, 1.5])
    assert out._version > v0
    assert opcheck(fill_shrunk, (x, ember.zeros(5), 0.5), test_utils=("test_schema",)) == {"test_schema": "SUCCESS"}

    def f(x, o):
        fill_shrunk(x, o, 0.5)
        return o * 2
    with pytest.raises(NotImplementedError, match="mutates_args"):
        ember.compile(f, fullgraph=True)(x, ember.zeros(5))
    with pytest.raises(ValueError, match="not a parameter"):
        custom_op("testlib::badmut", mutates_args=("y",))(lambda x: x)


def test_custom_op_registration_errors():
    with pytest.raises(ValueError, match="namespace::name"):
        custom_op("noscope", mutates_args=())(lambda x: x)
    with pytest.raises(RuntimeError, match="already registered"):
        custom_op("testlib::softshrink", mutates_args=())(lambda x: x)
    with pytest.raises(TypeError, match="testlib::softshrink"):
        softshrink(ember.ones(2), 0.5, 7)
    with pytest.raises(AttributeError):
        ember.ops.testlib.nothing
    with pytest.raises(AttributeError):
        ember.ops.nolib


def test_multiple_outputs():
    @custom_op("testlib::split_sign", mutates_args=())
    def split_sign(x: Tensor) -> tuple[Tensor, Tensor]:
        return x.clamp(min=0), x.clamp(max=0)

    split_sign.register_fake(lambda x: (ember.empty_like(x), ember.empty_like(x)))
    split_sign.register_autograd(lambda ctx, gp, gn: gp * (ctx.x > 0) + gn * (ctx.x < 0),
                                 setup_context=lambda ctx, inputs, output: setattr(ctx, "x", inputs[0]))
    a = np.array([-2.0, 1.0, 3.0], np.float32)
    x = ember.tensor(a, requires_grad=True)
    p, n = split_sign(x)
    (p * 2 + n * 5).sum().backward()
    np.testing.assert_array_equal(p.detach().numpy(), [0, 1, 3])
    np.testing.assert_array_equal(n.detach().numpy(), [-2, 0, 0])
    np.testing.assert_array_equal(x.grad.numpy(), [5, 2, 2])

    cf = ember.compile(lambda x: split_sign(x * 1.0))
    pc, nc = cf(ember.tensor(a))
    pc, nc = cf(ember.tensor(a + 1))
    np.testing.assert_array_equal(pc.numpy(), np.maximum(a + 1, 0))
    np.testing.assert_array_equal(nc.numpy(), np.minimum(a + 1, 0))
    assert counters["graph_breaks"] == 0


# ---- load_inline ------------------------------------------------------------------------------------------

C_SRC = r"""
#include <stdint.h>
#include <stdbool.h>
/* softshrink in C */
void softshrink_f32(const float* x, float* out, long n, float l) {
    for (long i = 0; i < n; i++) {
        float v = x[i];
        out[i] = v > l ? v - l : (v < -l ? v + l : 0.0f);
    }
}
double dot64(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static int helper(int a) { return a + 1; }
int count_true(const bool *m, int n) { int c = 0; for (int i = 0; i < n; i++) c += m[i]; return helper(c) - 1; }
"""


def test_load_inline_softshrink_direct():
    lib = load_inline("shrink_test", c_sources=C_SRC, functions=["softshrink_f32", "dot64", "count_true"])
    a = _x(5, (7, 3))
    x, out = ember.tensor(a), ember.empty(7, 3)
    v = out._version
    assert lib.softshrink_f32(x, out, x.numel(), 0.5) is None
    np.testing.assert_allclose(out.numpy(), torch.nn.functional.softshrink(torch.tensor(a), 0.5).numpy(), rtol=1e-6)
    assert out._version == v + 1
    d = lib.dot64(ember.arange(4, dtype=ember.float64), ember.ones(4, dtype=ember.float64), 4)
    assert d == 6.0 and type(d) is float
    assert lib.count_true(ember.tensor([True, False, True, True]), 4) == 3
    assert not hasattr(lib, "helper")


def test_load_inline_as_custom_op_kernel_eager_and_compiled():
    lib = load_inline("shrink_kernel", c_sources=C_SRC, functions=["softshrink_f32"])

    @custom_op("testlib::c_softshrink", mutates_args=())
    def c_softshrink(x: Tensor, lambd: float) -> Tensor:
        raise AssertionError("the registered CPU kernel runs, not this")

    @c_softshrink.register_kernel("cpu")
    def _(x, lambd):
        x = x.contiguous()
        out = ember.empty_like(x)
        lib.softshrink_f32(x, out, x.numel(), lambd)
        return out

    c_softshrink.register_fake(lambda x, lambd: ember.empty_like(x))
    c_softshrink.register_autograd(_backward, setup_context=_setup)

    def f(x):
        return c_softshrink(x.t() * 3.0, 0.5).sum(0)
    cf = ember.compile(f)
    for seed in (0, 1):
        a = _x(seed)
        res = []
        for fn in (f, cf):
            x = ember.tensor(a, requires_grad=True)
            y = fn(x)
            (y * ember.arange(4.0)).sum().backward()
            res.append((y.detach().numpy(), x.grad.numpy()))
        tx = torch.tensor(a, requires_grad=True)
        ty = torch.nn.functional.softshrink(tx.t() * 3.0, 0.5).sum(0)
        (ty * torch.arange(4.0)).sum().backward()
        for y, g in res:
            np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert counters["graph_breaks"] == 0 and counters["fallbacks"] == 0
    x64 = ember.tensor(_x(9, (3, 4)), requires_grad=True)
    assert set(opcheck(c_softshrink, (x64, 0.5)).values()) == {"SUCCESS"}


def test_load_inline_argument_errors():
    lib = load_inline("shrink_errs", c_sources=C_SRC, functions=["softshrink_f32"])
    f = lib.softshrink_f32
    x, out = ember.ones(4), ember.empty(4)
    with pytest.raises(TypeError, match=r"softshrink_f32\(\): argument 'x' .*float32"):
        f(ember.ones(4, dtype=ember.float64), out, 4, 0.5)
    with pytest.raises(TypeError, match=r"argument 'out' .*must be a Tensor"):
        f(x, np.zeros(4, np.float32), 4, 0.5)
    with pytest.raises(TypeError, match=r"argument 'n' .*must be int, not float"):
        f(x, out, 4.0, 0.5)
    with pytest.raises(TypeError, match=r"argument 'l' .*must be float, not str"):
        f(x, out, 4, "0.5")
    with pytest.raises(TypeError, match=r"takes 4 arguments"):
        f(x, out, 4)
    with pytest.raises(RuntimeError, match=r"argument 'x' .*contiguous"):
        f(ember.ones(4, 2).t(), ember.empty(8), 8, 0.5)
    with pytest.raises(OverflowError, match="'n'"):
        f(x, out, 2 ** 70, 0.5)
    with pytest.raises(RuntimeError, match="not defined"):
        load_inline("shrink_errs2", c_sources=C_SRC, functions=["nope"])
    with pytest.raises(TypeError, match="parameter 'p'"):
        load_inline("bad_sig", c_sources="struct s { int a; };\nvoid g(struct s *p) {}\n", functions=["g"])
    with pytest.raises(build.CompileError):
        load_inline("bad_code", c_sources="void h(int n) { syntax error }\n", functions=["h"])


def test_load_inline_cache_second_load_builds_nothing():
    src = C_SRC + "\n/* cache test */\n"
    before = dict(build.STATS)
    a = load_inline("shrink_cache", c_sources=src, functions=["softshrink_f32"])
    assert build.STATS["compiles"] == before["compiles"] + 1
    assert build.STATS["disk_misses"] == before["disk_misses"] + 1
    b = load_inline("shrink_cache", c_sources=src, functions=["softshrink_f32"])
    assert build.STATS["compiles"] == before["compiles"] + 1 and build.STATS["memory_hits"] == before["memory_hits"] + 1
    build.clear_memory_cache()        # a new process: the library comes from the disk cache
    c = load_inline("shrink_cache", c_sources=src, functions=["softshrink_f32"])
    assert build.STATS["compiles"] == before["compiles"] + 1
    assert build.STATS["disk_hits"] == before["disk_hits"] + 1 and c._library.cache_hit
    assert a._library.path == c._library.path
    x, o = ember.tensor([-1.0, 1.0]), ember.empty(2)
    b.softshrink_f32(x, o, 2, 0.25)
    np.testing.assert_allclose(o.numpy(), [-0.75, 0.75])
    load_inline("shrink_cache", c_sources=src, functions=["softshrink_f32"], extra_cflags=["-DEXTRA=1"])
    assert build.STATS["compiles"] == before["compiles"] + 2      # other flags: another build


def test_load_inline_cpp_and_load(tmp_path):
    lib = load_inline("cxx_test", cpp_sources='extern "C" double twice(double a) { return 2 * a; }\n',
                      functions=["twice"])
    assert lib.twice(3) == 6.0
    p = tmp_path / "k.c"
    p.write_text("int add3(int a, int b, int c) { return a + b + c; }\n")
    m = ember.utils.cpp_extension.load("from_file", [str(p)])
    assert m.add3(1, 2, 3) == 6
    with pytest.raises(RuntimeError, match="CUDA"):
        load_inline("cu", cuda_sources="x")


def test_device_tensors_run_the_cpu_kernel_as_a_counted_fallback():
    from ember.devices import opencl as ocl
    if not ocl.is_available():
        pytest.skip(f"no OpenCL platform: {ocl.unavailable_reason()}")
    import warnings
    xs = _x(3)
    ref = ember.tensor(xs, requires_grad=True)
    softshrink(ref, 0.5).sum().backward()
    ocl.reset_fallback_counts()
    x = ember.tensor(xs, device="opencl", requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        y = softshrink(x, 0.5)
        y.sum().backward()
    assert y.device.type == "opencl" and x.grad.device.type == "opencl"
    assert ocl.fallback_counts().get("testlib::softshrink") == 1
    np.testing.assert_allclose(y.detach().cpu().numpy(), softshrink(ember.tensor(xs), 0.5).numpy())
    np.testing.assert_allclose(x.grad.cpu().numpy(), ref.grad.numpy())
    with pytest.raises(NotImplementedError, match="'cuda'"):
        softshrink.register_kernel("cuda", lambda x, lambd: x)


def test_compile_needs_a_fake_impl_and_checks_it_on_cpu():
    @custom_op("testlib::nofake_cpu", mutates_args=())
    def nofake(x: Tensor) -> Tensor:
        return x * 2

    with pytest.raises(RuntimeError, match=r"testlib::nofake_cpu has no fake implementation.*register_fake"):
        ember.compile(lambda t: nofake(t) + 1, fullgraph=True)(ember.ones(3))
    nofake.register_fake(lambda x: ember.empty(2, 2))
    with pytest.raises(Exception, match=r"output 0: the fake impl gives \(2, 2\).*the kernel \(3,\)"):
        ember.compile(lambda t: nofake(t) + 1, fullgraph=True)(ember.ones(3))
    nofake.register_fake(lambda x: ember.empty_like(x))
    np.testing.assert_array_equal(ember.compile(lambda t: nofake(t) + 1, fullgraph=True)(ember.ones(3)).numpy(),
                                  [3, 3, 3])
