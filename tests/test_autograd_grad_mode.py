"""Autograd against torch: grad modes (no_grad, enable_grad, set_grad_enabled, inference_mode) as
contexts, decorators and around generators, and detach / .data.
"""
from __future__ import annotations

from autograd_support import X, leaf, same, same_error


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
