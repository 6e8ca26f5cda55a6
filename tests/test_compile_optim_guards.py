"""The optimizer-state guard of a compiled training step: one guard per parameter group (state
initialised, gradient present, per parameter). After replays that hit it, a change to either must
still retrace and give eager's numbers."""
import numpy as np
import pytest

import ember
from ember.compiler import api as _api


def _model_and_data(seed=0):
    ember.manual_seed(seed)
    model = ember.nn.Sequential(ember.nn.Linear(6, 5), ember.nn.ReLU(), ember.nn.Linear(5, 3))
    x = ember.randn(8, 6)
    y = ember.randn(8, 3)
    return model, x, y


def _opt(kind, params):
    if kind == "sgd":
        return ember.optim.SGD(params, lr=0.1, momentum=0.9)
    return ember.optim.Adam(params, lr=0.01)


def _grads(model, x, y, skip=None):
    """Gradients set outside the compiled step (eager); ``skip``: a parameter left without one."""
    for p in model.parameters():
        p.grad = None
    ((model(x) - y) ** 2).mean().backward()
    if skip is not None:
        list(model.parameters())[skip].grad = None


def _counts():
    return (_api.counters["replays"], _api.counters["recompiles"], len(_api.counters["recompile_reasons"]))


def _step(opt):
    opt.step()


def _run(kind, compiled, changes):
    """Steps of ``opt.step()`` with gradients made eagerly; ``changes[i]`` runs before step i."""
    model, x, y = _model_and_data()
    opt = _opt(kind, model.parameters())
    step = ember.compile(_step) if compiled else _step
    for i in range(len(changes)):
        _grads(model, x, y, skip=changes[i])
        step(opt)
    return [p.detach().numpy().copy() for p in model.parameters()], step


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_one_guard_per_group(kind):
    _, step = _run(kind, True, [None, None, None])
    progs = [e.program for e in step.entries]
    opt_guards = [g for p in progs for g in p.extra_guards if "state dicts" in g[0]]
    assert len(opt_guards) == len(progs)          # one per program (one group), not two per parameter
    assert len(opt_guards[-1][2][-1]) == 4        # has a gradient, for each of the 4 parameters


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_missing_gradient_after_replays_retraces(kind):
    changes = [None, None, None, 2, 2, None]
    c0 = _counts()
    got, step = _run(kind, True, changes)
    want, _ = _run(kind, False, changes)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    c1 = _counts()
    assert c1[0] - c0[0] >= 2 and c1[1] - c0[1] >= 1       # replays hit the guard, then it failed
    reasons = [r for r in _api.counters["recompile_reasons"][c0[2]:] if r]
    # SGD reads no state for the parameter: its group guard fails; Adam's lifted .grad guard fails first
    want_guard = "state dicts" if kind == "sgd" else ".grad of a tensor"
    assert any(want_guard in r for r in reasons), reasons


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_cleared_state_after_replays_retraces(kind):
    model, x, y = _model_and_data()
    opt = _opt(kind, model.parameters())
    ref_model, _, _ = _model_and_data()
    ref_opt = _opt(kind, ref_model.parameters())
    step = ember.compile(_step)
    c0 = _counts()
    for i in range(6):
        if i == 3:                                 # after replays: the state is gone, as on a fresh optimizer
            opt.state.clear()
            ref_opt.state.clear()
        for m, o in ((model, opt), (ref_model, ref_opt)):
            _grads(m, x, y)
            (step if o is opt else _step)(o)
    for p, q in zip(model.parameters(), ref_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    c1 = _counts()
    assert c1[0] - c0[0] >= 2 and c1[1] - c0[1] >= 1
