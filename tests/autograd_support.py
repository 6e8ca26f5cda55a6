"""Helpers the autograd tests share (test_tensor and test_promotion use them too): run a function with
``lib = torch`` and ``lib = ember`` and compare what comes out, or the exception raised.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

LIBS = (torch, ember)


# ---- comparison helpers ------------------------------------------------------------------------------

def _cmp(e, t, path="out", atol=1e-6, rtol=1e-5):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)), f"{path}: expected a sequence, got {type(e).__name__}"
        assert len(e) == len(t), f"{path}: length {len(e)} != torch {len(t)}"
        for i, (a, b) in enumerate(zip(e, t)):
            _cmp(a, b, f"{path}[{i}]", atol, rtol)
    elif isinstance(t, dict):
        assert set(e) == set(t), f"{path}: keys {sorted(e)} != torch {sorted(t)}"
        for k in t:
            _cmp(e[k], t[k], f"{path}[{k!r}]", atol, rtol)
    elif isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{path}: expected a Tensor, got {type(e).__name__}"
        assert tuple(e.shape) == tuple(t.shape), f"{path}: shape {tuple(e.shape)} != torch {tuple(t.shape)}"
        assert e.dtype.name == str(t.dtype)[6:], f"{path}: dtype {e.dtype} != torch {t.dtype}"
        np.testing.assert_allclose(e.detach().numpy().astype(np.float64), t.detach().numpy().astype(np.float64),
                                   atol=atol, rtol=rtol, equal_nan=True, err_msg=path)
    elif isinstance(t, float):
        assert e == pytest.approx(t, rel=rtol, abs=atol, nan_ok=True), f"{path}: {e} != torch {t}"
    else:
        assert e == t, f"{path}: {e!r} != torch {t!r}"


def same(fn, **kw):
    """Run ``fn(torch)`` and ``fn(ember)`` and compare the results."""
    t = fn(torch)
    e = fn(ember)
    _cmp(e, t, **kw)
    return e, t


def _builtin_base(exc):
    for c in type(exc).__mro__:
        if c.__module__ == "builtins":
            return c
    return Exception


def same_error(fn, prefix: bool = False, contains: str | None = None):
    """``fn(torch)`` and ``fn(ember)`` raise the same exception type with the same message."""
    with pytest.raises(Exception) as et:
        fn(torch)
    with pytest.raises(Exception) as ee:
        fn(ember)
    tb, eb = _builtin_base(et.value), _builtin_base(ee.value)
    assert eb is tb, f"ember raised {type(ee.value).__name__}({ee.value}), torch {type(et.value).__name__}({et.value})"
    tm = str(et.value)
    em = str(ee.value).replace("ember.", "torch.")
    if contains is not None:
        assert contains in tm and contains in em, f"{contains!r} not in ember's {em!r} / torch's {tm!r}"
    elif prefix:
        n = min(len(tm), len(em), 60)
        assert em[:n] == tm[:n], f"ember: {em!r}\ntorch: {tm!r}"
    else:
        assert em == tm, f"ember: {em!r}\ntorch: {tm!r}"
    return ee.value, et.value


def leaf(lib, data, dtype=None, rg=True):
    dtype = dtype or lib.float32
    return lib.tensor(data, dtype=dtype, requires_grad=rg)


X = [[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]]


def unary_function(m, forward, backward, name: str = "Fn", save: bool = False, wrap=None):
    """A one-input custom ``m.autograd.Function`` class called ``name``: its forward is ``forward(x)``, its
    backward ``backward(g)``; with ``save`` the forward saves ``x`` (``ctx.save_for_backward``) and the
    backward takes it back from ``ctx.saved_tensors`` and calls ``backward(x, g)``. ``wrap`` decorates
    the backward (``once_differentiable``)."""
    def fwd(ctx, x):
        if save:
            ctx.save_for_backward(x)
        return forward(x)

    def bwd(ctx, g):
        if save:
            (x,) = ctx.saved_tensors
            return backward(x, g)
        return backward(g)
    return type(name, (m.autograd.Function,), {"forward": staticmethod(fwd),
                                               "backward": staticmethod(wrap(bwd) if wrap else bwd)})
