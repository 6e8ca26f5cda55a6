"""Lazy modules (nn.LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*) and
UninitializedParameter/UninitializedBuffer against torch: shapes inferred from the first input, the class
swap to the concrete module, state_dict in both directions, optimizers built before the first forward,
torch's module paths and errors."""
import io

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn

CASES = [
    ("LazyLinear", (4,), {}, (2, 3)),
    ("LazyLinear", (4,), {"bias": False}, (2, 5, 3)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 8)),
    ("LazyConv2d", (5, 3), {"stride": 2, "groups": 1}, (2, 2, 7, 7)),
    ("LazyConv2d", (4, 3), {"groups": 2}, (2, 6, 5, 5)),
    ("LazyConv3d", (2, 2), {}, (1, 3, 4, 4, 4)),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2}, (2, 3, 5)),
    ("LazyConvTranspose2d", (3, 2), {"output_padding": 1, "stride": 2}, (1, 2, 4, 4)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 2, 3, 3, 3)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm2d", (), {"momentum": 0.3}, (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (), {"affine": False}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 6)),
    ("LazyInstanceNorm2d", (), {"track_running_stats": False}, (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {}, (2, 3, 2, 3, 2)),
]


def _t2n(t):
    return t.detach().numpy()


@pytest.mark.parametrize("name,args,kw,shape", CASES, ids=[c[0] + str(i) for i, c in enumerate(CASES)])
def test_lazy_module_matches_torch(name, args, kw, shape):
    tm = getattr(torch.nn, name)(*args, **kw)
    em = getattr(nn, name)(*args, **kw)
    assert repr(em) == repr(tm)
    assert em.has_uninitialized_params() and tm.has_uninitialized_params()
    assert [k for k, _ in em.named_parameters()] == [k for k, _ in tm.named_parameters()]
    assert list(em.state_dict()) == list(tm.state_dict())
    x = np.random.RandomState(0).randn(*shape).astype(np.float32)
    tout = tm(torch.tensor(x))
    em.initialize_parameters(ember.tensor(x))         # shapes from the input, then torch's values
    with ember.no_grad():
        for (k, ep), (_, tp) in zip(em.named_parameters(), tm.named_parameters()):
            assert tuple(ep.shape) == tuple(tp.shape), k
            ep.copy_(ember.tensor(_t2n(tp)))
    eout = em(ember.tensor(x))
    assert type(em).__name__ == type(tm).__name__ == name[4:]
    assert type(em) is getattr(nn, name[4:]) and not hasattr(em, "_initialize_hook")
    assert repr(em) == repr(tm)
    np.testing.assert_allclose(_t2n(eout), _t2n(tout), rtol=1e-5, atol=1e-5)
    for (k, eb), (_, tb) in zip(em.named_buffers(), tm.named_buffers()):
        np.testing.assert_allclose(_t2n(eb), _t2n(tb), rtol=1e-5, atol=1e-6, err_msg=k)
    for p in em.parameters():
        assert type(p) is nn.Parameter and p.requires_grad


def test_optimizer_built_before_first_forward_trains_the_materialized_parameters():
    m = nn.LazyLinear(2)
    opt = ember.optim.SGD(m.parameters(), lr=0.5)
    x = ember.randn(5, 3)
    m(x).pow(2).sum().backward()
    before = m.weight.detach().clone()
    opt.step()
    assert not ember.equal(before, m.weight)
    assert opt.param_groups[0]["params"][0] is m.weight


def test_default_init_uses_the_inferred_fan_in():
    ember.manual_seed(0)
    m = nn.LazyLinear(200)
    m(ember.zeros(1, 400))
    bound = 1 / np.sqrt(400)
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound


def test_state_dict_both_ways():
    # a torch Linear's weights load into an ember LazyLinear (materialized with the loaded shapes)
    t = torch.nn.Linear(3, 4)
    e = nn.LazyLinear(4)
    e.load_state_dict({k: ember.tensor(_t2n(v)) for k, v in t.state_dict().items()})
    assert not e.has_uninitialized_params() and tuple(e.weight.shape) == (4, 3)
    x = np.random.RandomState(1).randn(2, 3).astype(np.float32)
    np.testing.assert_allclose(_t2n(e(ember.tensor(x))), _t2n(t(torch.tensor(x))), rtol=1e-5, atol=1e-6)
    assert type(e) is nn.Linear
    # uninitialized into uninitialized: nothing to copy, no error (as torch)
    a, b = nn.LazyLinear(4), nn.LazyLinear(4)
    b.load_state_dict(a.state_dict())
    assert b.has_uninitialized_params()
    # a checkpoint of an initialized lazy model loads in torch's eager module
    buf = io.BytesIO()
    ember.save(e.state_dict(), buf)
    buf.seek(0)
    tl = torch.nn.LazyLinear(4)
    tl.load_state_dict(torch.load(buf))
    np.testing.assert_allclose(_t2n(tl.weight), _t2n(e.weight))
    # an initialized module refuses an uninitialized entry (torch's RuntimeError about the shape)
    with pytest.raises(RuntimeError, match="uninitialized"):
        nn.Linear(3, 4).load_state_dict(nn.LazyLinear(4).state_dict())


def test_uninitialized_parameter_errors_and_materialize():
    p = nn.parameter.UninitializedParameter()
    assert repr(p) == "<UninitializedParameter>" and p.requires_grad and p.dtype is ember.float32
    with pytest.raises(RuntimeError, match="shape of an uninitialized"):
        p.shape
    with pytest.raises(ValueError, match="uninitialized parameter"):
        p + 1
    p.materialize((2, 3), dtype=ember.float64)
    assert type(p) is nn.Parameter and tuple(p.shape) == (2, 3) and p.dtype is ember.float64
    b = nn.parameter.UninitializedBuffer()
    assert not b.requires_grad
    b.materialize((4,))
    assert type(b) is ember.Tensor and tuple(b.shape) == (4,)
    q = nn.parameter.UninitializedParameter().double()
    assert isinstance(q, nn.parameter.UninitializedParameter) and q.dtype is ember.float64


def test_module_to_dtype_before_forward():
    m = nn.LazyLinear(3).double()
    assert m.weight.dtype is ember.float64
    m(ember.randn(2, 5, dtype=ember.float64))
    assert m.weight.dtype is ember.float64 and tuple(m.weight.shape) == (3, 5)


def test_torch_module_paths():
    import ember.nn.modules.lazy as lazy
    assert ember.nn.modules.lazy.LazyModuleMixin is lazy.LazyModuleMixin
    for name in ["LazyLinear"]:
        assert getattr(ember.nn.modules.linear, name) is getattr(nn, name)
    for name in ["LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
                 "LazyConvTranspose3d"]:
        assert getattr(ember.nn.modules.conv, name) is getattr(nn, name)
        assert getattr(nn, name).__module__ == getattr(torch.nn, name).__module__.replace("torch", "ember")
    for name in ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]:
        assert getattr(ember.nn.modules.batchnorm, name) is getattr(nn, name)
    for name in ["LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]:
        assert getattr(ember.nn.modules.instancenorm, name) is getattr(nn, name)
    assert issubclass(nn.LazyConv2d, ember.nn.modules.lazy.LazyModuleMixin)
    assert ember.nn.parameter.UninitializedBuffer is nn.UninitializedBuffer


def test_lazy_conv_rejects_bad_rank():
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\)"):
        nn.LazyConv2d(3, 2)(ember.randn(2, 2))


def _train(compiled, module_compile=False):
    ember.manual_seed(0)
    m = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(2))
    opt = ember.optim.Adam(m.parameters(), lr=0.1)
    fwd = ember.compile(m) if module_compile else m

    def step(x):
        opt.zero_grad()
        loss = fwd(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss
    f = ember.compile(step) if compiled else step
    x = ember.randn(4, 5)
    return [float(f(x)) for _ in range(4)], type(m[0])


@pytest.mark.parametrize("how", ["step", "module"])
def test_compiled_lazy_model_matches_eager(how):
    ref, _ = _train(False)
    got, cls = _train(how == "step", module_compile=how == "module")
    assert cls is nn.Linear
    np.testing.assert_allclose(got, ref, rtol=1e-6)
