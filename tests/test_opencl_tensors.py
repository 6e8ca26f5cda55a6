"""Tensors and modules on the OpenCL device: placement, copies, views, errors, fallbacks and training,
each checked against the same computation on the CPU."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.devices import opencl as ocl

from device_support import needs_opencl, _quiet_fallback_warnings  # noqa: E402,F401 - autouse fixture

pytestmark = needs_opencl


def _np(t):
    return t.detach().cpu().numpy()


def test_factories_to_and_cpu_round_trip():
    x = ember.arange(12.0).reshape(3, 4)
    d = x.to("opencl")
    assert d.device == ember.device("opencl", 0) and str(d.device) == "opencl:0"
    assert not d.is_cpu and d.get_device() == 0 and x.get_device() == -1
    assert d.shape == x.shape and d.dtype is x.dtype and d.stride() == (4, 1)
    np.testing.assert_array_equal(_np(d), x.numpy())
    assert d.cpu().device == ember.device("cpu")
    for make in (lambda **k: ember.zeros(2, 3, **k), lambda **k: ember.ones(4, dtype=ember.int64, **k),
                 lambda **k: ember.full((2,), 7.5, **k), lambda **k: ember.arange(5, **k),
                 lambda **k: ember.tensor([[1, 2], [3, 4]], **k), lambda **k: ember.eye(3, **k)):
        a, b = make(), make(device="opencl")
        assert b.device.type == "opencl" and b.dtype is a.dtype
        np.testing.assert_array_equal(_np(b), a.numpy())
    ember.manual_seed(3)
    r1 = ember.randn(5)
    ember.manual_seed(3)
    r2 = ember.randn(5, device="opencl")
    np.testing.assert_array_equal(_np(r2), r1.numpy())     # same seed, same numbers
    nb = x.to("opencl", non_blocking=True)
    ember.opencl.synchronize()
    np.testing.assert_array_equal(_np(nb), x.numpy())
    assert x.opencl().device.type == "opencl" and x.to("opencl", ember.float64).dtype is ember.float64
    like = ember.zeros(1, dtype=ember.float64, device="opencl")
    moved = x.to(like)                                         # to(other): other's dtype and device
    assert moved.device.type == "opencl" and moved.dtype is ember.float64
    assert moved.to(x).device.type == "cpu" and moved.to(x).dtype is ember.float32


def test_printing_numpy_and_mixed_device_errors():
    d = ember.tensor([1.0, 2.0], device="opencl")
    assert repr(d) == "tensor([1., 2.], device='opencl:0')"
    assert repr(ember.tensor([1, 2], dtype=ember.int32, device="opencl")) == \
        "tensor([1, 2], device='opencl:0', dtype=ember.int32)"
    with pytest.raises(TypeError, match="can't convert opencl:0 device type tensor to numpy. Use Tensor.cpu()"):
        d.numpy()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least "
                                           "two devices, opencl:0 and cpu"):
        d + ember.ones(2)
    assert (d + ember.tensor(1.0)).tolist() == [2.0, 3.0]      # a 0-dim CPU tensor is a scalar, as in torch
    assert d.sum().item() == 3.0 and float(d[1]) == 2.0 and bool(d[0] > 0)
    with pytest.raises(RuntimeError, match="device 'opencl:7' is not available"):
        ember.zeros(1, device="opencl:7")


def test_views_share_the_device_buffer():
    base = ember.arange(12.0, device="opencl").reshape(3, 4)
    t = base.t()
    assert t.stride() == (1, 4) and not t.is_contiguous() and t.data_ptr() == base.data_ptr()
    col = base[:, 1]
    col.mul_(10)                                      # writes through the view into base
    ref = np.arange(12.0).reshape(3, 4)
    ref[:, 1] *= 10
    np.testing.assert_array_equal(_np(base), ref)
    np.testing.assert_array_equal(_np(t), ref.T)
    np.testing.assert_array_equal(_np(base[1:, ::2]), ref[1:, ::2])
    np.testing.assert_array_equal(_np(base.unsqueeze(0).expand(2, 3, 4).sum(0)), 2 * ref)
    np.testing.assert_array_equal(_np(t.reshape(12)), ref.T.reshape(12))     # a reshape that must copy
    with pytest.raises(RuntimeError, match="expanded"):
        base[0].expand(2, 4).add_(1)


@pytest.mark.parametrize("fn", [
    lambda x, y: x * y + 1, lambda x, y: (x - y).abs().sqrt(), lambda x, y: x.exp().sum(1),
    lambda x, y: x.softmax(-1), lambda x, y: (x @ y.t()).relu(), lambda x, y: x.mean(0, keepdim=True) - y,
    lambda x, y: ember.where(x > y, x, y), lambda x, y: x.max(1).values, lambda x, y: (x > 0).sum(),
    lambda x, y: nn.functional.layer_norm(x, (5,)), lambda x, y: x.tanh() * y.sigmoid(),
])
def test_ops_and_gradients_match_the_cpu(fn):
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    outs = []
    for dev in ("cpu", "opencl"):
        x = ember.tensor(xs, device=dev, requires_grad=True)
        y = ember.tensor(ys, device=dev, requires_grad=True)
        r = fn(x, y)
        if r.dtype.is_floating_point:
            (r * ember.arange(1.0, r.numel() + 1, device=dev).reshape(r.shape)).sum().backward()
            outs.append((_np(r), _np(x.grad), _np(y.grad) if y.grad is not None else None))
        else:
            outs.append((_np(r), None, None))
    for a, b in zip(*outs):
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_fallback_is_counted_warned_and_strict_mode_raises():
    x = ember.tensor([3.0, 1.0, 2.0], device="opencl")
    ocl.reset_fallback_counts()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        v = x.mode(0).values                  # mode has no device kernel yet: a counted CPU fallback
    assert v.device.type == "opencl" and v.tolist() == 1.0            # (each value once: the smallest)
    counts = ember.opencl.fallback_counts()
    assert counts.get("mode") == 1, counts
    assert any("mode" in str(m.message) and "fall back to run on the CPU" in str(m.message) for m in w) or \
        "mode" in ocl._FALLBACK_WARNED
    ocl.set_fallback_allowed(False)
    try:
        with pytest.raises(NotImplementedError, match="'mode' is not currently implemented for the OpenCL"):
            x.mode(0)
    finally:
        ocl.set_fallback_allowed(None)
    ember.opencl.reset_fallback_counts()
    assert ember.opencl.fallback_counts() == {}


def test_default_device_and_module_to():
    ember.set_default_device("opencl")
    try:
        assert ember.zeros(2).device.type == "opencl" and ember.get_default_device().type == "opencl"
        lin = nn.Linear(3, 2)
        assert lin.weight.device.type == "opencl" and lin.bias.device.type == "opencl"
    finally:
        ember.set_default_device(None)
    assert ember.zeros(2).device.type == "cpu"
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.LayerNorm(2))
    w = m[0].weight
    m.to("opencl")
    assert m[0].weight is w and all(p.device.type == "opencl" for p in m.parameters())
    m.cpu()
    assert all(p.is_cpu for p in m.parameters())


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_mlp_training_on_the_device_matches_the_cpu(opt_name):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((32, 8)).astype(np.float32)
    Y = rng.integers(0, 3, 32)
    results = []
    for dev in ("cpu", "opencl"):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(dev)
        opt = getattr(ember.optim, opt_name)(model.parameters(), lr=0.05, **({"momentum": 0.9}
                                                                              if opt_name == "SGD" else {}))
        x, y = ember.tensor(X, device=dev), ember.tensor(Y, device=dev)
        losses = []
        for _ in range(20):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        results.append((losses, [_np(p) for p in model.parameters()]))
        if dev == "opencl":
            assert all(v.device.type == "opencl" for s in opt.state.values() for k, v in s.items()
                       if isinstance(v, ember.Tensor) and v.dim() > 0)
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-4, atol=1e-5)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_save_and_load_across_devices(tmp_path):
    import copy
    import pickle
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    ref = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    m.to("opencl")
    path = tmp_path / "m.pt"
    ember.save(m.state_dict(), path)
    back = ember.load(path)                                   # to where they were saved
    assert all(v.device.type == "opencl" for v in back.values())
    on_cpu = ember.load(path, map_location="cpu")
    assert all(v.is_cpu for v in on_cpu.values())
    for k in ref:
        np.testing.assert_array_equal(_np(back[k]), ref[k])
        np.testing.assert_array_equal(on_cpu[k].numpy(), ref[k])
    cpu_path = tmp_path / "c.pt"
    ember.save({"w": ember.arange(4.0)}, cpu_path)
    assert ember.load(cpu_path, map_location="opencl")["w"].device.type == "opencl"
    assert ember.load(cpu_path, map_location={"cpu": "opencl:0"})["w"].device.type == "opencl"
    import torch
    t = torch.load(path, map_location="cpu", weights_only=True)   # torch reads ember's file
    np.testing.assert_array_equal(t["0.weight"].numpy(), ref["0.weight"])
    d = ember.tensor([1.0, 2.0], device="opencl")
    for c in (pickle.loads(pickle.dumps(d)), copy.deepcopy(d)):
        assert c.device.type == "opencl" and c.tolist() == [1.0, 2.0]


def test_contiguous_and_batched_linear_on_the_device():
    # .contiguous() of a device view, and linear on a 3-d input with a bias (its autograd node is chosen
    # from the layouts of the device arrays), as in a transformer block
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    lin = nn.Linear(4, 5)
    xd = x.to("opencl").requires_grad_()
    lind = nn.Linear(4, 5).to("opencl")
    lind.load_state_dict({k: v.to("opencl") for k, v in lin.state_dict().items()})
    t = xd.transpose(1, 2)
    c = t.contiguous()
    assert not t.is_contiguous() and c.is_contiguous() and xd.contiguous() is xd
    np.testing.assert_array_equal(_np(c), x.numpy().transpose(0, 2, 1))
    xc = x.clone().requires_grad_()
    out_d, out_c = lind(xd), lin(xc)
    np.testing.assert_allclose(_np(out_d), out_c.detach().numpy(), rtol=1e-5, atol=1e-6)
    out_d.sum().backward()
    out_c.sum().backward()
    np.testing.assert_allclose(_np(xd.grad), xc.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(lind.bias.grad), lin.bias.grad.numpy(), rtol=1e-5, atol=1e-6)
    # load_state_dict above copied into device parameters; an expanded device tensor is refused as on the CPU
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        ember.zeros(1, device="opencl").expand(3).copy_(ember.ones(3, device="opencl"))


def test_dropout_and_new_factories_follow_the_device():
    x = ember.ones(4, 6, device="opencl")
    ember.manual_seed(5)
    y = nn.functional.dropout(x, 0.5, training=True)
    ember.manual_seed(5)
    ref = nn.functional.dropout(ember.ones(4, 6), 0.5, training=True)
    assert y.device.type == "opencl"
    np.testing.assert_array_equal(_np(y), ref.numpy())
    for t in (x.new_zeros(2), x.new_ones(2, 3), x.new_empty(1), x.new_full((2,), 3.0), x.new_tensor([1.0, 2.0])):
        assert t.device.type == "opencl", t
    assert x.new_zeros(2, device="cpu").is_cpu



def test_eager_fast_path_keys_tell_calls_apart():
    """The dispatcher's cached launchers (one per op, layout and values) never serve a different call:
    int and float scalars, -0.0 and 0.0, strided and contiguous inputs of the same shape."""
    from ember.compiler import cl_eager
    i = ember.tensor([1, 2, 3], dtype=ember.int64, device="opencl")
    for _ in range(2):                      # the second round runs from the cache
        a, b = i + 1, i + 1.0
        assert a.dtype is ember.int64 and b.dtype is ember.float32
        assert a.tolist() == [2, 3, 4] and b.tolist() == [2.0, 3.0, 4.0]
        z = ember.zeros(2, device="opencl")
        assert np.signbit(_np(z.mul(-0.0))).all() and not np.signbit(_np(z.mul(0.0))).any()
        m = ember.arange(6.0, device="opencl").reshape(2, 3)
        np.testing.assert_array_equal(_np(m.t() * 2), np.arange(6.0).reshape(2, 3).T * 2)
        np.testing.assert_array_equal(_np(m.t().contiguous() * 2), np.arange(6.0).reshape(2, 3).T * 2)
    assert cl_eager.FAST
