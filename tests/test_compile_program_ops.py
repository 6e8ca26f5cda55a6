"""Ops that real programs call inside compiled code and that made the whole call run eagerly (a counted
fallback): one_hot (its kernel wrote NumPy directly) and the derivative of an einsum whose operand has a
letter summed only in it (a vector of ones made outside ember's ops). Compiled against eager ember and
torch, with the fallback counter read."""
import numpy as np
import torch

import ember
from compile_support import _reset, _compare_call  # noqa: F401  (fresh compiler state per test)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_one_hot_is_captured():
    def f(lib, idx, w):
        F = lib.nn.functional
        return F.one_hot(idx, 6).float() @ w, F.one_hot(idx, num_classes=-1).sum(0)

    def ours(idx, w):
        return f(ember, idx, w)
    cf = ember.compile(ours)
    w = _x(6, 3)
    for call, labels in enumerate(([1, 3, 0, 5, 3], [2, 2, 4, 0, 1], [2, 2, 4, 0, 1])):
        got = cf(ember.tensor(labels), ember.from_numpy(w))
        want = f(torch, torch.tensor(labels), torch.from_numpy(w))
        for g, t in zip(got, want):
            assert g.dtype.__repr__().split(".")[-1] == str(t.dtype).split(".")[-1]
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-6, err_msg=f"call {call}")
    c = ember.compiler.counters
    assert c["fallbacks"] == 0, c["fallback_reasons"]
    assert c["replays"] >= 1                  # the third call replays (the class count is a guarded read)


def test_one_hot_checks_still_raise_torchs_errors():
    F = ember.nn.functional
    for bad, msg in ((ember.tensor([3]), "smaller than num_classes"), (ember.tensor([-1, 0]), "non-negative")):
        try:
            F.one_hot(bad, 2 if msg.startswith("smaller") else 3)
        except RuntimeError as e:
            assert msg in str(e)
        else:
            raise AssertionError("no error")


def test_einsum_with_a_letter_summed_in_one_operand_has_a_captured_backward():
    def f(a, b):
        return (ember.einsum("bii->b", a @ a.transpose(1, 2)) * 2, ember.einsum("bij,bjk->bik", a, b),
                ember.einsum("ij->j", a[0]))
    cf = ember.compile(f)
    arrays = [_x(2, 3, 3), _x(2, 3, 3, seed=1)]
    for call in range(3):
        _compare_call(f, cf, call, arrays, rtol=1e-5, atol=1e-6)
    c = ember.compiler.counters
    assert c["fallbacks"] == 0, c["fallback_reasons"]
    assert c["replays"] >= 2
    ta = torch.from_numpy(arrays[0]).requires_grad_(True)
    torch.einsum("bii->b", ta @ ta.transpose(1, 2)).sum().backward()
    ea = ember.from_numpy(arrays[0]).requires_grad_(True)
    cf(ea, ember.from_numpy(arrays[1]))[0].sum().backward()
    np.testing.assert_allclose(ea.grad.numpy(), 2 * ta.grad.numpy(), rtol=1e-5, atol=1e-6)


def _random_program(x):
    a = ember.bernoulli(ember.full((4,), 0.5))
    b = ember.normal(0.5, 2.0, (3,))
    c = ember.normal(x, 1.0)
    d = ember.poisson(x.abs())
    e = ember.bernoulli(x.abs().clamp(max=1), 0.3)
    keep = x.new_empty((x.shape[0], 1)).bernoulli_(0.7)        # timm's drop-path
    return a, b, c, d, e, x * keep / 0.7


def test_random_ops_are_captured_and_draw_as_eager():
    """bernoulli, normal (numbers or a tensor mean), poisson and bernoulli_(p) drew outside an op (the
    whole call ran eagerly); now recorded, each replay draws fresh numbers in eager's order."""
    runs = {}
    for compiled in (False, True):
        ember.compiler.reset()
        f = ember.compile(_random_program) if compiled else _random_program
        ember.manual_seed(5)
        x = ember.arange(12.).reshape(4, 3) / 10
        runs[compiled] = [[o.numpy().copy() for o in f(x)] for _ in range(4)]
    c = ember.compiler.counters
    assert c["fallbacks"] == 0, c["fallback_reasons"]
    assert c["replays"] == 3
    for call, (eager, comp) in enumerate(zip(runs[False], runs[True])):
        for k, (a, b) in enumerate(zip(eager, comp)):
            np.testing.assert_array_equal(b, a, err_msg=f"call {call}, output {k}")
    assert not np.array_equal(runs[True][1][0], runs[True][2][0]) or not np.array_equal(runs[True][1][1],
                                                                                         runs[True][2][1])


def test_output_made_from_a_freed_graph_has_no_captured_backward():
    """``loss.backward(); return loss * n``: the AOT backward of the output went through the freed graph
    and raised; eagerly only a backward of that output would raise, so the call compiles without one."""
    m = ember.nn.Linear(3, 1)
    opt = ember.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).mean() / 2
        loss.backward()
        opt.step()
        return loss * 2
    st = ember.compile(step)
    ref = ember.nn.Linear(3, 1)
    ref.load_state_dict(m.state_dict())
    ropt = ember.optim.SGD(ref.parameters(), lr=0.1)
    for i in range(3):
        x = ember.from_numpy(_x(4, 3, seed=i))
        got = st(x)
        ropt.zero_grad()
        rl = ref(x).pow(2).mean() / 2
        rl.backward()
        ropt.step()
        np.testing.assert_allclose(got.item(), rl.item() * 2, rtol=1e-6)
    np.testing.assert_allclose(m.weight.detach().numpy(), ref.weight.detach().numpy(), rtol=1e-5)
    c = ember.compiler.counters
    assert c["fallbacks"] == 0 and c["replays"] == 2


def _clipped_training(compiled, clip):
    ember.compiler.reset()
    m = ember.nn.Linear(3, 2)
    with ember.no_grad():
        m.weight.copy_(ember.from_numpy(_x(2, 3, seed=3)))
        m.bias.zero_()
    opt = ember.optim.SGD(m.parameters(), lr=0.5)

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).mean()
        loss.backward()
        norm = clip(m.parameters())
        opt.step()
        return loss.detach(), (loss.detach() if norm is None else norm)
    st = ember.compile(step) if compiled else step
    outs = [[None if t is None else t.item() for t in st(ember.from_numpy(_x(4, 3, seed=i)) * (i + 1))]
            for i in range(4)]
    return outs, m.weight.detach().numpy().copy()


def test_gradient_clipping_inside_a_compiled_step():
    """clip_grad_norm_ worked on the NumPy buffers (the step fell back to eager) and clip_grad_value_
    wrote them unseen (a replay would not have clipped): both are ember ops while captured."""
    clips = {"norm": lambda ps: ember.nn.utils.clip_grad_norm_(ps, 0.01),
             "norm_inf": lambda ps: ember.nn.utils.clip_grad_norm_(ps, 0.02, norm_type=float("inf")),
             "value": lambda ps: ember.nn.utils.clip_grad_value_(ps, 0.001)}
    for name, clip in clips.items():
        (le, we), (lc, wc) = _clipped_training(False, clip), _clipped_training(True, clip)
        c = ember.compiler.counters
        assert c["fallbacks"] == 0 and c["replays"] == 3, (name, c["fallback_reasons"])
        np.testing.assert_allclose(np.array(lc, dtype=float), np.array(le, dtype=float), rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(wc, we, rtol=1e-5, atol=1e-7, err_msg=name)


def test_detach_of_an_argument_or_a_parameter_is_captured():
    """``x.detach()`` / ``weight.detach()`` re-wrap the tensor's own buffer, which the capture took for
    an array computed outside ember's ops (the call ran eagerly): stop-gradient uses of inputs and
    parameters (soft_margin_loss(x, sign(x.detach())), a weight read without gradient)."""
    m = ember.nn.Linear(4, 4)

    def f(x):
        F = ember.nn.functional
        return ((x * ember.sign(x.detach())).sum() + (m(x) * m.weight.detach().sum()).sum()
                + F.soft_margin_loss(x, ember.sign(x.detach())))
    cf = ember.compile(f)
    for call in range(3):
        _compare_call(f, cf, call, [_x(5, 4, seed=call)], rtol=1e-5, atol=1e-5, params=list(m.parameters()))
    c = ember.compiler.counters
    assert c["fallbacks"] == 0, c["fallback_reasons"]
    assert c["replays"] >= 2


def test_a_derivative_saving_a_detached_argument_or_parameter_reads_this_call_s_value():
    """``x.detach() * x``: mul's derivative saves the detached tensor. The backward must read the value
    of this call's argument (and this step's weight), not the tensor seen while tracing (the compiled
    backward reused the first call's values: a wrong gradient from the second call on)."""
    m = ember.nn.Linear(3, 3)

    def f(x):
        return (x.detach() * x).sum() + (m.weight.detach() * m.weight).sum() * x.sum()
    for backend in ("inductor", "aot_eager"):
        cf = ember.compile(f, backend=backend)
        for call in range(4):
            with ember.no_grad():
                m.weight.add_(0.25)             # a new weight value per call, in place (a training step)
            _compare_call(f, cf, call, [_x(2, 3, seed=call)], rtol=1e-5, atol=1e-5, params=list(m.parameters()))
    assert ember.compiler.counters["replays"] >= 3
