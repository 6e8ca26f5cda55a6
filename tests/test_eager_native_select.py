"""The native gather and topk kernels (ember/_native/eager_source_select.py): gather against torch for
several ranks, dims, dtypes and strided/expanded operands, with torch's out-of-range errors; topk's
values against torch and its indices bit for bit against ember's NumPy path (the native kernels off:
both order ties stably, with NaN the largest)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember._native import eager_kernels as native

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler: the native kernels cannot be built "
                                "(the NumPy path is tested by test_index.py and test_reduce.py)")

CASES = [((16, 16), 1), ((16, 16), 0), ((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), 2), ((7,), 0)]


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.int16, np.bool_, np.complex64])
def test_gather_matches_torch(shape, dim, dt):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3).astype(dt)
    ishape = list(shape)
    ishape[dim] = 5
    ishape[0] = max(1, ishape[0] - (dim != 0))         # (smaller than x off dim is allowed)
    idx = rng.integers(0, shape[dim], ishape)
    e = ember.tensor(x).gather(dim, ember.tensor(idx))
    t = torch.tensor(x).gather(dim, torch.tensor(idx))
    assert e.shape == tuple(t.shape) and e.numpy().dtype == t.numpy().dtype
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_gather_strided_and_expanded_operands():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 16)).astype(np.float32)
    e = ember.tensor(x).t()[:, 2:].gather(1, ember.tensor([1, 3, 5]).expand(16, 3))
    t = torch.tensor(x).t()[:, 2:].gather(1, torch.tensor([1, 3, 5]).expand(16, 3))
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    j = rng.integers(0, 8, (16, 8))
    e = ember.tensor(x)[::2].gather(0, ember.tensor(j).t())       # (x every other row, the index transposed)
    t = torch.tensor(x)[::2].gather(0, torch.tensor(j).t())
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("bad", [16, -1, 1 << 40])
def test_gather_out_of_range_raises_torchs_error(bad):
    msgs = []
    for lib in (ember, torch):
        x = lib.ones(4, 16)
        with pytest.raises(RuntimeError) as info:
            x.gather(1, lib.tensor([[1, bad]] * 4))
        msgs.append(str(info.value))
        np.testing.assert_array_equal(x.numpy(), np.ones((4, 16), np.float32))    # (nothing written)
    assert msgs[0] == msgs[1]


def test_take_along_dim_still_counts_negative_indices_from_the_end():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    j = np.array([[-1, 0], [1, -4], [3, 2]])
    e = ember.take_along_dim(ember.tensor(x), ember.tensor(j), 1)
    t = torch.take_along_dim(torch.tensor(x), torch.tensor(j), 1)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def _with_ties(shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::5] = 0.5
    flat[::7] = np.nan
    flat[::11] = -0.0
    flat[3::13] = 0.0
    return x


@pytest.mark.parametrize("shape", [(16, 16), (5,), (2, 3, 40), (4, 100)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_values_match_torch_indices_match_numpy_path(shape, largest):
    x = _with_ties(shape)
    for k in sorted({0, 1, 3, min(shape[-1], 10), shape[-1]}):
        e = ember.tensor(x).topk(k, largest=largest)
        t = torch.tensor(x).topk(k, largest=largest)
        np.testing.assert_array_equal(e.values.numpy(), t.values.numpy())
        assert e.indices.dtype == ember.int64 and e.values.shape == tuple(t.values.shape)
        was = native.set_enabled(False)
        try:
            n = ember.tensor(x).topk(k, largest=largest)
        finally:
            native.set_enabled(was)
        np.testing.assert_array_equal(e.indices.numpy(), n.indices.numpy())
        # (the indices address the values: the same element whatever the order among ties)
        np.testing.assert_array_equal(np.take_along_axis(x, e.indices.numpy(), -1), e.values.numpy())


def test_topk_gradient_through_native_kernel():
    x = _with_ties((6, 9), seed=3)
    x[np.isnan(x)] = 2.0
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    xe.topk(3)[0].sum().backward()
    xt.topk(3)[0].sum().backward()
    np.testing.assert_array_equal(xe.grad.numpy().sum(-1), xt.grad.numpy().sum(-1))      # (3 ones per row)
    was = native.set_enabled(False)
    try:
        xn = ember.tensor(x, requires_grad=True)
        xn.topk(3)[0].sum().backward()
    finally:
        native.set_enabled(was)
    np.testing.assert_array_equal(xe.grad.numpy(), xn.grad.numpy())
