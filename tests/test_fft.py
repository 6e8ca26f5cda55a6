"""ember.fft against torch.fft: values, result dtypes and gradients of every transform over norms, signal
lengths (trimmed and zero-padded), dims and input dtypes; argument errors; fftfreq/rfftfreq; the shifts."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import ember
from oracle import same_error

NORMS = [None, "backward", "ortho", "forward"]


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().numpy()
    return t.detach()._data


def _run(lib, f, arr):
    """f(x) and the gradient of a fixed real weighting of its (real, imag) parts."""
    x = lib.tensor(arr.copy(), requires_grad=True)
    out = f(lib, x)
    r = lib.view_as_real(out.resolve_conj()) if out.is_complex() else out
    w = lib.tensor(np.random.default_rng(7).standard_normal(tuple(r.shape)), dtype=r.dtype)
    (g,) = lib.autograd.grad((r * w).sum(), [x])
    return out, g


def check(f, arr):
    (to, tg), (eo, eg) = _run(torch, f, arr), _run(ember, f, arr)
    assert str(eo.dtype).split(".")[-1] == str(to.dtype).split(".")[-1]
    assert tuple(eo.shape) == tuple(to.shape)
    single = arr.dtype in (np.float32, np.complex64)
    tol = dict(rtol=1e-4, atol=1e-4) if single else dict(rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(_np(eo), _np(to), **tol)
    assert eg.dtype is getattr(ember, str(tg.dtype).split(".")[-1])
    np.testing.assert_allclose(_np(eg), _np(tg), **tol)


def _signals():
    rng = np.random.default_rng(1)
    r = rng.standard_normal((3, 8))
    c = r + 1j * rng.standard_normal((3, 8))
    return {"float64": r, "float32": r.astype(np.float32), "complex128": c, "complex64": c.astype(np.complex64)}


SIG = _signals()


@pytest.mark.parametrize("name", ["fft", "ifft", "hfft"])
@pytest.mark.parametrize("norm", NORMS)
def test_complex_input_1d(name, norm):
    for dt, n, dim in itertools.product(SIG, [None, 5, 8, 11], [-1, 0]):
        check(lambda m, x: getattr(m.fft, name)(x, n=n, dim=dim, norm=norm), SIG[dt])


@pytest.mark.parametrize("name", ["rfft", "ihfft", "irfft"])
@pytest.mark.parametrize("norm", NORMS)
def test_real_and_onesided_1d(name, norm):
    dts = ["float32", "float64"] if name != "irfft" else list(SIG)
    for dt, n, dim in itertools.product(dts, [None, 1, 6, 9], [-1, 0]):
        check(lambda m, x: getattr(m.fft, name)(x, n=n, dim=dim, norm=norm), SIG[dt])


ND_ARGS = [(None, None), ((4, 7), None), (None, (0, 2)), ((3, 4), (2, 0)), ((-1, 4), (1, 2)), ((5,), (1,))]


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2"])
def test_nd_transforms(name):
    rng = np.random.default_rng(2)
    r = rng.standard_normal((2, 5, 6))
    c = r + 1j * rng.standard_normal((2, 5, 6))
    for (s, dim), norm in itertools.product(ND_ARGS, NORMS):
        if name.endswith("2") and dim is None:
            dim = (-2, -1)
            if s is not None and len(s) != 2:
                continue
        for arr in ([r] if name.startswith("rfft") else [r, c]):
            check(lambda m, x: getattr(m.fft, name)(x, s=s, dim=dim, norm=norm), arr)


def test_result_dtypes_follow_torch():
    for make in (lambda m: m.arange(6), lambda m: m.ones(4, dtype=m.float64), lambda m: m.ones(4, dtype=m.bool),
                 lambda m: m.ones(4, 2, dtype=m.complex128)):
        for f in (lambda m, x: m.fft.fft(x), lambda m, x: m.fft.ifft2(x.reshape(2, -1)),
                  lambda m, x: m.fft.irfft(x), lambda m, x: m.fft.hfft(x, n=4)):
            e, t = f(ember, make(ember)), f(torch, make(torch))
            assert e.dtype.name == str(t.dtype).split(".")[1]
            np.testing.assert_allclose(_np(e), _np(t), rtol=1e-5, atol=1e-5)
        if not make(torch).is_complex():
            for f in (lambda m, x: m.fft.rfft(x), lambda m, x: m.fft.ihfft(x)):
                assert f(ember, make(ember)).dtype.name == str(f(torch, make(torch)).dtype).split(".")[1]


def test_out_argument():
    x = np.random.default_rng(0).standard_normal(8)
    for lib in (torch, ember):
        out = lib.empty(5, dtype=lib.complex128)
        r = lib.fft.rfft(lib.tensor(x), out=out)
        assert r is out
    np.testing.assert_allclose(ember.fft.rfft(ember.tensor(x))._data, np.fft.rfft(x))


BAD = [
    lambda m: m.fft.fft(m.ones(4, dtype=m.float16)),
    lambda m: m.fft.rfft(m.ones(4, dtype=m.complex64)),
    lambda m: m.fft.ihfft(m.ones(4, dtype=m.complex64)),
    lambda m: m.fft.rfftn(m.ones(2, 4, dtype=m.complex128)),
    lambda m: m.fft.fft(m.ones(4), n=0),
    lambda m: m.fft.irfft(m.ones(1)),
    lambda m: m.fft.fft(m.ones(4), dim=1),
    lambda m: m.fft.fft(m.tensor(1.0)),
    lambda m: m.fft.fft(m.ones(4), norm="bad"),
    lambda m: m.fft.fftn(m.ones(4), s=(2, 2)),
    lambda m: m.fft.fftn(m.ones(4, 4), s=(2,), dim=(0, 0)),
    lambda m: m.fft.fftn(m.ones(4, 4), s=(2, 2), dim=(0,)),
    lambda m: m.fft.fft2(m.ones(4, 4), dim=None),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_errors_match_torch(i):
    same_error(BAD[i])


def test_fftfreq_and_rfftfreq():
    for n, d in [(1, 1.0), (5, 1.0), (6, 0.5), (7, 2.0), (8, 0.1)]:
        for name in ("fftfreq", "rfftfreq"):
            t = getattr(torch.fft, name)(n, d)
            e = getattr(ember.fft, name)(n, d)
            assert e.dtype is ember.float32 and tuple(e.shape) == tuple(t.shape)
            np.testing.assert_allclose(e._data, t.numpy(), rtol=1e-6)
            e64 = getattr(ember.fft, name)(n, d, dtype=ember.float64)
            np.testing.assert_allclose(e64._data, getattr(torch.fft, name)(n, d, dtype=torch.float64).numpy())
    assert ember.fft.fftfreq(4, requires_grad=True).requires_grad


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
def test_shifts(name):
    rng = np.random.default_rng(4)
    for shape, dim in [((5,), None), ((4, 5), None), ((4, 5), 0), ((3, 4, 5), (0, 2)), ((3, 4, 5), -1)]:
        for arr in (rng.standard_normal(shape), rng.standard_normal(shape) + 1j * rng.standard_normal(shape)):
            check(lambda m, x: getattr(m.fft, name)(x, dim=dim), arr)
    x = ember.arange(10)
    assert ember.fft.ifftshift(ember.fft.fftshift(x)).tolist() == list(range(10))


def test_roundtrips_and_grad_nodes():
    x = ember.randn(4, 6, dtype=ember.float64, requires_grad=True)
    y = ember.fft.irfft(ember.fft.rfft(x), n=6)
    np.testing.assert_allclose(y._data, x._data, atol=1e-12)
    assert ember.fft.rfft(x).grad_fn.name() == torch.fft.rfft(torch.ones(2, requires_grad=True)).grad_fn.name()
    assert ember.fft.fft(x.to(ember.complex128)).grad_fn.name() == "FftC2CBackward0"
    assert ember.fft.irfft(x).grad_fn.name() == "FftC2RBackward0"


def test_hfftn_family_matches_torch():
    # hfft2/hfftn: FFT of a Hermitian signal from its half; ihfft2/ihfftn: their inverses (ember.fft)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 6, 5))
    c = x + 1j * rng.normal(size=(3, 6, 5))
    calls = [lambda L: L.fft.hfft2(L.tensor(c)), lambda L: L.fft.hfftn(L.tensor(c), s=(4, 8), norm="ortho"),
             lambda L: L.fft.hfftn(L.tensor(c)), lambda L: L.fft.ihfft2(L.tensor(x)),
             lambda L: L.fft.ihfftn(L.tensor(x), dim=(0, 2), norm="forward"),
             lambda L: L.fft.ihfftn(L.tensor(x), s=(4, 4)),
             lambda L: L.fft.hfft2(L.fft.ihfft2(L.tensor(x)), s=(6, 5)), lambda L: L.fft.hfft2(L.tensor(x))]
    for call in calls:
        t, e = call(torch), call(ember)
        assert str(e.dtype)[6:] == str(t.dtype)[6:] and tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-9, atol=1e-9)
