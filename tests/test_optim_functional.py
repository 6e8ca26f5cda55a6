"""The functional optimizer forms torch.optim.adam.adam and torch.optim.sgd.sgd against torch: same
signatures, parameters and state updated in place, and the same steps as the optimizer classes."""
import inspect

import numpy as np
import pytest
import torch
import torch.optim.adam as tadam
import torch.optim.sgd as tsgd

import ember
import ember.optim.adam as eadam
import ember.optim.sgd as esgd

RNG = np.random.RandomState(0)
P = [RNG.randn(3, 2).astype(np.float32), RNG.randn(4).astype(np.float32)]
G = [[RNG.randn(*p.shape).astype(np.float32) for p in P] for _ in range(4)]


def test_signatures_match_torch():
    for e, t in ((eadam.adam, tadam.adam), (esgd.sgd, tsgd.sgd)):
        ep, tp = inspect.signature(e).parameters, inspect.signature(t).parameters
        assert list(ep) == list(tp)
        assert [p.kind for p in ep.values()] == [p.kind for p in tp.values()]
        assert [p.default for p in ep.values()] == [p.default for p in tp.values()]


def _adam_run(lib, mod, **kw):
    ps = [lib.tensor(p.copy()) for p in P]
    m, v, mx = ([lib.zeros_like(p) for p in ps] for _ in range(3))
    steps = [lib.tensor(0.0) for _ in ps]
    for g in G:
        mod.adam(ps, [lib.tensor(x) for x in g], m, v, mx, steps, **kw)
    return [p.numpy() for p in ps] + [x.numpy() for x in m + v + mx] + [float(s) for s in steps]


@pytest.mark.parametrize("kw", [
    dict(amsgrad=False, beta1=0.9, beta2=0.999, lr=1e-2, weight_decay=0.0, eps=1e-8, maximize=False),
    dict(amsgrad=True, beta1=0.8, beta2=0.99, lr=0.1, weight_decay=0.05, eps=1e-6, maximize=True),
    dict(amsgrad=False, beta1=0.9, beta2=0.99, lr=0.1, weight_decay=0.05, eps=1e-8, maximize=False,
         decoupled_weight_decay=True),
])
def test_adam_matches_torch(kw):
    for a, b in zip(_adam_run(ember, eadam, **kw), _adam_run(torch, tadam, **kw)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _sgd_run(lib, mod, **kw):
    ps = [lib.tensor(p.copy()) for p in P]
    bufs = [None] * len(ps)
    for g in G:
        mod.sgd(ps, [lib.tensor(x) for x in g], bufs, **kw)
    return [p.numpy() for p in ps] + [b.numpy() if b is not None else None for b in bufs]


@pytest.mark.parametrize("kw", [
    dict(weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False, maximize=False),
    dict(weight_decay=0.01, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True, maximize=False),
    dict(weight_decay=0.0, momentum=0.5, lr=0.05, dampening=0.3, nesterov=False, maximize=True),
])
def test_sgd_matches_torch(kw):
    for a, b in zip(_sgd_run(ember, esgd, **kw), _sgd_run(torch, tsgd, **kw)):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_functional_adam_equals_the_class_step():
    w1 = ember.nn.Parameter(ember.tensor(P[0].copy()))
    opt = ember.optim.Adam([w1], lr=0.05, weight_decay=0.1, amsgrad=True)
    w2 = ember.tensor(P[0].copy())
    m, v, mx, st = ember.zeros_like(w2), ember.zeros_like(w2), ember.zeros_like(w2), ember.tensor(0.0)
    for g in G:
        w1.grad = ember.tensor(g[0])
        opt.step()
        eadam.adam([w2], [ember.tensor(g[0])], [m], [v], [mx], [st], amsgrad=True, beta1=0.9, beta2=0.999,
                   lr=0.05, weight_decay=0.1, eps=1e-8, maximize=False)
    np.testing.assert_array_equal(w1.detach().numpy(), w2.numpy())
    np.testing.assert_array_equal(opt.state[w1]["exp_avg"].numpy(), m.numpy())


def test_bad_state_steps_like_torch():
    with pytest.raises(RuntimeError, match="state_steps"):
        eadam.adam([ember.zeros(2)], [ember.zeros(2)], [ember.zeros(2)], [ember.zeros(2)], [], [0],
                   amsgrad=False, beta1=0.9, beta2=0.9, lr=0.1, weight_decay=0.0, eps=1e-8, maximize=False)
