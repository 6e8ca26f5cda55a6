"""ember/ops/random_ops.py: sampling statistics, determinism under manual_seed / Generator objects,
shapes and dtypes like torch, errors like torch, and the range/identity creation ops against torch."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember

N = 200_000


from oracle import same_error  # noqa: E402


def same_meta(fn):
    """Shapes, dtypes and requires_grad agree with torch (values are random in both)."""
    t, e = fn(torch), fn(ember)
    ts = t if isinstance(t, (tuple, list)) else [t]
    es = e if isinstance(e, (tuple, list)) else [e]
    for a, b in zip(ts, es):
        assert tuple(b.shape) == tuple(a.shape), (tuple(b.shape), tuple(a.shape))
        assert b.dtype.name == str(a.dtype).replace("torch.", "")
        assert b.requires_grad == a.requires_grad


def same_values(fn, rtol=1e-6, atol=0.0):
    t, e = fn(torch), fn(ember)
    assert tuple(e.shape) == tuple(t.shape)
    assert e.dtype.name == str(t.dtype).replace("torch.", "")
    np.testing.assert_allclose(np.asarray(e._data, dtype=np.float64), t.detach().double().numpy(), rtol=rtol, atol=atol)


def arr(t):
    return np.asarray(t._data, dtype=np.float64)


# ---- determinism --------------------------------------------------------------------------------------

def _draw_everything(gen=None):
    out = [ember.rand(5, generator=gen), ember.randn(2, 3, generator=gen), ember.randint(3, 9, (4,), generator=gen),
           ember.randperm(6, generator=gen), ember.normal(0.0, 2.0, (3,), generator=gen),
           ember.normal(ember.zeros(3), ember.ones(3), generator=gen),
           ember.bernoulli(ember.full((6,), 0.5), generator=gen),
           ember.multinomial(ember.tensor([0.2, 0.3, 0.5]), 2, generator=gen),
           ember.poisson(ember.full((4,), 3.0), generator=gen)]
    x = ember.empty(4)
    for f in (lambda: x.uniform_(generator=gen), lambda: x.normal_(generator=gen),
              lambda: x.bernoulli_(0.3, generator=gen), lambda: x.random_(10, generator=gen),
              lambda: x.exponential_(generator=gen), lambda: x.geometric_(0.4, generator=gen),
              lambda: x.log_normal_(generator=gen), lambda: x.cauchy_(generator=gen)):
        out.append(f().clone())
    return [o.tolist() for o in out]


def test_manual_seed_repeats():
    ember.manual_seed(1234)
    a = _draw_everything()
    ember.manual_seed(1234)
    b = _draw_everything()
    assert a == b
    ember.manual_seed(1235)
    assert _draw_everything() != a


def test_generator_objects_are_independent_of_the_default():
    g1 = ember.Generator().manual_seed(7)
    ember.manual_seed(0)
    a = _draw_everything(g1)
    ref = ember.rand(3).tolist()         # the default generator did not move
    ember.manual_seed(0)
    assert ember.rand(3).tolist() == ref
    g2 = ember.Generator()
    g2.manual_seed(7)
    assert _draw_everything(g2) == a
    # get_state / set_state replays
    g3 = ember.Generator().manual_seed(3)
    st = g3.get_state()
    x = ember.randn(4, generator=g3).tolist()
    g3.set_state(st)
    assert ember.randn(4, generator=g3).tolist() == x


_DRAWS = ("(ember.rand(3).tolist(), ember.randint(0, 100, (3,)).tolist(), ember.randperm(5).tolist(), "
          "ember.randn(2).tolist(), ember.empty(3).normal_().tolist())")


def test_manual_seed_repeats_run_after_run():
    # a fresh interpreter and this one draw the same numbers from the same seed
    code = f"import ember; ember.manual_seed(42); print(repr({_DRAWS}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    ember.manual_seed(42)
    assert other.strip() == repr(eval(_DRAWS))


# ---- statistics ---------------------------------------------------------------------------------------

def test_rand_and_randn_statistics():
    ember.manual_seed(0)
    u = arr(ember.rand(N))
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.std() - 12 ** -0.5) < 0.005
    z = arr(ember.randn(N, dtype=ember.float64))
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    for dt in (ember.float16, ember.bfloat16):
        h = ember.rand(N, dtype=dt)
        assert h.dtype is dt
        v = arr(h)
        assert v.min() >= 0 and v.max() < 1 and abs(v.mean() - 0.5) < 0.01
        assert abs(arr(ember.randn(N, dtype=dt)).std() - 1) < 0.02


def test_randint_randperm():
    ember.manual_seed(1)
    r = ember.randint(-3, 4, (N,))
    v = arr(r)
    assert r.dtype is ember.int64
    assert set(np.unique(v)) == set(range(-3, 4))
    assert abs(v.mean()) < 0.03
    p = ember.randperm(1000)
    assert p.dtype is ember.int64 and sorted(p.tolist()) == list(range(1000))
    assert p.tolist() != list(range(1000))
    assert ember.randperm(5, dtype=ember.float32).dtype is ember.float32


def test_normal_overloads_statistics():
    ember.manual_seed(2)
    mean = ember.tensor([[-5.0], [0.0], [10.0]])
    std = ember.full((N // 10,), 2.0)
    s = arr(ember.normal(mean, std))
    assert s.shape == (3, N // 10)
    np.testing.assert_allclose(s.mean(1), [-5, 0, 10], atol=0.05)
    np.testing.assert_allclose(s.std(1), [2, 2, 2], atol=0.05)
    s = arr(ember.normal(3.0, ember.full((N,), 0.5)))
    assert abs(s.mean() - 3) < 0.01 and abs(s.std() - 0.5) < 0.01
    s = arr(ember.normal(ember.full((N,), -1.0), 4.0))
    assert abs(s.mean() + 1) < 0.05 and abs(s.std() - 4) < 0.05
    s = arr(ember.normal(2.0, 3.0, (N,)))
    assert abs(s.mean() - 2) < 0.05 and abs(s.std() - 3) < 0.05


def test_bernoulli_poisson_statistics():
    ember.manual_seed(3)
    p = ember.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).expand(N // 5, 5)
    b = arr(ember.bernoulli(p))
    np.testing.assert_allclose(b.mean(0), [0, 0.1, 0.5, 0.9, 1], atol=0.01)
    assert set(np.unique(b)) <= {0.0, 1.0}
    b = arr(ember.bernoulli(ember.zeros(N, dtype=ember.int64), 0.25))
    assert abs(b.mean() - 0.25) < 0.01
    rates = ember.tensor([0.0, 0.5, 4.0, 30.0]).expand(N // 4, 4)
    k = arr(ember.poisson(rates))
    np.testing.assert_allclose(k.mean(0), [0, 0.5, 4, 30], rtol=0.02, atol=0.01)
    np.testing.assert_allclose(k.var(0), [0, 0.5, 4, 30], rtol=0.05, atol=0.01)


def test_multinomial_statistics():
    ember.manual_seed(4)
    probs = ember.tensor([[1.0, 2.0, 0.0, 7.0], [0.0, 0.0, 5.0, 5.0]])
    s = ember.multinomial(probs, N // 4, replacement=True)
    assert s.dtype is ember.int64 and s.shape == (2, N // 4)
    c0 = np.bincount(s._data[0], minlength=4) / (N // 4)
    c1 = np.bincount(s._data[1], minlength=4) / (N // 4)
    np.testing.assert_allclose(c0, [0.1, 0.2, 0, 0.7], atol=0.01)
    np.testing.assert_allclose(c1, [0, 0, 0.5, 0.5], atol=0.01)
    # without replacement: distinct per row, zero-probability categories come last
    rows = ember.multinomial(ember.tensor([1.0, 2.0, 0.0, 7.0]).expand(20000, 4), 3)
    assert all(len(set(r)) == 3 for r in rows._data.tolist())
    assert (rows._data != 2).all()
    first = np.bincount(rows._data[:, 0], minlength=4) / 20000
    np.testing.assert_allclose(first, [0.1, 0.2, 0, 0.7], atol=0.015)
    assert ember.multinomial(ember.tensor([1.0, 0.0, 0.0]), 3).tolist()[0] == 0
    assert sorted(ember.multinomial(ember.tensor([1.0, 0.0, 0.0]), 3).tolist()) == [0, 1, 2]


def test_inplace_samplers_statistics():
    ember.manual_seed(5)
    x = ember.empty(N, dtype=ember.float64)
    v = arr(x.uniform_(-2, 3))
    assert v.min() >= -2 and v.max() < 3 and abs(v.mean() - 0.5) < 0.02
    v = arr(x.normal_(1.5, 0.5))
    assert abs(v.mean() - 1.5) < 0.01 and abs(v.std() - 0.5) < 0.01
    v = arr(x.bernoulli_(0.3))
    assert abs(v.mean() - 0.3) < 0.01
    v = arr(x.bernoulli_(ember.tensor([0.0, 1.0]).repeat(N // 2)))
    assert v[0::2].sum() == 0 and v[1::2].min() == 1
    v = arr(x.exponential_(4.0))
    assert v.min() >= 0 and abs(v.mean() - 0.25) < 0.005
    v = arr(x.geometric_(0.25))
    assert v.min() >= 1 and abs(v.mean() - 4) < 0.05 and (v == np.round(v)).all()
    v = arr(x.log_normal_(0.5, 0.3))
    assert v.min() > 0 and abs(np.log(v).mean() - 0.5) < 0.01 and abs(np.log(v).std() - 0.3) < 0.01
    v = arr(x.cauchy_(2.0, 0.5))
    assert abs(np.median(v) - 2) < 0.02 and abs(np.percentile(v, 75) - 2.5) < 0.03


def test_random_ranges_per_dtype():
    ember.manual_seed(6)
    v = arr(ember.empty(N).random_(3, 7))
    assert set(np.unique(v)) == {3, 4, 5, 6}
    v = arr(ember.empty(N).random_(5))
    assert set(np.unique(v)) == {0, 1, 2, 3, 4}
    v = arr(ember.empty(1000).random_())
    assert v.min() >= 0 and v.max() <= 2 ** 24 and v.max() > 2 ** 20 and (v == np.round(v)).all()
    v = ember.empty(1000, dtype=ember.uint8).random_()._data
    assert v.dtype == np.uint8 and v.max() > 200
    v = ember.empty(1000, dtype=ember.bool).random_()._data
    assert set(np.unique(v)) == {False, True}
    v = ember.empty(1000, dtype=ember.int64).random_()._data
    assert v.min() >= 0 and v.max() > 2 ** 60
    v = ember.empty(1000, dtype=ember.int8).random_(-3, None)._data
    assert v.min() >= -3 and v.max() == 127 or v.max() > 100
    v = ember.empty(N, dtype=ember.int32).random_(-5, -3)._data
    assert set(np.unique(v)) == {-5, -4}


# ---- shapes / dtypes / requires_grad like torch ----------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.rand(2, 3),
    lambda m: m.rand((2, 3)),
    lambda m: m.rand(size=(2, 3)),
    lambda m: m.rand(()),
    lambda m: m.rand(0, 3),
    lambda m: m.rand(2, dtype=m.float64, requires_grad=True),
    lambda m: m.rand(2, dtype=m.float16),
    lambda m: m.randn(m.Size([2, 1])),
    lambda m: m.randn(3, dtype=m.bfloat16),
    lambda m: m.randint(5, (3,)),
    lambda m: m.randint(2, 5, (3, 2)),
    lambda m: m.randint(5, size=(3,)),
    lambda m: m.randint(low=1, high=5, size=(3,)),
    lambda m: m.randint(5, (3,), dtype=m.float32),
    lambda m: m.randint(0, 2, (3,), dtype=m.bool),
    lambda m: m.randint(3, (2,), dtype=m.float16, requires_grad=True),
    lambda m: m.randperm(5),
    lambda m: m.randperm(0),
    lambda m: m.randperm(5, dtype=m.float32),
    lambda m: m.normal(m.zeros(3), m.ones(2, 1)),
    lambda m: m.normal(m.zeros(3), m.ones(3, dtype=m.float64)),
    lambda m: m.normal(m.zeros(3, dtype=m.float64), m.ones(3)),
    lambda m: m.normal(0.0, m.ones(3, dtype=m.float64)),
    lambda m: m.normal(m.zeros(3)),
    lambda m: m.normal(m.zeros(0), 1.0),
    lambda m: m.normal(0.0, 1.0, (2, 3)),
    lambda m: m.normal(0.0, 1.0, size=(2, 3), dtype=m.float64),
    lambda m: m.normal(0, 1, (2,)),
    lambda m: m.normal(m.zeros(3, requires_grad=True), m.ones(3)),
    lambda m: m.normal(1.0, m.ones(3, requires_grad=True)),
    lambda m: m.bernoulli(m.full((3,), 0.5)),
    lambda m: m.bernoulli(m.full((3,), 0.5, dtype=m.float64), 0.2),
    lambda m: m.bernoulli(m.full((3,), 1), 0.5),
    lambda m: m.bernoulli(m.full((3,), 0.5, requires_grad=True)),
    lambda m: m.bernoulli(m.full((3,), 0.5, requires_grad=True), 0.3),
    lambda m: m.full((3,), 0.5).bernoulli(),
    lambda m: m.poisson(m.full((2, 3), 2.0)),
    lambda m: m.poisson(m.full((3,), 2.0, requires_grad=True)),
    lambda m: m.multinomial(m.tensor([0.1, 0.2, 0.7]), 2),
    lambda m: m.multinomial(m.ones(2, 3), 5, True),
    lambda m: m.multinomial(m.ones(0, 3), 2),
    lambda m: m.multinomial(m.ones(3, requires_grad=True), 2),
    lambda m: m.tensor([1.0, 2.0]).multinomial(4, replacement=True),
    lambda m: m.rand_like(m.ones(2, dtype=m.float64)),
    lambda m: m.rand_like(m.ones(2), requires_grad=True),
    lambda m: m.randn_like(m.ones(2, 3), dtype=m.float16),
    lambda m: m.randint_like(m.ones(2, dtype=m.float64), 5),
    lambda m: m.randint_like(m.ones(2, dtype=m.int32), 3, 5),
    lambda m: m.randint_like(m.ones(2), high=5),
    lambda m: m.zeros(3, dtype=m.float16).uniform_(0, 1),
    lambda m: m.zeros(3, dtype=m.int64).bernoulli_(0.5),
    lambda m: m.zeros(3, dtype=m.bool).bernoulli_(m.full((3,), 0.7)),
    lambda m: m.zeros(3, dtype=m.int64).geometric_(0.5),
    lambda m: m.zeros(3, dtype=m.bfloat16).random_(),
    lambda m: m.zeros(3).random_(**{"from": 2, "to": 3}),
    lambda m: m.zeros(3).uniform_(**{"from": 2, "to": 3}),
    lambda m: m.zeros(3).random_(to=3),
])
def test_shapes_and_dtypes_like_torch(fn):
    same_meta(fn)


def test_out_arguments():
    for lib in (torch, ember):
        o = lib.empty(0, dtype=lib.float64)
        assert lib.rand(3, out=o) is o and o.dtype == lib.float64 and tuple(o.shape) == (3,)
        o = lib.empty(0, dtype=lib.int32)
        assert lib.randint(5, (4,), out=o) is o and o.dtype == lib.int32 and tuple(o.shape) == (4,)
        assert lib.randperm(4, out=o) is o and sorted(o.tolist()) == [0, 1, 2, 3]
        o = lib.empty(3)
        assert lib.normal(lib.zeros(3), lib.ones(3), out=o) is o
        assert lib.normal(0.0, 1.0, (3,), out=o) is o
        assert lib.bernoulli(lib.full((3,), 0.5), out=o) is o
        o = lib.empty(0, dtype=lib.int64)
        assert lib.multinomial(lib.ones(3), 2, out=o) is o and tuple(o.shape) == (2,)
        o = lib.empty(0, dtype=lib.float64)
        assert lib.linspace(0, 1, 3, out=o) is o and o.dtype == lib.float64
        assert lib.eye(2, out=o) is o and tuple(o.shape) == (2, 2)
        assert lib.logspace(0, 1, 3, out=o) is o


# ---- errors like torch ------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.rand(2, dtype=m.int64),
    lambda m: m.randn(2, dtype=m.int64),
    lambda m: m.rand(-1),
    lambda m: m.randint(5, 5, (3,)),
    lambda m: m.randint(5, (3,), dtype=m.bool),
    lambda m: m.randint(300, (3,), dtype=m.uint8),
    lambda m: m.randint(-1, 2, (3,), dtype=m.uint8),
    lambda m: m.randint(5.5, (3,)),
    lambda m: m.randperm(-1),
    lambda m: m.randperm(257, dtype=m.uint8),
    lambda m: m.normal(m.zeros(3), m.ones(4)),
    lambda m: m.normal(0.0, -1.0, (2, 3)),
    lambda m: m.normal(m.zeros(3), -1.0),
    lambda m: m.normal(m.zeros(3), -m.ones(3)),
    lambda m: m.normal(m.zeros(3, dtype=m.int64), m.ones(3)),
    lambda m: m.normal(0.0, m.ones(3, dtype=m.int64)),
    lambda m: m.bernoulli(m.full((3,), 1.5)),
    lambda m: m.bernoulli(m.full((3,), 0.5), 1.5),
    lambda m: m.bernoulli(m.full((3,), 1)),
    lambda m: m.poisson(m.full((3,), -2.0)),
    lambda m: m.poisson(m.full((3,), 2)),
    lambda m: m.multinomial(m.tensor([0.1, 0.9]), 3),
    lambda m: m.multinomial(m.tensor([0.1, 0.9]), 0),
    lambda m: m.multinomial(m.tensor([0.1, 0.9]), -1),
    lambda m: m.multinomial(m.ones(1, 1, 3), 1),
    lambda m: m.multinomial(m.tensor(1.0), 1),
    lambda m: m.multinomial(m.tensor([1, 2]), 1),
    lambda m: m.multinomial(m.tensor([-1.0, 2.0]), 1),
    lambda m: m.multinomial(m.tensor([float("nan"), 2.0]), 1),
    lambda m: m.multinomial(m.tensor([float("inf"), 2.0]), 1),
    lambda m: m.multinomial(m.tensor([0.0, 0.0]), 1),
    lambda m: m.multinomial(m.tensor([[0.0, 0.0], [1.0, 1.0]]), 1, True),
    lambda m: m.multinomial(m.ones(2, 0), 2),
    lambda m: m.multinomial(m.ones(2, 0), 2, True),
    lambda m: m.multinomial(m.ones(3), 2, out=m.empty(0, dtype=m.int32)),
    lambda m: m.rand_like(m.ones(2, dtype=m.int64)),
    lambda m: m.randn_like(m.ones(2, dtype=m.int64)),
    lambda m: m.randint_like(m.ones(2), 6, 5),
    lambda m: m.zeros(3).uniform_(2, 1),
    lambda m: m.zeros(3, dtype=m.int64).uniform_(),
    lambda m: m.zeros(3).normal_(0, -1),
    lambda m: m.zeros(3, dtype=m.int64).normal_(),
    lambda m: m.zeros(3).bernoulli_(1.5),
    lambda m: m.zeros(3).bernoulli_(m.full((2,), 0.7)),
    lambda m: m.zeros(3).bernoulli_(m.full((3,), 1.7)),
    lambda m: m.zeros(3).random_(5, 3),
    lambda m: m.zeros(3, dtype=m.int8).random_(-200, 3),
    lambda m: m.zeros(3, dtype=m.int32).random_(0, 2 ** 33),
    lambda m: m.zeros(3, dtype=m.bool).random_(0, 3),
    lambda m: m.zeros(3, dtype=m.int8).random_(-3),
    lambda m: m.zeros(3).exponential_(0),
    lambda m: m.zeros(3).exponential_(-1),
    lambda m: m.zeros(3, dtype=m.int64).exponential_(),
    lambda m: m.zeros(3).geometric_(0),
    lambda m: m.zeros(3).geometric_(1),
    lambda m: m.zeros(3).log_normal_(1, 0),
    lambda m: m.zeros(3, dtype=m.int64).log_normal_(),
    lambda m: m.zeros(3).cauchy_(0, -1),
    lambda m: m.zeros(3, dtype=m.int64).cauchy_(),
    lambda m: m.zeros(3, requires_grad=True).uniform_(),
    lambda m: m.zeros(3, requires_grad=True).normal_(),
])
def test_errors_like_torch(fn):
    same_error(fn)


@pytest.mark.parametrize("fn", [
    lambda m: m.rand(),
    lambda m: m.randint(5),
    lambda m: m.normal(1.0, 2.0),
    lambda m: m.normal(m.zeros(2), m.ones(2), (2,)),
    lambda m: m.randint(5, (3,), requires_grad=True),
])
def test_argument_errors(fn):
    same_error(fn, exact=False)


def test_bernoulli_with_float_p_has_no_derivative():
    for lib in (torch, ember):
        p = lib.full((3,), 0.5, requires_grad=True)
        y = lib.bernoulli(p, 0.3)
        assert y.requires_grad
        with pytest.raises(RuntimeError, match="derivative for aten::bernoulli is not implemented"):
            y.sum().backward()


def test_inplace_samplers_under_no_grad_on_leaf():
    w = ember.zeros(4, 3, requires_grad=True)
    with ember.no_grad():
        w.uniform_(-1, 1)
        w.select(0, 0).normal_()
    assert w.requires_grad and w.grad_fn is None
    assert (arr(w.detach()) != 0).all()


def test_default_dtype_is_followed():
    old = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        for r in (ember.rand(2), ember.randn(2), ember.normal(0.0, 1.0, (2,)), ember.linspace(0, 1, 3),
                  ember.logspace(0, 1, 3), ember.eye(2), ember.empty_strided((2,), (1,))):
            assert r.dtype is ember.float64
        assert ember.randint(3, (2,)).dtype is ember.int64 and ember.randperm(3).dtype is ember.int64
    finally:
        ember.set_default_dtype(old)


# ---- linspace / logspace / eye / empty_strided ---------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.linspace(0, 1, 5),
    lambda m: m.linspace(-1.3, 2.7, 11),
    lambda m: m.linspace(-1.3, 2.7, 11, dtype=m.float64),
    lambda m: m.linspace(0, 10, 5, dtype=m.int64),
    lambda m: m.linspace(0, 10, 4, dtype=m.int64),
    lambda m: m.linspace(-3, 10, 7, dtype=m.int32),
    lambda m: m.linspace(0, 1, 3, dtype=m.int64),
    lambda m: m.linspace(5, -5, 6),
    lambda m: m.linspace(0, 1, 1),
    lambda m: m.linspace(0, 1, 0),
    lambda m: m.linspace(m.tensor(0.0), m.tensor(1.0), 3),
    lambda m: m.linspace(0, 1, 3, requires_grad=True),
    lambda m: m.logspace(0, 2, 3),
    lambda m: m.logspace(0, 2, 3, base=2),
    lambda m: m.logspace(0, 2, 3, 2),
    lambda m: m.logspace(0, 3, 4, dtype=m.int64),
    lambda m: m.logspace(0, 1, 3, dtype=m.int64),
    lambda m: m.logspace(-1, 1, 5, dtype=m.float64),
    lambda m: m.eye(3),
    lambda m: m.eye(2, 3),
    lambda m: m.eye(3, 2, dtype=m.int32),
    lambda m: m.eye(2, 3, dtype=m.bool),
    lambda m: m.eye(0),
    lambda m: m.eye(2, out=m.empty(0, dtype=m.int64)),
])
def test_ranges_values(fn):
    same_values(fn, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn", [
    lambda m: m.linspace(0, 1, -1),
    lambda m: m.linspace(m.tensor([0.0]), m.tensor(1.0), 3),
    lambda m: m.linspace(0, 1, 3, dtype=m.bool),
    lambda m: m.logspace(0, 1, -1),
    lambda m: m.eye(-1),
    lambda m: m.eye(2, -1),
    lambda m: m.empty_strided((2, 3), (1,)),
    lambda m: m.empty_strided((2, -3), (1, 2)),
    lambda m: m.empty_strided((2, 3), (1, -2)),
])
def test_ranges_errors(fn):
    same_error(fn)


def test_linspace_argument_error():
    same_error(lambda m: m.linspace(0, 1), exact=False)


@pytest.mark.parametrize("size,stride", [((2, 3), (1, 2)), ((2, 3), (0, 1)), ((), ()), ((0, 3), (3, 1)),
                                         ((4, 2, 3), (1, 12, 4))])
def test_empty_strided(size, stride):
    for dt in ("float32", "int32"):
        t = torch.empty_strided(size, stride, dtype=getattr(torch, dt))
        e = ember.empty_strided(size, stride, dtype=getattr(ember, dt))
        assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride() and e.dtype.name == dt
    e = ember.empty_strided((2, 3), (1, 2), requires_grad=True)
    assert e.requires_grad and e.is_contiguous() is False
