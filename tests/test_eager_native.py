"""The native eager kernels (ember/_native): gelu, softmax/log_softmax and layer norm, forward and
backward, against torch and against ember's NumPy path (the same call with the native kernels off);
special values, odd sizes, strided and half inputs, thread-count independence, double backward (which
runs the ember-op form), and the fallback when no C compiler exists."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember._native import eager_kernels as native

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler: the native kernels cannot be built "
                                "(the NumPy path is tested by the op tests)")


@pytest.fixture
def numpy_path():
    """Run a block with the native kernels off; they are back on afterwards."""
    class Switch:
        def __enter__(self):
            native.set_enabled(False)

        def __exit__(self, *exc):
            native.set_enabled(True)
    return Switch()


def _rand(shape, seed=0, scale=1.0, dtype=np.float32):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def _run(lib, fn, arrays, grad_out):
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    y = fn(lib, *ts)
    y.backward(lib.tensor(grad_out))
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


def _check(fn, arrays, atol=2e-6, rtol=2e-5, numpy_path=None):
    """ember (native) against torch and against ember's NumPy path: values and input gradients."""
    go = _rand(fn(torch, *[torch.tensor(a) for a in arrays]).shape, seed=9)
    ye, ge = _run(ember, fn, arrays, go)
    yt, gt = _run(torch, fn, arrays, go)
    np.testing.assert_allclose(ye, yt, atol=atol, rtol=rtol)
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(a, b, atol=atol * 10, rtol=rtol * 10)
    if numpy_path is not None:
        with numpy_path:
            yn, gn = _run(ember, fn, arrays, go)
        np.testing.assert_allclose(ye, yn, atol=atol, rtol=rtol)
        for a, b in zip(ge, gn):
            np.testing.assert_allclose(a, b, atol=atol * 10, rtol=rtol * 10)


# ---- gelu ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(16, 64, 512), (7,), (3, 1001), (1,)])
def test_gelu_matches_torch_and_numpy_path(approximate, shape, numpy_path):
    _check(lambda lib, x: lib.nn.functional.gelu(x, approximate=approximate), [_rand(shape, scale=3)],
           numpy_path=numpy_path)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_special_values(approximate):
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 5.0, -5.0, 10.0, -10.0, 13.0, -13.0, 30.0, -30.0, 1e30, -1e30,
                  np.inf, -np.inf, np.nan], np.float32)
    ye = F.gelu(ember.tensor(x), approximate=approximate).numpy()
    yt = torch.nn.functional.gelu(torch.tensor(x), approximate=approximate).numpy()
    # torch's float32 x/2 (1 + erf(x/sqrt 2)) (or 1 + tanh(u)) cancels for x << 0 (gelu(-10) = 0): ember's
    # is within rounding of the exact value there, and within torch's rounding of torch's
    fin = np.isfinite(x) & (np.abs(x) < 1e10)
    if approximate == "none":
        exact = [v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x[fin].astype(float)]
    else:       # (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u))
        v = x[fin].astype(float)
        with np.errstate(over="ignore"):
            exact = v / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    np.testing.assert_allclose(ye[fin], exact, rtol=2e-5, atol=1e-40)
    np.testing.assert_allclose(ye, yt, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.signbit(ye[np.isfinite(yt) & (yt != 0)]), np.signbit(yt[np.isfinite(yt) & (yt != 0)]))
    # the derivative where torch's is finite
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.gelu(xe, approximate=approximate).sum().backward()
    torch.nn.functional.gelu(xt, approximate=approximate).sum().backward()
    fin = np.isfinite(xt.grad.numpy())
    np.testing.assert_allclose(xe.grad.numpy()[fin], xt.grad.numpy()[fin], rtol=1e-5, atol=1e-6)
    assert np.isnan(ye[-1]) and np.isnan(xe.grad.numpy()[-1])


def test_gelu_strided_and_half_inputs():
    x = _rand((64, 96), scale=3)
    xs = torch.tensor(x).t()
    np.testing.assert_allclose(F.gelu(ember.tensor(x).t()).numpy(), torch.nn.functional.gelu(xs).numpy(),
                               rtol=1e-5, atol=1e-6)
    h = x.astype(np.float16)
    ye = F.gelu(ember.tensor(h))
    assert ye.dtype == ember.float16
    np.testing.assert_allclose(ye.numpy().astype(np.float32),
                               torch.nn.functional.gelu(torch.tensor(h)).numpy().astype(np.float32), atol=2e-3)


# ---- softmax / log_softmax ------------------------------------------------------------------------------

def _masked_scores():
    s = _rand((4, 2, 64, 64), scale=3)
    return np.where(np.triu(np.ones((64, 64), bool), 1), -np.inf, s).astype(np.float32)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(16, 4, 64, 64), (5, 3), (2, 1), (3, 17), (2, 100003), (33,)])
def test_softmax_matches_torch_and_numpy_path(log, shape, numpy_path):
    name = "log_softmax" if log else "softmax"
    # a 100003-wide row: torch's float32 sum is off by ~2e-5 of the log-sum (ember's is ~3e-6)
    _check(lambda lib, x: getattr(lib.nn.functional, name)(x, dim=-1), [_rand(shape, scale=4)],
           atol=5e-5 if shape[-1] > 1000 else 2e-6, numpy_path=numpy_path)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_masked_rows(log):
    """The attention case: -inf above the diagonal (log_softmax gives -inf there, softmax 0)."""
    s = _masked_scores()
    name = "log_softmax" if log else "softmax"
    g = _rand(s.shape, seed=3)
    xe, xt = ember.tensor(s, requires_grad=True), torch.tensor(s, requires_grad=True)
    ye, yt = getattr(F, name)(xe, -1), getattr(torch.nn.functional, name)(xt, -1)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_special_rows(log):
    x = np.array([[0.0, 1.0, 2.0], [-np.inf, -np.inf, -np.inf], [np.nan, 0.0, 1.0], [np.inf, 0.0, 1.0],
                  [1e30, -1e30, 0.0], [-np.inf, 3.0, -np.inf]], np.float32)
    name = "log_softmax" if log else "softmax"
    ye = getattr(F, name)(ember.tensor(x), -1).numpy()
    yt = getattr(torch.nn.functional, name)(torch.tensor(x), -1).numpy()
    np.testing.assert_allclose(ye, yt, rtol=1e-6, atol=1e-7)      # NaN where torch has NaN, inf where inf


def test_softmax_other_dims_and_strided_grads():
    x = _rand((4, 5, 6), scale=2)
    for dim in (0, 1, 2):
        _check(lambda lib, t: lib.softmax(t, dim), [x])
    # a broadcast (strided) incoming gradient: softmax(x).sum() sends a zero-stride grad
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (F.softmax(xe, -1) * ember.tensor(x)).sum().backward()
    (torch.nn.functional.softmax(xt, -1) * torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_softmax_half_input():
    x = _rand((8, 40), scale=3).astype(np.float16)
    for name in ("softmax", "log_softmax"):
        ye = getattr(F, name)(ember.tensor(x), -1)
        assert ye.dtype == ember.float16
        yt = getattr(torch.nn.functional, name)(torch.tensor(x), -1)
        np.testing.assert_allclose(ye.numpy().astype(np.float32), yt.numpy().astype(np.float32), atol=3e-3, rtol=3e-3)


# ---- layer norm -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("shape", [(16, 64, 128), (5, 7), (3, 1), (2, 3, 100003)])
def test_layer_norm_matches_torch_and_numpy_path(affine, shape, numpy_path):
    d = shape[-1]
    arrays = [_rand(shape, scale=2) + 0.5, _rand((d,), seed=1), _rand((d,), seed=2)]
    if affine == "none":
        arrays = arrays[:1]

        def fn(lib, x):
            return lib.nn.functional.layer_norm(x, (d,))
    elif affine == "weight":
        arrays = arrays[:2]

        def fn(lib, x, w):
            return lib.nn.functional.layer_norm(x, (d,), w)
    else:
        def fn(lib, x, w, b):
            return lib.nn.functional.layer_norm(x, (d,), w, b, eps=1e-6)
    _check(fn, arrays, atol=1e-5, rtol=1e-4, numpy_path=numpy_path)


def test_layer_norm_over_two_dims_and_only_weight_grad():
    x, w, b = _rand((4, 6, 8)), _rand((6, 8), seed=1), _rand((6, 8), seed=2)
    _check(lambda lib, x, w, b: lib.nn.functional.layer_norm(x, (6, 8), w, b), [x, w, b], atol=1e-5, rtol=1e-4)
    # x does not require grad: only the weight and bias gradients are computed
    we, be = ember.tensor(w, requires_grad=True), ember.tensor(b, requires_grad=True)
    wt, bt = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    F.layer_norm(ember.tensor(x), (6, 8), we, be).pow(2).sum().backward()
    torch.nn.functional.layer_norm(torch.tensor(x), (6, 8), wt, bt).pow(2).sum().backward()
    np.testing.assert_allclose(we.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(be.grad.numpy(), bt.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_one_call_equals_the_two_ops(affine):
    """The forward's one native call (no hooks installed) gives the bits, node and gradients of the
    statistics op then the normalize op (what runs while a hook watches ops)."""
    from ember.ops import registry
    x = ember.tensor(_rand((3, 5, 40), scale=2) + 0.5, requires_grad=True)
    w = ember.tensor(_rand((40,), seed=1), requires_grad=True) if affine else None
    b = ember.tensor(_rand((40,), seed=2), requires_grad=True) if affine else None
    params = [t for t in (x, w, b) if t is not None]
    g = ember.tensor(_rand((3, 5, 40), seed=3))
    y1 = F.layer_norm(x, (40,), w, b)
    registry.HOOKS.append(lambda op, args, attrs, run: run())      # a watcher: the ops run one by one
    try:
        y2 = F.layer_norm(x, (40,), w, b)
    finally:
        registry.HOOKS.pop()
    assert type(y1.grad_fn) is type(y2.grad_fn) and y1.grad_fn.name() == "NativeLayerNormBackward0"
    assert np.array_equal(y1.detach().numpy(), y2.detach().numpy())
    for a, c in zip(ember.autograd.grad(y1, params, g), ember.autograd.grad(y2, params, g)):
        assert np.array_equal(a.numpy(), c.numpy())


def test_layer_norm_half_input_float_params():
    x = _rand((6, 32), scale=2).astype(np.float16)
    w, b = _rand((32,), seed=1), _rand((32,), seed=2)
    ye = F.layer_norm(ember.tensor(x), (32,), ember.tensor(w), ember.tensor(b))
    yt = torch.nn.functional.layer_norm(torch.tensor(x), (32,), torch.tensor(w), torch.tensor(b))
    assert ye.dtype == ember.float16
    np.testing.assert_allclose(ye.numpy().astype(np.float32), yt.numpy().astype(np.float32), atol=1e-2, rtol=1e-2)


def test_module_layer_norm_and_gelu_train_like_torch():
    x = _rand((8, 16, 32))
    ln_e, ln_t = ember.nn.LayerNorm(32), torch.nn.LayerNorm(32)
    for lib, ln in ((ember, ln_e), (torch, ln_t)):
        with lib.no_grad():
            ln.weight.copy_(lib.tensor(_rand((32,), seed=4)))
            ln.bias.copy_(lib.tensor(_rand((32,), seed=5)))
    outs = []
    for lib, ln in ((ember, ln_e), (torch, ln_t)):
        xi = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.gelu(ln(xi))
        lib.nn.functional.softmax(y, -1).pow(2).sum().backward()
        outs.append((y.detach().numpy(), xi.grad.numpy(), ln.weight.grad.numpy(), ln.bias.grad.numpy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# ---- what stays on the ember-op form: double backward, other dtypes ---------------------------------------

def test_double_backward_uses_the_op_form():
    x = _rand((3, 5), scale=2).astype(np.float64)
    for fn in (lambda lib, t: lib.nn.functional.gelu(t), lambda lib, t: lib.softmax(t, -1),
               lambda lib, t: lib.log_softmax(t, -1), lambda lib, t: lib.nn.functional.layer_norm(t, (5,))):
        grads = []
        for lib in (ember, torch):
            t = lib.tensor(x.astype(np.float32), requires_grad=True)
            y = fn(lib, t)
            (g,) = lib.autograd.grad((y * y).sum(), t, create_graph=True)
            (gg,) = lib.autograd.grad(g.sum(), t)
            grads.append((g.detach().numpy(), gg.numpy()))
        np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-3, atol=1e-4)


def test_float64_keeps_its_path():
    x = _rand((4, 9), scale=3).astype(np.float64)
    np.testing.assert_allclose(F.gelu(ember.tensor(x)).numpy(), torch.nn.functional.gelu(torch.tensor(x)).numpy(),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(F.softmax(ember.tensor(x), -1).numpy(),
                               torch.nn.functional.softmax(torch.tensor(x), -1).numpy(), rtol=1e-12, atol=1e-15)


# ---- threads and the fallback ---------------------------------------------------------------------------

def test_results_do_not_depend_on_the_thread_count():
    x = _rand((64, 4096), scale=3)
    g = _rand(x.shape, seed=5)
    w, b = _rand((4096,), seed=6), _rand((4096,), seed=7)
    before = ember.get_num_threads()
    outs = []
    try:
        for n in (1, 2, 3):
            ember.set_num_threads(n)
            y = native.gelu(x, "none")
            gy = native.gelu_backward(g, x, "none")
            s = native.softmax(x, 1, False)
            gs = native.softmax_backward(g, s, 1, False)
            mean, var = native.norm_stats(x)
            ln = native.layer_norm(x, w, b, mean, var, 1e-5)
            lb = native.layer_norm_backward(g, x, w, mean, var, 1e-5, True, True)
            outs.append([y, gy, s, gs, mean, var, ln, *lb])
    finally:
        ember.set_num_threads(before)
    for other in outs[1:]:
        for a, b_ in zip(outs[0], other):
            np.testing.assert_array_equal(a, b_)


def test_no_compiler_falls_back_to_numpy(tmp_path):
    """With no C compiler (and an empty cache) the kernels report unavailable and the ops still run."""
    code = (
        "import numpy as np, torch, ember\n"
        "import ember.nn.functional as F\n"
        "from ember._native import eager_kernels as k\n"
        "x = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)\n"
        "xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)\n"
        "ye = F.softmax(F.layer_norm(F.gelu(xe), (40,)), -1)\n"
        "yt = torch.nn.functional.softmax(torch.nn.functional.layer_norm(torch.nn.functional.gelu(xt), (40,)), -1)\n"
        "(ye * ye).sum().backward(); (yt * yt).sum().backward()\n"
        "np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)\n"
        "np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)\n"
        "print('available', k.available())\n")
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc"), "EMBER_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "available False" in out.stdout


def test_disabled_by_environment(tmp_path):
    code = "from ember._native import eager_kernels as k; print('available', k.available())"
    env = {**os.environ, "EMBER_EAGER_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "available False" in out.stdout
