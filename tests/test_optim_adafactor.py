"""ember.optim.Adafactor against torch.optim.Adafactor: parameter trajectories over several steps
(matrices, 3-d, vectors, scalars), options, state_dict keys and shapes, and the argument errors."""
import numpy as np
import pytest
import torch

import ember


def _run(opt_t, opt_e, n_steps=6, seed=0, shapes=((4, 3), (2, 3, 5), (7,), ()), **kw):
    rng = np.random.default_rng(seed)
    inits = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    pt = [torch.tensor(a, requires_grad=True) for a in inits]
    pe = [ember.tensor(a, requires_grad=True) for a in inits]
    ot, oe = opt_t(pt, **kw), opt_e(pe, **kw)
    for _ in range(n_steps):
        grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        for p, g in zip(pt, grads):
            p.grad = torch.tensor(g)
        for p, g in zip(pe, grads):
            p.grad = ember.tensor(g)
        ot.step()
        oe.step()
        for a, b in zip(pt, pe):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    return ot, oe


@pytest.mark.parametrize("kw", [{}, {"lr": 0.1}, {"weight_decay": 0.1}, {"maximize": True},
                                {"beta2_decay": -0.5, "d": 2.0, "eps": (1e-20, 1e-2)}, {"lr": 1e-3, "foreach": False}])
def test_trajectory_matches_torch(kw):
    ot, oe = _run(torch.optim.Adafactor, ember.optim.Adafactor, **kw)
    sd_t, sd_e = ot.state_dict(), oe.state_dict()
    assert sd_e["param_groups"][0].keys() == sd_t["param_groups"][0].keys()
    for k, v in sd_t["param_groups"][0].items():
        if k != "params":
            assert sd_e["param_groups"][0][k] == v
    for i, st in sd_t["state"].items():
        assert list(sd_e["state"][i].keys()) == list(st.keys())
        for k, v in st.items():
            assert tuple(sd_e["state"][i][k].shape) == tuple(v.shape)
            np.testing.assert_allclose(sd_e["state"][i][k].numpy(), v.numpy(), rtol=1e-5, atol=1e-7)


def test_defaults_and_load_state_dict_continues():
    ot, oe = _run(torch.optim.Adafactor, ember.optim.Adafactor, n_steps=2)
    assert oe.defaults == ot.defaults
    oe2 = ember.optim.Adafactor([p for g in oe.param_groups for p in g["params"]])
    oe2.load_state_dict(oe.state_dict())
    assert float(oe2.state_dict()["state"][0]["step"]) == 2.0


def test_linear_model_training_matches_torch():
    torch.manual_seed(0)
    mt = torch.nn.Linear(5, 3)
    me = ember.nn.Linear(5, 3)
    me.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    ot, oe = torch.optim.Adafactor(mt.parameters(), lr=0.05), ember.optim.Adafactor(me.parameters(), lr=0.05)
    x = np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32)
    for _ in range(5):
        for m, o, lib in ((mt, ot, torch), (me, oe, ember)):
            o.zero_grad()
            m(lib.tensor(x)).pow(2).mean().backward()
            o.step()
        np.testing.assert_allclose(me.weight.detach().numpy(), mt.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [{"lr": -1.0}, {"beta2_decay": 0.1}, {"eps": (-1.0, 1e-3)}, {"eps": (None, -1.0)},
                                {"d": 0.5}, {"weight_decay": -0.1}])
def test_argument_errors(kw):
    with pytest.raises(ValueError) as et:
        torch.optim.Adafactor([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as ee:
        ember.optim.Adafactor([ember.zeros(2, requires_grad=True)], **kw)
    assert str(ee.value) == str(et.value)


def test_complex_parameter_rejected():
    p = ember.zeros(2, dtype=ember.complex64, requires_grad=True)
    p.grad = ember.zeros(2, dtype=ember.complex64)
    with pytest.raises(RuntimeError, match="complex"):
        ember.optim.Adafactor([p]).step()
