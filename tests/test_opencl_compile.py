"""ember.compile on OpenCL device tensors: captured programs run as generated OpenCL kernels (or op by op
on the device when the code generator declines), checked against eager ember on the device and on the
CPU. Skipped only when no OpenCL platform with a device exists."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import counters
from ember.devices import opencl as ocl
from opencl_compile_support import needs_device, DEV, _dispatcher_out_afterwards, _fresh, train_step  # noqa: F401

pytestmark = needs_device


def _np(t):
    return t.detach().cpu().numpy()


def _mlp(seed):
    ember.manual_seed(seed)
    return nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, 48), nn.Tanh(), nn.Linear(48, 5))


def _data(rng, n=37):
    x = ember.tensor(rng.standard_normal((n, 20)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 5, (n,)))
    return x, y


def _runner(cf):
    return cf.entries[-1].runner.device_runner


def test_mlp_forward_backward_matches_eager():
    """A compiled forward on the device, then loss.backward() outside: values and gradients match eager
    on the device and on the CPU, for three calls with new values (one capture, two replays that run the
    generated kernels: forward and the compiled backward)."""
    cpu = _mlp(0)
    dev = _mlp(0).to(DEV)
    ref = _mlp(0).to(DEV)

    def f(m, x, y):
        return F.cross_entropy(m(x), y)
    cf = ember.compile(f)
    rng = np.random.default_rng(1)
    for i in range(3):
        x, y = _data(rng)
        for m in (cpu, dev, ref):
            m.zero_grad(set_to_none=True)
        lc = f(cpu, x, y)
        lc.backward()
        le = f(ref, x.to(DEV), y.to(DEV))
        le.backward()
        ld = cf(dev, x.to(DEV), y.to(DEV))
        assert ld.device.type == "opencl"
        ld.backward()
        np.testing.assert_allclose(_np(ld), _np(le), rtol=1e-5)
        np.testing.assert_allclose(_np(ld), lc.item(), rtol=1e-5)
        for pd, pe, pc in zip(dev.parameters(), ref.parameters(), cpu.parameters()):
            assert pd.grad.device.type == "opencl"
            np.testing.assert_allclose(_np(pd.grad), _np(pe.grad), rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(_np(pd.grad), pc.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert counters["captures"] == 1 and counters["replays"] == 2
    r = _runner(cf)
    assert r.cl is not None and r.declined is None and r.cl.bwd is not None
    assert r.cl.extern_count == 0


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_training_step_20_steps(opt_name):
    """A whole compiled training step (zero_grad, forward, loss, backward, optimizer step) on the device
    for 20 steps with new batches: losses and parameters match eager training on the CPU."""
    def make(m):
        return (ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) if opt_name == "sgd"
                else ember.optim.Adam(m.parameters(), lr=1e-2))
    cpu = _mlp(2)
    dev = _mlp(2).to(DEV)
    oc, od = make(cpu), make(dev)

    step = train_step
    cs = ember.compile(step)
    rng = np.random.default_rng(3)
    batches = [_data(rng, 64) for _ in range(20)]
    lc = [step(cpu, oc, x, y).item() for x, y in batches]
    ld = [cs(dev, od, x.to(DEV), y.to(DEV)) for x, y in batches]
    np.testing.assert_allclose([float(_np(t)) for t in ld], lc, rtol=2e-4, atol=1e-5)
    for pd, pc in zip(dev.parameters(), cpu.parameters()):
        assert pd.device.type == "opencl"
        np.testing.assert_allclose(_np(pd), pc.detach().numpy(), rtol=1e-3, atol=1e-5)
    r = _runner(cs)
    assert r.cl is not None and r.cl.extern_count == 0
    assert counters["opencl_declined"] == 0
    # the steady state replays one program: trace, state initialised (retrace), then replays
    assert counters["captures"] <= 3 and counters["replays"] >= 17


def test_graph_break_runs_op_by_op_on_the_device():
    """A Python read of a device value (an `if` on a tensor) splits the program: the code generator declines
    it (counted, with the reason), the graphs run op by op on the device, the read is a guard (the other
    branch retraces), and the compiled backward still gives eager's gradients."""
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((6, 4)).astype(np.float32)

    def f(x, w):
        h = (x @ w).tanh()
        if h.sum() > 0:
            return (h * 2).sum()
        return (h - 1).square().sum()
    cf = ember.compile(f)
    signs = [1, 1, -1, -1, 1]
    for i, s in enumerate(signs):
        x0 = (np.abs(rng.standard_normal((5, 6))) * s).astype(np.float32)
        w0p = np.abs(w0)
        wc = ember.tensor(w0p, requires_grad=True)
        wd = ember.tensor(w0p).to(DEV).requires_grad_()
        lc = f(ember.tensor(x0), wc)
        lc.backward()
        ld = cf(ember.tensor(x0).to(DEV), wd)
        ld.backward()
        np.testing.assert_allclose(_np(ld), lc.item(), rtol=1e-5)
        np.testing.assert_allclose(_np(wd.grad), wc.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert counters["graph_breaks"] >= 1
    assert counters["captures"] == 2 and counters["replays"] >= 3 and counters["guard_failures"] >= 1
    assert counters["opencl_declined"] == 2
    assert "graph break" in counters["opencl_declined_reasons"][0]


def test_switching_devices_recompiles():
    """The device is a guard: a CPU-traced entry never replays for device arguments nor the reverse; each
    kind replays its own entry, and both stay correct."""
    lin = nn.Linear(8, 3)
    w, b = lin.weight.detach(), lin.bias.detach()
    wd, bd = w.to(DEV), b.to(DEV)

    def f(x, w, b):
        return (F.linear(x, w, b) * 3).relu().sum(1)
    cf = ember.compile(f)
    rng = np.random.default_rng(7)
    for i in range(4):
        x = ember.tensor(rng.standard_normal((4, 8)).astype(np.float32))
        want = f(x, w, b).numpy()
        got_c = cf(x, w, b)
        got_d = cf(x.to(DEV), wd, bd)
        assert got_c.device.type == "cpu" and got_d.device.type == "opencl"
        np.testing.assert_allclose(got_c.numpy(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(_np(got_d), want, rtol=1e-5, atol=1e-6)
    assert counters["captures"] == 2 and counters["recompiles"] == 1 and counters["replays"] == 6
    assert "device=opencl:0" in counters["recompile_reasons"][0]
    # a module moved to the device after the trace: its parameters' device is guarded (no arguments here)
    g = ember.compile(lambda: (lin.weight * 2).sum())
    np.testing.assert_allclose(g().item(), 2 * lin.weight.sum().item(), rtol=1e-5)
    lin.to(DEV)
    out = g()
    assert out.device.type == "opencl"
    np.testing.assert_allclose(_np(out), 2 * _np(lin.weight.sum()), rtol=1e-5)
    assert counters["recompiles"] == 2
    assert "devices they were traced on" in counters["recompile_reasons"][1]


def test_op_without_device_kernel_is_a_counted_host_step():
    """An op the code generator has no kernel for (mode) runs on the host between the kernels of the
    compiled program: counted and correct (its backward, a scatter, runs on the device)."""
    from ember.compiler.cl_runner import STATS
    rng = np.random.default_rng(9)

    def f(x):
        return (x.exp().mode(1).values * 2).sum()
    cf = ember.compile(f)
    for i in range(3):
        x0 = rng.standard_normal((4, 9)).astype(np.float32)
        xc = ember.tensor(x0, requires_grad=True)
        xd = ember.tensor(x0).to(DEV).requires_grad_()
        lc = f(xc)
        lc.backward()
        ocl.reset_fallback_counts()
        before = STATS["host_fallbacks"]
        ld = cf(xd)
        ld.backward()
        np.testing.assert_allclose(_np(ld), lc.item(), rtol=1e-5)
        np.testing.assert_allclose(_np(xd.grad), xc.grad.numpy(), rtol=1e-5, atol=1e-6)
        if i:       # a replay: one host step in the forward
            assert STATS["host_fallbacks"] == before + 1
            assert ocl.fallback_counts() == {"mode": 1}
    r = _runner(cf)
    assert r.cl is not None and r.cl.extern_count == 1 and r.declined is None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_debug_backends_on_the_device(backend):
    """backend="eager" (replay through the dispatcher) and "aot_eager" (op by op, captured backward) with
    device tensors: eager's values and gradients, outputs on the device."""
    model = _mlp(4).to(DEV)
    ref = _mlp(4).to(DEV)

    def f(m, x, y):
        return F.cross_entropy(m(x), y)
    cf = ember.compile(f, backend=backend)
    rng = np.random.default_rng(11)
    for i in range(3):
        x, y = _data(rng, 16)
        x, y = x.to(DEV), y.to(DEV)
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        ld = cf(model, x, y)
        ld.backward()
        le = f(ref, x, y)
        le.backward()
        assert ld.device.type == "opencl"
        np.testing.assert_allclose(_np(ld), _np(le), rtol=1e-5)
        for a, b in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=1e-4, atol=1e-6)
    assert counters["captures"] == 1 and counters["replays"] == 2


def test_moves_and_device_factories_inside():
    """Factories with device= (a constant, and a random draw that is fresh on every call) and .cpu() inside a
    compiled function: eager's values, same seed, same numbers; the CPU result comes back on the CPU."""
    def f(x):
        y = x + ember.ones(x.shape, device=DEV) + ember.randn(x.shape, device=DEV)
        return y, (y * 2).cpu() + 1
    cf = ember.compile(f)
    rng = np.random.default_rng(13)
    for i in range(3):
        x = ember.tensor(rng.standard_normal((3, 5)).astype(np.float32)).to(DEV)
        ember.manual_seed(i)
        want = f(x)
        ember.manual_seed(i)
        got = cf(x)
        assert got[0].device.type == "opencl" and got[1].device.type == "cpu"
        np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-6)
        np.testing.assert_allclose(got[1].numpy(), want[1].numpy(), rtol=1e-6)
    assert counters["captures"] == 1 and _runner(cf).cl is not None


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_outputs_returned_through_detach_have_no_history_on_the_device(backend):
    def f(x):
        v = (x * 2).exp()
        return v.detach(), v
    cf = ember.compile(f, backend=backend)
    for _ in range(3):
        x = ember.tensor([0.1, 0.2, 0.3], device="opencl", requires_grad=True)
        d, v = cf(x)
        assert not d.requires_grad and d.grad_fn is None and v.requires_grad
        np.testing.assert_allclose(d.cpu().numpy(), np.exp(2 * np.array([0.1, 0.2, 0.3])), rtol=1e-6)
        v.sum().backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * np.exp(2 * np.array([0.1, 0.2, 0.3])), rtol=1e-5)
