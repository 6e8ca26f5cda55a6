"""split / split_with_sizes / chunk / unbind against torch: one multi-output view node per call, whose
backward concatenates the pieces' gradients (zeros for pieces without one); the pieces stay views of
the input; in-place writes to them are refused under autograd as torch refuses them.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from autograd_support import same

A = np.arange(60, dtype=np.float64).reshape(3, 4, 5) / 7 - 2


def _leaf(m):
    return m.tensor(A.copy(), requires_grad=True)


# (how to cut y, which pieces feed the loss)
CUTS = [
    (lambda y: y.split(2, dim=2), (0, 2)),                  # uneven: 2, 2, 1
    (lambda y: y.split(2, dim=-1), (1,)),                   # negative dim, pieces 0 and 2 get no grad
    (lambda y: y.split([1, 0, 3], dim=1), (0, 2)),          # an empty piece
    (lambda y: y.split([4, 0], dim=1), (0,)),               # an empty last piece
    (lambda y: y.split(7, dim=2), (0,)),                    # one piece
    (lambda y: y.chunk(3, dim=-2), (0, 1)),                 # chunk of 4 in 3: 2, 2
    (lambda y: y.chunk(2, dim=0), (1,)),
    (lambda y: y.unbind(1), (1, 3)),
    (lambda y: y.unbind(-1), (0, 4)),
    (lambda y: y.unbind(0), ()),                            # no piece used: only the other term
]


@pytest.mark.parametrize("i", range(len(CUTS)))
def test_values_and_grads(i):
    cut, used = CUTS[i]

    def f(m):
        x = _leaf(m)
        y = x * 1.5
        pieces = cut(y)
        loss = (y * 0.25).sum()
        for k in used:
            loss = loss + (pieces[k] * pieces[k]).sum() * (k + 1)
        loss.backward()
        return [p.detach() for p in pieces], x.grad, [type(p.grad_fn).__name__ for p in pieces]
    same(f)


def test_one_node_views_and_versions():
    def f(m):
        x = _leaf(m)
        y = x * 1
        a, b, c = y.split([1, 2, 1], dim=1)
        same_node = a.grad_fn is b.grad_fn is c.grad_fn
        with m.no_grad():
            b.mul_(10)                       # writes through to y
        return same_node, a._base is y, y.detach(), y._version, c._version, b.stride(), b.storage_offset()
    same(f)


def test_inplace_on_piece_refused_under_autograd():
    for m in (torch, ember):
        for cut in (lambda y: y.split(2, 2), lambda y: y.split([1, 3], 1), lambda y: y.unbind(0)):
            y = _leaf(m) * 1
            with pytest.raises(RuntimeError, match="returns multiple views"):
                cut(y)[1].add_(1)


def test_inplace_on_piece_without_grad_writes_base():
    def f(m):
        x = m.tensor(A.copy())
        p, q = x.chunk(2, dim=1)
        q.zero_()
        u = x.unbind(2)
        u[0].fill_(7)
        return x, p._version, x._version
    same(f)


def test_inplace_on_base_then_backward_through_piece():
    # torch refuses to read such a piece's grad_fn; ember gives it the base's new history (same grads)
    x = ember.tensor(A.copy(), requires_grad=True)
    y = x * 1
    a, b = y.split(2, dim=1)
    y.mul_(3)
    (a * a).sum().backward()
    xt = torch.tensor(A.copy(), requires_grad=True)
    ((xt * 3)[:, :2] ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_double_backward_and_gradcheck():
    def f(m):
        x = _leaf(m)
        a, b, c = (x * x).split([2, 1, 2], dim=2)
        u = x.unbind(1)
        loss = (a * b).sum() + (u[2] ** 3).sum()
        (g,) = m.autograd.grad(loss, x, create_graph=True)
        (gg,) = m.autograd.grad((g * g).sum(), x)
        return g, gg
    same(f)
    x = ember.tensor(A[:2, :3, :4].copy(), requires_grad=True)
    for fn in (lambda t: t.split(3, 2)[0] * t.split(3, 2)[1].sum(), lambda t: t.unbind(1)[2] ** 2,
               lambda t: t.chunk(2, 0)[1].exp()):
        assert ember.autograd.gradcheck(fn, (x,))
        assert ember.autograd.gradgradcheck(fn, (x,))


def test_split_errors_match_torch():
    for m in (torch, ember):
        x = m.zeros(2, 3)
        with pytest.raises(RuntimeError):
            x.split([1, 1], dim=1)
        with pytest.raises(IndexError):
            x.split(1, dim=2)
        with pytest.raises(IndexError):
            m.tensor(1.0).unbind(0)


def test_piece_hooks_retain_grad_and_grad_wrt_piece():
    def f(m):
        x = _leaf(m)
        a, b, c = (x * 2).split([2, 1, 2], dim=2)
        b.retain_grad()
        seen = []
        c.register_hook(lambda g: seen.append(g.sum()) or g * 3)
        loss = (a * b).sum() + (c ** 2).sum()
        ga, gb = m.autograd.grad(loss, [a, b], retain_graph=True)
        loss.backward()
        return ga, gb, b.grad, x.grad, seen
    same(f)
