"""nn.utils.parametrizations.orthogonal (ember/nn/utils/_orthogonal.py) and the Householder helpers it
stands on (geqrf, linalg.householder_product), against torch: the weight right after registration, the
state_dict keys, training steps from the same state, assignment through right_inverse, the errors; and
register_parametrization / cached / remove_parametrizations with a user-written parametrization."""
import numpy as np
import pytest
import torch

import ember

CONFIGS = [((4, 4), None, True), ((5, 3), None, True), ((3, 5), None, True), ((4, 4), "cayley", True),
           ((5, 3), "matrix_exp", True), ((3, 5), "cayley", True), ((4, 4), "householder", True),
           ((5, 3), "householder", False), ((3, 5), "householder", False), ((2, 4, 3), None, True)]


def _linear(L, shape, w):
    if len(shape) == 2:
        m = L.nn.Linear(shape[1], shape[0], bias=False).double()
        with L.no_grad():
            m.weight.copy_(L.tensor(w))
        return m
    m = L.nn.Module()
    m.weight = L.nn.Parameter(L.tensor(w))
    return m


def _orth_error(W):
    W = W.reshape((-1,) + W.shape[-2:])
    if W.shape[-2] <= W.shape[-1]:
        G = W @ np.swapaxes(W, -1, -2)
    else:
        G = np.swapaxes(W, -1, -2) @ W
    return np.abs(G - np.eye(G.shape[-1])).max()


@pytest.mark.parametrize("shape,omap,triv", CONFIGS)
def test_orthogonal_matches_torch(shape, omap, triv):
    rng = np.random.RandomState(0)
    w = rng.randn(*shape)
    x = rng.randn(2, shape[-1])
    mods = {L: _linear(L, shape, w) for L in (torch, ember)}
    for L, m in mods.items():
        L.nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap, use_trivialization=triv)
    t, e = mods[torch], mods[ember]
    assert sorted(e.state_dict()) == sorted(t.state_dict())
    assert type(e).__name__ == type(t).__name__
    deterministic = shape[-2] == shape[-1] or not triv     # (a tall base is completed with random columns)
    if deterministic:
        np.testing.assert_allclose(e.weight.detach().numpy(), t.weight.detach().numpy(), atol=1e-12)
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    for L, m in mods.items():
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            y = L.tensor(x) @ m.weight.mT
            loss = (y ** 2).sum() + m.weight.flatten()[0] * 3
            opt.zero_grad()
            loss.backward()
            opt.step()
    np.testing.assert_allclose(e.weight.detach().numpy(), t.weight.detach().numpy(), atol=1e-10)
    assert _orth_error(e.weight.detach().numpy()) < 1e-12


def test_assigning_an_orthogonal_weight_and_errors():
    rng = np.random.RandomState(1)
    q = np.linalg.qr(rng.randn(4, 4))[0]
    for triv in (True, False):
        res = []
        for L in (torch, ember):
            m = L.nn.Linear(4, 4, bias=False).double()
            L.nn.utils.parametrizations.orthogonal(m, orthogonal_map="householder", use_trivialization=triv)
            m.weight = L.tensor(q)
            res.append(m.weight.detach().numpy())
        np.testing.assert_allclose(res[1], res[0], atol=1e-12)
        np.testing.assert_allclose(res[1], q, atol=1e-12)
    for omap in ("matrix_exp", "cayley"):
        for L in (torch, ember):        # registering works (the weight is stored as it is), assigning does not
            m = L.nn.Linear(4, 4, bias=False).double()
            L.nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap, use_trivialization=False)
            with pytest.raises(NotImplementedError, match="use_trivialization=False"):
                m.weight = L.tensor(q)
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), "bias")
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'w'"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), "w")
    m = ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        m.weight = ember.zeros(2, 3)


def test_householder_helpers_match_torch():
    a = np.random.RandomState(2).randn(2, 5, 3)
    res = []
    for L in (torch, ember):
        h, tau = L.geqrf(L.tensor(a))
        h.requires_grad_()
        tau.requires_grad_()
        Q = L.linalg.householder_product(h, tau)
        (Q * L.tensor(np.arange(30.0).reshape(2, 5, 3))).sum().backward()
        res.append([h.detach().numpy(), tau.detach().numpy(), Q.detach().numpy(), h.grad.numpy(), tau.grad.numpy(),
                    L.orgqr(h.detach(), tau.detach()).numpy()])
    for x, y in zip(*res):
        np.testing.assert_allclose(y, x, atol=1e-10)


def test_user_parametrization_cached_and_removed_like_torch():
    def run(L):
        class Symmetric(L.nn.Module):
            def forward(self, X):
                return X.triu() + X.triu(1).mT

            def right_inverse(self, A):
                return A.triu()

        class Calls(L.nn.Module):
            n = 0

            def forward(self, X):
                Calls.n += 1
                return X * 2

            def right_inverse(self, Y):
                return Y / 2
        m = L.nn.Linear(3, 3).double()
        with L.no_grad():
            m.weight.copy_(L.arange(9.0, dtype=L.float64).reshape(3, 3))
        P = L.nn.utils.parametrize
        P.register_parametrization(m, "weight", Symmetric())
        P.register_parametrization(m, "weight", Calls())
        with P.cached():
            a = m.weight
            b = m.weight
        same_in_cache = a is b
        calls_cached = Calls.n
        _ = m.weight, m.weight
        calls = Calls.n - calls_cached
        m.weight = L.eye(3, dtype=L.float64) * 4
        after_assign = m.weight.detach().clone()
        keys = sorted(m.state_dict())
        P.remove_parametrizations(m, "weight", leave_parametrized=True)
        return (same_in_cache, calls, after_assign.numpy(), keys, m.weight.detach().numpy(),
                type(m).__name__, P.is_parametrized(m), isinstance(m.weight, L.nn.Parameter))
    t, e = run(torch), run(ember)
    assert e[0] == t[0] is True and e[1] == t[1] == 2
    np.testing.assert_array_equal(e[2], t[2])
    assert e[3] == t[3] and e[5:] == t[5:]
    np.testing.assert_array_equal(e[4], t[4])
