"""Complex dtypes against torch: dtypes and promotion, creation, printing, the parts as views (writes
go through), refusals of ops torch does not define for complex, save/load both ways, autograd
conventions on composite functions, ember.compile and the OpenCL device. Values and gradients of the
single ops are in the op table (tests/optable/complex.py)."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

import ember
from oracle import same_error

REAL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
CPLX = ["complex64", "complex128"]


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().numpy()
    return t.detach()._data


def _close(e, t, tol=1e-5):
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e.dtype, t.dtype)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(_np(e), _np(t), rtol=1e-4, atol=tol)


# ---- dtypes and promotion ---------------------------------------------------------------------------------

def test_dtype_objects_and_aliases():
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128
    for name in CPLX:
        e, t = getattr(ember, name), getattr(torch, name)
        assert e.is_complex and not e.is_floating_point and e.itemsize == t.itemsize
        assert repr(e) == repr(t).replace("torch", "ember")
    assert ember.complex64.to_real() is ember.float32 and ember.float64.to_complex() is ember.complex128
    assert ember.tensor([1j]).is_complex() and ember.is_complex(ember.tensor([1j]))
    assert not ember.is_complex(ember.ones(1)) and not ember.ones(1).is_complex()


def test_promote_types_and_can_cast_every_pair_with_complex():
    for a, b in itertools.product(REAL + CPLX, CPLX):
        for x, y in ((a, b), (b, a)):
            ex, ey, tx, ty = getattr(ember, x), getattr(ember, y), getattr(torch, x), getattr(torch, y)
            assert ember.promote_types(ex, ey).name == str(torch.promote_types(tx, ty)).split(".")[1], (x, y)
            assert ember.can_cast(ex, ey) == torch.can_cast(tx, ty), (x, y)


def _operand(lib, kind, dt):
    if kind == "py_complex":
        return 1.5 - 0.5j
    if kind == "py_float":
        return 2.5
    if kind == "py_int":
        return 3
    shape = (2,) if kind == "tensor" else ()
    return lib.ones(shape, dtype=getattr(lib, dt))


@pytest.mark.parametrize("default", ["float32", "float64"])
def test_result_type_with_complex_operands(default):
    kinds = ["tensor", "zerodim"]
    old_t, old_e = torch.get_default_dtype(), ember.get_default_dtype()
    torch.set_default_dtype(getattr(torch, default))
    ember.set_default_dtype(getattr(ember, default))
    try:
        lefts = [(k, d) for k in kinds for d in ["bool", "int64", "float32", "float64"] + CPLX] + [("py_complex", None)]
        rights = [(k, d) for k in kinds for d in CPLX] + [("py_complex", None), ("py_float", None), ("py_int", None)]
        for (ka, a), (kb, b) in itertools.product(lefts, rights):
            if ka.startswith("py") and kb.startswith("py"):
                continue
            want = torch.result_type(_operand(torch, ka, a), _operand(torch, kb, b))
            got = ember.result_type(_operand(ember, ka, a), _operand(ember, kb, b))
            assert got.name == str(want).split(".")[1], (ka, a, kb, b)
        # ops compute in the promoted dtype: float64 tensor * 1j is complex128, int tensor + 1j the default complex
        _close(ember.ones(2, dtype=ember.float64) * 1j, torch.ones(2, dtype=torch.float64) * 1j)
        _close(ember.arange(3) + 2j, torch.arange(3) + 2j)
        _close(ember.ones(2) / ember.tensor(2 + 1j), torch.ones(2) / torch.tensor(2 + 1j))
    finally:
        torch.set_default_dtype(old_t)
        ember.set_default_dtype(old_e)


def test_half_with_complex_scalar_is_refused_clearly():
    # torch gives complex32, which ember does not have
    with pytest.raises(TypeError, match="complex32"):
        ember.ones(2, dtype=ember.float16) * 1j


# ---- creation ---------------------------------------------------------------------------------------------

def test_creation_matches_torch():
    for f in (lambda m: m.tensor([1 + 2j, 3.5, -1j]), lambda m: m.tensor([[1, 2.0], [1j, 0]]),
              lambda m: m.tensor(np.array([1 + 1j, 2], dtype=np.complex128)), lambda m: m.tensor(2 - 3j),
              lambda m: m.tensor([np.complex64(1 + 1j)]), lambda m: m.zeros(2, 3, dtype=m.cfloat),
              lambda m: m.ones(3, dtype=m.complex128), lambda m: m.full((2,), 1 + 2j),
              lambda m: m.full((2,), 3, dtype=m.complex64), lambda m: m.zeros(2, dtype=m.complex64).fill_(2 - 1j),
              lambda m: m.ones(2, 2).to(m.complex64), lambda m: m.arange(4.0).to(m.cdouble),
              lambda m: m.complex(m.tensor([1.0, 2.0]), m.tensor([3.0, -4.0])),
              lambda m: m.polar(m.tensor([1.0, 2.0], dtype=m.float64), m.tensor([0.5, -3.0], dtype=m.float64)),
              lambda m: m.from_numpy(np.array([1 + 2j], dtype=np.complex64)),
              lambda m: m.zeros_like(m.tensor([1j, 2]))):
        _close(f(ember), f(torch))


def test_random_complex_factories():
    ember.manual_seed(0)
    z = ember.randn(20000, dtype=ember.complex64)
    assert z.dtype is ember.complex64
    # torch's convention: real and imaginary parts each have variance 1/2 (so E|z|^2 = 1)
    assert abs(float((z.abs() ** 2).mean()) - 1.0) < 0.05
    assert abs(float(z.real.var()) - 0.5) < 0.05 and abs(float(z.imag.var()) - 0.5) < 0.05
    u = ember.rand(1000, dtype=ember.complex128)
    assert u.dtype is ember.complex128 and 0 <= float(u.real.min()) and float(u.imag.max()) < 1


def test_fill_value_checks_match_torch():
    same_error(lambda m: m.zeros(2).fill_(1 + 2j))
    same_error(lambda m: m.full((2,), 1 + 1j, dtype=m.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # an exactly real complex value fills a real tensor silently
        _close(ember.zeros(2).fill_(3 + 0j), torch.zeros(2).fill_(3 + 0j))
    same_error(lambda m: m.complex(m.ones(2), m.ones(2, dtype=m.float64)))
    same_error(lambda m: m.complex(m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64)))


def test_complex_to_real_cast_warns_and_keeps_real_part():
    for lib in (torch, ember):
        with pytest.warns(UserWarning, match="discards the imaginary part"):
            r = lib.tensor([1 + 2j, -3 - 1j]).to(lib.float32)
        assert r.tolist() == [1.0, -3.0]


# ---- printing ---------------------------------------------------------------------------------------------

def test_repr_matches_torch():
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    cases = [lambda m: m.tensor([1 + 2j, -3.5 - 1e-3j]), lambda m: m.tensor([[1e10 + 1j, 2]], dtype=m.complex128),
             lambda m: m.tensor(1 + 2j), lambda m: m.tensor([1 + 1j, 2 - 0j, -0.0 - 0.0j]),
             lambda m: m.tensor(np.arange(2000).reshape(40, 50) * (1 + 0.5j)), lambda m: m.zeros(0, dtype=m.complex64),
             lambda m: m.tensor([[0.1234567 + 1e-5j, 3 + 4j], [float("nan") + 1j, float("inf") * 1j]]),
             lambda m: m.ones(3, dtype=m.complex64, requires_grad=True),
             lambda m: m.tensor(noise, dtype=m.complex64), lambda m: m.tensor(noise * 1e-6)]
    for f in cases:
        assert repr(f(ember)).replace("ember", "torch") == repr(f(torch))


# ---- the parts are views ------------------------------------------------------------------------------------

def test_real_imag_views_write_through():
    for lib in (torch, ember):
        z = lib.tensor([1 + 2j, 3 - 4j, 5 + 0j])
        z.real.mul_(2)
        z.imag[1] = 7
        lib.view_as_real(z)[2, 1] = -1
        z.real = lib.tensor([9.0, 8.0, 7.0])
        assert z.tolist() == [9 + 2j, 8 + 7j, 7 - 1j]
    x = ember.zeros(3, 2)
    c = ember.view_as_complex(x)
    c.mul_(0).add_(1 + 2j)
    assert x.tolist() == [[1.0, 2.0]] * 3
    assert ember.view_as_real(c).data_ptr() == x.data_ptr()
    z = ember.tensor([[1 + 2j, 3j], [4, 5 - 1j]])
    zt = z.t()          # a non-contiguous complex tensor: its real view keeps its strides
    r = zt.real
    assert r.tolist() == [[1.0, 4.0], [0.0, 5.0]] and r.stride() == tuple(s * 2 for s in zt.stride())


def test_view_as_complex_errors_match_torch():
    same_error(lambda m: m.view_as_complex(m.ones(3, 3)))
    same_error(lambda m: m.view_as_complex(m.ones(2, 4).t()))
    same_error(lambda m: m.view_as_complex(m.ones(3, 2, dtype=m.int64)))
    same_error(lambda m: m.view_as_real(m.ones(3)))
    same_error(lambda m: m.ones(2).imag)


# ---- ops torch does not define for complex -------------------------------------------------------------------

REFUSED = {
    "lt": lambda m, z: z < z, "ge": lambda m, z: m.ge(z, 1), "maximum": lambda m, z: m.maximum(z, z),
    "max": lambda m, z: z.max(), "max_dim": lambda m, z: z.max(0), "amin": lambda m, z: z.amin(),
    "argmax": lambda m, z: z.argmax(), "sort": lambda m, z: z.sort(), "topk": lambda m, z: z.topk(1),
    "relu": lambda m, z: m.relu(z), "clamp": lambda m, z: z.clamp(0, 1), "floor": lambda m, z: z.floor(),
    "round": lambda m, z: z.round(), "sign": lambda m, z: z.sign(), "erf": lambda m, z: m.erf(z),
    "atan2": lambda m, z: m.atan2(z, z), "fmod": lambda m, z: m.fmod(z, 2), "cummax": lambda m, z: z.cummax(0),
    "median": lambda m, z: z.median(), "unique": lambda m, z: m.unique(z), "nansum": lambda m, z: z.nansum(),
    "abs_": lambda m, z: z.abs_(), "max_binary": lambda m, z: m.max(z, z), "softmax": lambda m, z: m.softmax(z, 0),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_ops_torch_refuses_for_complex_raise_its_error(name):
    f = REFUSED[name]
    with pytest.raises(Exception) as te:
        f(torch, torch.tensor([1 + 1j, 2 - 1j]))
    with pytest.raises(Exception) as ee:
        f(ember, ember.tensor([1 + 1j, 2 - 1j]))
    assert issubclass(ee.type, RuntimeError) and issubclass(te.type, RuntimeError)
    assert ee.type is te.type or {ee.type, te.type} <= {RuntimeError, NotImplementedError}, (ee.value, te.value)
    msg = str(ee.value)
    assert "omplex" in msg, msg          # names the dtype (ComplexFloat) or says complex


def test_linalg_decompositions_refuse_complex_clearly():
    # torch has complex LAPACK paths; ember's linalg is real-only so far: a clear error, never wrong values
    with pytest.raises(NotImplementedError, match="linalg.inv: complex matrices are not supported"):
        ember.linalg.inv(ember.eye(2).to(ember.complex64))


def test_in_place_ops_keep_complex():
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(np.complex64)
    for f in (lambda m, z: z.exp_(), lambda m, z: z.div_(2 + 1j), lambda m, z: z.mul_(1j).add_(z),
              lambda m, z: z.pow_(2), lambda m, z: z.sqrt_(), lambda m, z: z.masked_fill_(z.real > 0, 1j),
              lambda m, z: z.__setitem__((0, 1), 5 - 1j) or z):
        _close(f(ember, ember.tensor(a.copy())), f(torch, torch.tensor(a.copy())))


def test_random_fills_and_complex_modules():
    z = ember.empty(20000, dtype=ember.complex64)
    z.uniform_(-1, 3)
    assert -1 <= float(z.real.min()) and float(z.imag.max()) < 3 and float(z.imag.min()) < 0
    z.normal_(0, 2)
    assert abs(float(z.real.std()) - 2 ** 0.5) < 0.05 and abs(float(z.imag.std()) - 2 ** 0.5) < 0.05
    lin = ember.nn.Linear(4, 3, dtype=ember.complex64)
    assert lin.weight.dtype is ember.complex64 and lin.weight.is_leaf and lin.weight.requires_grad
    x = ember.randn(5, 4, dtype=ember.complex64)
    lin(x).abs().sum().backward()
    assert lin.weight.grad.dtype is ember.complex64 and lin.bias.grad.shape == (3,)


def test_backward_needs_real_scalar():
    same_error(lambda m: (m.ones(2, dtype=m.complex64, requires_grad=True) * 2).sum().backward(), exact=False)


# ---- autograd on composite functions --------------------------------------------------------------------------

def _grads(lib, f, arrays):
    xs = [lib.tensor(a.copy(), requires_grad=True) for a in arrays]
    out = f(lib, *xs)
    return out, lib.autograd.grad(out, xs)


COMPOSITES = {
    "abs_of_product": lambda m, a, b: (a * b.conj()).abs().sum(),
    "mixed_real_complex": lambda m, a, b: (m.view_as_real(a).sum(-1) * (b.real + 1)).pow(2).mean(),
    "angle_phase": lambda m, a, b: (a.angle() * b.abs()).sum(),
    "matmul_norm": lambda m, a, b: (a @ b.mT).abs().pow(2).sum(),
    "exp_log": lambda m, a, b: (a.exp() * b.log()).real.sum() + (a / b).imag.sum(),
    "complex_from_real_inputs": lambda m, a, b: m.complex(a.real * 2, b.imag).abs().sum(),
    "real_to_complex_cast": lambda m, a, b: (a.real.to(a.dtype) * b).abs().sum(),
    "sgn_and_sigmoid": lambda m, a, b: (a.sgn() * b.sigmoid()).real.sum(),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_gradients_of_real_losses_match_torch(name, dtype):
    rng = np.random.default_rng(3)
    arrays = [(rng.uniform(-1, 1, (3, 4)) + 1j * rng.uniform(-1, 1, (3, 4))).astype(dtype) for _ in range(2)]
    (te, tg), (ee, eg) = _grads(torch, COMPOSITES[name], arrays), _grads(ember, COMPOSITES[name], arrays)
    tol = 1e-4 if dtype == np.complex64 else 1e-9
    _close(ee, te, tol)
    for e, t in zip(eg, tg):
        _close(e, t, tol)


def test_real_leaf_used_with_complex_gets_real_gradient():
    for lib in (torch, ember):
        x = lib.tensor([1.0, -2.0], requires_grad=True)
        w = lib.tensor([1 + 2j, 3 - 1j])
        ((x * w).abs() ** 2).sum().backward()
        assert x.grad.dtype == lib.float32
        np.testing.assert_allclose(_np(x.grad), [10.0, -40.0], rtol=1e-6)


# ---- save / load ----------------------------------------------------------------------------------------------

def test_save_load_both_ways(tmp_path):
    z = ember.tensor([[1 + 2j, 3 - 4j]], dtype=ember.complex128)
    w = ember.randn(3, dtype=ember.complex64)
    ember.save({"z": z, "w": w, "part": w[1:]}, tmp_path / "e.pt")
    back = torch.load(tmp_path / "e.pt")
    assert back["z"].dtype == torch.complex128 and back["z"].tolist() == z.tolist()
    np.testing.assert_array_equal(back["part"].numpy(), w._data[1:])
    again = ember.load(tmp_path / "e.pt")
    assert again["w"].dtype is ember.complex64 and np.array_equal(again["w"]._data, w._data)
    torch.save({"t": torch.tensor([1 + 1j, 2j]), "u": torch.randn(2, 2, dtype=torch.complex128)}, tmp_path / "t.pt")
    got = ember.load(tmp_path / "t.pt")
    ref = torch.load(tmp_path / "t.pt")
    for k in ("t", "u"):
        _close(got[k], ref[k], 0)


# ---- the compiler and the OpenCL device -------------------------------------------------------------------------

COMPILED = [
    lambda x, y: (x.t() @ y).abs().sum(),
    lambda x, y: ember.cat([x, y]).reshape(-1)[::2].real.sum() + x[1].imag.sum(),
    lambda x, y: ember.view_as_real(x.conj() * y).pow(2).sum(),
    lambda x, y: (x.exp() / (y + 1)).angle().sum() + ember.complex(x.real, y.imag).abs().sum(),
    lambda x, y: ember.fft.ifft(ember.fft.fft(x, dim=0) * y, dim=0).abs().sum(),
    lambda x, y: (x.reshape(2, 8).permute(1, 0).contiguous().view(-1)[3:9] ** 2).abs().sum() + y.real.sum(),
    lambda x, y: (ember.where(x.real > 0, x, y) * (1j + y.mean(1, keepdim=True))).prod(1).abs().sum(),
]


@pytest.mark.parametrize("i", range(len(COMPILED)))
def test_compile_runs_complex_graphs_as_eager(i, recwarn):
    # no generated kernel computes in complex: those ops run their NumPy kernels inside the compiled program
    f = COMPILED[i]
    ember.manual_seed(i)
    x = ember.randn(4, 4, dtype=ember.complex64, requires_grad=True)
    y = ember.randn(4, 4, dtype=ember.complex64, requires_grad=True)
    want = f(x, y)
    gw = ember.autograd.grad(want, [x, y])
    got = ember.compile(f)(x, y)
    gg = ember.autograd.grad(got, [x, y])
    np.testing.assert_allclose(got._data, want._data, rtol=1e-5, atol=1e-5)
    for a, b in zip(gg, gw):
        np.testing.assert_allclose(a._data, b._data, rtol=1e-4, atol=1e-5)
    # declined cleanly (extern calls), not by a failed native build
    assert not [w for w in recwarn.list if "native code generation failed" in str(w.message)]


def test_mutating_views_inside_compile():
    def f(z):
        z.real.mul_(2)
        ember.view_as_real(z)[:, 1] += 1
        z.view(-1)[0] += 1j
        return z * 1
    a, b = ember.tensor([1 + 1j, 2 + 3j]), ember.tensor([1 + 1j, 2 + 3j])
    ra, rb = ember.compile(f)(a), f(b)
    assert ra.tolist() == rb.tolist() == [2 + 3j, 4 + 4j] and a.tolist() == b.tolist()


def test_complex_on_opencl_falls_back_to_cpu():
    from ember.devices import opencl
    if not opencl.is_available():
        pytest.skip(f"no OpenCL device: {opencl.unavailable_reason()}")
    x = ember.randn(4, 4, dtype=ember.complex64)
    d = x.to("opencl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # each op warns that it runs on the host (a counted fallback)
        checks = [(lambda t: (t * t + 1).exp().sum()), (lambda t: t.t().contiguous()), (lambda t: t @ t),
                  (lambda t: ember.fft.fft(t)), (lambda t: t.real * 2), (lambda t: ember.view_as_real(t)),
                  (lambda t: t.abs()), (lambda t: t.clone().fill_(1 + 2j))]
        for f in checks:
            r = f(d)
            assert r.device == d.device
            np.testing.assert_allclose(r.cpu()._data, f(x)._data, rtol=1e-5, atol=1e-5)
        w = ember.randn(4, 4, dtype=ember.complex64).to("opencl").requires_grad_()
        (w @ d).abs().sum().backward()
        wc = w.detach().cpu().requires_grad_()
        (wc @ x).abs().sum().backward()
        np.testing.assert_allclose(w.grad.cpu()._data, wc.grad._data, rtol=1e-4, atol=1e-5)
