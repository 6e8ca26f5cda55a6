"""A captured Adam/AdamW step records one adam_update op per parameter (ember/ops/fused_optim.py) instead of
its ~20 elementwise ops: the same results as the op-by-op trace (the interpreter's NumPy kernel and the
native code from its decomposition, decompose_optim.py), and as eager within float32 rounding."""
import numpy as np
import pytest

import ember
from ember.compiler import optim_capture


def _run(opt_name, backend, fused, steps=3, **opt_kw):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.GELU(), ember.nn.Linear(16, 4))
    opt = getattr(ember.optim, opt_name)(model.parameters(), lr=0.01, **opt_kw)
    x = ember.randn(32, 8)
    y = ember.randint(0, 4, (32,))

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    fn = step if backend is None else ember.compile(step, backend=backend)
    old = optim_capture.FUSED
    optim_capture.FUSED = fused
    try:
        losses = [float(fn(model, opt, x, y)) for _ in range(steps)]
    finally:
        optim_capture.FUSED = old
    params = [p.detach().numpy().copy() for p in model.parameters()]
    states = [s["exp_avg_sq"].numpy().copy() for s in opt.state.values()]
    return losses, params, states, fn


@pytest.mark.parametrize("opt_name,kw", [("AdamW", {"weight_decay": 0.05}), ("Adam", {"weight_decay": 0.1}),
                                         ("Adam", {})])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_fused_update_matches_the_op_by_op_trace_and_eager(opt_name, kw, backend):
    fused = _run(opt_name, backend, True, **kw)
    by_op = _run(opt_name, backend, False, **kw)
    eager = _run(opt_name, None, True, **kw)
    assert fused[0] == by_op[0]
    for a, b in zip(fused[1] + fused[2], by_op[1] + by_op[2]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(fused[0], eager[0], rtol=1e-5)
    for a, b in zip(fused[1] + fused[2], eager[1] + eager[2]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    nodes = [n for g in fused[3].entries[0].program.graphs for n in g.nodes]
    updates = [n for n in nodes if getattr(getattr(n, "op", None), "name", "") == "adam_update"]
    assert len(updates) == 4            # one per parameter (two Linear layers: weight and bias)
    nodes = [n for g in by_op[3].entries[0].program.graphs for n in g.nodes]
    assert not any(getattr(getattr(n, "op", None), "name", "") == "adam_update" for n in nodes)


def test_amsgrad_stays_op_by_op():
    losses, params, _, fn = _run("Adam", "aot_eager", True, amsgrad=True)
    names = {getattr(getattr(n, "op", None), "name", "") for g in fn.entries[0].program.graphs for n in g.nodes}
    assert "adam_update" not in names and "maximum" in names
    eager = _run("Adam", None, True, amsgrad=True)
    np.testing.assert_allclose(losses, eager[0], rtol=1e-5)


def test_fused_adam_functions_check_their_arguments():
    p, g, m, v = (ember.zeros(3) for _ in range(4))
    s = ember.tensor(1.0)
    with pytest.raises(NotImplementedError, match="amsgrad"):
        ember._fused_adam_([p], [g], [m], [v], [], [s], lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0,
                           eps=1e-8, amsgrad=True, maximize=False)
    with pytest.raises(RuntimeError, match="same length"):
        ember._fused_adamw_([p], [g], [m], [], [], [s], lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0,
                            eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match="one shape"):
        ember._fused_adamw_([p], [ember.zeros(4)], [m], [v], [], [s], lr=0.1, beta1=0.9, beta2=0.99,
                            weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
