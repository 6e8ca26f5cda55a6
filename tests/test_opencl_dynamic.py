"""Dynamic shapes in ember.compile on OpenCL device tensors (issue 12's device piece): a trusted symbolic
entry of a device program replays at every size (an OpenCL program built per size) instead of tracing
again per size. Every compiled result is compared with eager mode on the device. Skipped only when no
OpenCL platform with a device exists."""
import numpy as np
import pytest

import ember
from ember.bench import models as M
from ember.compiler import counters
from opencl_compile_support import needs_device, DEV, _dispatcher_out_afterwards, _fresh, train_step  # noqa: F401

pytestmark = needs_device


def _close(a, b, what, rtol=1e-4, atol=1e-5):
    a, b = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_seven_lengths_capture_twice_and_build_per_size(backend):
    def f(x, w):
        return (x @ w).relu().sum(-1) + x.mean(-1)
    cf = ember.compile(f, backend=backend)
    w = ember.randn(8, 8, device=DEV)
    for t in [5, 7, 9, 12, 30, 7, 40]:
        x = ember.randn(3, t, 8, device=DEV)
        out = cf(x, w)
        assert out.device.type == "opencl"
        _close(out, f(x, w), f"t={t}")
    # one static trace (t=5), one symbolic trace (t=7) that the first confirms; every later length replays
    assert counters["captures"] == 2 and counters["recompiles"] == 1
    assert counters["dynamic_fallbacks"] == 0 and counters["fallbacks"] == 0
    assert counters["replays"] == 5
    # inductor: an OpenCL program per size the entry ran at (9, 12, 30, 7, 40), none declined; aot_eager
    # replays op by op on the device
    assert counters["opencl_programs"] == (5 if backend == "inductor" else 0)
    assert counters["opencl_declined"] == 0


def test_a_size_seen_again_reuses_its_build():
    def f(x):
        return (x * 2).softmax(-1).sum(0)
    cf = ember.compile(f)
    for t in [4, 6, 8, 8, 6, 8]:
        x = ember.randn(t, 5, device=DEV)
        _close(cf(x), f(x), f"t={t}")
    assert counters["captures"] == 2 and counters["dynamic_fallbacks"] == 0
    assert counters["opencl_programs"] == 2            # t=8 and t=6 (t=4 and the symbolic trace ran eagerly)


def test_gpt_forward_at_several_lengths():
    ember.manual_seed(0)
    cfg = M.GPTConfig(block_size=32)
    model = M.gpt(ember, cfg).eval().to(DEV)
    cm = ember.compile(model)
    rng = np.random.default_rng(0)
    with ember.no_grad():
        for L in [5, 9, 17, 3, 32, 9]:
            idx = ember.from_numpy(rng.integers(0, cfg.vocab_size, (2, L))).to(DEV)
            a, b = cm(idx), model(idx)
            a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
            assert a.device.type == "opencl"
            _close(a, b, f"L={L}", rtol=1e-4, atol=1e-4)
    assert counters["captures"] <= 2 and counters["fallbacks"] == 0 and counters["dynamic_fallbacks"] == 0


def test_training_with_a_last_partial_batch():
    def make():
        ember.manual_seed(0)
        m = ember.nn.Sequential(ember.nn.Linear(6, 16), ember.nn.GELU(), ember.nn.LayerNorm(16),
                                ember.nn.Linear(16, 3)).to(DEV)
        return m, ember.optim.AdamW(m.parameters(), lr=1e-2)

    step = train_step

    rng = np.random.default_rng(0)
    X = ember.from_numpy(rng.standard_normal((45, 6)).astype(np.float32)).to(DEV)
    Y = ember.from_numpy(rng.integers(0, 3, 45)).to(DEV)
    (m1, o1), (m2, o2) = make(), make()
    cstep = ember.compile(step)
    for epoch in range(3):
        for i in range(0, 45, 16):              # batches of 16, 16 and 13
            x, y = X[i:i + 16], Y[i:i + 16]
            _close(cstep(m1, o1, x, y), step(m2, o2, x, y), f"epoch {epoch} batch {i}", atol=1e-5)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        assert p1.device.type == "opencl"
        _close(p1, p2, "parameters after training", atol=1e-5)
    assert counters["captures"] <= 3 and counters["fallbacks"] == 0 and counters["dynamic_fallbacks"] == 0
