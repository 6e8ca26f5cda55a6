"""The native cross entropy (class indices, float32 (N, C) logits, no class weights or smoothing): loss
and gradient against torch and against ember's NumPy path (the native kernels off), every reduction,
ignored targets, out-of-range targets, the cases that keep the NumPy path, and thread-count
independence."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember._native import eager_kernels as native

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler: the native kernels cannot be built "
                                "(the NumPy path is tested by the loss tests)")


def _case(n=37, c=11, seed=0, ignore=()):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 3).astype(np.float32)
    t = rng.integers(0, c, n)
    for i in ignore:
        t[i] = -100
    return x, t


def _run(lib, x, t, grad_seed=4, **kw):
    xt = lib.tensor(x, requires_grad=True)
    loss = lib.nn.functional.cross_entropy(xt, lib.tensor(t), **kw)
    g = np.random.default_rng(grad_seed).standard_normal(tuple(loss.shape)).astype(np.float32)
    loss.backward(lib.tensor(g))
    return loss.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore", [(), (0, 5, 6)])
def test_matches_torch_and_the_numpy_path(reduction, ignore):
    x, t = _case(ignore=ignore)
    le, ge = _run(ember, x, t, reduction=reduction)
    lt, gt = _run(torch, x, t, reduction=reduction)
    np.testing.assert_allclose(le, lt, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ge, gt, rtol=1e-5, atol=1e-7)
    native.set_enabled(False)
    try:
        ln, gn = _run(ember, x, t, reduction=reduction)
    finally:
        native.set_enabled(True)
    np.testing.assert_allclose(le, ln, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ge, gn, rtol=1e-5, atol=1e-8)
    if ignore:
        assert not ge[list(ignore)].any()       # ignored rows get no gradient


def test_every_target_ignored_gives_nan_and_a_zero_gradient():
    x, t = _case(n=4, ignore=range(4))
    for lib in (ember, torch):
        loss, grad = _run(lib, x, t)
        assert np.isnan(loss)
        assert not grad.any()


def test_a_target_out_of_range_raises_as_torch():
    x, t = _case(n=6)
    t[3] = 11
    with pytest.raises(IndexError, match="Target 11 is out of bounds"):
        ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(t))
    t[3] = -2
    with pytest.raises(IndexError, match="Target -2 is out of bounds"):
        ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(t))


def test_other_cases_keep_the_numpy_path_and_agree():
    x, t = _case()
    w = np.linspace(0.5, 2, 11).astype(np.float32)
    for kw in (dict(label_smoothing=0.1), dict(weight=w)):
        le, ge = _run(ember, x, t, **{k: ember.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
        lt, gt = _run(torch, x, t, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
        np.testing.assert_allclose(le, lt, rtol=1e-5, atol=1e-6, err_msg=str(kw))
        np.testing.assert_allclose(ge, gt, rtol=1e-5, atol=1e-7, err_msg=str(kw))
    le, ge = _run(ember, x.astype(np.float64), t)         # float64: NumPy
    lt, gt = _run(torch, x.astype(np.float64), t)
    np.testing.assert_allclose(le, lt, rtol=1e-12)
    np.testing.assert_allclose(ge, gt, rtol=1e-10, atol=1e-15)


def test_results_do_not_depend_on_the_thread_count():
    x, t = _case(n=8192, c=100, ignore=(1, 4000))
    before = ember.get_num_threads()
    outs = []
    try:
        for n in (1, 2):
            ember.set_num_threads(n)
            outs.append(_run(ember, x, t))
    finally:
        ember.set_num_threads(before)
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
