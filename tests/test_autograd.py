"""Autograd behaviour against torch: requires_grad rules, accumulation, leaves, retain_grad, backward and
autograd.grad options, double backward, grad modes, detach, hooks, the Node API, custom Functions,
gradcheck, anomaly mode, deep graphs, the version counter and in-place rules.

Most tests run the same function with ``lib = torch`` and ``lib = ember`` and compare what comes out
(values, shapes, dtypes, ``None``s, flags) or the exception raised (type and message).
"""
from __future__ import annotations

import gc
import sys
import time
import warnings

import numpy as np
import pytest
import torch

import ember

LIBS = (torch, ember)


# ---- comparison helpers ------------------------------------------------------------------------------

def _cmp(e, t, path="out", atol=1e-6, rtol=1e-5):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)), f"{path}: expected a sequence, got {type(e).__name__}"
        assert len(e) == len(t), f"{path}: length {len(e)} != torch {len(t)}"
        for i, (a, b) in enumerate(zip(e, t)):
            _cmp(a, b, f"{path}[{i}]", atol, rtol)
    elif isinstance(t, dict):
        assert set(e) == set(t), f"{path}: keys {sorted(e)} != torch {sorted(t)}"
        for k in t:
            _cmp(e[k], t[k], f"{path}[{k!r}]", atol, rtol)
    elif isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{path}: expected a Tensor, got {type(e).__name__}"
        assert tuple(e.shape) == tuple(t.shape), f"{path}: shape {tuple(e.shape)} != torch {tuple(t.shape)}"
        assert e.dtype.name == str(t.dtype)[6:], f"{path}: dtype {e.dtype} != torch {t.dtype}"
        np.testing.assert_allclose(e.detach().numpy().astype(np.float64), t.detach().numpy().astype(np.float64),
                                   atol=atol, rtol=rtol, equal_nan=True, err_msg=path)
    elif isinstance(t, float):
        assert e == pytest.approx(t, rel=rtol, abs=atol, nan_ok=True), f"{path}: {e} != torch {t}"
    else:
        assert e == t, f"{path}: {e!r} != torch {t!r}"


def same(fn, **kw):
    """Run ``fn(torch)`` and ``fn(ember)`` and compare the results."""
    t = fn(torch)
    e = fn(ember)
    _cmp(e, t, **kw)
    return e, t


def _builtin_base(exc):
    for c in type(exc).__mro__:
        if c.__module__ == "builtins":
            return c
    return Exception


def same_error(fn, prefix: bool = False, contains: str | None = None):
    """``fn(torch)`` and ``fn(ember)`` raise the same exception type with the same message."""
    with pytest.raises(Exception) as et:
        fn(torch)
    with pytest.raises(Exception) as ee:
        fn(ember)
    tb, eb = _builtin_base(et.value), _builtin_base(ee.value)
    assert eb is tb, f"ember raised {type(ee.value).__name__}({ee.value}), torch {type(et.value).__name__}({et.value})"
    tm = str(et.value)
    em = str(ee.value).replace("ember.", "torch.")
    if contains is not None:
        assert contains in tm and contains in em, f"{contains!r} not in ember's {em!r} / torch's {tm!r}"
    elif prefix:
        n = min(len(tm), len(em), 60)
        assert em[:n] == tm[:n], f"ember: {em!r}\ntorch: {tm!r}"
    else:
        assert em == tm, f"ember: {em!r}\ntorch: {tm!r}"
    return ee.value, et.value


def leaf(lib, data, dtype=None, rg=True):
    dtype = dtype or lib.float32
    return lib.tensor(data, dtype=dtype, requires_grad=rg)


X = [[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]]


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


def test_second_backward_without_retain_graph_raises():
    def f(m):
        x = leaf(m, X)
        y = (x * x).sum()
        y.backward()
        y.backward()
    same_error(f)

    def g(m):
        x = leaf(m, X)
        y = (x * x).sum()
        m.autograd.grad(y, x)
        m.autograd.grad(y, x)
    same_error(g)


def test_second_backward_through_nodes_that_save_nothing_is_fine():
    def f(m):
        x = leaf(m, X)
        y = (x + 1).sum()
        y.backward()
        y.backward()
        return x.grad
    same(f)


def test_retain_graph_allows_repeated_backward():
    def f(m):
        x = leaf(m, X)
        y = (x * x * 2).sum()
        y.backward(retain_graph=True)
        y.backward(retain_graph=True)
        y.backward()
        return x.grad
    same(f)


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


# ---- grad modes -----------------------------------------------------------------------------------------

def test_no_grad_context_and_decorators():
    def f(m):
        x = leaf(m, X)
        with m.no_grad():
            a = x * 2
            inner = m.is_grad_enabled()

        @m.no_grad()
        def g1(t):
            return t * 2, m.is_grad_enabled()

        @m.no_grad
        def g2(t):
            return t * 2, m.is_grad_enabled()
        b, en1 = g1(x)
        c, en2 = g2(x)
        return [a.requires_grad, a.grad_fn is None, inner, b.requires_grad, en1, c.requires_grad, en2,
                m.is_grad_enabled(), g2.__name__, (x * 2).requires_grad]
    same(f)


def test_enable_grad_and_set_grad_enabled():
    def f(m):
        x = leaf(m, X)
        out = []
        with m.no_grad():
            with m.enable_grad():
                out.append((x * 2).requires_grad)
            out.append((x * 2).requires_grad)

            @m.enable_grad()
            def e1():
                return (x * 2).requires_grad

            @m.enable_grad
            def e2():
                return (x * 2).requires_grad
            out += [e1(), e2()]
        with m.set_grad_enabled(False):
            out.append((x * 2).requires_grad)
            with m.set_grad_enabled(True):
                out.append((x * 2).requires_grad)
        out.append(m.is_grad_enabled())
        m.set_grad_enabled(False)           # plain call switches at once
        out.append(m.is_grad_enabled())
        m.set_grad_enabled(True)
        out.append(m.is_grad_enabled())

        @m.set_grad_enabled(False)
        def d():
            return m.is_grad_enabled()
        out += [m.is_grad_enabled(), d(), m.is_grad_enabled()]
        return out
    same(f)


def test_inference_mode_context_and_decorators():
    def f(m):
        x = leaf(m, X)
        out = []
        with m.inference_mode():
            out += [(x * 2).requires_grad, m.is_grad_enabled(), m.is_inference_mode_enabled()]
            with m.inference_mode(False):
                out += [m.is_grad_enabled(), m.is_inference_mode_enabled()]

        @m.inference_mode
        def a():
            return m.is_grad_enabled(), m.is_inference_mode_enabled()

        @m.inference_mode()
        def b():
            return m.is_grad_enabled(), m.is_inference_mode_enabled()

        @m.inference_mode(False)
        def c():
            return m.is_grad_enabled(), m.is_inference_mode_enabled()
        out += [a(), b(), c(), m.is_grad_enabled(), m.is_inference_mode_enabled()]
        with m.no_grad():
            with m.inference_mode(False):
                out.append(m.is_grad_enabled())
        return out
    same(f)


def test_grad_mode_restored_after_exception_and_on_generators():
    def f(m):
        out = []
        try:
            with m.no_grad():
                raise KeyError("x")
        except KeyError:
            pass
        out.append(m.is_grad_enabled())

        @m.no_grad()
        def boom():
            raise ValueError("y")
        try:
            boom()
        except ValueError:
            pass
        out.append(m.is_grad_enabled())

        @m.no_grad()
        def gen():
            for _ in range(2):
                yield m.is_grad_enabled()
        it = gen()
        out.append(next(it))
        out.append(m.is_grad_enabled())   # outside the generator, grad mode is the caller's
        out.append(next(it))
        return out
    same(f)


def test_backward_works_inside_no_grad():
    def f(m):
        x = leaf(m, X)
        y = (x * x).sum()
        with m.no_grad():
            y.backward()
        return x.grad
    same(f)


# ---- detach ---------------------------------------------------------------------------------------------

def test_detach_shares_memory_and_version():
    def f(m):
        x = leaf(m, X)
        y = x * 2
        d = y.detach()
        v0 = y._version
        with m.no_grad():
            d.mul_(10)
        return [d.requires_grad, d.is_leaf, d.grad_fn is None, y, y._version - v0, d._version - v0,
                d._base is None, x.detach().data_ptr() == x.data_ptr()]
    same(f)


def test_detach_then_inplace_with_grad_does_not_touch_source():
    def f(m):
        x = leaf(m, X)
        w = leaf(m, [1.0, 2.0, 3.0])
        d = x.detach()
        d.mul_(w)
        d.sum().backward()
        return [x.is_leaf, x.grad_fn is None, d.grad_fn is not None, w.grad, x.grad is None]
    same(f)


def test_detach_inplace():
    def f(m):
        x = leaf(m, X)
        y = x * 2
        r = y.detach_()
        return [r is y, y.requires_grad, y.is_leaf, y.grad_fn is None]
    same(f)
    same_error(lambda m: (leaf(m, X) * 2).narrow(0, 0, 1).detach_())
    same_error(lambda m: m.ones(4).narrow(0, 1, 2).detach_())


def test_data_attribute():
    def f(m):
        x = leaf(m, X)
        d = x.data
        d.mul_(2)      # allowed: .data is outside autograd and has its own version counter
        return [d.requires_grad, x._version, x, x.requires_grad]
    same(f)


# ---- hooks ------------------------------------------------------------------------------------------------

def test_leaf_hook_modifies_grad_and_runs_once_on_summed_grad():
    def f(m):
        x = leaf(m, X)
        seen = []

        def hook(g):
            seen.append(g.clone())
            return g * g           # non-linear, so per-edge calls would give a different result
        x.register_hook(hook)
        (x * x).sum().backward()
        return len(seen), seen[0], x.grad
    same(f)


def test_hooks_chain_in_registration_order_and_remove():
    def f(m):
        x = leaf(m, X)
        order = []
        h1 = x.register_hook(lambda g: (order.append(1), g + 1)[1])
        x.register_hook(lambda g: (order.append(2), g * 3)[1])
        x.register_hook(lambda g: order.append(3))     # returning None keeps the gradient
        (x * 2).sum().backward()
        a = x.grad.clone()
        h1.remove()
        x.grad = None
        (x * 2).sum().backward()
        return order, a, x.grad
    same(f)


def test_non_leaf_hook_modifies_gradient_flowing_on():
    def f(m):
        x = leaf(m, X)
        y = x * 2
        seen = []
        h = y.register_hook(lambda g: (seen.append(g.clone()), g * -1)[1])
        (y * y).sum().backward(retain_graph=True)
        g1 = x.grad.clone()
        h.remove()
        x.grad = None
        (y * y).sum().backward()
        return seen, g1, x.grad
    same(f)


def test_hook_errors():
    same_error(lambda m: m.ones(2).register_hook(lambda g: g))
    same_error(lambda m: (leaf(m, X) * 2).register_post_accumulate_grad_hook(lambda t: None))
    same_error(lambda m: m.ones(2).register_post_accumulate_grad_hook(lambda t: None))


def test_hooks_run_in_autograd_grad_only_for_needed_leaves():
    def f(m):
        x = leaf(m, [1.0, 2.0])
        w = leaf(m, [3.0, 4.0])
        calls = []
        x.register_hook(lambda g: calls.append("x"))
        w.register_hook(lambda g: (calls.append("w"), g * 10)[1])
        (gw,) = m.autograd.grad((x * w).sum(), w)
        return calls, gw
    same(f)


def test_post_accumulate_grad_hook():
    def f(m):
        x = leaf(m, X)
        seen = []
        x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
        (x * 3).sum().backward()
        (x * 3).sum().backward()
        return seen
    same(f)


# ---- Node API ---------------------------------------------------------------------------------------------

def _names(fn, depth=4):
    """Nested (name, [children]) of a grad_fn graph."""
    if fn is None:
        return None
    if depth == 0:
        return fn.name()
    return (fn.name(), [(_names(c, depth - 1), nr) for c, nr in fn.next_functions])


def test_node_names_and_next_functions():
    def f(m):
        x = leaf(m, X)
        w = leaf(m, [1.0, 2.0, 3.0])
        c = m.ones(2, 3)
        y = ((x * w + c) / 2 - x).sum()
        z = (-x).clone().mean()
        return _names(y.grad_fn, 6), _names(z.grad_fn), _names(x.grad_fn)
    same(f)


def test_accumulate_grad_node():
    def f(m):
        x = leaf(m, X)
        y = x * 2
        acc = y.grad_fn.next_functions[0][0]
        return [acc.variable is x, acc is y.grad_fn.next_functions[0][0], acc.name(), acc.next_functions,
                y.grad_fn.metadata, isinstance(y.grad_fn, m.autograd.graph.Node),
                isinstance(acc, m.autograd.graph.Node)]
    same(f)


def test_node_hooks_and_prehooks():
    def f(m):
        x = leaf(m, X)
        w = leaf(m, [1.0, 2.0, 3.0])
        y = x * w
        seen = []

        def pre(grad_outputs):
            seen.append(("pre", grad_outputs))
            return (grad_outputs[0] * 2,)

        def post(grad_inputs, grad_outputs):
            seen.append(("post", grad_inputs, grad_outputs))
            return (grad_inputs[0] + 1, grad_inputs[1])
        hp = y.grad_fn.register_prehook(pre)
        y.grad_fn.register_hook(post)
        y.sum().backward(retain_graph=True)
        a, b = x.grad.clone(), w.grad.clone()
        hp.remove()
        x.grad = w.grad = None
        y.sum().backward()
        return seen[:2], a, b, x.grad, w.grad
    same(f)


def test_node_called_directly():
    def f(m):
        x = leaf(m, X)
        w = leaf(m, [[1.0, 2.0, 3.0], [0.0, -1.0, 2.0]])
        y = x * w
        return y.grad_fn(m.ones(2, 3))
    same(f)


# ---- custom Function ------------------------------------------------------------------------------------

def _make_fns(m):
    class Cube(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * x * x * scale

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x * ctx.scale, None

    class SplitTwo(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y, x + y

        @staticmethod
        def backward(ctx, ga, gb):
            x, y = ctx.saved_tensors
            gx = ga * y + gb if ctx.needs_input_grad[0] else None
            gy = ga * x + gb if ctx.needs_input_grad[1] else None
            return gx, gy

    class WithMask(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x * 0).to(m.int64)
            out = x * 2
            flag = x.detach() * 0
            ctx.mark_non_differentiable(flag)
            return out, mask, flag

        @staticmethod
        def backward(ctx, g, gmask, gflag):
            SEEN.append((gmask, gflag))
            return g * 2

    return Cube, SplitTwo, WithMask


def test_function_basic_and_non_tensor_args():
    def f(m):
        Cube, _, _ = _make_fns(m)
        x = leaf(m, [1.0, -2.0, 0.5])
        y = Cube.apply(x, 2.0)
        y.sum().backward()
        return y, x.grad, y.grad_fn.name(), y.requires_grad, y.is_leaf
    same(f)


def test_function_needs_input_grad_and_multiple_outputs():
    def f(m):
        _, SplitTwo, _ = _make_fns(m)
        x = leaf(m, [1.0, 2.0])
        y = m.tensor([3.0, -1.0])
        seen = []

        class Spy(SplitTwo):
            @staticmethod
            def backward(ctx, ga, gb):
                seen.append(ctx.needs_input_grad)
                return SplitTwo.backward(ctx, ga, gb)
        a, b = Spy.apply(x, y)
        (a * 3 + b * b).sum().backward()
        a2, b2 = Spy.apply(x, y)
        a2.sum().backward()            # gradient of the unused output is materialised as zeros
        return a, b, x.grad, seen, a.grad_fn is b.grad_fn, b.output_nr if hasattr(b, "output_nr") else 1
    same(f)


SEEN: list = []


def test_function_non_differentiable_outputs():
    def f(m):
        _, _, WithMask = _make_fns(m)
        x = leaf(m, [1.0, 2.0])
        out, mask, flag = WithMask.apply(x)
        SEEN.clear()
        out.sum().backward()
        return [mask.requires_grad, flag.requires_grad, flag.grad_fn is None, x.grad, out.requires_grad,
                list(SEEN)]
    same(f)


def test_function_set_materialize_grads_false():
    def f(m):
        seen = []

        class Two(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                seen.append((ga is None, gb is None))
                g = ga * 2 if ga is not None else None
                if gb is not None:
                    g = gb * 3 if g is None else g + gb * 3
                return g
        x = leaf(m, [1.0, 2.0])
        a, b = Two.apply(x)
        a.sum().backward()
        return seen, x.grad
    same(f)


def test_function_returning_none_grad_and_unused_input():
    def f(m):
        class OnlyFirst(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * 2 + y

            @staticmethod
            def backward(ctx, g):
                return g * 2, None
        x, y = leaf(m, [1.0, 2.0]), leaf(m, [3.0, 4.0])
        OnlyFirst.apply(x, y).sum().backward()
        return x.grad, y.grad is None
    same(f)


def test_function_none_grad_to_shared_non_leaf():
    # the second input's node gets no gradient from the Function; its subgraph must still be released
    # and the shared non-leaf must still run once every consumer is done
    def f(m):
        class OnlyFirst(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2, None
        x = leaf(m, [1.0, 2.0])
        h = x * 3
        k = h * 5
        out = OnlyFirst.apply(h, k).sum()
        out.backward(retain_graph=True)
        g1 = x.grad.clone()
        x.grad = None
        out.backward()
        return g1, x.grad
    same(f)


def test_function_errors():
    def wrong_count(m):
        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return (g,)
        Bad.apply(leaf(m, [1.0]), leaf(m, [2.0])).sum().backward()
    same_error(wrong_count)

    def wrong_shape(m):
        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return m.ones(5)
        Bad.apply(leaf(m, [1.0, 2.0])).sum().backward()
    same_error(wrong_shape)

    def saved_after_free(m):
        class Save(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 2
        y = Save.apply(leaf(m, [1.0])).sum()
        y.backward()
        y.backward()
    same_error(saved_after_free)

    def modified_saved(m):
        class Save(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x
        a = leaf(m, [1.0]) * 1
        y = Save.apply(a)
        a.add_(1)
        y.sum().backward()
    same_error(modified_saved, prefix=True)


def test_function_without_saved_tensors_can_backward_twice():
    def f(m):
        class Double(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        x = leaf(m, [1.0, 2.0])
        y = Double.apply(x).sum()
        y.backward()
        y.backward()
        return x.grad
    same(f)


def test_function_double_backward():
    def f(m):
        Cube, _, _ = _make_fns(m)
        x = leaf(m, [1.0, -2.0, 0.5], m.float64)
        y = Cube.apply(x, 1.5)
        (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x)
        return g, gg
    same(f)


def test_function_setup_context_style_and_mark_dirty():
    def f(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(x, k):
                return x * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.k = inputs[1]

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None

        class AddOneInplace(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 1
        x = leaf(m, [1.0, 2.0])
        y = Scale.apply(x, 3.0)
        h = x * 2
        r = AddOneInplace.apply(h)
        (y.sum() + (r * r).sum()).backward()
        return y, x.grad, r is h, r, h.grad_fn.name()
    same(f)

    def dirty_leaf(m):
        class AddOneInplace(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g
        AddOneInplace.apply(leaf(m, [1.0]))
    same_error(dirty_leaf)


def test_function_returning_input_as_is():
    def f(m):
        class Ident(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 3
        x = leaf(m, [1.0, 2.0])
        y = Ident.apply(x)
        y.sum().backward()
        return y is x, x.grad, y.requires_grad, x.is_leaf
    same(f)


def test_function_under_no_grad_records_nothing():
    def f(m):
        Cube, _, _ = _make_fns(m)
        x = leaf(m, [1.0, 2.0])
        with m.no_grad():
            y = Cube.apply(x, 1.0)
        return y.requires_grad, y.grad_fn is None, y
    same(f)


def _once_differentiable_square(m):
    """x * x as a custom Function whose backward is marked once_differentiable."""
    from importlib import import_module
    od = import_module(m.__name__ + ".autograd.function").once_differentiable

    class Sq(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @od
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x
    return Sq


def test_once_differentiable():
    def f(m):
        x = leaf(m, [1.0, 3.0])
        (g,) = m.autograd.grad(_once_differentiable_square(m).apply(x).sum(), x)
        return g, g.requires_grad
    same(f)

    def twice(m):
        x = leaf(m, [1.0, 3.0])
        (g,) = m.autograd.grad(_once_differentiable_square(m).apply(x).sum(), x, create_graph=True)
        g.sum().backward()
    same_error(twice)


# ---- gradcheck ----------------------------------------------------------------------------------------------

def _dbl(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return ember.tensor(rng.uniform(0.5, 2.0, size=shape), dtype=ember.float64, requires_grad=True)


def test_gradcheck_on_ops():
    a, b = _dbl(2, 3), _dbl(2, 3, seed=1)
    ga = ember.autograd.gradcheck
    assert ga(lambda x, y: x * y, (a, b))
    assert ga(lambda x, y: x / y, (a, b))
    assert ga(lambda x: x.sum(0).mean(), (a,))
    assert ga(lambda x: x.t().reshape(6).expand(2, 6) * 1.0, (a,))
    assert ga(lambda x, y: (x - y, x + y), (a, b))
    # non-contiguous input
    nc = _dbl(3, 2).detach().t().requires_grad_()
    assert ga(lambda x: x * x, (nc,))


def test_gradgradcheck_on_ops():
    a, b = _dbl(2, 3), _dbl(2, 3, seed=1)
    assert ember.autograd.gradgradcheck(lambda x, y: x * y * x, (a, b))
    assert ember.autograd.gradgradcheck(lambda x, y: x / y, (a, b))


def test_gradcheck_catches_a_wrong_backward():
    class Wrong(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x        # should be 2 * x
    a = _dbl(3)
    assert ember.autograd.gradcheck(Wrong.apply, (a,), raise_exception=False) is False
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        ember.autograd.gradcheck(Wrong.apply, (a,))
    from ember.autograd.gradcheck import GradcheckError
    with pytest.raises(GradcheckError):
        ember.autograd.gradcheck(Wrong.apply, (a,))


def test_gradcheck_custom_function_and_torch_agrees():
    for m in LIBS:
        Cube, SplitTwo, _ = _make_fns(m)
        x = m.tensor([0.5, 1.5, -1.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([2.0, -0.5, 1.0], dtype=m.float64, requires_grad=True)
        assert m.autograd.gradcheck(lambda t: Cube.apply(t, 2.0), (x,))
        assert m.autograd.gradcheck(SplitTwo.apply, (x, y))
        assert m.autograd.gradgradcheck(lambda t: Cube.apply(t, 2.0), (x,))


# ---- anomaly mode -------------------------------------------------------------------------------------------

def test_anomaly_mode_names_the_node_that_made_nan():
    def f(m):
        x = leaf(m, [1.0, 2.0])
        z = m.zeros(2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with m.autograd.detect_anomaly():
                y = x / z          # inf; its backward computes 0 / 0 for the zero gradient below
                (y * 0).sum().backward()
    e, t = same_error(f)
    assert str(t) == "Function 'DivBackward0' returned nan values in its 0th output."


def test_anomaly_mode_sqrt_at_zero():
    def f(m):
        x = leaf(m, [0.0, 4.0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with m.autograd.detect_anomaly():
                (x.sqrt() * 0).sum().backward()
    same_error(f)


def test_anomaly_mode_warns_with_forward_trace_and_switches():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    z = ember.zeros(2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with ember.autograd.detect_anomaly():
            assert ember.autograd.is_anomaly_enabled()
            y = x / z
            with pytest.raises(RuntimeError):
                (y * 0).sum().backward()
    msgs = [str(i.message) for i in w]
    assert any("Anomaly Detection has been enabled" in s for s in msgs)
    assert any("Error detected in DivBackward0" in s and "test_autograd.py" in s for s in msgs), msgs
    assert not ember.autograd.is_anomaly_enabled()
    # without anomaly mode the NaN just flows into .grad, as in torch
    same(lambda m: _nan_grad(m))
    with ember.autograd.set_detect_anomaly(True):
        assert ember.autograd.is_anomaly_enabled()
    assert not ember.autograd.is_anomaly_enabled()

    @ember.autograd.detect_anomaly()
    def inside():
        return ember.autograd.is_anomaly_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert inside()
    assert not ember.autograd.is_anomaly_enabled()


def _nan_grad(m):
    x = leaf(m, [1.0, 2.0])
    y = x / m.zeros(2)
    (y * 0).sum().backward()
    return x.grad


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


# ---- version counter, in-place rules --------------------------------------------------------------------------

def test_inplace_modification_of_saved_input_raises():
    def f(m):
        x = leaf(m, X)
        a = x * 1
        y = a * a          # mul saves its inputs
        a.add_(1)
        y.sum().backward()
    same_error(f)

    def leaf_under_no_grad(m):
        x = leaf(m, X)
        y = x * x
        with m.no_grad():
            x.add_(1)
        y.sum().backward()
    same_error(leaf_under_no_grad)


def test_inplace_modification_of_saved_output_raises():
    def f(m):
        x = leaf(m, X)
        y = x.exp()
        y.add_(1)
        y.sum().backward()
    same_error(f)

    def sin_input(m):
        x = leaf(m, X)
        a = x * 1
        y = a.sin()
        a.add_(1)
        y.sum().backward()
    same_error(sin_input)

    def exp_input_is_not_saved(m):
        x = leaf(m, X)
        a = x * 1
        y = a.exp()            # exp saves its result, not its input
        a.add_(1)
        y.sum().backward()
        return x.grad
    same(exp_input_is_not_saved)


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


# ---- saved tensor hooks -------------------------------------------------------------------------------------

def test_saved_tensors_hooks_pack_and_unpack():
    def f(m):
        calls = []

        def pack(t):
            calls.append(("pack", tuple(t.shape)))
            return t * 1

        def unpack(p):
            calls.append(("unpack", tuple(p.shape)))
            return p
        x = leaf(m, [1.0, 2.0, 3.0])
        w = leaf(m, [0.5, 0.5, 2.0])
        with m.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = x * w
            z = y.exp()
            s = (x + 1).sum()
        packed = list(calls)
        calls.clear()
        (z.sum() + s).backward()
        return packed, sorted(calls), x.grad, w.grad
    same(f)


def test_saved_tensors_hooks_skip_version_check_and_custom_function():
    def f(m):
        x = leaf(m, [1.0, 2.0])
        with m.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda p: p):
            y = x * x
        with m.no_grad():
            x.add_(1)
        y.sum().backward()
        return x.grad
    same(f)

    def fn(m):
        seen = []

        class Sq(m.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.save_for_backward(t)
                return t * t

            @staticmethod
            def backward(ctx, g):
                (t,) = ctx.saved_tensors
                return g * 2 * t
        x = leaf(m, [3.0])
        with m.autograd.graph.saved_tensors_hooks(lambda t: (seen.append("p"), t * 2)[1],
                                                  lambda p: (seen.append("u"), p)[1]):
            y = Sq.apply(x)
        y.backward()
        return seen, x.grad
    same(fn)


def test_disable_saved_tensors_hooks_and_increment_version():
    def f(m):
        with m.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    same_error(f)

    def g(m):
        x = m.zeros(2)
        m.autograd.graph.increment_version(x)
        return x._version
    same(g)
    # the dispatch hook is gone once no saved-tensor hooks are active
    from ember.ops import registry
    with ember.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        assert registry.HOOKS
    assert not registry.HOOKS


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


def test_node_call_returns_formula_grads():
    def f(m):
        x = leaf(m, X)
        w = leaf(m, [1.0, 2.0, 3.0])
        c = m.ones(2, 3)
        y = x * w
        z = c * x
        return y.grad_fn(m.ones(2, 3)), z.grad_fn(m.ones(2, 3))
    same(f)


# ---- autograd.functional -------------------------------------------------------------------------------

def _fns(m):
    def f1(x):
        return x * x * 2 + x.sum()

    def f2(x, y):
        return (x * y).sum(), x * 3 - y

    def scalar(x, y):
        return (x * x * y).sum() + (y * y * y).sum()
    return f1, f2, scalar


def test_functional_jacobian_and_hessian():
    def f(m):
        F = m.autograd.functional
        f1, f2, scalar = _fns(m)
        x = m.tensor([1.0, 2.0, -1.0], dtype=m.float64)
        y = m.tensor([0.5, -2.0, 3.0], dtype=m.float64)
        return [F.jacobian(f1, x), F.jacobian(f2, (x, y)), F.jacobian(lambda a: (a * 2, a.sum()), x),
                F.jacobian(lambda a, b: a * b, (x, y)), F.hessian(lambda a: (a * a * a).sum(), x),
                F.hessian(scalar, (x, y)), F.jacobian(f1, x, vectorize=True),
                F.jacobian(lambda a: a.reshape(3, 1) * m.ones(2), x), x.requires_grad]
    same(f)


def test_functional_products():
    def f(m):
        F = m.autograd.functional
        f1, f2, scalar = _fns(m)
        x = m.tensor([1.0, 2.0, -1.0], dtype=m.float64)
        y = m.tensor([0.5, -2.0, 3.0], dtype=m.float64)
        v = m.tensor([1.0, -1.0, 0.5], dtype=m.float64)
        return [F.vjp(f1, x, v), F.jvp(f1, x, v), F.vjp(f2, (x, y), (m.tensor(2.0, dtype=m.float64), v)),
                F.jvp(f2, (x, y), (v, v)), F.vhp(scalar, (x, y), (v, v)), F.hvp(scalar, (x, y), (v, v)),
                F.vjp(lambda a: a.sum(), x), F.hvp(lambda a: (a * a).sum() * 1, m.tensor([3.0], dtype=m.float64))]
    same(f)


def test_functional_create_graph_and_strict():
    def f(m):
        F = m.autograd.functional
        x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        _, g = F.vjp(lambda a: (a * a * a).sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x)
        j = F.jacobian(lambda a: a * a, x, create_graph=True)
        (jj,) = m.autograd.grad(j.sum(), x)
        return g, gg, j, jj, g.requires_grad, F.jacobian(lambda a: a * 2, x).requires_grad
    same(f)
    same_error(lambda m: m.autograd.functional.jacobian(lambda a, b: a * 2, (m.ones(2), m.ones(2)), strict=True))
    same_error(lambda m: m.autograd.functional.vjp(lambda a: a * 2, m.ones(2)))
    same_error(lambda m: m.autograd.functional.vjp(lambda a: a * 2, m.ones(2), m.ones(3)))
    same_error(lambda m: m.autograd.functional.hessian(lambda a: a * 2, m.ones(2)))
    same_error(lambda m: m.autograd.functional.jacobian(lambda a: a * 2, [m.ones(2)]))
    same(lambda m: m.autograd.functional.jacobian(lambda a, b: a * 2, (m.ones(2), m.ones(2))))


def test_function_mark_dirty_on_a_view():
    def f(m):
        class MulInplace(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                x.mul_(k)
                ctx.mark_dirty(x)
                ctx.k = k
                return x

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None
        x = leaf(m, [[1.0, 2.0], [3.0, 4.0]])
        y = x * 1
        v = y[0]
        r = MulInplace.apply(v, 3.0)
        (y * y).sum().backward()
        return r is v, y, x.grad
    same(f)

    def view_of_leaf(m):
        class Inplace(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g
        x = leaf(m, [1.0, 2.0])
        Inplace.apply(x[0:1])
    same_error(view_of_leaf)


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


def test_function_saving_its_output_double_backward():
    def f(m):
        class Exp(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                r = x.exp()
                ctx.save_for_backward(r)
                return r

            @staticmethod
            def backward(ctx, g):
                (r,) = ctx.saved_tensors
                return g * r
        x = leaf(m, [0.5, -1.0], m.float64)
        y = Exp.apply(x)
        (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x)
        return y, g, gg
    same(f)
