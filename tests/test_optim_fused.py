"""The one-pass native updates of eager Adam/AdamW and SGD (ember/optim/_fused.py, ember/_native's
eager_source_optim.py) against torch over several steps, against ember's NumPy loop, and the state they
leave (state_dict round trip)."""
import copy
import itertools

import numpy as np
import pytest
import torch

import ember
from ember._native import eager_kernels as K

pytestmark = pytest.mark.skipif(not K.available(), reason="no C compiler: the native eager kernels cannot be built")

SHAPES = ((37,), (64, 65), (3,), ())


def _run(lib, name, kw, steps=6, seed=0):
    rng = np.random.default_rng(seed)
    ps = [lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in SHAPES]
    opt = getattr(lib.optim, name)(ps, **kw)
    for t in range(steps):
        for p in ps:
            p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * (1 + t))
        opt.step()
    return ps, opt


def _numpy_loop(name, kw, **run):
    was = K.set_enabled(False)
    try:
        return _run(ember, name, kw, **run)
    finally:
        K.set_enabled(was)


ADAM = [(name, dict(lr=0.05, amsgrad=a, maximize=m, weight_decay=wd))
        for name, a, m, wd in itertools.product(("Adam", "AdamW"), (False, True), (False, True), (0.0, 0.1))]
ADAM += [("Adam", dict(lr=0.05, betas=(0.3, 0.8), eps=1e-3)), ("Adam", dict(lr=0.05, betas=(0.1, 0.5))),
         ("Adam", dict(lr=0.01, weight_decay=0.2, decoupled_weight_decay=True))]
SGD = [("SGD", dict(lr=0.05, momentum=mom, nesterov=nest, dampening=damp, weight_decay=wd, maximize=mx))
       for mom, nest, damp, wd, mx in [(0, False, 0, 0, False), (0.9, False, 0, 0, False), (0.9, True, 0, 0.1, True),
                                       (0.9, False, 0.3, 0.1, False), (0, False, 0, 0.1, True)]]


def _states(opt, ps):
    return [{k: (v.detach().numpy() if hasattr(v, "detach") else v) for k, v in opt.state[p].items()} for p in ps]


@pytest.mark.parametrize("name, kw", ADAM + SGD)
def test_fused_matches_torch(name, kw):
    calls = []
    fn = K.adam_many if name != "SGD" else K.sgd_many
    attr = "adam_many" if name != "SGD" else "sgd_many"

    def spy(ptrs, sizes, *a):
        calls.extend(sizes)
        return fn(ptrs, sizes, *a)
    setattr(K, attr, spy)
    try:
        ep, eo = _run(ember, name, kw)
    finally:
        setattr(K, attr, fn)
    assert len(calls) == 6 * len(SHAPES)          # every update ran natively
    tp, to = _run(torch, name, kw)
    for e, t in zip(ep, tp):
        if name == "SGD":
            # torch's SGD kernels are fused multiply-adds the native pass repeats: the same bits
            np.testing.assert_array_equal(e.detach().numpy(), t.detach().numpy())
        else:
            # one ulp apart at most where torch's vectorized sqrt rounds differently
            np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-7)
    for es, ts in zip(_states(eo, ep), _states(to, tp)):
        assert list(es) == list(ts)
        for k in es:
            np.testing.assert_allclose(np.asarray(es[k]), np.asarray(ts[k]), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name, kw", ADAM[:4] + SGD[2:4])
def test_fused_matches_numpy_loop(name, kw):
    ep, _ = _run(ember, name, kw)
    np_, _ = _numpy_loop(name, kw)
    for a, b in zip(ep, np_):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, kw", [("AdamW", dict(lr=0.05, amsgrad=True)), ("SGD", dict(lr=0.05, momentum=0.9))])
def test_state_dict_round_trip(name, kw):
    ps, opt = _run(ember, name, kw, steps=3)
    sd = copy.deepcopy(opt.state_dict())      # (as in torch, state_dict() holds the live state tensors)
    q = [ember.tensor(p.detach().numpy().copy(), requires_grad=True) for p in ps]
    opt2 = getattr(ember.optim, name)(q, **kw)
    opt2.load_state_dict(sd)
    rng = np.random.default_rng(5)
    for p, r in zip(ps, q):
        g = rng.standard_normal(tuple(p.shape)).astype(np.float32)
        p.grad, r.grad = ember.tensor(g), ember.tensor(g.copy())
    opt.step()
    opt2.step()
    for a, b in zip(ps, q):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    for sa, sb in zip(_states(opt, ps), _states(opt2, q)):
        assert list(sa) == list(sb)
        for k in sa:
            np.testing.assert_array_equal(np.asarray(sa[k]), np.asarray(sb[k]))


def test_other_dtypes_and_strided_params_take_the_numpy_loop():
    # a float64 parameter and a strided float32 one next to a plain float32 one: each updated correctly
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(5), rng.standard_normal((4, 6)).astype(np.float32)[:, ::2],
              rng.standard_normal(7).astype(np.float32)]
    grads = [rng.standard_normal(a.shape).astype(a.dtype) for a in arrays]
    for name, kw in [("AdamW", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True))]:
        ep = [ember.tensor(a, requires_grad=True) for a in arrays]
        tp = [torch.tensor(a, requires_grad=True) for a in arrays]
        eo, to = getattr(ember.optim, name)(ep, **kw), getattr(torch.optim, name)(tp, **kw)
        for _ in range(3):
            for e, t, g in zip(ep, tp, grads):
                e.grad, t.grad = ember.tensor(g), torch.tensor(g)
            eo.step()
            to.step()
        for e, t in zip(ep, tp):
            assert e.dtype == ember.float64 if t.dtype == torch.float64 else e.dtype == ember.float32
            np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_tensor_lr_takes_the_numpy_loop():
    rng = np.random.default_rng(3)
    a, g = rng.standard_normal(9).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    e, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    eo = ember.optim.Adam([e], lr=ember.tensor(0.05))
    to = torch.optim.Adam([t], lr=torch.tensor(0.05))
    for _ in range(3):
        e.grad, t.grad = ember.tensor(g), torch.tensor(g)
        eo.step()
        to.step()
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, kw", [("Adam", dict(amsgrad=True)), ("SGD", dict(momentum=0.9))])
def test_numpy_scalar_lr_runs_natively(name, kw):
    # a scheduler's arithmetic can leave a NumPy float in lr: the native pass takes it, as a Python float
    fn = K.adam_many if name != "SGD" else K.sgd_many
    attr = "adam_many" if name != "SGD" else "sgd_many"
    calls = []

    def spy(ptrs, sizes, *a):
        calls.extend(sizes)
        return fn(ptrs, sizes, *a)
    setattr(K, attr, spy)
    try:
        ep, _ = _run(ember, name, dict(kw, lr=np.float64(0.05)), steps=3)
    finally:
        setattr(K, attr, fn)
    assert len(calls) == 3 * len(SHAPES)
    tp, _ = _run(torch, name, dict(kw, lr=0.05), steps=3)
    for e, t in zip(ep, tp):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-7)
