"""Autograd against torch: gradcheck / gradgradcheck, anomaly mode and autograd.functional (jacobian,
hessian, vjp, jvp, vhp, hvp).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

from autograd_support import leaf, same, same_error, unary_function


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
    Wrong = unary_function(ember, lambda x: x * x, lambda x, g: g * x, "Wrong", save=True)  # should be 2 * x
    a = _dbl(3)
    assert ember.autograd.gradcheck(Wrong.apply, (a,), raise_exception=False) is False
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        ember.autograd.gradcheck(Wrong.apply, (a,))
    from ember.autograd.gradcheck import GradcheckError
    with pytest.raises(GradcheckError):
        ember.autograd.gradcheck(Wrong.apply, (a,))


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
    assert any("Error detected in DivBackward0" in s and "test_autograd_tools.py" in s for s in msgs), msgs
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


# ---- autograd.functional -------------------------------------------------------------------------------

def _fns(m):
    """autograd.functional, three functions to differentiate and three float64 inputs, for either library."""
    def f1(x):
        return x * x * 2 + x.sum()

    def f2(x, y):
        return (x * y).sum(), x * 3 - y

    def scalar(x, y):
        return (x * x * y).sum() + (y * y * y).sum()
    x, y, v = (m.tensor(d, dtype=m.float64) for d in ([1.0, 2.0, -1.0], [0.5, -2.0, 3.0], [1.0, -1.0, 0.5]))
    return m.autograd.functional, (f1, f2, scalar), (x, y, v)


def test_functional_jacobian_and_hessian():
    def f(m):
        F, (f1, f2, scalar), (x, y, _) = _fns(m)
        return [F.jacobian(f1, x), F.jacobian(f2, (x, y)), F.jacobian(lambda a: (a * 2, a.sum()), x),
                F.jacobian(lambda a, b: a * b, (x, y)), F.hessian(lambda a: (a * a * a).sum(), x),
                F.hessian(scalar, (x, y)), F.jacobian(f1, x, vectorize=True),
                F.jacobian(lambda a: a.reshape(3, 1) * m.ones(2), x), x.requires_grad]
    same(f)


def test_functional_products():
    def f(m):
        F, (f1, f2, scalar), (x, y, v) = _fns(m)
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
