"""Hypothesis drives random shapes, broadcasting, dims and layouts through elementwise and reduction
ops, comparing ember with torch (values, dtypes and gradients)."""
import numpy as np
import torch
from hypothesis import given, settings, strategies as st, HealthCheck

import ember

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def broadcast_pair(draw):
    nd = draw(st.integers(0, 4))
    shape = [draw(st.integers(0, 4)) for _ in range(nd)]
    other = list(shape)
    for i in range(nd):
        if draw(st.booleans()):
            other[i] = 1
    drop = draw(st.integers(0, nd))
    other = other[drop:]
    if draw(st.booleans()):
        shape, other = other, shape
    return tuple(shape), tuple(other)


def _arrays(rng, shapes, dtype, low=-2.0, high=2.0, transpose=False):
    out = []
    for s in shapes:
        a = rng.uniform(low, high, size=s).astype(dtype)
        if transpose and a.ndim >= 2:
            a = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)   # same values, strided
        out.append(a)
    return out


def _check(e, t, rtol=1e-5, atol=1e-6):
    assert tuple(e.shape) == tuple(t.shape)
    assert e.dtype.name == str(t.dtype).replace("torch.", "")
    np.testing.assert_allclose(e.detach().numpy().astype(np.float64), t.detach().numpy().astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


BINARY = {
    "add": lambda m, a, b: a + b,
    "sub": lambda m, a, b: m.sub(a, b, alpha=0.5),
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "maximum": lambda m, a, b: m.maximum(a, b),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b),
    "pow": lambda m, a, b: a.abs().add(0.5) ** b,
    "lerp": lambda m, a, b: m.lerp(a, b, 0.3),
}


@SETTINGS
@given(pair=broadcast_pair(), op=st.sampled_from(sorted(BINARY)), dtype=st.sampled_from(["float32", "float64"]),
       transpose=st.booleans(), seed=st.integers(0, 2**16))
def test_binary_broadcasting_values_and_grads(pair, op, dtype, transpose, seed):
    rng = np.random.default_rng(seed)
    a, b = _arrays(rng, pair, dtype, transpose=transpose)
    if op == "div":
        b = np.where(np.abs(b) < 0.3, 0.7, b).astype(dtype)
    fn = BINARY[op]
    ta, tb = torch.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(b.copy()).requires_grad_()
    ea, eb = ember.tensor(a).requires_grad_(), ember.tensor(b).requires_grad_()
    t_out, e_out = fn(torch, ta, tb), fn(ember, ea, eb)
    _check(e_out, t_out)
    w = rng.standard_normal(tuple(t_out.shape)).astype(dtype)
    (t_out * torch.from_numpy(w)).sum().backward()
    (e_out * ember.tensor(w)).sum().backward()
    tol = 1e-4 if dtype == "float32" else 1e-9
    _check(ea.grad, ta.grad, rtol=tol, atol=tol)
    _check(eb.grad, tb.grad, rtol=tol, atol=tol)


REDUCE = {
    "sum": lambda m, x, d, k: x.sum(dim=d, keepdim=k),
    "mean": lambda m, x, d, k: x.mean(dim=d, keepdim=k),
    "amax": lambda m, x, d, k: x.amax(dim=d, keepdim=k),
    "prod": lambda m, x, d, k: x.prod(dim=d[0], keepdim=k),
    "var": lambda m, x, d, k: x.var(dim=d, keepdim=k, correction=0),
    "logsumexp": lambda m, x, d, k: m.logsumexp(x, dim=d, keepdim=k),
    "norm": lambda m, x, d, k: m.linalg.vector_norm(x, 2, dim=d, keepdim=k),
    "softmax": lambda m, x, d, k: m.softmax(x, dim=d[0]),
    "cumsum": lambda m, x, d, k: m.cumsum(x, dim=d[0]),
}


@st.composite
def shape_and_dims(draw):
    nd = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    dims = draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd, unique_by=lambda d: d % nd))
    return shape, tuple(dims)


@SETTINGS
@given(sd=shape_and_dims(), op=st.sampled_from(sorted(REDUCE)), keepdim=st.booleans(),
       dtype=st.sampled_from(["float32", "float64"]), transpose=st.booleans(), seed=st.integers(0, 2**16))
def test_reductions_over_random_dims(sd, op, keepdim, dtype, transpose, seed):
    shape, dims = sd
    rng = np.random.default_rng(seed)
    (x,) = _arrays(rng, [shape], dtype, transpose=transpose)
    # distinct values so amax/argmax-style gradients are unambiguous
    x = (x + np.arange(x.size, dtype=dtype).reshape(shape) * 1e-3).astype(dtype)
    fn = REDUCE[op]
    tx, ex = torch.from_numpy(x.copy()).requires_grad_(), ember.tensor(x).requires_grad_()
    t_out, e_out = fn(torch, tx, dims, keepdim), fn(ember, ex, dims, keepdim)
    tol = 1e-5 if dtype == "float32" else 1e-10
    _check(e_out, t_out, rtol=tol, atol=tol)
    w = rng.standard_normal(tuple(t_out.shape)).astype(dtype)
    (t_out * torch.from_numpy(w)).sum().backward()
    (e_out * ember.tensor(w)).sum().backward()
    _check(ex.grad, tx.grad, rtol=10 * tol, atol=10 * tol)


UNARY = ["exp", "tanh", "sigmoid", "abs", "sin", "log1p", "sqrt", "erf", "relu", "floor"]


@SETTINGS
@given(shape=st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple), op=st.sampled_from(UNARY),
       dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**16))
def test_unary_random_shapes(shape, op, dtype, seed):
    rng = np.random.default_rng(seed)
    (x,) = _arrays(rng, [shape], dtype, low=0.1 if op in ("sqrt", "log1p") else -2.0)
    tx, ex = torch.from_numpy(x.copy()).requires_grad_(), ember.tensor(x).requires_grad_()
    t_out, e_out = getattr(torch, op)(tx), getattr(ember, op)(ex)
    _check(e_out, t_out)
    t_out.sum().backward()
    e_out.sum().backward()
    _check(ex.grad, tx.grad, rtol=1e-5, atol=1e-6)
