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


def test_low_rank_mixed_layouts_take_the_first_operands_strides():
    """``a.t() + b`` in 2-d and 3-d: torch lays the result out as its first operand (NumPy fell back to C
    order); binary ops, comparisons, where, alpha-add, pow and broadcasts, and the gradients' values."""
    def fn(L):
        a, b = L.arange(12.).reshape(3, 4), L.arange(12.).reshape(4, 3)
        c, d = L.arange(24.).reshape(2, 3, 4), L.arange(24.).reshape(2, 4, 3)
        ops = [lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x / (y + 1), lambda x, y: L.maximum(x, y),
               lambda x, y: x > y, lambda x, y: L.where(x > 3, x, y), lambda x, y: L.add(x, y, alpha=2),
               lambda x, y: L.atan2(x, y), lambda x, y: x == y]
        pairs = [(a.t(), b), (b, a.t()), (c.transpose(1, 2), d), (d, c.transpose(1, 2)),
                 (c.permute(2, 0, 1), L.ones(4, 2, 3)), (a[:, :2].t(), L.ones(2, 3)), (a.t().double(), b),
                 (L.ones(1, 3), a.t()), (a.t(), L.ones(1, 3)), (c.transpose(0, 1), L.ones(3, 2, 4))]
        out = []
        for op in ops:
            for x, y in pairs:
                r = op(x, y)
                out.append((r.stride(), r.tolist()))
        w = a.t().detach().requires_grad_()
        (w * b).sum().backward()
        out.append((w.grad.stride(), w.grad.tolist()))
        return out
    assert fn(torch) == fn(ember)


def test_cat_and_stack_of_transposed_inputs_are_contiguous_as_torch():
    """torch's cat/stack give a contiguous result unless the inputs are channels_last; NumPy followed the
    transposed inputs' order, so ``cat([...]).view(-1)`` failed in ember where it works in torch."""
    def fn(L):
        a = L.arange(12.).reshape(3, 4).t()
        c = L.arange(24.).reshape(2, 3, 4).transpose(1, 2)
        y = L.arange(24.).reshape(1, 2, 3, 4).contiguous(memory_format=L.channels_last)
        outs = [L.cat([a, a], 0), L.cat([c, c], 1), L.stack([a, a]), L.stack([c, c], 1), L.cat([y, y], 1),
                L.cat([y, y], 0)]
        return [(o.stride(), o.tolist()) for o in outs] + [L.cat([a, a]).view(-1).tolist()]
    assert fn(torch) == fn(ember)


def test_scans_of_strided_inputs_are_contiguous_as_torch():
    """cumsum/cumprod/logcumsumexp/cummax/cummin give contiguous results in torch whatever the input's
    layout (transposed, channels_last); NumPy's accumulate followed the input's order."""
    def fn(L):
        a = L.arange(12.).reshape(3, 4).t()
        y = L.arange(120.).reshape(2, 3, 4, 5).contiguous(memory_format=L.channels_last) / 50
        outs = [a.cumsum(0), a.cumprod(1), a.logcumsumexp(0), a.cummax(0).values, a.cummin(1).indices,
                a.cumsum(0, dtype=L.float64), y.cumsum(1), y.logcumsumexp(1), y.cummax(2).values]
        return [o.stride() for o in outs], [o.double().numpy() for o in outs]
    (ts, tv), (es, ev) = fn(torch), fn(ember)
    assert ts == es
    for t, e in zip(tv, ev):
        np.testing.assert_allclose(e, t, rtol=1e-6)
