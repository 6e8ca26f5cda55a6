"""nn.init against torch: gains and fans exactly, deterministic fills exactly, random schemes by their
distribution (bounds, moments, orthogonality, sparsity), generator= reproducibility, no autograd history."""
import math
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn.init as einit
import torch.nn.init as tinit


@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("conv_transpose3d", None),
                                        ("sigmoid", None), ("tanh", None), ("relu", None), ("leaky_relu", None),
                                        ("leaky_relu", 0.2), ("leaky_relu", 1), ("selu", None)])
def test_calculate_gain_matches_torch(name, param):
    assert einit.calculate_gain(name, param) == pytest.approx(tinit.calculate_gain(name, param))


def test_calculate_gain_errors():
    for args in [("foo",), ("leaky_relu", "x"), ("leaky_relu", True)]:
        with pytest.raises(ValueError):
            tinit.calculate_gain(*args)
        with pytest.raises(ValueError):
            einit.calculate_gain(*args)


@pytest.mark.parametrize("shape", [(3, 4), (5, 2, 3), (6, 4, 3, 2), (2, 3, 1, 1, 4)])
def test_fan_in_and_fan_out_match_torch(shape):
    assert einit._calculate_fan_in_and_fan_out(ember.empty(shape)) == \
        tinit._calculate_fan_in_and_fan_out(torch.empty(shape))


def test_fan_errors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        einit._calculate_fan_in_and_fan_out(ember.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        einit.kaiming_uniform_(ember.empty(3, 4), mode="fan_avg")


def test_deterministic_fills_match_torch():
    for fn in ["ones_", "zeros_", "eye_"]:
        e, t = ember.empty(3, 5), torch.empty(3, 5)
        assert getattr(einit, fn)(e) is e
        getattr(tinit, fn)(t)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    e, t = ember.empty(2, 3), torch.empty(2, 3)
    einit.constant_(e, 0.25)
    tinit.constant_(t, 0.25)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    for shape, groups in [((4, 3, 3), 1), ((6, 2, 3, 3), 2), ((4, 4, 1, 3, 3), 2), ((2, 5, 4, 4), 1)]:
        e, t = ember.empty(shape), torch.empty(shape)
        einit.dirac_(e, groups)
        tinit.dirac_(t, groups)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    with pytest.raises(ValueError):
        einit.eye_(ember.empty(2, 3, 4))
    with pytest.raises(ValueError):
        einit.dirac_(ember.empty(2, 3))
    with pytest.raises(ValueError):
        einit.dirac_(ember.empty(3, 3, 3), groups=2)


def test_dirac_weight_is_identity_convolution():
    w = einit.dirac_(ember.empty(3, 3, 3, 3))
    x = ember.randn(2, 3, 5, 5)
    y = ember.nn.functional.conv2d(x, w, padding=1)
    np.testing.assert_allclose(y.numpy(), x.numpy(), rtol=1e-6)


def _bounds_and_var(arr, bound):
    assert np.abs(arr).max() <= bound
    assert np.abs(arr).max() > 0.98 * bound
    assert abs(arr.var() - bound ** 2 / 3) < 0.03 * bound ** 2


def test_uniform_and_normal():
    ember.manual_seed(0)
    u = einit.uniform_(ember.empty(200, 300), -2.0, 3.0).numpy()
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.02
    n = einit.normal_(ember.empty(200, 300), 1.0, 0.5).numpy()
    assert abs(n.mean() - 1.0) < 0.01 and abs(n.std() - 0.5) < 0.01


@pytest.mark.parametrize("shape", [(300, 200), (64, 32, 3, 3)])
def test_xavier_and_kaiming_statistics(shape):
    ember.manual_seed(1)
    fan_in, fan_out = einit._calculate_fan_in_and_fan_out(ember.empty(shape))
    gain = 1.7
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    _bounds_and_var(einit.xavier_uniform_(ember.empty(shape), gain=gain).numpy(), a)
    xn = einit.xavier_normal_(ember.empty(shape), gain=gain).numpy()
    assert abs(xn.std() - gain * math.sqrt(2.0 / (fan_in + fan_out))) < 0.03 * xn.std()
    for mode, fan in [("fan_in", fan_in), ("fan_out", fan_out)]:
        for nl, p in [("relu", 0), ("leaky_relu", math.sqrt(5)), ("tanh", 0)]:
            gain = tinit.calculate_gain(nl, p)
            bound = gain * math.sqrt(3.0 / fan)
            _bounds_and_var(einit.kaiming_uniform_(ember.empty(shape), a=p, mode=mode, nonlinearity=nl).numpy(), bound)
            kn = einit.kaiming_normal_(ember.empty(shape), a=p, mode=mode, nonlinearity=nl).numpy()
            assert abs(kn.std() - gain / math.sqrt(fan)) < 0.03 * kn.std()


def test_trunc_normal_statistics():
    ember.manual_seed(2)
    t = einit.trunc_normal_(ember.empty(400, 250), mean=0.5, std=1.0, a=-1.0, b=1.5).numpy()
    assert t.min() >= -1.0 and t.max() <= 1.5
    ref = torch.empty(400, 250)
    tinit.trunc_normal_(ref, mean=0.5, std=1.0, a=-1.0, b=1.5, generator=torch.Generator().manual_seed(0))
    assert abs(t.mean() - ref.mean().item()) < 0.01
    assert abs(t.std() - ref.std().item()) < 0.01
    with pytest.warns(UserWarning, match="mean is more than 2 std"):
        einit.trunc_normal_(ember.empty(3, 3), mean=10.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (4, 3, 2, 2)])
def test_orthogonal(shape):
    w = einit.orthogonal_(ember.empty(shape), gain=2.0).numpy().reshape(shape[0], -1)
    rows, cols = w.shape
    if rows <= cols:
        np.testing.assert_allclose(w @ w.T, 4.0 * np.eye(rows), atol=1e-5)
    else:
        np.testing.assert_allclose(w.T @ w, 4.0 * np.eye(cols), atol=1e-5)
    with pytest.raises(ValueError):
        einit.orthogonal_(ember.empty(3))


def test_sparse():
    w = einit.sparse_(ember.empty(10, 40), sparsity=0.3, std=0.5).numpy()
    assert ((w == 0).sum(0) >= 3).all()
    assert abs(w[w != 0].std() - 0.5) < 0.15
    with pytest.raises(ValueError):
        einit.sparse_(ember.empty(3, 3, 3), 0.5)


def test_generator_reproducibility():
    fns = [lambda t, g: einit.uniform_(t, generator=g), lambda t, g: einit.normal_(t, generator=g),
           lambda t, g: einit.xavier_uniform_(t, generator=g), lambda t, g: einit.kaiming_normal_(t, generator=g),
           lambda t, g: einit.trunc_normal_(t, generator=g), lambda t, g: einit.orthogonal_(t, generator=g),
           lambda t, g: einit.sparse_(t, 0.5, generator=g)]
    for fn in fns:
        a = fn(ember.empty(5, 4), ember.Generator().manual_seed(7)).numpy()
        b = fn(ember.empty(5, 4), ember.Generator().manual_seed(7)).numpy()
        c = fn(ember.empty(5, 4), ember.Generator().manual_seed(8)).numpy()
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)


def test_init_records_no_history_and_bumps_version():
    p = ember.nn.Parameter(ember.empty(4, 3))
    v = p._version
    for fn in [einit.kaiming_uniform_, einit.xavier_normal_, einit.orthogonal_, einit.zeros_, einit.eye_,
               einit.trunc_normal_]:
        assert fn(p) is p
        assert p.grad_fn is None and p.requires_grad and p.is_leaf
    assert p._version > v
    (p * 2).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.full((4, 3), 2.0, dtype=np.float32))


def test_zero_element_kaiming_warns_and_deprecated_aliases():
    with pytest.warns(UserWarning, match="zero-element"):
        einit.kaiming_uniform_(ember.empty(0, 3))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        einit.xavier_uniform(ember.empty(3, 4))
        einit.normal(ember.empty(3, 4))
    assert any("deprecated" in str(w.message) for w in rec)


def test_float64_and_half_tensors_keep_dtype():
    for dt in [ember.float64, ember.float16, ember.bfloat16]:
        t = ember.empty(8, 8, dtype=dt)
        for fn in [einit.kaiming_uniform_, einit.xavier_normal_, einit.orthogonal_, einit.trunc_normal_,
                   einit.eye_]:
            assert fn(t).dtype is dt
