"""torch._foreach_* (as EMA updates and hand-written optimizers use them), torch.pi/e/inf/nan/newaxis and
torch.nn.attention.sdpa_kernel, against torch."""
import numpy as np
import pytest
import torch

import ember


def _show(v):
    if isinstance(v, (list, tuple)):
        return type(v).__name__, [_show(x) for x in v]
    if hasattr(v, "detach"):
        return np.round(v.detach().numpy().astype(np.float64), 4).tolist()
    return v


def _program(lib):
    def mk():
        return [lib.tensor([1.0, 4.0]), lib.tensor([2.0, 3.0, 9.0])]
    a = mk()
    out = [lib._foreach_mul_(a, 2.0) is a]
    lib._foreach_add_(a, mk(), alpha=2)
    lib._foreach_sqrt_(a)
    out += [a, lib._foreach_add(a, [1.0, 2.0]), lib._foreach_mul(a, lib.tensor(3.0)), lib._foreach_norm(a, 1),
            lib._foreach_max(a), lib._foreach_pow(a, 2), lib._foreach_pow(2.0, a), lib._foreach_sub(a, a, alpha=0.5),
            lib._foreach_div(a, mk()), lib._foreach_addcmul(a, a, a, 0.5), lib._foreach_addcdiv(a, a, mk(), [1.0, 2.0]),
            lib._foreach_addcmul(a, a, a, lib.tensor([1.0, 2.0])), lib._foreach_lerp(a, mk(), 0.3),
            lib._foreach_clamp_min(a, 3.0), lib._foreach_maximum(a, mk()), lib._foreach_exp(a), lib._foreach_neg(a)]
    b = mk()
    lib._foreach_lerp_(b, a, [0.1, 0.9])
    lib._foreach_copy_(a, b)
    c = mk()
    lib._foreach_zero_(c)
    out += [b, a, c, lib.pi, lib.e, lib.inf, lib.newaxis]
    return out


def test_foreach_and_constants_match_torch():
    assert [_show(v) for v in _program(ember)] == [_show(v) for v in _program(torch)]
    assert np.isnan(ember.nan)
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match="same number of elements as scalar list"):
            lib._foreach_add([lib.ones(1), lib.ones(1)], [1.0])


def test_foreach_ema_update_keeps_the_tensors():
    """timm/HF-style EMA: ema = decay * ema + (1 - decay) * param, in place on the EMA's own tensors."""
    params = [ember.nn.Parameter(ember.ones(3)), ember.nn.Parameter(ember.full((2, 2), 2.0))]
    ema = [p.detach().clone() * 0 for p in params]
    ids = [id(t) for t in ema]
    with ember.no_grad():
        ember._foreach_lerp_(ema, params, 0.25)
    assert [id(t) for t in ema] == ids
    np.testing.assert_allclose(ema[1].numpy(), np.full((2, 2), 0.5))


def test_sdpa_kernel_context_is_accepted_as_torch():
    from ember.nn.attention import SDPBackend, sdpa_kernel, _cur_sdpa_kernel_backends
    q = ember.tensor(np.random.default_rng(0).standard_normal((1, 2, 4, 8)).astype(np.float32))
    ref = ember.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    with sdpa_kernel(SDPBackend.MATH):
        assert _cur_sdpa_kernel_backends() == [SDPBackend.MATH]
        out = ember.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert ember.equal(out, ref)
    assert int(SDPBackend.FLASH_ATTENTION) == int(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
    with pytest.raises(AssertionError, match="SDPBackend"):
        with sdpa_kernel("math"):
            pass
