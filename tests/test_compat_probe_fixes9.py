"""Differences from torch found by running typical eager programs under both libraries (session 9 probe):
each test checks ember against torch on the case that differed."""
import numpy as np
import pytest
import torch

import ember


def _ctc(L, zero_infinity, take):
    lp = L.tensor(np.random.default_rng(4).normal(size=(12, 3, 6)).astype(np.float32), requires_grad=True)
    targets = L.tensor([[1, 2, 2, 3], [4, 1, 0, 0], [5, 5, 5, 5]])
    loss = L.nn.functional.ctc_loss(lp.log_softmax(2), targets, L.tensor([12, 10, 3]), L.tensor([4, 2, 4]),
                                    reduction="none", zero_infinity=zero_infinity)
    g, = L.autograd.grad(loss[:take].sum(), lp)
    return loss.detach().numpy(), g.numpy()


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("take", [2, 3])
def test_ctc_infeasible_sample_gradient_is_nan_as_torch(zero_infinity, take):
    """A sample whose targets cannot fit its input (3 steps for 4 repeated labels) has loss inf; torch's
    gradient is NaN on that sample's input steps even when its loss is left out of the objective (0 * NaN),
    and 0 with zero_infinity. Training loops rely on this to notice bad batches."""
    (tl, tg), (el, eg) = _ctc(torch, zero_infinity, take), _ctc(ember, zero_infinity, take)
    np.testing.assert_allclose(el, tl, rtol=1e-5)
    assert np.array_equal(np.isnan(eg), np.isnan(tg))
    np.testing.assert_allclose(np.nan_to_num(eg), np.nan_to_num(tg), rtol=1e-4, atol=1e-6)


_X4 = np.random.default_rng(0).normal(size=(2, 3, 5, 6)).astype(np.float32)
_G4 = np.random.default_rng(1).uniform(-1.2, 1.2, size=(2, 4, 3, 2)).astype(np.float32)
_X5 = np.random.default_rng(2).normal(size=(1, 2, 3, 4, 5)).astype(np.float32)
_G5 = np.random.default_rng(3).uniform(-1.3, 1.3, size=(1, 2, 3, 4, 3)).astype(np.float32)


def _sample(L, x, g, **kw):
    x = L.tensor(x, requires_grad=True)
    g = L.tensor(g, requires_grad=True)
    y = L.nn.functional.grid_sample(x, g, **kw)
    gx, gg = L.autograd.grad((y * y).sum(), [x, g])
    return [t.detach().numpy() for t in (y, gx, gg)]


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_bicubic_matches_torch(padding_mode, align_corners):
    kw = dict(mode="bicubic", padding_mode=padding_mode, align_corners=align_corners)
    for t, e in zip(_sample(torch, _X4, _G4, **kw), _sample(ember, _X4, _G4, **kw)):
        np.testing.assert_allclose(e, t, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_volumetric_matches_torch(mode, padding_mode, align_corners):
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    for t, e in zip(_sample(torch, _X5, _G5, **kw), _sample(ember, _X5, _G5, **kw)):
        np.testing.assert_allclose(e, t, rtol=2e-4, atol=2e-5)


def test_grid_sample_volumetric_with_affine_grid_and_errors():
    def f(L):
        theta = L.tensor(np.random.default_rng(4).normal(size=(1, 3, 4)).astype(np.float32) * 0.5)
        grid = L.nn.functional.affine_grid(theta, (1, 2, 3, 4, 5), align_corners=False)
        return L.nn.functional.grid_sample(L.tensor(_X5), grid, align_corners=False).numpy()
    np.testing.assert_allclose(f(ember), f(torch), rtol=2e-4, atol=2e-5)
    for L in (torch, ember):
        with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
            L.nn.functional.grid_sample(L.tensor(_X5), L.tensor(_G5), mode="bicubic", align_corners=False)


def test_binomial_entropy_and_enumerate_support_match_torch():
    def f(L):
        b = L.distributions.Binomial(10, probs=L.tensor([0.2, 0.7]))
        c = L.distributions.Binomial(L.tensor([[3.], [3.]]), logits=L.tensor([[0.5, -1.0], [2.0, 0.0]]))
        return [b.entropy(), b.enumerate_support(), b.enumerate_support(False), c.entropy(), c.enumerate_support()]
    for t, e in zip(f(torch), f(ember)):
        assert tuple(t.shape) == tuple(e.shape)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
    for L in (torch, ember):
        assert L.distributions.Binomial(10, probs=L.tensor(0.5)).has_enumerate_support
        with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
            L.distributions.Binomial(L.tensor([2., 3.]), probs=L.tensor([0.5, 0.5])).entropy()


def test_multinomial_and_negative_binomial_expand():
    def f(L):
        m = L.distributions.Multinomial(5, probs=L.tensor([0.2, 0.3, 0.5])).expand((2,))
        nb = L.distributions.NegativeBinomial(L.tensor(3.), L.tensor(0.4)).expand((3,))
        nbl = L.distributions.NegativeBinomial(L.tensor([2.]), logits=L.tensor([0.3])).expand((2, 1))
        return ([tuple(m.batch_shape), tuple(m.event_shape), m.total_count, tuple(m.sample().shape),
                 tuple(nb.batch_shape), tuple(nbl.batch_shape)],
                [m.log_prob(L.tensor([[1., 2., 2.], [0., 0., 5.]])), m.mean, nb.log_prob(L.tensor([1., 2., 3.])),
                 nb.mean, nbl.log_prob(L.tensor([[1.], [4.]]))])
    (ts, tv), (es, ev) = f(torch), f(ember)
    assert ts == es
    for t, e in zip(tv, ev):
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5)


def test_multinomial_entropy_matches_torch():
    def f(L):
        m = L.distributions.Multinomial(3, probs=L.tensor([[0.2, 0.8], [0.5, 0.5]]))
        p = L.tensor([0.1, 0.2, 0.7], requires_grad=True)
        e = L.distributions.Multinomial(6, probs=p).entropy()
        g, = L.autograd.grad(e, p)
        return [m.entropy(), m.perplexity(), e, g]
    for t, e in zip(f(torch), f(ember)):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_sync_batchnorm_takes_bias_like_torch():
    for L in (torch, ember):
        m = L.nn.SyncBatchNorm(3, bias=False)
        assert m.bias is None and sorted(m.state_dict()) == ["num_batches_tracked", "running_mean", "running_var",
                                                             "weight"]
        y = m(L.ones(2, 3, 4))
        assert tuple(y.shape) == (2, 3, 4)
        conv = L.nn.SyncBatchNorm.convert_sync_batchnorm(L.nn.Sequential(L.nn.BatchNorm2d(3, bias=False)))
        assert conv[0].bias is None and isinstance(conv[0], L.nn.SyncBatchNorm)
