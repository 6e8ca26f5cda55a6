"""What programs written for torch.compile call around compiled code: torch.compiler / torch._dynamo /
torch._inductor names, a compiled model called inside a compiled step, gradient hooks on the inputs and
parameters of a compiled module. Compared with eager ember (and torch where the value is torch's)."""
import types

import numpy as np
import pytest
import torch

import ember
from compile_support import _reset  # noqa: F401  (fresh compiler state and a private cache per test)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _linear(seed=1):
    m = ember.nn.Linear(4, 3)
    with ember.no_grad():
        m.weight.copy_(ember.from_numpy(_x(3, 4, seed=seed)))
        m.bias.copy_(ember.from_numpy(_x(3, seed=seed + 1)))
    return m


@pytest.mark.parametrize("nonleaf", [False, True])
def test_input_and_parameter_hooks_apply_once_at_replay(nonleaf):
    """A hook on an input or a parameter runs when the engine hands it the compiled backward's gradient;
    the AOT backward must not trace it in as well (it applied twice on replays)."""
    grads = {}
    for compiled in (False, True):
        ember.compiler.reset()
        m = _linear()
        m.weight.register_hook(lambda g: g * 3)
        cm = ember.compile(m) if compiled else m
        x0 = ember.from_numpy(_x(2, 4)).requires_grad_(True)
        seen = []
        for _ in range(3):
            x0.grad = None
            m.weight.grad = None
            x = x0 * 1.5 if nonleaf else x0
            if nonleaf:
                x.retain_grad()
            h = x.register_hook(lambda g: g * 2)
            (cm(x) ** 2).sum().backward()
            h.remove()
            seen.append((x0.grad.numpy().copy(), x.grad.numpy().copy(), m.weight.grad.numpy().copy()))
        grads[compiled] = seen
    assert ember.compiler.counters["replays"] >= 1
    for call, (eager, comp) in enumerate(zip(grads[False], grads[True])):
        for what, a, b in zip(("input leaf", "input", "weight"), eager, comp):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=f"call {call}: {what}")


def test_compiled_model_inside_compiled_step_is_inlined():
    """``model = compile(model)`` then a compiled training step calling it: torch inlines the callee;
    ember traced the step and refused the nested capture."""
    def run(compiled):
        ember.compiler.reset()
        ember.manual_seed(0)
        m = ember.nn.Sequential(_linear(), ember.nn.ReLU(), ember.nn.Linear(3, 2))
        with ember.no_grad():
            m[2].weight.copy_(ember.from_numpy(_x(2, 3, seed=5)))
        cm = ember.compile(m) if compiled else m
        opt = ember.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = ember.nn.functional.mse_loss(cm(x), y)
            loss.backward()
            opt.step()
            return loss
        st = ember.compile(step) if compiled else step
        losses = [st(ember.from_numpy(_x(3, 4, seed=i)), ember.from_numpy(_x(3, 2, seed=i + 9))).item()
                  for i in range(4)]
        return losses, [p.detach().numpy().copy() for p in m.parameters()]
    (le, pe), (lc, pc) = run(False), run(True)
    assert ember.compiler.counters["fallbacks"] == 0 and ember.compiler.counters["replays"] >= 2
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_is_compiling_true_only_while_tracing():
    log = types.SimpleNamespace(seen=[])      # (an object: not guarded, so appending does not retrace)

    def f(x):
        log.seen.append(ember.compiler.is_compiling())
        return x.sin() if ember.compiler.is_compiling() else x.cos()
    cf = ember.compile(f)
    x = ember.from_numpy(_x(3))
    for _ in range(3):
        np.testing.assert_allclose(cf(x).numpy(), np.sin(x.numpy()), rtol=1e-6)
    assert log.seen == [True] and ember.compiler.is_compiling() is False
    assert ember._dynamo.is_compiling is ember.compiler.is_compiling
    assert ember.compiler.is_dynamo_compiling() is False and ember.compiler.is_exporting() is False


@pytest.mark.parametrize("spelling", ["compiler", "dynamo", "call"])
def test_disabled_function_makes_the_call_eager_and_counts_it(spelling):
    """A disable'd function runs on every call (its side effects too): the compiled call runs eagerly."""
    calls = []

    def log_stats(x):
        calls.append(float(x.mean()))
        return x + 1
    if spelling == "compiler":
        side = ember.compiler.disable(log_stats)
    elif spelling == "dynamo":
        side = ember._dynamo.disable(recursive=False)(log_stats)
    else:
        side = ember.compiler.disable(log_stats, reason="logging")

    def f(x):
        return side(x * 2).relu()
    cf = ember.compile(f)
    for i in range(3):
        x = ember.from_numpy(_x(4, seed=0))
        np.testing.assert_allclose(cf(x).numpy(), np.maximum(x.numpy() * 2 + 1, 0), rtol=1e-6)
    assert len(calls) == 3
    assert ember.compiler.counters["fallbacks"] == 1
    assert "log_stats" in ember.compiler.counters["fallback_reasons"][0]
    assert side(ember.ones(1)).item() == 2.0            # outside compiled code: the function itself
    with pytest.raises(ember.compiler.GraphBreakError, match="log_stats"):
        ember.compile(f, fullgraph=True)(ember.ones(2))
    assert torch.compiler.disable(lambda: 3)() == 3     # (torch's: the same call shape)


def test_graph_break_is_a_noop_except_under_fullgraph():
    def f(x):
        y = x * 2
        ember._dynamo.graph_break()
        return y + 1
    x = ember.from_numpy(_x(3))
    cf = ember.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(cf(x).numpy(), x.numpy() * 2 + 1, rtol=1e-6)
    assert ember.compiler.counters["fallbacks"] == 0
    with pytest.raises(ember.compiler.GraphBreakError, match="graph_break"):
        ember.compile(f, fullgraph=True)(x)


def test_set_stance_force_eager():
    log = types.SimpleNamespace(runs=0)      # (an object: not guarded, so counting does not retrace)

    def f(x):
        log.runs += 1
        return x + 1
    cf = ember.compile(f)
    x = ember.ones(2)
    with ember.compiler.set_stance("force_eager"):
        cf(x)
        cf(x)
    assert log.runs == 2 and ember.compiler.counters["captures"] == 0
    cf(x)
    cf(x)
    assert log.runs == 3                       # default again: traced once, then replayed
    ember.compiler.set_stance("force_eager")
    try:
        cf(x)
        assert log.runs == 4
    finally:
        ember.compiler.set_stance("default")

    @ember.compiler.set_stance("force_eager")
    def g():
        return cf(x)
    g()
    assert log.runs == 5
    cf(x)
    assert log.runs == 5
    with pytest.raises(NotImplementedError, match="fail_on_recompile"):
        ember.compiler.set_stance("fail_on_recompile")


def test_markers_and_backends():
    def f(x):
        return x * 2
    assert ember.compiler.allow_in_graph(f) is f and ember.compiler.assume_constant_result(f) is f
    assert ember.compiler.cudagraph_mark_step_begin() is None
    assert ember.compiler.list_backends() == ["inductor"]
    assert "inductor" in torch.compiler.list_backends()
    assert ember.compiler.list_backends(exclude_tags=None) == ["aot_eager", "eager", "inductor"]
    opt = ember._dynamo.optimize("inductor", nopython=True)(f)
    np.testing.assert_allclose(opt(ember.ones(2)).numpy(), [2.0, 2.0])
    assert isinstance(opt, ember.compiler.CompiledFunction) and opt.fullgraph


def test_dynamo_and_inductor_config():
    cfg = ember._dynamo.config
    before = cfg.cache_size_limit
    try:
        cfg.cache_size_limit = 3
        assert ember.compiler.recompile_limit == 3 and cfg.recompile_limit == 3
    finally:
        cfg.cache_size_limit = before
    for name in ("suppress_errors", "capture_scalar_outputs", "optimize_ddp", "automatic_dynamic_shapes"):
        assert getattr(cfg, name) == getattr(torch._dynamo.config, name), name
    cfg.suppress_errors = True
    try:
        assert cfg.suppress_errors is True
    finally:
        cfg.suppress_errors = False
    with pytest.raises(AttributeError, match="no_such"):
        cfg.no_such = 1
    ic = ember._inductor.config
    for name in ("coordinate_descent_tuning", "epilogue_fusion", "freezing", "fx_graph_cache"):
        assert getattr(ic, name) == getattr(torch._inductor.config, name), name
    assert ic.triton.unique_kernel_names == torch._inductor.config.triton.unique_kernel_names
    ic.coordinate_descent_tuning = True
    ic.triton.unique_kernel_names = False
    try:
        assert ic.coordinate_descent_tuning and not ic.triton.unique_kernel_names
    finally:
        ic.coordinate_descent_tuning = False
        ic.triton.unique_kernel_names = True
    with pytest.raises(AttributeError, match="tritonn"):
        ic.tritonn = 1
    with pytest.raises(AttributeError):
        ic.triton = 1
