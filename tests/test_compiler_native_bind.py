"""The native runner's per-call binding (compiler/native.py ``_bind``): inputs that overlap in memory in a
program that writes run in the interpreter (NumPy's aliasing, as eagerly), also after calls with
distinct inputs whose check the runner skips while the same arrays come back; the ``.grad`` tensors a
compiled step sets and the version counters of what it writes, call after call."""
import numpy as np

import ember


def _step(x, y):
    x.add_(y)             # NumPy reads all of y before writing x: a C loop over overlapping memory would not
    return x * 2


N = 64


def _eager(vals, xs, ys):
    base = ember.tensor(vals)
    out = _step(base[xs:xs + N], base[ys:ys + N])
    return out.numpy(), base.numpy()


def test_overlapping_inputs_after_distinct_ones_give_eager_results():
    fn = ember.compile(_step)
    a, b = ember.arange(float(N)), ember.ones(N)
    for _ in range(4):                        # trace, build, then replays with the same arrays
        out = fn(a, b)
    want_a = np.arange(float(N), dtype=np.float32) + 4
    np.testing.assert_allclose(a.numpy(), want_a)
    np.testing.assert_allclose(out.numpy(), want_a * 2)
    for xs, ys in ((2, 0), (0, 2), (0, N), (2, 0)):
        vals = np.arange(1.0, 2 * N + 1, dtype=np.float32)
        base = ember.tensor(vals)
        got = fn(base[xs:xs + N], base[ys:ys + N])
        want_out, want_base = _eager(vals, xs, ys)
        np.testing.assert_allclose(got.numpy(), want_out)
        np.testing.assert_allclose(base.numpy(), want_base)
    out = fn(a, b)                            # the distinct arrays again
    np.testing.assert_allclose(a.numpy(), want_a + 1)
    np.testing.assert_allclose(out.numpy(), (want_a + 1) * 2)


def test_a_compiled_step_sets_grads_and_bumps_versions_each_call():
    ember.manual_seed(0)
    model = ember.nn.Linear(6, 3)
    opt = ember.optim.Adam(model.parameters(), lr=0.1)
    x, y = ember.randn(5, 6), ember.randn(5, 3)

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    ember.manual_seed(0)
    ref = ember.nn.Linear(6, 3)
    ref_opt = ember.optim.Adam(ref.parameters(), lr=0.1)
    fn = ember.compile(step)
    seen = []
    for i in range(5):
        v0 = model.weight._version
        loss = fn(x, y)
        ref_opt.zero_grad()
        ref_loss = ((ref(x) - y) ** 2).mean()
        ref_loss.backward()
        ref_opt.step()
        np.testing.assert_allclose(loss.numpy(), ref_loss.detach().numpy(), rtol=1e-5)
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7)
            assert p.grad.shape == p.shape
        assert model.weight._version > v0     # the update wrote the weight
        seen.append(model.weight.grad)
    assert len({id(g) for g in seen}) == len(seen)   # a new .grad tensor per step, as eagerly
