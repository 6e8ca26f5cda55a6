"""Helpers shared by the test_compat_fixes_*.py files: run a call in torch and ember and compare results
(values, shapes, dtypes, element by element for sequences) or errors."""
import functools

import numpy as np
import torch

import ember
from oracle import same_error as _same_error

same_error = functools.partial(_same_error, exact=False, first_line=False)


def np_of(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


def both(fn):
    """Run ``fn(lib)`` for both libraries; return (torch result, ember result)."""
    return fn(torch), fn(ember)


def assert_same(fn, atol=1e-6):
    t, e = both(fn)
    _assert_same(t, e, atol)


def _assert_same(t, e, atol):
    if isinstance(t, (tuple, list)):
        assert len(t) == len(e)
        for a, b in zip(t, e):
            _assert_same(a, b, atol)
        return
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor)
        assert tuple(t.shape) == tuple(e.shape)
        assert str(t.dtype).replace("torch.", "") == str(e.dtype).replace("ember.", "")
        np.testing.assert_allclose(np_of(e).astype(np.float64), np_of(t).astype(np.float64), atol=atol, rtol=1e-5,
                                   equal_nan=True)
        return
    assert t == e, (t, e)




def fixed_linear(lib):
    """A Linear(3, 2) of ``lib`` with fixed weights (0.0..0.5) and zero bias."""
    lin = lib.nn.Linear(3, 2)
    lin.load_state_dict({"weight": lib.tensor(np.arange(6.0).reshape(2, 3) / 10, dtype=lib.float32),
                         "bias": lib.zeros(2)})
    return lin
