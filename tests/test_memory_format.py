"""Memory formats (ember/_memory_format.py) against torch: channels_last / channels_last_3d layouts made by
contiguous, clone, to, *_like and Module.to, kept by elementwise ops, the strides and is_contiguous answers,
gradients through the layout change, the same conv results either way, and the errors."""
import pickle

import numpy as np
import torch

import ember
from oracle import same_error


def _layouts(L):
    out = []
    x = L.tensor(np.arange(120.0).reshape(2, 3, 4, 5), requires_grad=True)
    y = x.contiguous(memory_format=L.channels_last)
    out.append((y.stride(), y.is_contiguous(), y.is_contiguous(memory_format=L.channels_last)))
    out.append((y.clone().stride(), y.contiguous().stride(), L.empty_like(y).stride(), L.zeros_like(y).stride(),
                (y + 1).stride(), (y * y).stride(), y.to(L.float64).stride(), y.detach().stride()))
    cl = L.channels_last
    out.append((x.is_contiguous(memory_format=cl), L.randn(3, 4).is_contiguous(memory_format=cl),
                L.randn(2, 1, 4, 4).is_contiguous(memory_format=cl)))
    out.append(L.nn.Conv2d(3, 4, 3).to(memory_format=L.channels_last).weight.stride())
    out.append((x.to(memory_format=L.channels_last).stride(), x.to(L.float64, memory_format=L.channels_last).stride()))
    out.append((x.clone(memory_format=cl).stride(), y.clone(memory_format=L.contiguous_format).stride(),
                x.contiguous(memory_format=L.preserve_format).stride(),
                y.clone(memory_format=L.preserve_format).stride()))
    z = L.zeros(2, 3, 4, 5, 6).contiguous(memory_format=L.channels_last_3d)
    out.append((z.stride(), z.is_contiguous(memory_format=L.channels_last_3d), z.is_contiguous(memory_format=cl)))
    out.append((L.empty_like(x, memory_format=L.channels_last).stride(),
                L.ones_like(y, memory_format=L.contiguous_format).stride()))
    (y * L.arange(120.0).reshape(2, 3, 4, 5)).sum().backward()
    out.append(x.grad.numpy().tolist())
    v = y.permute(0, 2, 3, 1)
    out.append((v.is_contiguous(), v.reshape(2, -1).stride()))
    return out


def test_layouts_match_torch():
    for a, b in zip(_layouts(torch), _layouts(ember)):
        assert a == b


def test_conv_model_on_channels_last_gives_the_same_numbers():
    res = []
    for L in (torch, ember):
        nn = L.nn
        m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2)).double()
        with L.no_grad():
            for p in m.parameters():
                p.copy_(L.tensor(np.linspace(-1, 1, p.numel()).reshape(p.shape)))
        x = L.tensor(np.linspace(-1, 1, 2 * 3 * 8 * 8).reshape(2, 3, 8, 8))
        plain = m(x)
        m = m.to(memory_format=L.channels_last)
        xc = x.contiguous(memory_format=L.channels_last).requires_grad_()
        out = m(xc)
        out.sum().backward()
        res.append((plain.detach().numpy(), out.detach().numpy(), xc.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, atol=1e-12)
    np.testing.assert_allclose(res[1][0], res[1][1], atol=1e-12)


def test_formats_are_objects_and_errors_match_torch():
    assert repr(ember.channels_last) == "ember.channels_last" and isinstance(ember.channels_last, ember.memory_format)
    assert pickle.loads(pickle.dumps(ember.channels_last)) is ember.channels_last
    same_error(lambda L: L.randn(3, 4).contiguous(memory_format=L.channels_last))
    same_error(lambda L: L.randn(3, 4, 2, 2).contiguous(memory_format=L.channels_last_3d))
    same_error(lambda L: L.randn(3, 4).clone(memory_format=1))


def test_random_likes_take_the_layout_as_torch():
    for fn in ("rand_like", "randn_like"):
        for m_src, fmt, shape in [("channels_last", None, (2, 3, 4, 5)), (None, "channels_last", (2, 3, 4, 5)),
                                  ("channels_last", "contiguous_format", (2, 3, 4, 5)),
                                  ("channels_last_3d", None, (2, 3, 4, 5, 6))]:
            got = []
            for m in (torch, ember):
                x = m.zeros(*shape)
                if m_src:
                    x = x.to(memory_format=getattr(m, m_src))
                kw = {} if fmt is None else {"memory_format": getattr(m, fmt)}
                r = getattr(m, fn)(x, **kw)
                got.append((r.shape, r.stride(), r.dtype.is_floating_point))
            assert got[0][1:] == got[1][1:] and tuple(got[0][0]) == tuple(got[1][0]), (fn, m_src, fmt, got)
        same_error(lambda m: getattr(m, fn)(m.zeros(3, 4), memory_format=m.channels_last))
