"""``ember.compile(backend="eager")``: the captured program replayed op by op through the dispatcher, so
autograd records the replay as it records eager code. The replay must rebuild the same autograd history:
values used through ``detach()``, outputs of view ops (whose in-place writes rebase their base) and
arguments that start requiring grad when a grad-requiring value is written into them.

Each case runs eagerly and compiled, on the capturing call and on replays with new values, and compares
outputs, whether they require grad, the inputs' gradients (through a random cotangent) and the inputs'
values after the call. (The other backends run the same cases: their backward comes from the trace.)
"""
import numpy as np
import pytest

import ember
from ember.compiler import counters

from compile_support import BACKENDS, _reset, _close  # noqa: F401  (fresh compiler state per test)


def _inputs(specs, call):
    r = np.random.default_rng([7, call])
    xs = []
    for shape, rg in specs:
        t = ember.from_numpy(r.standard_normal(shape).astype(np.float32))
        xs.append(t.requires_grad_() if rg else t)
    return xs, r


def _run(g, specs, call):
    xs, r = _inputs(specs, call)
    outs = g(*xs)
    diff = [o for o in outs if o.requires_grad]
    if diff:
        ember.autograd.backward(diff, [ember.from_numpy(r.standard_normal(tuple(o.shape)).astype(np.float32))
                                       for o in diff])
    return xs, outs


def _check(f, specs, backend, calls=3, compiled=True):
    cf = ember.compile(f, backend=backend)
    for call in range(calls):       # call 0 captures; the others replay
        (ex, eo), (cx, co) = _run(f, specs, call), _run(cf, specs, call)
        assert len(eo) == len(co)
        for i, (e, c) in enumerate(zip(eo, co)):
            assert e.requires_grad == c.requires_grad, f"call {call}: output {i} requires_grad"
            _close(e, c, f"call {call}: output {i}")
        for i, (e, c) in enumerate(zip(ex, cx)):
            assert (e.grad is None) == (c.grad is None), \
                f"call {call}: input {i}.grad: eager {e.grad is not None}, compiled {c.grad is not None}"
            if e.grad is not None:
                _close(e.grad, c.grad, f"call {call}: input {i}.grad")
            assert e.requires_grad == c.requires_grad, f"call {call}: input {i} requires_grad after the call"
            _close(e, c, f"call {call}: input {i} after the call")
    if compiled:
        assert counters["captures"] == 1 and counters["replays"] == calls - 1
    else:                           # the trace was refused: the function runs eagerly
        assert counters["fallbacks"] == 1 and counters["replays"] == 0
    return cf


# ---- detach() ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_output_has_no_gradient(backend):
    def f(x):
        v = x.softmax(-1).detach()
        return (v,)
    _check(f, [((3, 4), True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_operand_is_constant(backend):
    def f(x):
        v = x.mean(1)
        return (v.detach() * v,)            # d/dx = v.detach() * dv/dx, not 2 v dv/dx
    _check(f, [((3, 4), True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_operand_of_cat(backend):
    def f(x4, x3):
        v = ember.cat([x3, x4], dim=0)
        return (v.detach() * v,)
    _check(f, [((1, 2), False), ((2, 2), True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_intermediate_returned_with_itself(backend):
    def f(x):
        v = x * 2
        return (v.detach(), v)
    cf = _check(f, [((2, 3), True)], backend)
    d, v = cf(ember.randn(2, 3).requires_grad_())
    assert d is not v and not d.requires_grad and v.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_write_through_detached_alias_keeps_history(backend):
    def f(x):
        v = x * 2
        d = v.detach()
        d.mul_(0.5)                         # changes v's values, not its history
        return (v * 3,)
    _check(f, [((4,), True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_write_gives_detached_alias_its_own_history(backend):
    def f(x0, x3):
        v = x0 * 2
        d = v.detach()
        d.add_(x3)                          # d's history: x3 only; v keeps its own (and d's values)
        return (d, v, d * v)
    # (aot_eager, inductor: one buffer for v and d in the compiled forward: the trace is refused)
    _check(f, [((3,), True), ((3,), True)], backend, compiled=backend == "eager")


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_detach_inside_a_captured_backward(backend):
    def f(x):
        y = x * 2
        loss = (y.detach() * y).sum()
        loss.backward()                     # x.grad = 2 y, not 4 y
        return (x.grad * 1,)
    cf = ember.compile(f, backend=backend)
    for call in range(3):
        x = ember.randn(5).requires_grad_()
        x2 = ember.from_numpy(x.detach().numpy().copy()).requires_grad_()
        _close(cf(x2)[0], f(x)[0], f"call {call}: the returned gradient")
        _close(x2.grad, x.grad, f"call {call}: x.grad")
    assert counters["captures"] == 1 and counters["replays"] == 2


# ---- in-place writes into intermediates and their views ---------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_setitem_constant_into_intermediate(backend):
    def f(x):
        v = x / 4
        v[:, 1:8] = 0.5                     # no gradient reaches x there
        return (v,)
    _check(f, [((2, 3, 1), True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_op_on_view_of_matmul(backend):
    def f(x3, x2):
        v = x3 @ x2
        v[1:].neg_()
        return (v,)
    _check(f, [((3, 4), True), ((4, 5), True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_op_on_view_of_view(backend):
    def f(x):
        v = x * 3
        v.t()[0].mul_(2)                    # a view of a view: the write rebases v
        return (v.sum(0),)
    _check(f, [((3, 2), True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_setitem_constant_into_intermediate_sum(backend):
    def f(x):
        v = x.sum(dim=(-1,), keepdim=True)
        v[0:1] = 0.5
        return (v,)
    _check(f, [((1,), True)], backend)


# ---- a grad-requiring value written into an argument ----------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_write_makes_argument_require_grad(backend):
    def f(x2, x5):
        x2[6:29] = x5                       # an empty region: x5.grad is zeros, x2 requires grad
        return (x2,)
    _check(f, [((1, 1), False), ((1, 1), True)], backend)


@pytest.mark.parametrize("backend", ["eager"])  # (aot_eager, inductor: the argument keeps requires_grad=False)
def test_write_makes_argument_require_grad(backend):
    def f(x2, x5):
        x2[0:1] = x5 * 2
        return (x2 * x2,)
    _check(f, [((3, 2), False), ((1, 2), True)], backend)
