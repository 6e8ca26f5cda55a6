"""torch.special's orthogonal polynomials, spherical_bessel_j0, the Hurwitz zeta and the modified_bessel_i0/i1
names against torch: degrees given as numbers and tensors (negative, fractional), integer inputs, float64,
no gradient; zeta's poles and NaN region."""
import numpy as np
import pytest
import torch

import ember

POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
         "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
         "legendre_polynomial_p"]
X = [-1.0, -0.5, 0.0, 0.3, 1.0, 1.5]


def _same(fn, rtol=1e-5):
    t, e = fn(torch), fn(ember)
    assert str(e.dtype)[6:] == str(t.dtype)[6:]
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=rtol, atol=1e-5)


@pytest.mark.parametrize("name", POLYS)
def test_polynomials_match_torch(name):
    def f(L, *a):
        return getattr(L.special, name)(*a)
    _same(lambda L: f(L, L.tensor(X), 3))
    _same(lambda L: f(L, L.tensor(X), -1))
    _same(lambda L: f(L, L.tensor(X), 2.5))
    _same(lambda L: f(L, L.tensor(X), L.tensor([0, 1, 2, 3, 4, 5])))
    _same(lambda L: f(L, L.tensor([1, 2]), 2))
    _same(lambda L: f(L, L.tensor(X, dtype=L.float64), 7), rtol=1e-10)
    _same(lambda L: f(L, L.tensor(0.3), L.tensor([10, 20])), rtol=1e-4)
    assert not f(ember, ember.tensor(X, requires_grad=True), 3).requires_grad


def test_zeta_spherical_bessel_and_i0_i1_match_torch():
    _same(lambda L: L.special.zeta(L.tensor([2.0, 3.0, 1.0, 0.5, 2.0, 4.5, 2.0]),
                                   L.tensor([1.0, 2.0, 1.0, 1.0, -1.5, 0.3, -2.0])))
    _same(lambda L: L.special.zeta(2.0, L.tensor([1.0, 5.0])))
    _same(lambda L: L.special.zeta(L.tensor([1.5, 7.0], dtype=L.float64), 0.5), rtol=1e-12)
    _same(lambda L: L.special.spherical_bessel_j0(L.tensor([0.0, 1e-5, 3.0, -2.0, 50.0])))
    _same(lambda L: L.special.modified_bessel_i0(L.tensor([0.0, 1.0, 7.5])))
    _same(lambda L: L.special.modified_bessel_i1(L.tensor([0.0, 1.0, 7.5])))


@pytest.mark.parametrize("name", POLYS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_polynomials_follow_torchs_rounding(name, dtype):
    """torch runs the recurrences in the input's dtype (with fused multiply-adds) and switches to cos/sin
    forms for Chebyshev polynomials of high degree: near the roots a more exact float64 evaluation differs
    from torch's float32 values in the 5th digit. ember follows torch's arithmetic: the recurrences agree
    bit for bit, the trigonometric forms within a few float32 ulps (libm's sin/cos against NumPy's)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-3, 3, 300), rng.uniform(-1, 1, 300), rng.uniform(0, 1, 200)]).astype(dtype)
    for n in range(0, 14):
        t = getattr(torch.special, name)(torch.tensor(x), n).numpy()
        e = getattr(ember.special, name)(ember.tensor(x), n).numpy()
        if "chebyshev" in name and dtype == "float32":
            np.testing.assert_allclose(e, t, rtol=4e-7, atol=1e-6, err_msg=f"{name} n={n}")
        else:
            np.testing.assert_array_equal(e, t, err_msg=f"{name} n={n} {dtype}")


def test_polynomial_result_dtype_promotes_with_the_degree():
    for L in (torch, ember):
        assert str(L.special.hermite_polynomial_h(L.tensor([1.5]), L.tensor([3], dtype=L.float64)).dtype)[-7:] == "float64"
        assert str(L.special.hermite_polynomial_h(L.tensor([1]), 3).dtype)[-7:] == "float32"
