"""Oracle cases for complex tensors (ember/ops/complex_ops.py and the ops that compute in complex):
values and gradients against torch in complex64 and complex128, with torch's convention for the
gradient of a real loss (the oracle's loss reads complex outputs through view_as_real)."""
import numpy as np

from oracle import Case

C = ("complex64", "complex128")
LAYOUTS = ("contig", "noncontig", "zero")


def _op(name, **kw):
    return lambda m, *a: getattr(m, name)(*a, **kw)


def _pairs(rng, dtype):
    # float (..., 2) arrays for view_as_complex (last dim: real, imag)
    dt = np.float32 if dtype == "float32" else np.float64
    return [rng.uniform(-2, 2, size=(3, 4, 2)).astype(dt)]


def _with_zero(rng, dtype):
    dt = np.complex64 if dtype == "complex64" else np.complex128
    a = rng.uniform(-2, 2, size=(3, 4)) + 1j * rng.uniform(-2, 2, size=(3, 4))
    a[1, 2] = 0
    return [a.astype(dt)]


CASES = [
    # the parts and conj
    Case("complex_real", lambda m, z: m.real(z) * 1, dtypes=C, layouts=LAYOUTS),
    Case("complex_real_attr", lambda m, z: z.real * 2, dtypes=C),
    Case("complex_imag", lambda m, z: m.imag(z) * 1, dtypes=C, layouts=LAYOUTS),
    Case("complex_view_as_real", lambda m, z: m.view_as_real(z) * 1, dtypes=C),
    Case("complex_view_as_complex", lambda m, x: m.view_as_complex(x) * 1, make=_pairs,
         dtypes=("float32", "float64"), layouts=("contig",)),
    Case("complex_conj", lambda m, z: m.conj_physical(z), dtypes=C, layouts=LAYOUTS),
    Case("complex_conj_method", lambda m, z: z.conj() * (1 + 2j), dtypes=C),
    Case("complex_angle", _op("angle"), dtypes=C, make=_with_zero),
    Case("angle_real", _op("angle"), layouts=LAYOUTS),
    Case("complex_abs", _op("abs"), dtypes=C, make=_with_zero, layouts=("contig", "noncontig")),
    Case("complex_sgn", _op("sgn"), dtypes=C, make=_with_zero),
    Case("complex_from_parts", lambda m, a, b: m.complex(a, b), shapes=((3, 4), (4,))),
    Case("complex_polar", lambda m, r, t: m.polar(r, t), shapes=((3, 4), (3, 4)), low=0.1, high=2.0),
    Case("complex_to_real_cast", lambda m, z: z.real.to(m.complex128 if z.dtype == m.float64 else m.complex64) * z.real,
         layouts=("contig",)),
    # holomorphic elementwise ops: grad * conj(f'(z))
    *[Case(f"complex_{n}", _op(n), dtypes=C, low=-1.0, high=1.0, double_backward=True)
      for n in ("exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "sigmoid", "reciprocal",
                "rsqrt", "asin", "acos", "atan", "asinh", "acosh", "atanh", "log1p", "expm1", "log2", "log10",
                "exp2", "square", "neg")],
    Case("complex_mul", _op("mul"), shapes=((3, 4), (3, 4)), dtypes=C, double_backward=True),
    Case("complex_div", _op("div"), shapes=((3, 4), (4,)), dtypes=C, low=0.5, high=2.0),
    Case("complex_add_sub", lambda m, a, b: m.add(a, b, alpha=2) - b, shapes=((3, 4), (3, 4)), dtypes=C),
    Case("complex_pow", _op("pow"), shapes=((3, 4), (3, 4)), dtypes=C, low=0.5, high=1.5),
    Case("complex_pow_scalar", lambda m, z: z ** 2.5, dtypes=C, low=0.5, high=1.5),
    Case("complex_scalar_mul", lambda m, z: z * (2 - 1j) + 1j, dtypes=C),
    Case("complex_matmul", _op("matmul"), shapes=((3, 4), (4, 2)), dtypes=C),
    Case("complex_bmm", _op("bmm"), shapes=((2, 3, 4), (2, 4, 2)), dtypes=C, layouts=("contig",)),
    Case("complex_einsum", lambda m, a, b: m.einsum("ij,kj->ik", a, b), shapes=((3, 4), (2, 4)), dtypes=C),
    Case("complex_vdot", _op("vdot"), shapes=((5,), (5,)), dtypes=C),
    Case("complex_sum", lambda m, z: z.sum(0), dtypes=C, layouts=LAYOUTS),
    Case("complex_mean", lambda m, z: z.mean(), dtypes=C),
    Case("complex_prod", lambda m, z: z.prod(1), dtypes=C),
    Case("complex_cumsum", lambda m, z: z.cumsum(1), dtypes=C),
    Case("complex_linear", lambda m, x, w, b: m.nn.functional.linear(x, w, b), shapes=((5, 4), (3, 4), (3,)),
         dtypes=C),
    Case("complex_conv2d", lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1), shapes=((2, 3, 5, 5), (4, 3, 3, 3)),
         dtypes=C, layouts=("contig",)),
    Case("complex_conv_transpose2d", lambda m, x, w: m.nn.functional.conv_transpose2d(x, w, stride=2),
         shapes=((2, 3, 4, 4), (3, 2, 3, 3)), dtypes=C, layouts=("contig",)),
    Case("complex_addcmul", lambda m, a, b, c: m.addcdiv(m.addcmul(a, b, c, value=2), b, c + 3), shapes=((3, 4),) * 3,
         dtypes=C),
    Case("complex_addmm", lambda m, b, x, w: m.addmm(b, x, w, beta=0.5, alpha=2 - 1j), shapes=((3,), (5, 4), (4, 3)),
         dtypes=C),
    Case("complex_adjoints", lambda m, z: z.mH @ z + z.H @ m.adjoint(z).mH, dtypes=C),
    Case("complex_var", lambda m, z: z.var(0), dtypes=C),
    Case("complex_std", lambda m, z: z.std(1, correction=0, keepdim=True), dtypes=C),
    Case("complex_logsumexp", lambda m, z: m.logsumexp(z, 1), dtypes=C),
    Case("complex_vector_norm", lambda m, z: m.linalg.vector_norm(z, 3, dim=0), dtypes=C, make=_with_zero),
    Case("complex_masked_fill", lambda m, z: z.masked_fill(z.real > 0, 2 - 1j), dtypes=C),
    Case("complex_isreal", lambda m, z: m.isreal(m.where(z.real > 0, z.real.to(z.dtype), z)), dtypes=C, grad=False),
]
