"""Autograd against torch: requires_grad rules, .grad accumulation, leaves and retain_grad, backward() and
autograd.grad options, double backward, the layout of .grad, and deep and wide graphs.

Each test here and in the other test_autograd_*.py files runs the same function with ``lib = torch`` and
``lib = ember`` and compares what comes out (values, shapes, dtypes, ``None``s, flags) or the exception
raised (helpers in autograd_support.py).
"""
from __future__ import annotations

import gc
import sys
import time
import warnings

import numpy as np
import pytest

import ember

from autograd_support import X, leaf, same, same_error


# ---- requires_grad rules -----------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ["int64", "int32", "int16", "int8", "uint8", "bool"])
def test_integer_tensors_cannot_require_grad(dt):
    same_error(lambda m: m.tensor([1, 0], dtype=getattr(m, dt)).requires_grad_())
    same_error(lambda m: m.tensor([1, 0], dtype=getattr(m, dt), requires_grad=True))
    same_error(lambda m: m.zeros(2, dtype=getattr(m, dt), requires_grad=True))

    def set_attr(m):
        t = m.ones(2, dtype=getattr(m, dt))
        t.requires_grad = True
    same_error(set_attr)
    # asking for requires_grad=False is always fine
    same(lambda m: m.tensor([1, 0], dtype=getattr(m, dt)).requires_grad_(False).requires_grad)


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
def test_float_tensors_can_require_grad(dt):
    same(lambda m: (m.ones(2, dtype=getattr(m, dt)).requires_grad_().requires_grad,
                    m.ones(2, dtype=getattr(m, dt)).requires_grad_().is_leaf))


def test_results_of_ops_on_int_tensors_do_not_require_grad():
    def f(m):
        x = m.tensor([1.5, 2.5], requires_grad=True)
        i = x.to(m.int64)
        b = x.long() + 1
        return i.requires_grad, i.grad_fn is None, b.requires_grad, (x * 2).to(m.int32).requires_grad
    same(f)


def test_requires_grad_propagates():
    def f(m):
        x = leaf(m, X)
        c = m.ones(2, 3)
        return [(x + c).requires_grad, (c * 2).requires_grad, (c + c).is_leaf, (x * c).is_leaf,
                x.detach().requires_grad, (x * 1).detach().is_leaf]
    same(f)


def test_requires_grad_false_on_non_leaf_raises():
    same_error(lambda m: (leaf(m, X) * 2).requires_grad_(False))

    def set_attr(m):
        y = leaf(m, X) * 2
        y.requires_grad = False
    same_error(set_attr)
    # requires_grad_(True) on a non-leaf is a no-op
    same(lambda m: (leaf(m, X) * 2).requires_grad_(True).requires_grad)


# ---- .grad accumulation, leaves, retain_grad ------------------------------------------------------------

def test_grad_accumulates_in_place_across_backward_calls():
    def f(m):
        x = leaf(m, X)
        (x * x).sum().backward()
        first = x.grad.clone()
        g = x.grad
        (x * 3).sum().backward()
        same_obj = g is x.grad
        (x * x * x).sum().backward()
        return first, x.grad, same_obj
    same(f)


def test_zeroing_grad_and_setting_none():
    def f(m):
        x = leaf(m, X)
        (x * 2).sum().backward()
        x.grad = None
        (x * 3).sum().backward()
        a = x.grad.clone()
        x.grad.zero_() if hasattr(x.grad, "zero_") else x.grad.mul_(0)
        (x * 5).sum().backward()
        return a, x.grad
    same(f)


def test_grad_setter_validates():
    def bad(v):
        def f(m):
            x = leaf(m, X)
            x.grad = v(m)
        return f
    same_error(bad(lambda m: 3))
    same_error(bad(lambda m: m.ones(3)))
    same_error(bad(lambda m: m.ones(2, 3, dtype=m.float64)))
    same_error(bad(lambda m: m.ones(2, 3, dtype=m.int64)))

    def ok(m):
        x = leaf(m, X)
        x.grad = m.ones(2, 3)
        (x * 2).sum().backward()
        return x.grad
    same(ok)


def test_leaf_and_non_leaf_attributes():
    def f(m):
        x = leaf(m, X)
        c = m.ones(2, 3)
        y = x * 2
        z = y.sum()
        z.backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ygrad = y.grad
        return [x.is_leaf, c.is_leaf, y.is_leaf, z.is_leaf, x.grad_fn is None, y.grad_fn is not None,
                ygrad is None, c.grad is None, x.grad, y.requires_grad, y.retains_grad, x.retains_grad]
    same(f)


def test_retain_grad():
    def f(m):
        x = leaf(m, X)
        y = x * 2
        y.retain_grad()
        y.retain_grad()            # twice is harmless
        w = y * y
        w.retain_grad()
        loss = w.sum()
        loss.backward(retain_graph=True)
        g1 = y.grad.clone()
        loss.backward()            # retained grads accumulate too
        x.retain_grad()            # no-op on a leaf
        return g1, y.grad, w.grad, y.retains_grad, x.retains_grad, x.grad
    same(f)
    same_error(lambda m: m.ones(2).retain_grad())


def test_retain_grad_sees_hooked_gradient_regardless_of_order():
    def f(m):
        x = leaf(m, X)
        y = x * 2
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
        (y * 3).sum().backward()
        return y.grad, x.grad
    same(f)


# ---- backward options --------------------------------------------------------------------------------

def test_backward_with_gradient_argument():
    def f(m):
        x = leaf(m, X)
        y = x * x
        y.backward(gradient=m.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]]))
        return x.grad
    same(f)


def test_backward_gradient_errors():
    same_error(lambda m: (leaf(m, X) * 2).backward())
    same_error(lambda m: (leaf(m, X) * 2).backward(m.ones(3)))
    same_error(lambda m: m.ones(2).sum().backward())
    same_error(lambda m: m.autograd.grad(m.ones(2).sum(), [leaf(m, [1.0])]))


def test_backward_gradient_dtype_is_cast_to_output_dtype():
    def f(m):
        x = leaf(m, [1.0, 2.0])
        (x * 3).backward(m.ones(2, dtype=m.float64))
        return x.grad
    same(f)


# (the loss, retain_graph of each backward call in turn, whether a later call raises)
REPEATED_BACKWARD = [(lambda x: (x * x).sum(), (False, False), True),      # mul's saved inputs are freed
                     (lambda x: (x + 1).sum(), (False, False), False),     # add saves nothing
                     (lambda x: (x * x * 2).sum(), (True, True, False), False)]


@pytest.mark.parametrize("loss,retains,raises", REPEATED_BACKWARD)
def test_repeated_backward_and_retain_graph(loss, retains, raises):
    def f(m):
        x = leaf(m, X)
        y = loss(x)
        for retain in retains:
            y.backward(retain_graph=retain)
        return x.grad
    (same_error if raises else same)(f)


def test_second_autograd_grad_without_retain_graph_raises():
    def g(m):
        x = leaf(m, X)
        y = (x * x).sum()
        m.autograd.grad(y, x)
        m.autograd.grad(y, x)
    same_error(g)


def test_create_graph_gives_differentiable_grad():
    def f(m):
        x = leaf(m, X)
        y = (x * x * x).sum()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y.backward(create_graph=True)
        g = x.grad
        rg = g.requires_grad
        gx = m.autograd.grad(g.sum(), x)[0]
        return g, rg, gx
    same(f)


def test_autograd_backward_function_and_inputs_argument():
    def f(m):
        x = leaf(m, X)
        w = leaf(m, [[2.0, 1.0, 0.0], [1.0, -1.0, 3.0]])
        y = x * w
        m.autograd.backward([y.sum(), (y * y).sum()], [m.tensor(1.0), m.tensor(0.5)])
        gx, gw = x.grad, w.grad
        x.grad = None
        w.grad = None
        (x * w * w).sum().backward(inputs=[w])
        return gx, gw, x.grad, w.grad
    same(f)

    def nonleaf_inputs(m):
        x = leaf(m, X)
        h = x * 3
        (h * h).sum().backward(inputs=[h])
        return h.grad, x.grad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(nonleaf_inputs)
    same_error(lambda m: (leaf(m, X) * 2).sum().backward(inputs=[]))


# ---- autograd.grad -------------------------------------------------------------------------------------

def test_grad_basic_and_does_not_touch_dot_grad():
    def f(m):
        x = leaf(m, X)
        w = leaf(m, [[2.0, 1.0, 0.0], [1.0, -1.0, 3.0]])
        y = (x * w + x).sum()
        gx, gw = m.autograd.grad(y, [x, w])
        (gx2,) = m.autograd.grad((x * x).sum(), x)
        return gx, gw, gx2, x.grad is None, w.grad is None
    same(f)


def test_grad_single_tensor_input_returns_tuple():
    def f(m):
        x = leaf(m, X)
        r = m.autograd.grad((x * 2).sum(), x)
        return type(r).__name__, len(r), r[0]
    same(f)


def test_grad_allow_unused_and_materialize():
    def unused(m):
        x, u = leaf(m, X), leaf(m, [1.0, 2.0])
        return m.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    same(unused)
    same_error(lambda m: m.autograd.grad((leaf(m, X) * 2).sum(), [leaf(m, [1.0])]))

    def mat(m):
        x, u = leaf(m, X), leaf(m, [1.0, 2.0])
        return m.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
    same(mat)
    same_error(lambda m: m.autograd.grad((leaf(m, X) * 2).sum(), [leaf(m, [1.0])],
                                         materialize_grads=True, allow_unused=False))


def test_grad_grad_outputs_and_multiple_outputs():
    def f(m):
        x = leaf(m, X)
        y1 = x * x
        y2 = (x * 3).sum()
        return m.autograd.grad([y1, y2], x, grad_outputs=[m.full((2, 3), 0.5), None])
    same(f)

    def one(m):
        x = leaf(m, [1.0, 2.0, 3.0])
        return m.autograd.grad(x * x, x, m.tensor([1.0, -1.0, 2.0]))
    same(one)


def test_grad_wrt_intermediate_and_unreachable_parts():
    def f(m):
        x = leaf(m, X)
        h = x * 2
        k = h * h
        out = (k * 3).sum() + (x * 5).sum()
        gh, gk, gx = m.autograd.grad(out, [h, k, x])
        return gh, gk, gx, h.grad_fn is not None
    same(f)


def test_grad_input_must_require_grad():
    same_error(lambda m: m.autograd.grad((leaf(m, X) * 2).sum(), [m.ones(2, 3)]))


def test_grad_create_graph_higher_order():
    def f(m):
        x = leaf(m, [0.5, -1.0, 2.0], m.float64)
        y = x * x * x * x
        (g1,) = m.autograd.grad(y.sum(), x, create_graph=True)
        (g2,) = m.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = m.autograd.grad(g2.sum(), x, create_graph=True)
        (g4,) = m.autograd.grad(g3.sum(), x)
        return g1, g2, g3, g4, g1.requires_grad, g4.requires_grad
    same(f)


def test_double_backward_of_pow_matches_mul_chain():
    def f(m):
        x = leaf(m, [1.0, -2.0, 0.5])
        (g,) = m.autograd.grad((x ** 3).sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x, create_graph=True)
        (ggg,) = m.autograd.grad(gg.sum(), x)
        return g, gg, ggg
    same(f)


def test_double_backward_of_cube_via_mul_chain():
    def f(m):
        x = leaf(m, [1.0, -2.0, 0.5])
        y = x * x * x
        (dx,) = m.autograd.grad(y, x, m.ones(3), create_graph=True)
        dx.sum().backward()
        return dx, x.grad
    same(f)


def test_double_backward_with_div_mean_and_views():
    def f(m):
        x = leaf(m, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], m.float64)
        w = leaf(m, [0.5, -1.0, 2.0], m.float64)
        y = (x / (w * w + 1.0)).t().reshape(6).mean() * x.sum(0).unsqueeze(0).expand(4, 3).sum()
        gx, gw = m.autograd.grad(y, [x, w], create_graph=True)
        return m.autograd.grad((gx * gx).sum() + (gw * x.sum(0)).sum(), [x, w])
    same(f)


def test_grad_layout_follows_dense_leaf_strides():
    def f(m):
        out = []
        for mk in (lambda: m.zeros(4, 3).t(), lambda: m.zeros(4, 6)[:, ::2], lambda: m.zeros(3, 1).expand(3, 4),
                   lambda: m.zeros(2, 3, 4).permute(2, 0, 1), lambda: m.zeros(3, 4)[1:]):
            x = mk().requires_grad_()
            (x * 2).sum().backward()
            out.append((x.grad.stride(), x.grad.is_contiguous(), x.grad))
        return out
    same(f)


def test_grad_is_not_aliased_to_user_tensors():
    def f(m):
        x = leaf(m, [1.0, 2.0])
        g = m.tensor([5.0, 6.0])
        x.backward(g)                      # the seed must be copied, not adopted
        g.mul_(0)
        y = leaf(m, [1.0, 2.0])
        kept = []
        y.register_hook(lambda gr: (kept.append(gr), gr)[1])
        (y * 3).sum().backward()
        kept[0].mul_(0) if not kept[0].requires_grad else None
        a, b = leaf(m, [1.0]), leaf(m, [2.0])
        (a + b).sum().backward()           # add passes one gradient to both leaves
        a.grad.add_(10)
        return x.grad, y.grad, a.grad, b.grad
    same(f)


# ---- deep graphs ----------------------------------------------------------------------------------------------

def test_ten_thousand_op_chain_backward_no_recursion_error():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    limit = sys.getrecursionlimit()
    y = x
    t0 = time.perf_counter()
    for i in range(10_000):
        y = y * 1.0001 if i % 2 else y + 0.5
    t1 = time.perf_counter()
    y.sum().backward()
    t2 = time.perf_counter()
    assert sys.getrecursionlimit() == limit
    np.testing.assert_allclose(x.grad.numpy(), np.full(2, 1.0001 ** 5000), rtol=1e-4)
    assert t2 - t1 < 3.0, f"backward of a 10k chain took {t2 - t1:.2f}s (forward {t1 - t0:.2f}s)"
    del y
    gc.collect()


def test_deep_graph_is_freed_without_recursion():
    x = ember.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(30_000):
        y = y + 1.0
    del y          # dropping a 30k-deep chain of nodes must not overflow the C stack
    gc.collect()
    z = x
    for _ in range(10_000):
        z = z * 1.0
    (g,) = ember.autograd.grad(z.sum(), x)
    assert g.item() == 1.0


def test_wide_graph_many_uses_of_one_leaf():
    def f(m):
        x = leaf(m, [1.0, 2.0])
        acc = x * 0
        for i in range(300):
            acc = acc + x * float(i % 7)
        acc.sum().backward()
        return x.grad
    same(f)
