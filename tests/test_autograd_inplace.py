"""Autograd against torch: the version counter and the rules for in-place ops (saved tensors modified,
leaves, views of non-leaves, sibling views, retain_grad across in-place writes).
"""
from __future__ import annotations

import pytest

from autograd_support import X, leaf, same, same_error


# ---- version counter, in-place rules --------------------------------------------------------------------------

# (the op, which of its tensors is then written in place, whether backward then raises)
SAVED_THEN_WRITTEN = [(lambda a: a * a, "input", True),        # mul saves its inputs
                      (lambda a: a.sin(), "input", True),
                      (lambda a: a.exp(), "output", True),     # exp saves its result,
                      (lambda a: a.exp(), "input", False)]     # not its input


@pytest.mark.parametrize("op,written,raises", SAVED_THEN_WRITTEN)
def test_inplace_modification_of_saved_tensor(op, written, raises):
    def f(m):
        x = leaf(m, X)
        a = x * 1
        y = op(a)
        (a if written == "input" else y).add_(1)
        y.sum().backward()
        return x.grad
    (same_error if raises else same)(f)


def test_inplace_on_leaf_saved_under_no_grad_raises():
    def f(m):
        x = leaf(m, X)
        y = x * x
        with m.no_grad():
            x.add_(1)
        y.sum().backward()
    same_error(f)


def test_inplace_on_input_of_op_that_saves_nothing_is_fine():
    def f(m):
        x = leaf(m, X)
        a = x * 1
        y = (a + 2) - a * 0 if False else a + 2
        z = a.sum() * 1
        a.mul_(3)
        (y.sum() + z).backward()
        return x.grad, a._version
    same(f)


def test_inplace_on_leaf_requiring_grad_raises():
    same_error(lambda m: leaf(m, X).add_(1))
    same_error(lambda m: leaf(m, X).mul_(2))
    same_error(lambda m: leaf(m, X).narrow(0, 0, 1).add_(1))

    def ok_under_no_grad(m):
        x = leaf(m, X)
        with m.no_grad():
            x.mul_(2)
        return x, x.requires_grad, x.is_leaf, x._version
    same(ok_under_no_grad)


def test_inplace_on_view_of_non_leaf_gives_torch_gradients():
    def f(m):
        x = leaf(m, [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [-1.0, -2.0, 0.5, 0.25]])
        w = leaf(m, [2.0, -1.0])
        y = x * 1
        v = y.narrow(1, 1, 2)
        v.mul_(w)
        r = y.select(0, 2)
        r.add_(w.sum())
        (y * y).sum().backward()
        return y, x.grad, w.grad, v.grad_fn is not None, y.grad_fn.name()
    same(f)


def test_inplace_on_base_then_use_view():
    def f(m):
        x = leaf(m, [[1.0, 2.0], [3.0, 4.0]])
        y = x * 2
        v = y.t()
        y.mul_(3)
        (v * v).sum().backward()
        return v, x.grad
    same(f)


def test_version_counter_matches_torch():
    def f(m):
        x = m.zeros(3, 4)
        out = [x._version]
        x.add_(1)
        out.append(x._version)
        x.mul_(2)
        x.sub_(1)
        x.div_(2)
        out.append(x._version)
        v = x.narrow(0, 1, 1)
        out.append(v._version)
        v.add_(1)
        out += [v._version, x._version]
        t = x.t()
        t.mul_(2)
        out += [t._version, x._version, v._version]
        y = x + 1
        out.append(y._version)
        x += 1
        out.append(x._version)
        return out
    same(f)


def test_views_share_memory_and_base():
    def f(m):
        x = m.arange(12).reshape(3, 4).to(m.float32)
        views = [x.view(4, 3), x.t(), x.narrow(1, 1, 2), x.select(0, 1), x.unsqueeze(0), x.expand(2, 3, 4),
                 x.permute(1, 0), x.reshape(12), x.diagonal(), x.unfold(1, 2, 2), x.split(2, 1)[1]]
        x.add_(100)
        out = []
        for v in views:
            out.append((v, v._base is x, v.is_contiguous(), v.stride(), v.storage_offset(), v._is_view()))
        return out, x._is_view(), x._base is None
    same(f)


def test_view_of_view_has_root_base():
    def f(m):
        x = m.zeros(4, 4)
        v = x.t().narrow(0, 1, 2).select(1, 3)
        v.add_(1)
        return v._base is x, x, v.storage_offset()
    same(f)


def test_grad_wrt_subset_then_rest_without_retain_graph():
    # nodes autograd.grad did not need to run keep their saved values (torch frees only what ran)
    def f(m):
        a, b, c, d = (leaf(m, [1.0, 2.0]), leaf(m, [3.0, 4.0]), leaf(m, [5.0, 6.0]), leaf(m, [7.0, 8.0]))
        z = (a * b + c * d).sum()
        (ga,) = m.autograd.grad(z, a, retain_graph=False)
        (gc,) = m.autograd.grad(z, c)
        return ga, gc
    same(f)

    def again(m):
        a, b = leaf(m, [1.0, 2.0]), leaf(m, [3.0, 4.0])
        z = (a * b).sum()
        m.autograd.grad(z, a)
        m.autograd.grad(z, b)
    same_error(again)


def test_sibling_views_after_inplace_on_one_view():
    def f(m):
        x = leaf(m, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
        y = x * 1
        a, b = y.narrow(0, 0, 2), y.narrow(0, 2, 2)     # disjoint views
        whole = y.narrow(0, 1, 2)    # overlaps both
        a.mul_(10)
        (b * b + whole.sum() * 0 + whole * whole).sum().backward()
        return x.grad, whole
    same(f)



def test_retain_grad_follows_inplace_and_old_hooks_stay():
    def f(m):
        x = leaf(m, [1.0, 2.0, 3.0])
        y = x * 2
        y.retain_grad()
        seen = []
        y.register_hook(lambda g: seen.append(g))
        y.mul_(3)
        (y * y).sum().backward()
        return y.grad, seen, y.retains_grad, x.grad
    same(f)

    def view(m):
        x = leaf(m, [[1.0, 2.0], [3.0, 4.0]])
        y = x * 2
        v = y[0]
        v.retain_grad()
        y.mul_(5)
        (v * 1).sum().backward()
        return v.grad, x.grad
    same(view)


def test_setitem_and_indexing_views_with_autograd():
    def f(m):
        x = leaf(m, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        w = leaf(m, [10.0, 20.0])
        y = x * 1
        y[:, 0] = w * 2
        y[1] += w[0]
        z = y[0, 1:]
        z.mul_(w[1])
        (y * y).sum().backward()
        return y, x.grad, w.grad
    same(f)


def test_overwrite_non_leaf_with_constant():
    def f(m):
        x = leaf(m, [1.0, 2.0, 3.0])
        y = x * 2
        v = y[1:]
        y.zero_()
        y.add_(1)
        (v * x[1:]).sum().backward()
        return x.grad, v
    same(f)


def test_version_counter_of_more_inplace_writes():
    def f(m):
        x = m.zeros(3, 4)
        v = x[1:]
        out = []
        x[1] = 5
        out.append(x._version)
        x[:, 0] += 1
        out.append(x._version)
        for step in (lambda: x.zero_(), lambda: x.fill_(2), lambda: x.copy_(m.ones(3, 4)),
                     lambda: x.clamp_(0, 1), lambda: m.add(m.ones(3, 4), 1, out=x), lambda: x.exp_(),
                     lambda: v.mul_(2), lambda: x.detach().add_(1)):
            step()
            out.append((x._version, v._version))
        x.requires_grad_()
        out.append(x._version)
        return out
    same(f)
