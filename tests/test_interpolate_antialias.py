"""F.interpolate(..., antialias=True) (ember/nn/functional/_interpolate_aa.py) against torch: bilinear,
bicubic and lanczos down- and upsampling by size and by factor, align_corners, gradients, node names and
the errors for the modes and ranks torch refuses."""
import numpy as np
import pytest
import torch

import ember
from oracle import same_error

CALLS = [((32, 24), dict(size=(7, 5))), ((16, 16), dict(scale_factor=0.3)), ((9, 13), dict(size=(20, 4))),
         ((16, 16), dict(scale_factor=0.5, recompute_scale_factor=True)),
         ((10, 10), dict(size=(3, 4), align_corners=True)),
         ((8, 8), dict(size=(1, 1))), ((64, 48), dict(scale_factor=(0.25, 1 / 3)))]


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("call", range(len(CALLS)))
def test_antialias_matches_torch(mode, dtype, call):
    (h, w), kw = CALLS[call]
    if mode == "lanczos" and "align_corners" in kw:
        kw = {k: v for k, v in kw.items() if k != "align_corners"}
    rng = np.random.RandomState(call)
    x = rng.randn(2, 3, h, w).astype(dtype)
    res = []
    for L in (torch, ember):
        X = L.tensor(x, requires_grad=True)
        y = L.nn.functional.interpolate(X, mode=mode, antialias=True, **kw)
        g = L.tensor(np.linspace(-1, 1, y.numel()).reshape(y.shape).astype(dtype))
        (y * g).sum().backward()
        res.append((y.detach().numpy(), X.grad.numpy(), type(y.grad_fn).__name__, str(y.dtype).split(".")[-1]))
    tol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(res[1][0], res[0][0], atol=tol * 10, rtol=tol)
    np.testing.assert_allclose(res[1][1], res[0][1], atol=tol * 10, rtol=tol)
    assert res[1][2:] == res[0][2:]


@pytest.mark.parametrize("call", [
    lambda L: L.nn.functional.interpolate(L.randn(1, 2, 8), size=3, mode="linear", antialias=True),
    lambda L: L.nn.functional.interpolate(L.randn(1, 2, 8, 8), size=3, mode="nearest", antialias=True),
    lambda L: L.nn.functional.interpolate(L.randn(2, 8, 8), size=3, mode="bilinear", antialias=True),
    lambda L: L.nn.functional.interpolate(L.randn(1, 1, 8, 8), size=3, mode="lanczos"),
])
def test_refused_like_torch(call):
    same_error(call)
