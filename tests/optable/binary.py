"""Oracle cases for ember/ops/binary.py and ember/ops/compare.py (binary/ternary math, comparisons,
logical and bitwise ops)."""
import numpy as np

from oracle import Case

ALL3 = ("contig", "noncontig", "zero")
INTS = ("int64", "int32")


def _np(name):
    return {"float32": np.float32, "float64": np.float64, "float16": np.float16}.get(name, np.float64)


def _ties(rng, dtype, shape=(3, 4)):
    """Two arrays on a coarse grid so that many entries are exactly equal (ties)."""
    a = rng.integers(-2, 3, size=shape).astype(_np(dtype)) / 2
    b = rng.integers(-2, 3, size=shape).astype(_np(dtype)) / 2
    return [a, b]


def _with_zeros(rng, dtype, shape=(3, 4), low=-2.0, high=2.0):
    a = rng.uniform(low, high, size=shape).astype(_np(dtype))
    a[rng.random(shape) < 0.3] = 0
    return a


def _pow_zero_base(rng, dtype):
    # base with exact zeros, exponents on both sides of zero (and exactly 0): torch's special cases
    base = np.abs(_with_zeros(rng, dtype)) + 0
    base[base != 0] += 0.5
    exp = rng.choice(np.array([-1.5, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0]), size=(3, 4)).astype(_np(dtype))
    return [base, exp]


def _nan_mix(rng, dtype):
    a, b = _ties(rng, dtype)
    a[0, 0] = np.nan
    b[1, 1] = np.nan
    a[2, 2] = b[2, 2] = np.nan
    return [a, b]


def _int_pow_neg(rng, dtype):
    base = np.array([[-2, -1, 0, 1, 2, 3], [3, -1, 1, 0, -3, 2]], dtype=np.int64)
    exp = np.array([[-1, -3, -1, -2, 0, 2], [-2, -2, 5, 3, 1, 4]], dtype=np.int64)
    return [base.astype(dtype), exp.astype(dtype)]


def _xlogy_arrays(rng, dtype):
    x = _with_zeros(rng, dtype)
    y = rng.uniform(0.1, 3.0, size=(3, 4)).astype(_np(dtype))
    y[0, :2] = 0          # x == 0 & y <= 0 is masked in the x-gradient
    x[0, :2] = 0
    y[1, 0] = -1.0        # log of a negative: NaN
    return [x, y]


def _special_floats(rng, dtype):
    v = np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 3.0], dtype=_np(dtype))
    a = np.repeat(v, len(v))
    b = np.tile(v, len(v))
    return [a, b]


def _shift_arrays(rng, dtype):
    a = rng.integers(-100, 100, size=(4, 6)).astype(dtype)
    if dtype == "uint8":
        a = rng.integers(0, 255, size=(4, 6)).astype(np.uint8)
    s = rng.integers(0, 70, size=(4, 6)).astype(dtype)
    if dtype != "uint8":
        s[0] = [-1, -5, 0, 63, 64, 65]
    return [a, s]


def _where_broadcast(m, c, a, b):
    return m.where(c > 0, a, b)


CASES = [
    # ---- pow ------------------------------------------------------------------------------------
    Case("pow_tensor_tensor", lambda m, a, b: m.pow(a, b), shapes=((3, 4), (3, 4)), low=0.5, high=2.0,
         double_backward=True, layouts=ALL3),
    Case("pow_broadcast_operator", lambda m, a, b: a ** b, shapes=((2, 3, 4), (4,)), low=0.5, high=2.0),
    Case("pow_zero_base", lambda m, a, b: a.pow(b), make=_pow_zero_base, double_backward=True),
    Case("pow_scalar_exp", lambda m, a: a ** 3, double_backward=True, layouts=ALL3),
    Case("pow_scalar_exp_float", lambda m, a: m.pow(a, 2.5), low=0.1, high=2.0, double_backward=True),
    Case("pow_scalar_exp_zero", lambda m, a: a ** 0.0),
    Case("pow_scalar_exp_negative", lambda m, a: a.pow(-1.5), low=0.5, high=2.0),
    Case("rpow_scalar_base", lambda m, a: 2.5 ** a, double_backward=True),
    Case("rpow_zero_base", lambda m, a: m.pow(0.0, a), make=lambda r, d: [_with_zeros(r, d)]),
    Case("rpow_negative_base", lambda m, a: (-2.0) ** a, make=lambda r, d: [np.round(r.uniform(-3, 3, (3, 4))).astype(_np(d))]),
    Case("pow_0dim_exponent", lambda m, a, b: a ** b, shapes=((3, 4), ()), low=0.5, high=2.0),
    Case("pow_int", lambda m, a, b: a ** b, shapes=((3, 4), (3, 4)), dtypes=INTS, low=-3, high=3,
         int_inputs={1: (0, 5, "int64")}),
    Case("pow_int_negative_tensor_exponent", lambda m, a, b: m.pow(a, b), make=_int_pow_neg,
         dtypes=("int64", "int32", "int8"), layouts=("contig",)),
    Case("pow_int_scalar", lambda m, a: a ** 3, dtypes=("int64", "int16", "uint8"), low=-3, high=4),
    Case("pow_int_float_scalar", lambda m, a: a ** 0.5, dtypes=INTS, low=0, high=9),
    Case("rpow_int", lambda m, a: 2 ** a, dtypes=INTS, low=0, high=10),
    Case("pow_bool_int", lambda m, a: a ** 2, dtypes=("bool",)),
    Case("pow_float16", lambda m, a, b: a ** b, shapes=((3, 4), (3, 4)), dtypes=("float16",), low=0.5,
         high=2.0, atol=1e-2, rtol=1e-2),
    Case("float_power", lambda m, a, b: m.float_power(a, b), shapes=((3, 4), (4,)), low=0.5, high=2.0,
         double_backward=True),
    Case("float_power_scalar", lambda m, a: m.float_power(a, 2)),
    Case("float_power_scalar_base", lambda m, a: m.float_power(3, a)),
    Case("float_power_int", lambda m, a: m.float_power(a, -1), dtypes=INTS, low=1, high=5),
    Case("pow_inplace", lambda m, a, b: (a * 1).pow_(b), shapes=((3, 4), (4,)), low=0.5, high=2.0),
    Case("ipow_scalar", lambda m, a: _ipow(a), double_backward=True),
    # ---- atan2 / hypot ------------------------------------------------------------------------
    Case("atan2", lambda m, a, b: m.atan2(a, b), shapes=((3, 4), (3, 4)), double_backward=True, layouts=ALL3),
    Case("arctan2_broadcast", lambda m, a, b: m.arctan2(a, b), shapes=((3, 1), (1, 4))),
    Case("atan2_method_inplace", lambda m, a, b: (a * 1).atan2_(b), shapes=((3, 4), (4,))),
    Case("atan2_int", lambda m, a, b: m.atan2(a, b), shapes=((3, 4), (3, 4)), dtypes=INTS, low=-3, high=3),
    Case("atan2_special", lambda m, a, b: m.atan2(a, b), make=_special_floats, grad=False),
    Case("hypot", lambda m, a, b: m.hypot(a, b), shapes=((3, 4), (3, 1)), double_backward=True, layouts=ALL3),
    Case("hypot_method", lambda m, a, b: a.hypot(b), shapes=((2, 3, 4), (3, 4))),
    # ---- xlogy --------------------------------------------------------------------------------
    Case("xlogy", lambda m, a, b: m.xlogy(a, b), make=_xlogy_arrays, double_backward=True),
    Case("xlogy_broadcast", lambda m, a, b: a.xlogy(b), shapes=((3, 4), (4,)), low=0.1, high=3.0),
    Case("xlogy_scalar_self", lambda m, b: m.xlogy(2.0, b), low=0.1, high=3.0, double_backward=True),
    Case("xlogy_scalar_other", lambda m, a: m.xlogy(a, 2.5), make=lambda r, d: [_with_zeros(r, d)],
         double_backward=True),
    Case("xlogy_scalar_other_negative", lambda m, a: m.xlogy(a, -1.0), make=lambda r, d: [_with_zeros(r, d)]),
    Case("xlogy_scalar_other_zero", lambda m, a: m.xlogy(a, 0.0), make=lambda r, d: [_with_zeros(r, d)]),
    Case("xlogy_special", lambda m, a, b: m.xlogy(a, b), make=_special_floats, grad=False),
    Case("xlogy_int", lambda m, a, b: m.xlogy(a, b), shapes=((3, 4), (3, 4)), dtypes=INTS, low=0, high=4),
    # ---- fmod / remainder ---------------------------------------------------------------------
    Case("fmod", lambda m, a, b: m.fmod(a, b), shapes=((3, 4), (3, 4)), low=-5, high=5, layouts=ALL3,
         double_backward=True),
    Case("fmod_scalar", lambda m, a: a.fmod(1.5), low=-5, high=5),
    Case("remainder", lambda m, a, b: m.remainder(a, b), shapes=((3, 4), (3, 1)), low=-5, high=5, layouts=ALL3,
         double_backward=True),
    Case("remainder_operator_scalar", lambda m, a: a % -1.5, low=-5, high=5),
    Case("rmod_scalar_self", lambda m, b: 5.5 % b, low=0.5, high=3, grad=False),
    Case("remainder_special", lambda m, a, b: m.remainder(a, b), make=_special_floats, grad=False),
    Case("fmod_special", lambda m, a, b: m.fmod(a, b), make=_special_floats, grad=False),
    Case("fmod_remainder_int", lambda m, a, b: (m.fmod(a, b), m.remainder(a, b), a % 3, 7 % b),
         shapes=((3, 4), (3, 4)), dtypes=("int64", "int32", "int8"), low=-9, high=9,
         make=lambda r, d: [r.integers(-9, 9, (3, 4)).astype(d), (r.integers(1, 4, (3, 4)) * r.choice([-1, 1], (3, 4))).astype(d)]),
    Case("fmod_int_float_scalar", lambda m, a: (m.fmod(a, 2.5), m.remainder(a, -2.5)), dtypes=INTS, low=-9, high=9),
    Case("remainder_inplace", lambda m, a, b: _imod(a, b), shapes=((3, 4), (3, 4)), low=0.5, high=5),
    # ---- maximum / minimum / fmax / fmin ------------------------------------------------------
    Case("maximum_ties", lambda m, a, b: m.maximum(a, b), make=_ties, double_backward=True),
    Case("minimum_ties", lambda m, a, b: m.minimum(a, b), make=_ties, double_backward=True),
    Case("maximum_broadcast", lambda m, a, b: a.maximum(b), shapes=((3, 4), (4,))),
    Case("minimum_broadcast", lambda m, a, b: a.minimum(b), shapes=((3, 1), (1, 4)), layouts=ALL3),
    Case("maximum_nan", lambda m, a, b: (m.maximum(a, b), m.minimum(a, b)), make=_nan_mix),
    Case("fmax_fmin_nan", lambda m, a, b: (m.fmax(a, b), m.fmin(a, b)), make=_nan_mix),
    Case("fmax_fmin_ties", lambda m, a, b: (a.fmax(b), a.fmin(b)), make=_ties, double_backward=True),
    Case("max_min_special", lambda m, a, b: (m.maximum(a, b), m.minimum(a, b), m.fmax(a, b), m.fmin(a, b)),
         make=_special_floats, grad=False),
    Case("maximum_int_bool", lambda m, a, b: (m.maximum(a, b), m.fmin(a, b)), shapes=((3, 4), (3, 4)),
         dtypes=("int64", "int8", "uint8", "bool"), low=-5, high=5),
    Case("maximum_mixed_dtypes", lambda m, a, b: m.maximum(a, b), shapes=((3, 4), (3, 4)), dtypes=("float32",),
         int_inputs={1: (-3, 3, "int64")}),
    # ---- lerp ---------------------------------------------------------------------------------
    Case("lerp_scalar_small", lambda m, a, b: m.lerp(a, b, 0.3), shapes=((3, 4), (3, 4)), double_backward=True,
         layouts=ALL3),
    Case("lerp_scalar_large", lambda m, a, b: a.lerp(b, 0.75), shapes=((3, 4), (4,))),
    Case("lerp_tensor_weight", lambda m, a, b, w: m.lerp(a, b, w), shapes=((3, 4), (3, 4), (3, 4)),
         low=-1.0, high=1.5, double_backward=True, layouts=ALL3),
    Case("lerp_tensor_weight_broadcast", lambda m, a, b, w: m.lerp(a, b, w), shapes=((3, 1), (1, 4), (4,))),
    Case("lerp_inplace", lambda m, a, b, w: (a * 1).lerp_(b, w), shapes=((3, 4), (3, 4), (4,))),
    Case("lerp_float16", lambda m, a, b: m.lerp(a, b, 0.6), shapes=((3, 4), (3, 4)), dtypes=("float16",),
         atol=1e-2, rtol=1e-2),
    # ---- addcmul / addcdiv ----------------------------------------------------------------------
    Case("addcmul", lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), shapes=((3, 4), (3, 4), (3, 4)),
         double_backward=True, layouts=ALL3),
    Case("addcmul_broadcast", lambda m, a, b, c: a.addcmul(b, c), shapes=((4,), (3, 1), (3, 4))),
    Case("addcdiv", lambda m, a, b, c: m.addcdiv(a, b, c, value=-2), shapes=((3, 4), (3, 4), (3, 4)),
         double_backward=True, layouts=ALL3, make=lambda r, d: [r.uniform(-2, 2, (3, 4)).astype(_np(d)),
                                                                  r.uniform(-2, 2, (3, 4)).astype(_np(d)),
                                                                  r.uniform(0.5, 2, (3, 4)).astype(_np(d))]),
    Case("addcdiv_inplace", lambda m, a, b, c: (a * 1).addcdiv_(b, c, value=3), shapes=((3, 4), (4,), (3, 4)),
         low=0.5, high=2.0),
    Case("addcmul_inplace", lambda m, a, b, c: (a * 1).addcmul_(b, c, value=-1.5), shapes=((3, 4), (4,), (3, 1))),
    Case("addcmul_int", lambda m, a, b, c: (m.addcmul(a, b, c, value=3), m.addcmul(a, b, c, value=2.5)),
         shapes=((3, 4), (3, 4), (3, 4)), dtypes=INTS),
    Case("addcmul_mixed", lambda m, a, b, c: m.addcmul(a, b, c, value=2), shapes=((3, 4), (3, 4), (3, 4)),
         dtypes=("float32",), int_inputs={2: (-3, 3, "int64")}),
    # ---- logaddexp / copysign -------------------------------------------------------------------
    Case("logaddexp", lambda m, a, b: m.logaddexp(a, b), shapes=((3, 4), (3, 1)), low=-5, high=5,
         double_backward=True, layouts=ALL3),
    Case("logaddexp2", lambda m, a, b: a.logaddexp2(b), shapes=((3, 4), (3, 4)), low=-5, high=5,
         double_backward=True),
    Case("logaddexp_special", lambda m, a, b: (m.logaddexp(a, b), m.logaddexp2(a, b)), make=_special_floats,
         grad=False),
    Case("copysign", lambda m, a, b: m.copysign(a, b), make=lambda r, d: [_with_zeros(r, d), r.uniform(-1, 1, (3, 4)).astype(_np(d))],
         double_backward=True),
    Case("copysign_scalar", lambda m, a: a.copysign(-1.0), make=lambda r, d: [_with_zeros(r, d)]),
    Case("copysign_broadcast_inplace", lambda m, a, b: (a * 1).copysign_(b), shapes=((3, 4), (4,))),
    Case("copysign_int", lambda m, a, b: m.copysign(a, b), shapes=((3, 4), (3, 4)), dtypes=INTS),
    Case("copysign_special", lambda m, a, b: m.copysign(a, b), make=_special_floats, grad=False),
    # ---- where ------------------------------------------------------------------------------------
    Case("where", lambda m, c, a, b: m.where(c > 0, a, b), shapes=((3, 4), (3, 4), (3, 4)),
         double_backward=True, layouts=ALL3, grad_inputs=(1, 2)),
    Case("where_broadcast", lambda m, c, a, b: _where_broadcast(m, c, a, b), shapes=((3, 1), (4,), (3, 4)),
         grad_inputs=(1, 2)),
    Case("where_scalars", lambda m, c, a: (m.where(c > 0, a, 0.0), m.where(c > 0, 2, a), m.where(c < 0, 1, 2.5)),
         shapes=((3, 4), (3, 4)), grad_inputs=(1,)),
    Case("where_method", lambda m, a, c: a.where(c > 0, -a), shapes=((3, 4), (3, 4)), grad_inputs=(0,)),
    Case("where_int_promotion", lambda m, a, b: (m.where(a > 0, a, b), m.where(a > 0, a, 0.5)),
         shapes=((3, 4), (3, 4)), dtypes=("int64", "int8", "bool")),
    Case("where_nonzero", lambda m, a: m.where(a > 0), layouts=("contig", "zero")),
    # ---- ldexp / heaviside / nextafter ------------------------------------------------------------
    Case("ldexp", lambda m, a, e: m.ldexp(a, e), shapes=((3, 4), (3, 4)), int_inputs={1: (-4, 5, "int64")},
         layouts=ALL3),
    Case("ldexp_float_exp", lambda m, a, e: a.ldexp(e), shapes=((3, 4), (4,)), double_backward=True),
    Case("ldexp_inplace", lambda m, a, e: (a * 1).ldexp_(e), shapes=((3, 4), (3, 4)), int_inputs={1: (-4, 5, "int32")}),
    Case("heaviside", lambda m, a, v: m.heaviside(a, v), make=lambda r, d: [_with_zeros(r, d), r.uniform(0, 1, (4,)).astype(_np(d))],
         grad=False),
    Case("heaviside_int_bool", lambda m, a, v: m.heaviside(a, v), shapes=((3, 4), (3, 4)), dtypes=("int64", "bool")),
    Case("nextafter", lambda m, a, b: m.nextafter(a, b), make=_ties, atol=0, rtol=0),
    Case("nextafter_broadcast", lambda m, a, b: a.nextafter(b), shapes=((3, 4), (4,)), atol=0, rtol=0),
    # ---- comparisons --------------------------------------------------------------------------------
    Case("compare_tensor_tensor", lambda m, a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b), make=_ties),
    Case("compare_functions", lambda m, a, b: (m.eq(a, b), m.ne(a, b), m.lt(a, b), m.le(a, b), m.gt(a, b), m.ge(a, b)),
         shapes=((3, 4), (4,)), dtypes=("float32", "float64", "int64", "int32", "bool", "uint8")),
    Case("compare_aliases", lambda m, a, b: (m.greater(a, b), m.greater_equal(a, b), m.less(a, b),
                                             m.less_equal(a, b), m.not_equal(a, b), a.greater(b)),
         make=_ties),
    Case("compare_scalar", lambda m, a: (a == 0.5, a != 0, a < 1, 1 < a, a >= -0.5, 2 > a, a.eq(0.5), a.le(1)),
         layouts=ALL3),
    Case("compare_int_float_scalar", lambda m, a: (a == 2.5, a < 2.5, a > 1.0, a.ge(2), a == True),
         dtypes=("int64", "int32", "uint8", "bool"), low=0, high=4),
    Case("compare_int_wrapping_scalar", lambda m, a: (a > -1, a < 256, a == 257, a.eq(1000)), dtypes=("uint8", "int8"),
         low=0, high=4),
    Case("compare_mixed_dtypes", lambda m, a, b: (a == b, a < b, m.ge(b, a)), shapes=((3, 4), (3, 4)),
         int_inputs={1: (-2, 3, "int32")}),
    Case("compare_nan_inf", lambda m, a, b: (a == b, a != b, a < b, a >= b), make=_special_floats),
    Case("compare_inplace", lambda m, a, b: ((a * 1).eq_(b), (a * 1).lt_(0.5), (a * 1).greater_equal_(b),
                                             (a * 1).not_equal_(b), (a * 1).le_(b), (a * 1).gt_(b)),
         make=_ties),
    Case("compare_inplace_int_self", lambda m, a: (a.clone().eq_(1.5), a.clone().lt_(2.5), a.clone().ge_(True)),
         dtypes=INTS, low=0, high=4),
    Case("compare_float16", lambda m, a, b: (a < b, a == b), shapes=((3, 4), (3, 4)), dtypes=("float16",)),
    Case("equal", lambda m, a, b: (m.equal(a, b), m.equal(a, a), a.equal(a.clone()), m.equal(a, a[:1])),
         shapes=((3, 4), (3, 4)), dtypes=("float32", "int64", "bool")),
    Case("equal_mixed_dtype", lambda m, a: (m.equal(a, a.double()), m.equal(a.long(), a.int())),
         dtypes=("float32",)),
    Case("isclose", lambda m, a, b: (m.isclose(a, b), m.isclose(a, a + 1e-6), m.isclose(a, b, rtol=0.5, atol=0.1),
                                     a.isclose(b, atol=0.5)), shapes=((3, 4), (4,))),
    Case("isclose_nan", lambda m, a, b: (m.isclose(a, b), m.isclose(a, b, equal_nan=True), m.isclose(a, b, 0, 0)),
         make=_special_floats),
    Case("isclose_int", lambda m, a, b: (m.isclose(a, b), m.isclose(a, b, rtol=0, atol=1.5), m.isclose(a, b, rtol=0.5)),
         shapes=((3, 4), (3, 4)), dtypes=("int64", "uint8", "bool"), low=0, high=6),
    Case("allclose", lambda m, a, b: (m.allclose(a, b), m.allclose(a, a + 1e-7), a.allclose(b, atol=10.0),
                                      m.allclose(a, b, equal_nan=True)), shapes=((3, 4), (3, 4))),
    # ---- logical --------------------------------------------------------------------------------------
    Case("logical_ops", lambda m, a, b: (m.logical_and(a, b), m.logical_or(a, b), m.logical_xor(a, b),
                                         m.logical_not(a), a.logical_and(b)),
         make=lambda r, d: _ties(r, d) if d in ("float32", "float64") else
         [r.integers(-1, 2, (3, 4)).astype(d), r.integers(-1, 2, (3, 4)).astype(d)],
         dtypes=("float32", "float64", "int64", "int8", "bool")),
    Case("logical_broadcast_mixed", lambda m, a, b: (m.logical_and(a, b), b.logical_or(a), m.logical_xor(b, a)),
         shapes=((3, 4), (3, 1)), int_inputs={1: (0, 2, "int64")}, layouts=ALL3),
    Case("logical_nan", lambda m, a, b: (m.logical_and(a, b), m.logical_not(a)), make=_special_floats),
    Case("logical_inplace", lambda m, a, b: ((a * 1).logical_and_(b), (a * 1).logical_or_(b), (a * 1).logical_xor_(b),
                                             (a * 1).logical_not_()), make=_ties),
    # ---- bitwise ----------------------------------------------------------------------------------------
    Case("bitwise_ops", lambda m, a, b: (a & b, a | b, a ^ b, ~a, m.bitwise_and(a, b), m.bitwise_or(a, b),
                                         m.bitwise_xor(a, b), m.bitwise_not(a)),
         shapes=((3, 4), (4,)), dtypes=("int64", "int32", "int16", "int8", "uint8", "bool"), low=-50, high=50),
    Case("bitwise_scalars", lambda m, a: (a & 6, 6 & a, a | 1, 1 | a, a ^ 3, 3 ^ a, m.bitwise_and(5, a), a & True),
         dtypes=("int64", "uint8", "int8"), low=-20, high=20),
    Case("bitwise_bool_scalars", lambda m, a: (a & True, a | False, a ^ True, True ^ a, a & 3), dtypes=("bool",)),
    Case("bitwise_mixed_dtypes", lambda m, a, b: (a & b, a | b, m.bitwise_xor(b, a)), shapes=((3, 4), (3, 4)),
         dtypes=("int8", "uint8", "bool"), int_inputs={1: (-9, 9, "int32")}),
    Case("bitwise_inplace", lambda m, a, b: (_iops(a, b)), shapes=((3, 4), (3, 4)), dtypes=("int64", "int16"),
         low=-30, high=30),
    Case("shifts", lambda m, a, s: (a << s, a >> s, m.bitwise_left_shift(a, s), m.bitwise_right_shift(a, s)),
         make=_shift_arrays, dtypes=("int64", "int32", "int8", "uint8")),
    Case("shift_scalars", lambda m, a: (a << 2, a >> 1, 3 << (a & 7), 1024 >> (a & 7), a << 100),
         dtypes=("int64", "int16", "uint8"), low=-20, high=20),
    Case("shift_inplace", lambda m, a, s: _ishift(a, s), make=_shift_arrays, dtypes=("int64", "int8")),
]


def _ipow(a):
    x = a * 1
    x **= 2
    x.pow_(1.5)
    return x


def _imod(a, b):
    x = a * 1
    x %= b
    x.fmod_(0.75)
    return x


def _iops(a, b):
    x = a.clone()
    x &= b
    y = a.clone()
    y |= b
    z = a.clone()
    z ^= 5
    w = a.clone().bitwise_not_()
    v = a.clone().bitwise_and_(b)
    return x, y, z, w, v


def _ishift(a, s):
    x = a.clone()
    x <<= s
    y = a.clone()
    y >>= 2
    z = a.clone().bitwise_left_shift_(3)
    w = a.clone().bitwise_right_shift_(s)
    return x, y, z, w
