"""Wishart.rsample's singular-sample correction: torch's signature (``max_try_correction``), its warning text,
singular draws redrawn (only those), gradients kept through the redraw, batch dims reduced per draw."""
import warnings

import numpy as np
import pytest
import torch

import ember


def _rsample(L, w, *a, singular_first=None, **k):
    """``w.rsample`` with the first Bartlett draw's entries ``singular_first`` zeroed (made singular)."""
    W = type(w)
    orig = W._bartlett_sampling
    calls = []

    def fake(self, shape):
        out = orig(self, shape)
        if not calls and singular_first is not None:
            keep = L.ones_like(out).detach()
            keep[singular_first] = 0.0
            out = out * keep
        calls.append(tuple(shape))
        return out
    W._bartlett_sampling = fake
    try:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            s = w.rsample(*a, **k)
    finally:
        W._bartlett_sampling = orig
    return s, calls, [str(r.message) for r in rec]


def test_signature_and_warning_text_match_torch():
    tw = torch.distributions.Wishart(df=torch.tensor(5.), covariance_matrix=torch.eye(3))
    _, _, tmsg = _rsample(torch, tw, (2,), max_try_correction=3)
    assert tmsg == ["Singular sample detected."]      # torch warns on this (well-conditioned) call
    ew = ember.distributions.Wishart(df=ember.tensor(5.), covariance_matrix=ember.eye(3))
    s, calls, msg = _rsample(ember, ew, (2,), max_try_correction=3)
    assert s.shape == (2, 3, 3) and msg == [] and calls == [(2,)]
    s, calls, msg = _rsample(ember, ew, (5,), singular_first=(1,))
    assert msg == tmsg and calls == [(5,), (1,)]
    assert bool(ember.linalg.cholesky_ex(s).info.eq(0).all())


def test_batch_redraws_whole_draw_and_keeps_others():
    ember.manual_seed(3)
    ew = ember.distributions.Wishart(df=ember.tensor([4., 6.]), covariance_matrix=ember.eye(2))
    ember.manual_seed(3)
    ref, _, _ = _rsample(ember, ew, (3,))
    ember.manual_seed(3)
    s, calls, msg = _rsample(ember, ew, (3,), singular_first=(2, 1))   # draw 2, batch member 1
    assert calls == [(3,), (1,)] and msg == ["Singular sample detected."]
    np.testing.assert_allclose(s[:2].numpy(), ref[:2].numpy())         # untouched draws stay
    assert bool(ember.linalg.cholesky_ex(s).info.eq(0).all())


@pytest.mark.parametrize("tries", [0, 2])
def test_gradient_through_redraw_and_zero_tries(tries):
    df = ember.tensor(5., requires_grad=True)
    ew = ember.distributions.Wishart(df=df, covariance_matrix=ember.eye(2))
    s, calls, msg = _rsample(ember, ew, (3,), singular_first=(0,), max_try_correction=tries)
    assert calls == [(3,)] + [(1,)] * min(tries, 1) and msg == ["Singular sample detected."]
    s.sum().backward()
    assert df.grad is not None and np.isfinite(df.grad.item())
    if tries == 0:                                   # nothing redrawn: the singular draw comes back
        assert float(s[0].abs().sum()) == 0.0
