"""ember.compile's capture layer: guards, recompiles, graph breaks, explain, side effects, training.

Compiled results are checked against eager ember (which the op table checks against torch).
"""
import copy
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import counters

BACKENDS = ["eager", "aot_eager"]


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a.detach()._data), np.asarray(b.detach()._data), rtol=rtol, atol=atol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_elementwise_and_reduction_match_eager(backend):
    def f(x, y):
        return (x * y).sin() + x.sum(0) - y.exp().mean()
    cf = ember.compile(f, backend=backend)
    x, y = ember.randn(3, 4), ember.randn(4)
    close(cf(x, y), f(x, y))
    close(cf(x * 2, y), f(x * 2, y))        # same guards: replay with new values
    assert counters["captures"] == 1 and counters["replays"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_of_outputs_match_eager(backend):
    w = ember.randn(4, 3, requires_grad=True)

    def f(x):
        return (x @ w).tanh().pow(2).sum()
    cf = ember.compile(f, backend=backend)
    x = ember.randn(5, 4, requires_grad=True)
    for _ in range(2):                        # trace, then replay
        cf(x).backward()
        gx, gw = x.grad.clone(), w.grad.clone()
        x.grad = w.grad = None
        f(x).backward()
        close(gx, x.grad)
        close(gw, w.grad)
        x.grad = w.grad = None


def test_guards_shape_dtype_and_scalar_args_recompile_and_log(capsys):
    ember.compiler.set_logs("recompiles")
    try:
        cf = ember.compile(lambda x, k: x * k)
        cf(ember.ones(2), 2)
        cf(ember.ones(2), 2)
        assert counters["captures"] == 1
        cf(ember.ones(3), 2)            # shape guard
        cf(ember.ones(3, dtype=ember.float64), 2)   # dtype guard
        r = cf(ember.ones(3), 5)        # Python scalar guard
        assert r.tolist() == [5.0, 5.0, 5.0]
        assert counters["captures"] == 4 and counters["recompiles"] == 3
        err = capsys.readouterr().err
        assert "shape=(3,)" in err and "args[1] == 5" in err
    finally:
        ember.compiler.set_logs("")


def test_recompile_limit_falls_back_to_eager_with_one_warning():
    cf = ember.compile(lambda x: x + 1, dynamic=False)     # (static sizes: each new size is a new entry)
    old = ember.compiler.api.recompile_limit
    ember.compiler.set_recompile_limit(3)
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for n in range(1, 8):
                assert cf(ember.zeros(n)).tolist() == [1.0] * n
        msgs = [str(x.message) for x in w if "recompile_limit" in str(x.message)]
        assert len(msgs) == 1 and "shape=" in msgs[0]
        assert counters["captures"] == 3
    finally:
        ember.compiler.set_recompile_limit(old)


@pytest.mark.parametrize("backend", BACKENDS)
def test_branch_on_tensor_value_gives_both_branches(backend):
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x * 3
    cf = ember.compile(f, backend=backend)
    pos, neg = ember.ones(3), -ember.ones(3)
    for x in (pos, neg, pos, neg):
        close(cf(x), f(x))
    assert counters["captures"] == 2          # one trace per branch, both kept


def test_explain_counts_agree_with_compile():
    def f(x):
        y = x.sin()
        if y.sum() > 0:
            y = y * 2
        return y.cos() + x.max().item()
    e = ember.compiler.explain(f)(ember.ones(4))
    assert e.graph_count == 3 and e.graph_break_count == 2
    assert [r.lineno > 0 and r.filename.endswith("test_compiler_capture.py") for r in e.break_reasons] == [True, True]
    assert "sin" in e.ops_per_graph[0]
    text = str(e)
    assert "Graph count: 3" in text and "suggestion" in text
    cf = ember.compile(f)
    cf(ember.ones(4))
    assert counters["graph_breaks"] == e.graph_break_count


def test_fullgraph_raises_naming_file_and_line():
    def f(x):
        return x * x.sum().item()
    with pytest.raises(ember.compiler.GraphBreakError, match=r"test_compiler_capture.py:\d+.*item"):
        ember.compile(f, fullgraph=True)(ember.ones(2))


def test_item_value_is_a_guard():
    cf = ember.compile(lambda x: x * x.sum().item())
    close(cf(ember.ones(2)), ember.ones(2) * 2)
    close(cf(ember.ones(2) * 3), ember.ones(2) * 18)   # the read value changed: retraced, still right


def test_side_effects_happen_only_while_tracing():
    """Sharp edge (README): Python side effects run when the function is traced, not on replays (an
    object's attribute: a list of numbers among the closure variables would be guarded)."""
    import types
    seen = types.SimpleNamespace(calls=0)

    def f(x):
        seen.calls += 1
        return x + 1
    cf = ember.compile(f)
    cf(ember.ones(2))
    cf(ember.ones(2))
    cf(ember.ones(2))
    assert seen.calls == 1


def test_print_inside_prints_only_while_tracing(capsys):
    def f(x):
        print("value", x)
        return x * 2
    cf = ember.compile(f)
    cf(ember.ones(2))
    cf(ember.ones(2) * 5)
    assert capsys.readouterr().out.count("value") == 1


def test_random_draw_outside_an_op_runs_eagerly_with_reason():
    def f(x):
        return x + ember.empty(3).uniform_()
    cf = ember.compile(f)
    a, b = cf(ember.zeros(3)), cf(ember.zeros(3))
    assert not np.allclose(a.numpy(), b.numpy())      # fresh numbers every call (eager fallback)
    assert counters["fallbacks"] >= 1 and "random draw" in counters["fallback_reasons"][0]
    with pytest.raises(ember.compiler.GraphBreakError, match="random draw"):
        ember.compile(f, fullgraph=True)(ember.zeros(3))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_random_factories_are_captured_and_draw_fresh_numbers(backend):
    def f(x):
        return x + ember.rand(3) * ember.randn_like(x) + ember.randint(0, 5, (3,)), ember.randperm(4)
    cf = ember.compile(f, backend=backend, fullgraph=True)
    ember.manual_seed(3)
    got = [cf(ember.zeros(3)) for _ in range(3)]
    ember.manual_seed(3)
    want = [f(ember.zeros(3)) for _ in range(3)]
    for (g0, g1), (w0, w1) in zip(got, want):
        # the same draws as eager, in the same order, from the same generator
        np.testing.assert_allclose(g0.numpy(), w0.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(g1.numpy(), w1.numpy())
    assert not np.allclose(got[0][0].numpy(), got[1][0].numpy())
    assert counters["fallbacks"] == 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_dropout_training_matches_eager_with_the_same_seed(backend):
    nn = ember.nn

    def make():
        ember.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.3), nn.GELU(), nn.Linear(16, 2))
        return m, ember.optim.Adam(m.parameters(), lr=1e-2)
    x, y = ember.randn(32, 8), ember.randint(0, 2, (32,))

    def step(m, opt, x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    m, opt = make()
    ember.manual_seed(1)
    eager = [float(step(m, opt, x, y)) for _ in range(8)]
    m2, opt2 = make()
    ember.manual_seed(1)
    cs = ember.compile(step, backend=backend)
    comp = [float(cs(m2, opt2, x, y)) for _ in range(8)]
    np.testing.assert_allclose(comp, eager, rtol=1e-5)
    assert counters["fallbacks"] == 0 and counters["graph_breaks"] == 0
    for a, b in zip(m.parameters(), m2.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_inplace_writes_to_inputs_are_replayed():
    def f(x, buf):
        buf.add_(x)
        return buf * 2
    cf = ember.compile(f, backend="aot_eager")
    buf = ember.zeros(3)
    for i in range(1, 4):
        out = cf(ember.ones(3), buf)
        assert buf.tolist() == [float(i)] * 3
        assert out.tolist() == [2.0 * i] * 3


def _mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW"])
def test_compiled_training_step_matches_eager_for_20_steps(backend, opt_name):
    ember.manual_seed(0)
    model = _mlp()
    ref = copy.deepcopy(model)
    kw = {"SGD": dict(lr=0.1, momentum=0.9), "Adam": dict(lr=1e-2), "AdamW": dict(lr=1e-2, weight_decay=0.1)}[opt_name]
    make = getattr(ember.optim, opt_name)
    opt, opt_ref = make(model.parameters(), **kw), make(ref.parameters(), **kw)
    X, Y = ember.randn(32, 8), ember.randint(0, 3, (32,))

    def step(m, o):
        o.zero_grad()
        loss = F.cross_entropy(m(X), Y)
        loss.backward()
        o.step()
        return loss.detach()
    cstep = ember.compile(step, backend=backend)
    for i in range(20):
        a, b = cstep(model, opt), step(ref, opt_ref)
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5, err_msg=f"step {i}")
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p, q, rtol=1e-4, atol=1e-6)
    assert counters["fallbacks"] == 0
    assert counters["captures"] <= 3      # the first step initialises optimizer state: one retrace


def test_compiled_module_keeps_state_dict_keys_and_saves(tmp_path):
    model = _mlp()
    cm = ember.compile(model)
    x = ember.randn(4, 8)
    close(cm(x), model(x))
    assert list(cm.state_dict().keys()) == list(model.state_dict().keys())
    ember.save(cm.state_dict(), tmp_path / "m.pt")
    fresh = _mlp()
    fresh.load_state_dict(ember.load(tmp_path / "m.pt"))
    close(fresh(x), model(x))
    model.eval()                                   # training flag is a guard
    close(cm(x), model(x))
    assert counters["captures"] == 2


def test_module_compile_method_and_decorator():
    @ember.compile
    def f(x):
        return x.relu() * 2
    x = ember.randn(5)
    close(f(x), x.relu() * 2)
    g = ember.compile(backend="aot_eager")(lambda x: x.exp())
    close(g(x), x.exp())


def test_bad_arguments_are_refused_clearly():
    with pytest.raises(ValueError, match="unknown backend"):
        ember.compile(lambda x: x, backend="nope")
    with pytest.raises(ValueError, match="unknown mode"):
        ember.compile(lambda x: x, mode="fastest")


def test_advanced_indexing_is_captured_with_the_indices_as_inputs():
    f = ember.compile(lambda x, i: x[i] * 2)
    x = ember.arange(5.0)
    assert f(x, ember.tensor([0, 2])).tolist() == [0.0, 4.0]
    assert f(x, ember.tensor([1, 3])).tolist() == [2.0, 6.0]      # new index values: a replay, not a retrace
    assert counters["captures"] == 1 and counters["fallbacks"] == 0 and counters["replays"] == 1


def test_module_training_flags_are_guarded_for_modules_passed_or_closed_over():
    m = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    x = ember.randn(3, 4)
    f = ember.compile(lambda mod, x: mod(x))
    g = ember.compile(lambda x: m(x))
    f(m, x)
    g(x)
    m.eval()
    close(f(m, x), m(x))          # eval: no dropout (a retrace, not the training graph)
    close(g(x), m(x))
    assert counters["recompiles"] == 2 and "training flags" in counters["recompile_reasons"][0]


def test_compiled_optimizer_step_with_gradients_from_outside_stays_correct():
    """.grad tensors made outside the compiled function are read through their owner at each replay (a new
    .grad per step needs no retrace)."""
    ember.manual_seed(0)
    m = nn.Linear(4, 3)
    r = copy.deepcopy(m)
    o = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    o2 = ember.optim.SGD(r.parameters(), lr=0.1, momentum=0.9)

    def upd(opt):
        opt.step()
        opt.zero_grad()
    cu = ember.compile(upd)
    X = ember.randn(8, 4)
    for _ in range(4):
        (m(X) ** 2).sum().backward()
        (r(X) ** 2).sum().backward()
        cu(o)
        upd(o2)
        close(m.weight, r.weight)
        close(m.bias, r.bias)
    # one trace before the optimizer state exists, one after; every later step replays
    assert counters["captures"] == 2 and counters["fallbacks"] == 0 and counters["replays"] >= 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW"])
def test_compiled_optimizer_step_alone_replays_with_new_grads(backend, opt_name):
    """Only ``opt.step`` compiled; backward outside makes new .grad tensors every step."""
    kw = {"lr": 0.1, "momentum": 0.9} if opt_name == "SGD" else {"lr": 1e-2}
    losses = []
    for compiled in (False, True):
        ember.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
        opt = getattr(ember.optim, opt_name)(m.parameters(), **kw)
        step = ember.compile(lambda: opt.step(), backend=backend) if compiled else opt.step
        x, y = ember.randn(16, 8), ember.randn(16, 2)
        ls = []
        for _ in range(10):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            step()
            ls.append(float(loss))
        losses.append(ls)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    # Adam's state is made before the first step's trace reads it: that trace serves every step. SGD's
    # momentum buffer starts as a copy of the first gradient (another program): traced once more.
    assert counters["captures"] == (2 if opt_name == "SGD" else 1) and counters["fallbacks"] == 0


def test_batchnorm_cumulative_average_replays_without_breaks():
    bn = nn.BatchNorm1d(3, momentum=None)
    ref = nn.BatchNorm1d(3, momentum=None)
    f = ember.compile(lambda x: bn(x).sum())
    for i in range(4):
        x = ember.arange(12.0).reshape(4, 3) * (i + 1)
        f(x)
        ref(x)
    close(bn.running_mean, ref.running_mean)
    close(bn.running_var, ref.running_var)
    assert int(bn.num_batches_tracked) == 4
    assert counters["captures"] == 1 and counters["graph_breaks"] == 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_double_backward_through_a_compiled_module_is_a_clear_error(backend):
    m = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
    cm = ember.compile(m, backend=backend)
    x = ember.linspace(0, 1, 5).unsqueeze(1).requires_grad_(True)
    close(ember.autograd.grad(cm(x).sum(), x)[0], ember.autograd.grad(m(x).sum(), x)[0])   # first order is fine
    with pytest.raises(RuntimeError, match="higher-order gradients"):
        ember.autograd.grad(cm(x).sum(), x, create_graph=True)


def test_a_whole_step_with_create_graph_compiles():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
    x = ember.linspace(0, 1, 5).unsqueeze(1).requires_grad_(True)

    def step():
        u = m(x)
        du = ember.autograd.grad(u, x, grad_outputs=ember.ones_like(u), create_graph=True)[0]
        d2u = ember.autograd.grad(du.sum(), x, create_graph=True)[0]
        loss = (d2u + 9.87 * ember.sin(3.14 * x)).pow(2).mean()
        m.zero_grad()
        loss.backward()
        return loss.detach(), m[0].weight.grad.clone()
    want = step()
    cs = ember.compile(step)
    for _ in range(2):
        got = cs()
        close(got[0], want[0])
        close(got[1], want[1])
    assert counters["fallbacks"] == 0 and counters["replays"] == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_returned_objects_holding_tensors_are_rebuilt_per_call(backend):
    """A module returning a torch.distributions object: each replay returns a new object over this call's
    tensors (not the traced call's), and backward through it works every step."""
    D = ember.distributions
    ember.manual_seed(0)
    m = nn.Linear(3, 4)
    f = ember.compile(lambda x: (D.Categorical(logits=m(x)), m(x).sum()), backend=backend)
    a = ember.tensor([1, 2])
    for i in range(3):
        x = ember.randn(2, 3)
        d, _ = f(x)
        loss = -d.log_prob(a).mean()
        m.zero_grad()
        loss.backward()
        g = m.weight.grad.clone()
        m.zero_grad()
        ref = -D.Categorical(logits=m(x)).log_prob(a).mean()
        ref.backward()
        close(loss, ref)
        close(g, m.weight.grad)
    assert counters["fallbacks"] == 0 and counters["replays"] == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_activation_checkpoint_inside_a_compiled_module_keeps_parameter_gradients(backend):
    from ember.utils.checkpoint import checkpoint

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.b1 = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU())
            self.b2 = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU())

        def forward(self, x):
            h = self.b1(x)
            return h + checkpoint(self.b2, h, use_reentrant=False)
    ember.manual_seed(0)
    m = Enc()
    cm = ember.compile(m, backend=backend)
    grads = []
    for mod in (m, cm, cm):
        m.zero_grad()
        (mod(ember.ones(4, 8) * 0.3) * mod(ember.ones(4, 8) * -0.7)).sum().backward()   # two calls, one loss
        grads.append([p.grad.clone() for p in m.parameters()])
    for g in grads[1:]:
        for a, b in zip(grads[0], g):
            close(b, a)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_backward_into_a_new_leaf_argument_each_call_replays(backend):
    """Input gradients (an adversarial step): every call passes a new leaf; its .grad being None is part of
    the call signature, so the captured backward replays instead of retracing."""
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

    def input_grad(x):
        m(x).sum().backward()
        return x.grad.sign()
    cf = ember.compile(input_grad, backend=backend)
    for i in range(4):
        x1 = (ember.ones(3, 4) * (i - 1.5)).requires_grad_()
        x2 = x1.detach().clone().requires_grad_()
        m.zero_grad()
        close(cf(x1), input_grad(x2))
        close(x1.grad, x2.grad)
    assert counters["fallbacks"] == 0 and counters["captures"] <= 2
