"""nn pooling, padding and upsampling layers (and their functional forms) against torch: values, indices,
gradients, repr, tie/NaN semantics and argument errors."""
import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
import ember.nn.functional as EF
import torch.nn as tnn
import torch.nn.functional as TF


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _check(e_mod, t_mod, x, rtol=1e-5, atol=1e-6, grad=True):
    """Same input through both modules: outputs (all of them, e.g. values and indices) and input grads."""
    ex = ember.tensor(x, requires_grad=grad)
    tx = torch.tensor(x, requires_grad=grad)
    e_out, t_out = e_mod(ex), t_mod(tx)
    e_list = e_out if isinstance(e_out, tuple) else (e_out,)
    t_list = t_out if isinstance(t_out, tuple) else (t_out,)
    assert len(e_list) == len(t_list)
    for e, t in zip(e_list, t_list):
        assert tuple(e.shape) == tuple(t.shape)
        assert e.dtype.name == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)
    if grad:
        w = _rand(*t_list[0].shape, dtype=x.dtype, seed=3)
        (e_list[0] * ember.tensor(w)).sum().backward()
        (t_list[0] * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=atol)
    assert repr(e_mod) == repr(t_mod)


POOL_MODULES = [
    ("MaxPool2d", (2,), {}),
    ("MaxPool2d", (3, 2, 1), dict(dilation=1, ceil_mode=True, return_indices=True)),
    ("MaxPool2d", ((3, 2),), dict(stride=(1, 2), padding=(1, 0), dilation=(1, 2))),
    ("MaxPool1d", (3,), dict(stride=2, padding=1, return_indices=True)),
    ("AvgPool2d", (3,), dict(stride=2, padding=1, count_include_pad=False)),
    ("AvgPool2d", (2,), dict(ceil_mode=True, divisor_override=3)),
    ("AvgPool1d", (3,), dict(stride=1, padding=1, ceil_mode=True)),
    ("AdaptiveAvgPool2d", ((3, None),), {}),
    ("AdaptiveAvgPool2d", (4,), {}),
    ("AdaptiveAvgPool1d", (4,), {}),
    ("AdaptiveMaxPool2d", ((2, 3),), dict(return_indices=True)),
    ("AdaptiveMaxPool1d", (3,), {}),
    ("LPPool2d", (2, 2), {}),
    ("LPPool1d", (3, 3), dict(stride=2)),
]


@pytest.mark.parametrize("name,args,kw", POOL_MODULES, ids=[f"{n}{a}{k}" for n, a, k in POOL_MODULES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pool_modules_match_torch(name, args, kw, dtype):
    one_d = name.endswith("1d")
    x = _rand(2, 3, 9) if one_d else _rand(2, 3, 7, 9)
    if name.startswith("LP"):
        x = np.abs(x) + 0.5
    _check(getattr(enn, name)(*args, **kw), getattr(tnn, name)(*args, **kw), x.astype(dtype))


def test_pool_unbatched_input():
    x = _rand(3, 6, 5)
    _check(enn.MaxPool2d(2, return_indices=True), tnn.MaxPool2d(2, return_indices=True), x)
    _check(enn.AvgPool2d(2, padding=1), tnn.AvgPool2d(2, padding=1), x)
    _check(enn.AdaptiveMaxPool2d(3), tnn.AdaptiveMaxPool2d(3), x)
    _check(enn.MaxPool1d(2), tnn.MaxPool1d(2), x[0])


def test_max_unpool_modules():
    x = _rand(2, 3, 6, 4)
    ev, ei = EF.max_pool2d(ember.tensor(x), 2, return_indices=True)
    tv, ti = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    assert ei.dtype is ember.int64 and np.array_equal(ei.numpy(), ti.numpy())
    e = enn.MaxUnpool2d(2)(ev, ei)
    t = tnn.MaxUnpool2d(2)(tv, ti)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    assert repr(enn.MaxUnpool2d(2)) == repr(tnn.MaxUnpool2d(2))
    e = enn.MaxUnpool2d(2)(ev, ei, output_size=(7, 5))
    t = tnn.MaxUnpool2d(2)(tv, ti, output_size=(7, 5))
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    with pytest.raises(ValueError):
        enn.MaxUnpool2d(2)(ev, ei, output_size=(12, 5))


def test_max_pool_nan_and_ties_follow_torch():
    x = np.array([[[1.0, np.nan, 3.0, np.nan, 2.0, 2.0, -1.0, 0.5]]], dtype=np.float32)
    for fn in [lambda m, f, t: f.max_pool1d(t, 4, return_indices=True),
               lambda m, f, t: f.max_pool1d(t, 3, 1, 1, return_indices=True),
               lambda m, f, t: f.adaptive_max_pool1d(t, 3, return_indices=True)]:
        ev, ei = fn(ember, EF, ember.tensor(x))
        tv, ti = fn(torch, TF, torch.tensor(x))
        np.testing.assert_array_equal(ev.numpy(), tv.numpy())
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    # all-(-inf) windows that include padding report the first in-bounds element
    y = np.full((1, 1, 3, 3), -np.inf, dtype=np.float32)
    ev, ei = EF.max_pool2d(ember.tensor(y), 2, padding=1, return_indices=True)
    tv, ti = TF.max_pool2d(torch.tensor(y), 2, padding=1, return_indices=True)
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())


def test_max_pool_integer_and_avg_pool_int64():
    x = (np.arange(2 * 3 * 5 * 4).reshape(2, 3, 5, 4) * 37 % 23 - 11)
    for fn in [lambda f, t: f.max_pool2d(t, 2, padding=1, return_indices=True),
               lambda f, t: f.avg_pool2d(t, 2, padding=1),
               lambda f, t: f.avg_pool2d(t, 3, 1, ceil_mode=True, divisor_override=2)]:
        e = fn(EF, ember.tensor(x))
        t = fn(TF, torch.tensor(x))
        for a, b in zip(e if isinstance(e, tuple) else (e,), t if isinstance(t, tuple) else (t,)):
            assert a.dtype.name == str(b.dtype).replace("torch.", "")
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(NotImplementedError, match="avg_pool2d"):
        EF.avg_pool2d(ember.ones(1, 1, 2, 2, dtype=ember.int32), 2)
    with pytest.raises(NotImplementedError, match="max_pool2d"):
        EF.max_pool2d(ember.ones(1, 1, 2, 2, dtype=ember.bool), 2)
    with pytest.raises(NotImplementedError, match="adaptive_avg_pool2d"):
        EF.adaptive_avg_pool2d(ember.ones(1, 1, 2, 2, dtype=ember.int64), 1)


def test_pool_argument_errors_match_torch():
    both = _both_raise(_rand(2, 3, 5, 5))
    both(lambda f, t: f.max_pool2d(t, 3, padding=2), match="pad should be at most half of effective kernel size")
    both(lambda f, t: f.avg_pool2d(t, 3, padding=2), match="pad should be at most half")
    both(lambda f, t: f.max_pool2d(t, 7), match="Output size is too small")
    both(lambda f, t: f.avg_pool2d(t, 7), match="Output size is too small")
    both(lambda f, t: f.max_pool2d(t[0, 0], 2), match="3D or 4D")
    both(lambda f, t: f.adaptive_avg_pool2d(t, (1, 2, 3)))


PAD_MODULES = [
    ("ZeroPad2d", (1,)), ("ZeroPad2d", ((1, 0, 2, 3),)), ("ZeroPad1d", ((1, 2),)),
    ("ConstantPad1d", (2, 3.5)), ("ConstantPad2d", ((1, -1, 0, 2), -1.0)), ("ConstantPad3d", (1, 0.5)),
    ("ReflectionPad1d", ((1, 2),)), ("ReflectionPad2d", (2,)), ("ReflectionPad3d", (1,)),
    ("ReplicationPad1d", (3,)), ("ReplicationPad2d", ((1, 0, 2, 1),)), ("ReplicationPad3d", (1,)),
    ("CircularPad1d", (2,)), ("CircularPad2d", ((1, 2, 0, 1),)), ("CircularPad3d", (1,)),
]


@pytest.mark.parametrize("name,args", PAD_MODULES, ids=[f"{n}{a}" for n, a in PAD_MODULES])
def test_padding_modules_match_torch(name, args):
    if name.endswith("3d"):
        x = _rand(2, 3, 3, 4, 5)
    elif name.endswith("2d"):
        x = _rand(2, 3, 4, 5)
    else:
        x = _rand(2, 3, 5)
    _check(getattr(enn, name)(*args), getattr(tnn, name)(*args), x)


def _both_raise(x):
    """``both(fn, exc, match)``: ``fn(functional, tensor of x)`` raises ``exc`` (default RuntimeError) in
    torch and in ember (whose message contains ``match``)."""
    def both(fn, exc=RuntimeError, match=None):
        with pytest.raises(exc):
            fn(TF, torch.tensor(x))
        with pytest.raises(exc) as ee:
            fn(EF, ember.tensor(x))
        if match:
            assert match in str(ee.value), str(ee.value)
    return both


def test_functional_pad_errors_and_dtypes():
    x = _rand(1, 2, 3, 4)
    both = _both_raise(x)

    both(lambda f, t: f.pad(t, (1, 1, 1)), RuntimeError, "Padding length must be divisible by 2")
    both(lambda f, t: f.pad(t, (1,) * 10), RuntimeError, "Padding length should be less than or equal")
    both(lambda f, t: f.pad(t, (4, 1, 1, 1), mode="reflect"), RuntimeError, "Padding size should be less than")
    both(lambda f, t: f.pad(t, (5, 1, 1, 1), mode="circular"), RuntimeError, "wrapping around more than once")
    both(lambda f, t: f.pad(t, (1, 1), mode="reflect"), NotImplementedError, "Padding size 2 is not supported for 4D")
    both(lambda f, t: f.pad(t, (1, 1, 1, 1), mode="foo"), NotImplementedError, "Unrecognised padding mode foo")
    both(lambda f, t: f.pad(t, (1, 1, 1, 1), mode="reflect", value=2.0), RuntimeError, "doesn't take in value")
    both(lambda f, t: f.pad(t, (-5, 0)), RuntimeError)
    for mode in ["constant", "reflect", "replicate", "circular"]:
        xi = (x * 10).astype(np.int64)
        e = EF.pad(ember.tensor(xi), (1, 2, 1, 0), mode=mode)
        t = TF.pad(torch.tensor(xi), (1, 2, 1, 0), mode=mode)
        assert e.dtype is ember.int64 and np.array_equal(e.numpy(), t.numpy())
    e = EF.pad(ember.tensor(x > 0), (1, 1), value=True)
    t = TF.pad(torch.tensor(x > 0), (1, 1), value=True)
    assert e.dtype is ember.bool and np.array_equal(e.numpy(), t.numpy())
    # a zero pad still returns a new tensor
    base = ember.tensor(x)
    assert EF.pad(base, (0, 0)) is not base


UPSAMPLE = [
    ("Upsample", dict(scale_factor=2)),
    ("Upsample", dict(size=(5, 7), mode="bilinear")),
    ("Upsample", dict(scale_factor=1.5, mode="bilinear", align_corners=True)),
    ("Upsample", dict(scale_factor=(2, 3), mode="bicubic")),
    ("Upsample", dict(scale_factor=0.6, mode="nearest-exact")),
    ("Upsample", dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True)),
    ("UpsamplingNearest2d", dict(scale_factor=2)),
    ("UpsamplingBilinear2d", dict(size=5)),
]


@pytest.mark.parametrize("name,kw", UPSAMPLE, ids=[f"{n}{k}" for n, k in UPSAMPLE])
def test_upsampling_modules_match_torch(name, kw):
    _check(getattr(enn, name)(**kw), getattr(tnn, name)(**kw), _rand(2, 3, 4, 5), rtol=1e-5, atol=1e-5)


def test_upsample_1d_3d_and_uint8_nearest():
    _check(enn.Upsample(scale_factor=2.5, mode="linear"), tnn.Upsample(scale_factor=2.5, mode="linear"),
           _rand(2, 3, 5))
    _check(enn.Upsample(size=(4, 5, 3), mode="trilinear", align_corners=True),
           tnn.Upsample(size=(4, 5, 3), mode="trilinear", align_corners=True), _rand(1, 2, 3, 4, 5))
    _check(enn.Upsample(scale_factor=1.5), tnn.Upsample(scale_factor=1.5), _rand(1, 2, 3, 4, 5))
    xu = (np.arange(24).reshape(1, 2, 3, 4) * 7 % 256).astype(np.uint8)
    e = EF.interpolate(ember.tensor(xu), scale_factor=2)
    t = TF.interpolate(torch.tensor(xu), scale_factor=2)
    assert e.dtype is ember.uint8 and np.array_equal(e.numpy(), t.numpy())


def test_interpolate_errors_match_torch():
    x = _rand(1, 2, 3, 4)
    both = _both_raise(x)

    both(lambda f, t: f.interpolate(t, scale_factor=2, align_corners=True), ValueError, "align_corners option")
    both(lambda f, t: f.interpolate(t), ValueError, "either size or scale_factor")
    both(lambda f, t: f.interpolate(t, size=3, scale_factor=2), ValueError, "only one of size or scale_factor")
    both(lambda f, t: f.interpolate(t, size=(3, 3, 3)), ValueError, "same number of spatial dimensions")
    both(lambda f, t: f.interpolate(t, scale_factor=(2, 2, 2)), ValueError, "same number of spatial dimensions")
    both(lambda f, t: f.interpolate(t, size=(3, 4), recompute_scale_factor=True), ValueError,
         "recompute_scale_factor is not meaningful")
    both(lambda f, t: f.interpolate(t, scale_factor=2, mode="linear"), NotImplementedError,
         "Got 4D input, but linear mode needs 3D input")
    both(lambda f, t: f.interpolate(t, scale_factor=2, mode="foo"), NotImplementedError, "Input Error")
    both(lambda f, t: f.interpolate(t, size=0), RuntimeError, "Input and output sizes should be greater than 0")
    both(lambda f, t: f.interpolate(t.long(), size=3), NotImplementedError, "not implemented for 'Long'")


def test_pixel_shuffle_round_trip_and_errors():
    x = _rand(2, 8, 3, 4)
    e = EF.pixel_shuffle(ember.tensor(x), 2)
    t = TF.pixel_shuffle(torch.tensor(x), 2)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    np.testing.assert_array_equal(EF.pixel_unshuffle(e, 2).numpy(), x)
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        EF.pixel_shuffle(ember.randn(1, 5, 2, 2), 2)
    with pytest.raises(RuntimeError, match="height to be divisible"):
        EF.pixel_unshuffle(ember.randn(1, 5, 3, 2), 2)


def test_fold_unfold_round_trip_and_errors():
    x = _rand(2, 3, 6, 5)
    cols = EF.unfold(ember.tensor(x), 3, padding=1)
    np.testing.assert_allclose(cols.numpy(), TF.unfold(torch.tensor(x), 3, padding=1).numpy())
    back = EF.fold(cols, (6, 5), 3, padding=1)
    np.testing.assert_allclose(back.numpy(), TF.fold(TF.unfold(torch.tensor(x), 3, padding=1), (6, 5), 3,
                                                     padding=1).numpy(), rtol=1e-5)
    with pytest.raises(RuntimeError):
        EF.fold(cols, (7, 5), 3, padding=1)
    with pytest.raises(RuntimeError):
        TF.fold(torch.tensor(cols.numpy()), (7, 5), 3, padding=1)


def test_top_level_function_forms():
    x = _rand(1, 2, 6, 6)
    w = _rand(3, 2, 3, 3, seed=1)
    pairs = [
        (lambda m: m.conv2d(m.tensor(x), m.tensor(w), None, 1, 1)),
        (lambda m: m.conv1d(m.tensor(x[:, :, 0]), m.tensor(w[:, :, 0]))),
        (lambda m: m.conv_transpose2d(m.tensor(x), m.tensor(w.transpose(1, 0, 2, 3).copy()), stride=2)),
        (lambda m: m.max_pool2d(m.tensor(x), 2)),
        (lambda m: m.max_pool1d_with_indices(m.tensor(x[0]), 2)[1]),
        (lambda m: m.avg_pool1d(m.tensor(x[0]), 3)),
        (lambda m: m.adaptive_avg_pool1d(m.tensor(x[0]), 4)),
        (lambda m: m.adaptive_max_pool1d(m.tensor(x[0]), 4)[1]),
        (lambda m: m.constant_pad_nd(m.tensor(x), (1, 2), 0.5)),
        (lambda m: m.pixel_shuffle(m.tensor(_rand(1, 4, 2, 3)), 2)),
    ]
    for fn in pairs:
        e, t = fn(ember), fn(torch)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


def test_inplace_change_of_pooled_output_keeps_backward_valid():
    # torch saves only the indices for max pooling's backward, so a following in-place ReLU is allowed
    x = _rand(2, 3, 6, 6)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for m, f, t in [(ember, EF, ex), (torch, TF, tx)]:
        y = f.max_pool2d(t * 1.0, 2)
        y.relu_()
        (y * 2).sum().backward()
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
    assert ex.grad.numpy().any()
