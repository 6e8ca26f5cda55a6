"""Top-level torch functions older programs call (ember/_legacy_toplevel.py), against torch."""
import warnings

import numpy as np
import pytest
import torch

import ember


def _both(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(torch), fn(ember)


def test_range_includes_the_end_and_warns():
    for args, kw in [((1, 4), {}), ((0, 1, 0.25), {}), ((1, 4), {"dtype": "int64"}), ((3, 1, -0.5), {})]:
        def f(L):
            k = {"dtype": getattr(L, kw["dtype"])} if kw else {}
            r = L.range(*args, **k)
            return r.tolist(), str(r.dtype).split(".")[-1]
        t, e = _both(f)
        assert t == e
    for L in (torch, ember):
        with pytest.warns(UserWarning, match="torch.range is deprecated"):
            L.range(0, 2)
        with pytest.raises(TypeError, match="end"):
            L.range(5)


def test_set_default_tensor_type():
    try:
        for L in (torch, ember):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                L.set_default_tensor_type(L.DoubleTensor)
                assert L.zeros(1).dtype == L.float64
                L.set_default_tensor_type("torch.FloatTensor")
                assert L.zeros(1).dtype == L.float32
                with pytest.raises(TypeError, match="only floating-point types"):
                    L.set_default_tensor_type("torch.LongTensor")
                with pytest.raises(TypeError, match="not available"):
                    L.set_default_tensor_type("torch.cuda.FloatTensor")
    finally:
        torch.set_default_dtype(torch.float32)
        ember.set_default_dtype(ember.float32)


def test_small_function_forms():
    def f(L):
        x = L.tensor([4, 6])
        x.gcd_(L.tensor([6, 9]))
        L.lcm_(x, L.tensor([4, 4]))
        y = L.ones(2)
        L.neg_(y)
        L.negative_(y)
        return (x.tolist(), y.tolist(), L.get_device(L.ones(1)), L.is_inference(L.ones(1)),
                L.is_warn_always_enabled(), L.is_anomaly_check_nan_enabled())
    t, e = _both(f)
    assert t == e


def test_frombuffer_shares_memory_like_torch():
    for L in (torch, ember):
        b = bytearray(np.array([1.0, 2.0, 3.0], np.float32).tobytes())
        t = L.frombuffer(b, dtype=L.float32)
        assert t.tolist() == [1.0, 2.0, 3.0]
        t[0] = 5
        assert np.frombuffer(b, np.float32)[0] == 5
        assert L.frombuffer(b, dtype=L.float32, count=1, offset=8).tolist() == [3.0]
        with pytest.raises(ValueError):
            L.frombuffer(b, dtype=L.float32, count=4)


@pytest.mark.parametrize("shape", [(20, 8), (8, 20)])
def test_svd_and_pca_lowrank_recover_a_low_rank_matrix(shape):
    r = np.random.default_rng(0)
    a = (r.normal(size=(shape[0], 4)) @ r.normal(size=(4, shape[1]))).astype(np.float64)
    ember.manual_seed(0)
    U, S, V = ember.svd_lowrank(ember.tensor(a), q=5)
    np.testing.assert_allclose((U @ ember.diag(S) @ V.T).numpy(), a, atol=1e-9)
    np.testing.assert_allclose(S.numpy()[:4], np.linalg.svd(a, compute_uv=False)[:4], rtol=1e-10)
    tU, tS, tV = torch.svd_lowrank(torch.tensor(a), q=5)
    np.testing.assert_allclose(S.numpy()[:4], tS.numpy()[:4], rtol=1e-8)
    U, S, V = ember.pca_lowrank(ember.tensor(a), q=4)      # (centred, the rank is still at most 4: exact)
    tU, tS, tV = torch.pca_lowrank(torch.tensor(a), q=4)
    assert (U.shape, S.shape, V.shape) == (tU.shape, tS.shape, tV.shape)
    np.testing.assert_allclose(S.numpy(), tS.numpy(), rtol=1e-8)
    c = a - a.mean(0)
    np.testing.assert_allclose((U @ ember.diag(S) @ V.T).numpy(), c, atol=1e-9)
    for L in (torch, ember):
        with pytest.raises(ValueError, match="q"):
            L.pca_lowrank(L.tensor(a), q=100)
        assert [tuple(t.shape) for t in L.svd_lowrank(L.tensor(a), q=100)] == [(shape[0], min(shape)), (min(shape),),
                                                                             (shape[1], min(shape))]
