"""Custom kernels on the OpenCL device: ember.opencl.compile_shader (values, views, argument checks,
compile errors, the program cache across processes, events and the profiler), custom ops with an
"opencl" kernel (eager, inside ember.compile's device programs), and examples/custom_softshrink.py
(Softshrink in C and OpenCL against F.softshrink and torch; the MLP's fallbacks and copies)."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember
from ember import Tensor
from ember.library import custom_op
from device_support import needs_opencl, _quiet_fallback_warnings  # noqa: F401 - autouse fixture
from ember.devices import opencl as ocl

pytestmark = needs_opencl
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SRC = """
// a comment line
__kernel void scale(__global float* out, __global const float* x, float a) {
    size_t i = get_global_id(0);
    out[i] = a * x[i];
}
__kernel void fill(__global int* o, int v) { o[get_global_id(0)] = v; }
__kernel void rows(__global long* o, long ncol) {
    o[get_global_id(0) * ncol + get_global_id(1)] = (long)get_global_id(0) * 100 + (long)get_global_id(1);
}
"""


def _example():
    spec = importlib.util.spec_from_file_location("custom_softshrink", os.path.join(ROOT, "examples",
                                                                                    "custom_softshrink.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


EX = _example()


@pytest.fixture(scope="module")
def lib():
    return ember.opencl.compile_shader(SRC)


def test_shader_values_views_threads_and_groups(lib):
    xs = np.arange(12, dtype=np.float32) - 5
    x = ember.tensor(xs, device="opencl")
    out = ember.empty_like(x)
    v0 = out._version
    lib.scale(out, x, 0.5)
    np.testing.assert_array_equal(out.cpu().numpy(), xs * 0.5)
    assert out._version == v0 + 1 and x._version == 0      # written through a non-const pointer only
    # views at an element offset: the kernel sees the view's first element at index 0
    part = ember.zeros(5, device="opencl")
    lib.scale(part, x[7:], 2.0)
    np.testing.assert_array_equal(part.cpu().numpy(), xs[7:] * 2)
    big = ember.zeros(12, device="opencl")
    lib.scale(big[4:9], x[2:7], 1.0, threads=5)
    np.testing.assert_array_equal(big.cpu().numpy(), np.r_[np.zeros(4), xs[2:7], np.zeros(3)])
    i = ember.zeros(8, dtype=ember.int32, device="opencl")
    lib.fill(i, -3, threads=[8], group_size=4)
    np.testing.assert_array_equal(i.cpu().numpy(), [-3] * 8)
    r = ember.zeros(3, 4, dtype=ember.int64, device="opencl")
    lib.rows(r, 4, threads=(3, 4))
    np.testing.assert_array_equal(r.cpu().numpy(), np.arange(3)[:, None] * 100 + np.arange(4))


def test_shader_local_memory_and_work_groups():
    lib = ember.opencl.compile_shader("""
    __kernel void block_sum(__global float* out, __global const float* x, __local float* tmp) {
        size_t l = get_local_id(0), n = get_local_size(0);
        tmp[l] = x[get_global_id(0)];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (size_t s = n / 2; s > 0; s /= 2) {
            if (l < s) tmp[l] += tmp[l + s];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (l == 0) out[get_group_id(0)] = tmp[0];
    }""")
    x = ember.arange(64.0, dtype=ember.float32, device="opencl")
    out = ember.empty(4, device="opencl")
    lib.block_sum(out, x, 16 * 4, threads=64, group_size=16)     # __local takes its size in bytes
    np.testing.assert_array_equal(out.cpu().numpy(), np.arange(64.0).reshape(4, 16).sum(1))
    with pytest.raises(TypeError, match=r"argument 'tmp' .*bytes of local memory"):
        lib.block_sum(out, x, 0, threads=64, group_size=16)


def test_shader_argument_errors_name_the_argument(lib):
    x = ember.randn(6, device="opencl")
    out = ember.empty_like(x)
    with pytest.raises(TypeError, match=r"scale\(\): argument 'x' .*dtype ember.float32.*got ember.float64"):
        lib.scale(out, x.double(), 1.0)
    with pytest.raises(RuntimeError, match=r"argument 'x' .*opencl device, got one on cpu"):
        lib.scale(out, x.cpu(), 1.0)
    with pytest.raises(RuntimeError, match=r"argument 'out' .*contiguous"):
        lib.scale(ember.empty(3, 2, device="opencl").t(), x.view(2, 3), 1.0)
    with pytest.raises(TypeError, match=r"argument 'a' \(float a\) must be float, not str"):
        lib.scale(out, x, "1")
    with pytest.raises(OverflowError, match=r"argument 'v' \(int v\)"):
        lib.fill(ember.zeros(2, dtype=ember.int32, device="opencl"), 2 ** 40)
    with pytest.raises(TypeError, match=r"takes 3 arguments"):
        lib.scale(out, x)
    with pytest.raises(ValueError, match="multiple of group_size"):
        lib.scale(out, x, 1.0, group_size=4)
    with pytest.raises(AttributeError, match="no kernel 'nope'.*scale, fill, rows"):
        lib.nope


def test_compile_error_has_the_compiler_message_and_source_line():
    src = "__kernel void f(__global float* x) {\n    x[0] = undefined_name + 1;\n}\n"
    with pytest.raises(RuntimeError) as info:
        ember.opencl.compile_shader(src)
    msg = str(info.value)
    assert "line 2:" in msg and "undefined_name" in msg and "x[0] = undefined_name + 1;" in msg
    with pytest.raises(RuntimeError, match="defines no kernel"):
        ember.opencl.compile_shader("float f(float x) { return x; }")
    with pytest.raises(TypeError, match="parameter 'p'.*not supported"):
        ember.opencl.compile_shader("__kernel void g(__global float** p) { }")


def test_a_second_process_builds_nothing(tmp_path):
    code = ("import ember; from ember.devices import opencl as o\n"
            f"lib = ember.opencl.compile_shader({SRC!r})\n"
            "s = o.build_stats(); print(s['source_builds'], s['binary_loads'])\n")
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT,
                           timeout=600) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-2000:] for r in runs]
    first, second = (r.stdout.split()[-2:] for r in runs)
    assert first == ["1", "0"] and second == ["0", "1"]


def test_events_and_profiler_see_the_kernel(lib):
    from ember.profiler import profile
    x = ember.randn(4096, device="opencl")
    out = ember.empty_like(x)
    lib.scale(out, x, 2.0)
    start, end = ember.opencl.Event(enable_timing=True), ember.opencl.Event(enable_timing=True)
    with profile() as prof:
        start.record()
        lib.scale(out, x, 3.0)
        end.record()
        ember.opencl.synchronize()
    assert start.elapsed_time(end) > 0
    ks = [e for e in prof.events() if e.kind == "kernel" and e.name == "scale"]
    assert len(ks) == 1 and ks[0].device_type == "OpenCL" and ks[0].device_time_total > 0


# ---- custom ops with an OpenCL kernel ---------------------------------------------------------------------

def _torch_ref(xs, lambd, scale=1.0):
    t = torch.tensor(xs, requires_grad=True)
    (torch.nn.functional.softshrink(t * scale, lambd) ** 2).sum().backward()
    return torch.nn.functional.softshrink(t.detach() * scale, lambd).numpy(), t.grad.numpy()


@pytest.mark.parametrize("device", ["cpu", "opencl"])
def test_example_softshrink_eager_matches_functional_and_torch(device):
    softshrink, _ = EX.ops()
    xs = np.random.default_rng(0).standard_normal((7, 33)).astype(np.float32)
    xs[0, :4] = [0.5, -0.5, 0.0, 0.25]                    # on and inside the edges
    ref_v, ref_g = _torch_ref(xs, 0.5)
    ocl.reset_fallback_counts()
    x = ember.tensor(xs, device=device, requires_grad=True)
    y = softshrink(x, 0.5)
    (y ** 2).sum().backward()
    assert y.device.type == device and x.grad.device.type == device
    e = ember.tensor(xs, requires_grad=True)
    (ember.nn.functional.softshrink(e, 0.5) ** 2).sum().backward()
    np.testing.assert_array_equal(y.detach().cpu().numpy(), ember.nn.functional.softshrink(e, 0.5).detach().numpy())
    np.testing.assert_array_equal(x.grad.cpu().numpy(), e.grad.numpy())
    np.testing.assert_allclose(y.detach().cpu().numpy(), ref_v, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(x.grad.cpu().numpy(), ref_g, rtol=1e-6, atol=1e-7)
    assert ocl.fallback_counts() == {}                    # the OpenCL kernel ran: no fallback
    # a strided input: the kernels take contiguous tensors (the op makes them so)
    xt = ember.tensor(xs, device=device).t()
    np.testing.assert_array_equal(softshrink(xt, 0.5).cpu().numpy(), ember.nn.functional.softshrink(
        ember.tensor(xs).t(), 0.5).numpy())


@pytest.mark.parametrize("device", ["cpu", "opencl"])
def test_example_softshrink_compiled_fullgraph(device):
    from ember.compiler import cl_runner
    softshrink, _ = EX.ops()
    xs = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    f = ember.compile(lambda t: (softshrink(t * 2.0, 0.5) ** 2).sum(), fullgraph=True)
    ocl.reset_fallback_counts()
    before = dict(cl_runner.STATS)
    for k in range(2):                                    # the capture, then the cached program
        x = ember.tensor(xs + k, device=device, requires_grad=True)
        loss = f(x)
        loss.backward()
        ref_v, ref_g = _torch_ref(xs + k, 0.5, 2.0)
        np.testing.assert_allclose(loss.item(), (ref_v ** 2).sum(), rtol=1e-5)
        np.testing.assert_allclose(x.grad.cpu().numpy(), ref_g, rtol=1e-5, atol=1e-6)
    assert ember.compiler.counters["graph_breaks"] == 0
    if device == "cpu":
        # the generated native program calls the C kernels itself (forward and backward): a replay makes
        # no C call from Python
        from ember.compiler import c_externs
        from ember.utils import cpp_extension
        assert c_externs.STATS["c_calls"] >= 2
        seen = []
        cpp_extension.CALL_RECORDERS.append(lambda fn, args: seen.append(fn.__name__))
        try:
            x = ember.tensor(xs - 1, requires_grad=True)
            f(x).backward()
        finally:
            cpp_extension.CALL_RECORDERS.pop()
        assert seen == []
        np.testing.assert_allclose(x.grad.numpy(), _torch_ref(xs - 1, 0.5, 2.0)[1], rtol=1e-5, atol=1e-6)
    if device == "opencl":
        # the compiled device program enqueued the custom kernels between its own: no host steps
        assert cl_runner.STATS["programs"] > before["programs"]
        assert cl_runner.STATS["host_fallbacks"] == before["host_fallbacks"]
        assert ocl.fallback_counts() == {}


def test_custom_op_device_kernel_in_profiler_by_name():
    from ember.profiler import profile
    softshrink, _ = EX.ops()
    x = ember.randn(64, 64, device="opencl")
    softshrink(x, 0.5)
    with profile() as prof:
        softshrink(x, 0.5)
        ember.opencl.synchronize()
    op, = [e for e in prof.events() if e.name == "ember::examples::softshrink"]
    assert [k.name for k in op.kernels] == ["softshrink"]
    assert op.device_time_total > 0
    assert not any(e.kind == "fallback" for e in prof.events())


def test_opencl_only_op_and_errors():
    lib = ember.opencl.compile_shader(SRC)

    @custom_op("testcl::twice", mutates_args=(), device_types="opencl")
    def twice(x: Tensor) -> Tensor:
        out = ember.empty_like(x)
        lib.scale(out, x, 2.0)
        return out

    x = ember.arange(6.0, device="opencl")
    np.testing.assert_array_equal(twice(x).cpu().numpy(), np.arange(6.0) * 2)
    with pytest.raises(NotImplementedError, match="no kernel registered for 'cpu'"):
        twice(ember.arange(6.0))
    # inside ember.compile a custom op needs a fake impl, and the error says what to register
    with pytest.raises(RuntimeError, match=r"testcl::twice has no fake implementation.*register_fake"):
        ember.compile(lambda t: twice(t) + 1, fullgraph=True)(x)
    # a fake that disagrees with the kernel is caught while capturing
    twice.register_fake(lambda t: ember.empty(3, device=t.device))
    with pytest.raises(Exception, match=r"output 0: the fake impl gives \(3,\)"):
        ember.compile(lambda t: twice(t) + 1, fullgraph=True)(x)
    twice.register_fake(lambda t: ember.empty_like(t))
    out = ember.compile(lambda t: twice(t) + 1, fullgraph=True)(x)
    np.testing.assert_array_equal(out.cpu().numpy(), np.arange(6.0) * 2 + 1)


def test_c_kernel_that_is_not_a_plain_call_keeps_its_python_extern():
    """A CPU kernel that computes with ember ops besides its C call is not turned into a native call
    (the C call's output is not the op's output): the compiled program runs it from Python, correctly."""
    from ember.compiler import c_externs
    softshrink, _ = EX.ops()

    @custom_op("testcl::shrink_plus_one", mutates_args=())
    def shrink_plus_one(x: Tensor) -> Tensor:
        return softshrink(x, 0.5) + 1

    shrink_plus_one.register_fake(lambda x: ember.empty_like(x))
    xs = np.linspace(-2, 2, 9, dtype=np.float32)
    before = c_externs.STATS["c_calls"]
    f = ember.compile(lambda t: shrink_plus_one(t * 1.0), fullgraph=True)
    for k in range(2):
        np.testing.assert_allclose(f(ember.tensor(xs + k)).numpy(),
                                   torch.nn.functional.softshrink(torch.tensor(xs + k), 0.5).numpy() + 1)
    assert c_externs.STATS["c_calls"] == before
    assert all(p is None for p in shrink_plus_one._opdef.c_plans.values())


# ---- the scenario ------------------------------------------------------------------------------------------

def test_mlp_softshrink_fallbacks_and_copies_disappear_with_the_custom_kernel():
    x, y, models = EX.setup(32)
    stats = {}
    for name, model in models.items():
        with EX.variant(name):
            EX.train_step(model, 0.01, x, y)
            stats[name] = EX.profile_step(lambda: EX.train_step(model, 0.01, x, y))
    n = 3                                                    # three Softshrink layers
    assert stats["fallback"]["fallbacks"] == n and stats["fallback"]["fallback_ops"] == ["softshrink"]
    assert stats["fallback"]["copies"] == 2 * n
    assert stats["custom"]["fallbacks"] == 0 and stats["custom"]["copies"] == 0
    assert set(stats["custom"]["custom_op_device_us"]) == {"ember::examples::softshrink",
                                                           "ember::examples::softshrink_backward"}
    # the same weights and the same math: the two variants trained alike
    wf = [p.detach().cpu().numpy() for p in models["fallback"].parameters()]
    wc = [p.detach().cpu().numpy() for p in models["custom"].parameters()]
    for a, b in zip(wf, wc):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
