"""ember.autograd.forward_ad (dual_level, make_dual, unpack_dual) against torch's forward-mode AD:
tangents of elementwise ops, reductions, matmul, softmax, a small network with parameters, several duals,
backward through a tangent, and torch's errors."""
import importlib

import numpy as np
import pytest
import torch

import ember

RNG = np.random.RandomState(0)
X = RNG.randn(3, 4)
T = RNG.randn(3, 4)
W = RNG.randn(4, 2)

FUNCS = {
    "elementwise": lambda lib, d: d.sin() * d.exp() + d / (1 + d * d) - d.tanh() ** 3,
    "log_sqrt": lambda lib, d: (d * d + 1).log() + (d.abs() + 0.5).sqrt(),
    "broadcast": lambda lib, d: d * lib.tensor(X[0]).to(d.dtype) + d.sum(0, keepdim=True) - d.mean(1, keepdim=True),
    "matmul": lambda lib, d: d @ lib.tensor(W).to(d.dtype) @ lib.tensor(W).to(d.dtype).t() + d @ d.t() @ d,
    "softmax": lambda lib, d: lib.softmax(d @ lib.tensor(W).to(d.dtype), 1) * lib.sigmoid(d).sum(),
    "reductions": lambda lib, d: lib.stack([d.sum(), d.prod(), d.norm(), d.max(), d.var()]),
}


def fwad(lib):
    return importlib.import_module(lib.__name__ + ".autograd.forward_ad")


def _run(lib, fn, dtype):
    fw = fwad(lib)
    with fw.dual_level():
        d = fw.make_dual(lib.tensor(X.astype(dtype)), lib.tensor(T.astype(dtype)))
        p, t = fw.unpack_dual(fn(lib, d))
        return p.detach().numpy(), t.detach().numpy()


@pytest.mark.parametrize("name", sorted(FUNCS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tangents_match_torch(name, dtype):
    (tp, tt), (ep, et) = _run(torch, FUNCS[name], dtype), _run(ember, FUNCS[name], dtype)
    tol = 1e-10 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(ep, tp, rtol=tol, atol=tol)
    np.testing.assert_allclose(et, tt, rtol=tol, atol=tol)


def _network(lib):
    fw = fwad(lib)
    lib.manual_seed(0)
    layer = lib.nn.Linear(4, 3).double()
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(RNG_W))
        layer.bias.copy_(lib.tensor(RNG_B))
    x, v = lib.tensor(X), lib.tensor(T)
    with fw.dual_level():
        d = fw.make_dual(x, v)
        y = lib.tanh(layer(d)).pow(2).sum(1)
        p, t = fw.unpack_dual(y)
        (t.sum() + p.sum()).backward()           # backward through the tangent and the primal
    return t.detach().numpy(), layer.weight.grad.numpy(), layer.bias.grad.numpy()


RNG_W = np.random.RandomState(1).randn(3, 4)
RNG_B = np.random.RandomState(2).randn(3)


def test_network_with_parameters_and_backward_through_the_tangent():
    for a, b in zip(_network(ember), _network(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_several_duals_and_unrelated_tensors():
    out = {}
    for lib in (torch, ember):
        fw = fwad(lib)
        with fw.dual_level():
            a = fw.make_dual(lib.tensor(X), lib.tensor(T))
            b = fw.make_dual(lib.tensor(W.T.copy()), lib.tensor(np.ones((2, 4))))
            y = (a @ b.t()).exp()
            plain = lib.tensor(X) * 2
            assert fw.unpack_dual(plain).tangent is None
            assert fw.unpack_dual(a).tangent is not None
            np.testing.assert_array_equal(fw.unpack_dual(a).tangent.numpy(), T)
            out[lib.__name__] = fw.unpack_dual(y).tangent.detach().numpy()
        assert fw.unpack_dual(y).tangent is None           # the level is gone
    np.testing.assert_allclose(out["ember"], out["torch"], rtol=1e-10)


def test_errors_like_torch():
    fw = fwad(ember)
    with pytest.raises(RuntimeError, match="no level exists"):
        fw.make_dual(ember.ones(2), ember.ones(2))
    with fw.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fw.make_dual(ember.ones(2), ember.ones(3))
        with pytest.raises(ValueError, match="floating point or complex"):
            fw.make_dual(ember.ones(2, dtype=ember.int64), ember.ones(2, dtype=ember.int64))
    assert fw.unpack_dual(ember.ones(2)).tangent is None
    with pytest.raises(RuntimeError, match="not the last one"):
        fw.exit_dual_level()


def test_backward_written_in_numpy_refuses_instead_of_a_wrong_tangent():
    class NumpySquare(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return ember.tensor(x.detach().numpy() ** 2)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return ember.tensor(2 * x.detach().numpy() * g.detach().numpy())

    fw = fwad(ember)
    with fw.dual_level():
        d = fw.make_dual(ember.tensor(X), ember.tensor(T))
        with pytest.raises(RuntimeError, match="not differentiable"):
            fw.unpack_dual(NumpySquare.apply(d) * 2)


def test_unpacked_dual_tensor_is_a_named_tuple():
    fw = fwad(ember)
    with fw.dual_level() as level:
        assert level == 0
        d = fw.make_dual(ember.ones(2), ember.full((2,), 3.0))
        r = fw.unpack_dual(d * 2)
        assert isinstance(r, fw.UnpackedDualTensor) and r._fields == ("primal", "tangent")
        np.testing.assert_array_equal(r.tangent.numpy(), [6.0, 6.0])
