"""Normalization layers against torch: forward values, input and parameter gradients, running statistics
over several training steps, eval mode, state_dict keys, repr, errors, and double backward."""
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
import ember.nn.functional as EF
import torch.nn.functional as TF
from oracle import raises_like as _raises_like


def _e(a):
    return ember.tensor(np.asarray(a))


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return t.detach().numpy()


def _copy_state(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})


def _randomize(t_mod, rng):
    """Give torch's parameters random values (so weight/bias gradients are not those of ones/zeros)."""
    with torch.no_grad():
        for p in t_mod.parameters():
            p.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, tuple(p.shape)).astype(np.float32)))


def _close(a, b, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(_np(a), _np(b), atol=atol, rtol=rtol)


def _check_module(e_mod, t_mod, shape, steps=1, seed=0, atol=1e-5):
    """Run forward+backward ``steps`` times on both modules and compare everything observable."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = rng.standard_normal(shape).astype(np.float32) * 2 + 0.5
        w = rng.standard_normal(shape).astype(np.float32)
        xt = torch.tensor(x, requires_grad=True)
        xe = ember.tensor(x, requires_grad=True)
        yt, ye = t_mod(xt), e_mod(xe)
        _close(ye, yt, atol=atol)
        (yt * torch.from_numpy(w)).sum().backward()
        (ye * ember.tensor(w)).sum().backward()
        _close(xe.grad, xt.grad, atol=atol)
        for (ne, pe), (nt, pt) in zip(e_mod.named_parameters(), t_mod.named_parameters()):
            assert ne == nt
            _close(pe.grad, pt.grad, atol=atol)
        for (ne, be), (nt, bt) in zip(e_mod.named_buffers(), t_mod.named_buffers()):
            assert ne == nt
            assert be.dtype.name == str(bt.dtype).replace("torch.", "")
            np.testing.assert_allclose(_np(be), _np(bt), atol=1e-6, rtol=1e-5)
    assert list(e_mod.state_dict().keys()) == list(t_mod.state_dict().keys())
    assert repr(e_mod) == repr(t_mod)


# ---- LayerNorm / GroupNorm / RMSNorm ------------------------------------------------------------------

@pytest.mark.parametrize("name,seed,args,kw,shape", [
    ("LayerNorm", 1, (5,), {}, (3, 4, 5)),
    ("LayerNorm", 1, ((4, 5),), {"eps": 1e-3}, (2, 4, 5)),
    ("LayerNorm", 1, (5,), {"bias": False}, (6, 5)),
    ("LayerNorm", 1, (5,), {"elementwise_affine": False}, (2, 3, 5)),
    ("GroupNorm", 2, (2, 4), {}, (3, 4, 5)),
    ("GroupNorm", 2, (3, 6), {"eps": 1e-3}, (2, 6, 2, 3)),
    ("GroupNorm", 2, (1, 4), {"affine": False}, (2, 4, 3)),
    ("GroupNorm", 2, (4, 4), {"bias": False}, (2, 4, 3)),
    ("RMSNorm", 3, (5,), {}, (3, 4, 5)),
    ("RMSNorm", 3, ([4, 5],), {"eps": 1e-3}, (2, 4, 5)),
    ("RMSNorm", 3, (5,), {"elementwise_affine": False}, (2, 5)),
])
def test_affine_norm_module(name, seed, args, kw, shape):
    """LayerNorm, GroupNorm, RMSNorm with random affine parameters: forward and backward, two steps."""
    t_mod, e_mod = getattr(torch.nn, name)(*args, **kw), getattr(enn, name)(*args, **kw)
    _randomize(t_mod, np.random.default_rng(seed))
    _copy_state(e_mod, t_mod)
    _check_module(e_mod, t_mod, shape, steps=2)


def test_local_response_norm_module():
    t_mod, e_mod = torch.nn.LocalResponseNorm(3, alpha=0.2, beta=0.5, k=1.5), enn.LocalResponseNorm(3, 0.2, 0.5, 1.5)
    _check_module(e_mod, t_mod, (2, 6, 4, 3))
    _check_module(enn.LocalResponseNorm(4), torch.nn.LocalResponseNorm(4), (2, 5, 3))


def test_default_parameters_and_dtype():
    m = enn.LayerNorm((2, 3), dtype=ember.float64)
    assert m.weight.dtype is ember.float64 and m.weight.shape == (2, 3)
    assert (_np(m.weight) == 1).all() and (_np(m.bias) == 0).all()
    assert m.weight.requires_grad
    g = enn.GroupNorm(2, 4)
    assert (_np(g.weight) == 1).all() and (_np(g.bias) == 0).all()
    assert enn.RMSNorm(3).eps is None


def test_layer_norm_half_precision():
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float16)
    for wdt in (np.float16, np.float32):
        w = np.linspace(0.5, 1.5, 8).astype(wdt)
        yt = TF.layer_norm(torch.from_numpy(x), (8,), torch.from_numpy(w))
        ye = EF.layer_norm(ember.tensor(x), (8,), ember.tensor(w))
        assert ye.dtype is ember.float16
        np.testing.assert_allclose(ye.numpy().astype(np.float32), yt.numpy().astype(np.float32), atol=2e-3)
    xt = torch.tensor(x, requires_grad=True)
    xe = ember.tensor(x, requires_grad=True)
    TF.group_norm(xt.view(2, 4, 4), 2).sum().backward()
    EF.group_norm(xe.view(2, 4, 4), 2).sum().backward()
    assert xe.grad.dtype is ember.float16
    np.testing.assert_allclose(xe.grad.numpy().astype(np.float32), xt.grad.numpy().astype(np.float32), atol=2e-3)


def test_rms_norm_eps_default_is_finfo_eps():
    x = np.full((2, 3), 1e-5, np.float32)
    yt = TF.rms_norm(torch.from_numpy(x), (3,))
    ye = EF.rms_norm(ember.tensor(x), (3,))
    _close(ye, yt)
    yt = TF.rms_norm(torch.from_numpy(x).double(), (3,))
    ye = EF.rms_norm(ember.tensor(x).double(), (3,))
    assert ye.dtype is ember.float64
    _close(ye, yt)


@pytest.mark.parametrize("call", [
    lambda m, F, x: F.layer_norm(x, (3,)),
    lambda m, F, x: F.layer_norm(x, (4,), m.ones(3)),
    lambda m, F, x: F.layer_norm(x, (4,), None, m.ones(3)),
    lambda m, F, x: F.layer_norm(x, (2, 3, 4, 5)),
    lambda m, F, x: F.layer_norm(x, 4),
    lambda m, F, x: F.layer_norm(x, []),
    lambda m, F, x: F.layer_norm(x.double(), (4,), m.ones(4)),
    lambda m, F, x: F.layer_norm(x, (4,), m.ones(4).double()),
    lambda m, F, x: F.layer_norm(x.long(), (4,)),
    lambda m, F, x: F.rms_norm(x, (3,)),
    lambda m, F, x: F.group_norm(x, 2),
    lambda m, F, x: F.group_norm(x, 3, m.ones(2)),
    lambda m, F, x: F.group_norm(x[0, 0], 1),
    lambda m, F, x: F.group_norm(x[:1, :, 0], 3),
    lambda m, F, x: F.group_norm(x.long(), 3),
    lambda m, F, x: F.batch_norm(x, None, None, training=False),
    lambda m, F, x: F.batch_norm(x, m.zeros(2), m.ones(3), training=True),
    lambda m, F, x: F.batch_norm(x, m.zeros(3), m.ones(3), m.ones(2), training=True),
    lambda m, F, x: F.batch_norm(x[:1, :, 0], None, None, training=True),
    lambda m, F, x: F.batch_norm(x, m.zeros(3), None, training=True),
    lambda m, F, x: F.batch_norm(x.double(), m.zeros(3), m.ones(3), training=True),
    lambda m, F, x: F.batch_norm(x, m.zeros(3).double(), m.ones(3).double(), training=True),
    lambda m, F, x: F.batch_norm(x, None, None, training=True, eps=0.0),
    lambda m, F, x: F.batch_norm(x, m.zeros(3, requires_grad=True), m.ones(3), training=False),
    lambda m, F, x: F.instance_norm(x[:, :, :1]),
    lambda m, F, x: F.local_response_norm(x[0], 2),
])
def test_errors_match_torch(call):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    e_msg, t_msg = _raises_like(lambda: call(ember, EF, ember.tensor(x)), lambda: call(torch, TF, torch.tensor(x)))
    assert e_msg == t_msg.replace("torch.", "ember.")


@pytest.mark.parametrize("ctor,shape", [
    (lambda nn: nn.BatchNorm1d(3), (2, 4)),
    (lambda nn: nn.BatchNorm1d(3), (2, 3, 4, 5)),
    (lambda nn: nn.BatchNorm2d(3), (2, 3, 4)),
    (lambda nn: nn.BatchNorm3d(3), (2, 3, 4, 5)),
    (lambda nn: nn.InstanceNorm1d(3), (2, 3, 4, 5)),
    (lambda nn: nn.InstanceNorm2d(3, affine=True), (2, 4, 4, 5)),
    (lambda nn: nn.LayerNorm(4), (2, 5)),
])
def test_module_input_errors(ctor, shape):
    x = np.zeros(shape, np.float32)
    e_msg, t_msg = _raises_like(lambda: ctor(enn)(ember.tensor(x)), lambda: ctor(torch.nn)(torch.tensor(x)))
    assert e_msg == t_msg


def test_group_norm_ctor_error():
    with pytest.raises(ValueError, match=r"num_channels \(3\) must be divisible by num_groups \(2\)"):
        enn.GroupNorm(2, 3)


# ---- BatchNorm ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,shape,kw", [
    ("BatchNorm1d", (6, 3), {}),
    ("BatchNorm1d", (4, 3, 5), {"momentum": 0.3}),
    ("BatchNorm2d", (4, 3, 2, 5), {}),
    ("BatchNorm3d", (2, 3, 2, 2, 3), {"eps": 1e-3}),
    ("BatchNorm2d", (3, 3, 2, 2), {"momentum": None}),
    ("BatchNorm2d", (3, 3, 2, 2), {"affine": False}),
    ("BatchNorm1d", (5, 3), {"bias": False}),
    ("BatchNorm2d", (3, 3, 2, 2), {"track_running_stats": False}),
])
def test_batch_norm_train_then_eval(cls, shape, kw):
    t_mod, e_mod = getattr(torch.nn, cls)(3, **kw), getattr(enn, cls)(3, **kw)
    _randomize(t_mod, np.random.default_rng(4))
    _copy_state(e_mod, t_mod)
    _check_module(e_mod, t_mod, shape, steps=4, seed=5)      # running stats compared after each step
    if t_mod.track_running_stats:
        assert int(e_mod.num_batches_tracked) == int(t_mod.num_batches_tracked) == 4
        assert e_mod.num_batches_tracked.dtype is ember.int64
    t_mod.eval()
    e_mod.eval()
    _check_module(e_mod, t_mod, shape, steps=2, seed=6)      # eval: running stats used, not updated
    if t_mod.track_running_stats:
        assert int(e_mod.num_batches_tracked) == 4


def test_batch_norm_state_dict_keys_and_metadata():
    e_mod, t_mod = enn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict()) == \
        ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert e_mod.state_dict()._metadata[""]["version"] == 2
    assert list(enn.BatchNorm2d(3, track_running_stats=False).state_dict()) == ["weight", "bias"]
    assert list(enn.InstanceNorm1d(3).state_dict()) == []
    assert list(enn.InstanceNorm1d(3, track_running_stats=True).state_dict()) == \
        ["running_mean", "running_var", "num_batches_tracked"]
    # a version-1 checkpoint without num_batches_tracked still loads
    sd = {k: v for k, v in e_mod.state_dict().items() if k != "num_batches_tracked"}
    e_mod.load_state_dict(sd)


def test_batch_norm_buffers_survive_inplace_relu_and_two_forwards():
    """BN -> ReLU(inplace) and two forward passes before one backward, as in torch."""
    rng = np.random.default_rng(7)
    x1, x2 = (rng.standard_normal((4, 3, 2)).astype(np.float32) for _ in range(2))
    res = []
    for lib, nn in ((torch, torch.nn), (ember, enn)):
        bn = nn.BatchNorm1d(3)
        net = nn.Sequential(bn, nn.ReLU(inplace=True))
        a, b = lib.tensor(x1, requires_grad=True), lib.tensor(x2, requires_grad=True)
        (net(a) * 2 + net(b)).sum().backward()
        res.append((a.grad, b.grad, bn.weight.grad, bn.running_mean, bn.running_var))
    for e, t in zip(res[1], res[0]):
        _close(e, t)


def test_batch_norm_functional_running_stats_and_empty_batch():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    rm_t, rv_t = torch.zeros(4), torch.ones(4)
    rm_e, rv_e = ember.zeros(4), ember.ones(4)
    for _ in range(3):
        yt = TF.batch_norm(torch.tensor(x), rm_t, rv_t, training=True, momentum=0.25)
        ye = EF.batch_norm(ember.tensor(x), rm_e, rv_e, training=True, momentum=0.25)
        _close(ye, yt)
    _close(rm_e, rm_t)
    _close(rv_e, rv_t)
    assert rm_e._version > 0       # updated in place
    # an empty batch leaves the running statistics alone, as in torch
    bt, be = torch.nn.BatchNorm1d(3), enn.BatchNorm1d(3)
    assert tuple(be(ember.zeros((0, 3))).shape) == tuple(bt(torch.zeros(0, 3)).shape) == (0, 3)
    _close(be.running_mean, bt.running_mean)
    _close(be.running_var, bt.running_var)
    assert int(be.num_batches_tracked) == int(bt.num_batches_tracked) == 1


def test_batch_norm_half_input_float_params():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((6, 3)).astype(np.float16)
    rm_t, rv_t, rm_e, rv_e = torch.zeros(3), torch.ones(3), ember.zeros(3), ember.ones(3)
    yt = TF.batch_norm(torch.from_numpy(x), rm_t, rv_t, torch.ones(3), torch.zeros(3), training=True)
    ye = EF.batch_norm(ember.tensor(x), rm_e, rv_e, ember.ones(3), ember.zeros(3), training=True)
    assert ye.dtype is ember.float16 and rm_e.dtype is ember.float32
    np.testing.assert_allclose(ye.numpy().astype(np.float32), yt.numpy().astype(np.float32), atol=3e-3)
    np.testing.assert_allclose(rm_e.numpy(), rm_t.numpy(), atol=1e-3)


def test_batch_norm_module_double_and_to():
    t_mod = torch.nn.BatchNorm1d(3).double()
    e_mod = enn.BatchNorm1d(3).double()
    assert e_mod.running_mean.dtype is ember.float64 and e_mod.num_batches_tracked.dtype is ember.int64
    x = np.random.default_rng(1).standard_normal((4, 3))
    _close(e_mod(ember.tensor(x)), t_mod(torch.tensor(x)))
    _close(e_mod.running_var, t_mod.running_var)


def test_reset_running_stats():
    m = enn.BatchNorm1d(3)
    m(ember.randn(4, 3))
    m.reset_running_stats()
    assert (m.running_mean.numpy() == 0).all() and (m.running_var.numpy() == 1).all()
    assert int(m.num_batches_tracked) == 0


# ---- InstanceNorm ------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,shape,kw", [
    ("InstanceNorm1d", (2, 3, 5), {}),
    ("InstanceNorm1d", (3, 5), {}),
    ("InstanceNorm2d", (2, 3, 3, 4), {"affine": True}),
    ("InstanceNorm2d", (3, 3, 4), {"affine": True, "track_running_stats": True}),
    ("InstanceNorm1d", (4, 3, 6), {"track_running_stats": True, "momentum": 0.3}),
    ("InstanceNorm3d", (2, 3, 2, 2, 3), {"affine": True}),
])
def test_instance_norm_module(cls, shape, kw):
    t_mod, e_mod = getattr(torch.nn, cls)(3, **kw), getattr(enn, cls)(3, **kw)
    _randomize(t_mod, np.random.default_rng(10))
    _copy_state(e_mod, t_mod)
    _check_module(e_mod, t_mod, shape, steps=3)
    t_mod.eval()
    e_mod.eval()
    _check_module(e_mod, t_mod, shape, steps=1)


def test_instance_norm_mismatched_channels_warns_without_affine():
    m = enn.InstanceNorm1d(4)
    with pytest.warns(UserWarning, match="does not match num_features"):
        m(ember.randn(2, 3, 5))
    with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features \(4\), but got: 3."):
        enn.InstanceNorm1d(4, affine=True)(ember.randn(2, 3, 5))


# ---- functional extras ---------------------------------------------------------------------------------

def test_normalize_out_and_eps():
    x = np.array([[0.0, 0.0], [3.0, 4.0]], np.float32)
    out = ember.empty(2, 2)
    r = EF.normalize(ember.tensor(x), dim=1, out=out)
    assert r is out
    _close(out, TF.normalize(torch.tensor(x), dim=1))


def test_top_level_forms():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)
    xt, xe = torch.tensor(x), ember.tensor(x)
    _close(ember.layer_norm(xe, (5,)), torch.layer_norm(xt, (5,)))
    _close(ember.group_norm(xe, 3), torch.group_norm(xt, 3))
    _close(ember.rms_norm(xe, [5]), torch.rms_norm(xt, [5]))
    _close(ember.batch_norm(xe, None, None, None, None, True, 0.1, 1e-5, False),
           torch.batch_norm(xt, None, None, None, None, True, 0.1, 1e-5, False))
    _close(ember.instance_norm(xe, None, None, None, None, True, 0.1, 1e-5, False),
           torch.instance_norm(xt, None, None, None, None, True, 0.1, 1e-5, False))


def test_layer_norm_grad_fn_names():
    x = ember.randn(2, 3, requires_grad=True)
    assert EF.layer_norm(x, (3,)).grad_fn.name() == "NativeLayerNormBackward0"
    assert EF.batch_norm(x, None, None, training=True).grad_fn.name() == "NativeBatchNormBackward0"
    assert EF.group_norm(x, 3).grad_fn.name() == "NativeGroupNormBackward0"


@pytest.mark.parametrize("fn,shape", [
    (lambda x, w, b: EF.layer_norm(x, (4,), w, b), (3, 2, 4)),
    (lambda x, w, b: EF.group_norm(x, 2, w, b), (3, 4, 2)),
    (lambda x, w, b: EF.rms_norm(x, (4,), w), (3, 2, 4)),
    (lambda x, w, b: EF.batch_norm(x, None, None, w, b, training=True), (3, 4, 2)),
    (lambda x, w, b: EF.instance_norm(x, None, None, w, b), (3, 4, 2)),
])
def test_gradgradcheck(fn, shape):
    rng = np.random.default_rng(11)
    x = ember.tensor(rng.standard_normal(shape), requires_grad=True)
    w = ember.tensor(rng.uniform(0.5, 1.5, (4,)), requires_grad=True)
    b = ember.tensor(rng.uniform(-1, 1, (4,)), requires_grad=True)
    assert ember.autograd.gradcheck(fn, (x, w, b))
    assert ember.autograd.gradgradcheck(fn, (x, w, b))


def test_statistics_not_differentiated_through_buffers():
    # running stats without grad are fine in eval even if weight requires grad
    w = ember.ones(3, requires_grad=True)
    y = EF.batch_norm(ember.randn(4, 3), ember.zeros(3), ember.ones(3), w, None, training=False)
    y.sum().backward()
    assert w.grad is not None


def test_no_warnings_in_forward_backward():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = enn.Sequential(enn.BatchNorm1d(4), enn.LayerNorm(4), enn.GroupNorm(2, 4), enn.RMSNorm(4))
        m(ember.randn(5, 4, requires_grad=True)).sum().backward()
