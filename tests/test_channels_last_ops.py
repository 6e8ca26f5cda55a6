"""Which results keep a channels-last layout: convolutions, poolings, interpolation, padding, pixel
shuffles, activations and normalizations give the strides torch's CPU kernels give (forward and the
input gradients), with the same values."""
import numpy as np
import pytest
import torch

import ember

CL, CL3 = "cl", "cl3"


def _fmt(lib, name):
    return {CL: lib.channels_last, CL3: lib.channels_last_3d}[name]


def _t(lib, a, fmt=None, grad=False):
    t = lib.tensor(a)
    if fmt is not None:
        t = t.contiguous(memory_format=_fmt(lib, fmt))
    return t.requires_grad_(grad)


def _arr(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# name -> (fn(lib, F, x, w), input shape, input format, weight shape or None, weight format, dtype)
CASES = {
    "conv2d_cl_input": (lambda lib, F, x, w: F.conv2d(x, w, padding=1), (2, 3, 8, 8), CL, (4, 3, 3, 3), None),
    "conv2d_cl_weight": (lambda lib, F, x, w: F.conv2d(x, w, stride=2), (2, 3, 8, 8), None, (4, 3, 3, 3), CL),
    "conv2d_groups": (lambda lib, F, x, w: F.conv2d(x, w, groups=3, padding=1), (2, 3, 7, 5), CL, (6, 1, 3, 3), None),
    "conv2d_1x1_out": (lambda lib, F, x, w: F.conv2d(x, w), (2, 3, 3, 3), CL, (2, 3, 3, 3), None),
    "conv2d_f64": (lambda lib, F, x, w: F.conv2d(x.double(), w.double(), padding=1), (2, 3, 6, 6), CL, (4, 3, 3, 3),
                   None),
    "conv2d_contiguous": (lambda lib, F, x, w: F.conv2d(x, w), (2, 3, 6, 6), None, (4, 3, 3, 3), None),
    "conv1d_transposed": (lambda lib, F, x, w: F.conv1d(x.transpose(1, 2).contiguous().transpose(1, 2), w),
                          (2, 3, 9), None, (4, 3, 3), None),
    "conv3d": (lambda lib, F, x, w: F.conv3d(x, w, padding=1), (2, 3, 4, 5, 5), CL3, (4, 3, 3, 3, 3), None),
    "conv3d_f64": (lambda lib, F, x, w: F.conv3d(x.double(), w.double()), (1, 2, 3, 4, 5), CL3, (2, 2, 1, 1, 1),
                   None),
    "conv_transpose2d": (lambda lib, F, x, w: F.conv_transpose2d(x, w, stride=2), (2, 3, 5, 5), CL, (3, 4, 3, 3), None),
    "conv_transpose3d": (lambda lib, F, x, w: F.conv_transpose3d(x, w, stride=2), (1, 3, 3, 3, 3), CL3,
                         (3, 2, 2, 2, 2), None),
    "max_pool2d": (lambda lib, F, x, w: F.max_pool2d(x, 2), (2, 3, 8, 8), CL, None, None),
    "max_pool2d_indices": (lambda lib, F, x, w: F.max_pool2d(x, 3, 2, 1, return_indices=True)[1], (2, 3, 8, 8), CL,
                           None, None),
    "max_pool3d": (lambda lib, F, x, w: F.max_pool3d(x, 2), (2, 3, 4, 4, 4), CL3, None, None),
    "avg_pool2d": (lambda lib, F, x, w: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (2, 3, 8, 8), CL, None, None),
    "avg_pool3d": (lambda lib, F, x, w: F.avg_pool3d(x, 2), (2, 3, 4, 4, 4), CL3, None, None),
    "adaptive_avg_pool2d": (lambda lib, F, x, w: F.adaptive_avg_pool2d(x, 3), (2, 3, 8, 8), CL, None, None),
    "adaptive_avg_pool2d_1": (lambda lib, F, x, w: F.adaptive_avg_pool2d(x, 1), (2, 3, 8, 8), CL, None, None),
    "adaptive_avg_pool2d_uneven": (lambda lib, F, x, w: F.adaptive_avg_pool2d(x, (3, 5)), (2, 3, 8, 7), CL, None,
                                   None),
    "adaptive_max_pool2d": (lambda lib, F, x, w: F.adaptive_max_pool2d(x, 3), (2, 3, 8, 8), CL, None, None),
    "adaptive_avg_pool3d": (lambda lib, F, x, w: F.adaptive_avg_pool3d(x, 2), (1, 2, 4, 4, 4), CL3, None, None),
    "lp_pool2d": (lambda lib, F, x, w: F.lp_pool2d(x.abs() + 0.1, 2, 2), (2, 3, 8, 8), CL, None, None),
    "interpolate_nearest": (lambda lib, F, x, w: F.interpolate(x, scale_factor=2), (2, 3, 4, 4), CL, None, None),
    "interpolate_bilinear": (lambda lib, F, x, w: F.interpolate(x, size=(5, 7), mode="bilinear"), (2, 3, 4, 4), CL,
                             None, None),
    "interpolate_bicubic": (lambda lib, F, x, w: F.interpolate(x, size=(5, 7), mode="bicubic", align_corners=True),
                            (2, 3, 4, 4), CL, None, None),
    "interpolate_trilinear": (lambda lib, F, x, w: F.interpolate(x, size=(3, 5, 2), mode="trilinear"),
                              (1, 2, 4, 4, 4), CL3, None, None),
    "pad_constant": (lambda lib, F, x, w: F.pad(x, (1, 1, 2, 2)), (2, 3, 4, 4), CL, None, None),
    "pad_reflect": (lambda lib, F, x, w: F.pad(x, (1, 1, 2, 2), mode="reflect"), (2, 3, 4, 4), CL, None, None),
    "pad_circular": (lambda lib, F, x, w: F.pad(x, (1, 1, 2, 2), mode="circular"), (2, 3, 4, 4), CL, None, None),
    "pixel_shuffle": (lambda lib, F, x, w: F.pixel_shuffle(x, 2), (2, 8, 3, 3), CL, None, None),
    "pixel_unshuffle": (lambda lib, F, x, w: F.pixel_unshuffle(x, 2), (2, 3, 4, 4), CL, None, None),
    "gelu": (lambda lib, F, x, w: F.gelu(x), (2, 3, 4, 4), CL, None, None),
    "softmax_channels": (lambda lib, F, x, w: F.softmax(x, 1), (2, 3, 4, 4), CL, None, None),
    "log_softmax_last": (lambda lib, F, x, w: F.log_softmax(x, -1), (2, 3, 4, 4), CL, None, None),
    "instance_norm": (lambda lib, F, x, w: F.instance_norm(x), (2, 3, 4, 4), CL, None, None),
    "batch_norm": (lambda lib, F, x, w: F.batch_norm(x, None, None, training=True), (2, 3, 4, 4), CL, None, None),
}


def _run(lib, name, grad):
    fn, xs, xf, ws, wf = CASES[name]
    x = _t(lib, _arr(xs, 1), xf, grad)
    w = None if ws is None else _t(lib, _arr(ws, 2), wf, grad)
    out = fn(lib, lib.nn.functional, x, w)
    return x, w, out


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_layout_and_values_match_torch(name):
    for grad in (False, True):
        tx, tw, tout = _run(torch, name, grad)
        ex, ew, eout = _run(ember, name, grad)
        assert tuple(eout.shape) == tuple(tout.shape)
        assert eout.stride() == tout.stride(), (name, grad)
        for fmt in ("channels_last", "channels_last_3d", "contiguous_format"):
            if eout.dim() == {"channels_last": 4, "channels_last_3d": 5}.get(fmt, eout.dim()):
                assert eout.is_contiguous(memory_format=getattr(ember, fmt)) == \
                    tout.is_contiguous(memory_format=getattr(torch, fmt)), (name, fmt)
        np.testing.assert_allclose(eout.detach().numpy(), tout.detach().numpy(), rtol=1e-4, atol=1e-5)


def _dense_strides(t):
    return tuple(st for n, st in zip(t.shape, t.stride()) if n != 1)


GRAD_CASES = ["conv2d_cl_input", "conv2d_groups", "conv3d", "conv_transpose2d", "max_pool2d", "avg_pool2d",
              "adaptive_max_pool2d", "batch_norm"]


@pytest.mark.parametrize("name", GRAD_CASES)
def test_input_gradient_layout_matches_torch(name):
    grads = {}
    for lib in (torch, ember):
        x, w, out = _run(lib, name, True)
        g = lib.tensor(_arr(tuple(out.shape), 3))        # a contiguous incoming gradient
        out.backward(g)
        grads[lib.__name__] = (x.grad, None if w is None else w.grad)
    (tgx, tgw), (egx, egw) = grads["torch"], grads["ember"]
    assert egx.stride() == tgx.stride(), name
    np.testing.assert_allclose(egx.numpy(), tgx.numpy(), rtol=1e-4, atol=1e-4)
    if tgw is not None:       # the weight's gradient takes the weight's layout (AccumulateGrad; the stride of a
        assert _dense_strides(egw) == _dense_strides(tgw), name     # size-1 dim is the kernel's choice)
        np.testing.assert_allclose(egw.numpy(), tgw.numpy(), rtol=1e-4, atol=1e-4)


def test_channels_last_resnet_block_keeps_layout_through_training_step():
    """A model and input converted with ``.to(memory_format=channels_last)``, as the PyTorch performance
    guide recommends: every activation stays channels-last and the step matches torch."""
    def build(lib):
        nn = lib.nn
        lib.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                          nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 4))
        return m
    tm, em = build(torch), build(ember)
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    outs = {}
    for lib, m in ((torch, tm), (ember, em)):
        m.to(memory_format=lib.channels_last)
        x = lib.tensor(_arr((4, 3, 8, 8), 5)).to(memory_format=lib.channels_last)
        acts = []
        for layer in m:
            x = layer(x)
            acts.append(x.stride())
        loss = x.square().mean()
        loss.backward()
        outs[lib.__name__] = (acts, loss.item(), m[0].weight.grad.stride(), m[0].weight.grad.numpy())
    assert outs["ember"][0] == outs["torch"][0]
    assert outs["ember"][1] == pytest.approx(outs["torch"][1], rel=1e-5)
    assert outs["ember"][2] == outs["torch"][2]
    np.testing.assert_allclose(outs["ember"][3], outs["torch"][3], rtol=1e-4, atol=1e-5)
