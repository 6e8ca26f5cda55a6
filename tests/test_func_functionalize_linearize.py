"""torch.func.functionalize and torch.func.linearize against torch: values, input mutations kept,
outputs that never alias inputs, the JVPs of linearize's function, and the errors."""
import numpy as np
import pytest
import torch

import ember
from oracle import same_error


def _mutating(x):
    y = x.clone()
    y.add_(1)
    x.mul_(2)
    return y.view(-1), x[0], x


@pytest.mark.parametrize("remove", ["mutations", "mutations_and_views"])
def test_functionalize_matches_torch(remove):
    def fn(L):
        x = L.arange(4.0).reshape(2, 2)
        a, b, c = L.func.functionalize(_mutating, remove=remove)(x)
        return a.numpy(), b.numpy(), c.numpy(), x.numpy().copy(), b.data_ptr() == x.data_ptr(), c is x
    t, e = fn(torch), fn(ember)
    for a, b in zip(t[:4], e[:4]):
        np.testing.assert_array_equal(b, a)
    assert t[4:] == e[4:] == (False, False)


def test_functionalize_keeps_gradients():
    def fn(L):
        w = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = L.func.functionalize(lambda v: (v * 2).exp().sum())(w)
        out.backward()
        return w.grad.numpy()
    np.testing.assert_allclose(fn(ember), fn(torch), rtol=1e-6)


def test_functionalize_bad_remove_matches_torch():
    same_error(lambda L: L.func.functionalize(_mutating, remove="views"))


def test_linearize_matches_torch():
    def g(x, y):
        return (x.sin() * y).sum(0), x * 2

    def fn(L):
        out, jf = L.func.linearize(g, L.tensor([1.0, 2.0]), L.tensor([3.0, 4.0]))
        t1 = jf(L.tensor([1.0, 0.0]), L.tensor([0.0, 1.0]))
        t2 = jf(L.tensor([0.5, -1.0]), L.tensor([2.0, 0.0]))
        out2, jf2 = L.func.linearize(L.sin, L.tensor([1.0, 2.0]))
        return [o.numpy() for o in out] + [t.numpy() for t in t1 + t2] + [out2.numpy(), jf2(L.ones(2)).numpy(),
                                                                         out[0].requires_grad]
    for a, b in zip(fn(torch), fn(ember)):
        np.testing.assert_allclose(b, a, rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda L: L.func.linearize(L.sin, L.tensor([1.0, 2.0]))[1](L.ones(3)),
    lambda L: L.func.linearize(L.sin, L.tensor([1.0, 2.0]))[1](L.tensor([1, 1])),
])
def test_linearize_errors_match_torch(call):
    same_error(call)
