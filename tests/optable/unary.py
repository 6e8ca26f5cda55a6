"""Oracle cases for ember/ops/unary.py: every unary op against torch, values and gradients."""
import numpy as np

from oracle import Case

ALL_LAYOUTS = ("contig", "noncontig", "zero")
INTS = ("int64", "int32", "uint8")


def _op(name, **kw):
    return lambda m, a: getattr(m, name)(a, **kw)


def _specials(rng, dtype):
    """A (3, 4) array holding nan, +-inf, +-0 and ordinary values."""
    vals = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 3.0, -1.0, 0.25, np.nan, -np.inf])
    return [rng.permutation(vals).reshape(3, 4).astype(dtype)]


def _ties(rng, dtype):
    """Values from a small set, so x hits min/max/0 exactly (gradient conventions at kinks)."""
    pick = lambda shape: rng.choice(np.array([-1.0, 0.0, 1.0, 2.0]), size=shape).astype(dtype)  # noqa: E731
    return [pick((4, 5)), pick((4, 5)), pick((4, 5))]


def _with_zeros(rng, dtype):
    a = rng.uniform(-2, 2, size=(3, 4))
    a[0, :2] = 0.0
    a[2, 3] = 0.0
    return [a.astype(dtype)]


# (name, low, high, double_backward): float-valued ops with the domain their derivative is finite on
FLOAT_OPS = [
    ("exp", -2, 2, True), ("exp2", -2, 2, True), ("expm1", -2, 2, True),
    ("log", 0.5, 3, True), ("log2", 0.5, 3, True), ("log10", 0.5, 3, True), ("log1p", -0.5, 2, True),
    ("sqrt", 0.5, 3, True), ("rsqrt", 0.5, 3, True), ("reciprocal", 0.5, 3, True),
    ("sin", -3, 3, True), ("cos", -3, 3, True), ("tan", -1.2, 1.2, True),
    ("asin", -0.9, 0.9, True), ("arcsin", -0.9, 0.9, False), ("acos", -0.9, 0.9, True),
    ("arccos", -0.9, 0.9, False), ("atan", -3, 3, True), ("arctan", -3, 3, False),
    ("sinh", -2, 2, True), ("cosh", -2, 2, True), ("tanh", -2, 2, True),
    ("asinh", -3, 3, True), ("arcsinh", -3, 3, False), ("acosh", 1.2, 3, True), ("arccosh", 1.2, 3, False),
    ("atanh", -0.9, 0.9, True), ("arctanh", -0.9, 0.9, False),
    ("sigmoid", -4, 4, True), ("logit", 0.05, 0.95, True),
    ("erf", -3, 3, True), ("erfc", -3, 3, True), ("erfinv", -0.95, 0.95, True),
    ("deg2rad", -90, 90, True), ("rad2deg", -3, 3, True), ("sinc", -2, 2, True),
    ("i0", -4, 4, True), ("lgamma", 0.3, 6, True), ("digamma", 0.3, 6, True),
]

CASES = []
for _name, _lo, _hi, _db in FLOAT_OPS:
    CASES.append(Case(_name, _op(_name), low=_lo, high=_hi, double_backward=_db, layouts=ALL_LAYOUTS))

CASES += [
    # special functions off the easy range
    Case("erf_wide", _op("erf"), shapes=((50,),), low=-7, high=7, double_backward=True),
    Case("erfc_wide", _op("erfc"), shapes=((50,),), low=-5, high=9, rtol=1e-4, atol=1e-30),
    Case("erfinv_tails", _op("erfinv"), shapes=((40,),), low=-0.99999, high=0.99999, rtol=1e-4, atol=1e-4),
    Case("lgamma_negative", _op("lgamma"), low=-3.9, high=-3.1, double_backward=True),
    Case("lgamma_large", _op("lgamma"), low=10, high=1000),
    Case("digamma_negative", _op("digamma"), low=-2.9, high=-2.1, double_backward=True),
    Case("i0_large", _op("i0"), shapes=((30,),), low=-60, high=60, rtol=1e-4),
    Case("polygamma1", lambda m, a: m.polygamma(1, a), low=0.3, high=6, double_backward=True),
    Case("polygamma3_method", lambda m, a: a.polygamma(3), low=0.5, high=6, double_backward=True),
    Case("logit_eps", lambda m, a: m.logit(a, eps=0.2), low=0.05, high=0.95, double_backward=True),
    Case("logit_no_eps_out_of_range", lambda m, a: m.logit(a), low=-0.5, high=1.5),
    Case("logit_negative_eps", lambda m, a: m.logit(a, -1.0), low=0.05, high=0.95),
    Case("sinc_at_zero", _op("sinc"), make=_with_zeros),
    Case("chain_exp_log_sigmoid", lambda m, a: m.sigmoid(m.log(m.exp(a) + 1.0)).tanh(), double_backward=True),
    # dtype-preserving ops
    Case("abs", _op("abs"), make=_with_zeros),
    Case("absolute", _op("absolute")),
    Case("sign", _op("sign"), make=_with_zeros),
    Case("sgn", _op("sgn"), grad=False),   # torch returns a ZeroTensor gradient the oracle cannot read
    Case("signbit", _op("signbit"), make=_specials),
    Case("square", _op("square"), double_backward=True, layouts=ALL_LAYOUTS),
    Case("floor", _op("floor"), low=-3, high=3, layouts=ALL_LAYOUTS),
    Case("ceil", _op("ceil"), low=-3, high=3),
    Case("round", _op("round"), low=-3, high=3),
    Case("round_decimals", lambda m, a: m.round(a, decimals=2), low=-3, high=3),
    Case("round_negative_decimals", lambda m, a: a.round(decimals=-1), low=-300, high=300),
    Case("trunc", _op("trunc"), low=-3, high=3),
    Case("fix", _op("fix"), low=-3, high=3),
    Case("frac", _op("frac"), low=-3, high=3, double_backward=True),
    Case("relu", _op("relu"), make=_with_zeros, double_backward=True),
    Case("positive", _op("positive")),
    Case("nan_to_num", _op("nan_to_num"), make=_specials, double_backward=True),
    Case("nan_to_num_values", lambda m, a: m.nan_to_num(a, nan=1.5, posinf=7.0, neginf=-8.0), make=_specials),
    Case("nan_to_num_plain", lambda m, a: a.nan_to_num(posinf=1e3), layouts=ALL_LAYOUTS),
    # classification (on nan/inf/-0.0 values)
    Case("classify", lambda m, a: (m.isnan(a), m.isinf(a), m.isposinf(a), m.isneginf(a), m.isfinite(a),
                                   m.isreal(a), a.isnan(), a.isfinite()), make=_specials),
    Case("classify_int", lambda m, a: (m.isnan(a), m.isinf(a), m.isposinf(a), m.isneginf(a), m.isfinite(a),
                                       m.isreal(a), m.signbit(a)), dtypes=("int64", "uint8", "bool")),
    Case("ops_on_specials", lambda m, a: tuple(getattr(m, n)(a) for n in (
        "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "erf", "erfc", "erfinv", "floor", "round", "frac",
        "abs", "sign", "relu", "lgamma", "digamma", "i0", "sinc", "logit", "atan", "asinh")), make=_specials,
        grad=False),
    # clamp
    Case("clamp", lambda m, a: m.clamp(a, -0.5, 1.0), double_backward=True, layouts=ALL_LAYOUTS),
    Case("clamp_min_only", lambda m, a: a.clamp(min=0.1)),
    Case("clamp_max_only", lambda m, a: a.clamp(max=0.1)),
    Case("clamp_min_gt_max", lambda m, a: m.clamp(a, 1.0, -1.0)),
    Case("clip", lambda m, a: m.clip(a, -1, 1)),
    Case("clamp_tensors", lambda m, a, lo, hi: m.clamp(a, lo, hi), shapes=((3, 4), (4,), (3, 1)),
         double_backward=True),
    Case("clamp_tensor_min", lambda m, a, lo: m.clamp(a, min=lo), shapes=((3, 4), (3, 4))),
    Case("clamp_tensor_max", lambda m, a, hi: a.clamp(max=hi), shapes=((3, 4), (1, 4))),
    Case("clamp_ties", lambda m, a, lo, hi: m.clamp(a, lo, hi), make=_ties),
    Case("clamp_scalar_ties", lambda m, a: m.clamp(a, 0.0, 1.0), make=lambda rng, dt: _ties(rng, dt)[:1]),
    Case("clamp_min_fn", lambda m, a, lo: m.clamp_min(a, lo), shapes=((3, 4), (4,))),
    Case("clamp_max_fn", lambda m, a: m.clamp_max(a, 0.3)),
    Case("clamp_broadcast_out", lambda m, a, lo: m.clamp(a, lo), shapes=((4,), (3, 1))),
    Case("clamp_int", lambda m, a: (m.clamp(a, -1, 1), m.clamp(a, 0.5), a.clamp_min(0), a.clamp_max(1)),
         dtypes=INTS),
    Case("clamp_int_tensor", lambda m, a, b: m.clamp(a, b), shapes=((3, 4), (4,)), dtypes=("int64",)),
    Case("clamp_mixed_dtypes", lambda m, a, b: m.clamp(a, m.tensor(0.25, dtype=m.float64), b.double()),
         shapes=((3, 4), (4,))),
    # in-place and out= forms through autograd
    Case("inplace_chain", lambda m, a: (a * 1.0).sin_().clamp_(max=0.5).abs_().add(0.1).log1p_().sqrt_(),
         double_backward=True),
    Case("inplace_on_view", lambda m, a: _inplace_view(m, a), double_backward=True),
    Case("function_inplace", lambda m, a: m.tanh_(a * 1.0)),
    # integer and bool inputs: float ops promote to the default float dtype, others keep the dtype
    Case("float_ops_int", lambda m, a: tuple(getattr(m, n)(a) for n, *_ in FLOAT_OPS), dtypes=INTS + ("bool",),
         low=-2, high=3),
    Case("polygamma_int", lambda m, a: m.polygamma(2, a), dtypes=INTS, low=1, high=5),
    Case("logit_int", lambda m, a: m.logit(a, 0.25), dtypes=INTS + ("bool",), low=0, high=1),
    Case("same_ops_int", lambda m, a: tuple(getattr(m, n)(a) for n in (
        "abs", "sign", "sgn", "square", "floor", "ceil", "round", "trunc", "fix", "relu", "nan_to_num",
        "positive", "signbit", "neg")), dtypes=("int64", "int32", "int8"), low=-3, high=3),
    Case("same_ops_uint8", lambda m, a: tuple(getattr(m, n)(a) for n in (
        "abs", "sign", "square", "floor", "relu", "nan_to_num")), dtypes=("uint8",), low=0, high=9),
    Case("bool_ops", lambda m, a: (m.sign(a), m.square(a), m.nan_to_num(a), m.sgn(a)), dtypes=("bool",)),
]


def _inplace_view(m, a):
    x = a * 1.0
    x[:, 1:3].atan_()
    x[0].tanh_()
    return x
