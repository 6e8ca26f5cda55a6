"""The native gradient mask (ember/_native/eager_source_mask.py) behind the backward of relu and the
piecewise-linear activations: against torch and bit for bit against ember's NumPy path (the native
kernels off), with values at the kinks, NaN, infinities and signed zeros in x and in the gradient."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember._native import eager_kernels as native

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler: the native kernels cannot be built "
                                "(the NumPy path is tested by the activation tests)")

ACTIVATIONS = [
    ("relu", lambda lib, x: lib.relu(x)),
    ("threshold", lambda lib, x: lib.nn.functional.threshold(x, 0.1, -2.0)),
    ("leaky_relu", lambda lib, x: lib.nn.functional.leaky_relu(x, 0.01)),
    ("hardtanh", lambda lib, x: lib.nn.functional.hardtanh(x, -0.5, 0.5)),
    ("relu6", lambda lib, x: lib.nn.functional.relu6(x)),
    ("softshrink", lambda lib, x: lib.nn.functional.softshrink(x, 0.5)),
    ("hardshrink", lambda lib, x: lib.nn.functional.hardshrink(x, 0.5)),
    ("hardsigmoid", lambda lib, x: lib.nn.functional.hardsigmoid(x)),
]


def _inputs(n=4099):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    x[:12] = [0.0, -0.0, 0.5, -0.5, 0.1, 3.0, -3.0, 6.0, np.nan, np.inf, -np.inf, 1e-30]
    g = rng.standard_normal(n).astype(np.float32)
    g[12:16] = [np.nan, np.inf, -np.inf, -0.0]
    return x, g


def _grad(lib, fn, x, g):
    xt = lib.tensor(x, requires_grad=True)
    fn(lib, xt).backward(lib.tensor(g))
    return xt.grad.numpy()


@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_gradient_matches_torch_and_the_numpy_path_bit_for_bit(name, fn):
    x, g = _inputs()
    ge = _grad(ember, fn, x, g)
    # (at x = NaN ember's threshold drops the gradient where torch passes it and softshrink passes it where
    # torch drops it, on the NumPy path too (compared bit for bit below): torch is compared off NaN)
    ok = ~np.isnan(x)
    np.testing.assert_allclose(ge[ok], _grad(torch, fn, x, g)[ok], rtol=1e-6, atol=0)
    native.set_enabled(False)
    try:
        gn = _grad(ember, fn, x, g)
    finally:
        native.set_enabled(True)
    assert ge.tobytes() == gn.tobytes()


def test_other_dtypes_and_strided_gradients_keep_the_numpy_path():
    x, g = _inputs(64)
    for dt in ("float64", "float16"):
        ge = _grad(ember, lambda lib, t: lib.relu(t), x.astype(dt), g.astype(dt))
        gt = _grad(torch, lambda lib, t: lib.relu(t), x.astype(dt), g.astype(dt))
        np.testing.assert_array_equal(ge, gt)
    x2 = x.reshape(8, 8)
    for lib in (ember, torch):
        xt = lib.tensor(x2, requires_grad=True)
        lib.relu(xt).t().backward(lib.tensor(g.reshape(8, 8)))     # a transposed (strided) gradient
        if lib is ember:
            ge = xt.grad.numpy()
        else:
            np.testing.assert_array_equal(ge, xt.grad.numpy())


def test_results_do_not_depend_on_the_thread_count():
    x, g = _inputs(1 << 19)
    before = ember.get_num_threads()
    outs = []
    try:
        for n in (1, 2):
            ember.set_num_threads(n)
            outs.append(_grad(ember, lambda lib, t: lib.nn.functional.softshrink(t, 0.5), x, g))
    finally:
        ember.set_num_threads(before)
    np.testing.assert_array_equal(outs[0], outs[1])
