"""biject_to / transform_to and the Softmax, StickBreaking and Independent transforms against torch: the
transform chosen per constraint, its values, support membership, inverse and log |det J|."""
import numpy as np
import pytest
import torch

import ember


def _program(lib):
    D = lib.distributions
    C = D.constraints
    x = lib.tensor(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32))
    out = []
    for c in [C.real, C.positive, C.nonnegative, C.greater_than(1.5), C.less_than(2.0), C.unit_interval,
              C.interval(-1.0, 3.0), C.simplex, C.real_vector, C.independent(C.positive, 1),
              C.half_open_interval(0.0, 2.0)]:
        for reg in (D.biject_to, D.transform_to):
            t = reg(c)
            y = t(x)
            row = [type(t).__name__, np.round(y.numpy(), 4).tolist(), bool(c.check(y).all())]
            if t.bijective:
                row += [np.round(t.inv(y).numpy(), 3).tolist(), np.round(t.log_abs_det_jacobian(x, y).numpy(), 4).tolist()]
            out.append(row)
    with pytest.raises(NotImplementedError, match="Cannot transform"):
        D.biject_to(C.lower_cholesky)
    return out


def test_constraint_registry_matches_torch():
    assert _program(ember) == _program(torch)


def test_transform_to_gives_a_trainable_constrained_parameter():
    """The variational-inference idiom: an unconstrained leaf mapped onto the simplex, gradients flow."""
    D = ember.distributions
    raw = ember.zeros(4, requires_grad=True)
    probs = D.transform_to(D.constraints.simplex)(raw)
    loss = -D.Categorical(probs=probs).log_prob(ember.tensor(2))
    loss.backward()
    assert raw.grad is not None and float(raw.grad[2]) < 0
    sb = D.biject_to(D.constraints.simplex)
    assert sb.forward_shape((5, 3)) == (5, 4) and sb.inverse_shape((5, 4)) == (5, 3)
