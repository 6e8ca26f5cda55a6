"""Autograd against torch: tensor hooks (leaf, non-leaf, post-accumulate), the Node API (names,
next_functions, node hooks, calling a node) and saved-tensor hooks.
"""
from __future__ import annotations

import ember

from autograd_support import X, leaf, same, same_error, unary_function


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


def test_node_call_returns_formula_grads():
    def f(m):
        x = leaf(m, X)
        w = leaf(m, [1.0, 2.0, 3.0])
        c = m.ones(2, 3)
        y = x * w
        z = c * x
        return y.grad_fn(m.ones(2, 3)), z.grad_fn(m.ones(2, 3))
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

        Sq = unary_function(m, lambda t: t * t, lambda t, g: g * 2 * t, "Sq", save=True)
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
