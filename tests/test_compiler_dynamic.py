"""Dynamic shapes in ember.compile (issue 12): automatic dynamic, dynamic=True/False, mark_dynamic /
mark_static, symbolic sizes through capture (shape reads, view, arange, slicing, tril(ones(t, t))),
guards on sizes, and the check that a symbolic program agrees with a real trace before it is trusted.
Every compiled result is compared with eager mode."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.bench import models as M
from ember.compiler import counters
from compile_support import _reset, _close, _close_trained_gpts, BACKENDS  # noqa: F401


def _f(x, w):
    b, t = x.shape[0], x.size(1)
    y = (x @ w).view(b, t, 2, -1).transpose(1, 2)                 # view(b, t, h, c // h)
    m = ember.tril(ember.ones(t, t))
    z = y.sum(-1, keepdim=True) * m[:t, :1].view(1, 1, t, 1)
    return z.reshape(b, -1) + ember.arange(t).repeat(2).float() + x[:, : x.size(-1) // 2].sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_automatic_dynamic_replays_a_third_size(backend):
    cf = ember.compile(_f, backend=backend)
    w = ember.randn(8, 8)
    for t in [5, 7, 9, 12, 7, 33]:
        x = ember.randn(3, t, 8)
        _close(cf(x, w), _f(x, w), f"t={t}", rtol=1e-5, atol=1e-5)
    assert counters["captures"] == 2 and counters["dynamic_fallbacks"] == 0
    # below 4, x[:, :4] keeps all of dim 1 (the guard "not (s0 < 4)" of the entry fails): a new region
    for t in [2, 3, 2, 3]:
        x = ember.randn(3, t, 8)
        _close(cf(x, w), _f(x, w), f"t={t}", rtol=1e-5, atol=1e-5)
    assert counters["captures"] == 4 and counters["dynamic_fallbacks"] == 0


def test_dynamic_true_and_false():
    w = ember.randn(8, 8)
    dyn = ember.compile(_f, dynamic=True)
    for t in [5, 6, 10, 11]:
        x = ember.randn(2 + t % 2, t, 8)
        _close(dyn(x, w), _f(x, w), f"t={t}", rtol=1e-5, atol=1e-5)
    assert counters["captures"] == 2            # the second is the trace the symbolic program is checked on
    ember.compiler.reset()
    static = ember.compile(_f, dynamic=False)
    for t in [5, 6, 10]:
        static(ember.randn(2, t, 8), w)
    assert counters["captures"] == 3


def test_mark_dynamic_and_mark_static():
    f = lambda x: (x * 2).sum(0)                # noqa: E731
    cf = ember.compile(f)
    for n in (3, 4, 5):
        x = ember.randn(n, 4)
        ember._dynamo.mark_dynamic(x, 0)
        _close(cf(x), f(x), f"n={n}")
    assert counters["captures"] == 2
    ember.compiler.reset()
    cf = ember.compile(f, dynamic=True)
    for n in (3, 4, 5):
        x = ember.randn(n, 4)
        ember.compiler.mark_static(x, 0)
        _close(cf(x), f(x), f"n={n}")
    assert counters["captures"] == 3


def test_mark_dynamic_range_is_a_guard():
    cf = ember.compile(lambda x: x + 1)
    for n in (3, 4, 5, 9):
        x = ember.randn(n)
        ember.compiler.mark_dynamic(x, 0, min=2, max=6)
        _close(cf(x), x + 1, f"n={n}")
    assert counters["captures"] == 3            # 9 is outside [2, 6]: traced on its own


def test_sizes_0_and_1_are_specialised():
    cf = ember.compile(lambda x: x.sum(0) * x.shape[0])
    for n in (4, 5, 6, 1, 0, 7):
        x = ember.randn(n, 3)
        _close(cf(x), x.sum(0) * n, f"n={n}")
    assert counters["captures"] == 4


def test_python_decisions_on_sizes_become_guards(capsys):
    def f(x):
        if x.shape[0] > 4:
            return x * 2
        return x * 3
    cf = ember.compile(f)
    ember.compiler.set_logs("dynamic")
    try:
        for n in (5, 6, 7, 3, 2, 8):
            x = ember.randn(n)
            _close(cf(x), f(x), f"n={n}")
    finally:
        ember.compiler.set_logs("")
    err = capsys.readouterr().err
    assert "s0 > 4" in err
    assert counters["captures"] <= 4


def test_a_program_the_symbols_cannot_follow_stays_static():
    def f(x):
        acc = x[0]
        for i in range(1, x.shape[0]):          # a Python loop over a size: unrolled per size
            acc = acc + x[i]
        return acc
    cf = ember.compile(f)
    for n in (3, 4, 5, 6):
        x = ember.randn(n, 2)
        _close(cf(x), f(x), f"n={n}", rtol=1e-5, atol=1e-6)
    # two symbolic traces (at 4 and 5) disagree with the traces before them; then sizes stay static
    assert counters["dynamic_fallbacks"] == 2 and counters["captures"] == 4
    cf(ember.randn(7, 2))
    assert counters["captures"] == 5 and counters["dynamic_fallbacks"] == 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_with_a_last_partial_batch(backend):
    def make():
        ember.manual_seed(0)
        m = ember.nn.Sequential(ember.nn.Linear(6, 16), ember.nn.GELU(), ember.nn.LayerNorm(16),
                                ember.nn.Linear(16, 3))
        return m, ember.optim.AdamW(m.parameters(), lr=1e-2)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(0)
    X = ember.from_numpy(rng.standard_normal((45, 6)).astype(np.float32))
    Y = ember.from_numpy(rng.integers(0, 3, 45))
    (m1, o1), (m2, o2) = make(), make()
    cstep = ember.compile(step, backend=backend)
    for epoch in range(3):
        for i in range(0, 45, 16):              # batches of 16, 16 and 13
            x, y = X[i:i + 16], Y[i:i + 16]
            _close(cstep(m1, o1, x, y), step(m2, o2, x, y), f"epoch {epoch} batch {i}", rtol=1e-4, atol=1e-5)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        _close(p1, p2, "parameters after training", rtol=1e-4, atol=1e-5)
    print(counters["captures"], counters["dynamic_fallback_reasons"])
    assert counters["captures"] <= 3 and counters["fallbacks"] == 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_gpt_forward_at_50_lengths_compiles_twice(backend):
    ember.manual_seed(0)
    cfg = M.GPTConfig(block_size=64)
    model = M.gpt(ember, cfg).eval()
    cm = ember.compile(model, backend=backend)
    rng = np.random.default_rng(0)
    with ember.no_grad():
        for L in rng.permutation(np.arange(2, 65))[:50]:
            idx = ember.from_numpy(rng.integers(0, cfg.vocab_size, (2, int(L))))
            a, b = cm(idx), model(idx)
            a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
            _close(a, b, f"L={L}", rtol=1e-4, atol=1e-5)
    assert counters["captures"] <= 2 and counters["fallbacks"] == 0


def test_gpt_generation_with_growing_context_compiles_twice():
    ember.manual_seed(0)
    cfg = M.GPTConfig(block_size=64)
    model = M.gpt(ember, cfg).eval()
    cm = ember.compile(model)
    idx = ember.randint(0, cfg.vocab_size, (1, 2))
    ref = idx.clone()
    with ember.no_grad():
        for _ in range(20):
            out, want = cm(idx), model(ref)
            out, want = (out[0], want[0]) if isinstance(out, tuple) else (out, want)
            _close(out, want, f"context {idx.shape[1]}", rtol=1e-4, atol=1e-5)
            nxt = out[:, -1].argmax(-1, keepdim=True)
            idx = ember.cat([idx, nxt], 1)
            ref = ember.cat([ref, want[:, -1].argmax(-1, keepdim=True)], 1)
    assert counters["captures"] <= 2


def test_gpt_training_with_varying_lengths():
    def make():
        ember.manual_seed(0)
        m = M.gpt(ember, M.GPTConfig(block_size=32))
        return m, ember.optim.AdamW(m.parameters(), lr=1e-3)

    def step(model, opt, idx, y):
        opt.zero_grad()
        logits = model(idx)
        logits = logits[0] if isinstance(logits, tuple) else logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        opt.step()
        return loss

    (m1, o1), (m2, o2) = make(), make()
    cstep = ember.compile(step)
    r = np.random.default_rng(0)
    for L in [16, 16, 24, 9, 30, 12, 24]:
        idx, y = (ember.from_numpy(r.integers(0, 64, (2, L))) for _ in range(2))
        _close(cstep(m1, o1, idx, y), step(m2, o2, idx, y), f"length {L}", rtol=1e-4, atol=1e-5)
    _close_trained_gpts(m1, m2)
    # the first step (whose trace makes AdamW's state and serves the second step too), then one symbolic
    # trace for every length
    assert counters["captures"] == 2 and counters["dynamic_fallbacks"] == 0


def test_backward_with_symbolic_sizes():
    w = ember.randn(8, 8, requires_grad=True)

    def f(x):
        return (x @ w).relu().view(x.shape[0], -1).sum()
    cf = ember.compile(f)
    for n in (3, 5, 7, 4):
        x = ember.randn(n, 8, requires_grad=True)
        cf(x).backward()
        gx, gw = x.grad.clone(), w.grad.clone()
        x.grad = w.grad = None
        f(x).backward()
        _close(gx, x.grad, f"n={n} dx", rtol=1e-5, atol=1e-5)
        _close(gw, w.grad, f"n={n} dw", rtol=1e-5, atol=1e-5)
        w.grad = None
    assert counters["captures"] == 2 and counters["dynamic_fallbacks"] == 0


def test_explain_names_symbols_and_guards():
    def f(x):
        return x[: x.shape[0] // 2] * 2 if x.shape[0] % 2 == 0 else x
    out = ember.compiler.explain(ember.compile(f, dynamic=True))(ember.ones(6, 3))
    text = str(out)
    assert "args[0].size(0)=s0" in text and "args[0].size(1)=s1" in text
    assert "s0 % 2 == 0" in text


def test_dynamo_namespace():
    assert ember._dynamo.mark_dynamic is ember.compiler.mark_dynamic
    with pytest.raises(IndexError):
        ember._dynamo.mark_dynamic(ember.ones(2), 3)
    with pytest.raises(ValueError):
        ember.compile(lambda x: x, dynamic="yes")


# ---- a shape fuzzer: random chains of size-polymorphic ops, called at random (batch, length) -------------------

FUZZ_OPS = [
    "h * 2 + 1", "h.relu()", "h.tanh()", "F.gelu(h)", "h.softmax(-1)", "h.softmax(1)",
    "h - h.mean(1, keepdim=True)", "h / (h.std(-1, keepdim=True) + 1)", "h @ W",
    "h.transpose(1, 2).contiguous().transpose(1, 2)",
    "h.reshape(h.shape[0] * h.shape[1], -1).view(h.shape[0], h.shape[1], -1)",
    "ember.cat([h, h[:, :1]], 1)[:, 1:]",
    "h * ember.tril(ember.ones(h.shape[1], h.shape[1]))[:, :1].view(1, -1, 1)",
    "h + ember.arange(h.shape[1]).view(1, -1, 1).float() * 0.1",
    "F.layer_norm(h, (h.shape[-1],))",
    "(h @ h.transpose(1, 2) * 0.1).softmax(-1) @ h",
    "h.cumsum(1)", "h[:, : h.size(1) // 2 + 1].sum(1, keepdim=True) * h", "h.flip(1)",
    "h.masked_fill(ember.ones(h.shape[1], h.shape[1]).tril()[:, :1].view(1, -1, 1) == 0, 0.0)",
    "h.view(h.shape[0], -1, 2, 4).sum(2).repeat(1, 1, 2)",
    "F.scaled_dot_product_attention(h, h, h, is_causal=True)",
]


def _fuzz_program(seed):
    r = np.random.default_rng(seed)
    steps = [FUZZ_OPS[i] for i in r.integers(0, len(FUZZ_OPS), r.integers(2, 6))]
    src = "def f(x, W):\n    h = x\n" + "".join(f"    h = {s}\n" for s in steps) + "    return h, h.sum()\n"
    ns = {"ember": ember, "F": F}
    exec(src, ns)
    return ns["f"], src


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_shape_fuzzer_agrees_with_eager(backend, monkeypatch):
    # inductor: a trusted entry runs its one native build (sizes as arguments) at every new size, and
    # EMBER_DYNAMIC_CHECK renders the program again at each size: the C must be the build's
    monkeypatch.setenv("EMBER_DYNAMIC_CHECK", "1")
    from ember.compiler import native_sym
    few = native = 0
    for seed in range(16):
        ember.compiler.reset()
        f, src = _fuzz_program(seed)
        cf = ember.compile(f, backend=backend)
        runners = native_sym.STATS["size_runners"]
        r = np.random.default_rng(seed + 1000)
        W = ember.from_numpy(r.standard_normal((8, 8)).astype(np.float32)).requires_grad_()
        for call in range(6):
            B, T = int(r.integers(2, 6)), int(r.integers(2, 12))
            xn = r.standard_normal((B, T, 8)).astype(np.float32)
            got = []
            for g in (cf, f):
                x = ember.from_numpy(xn.copy()).requires_grad_()
                W.grad = None
                h, s = g(x, W)
                s.backward()
                got.append((h, x.grad, W.grad))
            for a, b, what in zip(got[0], got[1], ("output", "x.grad", "W.grad")):
                if b is None:
                    assert a is None, f"{what}, call {call} ({B}, {T}):\n{src}"
                else:
                    _close(a, b, f"{what}, call {call} ({B}, {T}):\n{src}", rtol=1e-4, atol=1e-4)
        few += counters["captures"] <= 3
        native += native_sym.STATS["size_runners"] > runners
    assert few >= 8         # programs whose six sizes took at most three traces (the rest: guards, static)
    if backend == "inductor":
        assert native >= 8  # programs whose new sizes ran the shared native build


def test_a_replay_whose_shapes_disagree_with_the_formulas_is_caught():
    # make a trusted entry's program wrong on purpose (one value's size taken as a constant): the first
    # replay at a new size finds the shape differs, undoes nothing it should not, and the call traces
    f = lambda x: (x * 2).cumsum(0) + 1      # noqa: E731
    cf = ember.compile(f, backend="aot_eager")
    for n in (4, 6, 7):
        cf(ember.randn(n, 3))
    assert counters["captures"] == 2
    e = next(e for e in cf.entries if e.kind == "dynamic")
    v = next(v for v in e.program.values if v.kind == "node")
    v.sym = None                                # the corruption
    x = ember.randn(9, 3)
    _close(cf(x), f(x), "after the mismatch")
    assert e.broken and counters["captures"] == 3
    x = ember.randn(10, 3)
    _close(cf(x), f(x), "sizes static from then on")
    assert counters["captures"] == 4


def test_mark_dynamic_specialised_raises_constraint_violation():

    from ember._dynamo.exc import ConstraintViolationError

    def pinned(x):
        return x.view(2, 4) * 2

    def halves(x):
        return x.view(2, -1) * 2

    x = ember.randn(8)
    ember._dynamo.mark_dynamic(x, 0)
    with pytest.raises(ConstraintViolationError, match=r"L\['x'\]\.size\(\)\[0\].*constant \(8\)"):
        ember.compile(pinned)(x)
    assert issubclass(ConstraintViolationError, RuntimeError)
    x = ember.randn(8)
    ember._dynamo.mark_dynamic(x, 0)              # s0 % 2 == 0 leaves the size free: no error
    np.testing.assert_allclose(ember.compile(halves)(x).numpy(), x.numpy().reshape(2, 4) * 2)
    x = ember.randn(8)
    ember._dynamo.maybe_mark_dynamic(x, 0)        # maybe_: specialising is allowed
    np.testing.assert_allclose(ember.compile(pinned)(x).numpy(), x.numpy().reshape(2, 4) * 2)


def test_causal_attention_keeps_its_length_symbolic():
    """``scaled_dot_product_attention(is_causal=True)`` builds its mask from the symbolic lengths while
    capturing: a third length replays (it used to pin the length: one capture per length)."""
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    cf = ember.compile(f)
    for t in [5, 7, 9, 12, 30, 7]:
        q, k, v = (ember.randn(2, 2, t, 8) for _ in range(3))
        _close(cf(q, k, v), f(q, k, v), f"t={t}", rtol=1e-5, atol=1e-5)
    assert counters["captures"] == 2 and counters["dynamic_fallbacks"] == 0
