"""CPU autocast runs the ops of torch's "fp32" list in float32 (bfloat16/float16 arguments cast up):
prod, trace, the linear-algebra decompositions and solvers, the FFTs, quantile, polar, view_as_complex,
adaptive_max_pool3d; prelu is on the lower-precision list. Results and dtypes checked against torch.
Also ``linalg.tensorinv`` / ``tensorsolve`` (new) against torch, with their errors."""
import numpy as np
import pytest
import torch

import ember
from oracle import same_error

_A = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
_SPD = (_A @ _A.T + 4 * np.eye(4)).astype(np.float32)

CALLS = {
    "prod": lambda L, a, s: L.prod(a), "prod_dim": lambda L, a, s: a.prod(1), "trace": lambda L, a, s: L.trace(a),
    "trace_method": lambda L, a, s: a.trace(), "inverse": lambda L, a, s: L.inverse(s),
    "linalg_inv": lambda L, a, s: L.linalg.inv(s), "cholesky": lambda L, a, s: L.linalg.cholesky(s),
    "solve": lambda L, a, s: L.linalg.solve(s, a), "svdvals": lambda L, a, s: L.linalg.svdvals(a),
    "eigvalsh": lambda L, a, s: L.linalg.eigvalsh(s), "qr": lambda L, a, s: L.linalg.qr(a)[1].abs(),
    "cond": lambda L, a, s: L.linalg.cond(s), "matrix_rank": lambda L, a, s: L.linalg.matrix_rank(a),
    "quantile": lambda L, a, s: L.quantile(a, 0.3), "nanquantile": lambda L, a, s: a.nanquantile(0.7, dim=0),
    "rfft": lambda L, a, s: L.fft.rfft(a).abs(), "fft2": lambda L, a, s: L.fft.fft2(a).abs(),
    "irfft": lambda L, a, s: L.fft.irfft(a), "lstsq": lambda L, a, s: L.linalg.lstsq(s, a).solution,
    "cholesky_solve": lambda L, a, s: L.cholesky_solve(a, L.linalg.cholesky(s.float()).to(s.dtype)),
    "polar": lambda L, a, s: L.view_as_real(L.polar(a.abs(), a)),
    "view_as_complex": lambda L, a, s: L.view_as_real(L.view_as_complex(a.reshape(4, 2, 2))),
    "adaptive_max_pool3d": lambda L, a, s: L.nn.functional.adaptive_max_pool3d(a.reshape(1, 1, 2, 2, 4), 1),
    "tensorinv": lambda L, a, s: L.linalg.tensorinv(s.reshape(2, 2, 4), ind=2),
    "prelu": lambda L, a, s: L.nn.functional.prelu(a.float(), L.tensor([0.25])),
    "prod_f64": lambda L, a, s: L.prod(a.double()),
}


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_autocast_fp32_ops_match_torch(name, low):
    def fn(L):
        dt = getattr(L, low)
        a, s = L.tensor(_A).to(dt), L.tensor(_SPD).to(dt)
        with L.autocast("cpu", dtype=dt):
            r = CALLS[name](L, a, s)
        return str(r.dtype).split(".")[-1], r.detach().float().numpy()
    (td, tv), (ed, ev) = fn(torch), fn(ember)
    assert td == ed
    np.testing.assert_allclose(ev, tv, rtol=2e-2, atol=2e-2)


def test_outside_autocast_keeps_the_low_precision():
    a = ember.tensor(_A).bfloat16()
    assert ember.prod(a).dtype == ember.bfloat16 and a.trace().dtype == ember.bfloat16


def test_tensorinv_and_tensorsolve_match_torch():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(4, 6, 8, 3)).astype(np.float64)
    b = rng.normal(size=(4, 6)).astype(np.float64)
    c = rng.normal(size=(3, 4, 8, 6)).astype(np.float64)

    def fn(L):
        A = L.tensor(a, requires_grad=True)
        X = L.linalg.tensorinv(A, ind=2)
        Y = L.linalg.tensorsolve(A, L.tensor(b))
        Z = L.linalg.tensorsolve(L.tensor(c), L.tensor(b), dims=(0, 2))
        (X.sum() + Y.sum()).backward()
        return X.detach().numpy(), Y.detach().numpy(), Z.numpy(), A.grad.numpy()
    for t, e in zip(fn(torch), fn(ember)):
        np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("call", [
    lambda L: L.linalg.tensorinv(L.ones(4, 3, 2), ind=1),
    lambda L: L.linalg.tensorinv(L.ones(4, 2, 2), ind=0),
    lambda L: L.linalg.tensorinv(L.ones(4, 4), ind=1.0),
    lambda L: L.linalg.tensorsolve(L.ones(2, 3, 6), L.ones(3, 3)),
])
def test_tensor_linalg_errors_match_torch(call):
    same_error(call)


def test_fractional_max_pool_runs_in_float32_under_autocast():
    x = np.random.default_rng(2).normal(size=(1, 2, 8, 8)).astype(np.float32)
    s = np.full((1, 2, 2), 0.4, np.float32)

    def fn(L):
        with L.autocast("cpu", dtype=L.bfloat16):
            return L.nn.functional.fractional_max_pool2d(L.tensor(x).bfloat16(), 2, output_size=4,
                                                         _random_samples=L.tensor(s).bfloat16())
    t, e = fn(torch), fn(ember)
    assert t.dtype == torch.float32 and e.dtype == ember.float32
    np.testing.assert_allclose(e.numpy(), t.numpy())
