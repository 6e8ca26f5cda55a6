"""nn.FractionalMaxPool2d/3d and F.fractional_max_pool2d/3d against torch, given the same
``_random_samples``: values, indices and input gradients (overlapping windows included), output_ratio,
unbatched input, float64, NaN, the module's buffer and repr, and the errors."""
import numpy as np
import pytest
import torch

import ember
from oracle import same_error

RNG = np.random.default_rng(0)


def _run(L, x, samples, nd, **kw):
    F = L.nn.functional
    xt = L.tensor(x, requires_grad=True)
    fn = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    y, i = fn(xt, return_indices=True, _random_samples=L.tensor(samples), **kw)
    (y * L.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
    return y.detach().numpy(), i.numpy(), xt.grad.numpy()


@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 9, 8), dict(kernel_size=3, output_size=(4, 5))),
    ((2, 3, 9, 8), dict(kernel_size=2, output_size=(8, 7))),      # overlapping windows: summed gradients
    ((1, 2, 17, 13), dict(kernel_size=(3, 2), output_ratio=(0.5, 0.7))),
    ((3, 10, 10), dict(kernel_size=2, output_size=5)),             # unbatched
    ((2, 1, 7, 7), dict(kernel_size=7, output_size=1)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fractional_max_pool2d_matches_torch(shape, kw, dtype):
    x = RNG.normal(size=shape).astype(dtype)
    n = shape[0] if len(shape) == 4 else 1
    samples = RNG.random((n, shape[-3], 2)).astype(dtype)
    for t, e in zip(_run(torch, x, samples, 2, **kw), _run(ember, x, samples, 2, **kw)):
        np.testing.assert_allclose(e, t, rtol=1e-6)


@pytest.mark.parametrize("shape,kw", [
    ((2, 2, 7, 8, 9), dict(kernel_size=2, output_size=(3, 4, 5))),
    ((2, 5, 6, 7), dict(kernel_size=(2, 3, 2), output_ratio=0.5)),
])
def test_fractional_max_pool3d_matches_torch(shape, kw):
    x = RNG.normal(size=shape).astype(np.float32)
    n = shape[0] if len(shape) == 5 else 1
    samples = RNG.random((n, shape[-4], 3)).astype(np.float32)
    for t, e in zip(_run(torch, x, samples, 3, **kw), _run(ember, x, samples, 3, **kw)):
        np.testing.assert_allclose(e, t, rtol=1e-6)


def test_nan_and_ties_pick_torchs_index():
    x = np.zeros((1, 1, 6, 6), np.float32)
    x[0, 0, 1, 1] = np.nan
    x[0, 0, 4, 4] = np.nan
    x[0, 0, 4, 5] = np.nan
    s = np.array([[[0.3, 0.6]]], np.float32)
    for t, e in zip(_run(torch, x, s, 2, kernel_size=3, output_size=3)[:2],
                    _run(ember, x, s, 2, kernel_size=3, output_size=3)[:2]):
        np.testing.assert_array_equal(e, t)


def test_module_matches_torch():
    x = RNG.normal(size=(2, 3, 12, 12)).astype(np.float32)
    s = RNG.random((2, 3, 2)).astype(np.float32)

    def fn(L):
        m = L.nn.FractionalMaxPool2d(3, output_ratio=0.5, _random_samples=L.tensor(s))
        m3 = L.nn.FractionalMaxPool3d((2, 2, 2), output_size=2, return_indices=True)
        return (m(L.tensor(x)).numpy(), sorted(m.state_dict()), m.output_ratio, m.kernel_size,
                m3.output_size, m3.kernel_size, m3(L.ones(1, 2, 4, 4, 4))[1].shape)
    t, e = fn(torch), fn(ember)
    np.testing.assert_allclose(e[0], t[0])
    assert t[1:] == e[1:]


def test_random_samples_are_drawn_when_not_given():
    ember.manual_seed(0)
    y = ember.nn.functional.fractional_max_pool2d(ember.randn(2, 3, 10, 10), 2, output_ratio=(0.5, 0.5))
    assert y.shape == (2, 3, 5, 5)


@pytest.mark.parametrize("call", [
    lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 8), 3),
    lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 8), 3, output_size=8,
                                                    _random_samples=L.full((2, 3, 2), 0.5)),
    lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 8), 3, output_size=4,
                                                    _random_samples=L.full((1, 3, 2), 0.5)),
    lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 8), 3, output_size=4,
                                                    _random_samples=L.full((2, 3, 1), 0.5)),
    lambda L: L.nn.functional.fractional_max_pool3d(L.ones(2, 3, 9, 8), 2, output_size=2),
    lambda L: L.nn.FractionalMaxPool2d(2, output_ratio=1.5),
    lambda L: L.nn.FractionalMaxPool2d(2),
    lambda L: L.nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5),
])
def test_errors_match_torch(call):
    same_error(call)
