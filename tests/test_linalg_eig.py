"""linalg.eig / eigvals against torch: complex dtypes, values, eigenvector magnitudes, gradients of
gauge-invariant losses, batches; double backward is refused clearly."""
import numpy as np
import pytest
import torch

import ember


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_eig_matches_torch(dt, shape):
    A = np.random.default_rng(3).standard_normal(shape)
    res = {}
    for lib in (torch, ember):
        a = lib.tensor(A.astype(dt), requires_grad=True)
        w, V = lib.linalg.eig(a)
        n = shape[-1]
        weights = lib.arange(float(n * n)).reshape(n, n).to(V.real.dtype)
        loss = ((w * w.conj()).real.sum() + (w.real ** 3).sum() + (V.abs() ** 2 * weights).sum()
                + lib.linalg.eigvals(a).imag.abs().sum())
        loss.backward()
        res[lib.__name__] = (w.detach().numpy(), np.abs(V.detach().numpy()), a.grad.numpy(), str(w.dtype).split(".")[-1])
    (tw, tv, tg, tdt), (ew, ev, eg, edt) = res["torch"], res["ember"]
    assert edt == tdt
    tol = 1e-4 if dt == "float32" else 1e-9
    np.testing.assert_allclose(ew, tw, atol=tol)
    np.testing.assert_allclose(ev, tv, atol=tol)
    np.testing.assert_allclose(eg, tg, atol=tol * 10, rtol=tol * 10)


def test_eig_double_backward_is_refused():
    a = ember.tensor(np.random.default_rng(0).standard_normal((3, 3)), requires_grad=True)
    w, _ = ember.linalg.eig(a)
    with pytest.raises(NotImplementedError, match="double backward"):
        ember.autograd.grad(w.real.sum(), a, create_graph=True)
