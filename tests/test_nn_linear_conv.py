"""nn linear and convolution layers against torch: same weights (copied through state_dict), same forward
values, input and parameter gradients, repr text, state_dict keys, default initialisation statistics,
argument errors, and the autocast hook."""
import math

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
import ember.nn.functional as EF
import torch.nn as tnn
import torch.nn.functional as TF


def _copy_weights(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})


def _check_module(e_mod, t_mod, *arrays, rtol=1e-4, atol=1e-5, grad=True, out_index=None):
    """Forward the same inputs through both modules, compare outputs and all gradients."""
    _copy_weights(e_mod, t_mod)
    e_in = [ember.tensor(a, requires_grad=grad) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=grad) for a in arrays]
    e_out, t_out = e_mod(*e_in), t_mod(*t_in)
    if out_index is not None:
        e_out, t_out = e_out[out_index], t_out[out_index]
    assert tuple(e_out.shape) == tuple(t_out.shape)
    assert e_out.dtype.name == str(t_out.dtype).replace("torch.", "")
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), rtol=rtol, atol=atol)
    if not grad:
        return e_out
    w = np.random.default_rng(1).standard_normal(tuple(t_out.shape)).astype(arrays[0].dtype)
    (e_out * ember.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    for e, t in zip(e_in, t_in):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)
    t_params = dict(t_mod.named_parameters())
    for name, p in e_mod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)
    return e_out


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---- Linear / Bilinear / Identity / Flatten -----------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,)])
def test_linear_matches_torch(dtype, bias, shape):
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    edt = ember.float32 if dtype == np.float32 else ember.float64
    t_mod = tnn.Linear(3, 4, bias=bias, dtype=tdt)
    e_mod = enn.Linear(3, 4, bias=bias, dtype=edt)
    assert e_mod.weight.dtype is edt
    _check_module(e_mod, t_mod, _rand(*shape, dtype=dtype))
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    assert repr(e_mod) == repr(t_mod)


def test_linear_default_init_statistics():
    ember.manual_seed(0)
    m = enn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w = m.weight.detach().numpy()
    assert w.shape == (300, 400) and m.bias.shape == (300,)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    # U(-b, b) has variance b^2 / 3
    assert abs(w.var() - bound ** 2 / 3) < 0.02 * bound ** 2
    b = m.bias.detach().numpy()
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
    assert m.weight.requires_grad and m.weight.is_leaf and m.weight.grad_fn is None


def test_linear_reset_parameters_and_extra_state():
    m = enn.Linear(3, 2)
    old = m.weight.detach().clone()
    m.reset_parameters()
    assert not np.array_equal(old.numpy(), m.weight.detach().numpy())
    assert enn.Linear(3, 2, bias=False).bias is None


def test_bilinear_matches_torch():
    t_mod = tnn.Bilinear(3, 2, 4)
    e_mod = enn.Bilinear(3, 2, 4)
    _check_module(e_mod, t_mod, _rand(5, 3), _rand(5, 2, seed=1))
    assert repr(e_mod) == repr(t_mod)
    ember.manual_seed(0)
    big = enn.Bilinear(100, 20, 50)
    bound = 1 / math.sqrt(100)
    assert np.abs(big.weight.detach().numpy()).max() <= bound
    assert np.abs(big.bias.detach().numpy()).max() <= bound
    t_nb, e_nb = tnn.Bilinear(3, 2, 4, bias=False), enn.Bilinear(3, 2, 4, bias=False)
    _check_module(e_nb, t_nb, _rand(2, 5, 3), _rand(2, 5, 2, seed=1))


def test_identity_flatten_unflatten():
    x = _rand(2, 3, 4, 5)
    assert enn.Identity(3, foo=1)(ember.tensor(x)).shape == (2, 3, 4, 5)
    assert repr(enn.Identity()) == repr(tnn.Identity())
    for args in [(), (0, 2), (2, -1)]:
        e, t = enn.Flatten(*args), tnn.Flatten(*args)
        assert tuple(e(ember.tensor(x)).shape) == tuple(t(torch.tensor(x)).shape)
        assert repr(e) == repr(t)
    for args in [(1, (3, 1)), (-1, [5, 1]), (3, ember.Size([1, 5]))]:
        e = enn.Unflatten(*args)
        t = tnn.Unflatten(args[0], torch.Size(args[1]) if isinstance(args[1], ember.Size) else args[1])
        assert tuple(e(ember.tensor(x)).shape) == tuple(t(torch.tensor(x)).shape)
    assert repr(enn.Unflatten(1, (2, 5))) == repr(tnn.Unflatten(1, (2, 5)))
    with pytest.raises(TypeError):
        enn.Unflatten(1, (2.0, 5))
    with pytest.raises(TypeError):
        tnn.Unflatten(1, (2.0, 5))


def test_functional_linear_errors():
    x, w = ember.randn(2, 3), ember.randn(4, 3)
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        EF.linear(ember.randn(2, 5), w)
    with pytest.raises(RuntimeError, match="same dtype"):
        EF.linear(x.double(), w)
    with pytest.raises(RuntimeError, match="at least 1D"):
        EF.linear(ember.tensor(1.0), w)
    with pytest.raises(RuntimeError, match="expanded size"):
        EF.linear(x, w, ember.randn(5))
    with pytest.raises(TypeError):
        EF.linear([1.0, 2.0, 3.0], w)
    # a 1-d weight: input @ weight
    r = EF.linear(x, ember.ones(3))
    assert r.shape == (2,)


def test_linear_integer_and_half():
    x = np.arange(6).reshape(2, 3)
    w = np.arange(12).reshape(4, 3)
    e = EF.linear(ember.tensor(x), ember.tensor(w))
    t = TF.linear(torch.tensor(x), torch.tensor(w))
    assert e.dtype is ember.int64 and np.array_equal(e.numpy(), t.numpy())
    for edt, tdt in [(ember.float16, torch.float16), (ember.bfloat16, torch.bfloat16)]:
        a, b = _rand(4, 8), _rand(3, 8, seed=1)
        e = EF.linear(ember.tensor(a).to(edt), ember.tensor(b).to(edt), ember.ones(3).to(edt))
        t = TF.linear(torch.tensor(a).to(tdt), torch.tensor(b).to(tdt), torch.ones(3).to(tdt))
        assert e.dtype is edt
        np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=2e-2, atol=2e-2)


def test_linear_double_backward_matches_torch():
    x = _rand(4, 3, dtype=np.float64)
    w = _rand(5, 3, dtype=np.float64, seed=1)
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    eg = ember.autograd.grad(EF.linear(ex, ew).tanh().sum(), ex, create_graph=True)[0]
    tg = torch.autograd.grad(TF.linear(tx, tw).tanh().sum(), tx, create_graph=True)[0]
    (eg * eg).sum().backward()
    (tg * tg).sum().backward()
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


# ---- convolutions -------------------------------------------------------------------------------------------

CONV2D_CONFIGS = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(0, 2), dilation=(1, 2)),
    dict(padding=1, groups=2, bias=False),
    dict(padding="same", dilation=2),
    dict(padding="valid"),
    dict(padding=1, padding_mode="reflect"),
    dict(padding=(2, 1), padding_mode="replicate"),
    dict(padding=1, padding_mode="circular", stride=2),
    dict(padding="same", padding_mode="reflect"),
]


@pytest.mark.parametrize("cfg", CONV2D_CONFIGS, ids=[str(c) for c in CONV2D_CONFIGS])
def test_conv2d_module_matches_torch(cfg):
    t_mod = tnn.Conv2d(4, 6, 3, **cfg)
    e_mod = enn.Conv2d(4, 6, 3, **cfg)
    assert repr(e_mod) == repr(t_mod)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    assert e_mod.weight.shape == tuple(t_mod.weight.shape)
    assert e_mod._reversed_padding_repeated_twice == list(t_mod._reversed_padding_repeated_twice) or \
        tuple(e_mod._reversed_padding_repeated_twice) == tuple(t_mod._reversed_padding_repeated_twice)
    _check_module(e_mod, t_mod, _rand(2, 4, 9, 8))


def test_conv2d_module_float64_unbatched_and_rect_kernel():
    t_mod = tnn.Conv2d(3, 2, (2, 4), stride=(1, 2), dtype=torch.float64)
    e_mod = enn.Conv2d(3, 2, (2, 4), stride=(1, 2), dtype=ember.float64)
    _check_module(e_mod, t_mod, _rand(3, 7, 9, dtype=np.float64), rtol=1e-9, atol=1e-10)


CONV1D_CONFIGS = [dict(), dict(stride=2, padding=2, dilation=2), dict(groups=3, padding="same"),
                  dict(padding=2, padding_mode="circular"), dict(padding=1, padding_mode="reflect", bias=False)]


@pytest.mark.parametrize("cfg", CONV1D_CONFIGS, ids=[str(c) for c in CONV1D_CONFIGS])
def test_conv1d_module_matches_torch(cfg):
    t_mod = tnn.Conv1d(3, 6, 3, **cfg)
    e_mod = enn.Conv1d(3, 6, 3, **cfg)
    assert repr(e_mod) == repr(t_mod)
    _check_module(e_mod, t_mod, _rand(2, 3, 11))


CONVT_CONFIGS = [dict(), dict(stride=2, output_padding=1), dict(stride=3, padding=1, dilation=2, output_padding=2),
                 dict(groups=2, stride=2, padding=1, bias=False)]


@pytest.mark.parametrize("cfg", CONVT_CONFIGS, ids=[str(c) for c in CONVT_CONFIGS])
def test_conv_transpose_modules_match_torch(cfg):
    t2, e2 = tnn.ConvTranspose2d(4, 6, 3, **cfg), enn.ConvTranspose2d(4, 6, 3, **cfg)
    assert repr(e2) == repr(t2)
    assert e2.weight.shape == tuple(t2.weight.shape)
    _check_module(e2, t2, _rand(2, 4, 5, 4))
    t1, e1 = tnn.ConvTranspose1d(4, 6, 3, **cfg), enn.ConvTranspose1d(4, 6, 3, **cfg)
    assert repr(e1) == repr(t1)
    _check_module(e1, t1, _rand(2, 4, 6))


def test_conv_transpose_output_size():
    t_mod = tnn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    e_mod = enn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    _copy_weights(e_mod, t_mod)
    x = _rand(1, 2, 4, 5)
    for size in [(8, 10), (7, 9), [1, 3, 8, 9]]:
        e = e_mod(ember.tensor(x), output_size=size)
        t = t_mod(torch.tensor(x), output_size=size)
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="requested an output size"):
        e_mod(ember.tensor(x), output_size=(12, 9))
    with pytest.raises(ValueError, match="output_size must have"):
        e_mod(ember.tensor(x), output_size=(7,))
    e1 = enn.ConvTranspose1d(2, 3, 3, stride=2)
    assert e1(ember.randn(1, 2, 4), output_size=[10]).shape == (1, 3, 10)


def test_conv_default_init_statistics():
    ember.manual_seed(0)
    m = enn.Conv2d(16, 64, 3)
    fan_in = 16 * 9
    bound = 1 / math.sqrt(fan_in)
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.var() - bound ** 2 / 3) < 0.05 * bound ** 2
    assert np.abs(m.bias.detach().numpy()).max() <= bound
    t = enn.ConvTranspose2d(16, 8, 3)
    # transposed weights are (in, out/groups, k, k): fan_in is dim 1 times the receptive field
    bound_t = 1 / math.sqrt(8 * 9)
    assert np.abs(t.weight.detach().numpy()).max() <= bound_t
    assert np.abs(t.weight.detach().numpy()).max() > 0.95 * bound_t


def test_conv_module_constructor_errors():
    for kw in [dict(groups=0), dict(groups=3), dict(padding="full"), dict(padding="same", stride=2),
               dict(padding_mode="mirror")]:
        with pytest.raises(ValueError):
            tnn.Conv2d(4, 6, 3, **kw)
        with pytest.raises(ValueError):
            enn.Conv2d(4, 6, 3, **kw)
    with pytest.raises(ValueError, match="Only \"zeros\" padding mode"):
        enn.ConvTranspose2d(4, 6, 3, padding_mode="reflect")


def test_functional_conv_errors_match_torch():
    x, w = _rand(2, 3, 5, 5), _rand(4, 3, 3, 3, seed=1)

    def both(fn, *arrs, exc=RuntimeError, match=None):
        with pytest.raises(exc) as te:
            fn(torch, TF, *[torch.tensor(a) for a in arrs])
        with pytest.raises(exc) as ee:
            fn(ember, EF, *[ember.tensor(a) for a in arrs])
        if match:
            assert match in str(ee.value), (str(ee.value), str(te.value))

    both(lambda m, f, a, b: f.conv2d(a.double(), b), x, w, match="expected scalar type Double but found Float")
    both(lambda m, f, a, b: f.conv2d(a, b, m.ones(5)), x, w, match="expected bias to be 1-dimensional with 4")
    both(lambda m, f, a, b: f.conv2d(a, b), _rand(2, 4, 5, 5), w, match="to have 3 channels, but got 4 channels")
    both(lambda m, f, a, b: f.conv2d(a, b), _rand(2, 3, 2, 2), w, match="Kernel size can't be greater")
    both(lambda m, f, a, b: f.conv2d(a, b), _rand(3, 5), w, match="Expected 3D (unbatched) or 4D (batched)")
    both(lambda m, f, a, b: f.conv2d(a, b, stride=2, padding="same"), x, w, match="not supported for strided")
    both(lambda m, f, a, b: f.conv2d(a, b, padding="foo"), x, w, match="Invalid padding string")
    both(lambda m, f, a, b: f.conv2d(a, b, groups=2), x, w, match="Given groups=2")
    both(lambda m, f, a, b: f.conv2d(a, b, stride=0), x, w, match="non-positive stride")
    both(lambda m, f, a, b: f.conv2d(a, b, padding=-1), x, w, match="negative padding")
    both(lambda m, f, a, b: f.conv2d(a, b, dilation=0), x, w, match="non-positive dilation")
    both(lambda m, f, a, b: f.conv_transpose2d(a, b.transpose(0, 1), stride=2, output_padding=2), x, w,
         match="output padding must be smaller")
    both(lambda m, f, a, b: f.conv1d(a, b[:, :, 0]), x, w, match="Expected 2D (unbatched) or 3D (batched)")


def test_conv_integer_and_zero_batch():
    x = np.arange(2 * 3 * 5 * 5).reshape(2, 3, 5, 5) % 7
    w = np.arange(4 * 3 * 3 * 3).reshape(4, 3, 3, 3) % 5 - 2
    e = EF.conv2d(ember.tensor(x), ember.tensor(w), padding=1)
    t = TF.conv2d(torch.tensor(x), torch.tensor(w), padding=1)
    assert e.dtype is ember.int64 and np.array_equal(e.numpy(), t.numpy())
    z = EF.conv2d(ember.zeros(0, 3, 5, 5), ember.ones(4, 3, 3, 3))
    assert z.shape == (0, 4, 3, 3)


def test_conv_half_precision_keeps_dtype():
    x, w = _rand(1, 2, 5, 5), _rand(3, 2, 3, 3, seed=1)
    for edt, tdt in [(ember.float16, torch.float16), (ember.bfloat16, torch.bfloat16)]:
        e = EF.conv2d(ember.tensor(x).to(edt), ember.tensor(w).to(edt))
        t = TF.conv2d(torch.tensor(x).to(tdt), torch.tensor(w).to(tdt))
        assert e.dtype is edt
        np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=3e-2, atol=3e-2)


def test_conv_gradient_penalty_double_backward():
    # d/dw of |d loss / d x|^2: needs the derivatives of conv_transpose2d and conv2d_weight
    t_mod = tnn.Conv2d(2, 3, 3, padding=1, stride=2, dtype=torch.float64)
    e_mod = enn.Conv2d(2, 3, 3, padding=1, stride=2, dtype=ember.float64)
    _copy_weights(e_mod, t_mod)
    x = _rand(2, 2, 6, 5, dtype=np.float64)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    eg = ember.autograd.grad(e_mod(ex).tanh().sum(), ex, create_graph=True)[0]
    tg = torch.autograd.grad(t_mod(tx).tanh().sum(), tx, create_graph=True)[0]
    (eg ** 2).sum().backward()
    (tg ** 2).sum().backward()
    np.testing.assert_allclose(e_mod.weight.grad.numpy(), t_mod.weight.grad.numpy(), rtol=1e-8)
    np.testing.assert_allclose(e_mod.bias.grad.numpy(), t_mod.bias.grad.numpy(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-8)


def test_small_cnn_training_step_matches_torch():
    def build(nn):
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.Identity(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(8, 3))
    t_net, e_net = build(tnn), build(enn)
    _copy_weights(e_net, t_net)
    assert repr(e_net) == repr(t_net)
    x = _rand(4, 1, 8, 8)
    e_out, t_out = e_net(ember.tensor(x)), t_net(torch.tensor(x))
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
    (e_out ** 2).mean().backward()
    (t_out ** 2).mean().backward()
    t_params = dict(t_net.named_parameters())
    for name, p in e_net.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), rtol=1e-4, atol=1e-6)


# ---- autocast hook ----------------------------------------------------------------------------------------


def test_autocast_hook_casts_float_inputs(monkeypatch):
    from ember.nn.functional import conv as conv_mod
    monkeypatch.setattr(conv_mod, "_AMP", [lambda: ember.bfloat16])
    x, w, b = _rand(4, 3), _rand(5, 3, seed=1), _rand(5, seed=2)
    e = EF.linear(ember.tensor(x), ember.tensor(w), ember.tensor(b))
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        t = TF.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b))
    assert e.dtype is ember.bfloat16 and t.dtype == torch.bfloat16
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=2e-2, atol=2e-2)
    xi, wi = _rand(1, 2, 5, 5), _rand(3, 2, 3, 3, seed=1)
    ec = EF.conv2d(ember.tensor(xi), ember.tensor(wi))
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        tc = TF.conv2d(torch.tensor(xi), torch.tensor(wi))
    assert ec.dtype is ember.bfloat16 and tc.dtype == torch.bfloat16
    # gradients flow back through the casts to the float32 leaves
    leaf = ember.tensor(x, requires_grad=True)
    EF.linear(leaf, ember.tensor(w)).float().sum().backward()
    assert leaf.grad.dtype is ember.float32
    # float64 is not autocast (as in torch)
    assert EF.linear(ember.tensor(x).double(), ember.tensor(w).double()).dtype is ember.float64
    monkeypatch.setattr(conv_mod, "_AMP", [lambda: None])
    assert EF.linear(ember.tensor(x), ember.tensor(w)).dtype is ember.float32
