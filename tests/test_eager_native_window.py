"""The native 2-d window kernels (ember/_native/eager_source_window.py): im2col, col2im, max pooling and
its gather/scatter, behind conv2d/conv_transpose2d/unfold/fold and max_pool1d/2d. Each case runs against
torch and against ember's NumPy path (the same call with the native kernels off), which must give the
same bits: the kernels copy, compare and add in the NumPy kernels' order."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember._native import eager_kernels as native

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler: the native kernels cannot be built "
                                "(the NumPy path is tested by the op tests)")


def _rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run(lib, fn, arrays, seed=7):
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *ts)
    vals = out if isinstance(out, tuple) else (out,)
    y = vals[0]
    y.backward(lib.tensor(_rand(tuple(y.shape), seed)))
    return [v.detach().numpy() for v in vals], [t.grad.numpy() for t in ts]


def _check(fn, arrays, atol=1e-5, rtol=1e-5):
    """Native against torch (close) and against the NumPy path (equal), values and gradients."""
    ye, ge = _run(ember, fn, arrays)
    yt, gt = _run(torch, fn, arrays)
    for a, b in zip(ye + ge, yt + gt):
        np.testing.assert_allclose(a, b, atol=atol, rtol=rtol)
    native.set_enabled(False)
    try:
        yn, gn = _run(ember, fn, arrays)
    finally:
        native.set_enabled(True)
    for a, b in zip(ye + ge, yn + gn):
        np.testing.assert_array_equal(a, b)


def _fn(lib):
    return lib.nn.functional


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), ((2, 1), (1, 2), (1, 2), 1), (3, 2, 2, 2), (1, "same", (2, 1), 1)])
def test_conv2d_and_its_gradients(stride, padding, dilation, groups):
    x, w, b = _rand((3, 4, 11, 9), 1), _rand((6, 4 // groups, 3, 2), 2), _rand((6,), 3)
    _check(lambda lib, x, w, b: _fn(lib).conv2d(x, w, b, stride, padding, dilation, groups), [x, w, b])


def test_conv1d_and_conv_transpose2d():
    x, w = _rand((2, 3, 17), 1), _rand((5, 3, 4), 2)
    _check(lambda lib, x, w: _fn(lib).conv1d(x, w, stride=2, padding=3), [x, w])
    y, wt = _rand((2, 4, 6, 5), 4), _rand((4, 3, 3, 3), 5)
    _check(lambda lib, y, w: _fn(lib).conv_transpose2d(y, w, stride=2, padding=1, output_padding=1), [y, wt])


def test_unfold_and_fold():
    x = _rand((2, 3, 8, 7), 1)
    _check(lambda lib, x: _fn(lib).unfold(x, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)), [x])
    c = _rand((2, 3 * 4, 16), 2)
    _check(lambda lib, c: _fn(lib).fold(c, (6, 6), (2, 2), padding=1, stride=2), [c])


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil", [
    (2, 2, 0, 1, False), (3, 2, 1, 1, True), ((3, 2), (1, 2), (1, 1), (2, 1), False), (3, 3, 1, 1, True)])
def test_max_pool2d_values_indices_and_gradient(kernel, stride, padding, dilation, ceil):
    x = _rand((2, 3, 10, 9), 1)
    _check(lambda lib, x: _fn(lib).max_pool2d(x, kernel, stride, padding, dilation, ceil, return_indices=True), [x])


def test_max_pool1d_and_overlapping_windows():
    x = _rand((2, 3, 15), 1)
    _check(lambda lib, x: _fn(lib).max_pool1d(x, 3, 2, 1, return_indices=True), [x])
    _check(lambda lib, x: _fn(lib).max_pool1d(x, 4, 1, return_indices=True), [x])


def test_max_pool_nan_ties_and_minus_infinity():
    x = _rand((1, 2, 6, 6), 1)
    x[0, 0, 1, 1] = np.nan              # a NaN wins its window
    x[0, 0, 0, 0] = x[0, 0, 0, 1] = 5   # a tie: the first one seen stays
    x[0, 1, :3, :3] = -np.inf           # a window of -inf with padding: its first in-bounds element
    for lib_args in [(3, 2, 1), (2, 2, 0)]:
        out = {}
        for lib in (ember, torch):
            v, i = _fn(lib).max_pool2d(lib.tensor(x), *lib_args, return_indices=True)
            out[lib.__name__] = (v.numpy(), i.numpy())
        np.testing.assert_array_equal(out["ember"][0], out["torch"][0])
        np.testing.assert_array_equal(out["ember"][1], out["torch"][1])
    _check(lambda lib, x: _fn(lib).max_pool2d(x, 3, 2, 1, return_indices=True), [x])


def test_other_dtypes_and_strided_inputs_keep_the_numpy_path():
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8))
    for dt in ("float64", "float16"):
        xe, xt = ember.tensor(x).to(getattr(ember, dt)), torch.tensor(x).to(getattr(torch, dt))
        np.testing.assert_allclose(F.max_pool2d(xe, 2).float().numpy(),
                                   torch.nn.functional.max_pool2d(xt, 2).float().numpy())
    xs = _rand((2, 8, 8, 3), 1)     # a channels-last view: not C-contiguous
    _check(lambda lib, x: _fn(lib).max_pool2d(x.permute(0, 3, 1, 2), 2, return_indices=True), [xs])
    _check(lambda lib, x: _fn(lib).conv2d(x.permute(0, 3, 1, 2), x.permute(0, 3, 1, 2)[:2, :, :3, :3]), [xs])


def test_results_do_not_depend_on_the_thread_count():
    # the window kernels alone (a convolution's GEMM is the BLAS's business): unfold, fold, max pooling
    x = _rand((16, 16, 40, 40), 1)
    res = []
    for n in (1, 2):
        old = ember.get_num_threads()
        ember.set_num_threads(n)
        try:
            xe = ember.tensor(x, requires_grad=True)
            y = F.max_pool2d(F.fold(F.unfold(xe, 3, padding=1) * 0.5, (40, 40), 3, padding=1), 2)
            y.sum().backward()
            res.append((y.detach().numpy(), xe.grad.numpy()))
        finally:
            ember.set_num_threads(old)
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)
