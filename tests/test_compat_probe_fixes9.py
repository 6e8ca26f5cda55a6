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
