"""Autograd against torch: custom ``autograd.Function`` (ctx API, needs_input_grad, non-differentiable
outputs, materialize_grads, mark_dirty, setup_context style, once_differentiable, double backward,
gradcheck of custom Functions).
"""
from __future__ import annotations

from autograd_support import LIBS, leaf, same, same_error, unary_function


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


def _dirty_function(m, write, backward=lambda g: g):
    """A custom Function that writes into its input (``write(x)``), marks it dirty and returns it."""
    class Inplace(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            write(x)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return backward(g)
    return Inplace


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
        Bad = unary_function(m, lambda x: x * 2, lambda g: m.ones(5))
        Bad.apply(leaf(m, [1.0, 2.0])).sum().backward()
    same_error(wrong_shape)

    def saved_after_free(m):
        Save = unary_function(m, lambda x: x * 2, lambda x, g: g * 2, save=True)
        y = Save.apply(leaf(m, [1.0])).sum()
        y.backward()
        y.backward()
    same_error(saved_after_free)

    def modified_saved(m):
        Save = unary_function(m, lambda x: x * 2, lambda x, g: g * x, save=True)
        a = leaf(m, [1.0]) * 1
        y = Save.apply(a)
        a.add_(1)
        y.sum().backward()
    same_error(modified_saved, prefix=True)


def test_function_without_saved_tensors_can_backward_twice():
    def f(m):
        Double = unary_function(m, lambda x: x * 2, lambda g: g * 2, "Double")
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

        AddOneInplace = _dirty_function(m, lambda x: x.add_(1), lambda g: g * 1)
        x = leaf(m, [1.0, 2.0])
        y = Scale.apply(x, 3.0)
        h = x * 2
        r = AddOneInplace.apply(h)
        (y.sum() + (r * r).sum()).backward()
        return y, x.grad, r is h, r, h.grad_fn.name()
    same(f)

    def dirty_leaf(m):
        AddOneInplace = _dirty_function(m, lambda x: x.add_(1))
        AddOneInplace.apply(leaf(m, [1.0]))
    same_error(dirty_leaf)


def test_function_returning_input_as_is():
    def f(m):
        Ident = unary_function(m, lambda x: x, lambda g: g * 3, "Ident")
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
    return unary_function(m, lambda x: x * x, lambda x, g: g * 2 * x, "Sq", save=True, wrap=od)


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


def test_gradcheck_custom_function_and_torch_agrees():
    for m in LIBS:
        Cube, SplitTwo, _ = _make_fns(m)
        x = m.tensor([0.5, 1.5, -1.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([2.0, -0.5, 1.0], dtype=m.float64, requires_grad=True)
        assert m.autograd.gradcheck(lambda t: Cube.apply(t, 2.0), (x,))
        assert m.autograd.gradcheck(SplitTwo.apply, (x, y))
        assert m.autograd.gradgradcheck(lambda t: Cube.apply(t, 2.0), (x,))


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
        Inplace = _dirty_function(m, lambda x: x.mul_(2))
        x = leaf(m, [1.0, 2.0])
        Inplace.apply(x[0:1])
    same_error(view_of_leaf)


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
