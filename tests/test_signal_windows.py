"""ember.signal.windows against torch.signal.windows: every window, symmetric and periodic, lengths 0..9,
both float dtypes, the keyword parameters, requires_grad, and the errors."""
import numpy as np
import pytest
import torch

import ember
from oracle import same_error

NAMES = ["bartlett", "blackman", "cosine", "gaussian", "hamming", "hann", "kaiser", "nuttall", "exponential"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sym", [True, False])
def test_windows_match_torch(name, sym):
    for M in range(10):
        for dt in ("float32", "float64"):
            t = getattr(torch.signal.windows, name)(M, sym=sym, dtype=getattr(torch, dt))
            e = getattr(ember.signal.windows, name)(M, sym=sym, dtype=getattr(ember, dt))
            assert str(e.dtype)[6:] == str(t.dtype)[6:]
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda L: L.signal.windows.gaussian(7, std=2.5),
    lambda L: L.signal.windows.kaiser(8, beta=5.0, sym=False),
    lambda L: L.signal.windows.exponential(6, tau=2.0),
    lambda L: L.signal.windows.exponential(5, center=1.0, sym=False),
    lambda L: L.signal.windows.general_hamming(6, alpha=0.6),
    lambda L: L.signal.windows.general_cosine(6, a=[0.5, 0.3, 0.2], sym=False),
    lambda L: L.signal.windows.hann(5, requires_grad=True).detach(),
])
def test_window_parameters_match_torch(call):
    np.testing.assert_allclose(call(ember).numpy(), call(torch).numpy(), rtol=1e-5, atol=1e-6)
    assert ember.signal.windows.hann(5, requires_grad=True).requires_grad


@pytest.mark.parametrize("call", [
    lambda L: L.signal.windows.hann(-1),
    lambda L: L.signal.windows.cosine(-2),
    lambda L: L.signal.windows.hann(4, dtype=L.int64),
    lambda L: L.signal.windows.gaussian(5, std=0.0),
    lambda L: L.signal.windows.kaiser(5, beta=-1.0),
    lambda L: L.signal.windows.general_cosine(5, a=1.0),
    lambda L: L.signal.windows.exponential(5, tau=0.0),
    lambda L: L.signal.windows.exponential(5, center=1.0),
])
def test_window_errors_match_torch(call):
    same_error(call)
