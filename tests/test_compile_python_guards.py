"""Python values a compiled function reads without taking them as arguments (a module's attributes, a
config object's fields, globals and closure variables) are guarded: changing one retraces instead of
replaying the old constant (compiled.py replayed stale values). Compared with eager ember."""
import types

import numpy as np
import pytest

import ember
from compile_support import _reset  # noqa: F401  (fresh compiler state and a private cache per test)

SCALE = 1.0
TABLE = {"shift": 0.0}


def _x(*shape, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


class Head(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(3, 3)
        self.temperature = 1.0
        self.activation = "relu"
        self.cfg = types.SimpleNamespace(bias=0.0, name="head")

    def forward(self, x):
        y = self.lin(x) / self.temperature * SCALE + TABLE["shift"] + self.cfg.bias
        return y.relu() if self.activation == "relu" else y.tanh()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_module_attributes_globals_and_config_fields_retrace(backend):
    global SCALE
    ember.manual_seed(0)
    m = Head()
    cm = ember.compile(m, backend=backend)
    x = _x(4, 3)
    changes = [lambda: None, lambda: setattr(m, "temperature", 2.0), lambda: setattr(m, "activation", "tanh"),
               lambda: globals().__setitem__("SCALE", 3.0), lambda: TABLE.__setitem__("shift", 0.5),
               lambda: setattr(m.cfg, "bias", -1.0), lambda: setattr(m.lin, "in_features", 3)]
    try:
        for k, change in enumerate(changes):
            change()
            for call in range(2):                  # the second call replays the retraced program
                np.testing.assert_allclose(cm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6,
                                           err_msg=f"change {k}, call {call}")
    finally:
        SCALE = 1.0
        TABLE["shift"] = 0.0
    assert ember.compiler.counters["recompiles"] == 5     # one per change of a value (none for the same one)
    assert ember.compiler.counters["fallbacks"] == 0


def test_closure_variables_and_dropout_p():
    state = {"k": 1.0}
    drop = ember.nn.Dropout(0.0)

    def f(x):
        return drop(x) * state["k"]
    cf = ember.compile(f)
    x = _x(5)
    for k in (1.0, 1.0, 4.0, 4.0):
        state["k"] = k
        np.testing.assert_allclose(cf(x).numpy(), x.numpy() * k, rtol=1e-6)
    drop.p = 1.0                                  # an attribute of a module the function closes over
    np.testing.assert_allclose(cf(x).numpy(), np.zeros(5, np.float32))
    assert ember.compiler.counters["recompiles"] == 2


def test_objects_outside_modules_are_not_looked_into():
    """A global object (an optimizer, a logger) that changes every call does not force retraces."""
    log = types.SimpleNamespace(calls=0)

    def f(x):
        log.calls += 1
        return x * 2
    cf = ember.compile(f)
    for _ in range(4):
        cf(ember.ones(2))
    assert log.calls == 1 and ember.compiler.counters["recompiles"] == 0


def test_a_function_that_changes_a_guarded_list_retraces_and_stays_right():
    """Appending a number to a closure list changes a guarded value: each call retraces (the side effect
    happens each time, as in torch) until recompile_limit, then the calls run eagerly."""
    seen = []

    def f(x):
        seen.append(1)
        return x + len(seen)
    cf = ember.compile(f)
    with pytest.warns(UserWarning, match="recompile_limit"):
        for n in range(1, 12):
            assert cf(ember.zeros(1)).item() == n
    assert len(seen) == 11
