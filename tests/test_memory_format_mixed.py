"""Layouts torch chooses where ember used to fall back to C order, each checked against torch: an
elementwise op whose operands disagree (the first operand that tells two dims apart decides), meta
results of elementwise ops, a leaf's ``.grad`` taking the leaf's strides (meta too), and
``empty(memory_format=...)`` (zeros/ones refuse the keyword)."""
import numpy as np
import pytest
import torch

import ember
from oracle import same_error


def _mixed(L):
    a = L.tensor(np.random.default_rng(0).normal(size=(2, 3, 4, 5)).astype(np.float32))
    cl = a.contiguous(memory_format=L.channels_last)
    c = a * 1.5
    bias = L.ones(1, 3, 1, 1)
    p = L.tensor(np.ones((2, 3, 4, 5, 6), np.float32))
    p3 = p.contiguous(memory_format=L.channels_last_3d)
    return [(cl + c).stride(), (c + cl).stride(), (cl * c).stride(), L.mul(c, cl).stride(), (cl - c).stride(),
            (cl / c).stride(), (bias + cl).stride(), (c + bias).stride(), L.where(cl > 0, c, cl).stride(),
            L.where(c > 0, cl, c).stride(), (cl > c).stride(), L.maximum(cl, c).stride(), (p3 + p).stride(),
            (p + p3).stride(), L.add(cl, c, alpha=2).stride(), (cl + c.double()).stride(),
            (cl + c).sum().item()]


def test_mixed_layout_results_match_torch():
    t, e = _mixed(torch), _mixed(ember)
    assert t[:-1] == e[:-1]
    assert abs(t[-1] - e[-1]) < 1e-3


def _meta(L):
    x = L.randn(2, 3, 4, 5, device="meta").contiguous(memory_format=L.channels_last)
    y = L.randn(2, 3, 4, 5, device="meta")
    return [(x * 2).stride(), (x + y).stride(), (y + x).stride(), x.relu().stride(), L.sigmoid(x).stride(),
            x.clone().stride(), (x > 0).stride(), L.where(x > 0, x, 0.0).stride(), (x + 1).exp().stride()]


def test_meta_elementwise_layouts_match_torch():
    assert _meta(torch) == _meta(ember)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_leaf_grad_takes_the_leaf_layout(device):
    def fn(L):
        out = []
        x = L.randn(2, 3, 4, 5, device=device).contiguous(memory_format=L.channels_last).requires_grad_()
        (x * 2).sum().backward()
        out.append(x.grad.stride())
        y = L.randn(2, 3, 4, 5, device=device).permute(0, 2, 3, 1).detach().requires_grad_()
        (y * 2).sum().backward()
        out.append(y.grad.stride())
        z = L.empty(2, 3, 4, 5, device=device, memory_format=L.channels_last, requires_grad=True)
        (z * 2).sum().backward()
        out.append((z.is_leaf, z.stride(), z.grad.stride()))
        return out
    assert fn(torch) == fn(ember)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_empty_memory_format_matches_torch(device):
    def fn(L):
        return [L.empty(2, 3, 4, 5, device=device, memory_format=L.channels_last).stride(),
                L.empty((2, 3, 4, 5, 6), device=device, memory_format=L.channels_last_3d).stride(),
                L.empty(2, 3, 4, memory_format=L.contiguous_format).stride()]
    assert fn(torch) == fn(ember)


@pytest.mark.parametrize("call", [
    lambda L: L.zeros(2, 3, 4, 5, memory_format=L.channels_last),
    lambda L: L.ones(2, 3, 4, 5, memory_format=L.channels_last),
    lambda L: L.empty(2, 3, 4, 5, memory_format=L.preserve_format),
    lambda L: L.empty(2, 3, 4, memory_format=L.channels_last),
])
def test_factory_memory_format_errors_match_torch(call):
    same_error(call)
