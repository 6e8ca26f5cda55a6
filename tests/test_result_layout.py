"""Results that torch lays out C-contiguous whatever the input's layout (reductions, softmax, layer_norm,
group_norm) and cat's layout rule (channels_last only when every input suggests it): ember's strides and
contiguity against torch over shapes and permutations, so a later ``.view(-1)`` behaves as in torch."""
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn.functional as EF

pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom")

SHAPES = [(2, 3, 4), (1, 3, 4), (2, 1, 4), (3, 4), (2, 3, 4, 5), (2, 1, 4, 1)]
REDUCTIONS = ["sum", "mean", "amax", "amin", "prod", "var", "std", "any", "all", "argmax", "argmin",
              "logsumexp", "norm", "nansum", "nanmean"]


def _pair(shape, perm):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1
    return torch.tensor(a).permute(*perm), ember.tensor(a).permute(*perm)


def _same_layout(rt, re):
    assert re.is_contiguous() == rt.is_contiguous()
    assert tuple(re.shape) == tuple(rt.shape)
    if rt.is_contiguous():
        assert tuple(re.view(-1).shape) == tuple(rt.view(-1).shape)
    np.testing.assert_allclose(re.numpy(), rt.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("shape", SHAPES)
def test_reductions_contiguous_on_permuted_input(name, shape):
    for perm in itertools.permutations(range(len(shape))):
        t, e = _pair(shape, perm)
        if name in ("any", "all"):
            t, e = t > 3, e > 3
        for d in range(len(shape)):
            for kd in (True, False):
                rt = getattr(torch, name)(t, dim=d, keepdim=kd)
                re = getattr(ember, name)(e, dim=d, keepdim=kd)
                assert rt.is_contiguous()
                _same_layout(rt, re)


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_and_norms_contiguous_on_permuted_input(shape):
    for perm in itertools.permutations(range(len(shape))):
        t, e = _pair(shape, perm)
        for d in range(len(shape)):
            _same_layout(torch.softmax(t, d), ember.softmax(e, d))
            _same_layout(torch.log_softmax(t, d), ember.log_softmax(e, d))
        _same_layout(TF.layer_norm(t, t.shape[-1:]), EF.layer_norm(e, e.shape[-1:]))
        _same_layout(TF.layer_norm(t, t.shape[-2:]), EF.layer_norm(e, e.shape[-2:]))
        if len(shape) >= 3 and shape[1] != 1:
            _same_layout(TF.group_norm(t, 1), EF.group_norm(e, 1))


def test_brief_cases_view_after():
    t, e = _pair((2, 3, 4), (0, 2, 1))
    assert e.sum(0, keepdim=True).view(-1).tolist() == t.sum(0, keepdim=True).view(-1).tolist()
    np.testing.assert_allclose(e.mean(1, keepdim=True).view(-1).numpy(), t.mean(1, keepdim=True).view(-1).numpy())
    t2, e2 = _pair((3, 4), (1, 0))
    np.testing.assert_allclose(EF.layer_norm(e2, (3,)).view(-1).numpy(), TF.layer_norm(t2, (3,)).view(-1).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 1, 3, 4), (2, 3, 1, 1), (1, 3, 1, 4), (2, 1, 1, 4), (2, 3, 4, 5),
                                   (2, 3, 2, 2, 2)])
def test_cat_layout(shape):
    for perm in itertools.permutations(range(len(shape))):
        for dim in range(len(shape)):
            t, e = _pair(shape, perm)
            rt = torch.cat([t, t.contiguous()], dim)
            re = ember.cat([e, e.contiguous()], dim)
            _same_layout(rt, re)
            rt, re = torch.cat([t, t], dim), ember.cat([e, e], dim)
            _same_layout(rt, re)
            if not rt.is_contiguous():
                assert re.stride() == rt.stride()       # channels_last, as torch's


def test_cat_channels_last_kept():
    t = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    e = ember.tensor(t.numpy()).to(memory_format=ember.channels_last)
    for dim in range(4):
        rt, re = torch.cat([t, t], dim), ember.cat([e, e], dim)
        assert re.stride() == rt.stride()
        np.testing.assert_array_equal(re.numpy(), rt.numpy())
