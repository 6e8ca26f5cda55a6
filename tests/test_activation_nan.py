"""Piecewise-linear activations at NaN: values and gradients as torch's (eager, compiled, both masks).

torch's own answer at NaN depends on the tensor's size for some of them (its vectorized loops drop the
gradient of hardtanh/relu6/softshrink/hardshrink at NaN, its scalar tail passes it); the cases here are
long enough (72 elements) to take torch's vectorized path. softshrink/hardshrink are left out: ember
follows torch's scalar rule for them (NaN passes), which torch's vectorized loop does not."""
import numpy as np
import pytest
import torch

import ember

CASES = {
    "threshold": lambda m, t: m.nn.functional.threshold(t, 1.0, -3.0),
    "hardtanh": lambda m, t: m.nn.functional.hardtanh(t, -1.0, 1.0),
    "relu6": lambda m, t: m.nn.functional.relu6(t),
    "relu": lambda m, t: m.relu(t),
    "leaky_relu": lambda m, t: m.nn.functional.leaky_relu(t, 0.1),
    "hardsigmoid": lambda m, t: m.nn.functional.hardsigmoid(t),
}
VALUES = [float("nan"), -7.0, -1.0, 0.0, 0.5, 1.0, 2.0, 6.0, 9.0] * 8


def _torch(name, dtype):
    x = torch.tensor(VALUES, dtype=dtype, requires_grad=True)
    y = CASES[name](torch, x)
    y.backward(torch.arange(1.0, len(VALUES) + 1, dtype=dtype))
    return y.detach().numpy(), x.grad.numpy()


def _ember(name, dtype, compiled):
    x = ember.tensor(VALUES, dtype=dtype, requires_grad=True)
    fn = (lambda t: CASES[name](ember, t))
    y = (ember.compile(fn) if compiled else fn)(x)
    y.backward(ember.arange(1.0, len(VALUES) + 1, dtype=dtype))
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])   # float32 takes the native mask, float64 NumPy's
@pytest.mark.parametrize("name", sorted(CASES))
def test_nan_values_and_gradients_match_torch(name, dtype, compiled):
    ty, tg = _torch(name, getattr(torch, dtype))
    ey, eg = _ember(name, getattr(ember, dtype), compiled)
    np.testing.assert_array_equal(ey, ty)
    np.testing.assert_array_equal(eg, tg)
