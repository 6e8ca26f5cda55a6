"""Window functions, stft and istft against torch: values, gradients through stft, the round trip."""
import warnings

import numpy as np
import pytest
import torch

import ember

SIG = np.random.default_rng(0).standard_normal((2, 100)).astype(np.float32)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_windows_match_torch(name):
    for n in (0, 1, 2, 7, 16):
        for periodic in (True, False):
            a, b = getattr(torch, name)(n, periodic), getattr(ember, name)(n, periodic)
            assert str(b.dtype).split(".")[-1] == str(a.dtype).split(".")[-1]
            np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-6)
    a, b = getattr(torch, name)(5, dtype=torch.float64), getattr(ember, name)(5, dtype=ember.float64)
    np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-12)


@pytest.mark.parametrize("kw", [dict(n_fft=16), dict(n_fft=16, hop_length=4, win_length=12),
                                dict(n_fft=15, hop_length=5, center=False), dict(n_fft=16, normalized=True,
                                                                                onesided=False),
                                dict(n_fft=16, pad_mode="constant")])
def test_stft_values_gradients_and_istft_match_torch(kw):
    res = {}
    for lib in (torch, ember):
        x = lib.tensor(SIG, requires_grad=True)
        w = lib.hann_window(kw.get("win_length", kw["n_fft"]))
        s = lib.stft(x, window=w, return_complex=True, **kw)
        (s.abs() ** 2).sum().backward()
        ikw = {k: v for k, v in kw.items() if k != "pad_mode"}
        inv = lib.istft(s.detach(), window=w, length=100, **ikw) if kw.get("center", True) else None
        res[lib.__name__] = (s.detach().numpy(), x.grad.numpy(), None if inv is None else inv.numpy())
    (ts, tg, ti), (es, eg, ei) = res["torch"], res["ember"]
    assert es.shape == ts.shape and es.dtype == ts.dtype
    np.testing.assert_allclose(es, ts, atol=1e-4)
    np.testing.assert_allclose(eg, tg, atol=1e-3)
    if ti is not None:
        np.testing.assert_allclose(ei, ti, atol=1e-4)
        np.testing.assert_allclose(ei, SIG, atol=1e-4)          # the round trip gives the signal back


def test_stft_real_output_and_errors_match_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = torch.stft(torch.tensor(SIG[0]), 8, return_complex=False)
        b = ember.stft(ember.tensor(SIG[0]), 8, return_complex=False)
    assert tuple(b.shape) == tuple(a.shape)
    np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-4)
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match="return_complex"):
            lib.stft(lib.tensor(SIG), 8, window=lib.hann_window(8))
    with pytest.warns(UserWarning, match="window was not provided"):
        ember.stft(ember.tensor(SIG), 8, return_complex=True)
    s = ember.tensor(SIG).stft(16, window=ember.hann_window(16), return_complex=True)      # the method form
    assert s.shape == (2, 9, 26)
