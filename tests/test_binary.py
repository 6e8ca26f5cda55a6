"""Behaviour of ember/ops/binary.py and ember/ops/compare.py beyond the oracle table: errors (type and
message), in-place and ``out=`` semantics, dtype rules, Python operator protocol, autograd edge cases.
Each paired check runs the same expression in torch and ember and compares results or exception types."""
import math
import warnings

import numpy as np
import pytest
import torch

import ember


def _run(lib, fn):
    try:
        return fn(lib), None
    except Exception as e:  # noqa: BLE001 - the exception itself is what we compare
        return None, e


def _same(e_res, t_res):
    if isinstance(t_res, torch.Tensor):
        assert isinstance(e_res, ember.Tensor), f"expected a Tensor, got {e_res!r}"
        assert tuple(e_res.shape) == tuple(t_res.shape)
        assert e_res.dtype.name == str(t_res.dtype).replace("torch.", ""), (e_res.dtype, t_res.dtype)
        tn = t_res.detach().float().numpy() if t_res.dtype == torch.bfloat16 else t_res.detach().numpy()
        en = e_res.detach()._data.astype(np.float32) if e_res.dtype is ember.bfloat16 else e_res.detach()._data
        if tn.dtype.kind == "f":
            np.testing.assert_allclose(en, tn, rtol=1e-5, atol=1e-6, equal_nan=True)
            # signed zeros matter for copysign/remainder/maximum
            ok = ~np.isnan(tn)
            np.testing.assert_array_equal(np.signbit(en)[ok], np.signbit(tn)[ok])
        else:
            np.testing.assert_array_equal(en, tn)
    elif isinstance(t_res, (tuple, list)):
        assert len(e_res) == len(t_res)
        for a, b in zip(e_res, t_res):
            _same(a, b)
    else:
        assert e_res == t_res, (e_res, t_res)


def both(fn, match=None):
    """Run ``fn(lib)`` with torch and ember; same result, or the same exception type (and message part)."""
    t_res, t_err = _run(torch, fn)
    e_res, e_err = _run(ember, fn)
    if t_err is not None:
        assert e_err is not None, f"torch raised {type(t_err).__name__}: {t_err}; ember returned {e_res!r}"
        assert type(e_err) is type(t_err), f"torch: {type(t_err).__name__}: {t_err}\nember: {type(e_err).__name__}: {e_err}"
        if match is not None:
            assert match in str(e_err), f"{match!r} not in ember's message: {e_err}"
            assert match in str(t_err), f"{match!r} not in torch's message: {t_err}"
        return e_err
    assert e_err is None, f"ember raised {type(e_err).__name__}: {e_err}; torch returned {t_res!r}"
    _same(e_res, t_res)
    return e_res


def I(m, *v, dtype=None):  # noqa: E743 - short helper for integer tensors
    return m.tensor(list(v) if v else [1, 2, 3], dtype=dtype if dtype is None else getattr(m, dtype))


def F(m, *v, dtype="float32"):
    return m.tensor(list(v) if v else [1.0, 2.0, 3.0], dtype=getattr(m, dtype))


# ---- pow --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: I(m) ** -1,
    lambda m: I(m).pow(-2),
    lambda m: I(m, -1, 1, 2, 0, -2) ** I(m, -1, -3, -1, -1, -2),
    lambda m: I(m, -1, 1, 2, 0, -2) ** m.tensor(-3),
    lambda m: I(m, -1, 1, 2, 0, -2) ** -1.0,
    lambda m: m.pow(2, I(m, -1, 0, 1)),
    lambda m: m.pow(0, I(m, -1, 0, 1)),
    lambda m: 2.5 ** I(m),
    lambda m: (-2) ** I(m),
    lambda m: m.tensor([True, False]) ** 2,
    lambda m: m.tensor([True, False]) ** m.tensor([True, False]),
    lambda m: True ** m.tensor([True, False]),
    lambda m: m.pow(2, 3),
    lambda m: m.pow(I(m), m.tensor(2.0, dtype=m.float64)),
    lambda m: m.pow(F(m), m.tensor(2.0, dtype=m.float64)),
    lambda m: m.tensor([2, 3]) ** 70,
    lambda m: m.tensor([2, 3], dtype=m.int8) ** 7,
    lambda m: F(m).half() ** 2,
    lambda m: F(m).bfloat16() ** 0.5,
    lambda m: F(m) ** [1, 2],
    lambda m: I(m).pow_(2.5),
    lambda m: I(m).pow_(2),
    lambda m: F(m).pow_(I(m)),
])
def test_pow_rules(fn):
    both(fn)


def test_pow_errors_messages():
    both(lambda m: I(m) ** -1, match="Integers to negative integer powers are not allowed.")
    both(lambda m: m.tensor([True]) ** m.tensor([True]), match="not implemented for 'Bool'")
    both(lambda m: I(m).pow_(2.5), match="result type Float can't be cast to the desired output type Long")


@pytest.mark.parametrize("fn", [
    lambda m: m.float_power(F(m), 2),
    lambda m: m.float_power(2, I(m)),
    lambda m: m.float_power(I(m), -1),
    lambda m: m.float_power(I(m), I(m)),
    lambda m: m.float_power(2, 3),
    lambda m: F(m).float_power_(2),
    lambda m: F(m, dtype="float64").float_power_(2),
    lambda m: F(m, dtype="float64").float_power_(I(m)),
    lambda m: F(m).float_power(F(m)),
])
def test_float_power(fn):
    both(fn)


def test_float_power_inplace_message():
    both(lambda m: F(m).float_power_(2), match="the base given to float_power_ has dtype Float")


def test_pow_inplace_keeps_identity_and_version():
    x = ember.tensor([1.0, 2.0, 3.0])
    v = x._version
    y = x
    y **= 2
    assert y is x and x._version == v + 1
    np.testing.assert_array_equal(x._data, [1.0, 4.0, 9.0])


def test_pow_saves_output_only_for_tensor_exponent():
    # torch: x ** 2 does not save its result (modifying it is fine); x ** tensor does
    for m in (torch, ember):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        y = a ** 2
        y.add_(1)
        y.sum().backward()
    both(lambda m: _modify_pow_result(m))


def _modify_pow_result(m):
    a = m.tensor([1.0, 2.0], requires_grad=True)
    b = m.tensor([2.0, 3.0], requires_grad=True)
    y = a ** b
    y.add_(1)
    return m.autograd.grad(y.sum(), a)


def test_pow_node_names():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    assert (a ** 2).grad_fn.name() == "PowBackward0"
    assert (a ** a).grad_fn.name() == "PowBackward1"
    assert (2 ** a).grad_fn.name() == "PowBackward2"


@pytest.mark.parametrize("base,exp", [
    ([0.0, 0.0, 0.0, 2.0, -1.0], [-1.0, 0.0, 2.0, 0.0, 2.0]),
    ([0.0, 1.0, 0.0], [0.5, 0.0, 1.0]),
])
def test_pow_gradients_at_zero(base, exp):
    def f(m):
        a = m.tensor(base, dtype=m.float64, requires_grad=True)
        b = m.tensor(exp, dtype=m.float64, requires_grad=True)
        return m.autograd.grad((a ** b).sum(), (a, b))
    both(f)

    def g(m):
        b = m.tensor(exp, dtype=m.float64, requires_grad=True)
        return m.autograd.grad((0.0 ** b).sum(), b) + m.autograd.grad((m.pow(0, b)).sum(), b)
    both(g)

    def h(m):
        a = m.tensor(base, dtype=m.float64, requires_grad=True)
        return m.autograd.grad((a ** 0).sum(), a) + m.autograd.grad((a ** 0.5).sum(), a)
    both(h)


# ---- the other binary math ops ----------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.atan2(I(m), I(m)),
    lambda m: m.atan2(F(m), 2),
    lambda m: m.atan2(2, F(m)),
    lambda m: m.arctan2(F(m).half(), m.tensor([2], dtype=m.int8)),
    lambda m: I(m).atan2_(I(m)),
    lambda m: F(m).arctan2_(I(m)),
    lambda m: m.hypot(I(m), I(m)),
    lambda m: m.hypot(I(m), F(m)),
    lambda m: m.hypot(F(m), 2.0),
    lambda m: F(m).hypot_(F(m, 3, 4, 5)),
    lambda m: m.logaddexp(I(m), I(m)),
    lambda m: m.logaddexp(F(m), 1.0),
    lambda m: m.logaddexp2(I(m), F(m)),
    lambda m: m.logaddexp(F(m), F(m, dtype="float64")),
    lambda m: m.copysign(I(m), -1),
    lambda m: m.copysign(2, F(m)),
    lambda m: m.copysign(m.tensor([True]), -1),
    lambda m: m.copysign(F(m), m.tensor([-0.0, 0.0, -1.0])),
    lambda m: I(m).copysign_(-1),
    lambda m: F(m).copysign_(-1),
    lambda m: m.xlogy(I(m), I(m)),
    lambda m: m.xlogy(2, I(m)),
    lambda m: m.xlogy(I(m), 2),
    lambda m: m.xlogy(2, 3),
    lambda m: m.xlogy(m.tensor([True]), 2),
    lambda m: F(m).xlogy_(I(m)),
    lambda m: I(m).xlogy_(I(m)),
    lambda m: m.xlogy_(F(m), 2.0),
    lambda m: m.xlogy(F(m, 0.0, 0.0, float("nan"), 0.0, 1.0), F(m, float("nan"), 0.0, 1.0, -1.0, 0.0)),
    lambda m: m.maximum(I(m), F(m)),
    lambda m: m.maximum(I(m), 2),
    lambda m: m.maximum(m.tensor([1, 3], dtype=m.uint8), m.tensor([-1, 2], dtype=m.int8)),
    lambda m: m.maximum(m.tensor([True]), m.tensor([False])),
    lambda m: m.fmax(F(m), 2),
    lambda m: m.maximum(I(m), F(m), out=m.empty(3, dtype=m.int64)),
    lambda m: [m.maximum(m.tensor([a]), m.tensor([b])) for a, b in [(-0.0, 0.0), (0.0, -0.0)]],
    lambda m: [m.minimum(m.tensor([a]), m.tensor([b])) for a, b in [(-0.0, 0.0), (0.0, -0.0)]],
    lambda m: [m.fmax(m.tensor([a]), m.tensor([b])) for a, b in [(-0.0, 0.0), (0.0, -0.0)]],
    lambda m: [m.fmin(m.tensor([a]), m.tensor([b])) for a, b in [(-0.0, 0.0), (0.0, -0.0)]],
    lambda m: F(m).maximum(F(m, 3, 2, 1)),
    lambda m: m.nextafter(I(m), I(m)),
    lambda m: m.nextafter(F(m), 2),
    lambda m: m.nextafter(F(m), m.tensor(2.0, dtype=m.float64)),
    lambda m: m.nextafter(F(m, dtype="float64"), m.tensor(2.0)),
    lambda m: m.nextafter(F(m).half(), m.tensor(5.0, dtype=m.float16)),
    lambda m: m.nextafter(F(m).bfloat16(), m.tensor(0.0, dtype=m.bfloat16)),
    lambda m: F(m).nextafter_(F(m, 0, 0, 0)),
    lambda m: m.heaviside(F(m, -1.0, 0.0, 2.0, float("nan")), m.tensor([0.5])),
    lambda m: m.heaviside(F(m), 0.5),
    lambda m: m.heaviside(I(m), m.tensor(0.5)),
    lambda m: m.heaviside(m.tensor([True, False]), m.tensor([False])),
    lambda m: F(m, -1, 0, 1).heaviside_(m.tensor([0.25])),
])
def test_binary_math_rules(fn):
    both(fn)


@pytest.mark.parametrize("fn", [
    lambda m: m.fmod(I(m), 0),
    lambda m: m.remainder(I(m), 0),
    lambda m: m.remainder(I(m), I(m, 0, 1, 1)),
    lambda m: I(m) % I(m, 1, 0, 1),
    lambda m: m.fmod(F(m), m.tensor(0.0)),
    lambda m: m.remainder(F(m), m.tensor(0.0)),
    lambda m: m.remainder(2, I(m)),
    lambda m: m.remainder(2.5, I(m)),
    lambda m: 5 % I(m),
    lambda m: 5.5 % I(m),
    lambda m: m.fmod(2.5, I(m)),
    lambda m: m.remainder(-5, m.tensor([3.0, -3.0])),
    lambda m: m.remainder(m.tensor([-5, 5]), m.tensor([3, -3])),
    lambda m: m.fmod(m.tensor([-5, 5]), m.tensor([3, -3])),
    lambda m: m.fmod(m.tensor([-2 ** 63]), -1),
    lambda m: m.remainder(m.tensor([-2 ** 63]), -1),
    lambda m: m.remainder(m.tensor([True]), m.tensor([True])),
    lambda m: m.fmod(m.tensor([True]), m.tensor([True])),
    lambda m: m.fmod(m.tensor([-7, 7]), 2.5),
    lambda m: m.remainder(m.tensor([-7, 7]), 2.5),
    lambda m: m.tensor([-7.0, 7.0]) % m.tensor(-2),
    lambda m: m.remainder(m.tensor([-4.0, 4.0, 0.0, -0.0]), m.tensor([2.0, -2.0, -2.0, 2.0])),
    lambda m: m.remainder(m.tensor([-3.0, 3.0, 3.0]), m.tensor([math.inf, -math.inf, math.inf])),
    lambda m: I(m).fmod_(2.5),
    lambda m: I(m).remainder_(2),
    lambda m: F(m).fmod_(I(m)),
])
def test_fmod_remainder_rules(fn):
    both(fn)


def test_zero_division_message():
    both(lambda m: m.remainder(I(m), 0), match="ZeroDivisionError")


def test_remainder_scalar_self_has_no_derivative():
    both(lambda m: _remainder_scalar_grad(m), match="derivative for aten::remainder is not implemented")


def _remainder_scalar_grad(m):
    x = m.tensor([2.5, -1.0, 3.0], requires_grad=True)
    return m.autograd.grad(m.remainder(2.5, x).sum(), x)


@pytest.mark.parametrize("fn", [
    lambda m: m.lerp(I(m), I(m), 0.5),
    lambda m: m.lerp(I(m), I(m), m.tensor(0)),
    lambda m: m.lerp(F(m), F(m, dtype="float64"), 0.5),
    lambda m: m.lerp(F(m), F(m), F(m, dtype="float64")),
    lambda m: m.lerp(F(m), F(m), I(m)),
    lambda m: m.lerp(F(m), 1.0, 0.3),
    lambda m: m.lerp(F(m), F(m, 4, 5, 6), 1),
    lambda m: m.lerp(F(m).half(), F(m).half(), 0.3),
    lambda m: m.lerp(m.tensor([1.0]), m.tensor([2.0]), m.tensor([0.3, 0.7])),
    lambda m: m.tensor([1.0]).lerp_(m.tensor([2.0, 3.0]), 0.5),
    lambda m: F(m).lerp_(F(m, 3, 3, 3), F(m, 0.2, 0.5, 0.9)),
    lambda m: m.lerp(F(m), F(m, 3, 3, 3), 0.5, out=m.empty(0)),
])
def test_lerp_rules(fn):
    both(fn)


def test_lerp_messages():
    both(lambda m: m.lerp(F(m), F(m, dtype="float64"), 0.5), match="expected dtype float for `end` but got dtype double")
    both(lambda m: m.lerp(F(m), F(m), I(m)), match="expected dtype float for `weight` but got dtype long int")
    both(lambda m: m.lerp(I(m), I(m), 0.5), match="\"lerp_kernel_scalar\" not implemented for 'Long'")


@pytest.mark.parametrize("fn", [
    lambda m: m.addcmul(I(m), I(m), I(m), value=2),
    lambda m: m.addcmul(I(m), I(m), I(m), value=2.5),
    lambda m: m.addcdiv(I(m), I(m), I(m), value=2),
    lambda m: m.addcdiv(F(m), I(m), I(m), value=2),
    lambda m: m.addcdiv(I(m), F(m), I(m)),
    lambda m: m.addcmul(F(m), I(m), I(m), value=2.5),
    lambda m: m.addcmul(I(m), F(m), I(m), value=2),
    lambda m: m.addcmul(F(m), F(m, dtype="float64"), I(m), value=2),
    lambda m: m.addcmul(F(m), F(m), F(m)[:, None], value=2),
    lambda m: m.addcmul(F(m), F(m), F(m), value=m.tensor(2.0)),
    lambda m: m.addcmul(F(m), F(m), F(m), value=True),
    lambda m: m.addcmul(m.tensor([True]), m.tensor([True]), m.tensor([True])),
    lambda m: F(m).addcmul_(F(m)[:, None], F(m)),
    lambda m: I(m).addcmul_(F(m), F(m)),
    lambda m: F(m).addcdiv_(F(m), F(m, 4, 5, 6), value=-1),
    lambda m: m.addcdiv(F(m).half(), F(m).half(), F(m).half(), value=0.1),
])
def test_addcmul_addcdiv_rules(fn):
    both(fn)


def test_addcdiv_integer_message():
    both(lambda m: m.addcdiv(I(m), I(m), I(m)), match="Integer division with addcdiv is no longer supported")


@pytest.mark.parametrize("fn", [
    lambda m: m.ldexp(F(m), I(m)),
    lambda m: m.ldexp(I(m), I(m)),
    lambda m: m.ldexp(F(m), 2),
    lambda m: m.ldexp(F(m), F(m)),
    lambda m: m.ldexp(F(m, dtype="float64"), m.tensor(2)),
    lambda m: m.ldexp(m.tensor([1, 2, 3], dtype=m.int32), m.tensor(2)),
    lambda m: m.ldexp(F(m), m.tensor([1000, -1000, 1])),
    lambda m: m.ldexp(m.tensor([1.5], dtype=m.float64), m.tensor([-1075])),
    lambda m: F(m).ldexp_(I(m)),
    lambda m: m.ldexp_(F(m), I(m)),
    lambda m: I(m).ldexp_(I(m)),
])
def test_ldexp_rules(fn):
    both(fn)


def test_heaviside_messages_and_no_derivative():
    both(lambda m: m.heaviside(I(m), m.tensor(0.5)),
         match="heaviside is not yet implemented for tensors with different dtypes.")

    def f(m):
        x = m.tensor([1.0, 0.0], requires_grad=True)
        y = m.heaviside(x, m.tensor([0.5]))
        assert y.requires_grad
        return m.autograd.grad(y.sum(), x)
    both(f, match="derivative for aten::heaviside is not implemented")


def test_nextafter_gradient():
    def f(m):
        x = m.tensor([2.5, -1.0, 3.0, 0.0, math.nan, 1.0], requires_grad=True)
        o = m.tensor([1.0, 2.0, 3.0, 0.0, 1.0, math.nan], requires_grad=True)
        return m.autograd.grad((m.nextafter(x, o) * m.arange(6.0)).sum(), (x, o))
    both(f)


def test_nextafter_values_exact():
    for dt in ("float32", "float64", "float16", "bfloat16"):
        def f(m, dt=dt):
            x = m.tensor([0.0, 1.0, -1.0, 1e-30, 65504.0], dtype=getattr(m, dt))
            return m.nextafter(x, m.tensor([1.0, 2.0, -2.0, 0.0, -math.inf], dtype=getattr(m, dt)))
        t = f(torch)
        e = f(ember)
        tn = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
        np.testing.assert_array_equal(e._data.astype(np.float32) if dt == "bfloat16" else e._data, tn)


# ---- where ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.where(F(m) > 1, F(m), 0),
    lambda m: m.where(F(m) > 1, 1, 0),
    lambda m: m.where(F(m) > 1, 1.0, 0),
    lambda m: m.where(F(m) > 1, I(m), 0.5),
    lambda m: m.where(F(m) > 1, I(m), 2),
    lambda m: m.where(F(m) > 1, I(m).int(), 2),
    lambda m: m.where(F(m) > 1, I(m).int(), m.tensor(2)),
    lambda m: m.where(F(m) > 1, True, False),
    lambda m: m.where(F(m) > 1, F(m, dtype="float64"), I(m)),
    lambda m: m.where(m.tensor(True), F(m).half(), 2.5),
    lambda m: m.where(m.tensor(True), m.tensor(1, dtype=m.int8), 2),
    lambda m: m.where(m.tensor(True), m.tensor(1.0), m.tensor([1, 2])),
    lambda m: m.where(F(m), I(m), 0.5),
    lambda m: m.where(F(m) > 1, F(m), F(m)[:2]),
    lambda m: m.where(True, F(m), 2.5),
    lambda m: m.where(F(m) > 1),
    lambda m: m.where(m.tensor([[0, 1], [1, 1]])),
    lambda m: F(m).where(F(m) > 1, 2),
    lambda m: F(m).where(F(m) > 1, F(m) * 2),
    lambda m: m.where(F(m) > 1, F(m), F(m) * 3, out=m.empty(3)),
    lambda m: m.where(F(m) > 1, F(m), F(m) * 3, out=m.empty(3, dtype=m.int64)),
])
def test_where_rules(fn):
    both(fn)


def test_where_messages_and_uint8_condition():
    both(lambda m: m.where(F(m), I(m), 0.5),
         match="where expected condition to be a boolean tensor, but got a tensor with dtype Float")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = ember.where(ember.tensor([1, 0], dtype=ember.uint8), ember.tensor([1.0, 2.0]), 0.0)
    assert any("uint8 condition" in str(x.message) for x in w)
    np.testing.assert_array_equal(r._data, [1.0, 0.0])


def test_where_gradient_goes_to_chosen_branch_only():
    def f(m):
        a = m.tensor([1.0, math.inf, 3.0], requires_grad=True)
        b = m.tensor([math.nan, 2.0, 0.5], requires_grad=True)
        return m.autograd.grad(m.where(m.tensor([True, False, True]), a, b).sum(), (a, b))
    both(f)


# ---- gradients at ties and special points -------------------------------------------------------------

def test_maximum_minimum_ties_split_gradient():
    def f(m, op):
        a = m.tensor([1.0, 2.0, 3.0, math.nan], requires_grad=True)
        b = m.tensor([1.0, 1.0, 4.0, 0.0], requires_grad=True)
        return m.autograd.grad((getattr(m, op)(a, b) * m.tensor([1.0, 2.0, 3.0, 4.0])).sum(), (a, b))
    for op in ("maximum", "minimum", "fmax", "fmin"):
        both(lambda m, op=op: f(m, op))


def test_xlogy_gradient_special_points():
    def f(m):
        x = m.tensor([0.0, 0.0, 1.0, 2.0, 0.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([0.0, -1.0, 0.0, 3.0, 2.0], dtype=m.float64, requires_grad=True)
        return m.autograd.grad(m.xlogy(x, y).sum(), (x, y))
    both(f)

    def g(m):
        x = m.tensor([0.0, 1.0, -2.0], dtype=m.float64, requires_grad=True)
        return (m.autograd.grad(m.xlogy(x, 0.0).sum(), x) + m.autograd.grad(m.xlogy(x, -2.0).sum(), x)
                + m.autograd.grad(m.xlogy(x, 2.0).sum(), x))
    both(g)


def test_copysign_gradient_at_zero():
    def f(m):
        x = m.tensor([0.0, -0.0, 2.0, -3.0], requires_grad=True)
        y = m.tensor([-1.0, 1.0, -0.0, 5.0], requires_grad=True)
        return m.autograd.grad(m.copysign(x, y).sum(), (x, y))
    both(f)


def test_fmod_remainder_divisor_gradient():
    def f(m):
        x = m.tensor([5.5, -5.5, 3.0, -1.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([2.0, 2.0, -1.5, 3.0], dtype=m.float64, requires_grad=True)
        return m.autograd.grad((m.fmod(x, y) + 2 * m.remainder(x, y)).sum(), (x, y))
    both(f)


def test_logaddexp_gradient_infinite():
    def f(m):
        a = m.tensor([0.0, -math.inf, 1.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([0.0, 1.0, 1.0], dtype=m.float64, requires_grad=True)
        return m.autograd.grad((m.logaddexp(a, b) + m.logaddexp2(a, b)).sum(), (a, b))
    both(f)


# ---- comparisons --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: I(m) == 2.5,
    lambda m: I(m) < 2.5,
    lambda m: m.tensor([16777217]) == 16777216.0,
    lambda m: m.tensor([16777217]) == m.tensor(16777216.0, dtype=m.float64),
    lambda m: m.tensor([2 ** 62 + 1]) == 2 ** 62,
    lambda m: m.tensor([1, 2], dtype=m.uint8) > -1,
    lambda m: m.tensor([1, 2], dtype=m.uint8) < 256,
    lambda m: m.tensor([1, 2], dtype=m.int8) == 1000,
    lambda m: m.tensor([1, 2], dtype=m.uint8) == 257,
    lambda m: m.tensor([True]) == 2,
    lambda m: m.tensor([True]) == 1.0,
    lambda m: m.tensor([1.0]) == True,  # noqa: E712
    lambda m: 1 < F(m),
    lambda m: 2.0 >= F(m),
    lambda m: m.eq(1, F(m)),
    lambda m: m.eq(F(m), [1, 2, 3]),
    lambda m: F(m) == None,  # noqa: E711
    lambda m: F(m) != None,  # noqa: E711
    lambda m: F(m) == "a",
    lambda m: F(m) == [1, 2, 3],
    lambda m: F(m) < [1, 2, 3],
    lambda m: F(m) > None,
    lambda m: m.eq(F(m), I(m), out=m.empty(3)),
    lambda m: m.eq(F(m), I(m), out=m.empty(3, dtype=m.int64)),
    lambda m: m.lt(F(m), 2, out=m.empty(0, dtype=m.bool)),
    lambda m: m.eq(F(m), F(m, 1, 2)),
    lambda m: F(m).eq_(F(m, 1, 2)),
    lambda m: F(m).lt_(m.tensor([[1.0]])),
    lambda m: F(m).lt_(m.tensor(2)),
    lambda m: I(m).eq_(1.5),
    lambda m: I(m).lt_(1.5),
    lambda m: F(m).eq_(m.tensor(True)),
    lambda m: F(m).greater_(1),
    lambda m: F(m).less_equal_(2),
    lambda m: F(m).not_equal(1),
    lambda m: m.greater_equal(F(m), 2),
    lambda m: F(m).bfloat16() > 1.5,
    lambda m: F(m).half() == F(m),
])
def test_comparison_rules(fn):
    both(fn)


def test_comparison_inplace_on_grad_tensor_has_zero_gradient():
    def f(m):
        x = m.tensor([2.5, -1.0, 3.0], requires_grad=True)
        y = (x * 1).eq_(2.5)
        assert y.requires_grad
        return m.autograd.grad((y * m.tensor([1.0, 2.0, 3.0])).sum(), x)
    both(f)


def test_comparisons_do_not_require_grad():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    for r in (x < 1, x == x, ember.isclose(x, x), ember.logical_and(x, x), x.gt(0)):
        assert r.dtype is ember.bool and not r.requires_grad and r.grad_fn is None


def test_tensor_stays_hashable_after_eq():
    a = ember.tensor([1.0, 2.0])
    b = ember.tensor([1.0, 2.0])
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b" and hash(a) == id(a)
    assert len({a, b, a}) == 2
    assert ember.Tensor.__hash__ is not None


def test_numpy_scalars_on_the_left():
    x = ember.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal((np.float64(2.0) == x)._data, [False, True, False])
    np.testing.assert_array_equal((np.int64(2) < x)._data, [False, False, True])
    assert (np.float64(2.0) ** x).dtype is ember.float32


@pytest.mark.parametrize("fn", [
    lambda m: m.equal(I(m), F(m)),
    lambda m: m.equal(I(m), m.tensor([1, 2])),
    lambda m: m.equal(I(m), I(m).int()),
    lambda m: m.equal(F(m), m.tensor([[1.0, 2, 3]])),
    lambda m: m.equal(m.tensor([math.nan]), m.tensor([math.nan])),
    lambda m: m.equal(m.tensor([]), m.tensor([])),
    lambda m: m.equal(m.tensor(1.0), m.tensor([1.0])),
    lambda m: m.equal(F(m), 1.0),
    lambda m: m.isclose(I(m), I(m)),
    lambda m: m.isclose(I(m), F(m)),
    lambda m: m.isclose(F(m), F(m, dtype="float64")),
    lambda m: m.isclose(F(m), F(m), rtol=-1),
    lambda m: m.isclose(F(m), F(m), atol=-1),
    lambda m: m.isclose(I(m), I(m), rtol=0.5),
    lambda m: m.isclose(m.tensor([True]), m.tensor([True])),
    lambda m: m.isclose(F(m), F(m)[:, None]),
    lambda m: m.isclose(m.tensor([math.nan, math.inf, -math.inf]), m.tensor([math.nan, math.inf, math.inf])),
    lambda m: m.isclose(m.tensor([math.nan, math.inf]), m.tensor([math.nan, math.inf]), equal_nan=True),
    lambda m: m.isclose(m.tensor([5, 10]), m.tensor([6, 12]), rtol=0.2, atol=0),
    lambda m: m.isclose(m.tensor([0], dtype=m.uint8), m.tensor([200], dtype=m.uint8), rtol=0, atol=60),
    lambda m: m.isclose(m.tensor([100], dtype=m.int8), m.tensor([-100], dtype=m.int8), rtol=0, atol=60),
    lambda m: m.isclose(m.tensor([16777216]), m.tensor([16777217]), rtol=0, atol=0.5),
    lambda m: m.isclose(m.tensor([1.0, 1e10]), m.tensor([1.0 + 1e-6, 1e10 + 1e5])),
    lambda m: m.isclose(F(m), 1.0),
    lambda m: m.allclose(I(m), I(m)),
    lambda m: m.allclose(F(m), F(m)[:, None]),
    lambda m: m.allclose(F(m), 1.0),
    lambda m: F(m).allclose(F(m) + 1e-7),
])
def test_equal_isclose_allclose(fn):
    both(fn)


def test_isclose_messages():
    both(lambda m: m.isclose(I(m), F(m)), match="Long did not match Float")
    both(lambda m: m.isclose(F(m), F(m), rtol=-1), match="rtol must be greater than or equal to zero, but got -1")


# ---- logical and bitwise --------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.logical_and(F(m), I(m)),
    lambda m: m.logical_and(F(m), 1),
    lambda m: m.logical_xor(F(m), I(m)[:1]),
    lambda m: m.logical_not(F(m, 0.0, math.nan, -1.0)),
    lambda m: m.logical_not(I(m), out=m.empty(3)),
    lambda m: m.logical_not(I(m), out=m.empty(3, dtype=m.int32)),
    lambda m: I(m).logical_not_(),
    lambda m: F(m).logical_not_(),
    lambda m: F(m).logical_and_(I(m)),
    lambda m: I(m).logical_and_(F(m)),
    lambda m: I(m, 0, 1, 2).logical_or_(F(m, 0, 0, 0)),
    lambda m: m.logical_or(F(m).bfloat16(), m.tensor([0, 0, 1])),
    lambda m: m.bitwise_not(F(m)),
    lambda m: m.bitwise_not(I(m)),
    lambda m: ~m.tensor([True, False]),
    lambda m: ~F(m),
    lambda m: F(m) & F(m),
    lambda m: F(m) | 1,
    lambda m: F(m) << 1,
    lambda m: I(m) << 1.5,
    lambda m: I(m) & 1.5,
    lambda m: m.bitwise_and(I(m), True),
    lambda m: m.bitwise_and(I(m), 1.5),
    lambda m: True & I(m),
    lambda m: 6 ^ I(m),
    lambda m: 2 << I(m),
    lambda m: 16 >> I(m),
    lambda m: m.bitwise_left_shift(2, I(m)),
    lambda m: m.bitwise_and(2, I(m)),
    lambda m: m.bitwise_and(I(m), I(m).int()),
    lambda m: m.bitwise_and(m.tensor([True]), 3),
    lambda m: m.tensor([True]) & m.tensor([3], dtype=m.uint8),
    lambda m: m.tensor([True]) << 1,
    lambda m: m.tensor([True]) << m.tensor([True]),
    lambda m: I(m).bitwise_and_(m.tensor(True)),
    lambda m: m.tensor([True]).bitwise_and_(I(m)[:1]),
    lambda m: m.tensor([True]).__ior__(True),
    lambda m: I(m).__ilshift__(1),
    lambda m: I(m).bitwise_left_shift_(1),
    lambda m: I(m).__irshift__(1),
    lambda m: I(m).__ixor__(1),
    lambda m: m.tensor([1, 64, 65]) << m.tensor([63, 1, 64]),
    lambda m: m.tensor([-8, 8, -1]) >> m.tensor([70, 65, -1]),
    lambda m: m.tensor([-8, 8, -1], dtype=m.int8) >> m.tensor([7, 8, 9], dtype=m.int8),
    lambda m: m.tensor([1, 1, 1], dtype=m.int8) << m.tensor([7, 8, -1], dtype=m.int8),
    lambda m: m.tensor([255, 128, 1], dtype=m.uint8) >> m.tensor([7, 8, 9], dtype=m.uint8),
    lambda m: m.tensor([255, 128, 1], dtype=m.uint8) << m.tensor([7, 8, 9], dtype=m.uint8),
    lambda m: m.bitwise_or(I(m), I(m), out=m.empty(0, dtype=m.int64)),
    lambda m: I(m) & [1],
])
def test_logical_bitwise_rules(fn):
    both(fn)


def test_bitwise_messages():
    both(lambda m: F(m) & F(m), match="\"bitwise_and_cpu\" not implemented for 'Float'")
    both(lambda m: F(m) << 1, match="\"lshift_cpu\" not implemented for 'Float'")
    both(lambda m: ~F(m), match="~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    both(lambda m: m.tensor([True]).bitwise_and_(I(m)[:1]),
         match="result type Long can't be cast to the desired output type Bool")


def test_logical_inplace_keeps_history():
    def f(m):
        a = m.tensor([1.0, 0.0, 2.0], requires_grad=True)
        y = (a * 2).logical_and_(m.tensor([1.0, 1.0, 0.0]))
        return y, m.autograd.grad(y.sum(), a)
    both(f)


# ---- argument checking, broadcasting and out= ------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.atan2(F(m), F(m, 1, 2)),
    lambda m: m.maximum(F(m), F(m, 1, 2)),
    lambda m: m.lerp(F(m), F(m, 1, 2), 0.5),
    lambda m: m.addcmul(F(m), F(m, 1, 2), F(m)),
    lambda m: m.where(F(m) > 1, F(m, 1, 2), 0.0),
    lambda m: F(m).hypot_(m.tensor([[1.0], [2.0]])),
    lambda m: m.hypot(F(m), F(m), out=m.empty(3, dtype=m.int64)),
    lambda m: m.atan2(I(m), I(m), out=m.empty(1, dtype=m.int64)),
    lambda m: m.pow(F(m), 2, out=m.empty(3)),
    lambda m: m.fmod(F(m), 2, out=m.empty(0)),
    lambda m: m.xlogy(F(m), F(m), out=m.empty(3, dtype=m.float64)),
    lambda m: m.logaddexp(F(m), F(m), out=m.empty(2, 3)),
])
def test_argument_errors_and_out(fn):
    both(fn)


def test_out_with_requires_grad_raises():
    def f(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        return m.atan2(x, x, out=m.empty(2))
    both(f)


def test_inplace_on_leaf_requiring_grad_raises():
    def f(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        return x.pow_(2)
    both(f)


@pytest.mark.parametrize("op", [
    lambda x, a, b: x.atan2_(b),
    lambda x, a, b: x.lerp_(b, 0.25),
    lambda x, a, b: x.lerp_(b, a),
    lambda x, a, b: x.addcmul_(a, b, value=0.5),
    lambda x, a, b: x.addcdiv_(a, b, value=0.5),
    lambda x, a, b: x.copysign_(b),
    lambda x, a, b: x.xlogy_(b.abs() + 1),
    lambda x, a, b: x.pow_(2),
    lambda x, a, b: x.pow_(b),
    lambda x, a, b: x.hypot_(a),
    lambda x, a, b: x.fmod_(b),
    lambda x, a, b: x.remainder_(b),
    lambda x, a, b: x.ldexp_(b),
    lambda x, a, b: x.nextafter_(b),
])
def test_inplace_with_autograd_matches_torch(op):
    def f(m):
        a = m.tensor([0.5, 1.5, 2.5], dtype=m.float64, requires_grad=True)
        b = m.tensor([1.0, -2.0, 3.0], dtype=m.float64, requires_grad=True)
        x = a * 1
        y = op(x, a, b)
        assert y is x
        return x, m.autograd.grad((x * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)).sum(), (a, b))
    both(f)
