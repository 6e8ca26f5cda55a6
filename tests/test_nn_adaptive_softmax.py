"""nn.AdaptiveLogSoftmaxWithLoss against torch from the same weights: per-example log-probabilities, loss,
gradients, log_prob, predict, unbatched input, parameter names and the errors for bad cutoffs/targets."""
import numpy as np
import pytest
import torch

import ember


def _pair(**kw):
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, **kw)
    e = ember.nn.AdaptiveLogSoftmaxWithLoss(8, 20, **kw)
    assert list(e.state_dict()) == list(t.state_dict())
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return t, e


@pytest.mark.parametrize("kw", [dict(cutoffs=[5, 12]), dict(cutoffs=[4], div_value=2.0, head_bias=True)])
def test_matches_torch(kw):
    t, e = _pair(**kw)
    x = np.random.default_rng(0).standard_normal((7, 8)).astype(np.float32)
    y = np.array([0, 4, 6, 11, 15, 19, 3])
    outs = {}
    for lib, m in ((torch, t), (ember, e)):
        xi = lib.tensor(x, requires_grad=True)
        o = m(xi, lib.tensor(y))
        o.loss.backward()
        outs[lib.__name__] = (o.output.detach().numpy(), o.loss.item(), xi.grad.numpy(),
                              m.head.weight.grad.numpy(), m.log_prob(lib.tensor(x)).detach().numpy(),
                              m.predict(lib.tensor(x)).numpy(), m(lib.tensor(x[0]), lib.tensor(y[0])).output.item())
    for a, b in zip(outs["torch"], outs["ember"]):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5)


def test_errors_match_torch():
    for lib in (torch, ember):
        with pytest.raises(ValueError, match="cutoffs"):
            lib.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs=[12, 5])
        m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs=[5])
        with pytest.raises(RuntimeError, match="Target values should be in"):
            m(lib.zeros(2, 8), lib.tensor([1, 25]))
