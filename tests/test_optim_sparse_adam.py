"""ember.optim.SparseAdam against torch.optim.SparseAdam: trajectories under sparse (COO) gradients with
repeated and missing rows, maximize, state_dict (int step, moments), and torch's errors."""
import copy

import numpy as np
import pytest
import torch

import ember

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks")


def _grads(rng, n_rows, dim, steps):
    out = []
    for _ in range(steps):
        rows = rng.integers(0, n_rows, size=4)          # repeats: coalesce sums them
        out.append((rows, rng.standard_normal((4, dim)).astype(np.float32)))
    return out


@pytest.mark.parametrize("kw", [{}, {"lr": 0.05}, {"betas": (0.5, 0.9), "eps": 1e-4}, {"maximize": True}])
def test_trajectory_matches_torch(kw):
    rng = np.random.default_rng(0)
    init = rng.standard_normal((6, 3)).astype(np.float32)
    pt, pe = torch.tensor(init, requires_grad=True), ember.tensor(init, requires_grad=True)
    ot, oe = torch.optim.SparseAdam([pt], **kw), ember.optim.SparseAdam([pe], **kw)
    for rows, vals in _grads(rng, 6, 3, 6):
        pt.grad = torch.sparse_coo_tensor(torch.tensor(rows[None]), torch.tensor(vals), (6, 3))
        pe.grad = ember.sparse_coo_tensor(ember.tensor(rows[None]), ember.tensor(vals), (6, 3))
        ot.step()
        oe.step()
        np.testing.assert_allclose(pe.detach().numpy(), pt.detach().numpy(), rtol=1e-5, atol=1e-6)
    st, se = ot.state_dict()["state"][0], oe.state_dict()["state"][0]
    assert list(se.keys()) == list(st.keys()) and se["step"] == st["step"] == 6
    for k in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_allclose(se[k].numpy(), st[k].numpy(), rtol=1e-5, atol=1e-7)
    assert oe.defaults == ot.defaults


def test_load_state_dict_continues():
    rng = np.random.default_rng(1)
    init = rng.standard_normal((5, 2)).astype(np.float32)
    pe = ember.tensor(init, requires_grad=True)
    oe = ember.optim.SparseAdam([pe], lr=0.1)
    pe.grad = ember.sparse_coo_tensor(ember.tensor([[0, 3]]), ember.ones(2, 2), (5, 2))
    oe.step()
    q = ember.tensor(pe.detach().numpy(), requires_grad=True)
    o2 = ember.optim.SparseAdam([q], lr=0.1)
    o2.load_state_dict(copy.deepcopy(oe.state_dict()))     # (loaded state shares tensors, as torch)
    for p, o in ((pe, oe), (q, o2)):
        p.grad = ember.sparse_coo_tensor(ember.tensor([[3]]), ember.ones(1, 2), (5, 2))
        o.step()
    np.testing.assert_array_equal(q.detach().numpy(), pe.detach().numpy())
    assert o2.state_dict()["state"][0]["step"] == 2


def test_errors_as_torch():
    for kw in ({"lr": 0.0}, {"eps": 0.0}, {"betas": (1.0, 0.9)}, {"betas": (0.9, -0.1)}):
        with pytest.raises(ValueError) as et:
            torch.optim.SparseAdam([torch.zeros(2, requires_grad=True)], **kw)
        with pytest.raises(ValueError) as ee:
            ember.optim.SparseAdam([ember.zeros(2, requires_grad=True)], **kw)
        assert str(ee.value) == str(et.value)
    with pytest.raises(ValueError, match=r"Complex params at indices \[\[0, 0\]\]"):
        ember.optim.SparseAdam([ember.zeros(2, dtype=ember.complex64, requires_grad=True)])
    p = ember.zeros(2, requires_grad=True)
    p.grad = ember.ones(2)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        ember.optim.SparseAdam([p]).step()
