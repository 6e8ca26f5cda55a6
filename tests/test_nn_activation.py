"""ember.nn activations (functional and module forms) against torch: values, gradients, in-place forms,
dtypes, errors and module reprs."""
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
import ember.nn.functional as EF
import torch.nn as tnn
import torch.nn.functional as TF


def _pair(arr, rg=True):
    e = ember.tensor(arr.copy())
    t = torch.tensor(arr.copy())
    if rg:
        e.requires_grad_(True)
        t.requires_grad_(True)
    return e, t


def _close(e, t, rtol=1e-5, atol=1e-6):
    assert tuple(e.shape) == tuple(t.shape)
    assert e.dtype.name == str(t.dtype).replace("torch.", "")
    np.testing.assert_allclose(e.detach().numpy().astype(np.float64), t.detach().numpy().astype(np.float64),
                               rtol=rtol, atol=atol)


def _check(e_fn, t_fn, arr, rtol=1e-5, atol=1e-6):
    """Forward values and input gradients (for a random upstream gradient) agree with torch."""
    e, t = _pair(arr)
    eo, to = e_fn(e), t_fn(t)
    _close(eo, to, rtol, atol)
    w = np.random.default_rng(1).standard_normal(tuple(to.shape)).astype(arr.dtype)
    (eo * ember.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    _close(e.grad, t.grad, rtol, atol)


def _data(dtype=np.float64, shape=(4, 7), scale=3.0, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * scale
    x.reshape(-1)[:6] = [0.0, -0.0, 0.5, -0.5, 3.0, -3.0]      # boundaries of the piecewise activations
    return x.astype(dtype)


# name, args, kwargs (same call in both libraries)
FUNCS = [
    ("relu", (), {}), ("relu6", (), {}), ("leaky_relu", (), {}), ("leaky_relu", (0.3,), {}),
    ("elu", (), {}), ("elu", (0.5,), {}), ("selu", (), {}), ("celu", (), {}), ("celu", (2.0,), {}),
    ("gelu", (), {}), ("gelu", (), {"approximate": "tanh"}), ("silu", (), {}), ("mish", (), {}),
    ("tanh", (), {}), ("sigmoid", (), {}), ("softplus", (), {}), ("softplus", (), {"beta": 2.0, "threshold": 1.5}),
    ("softshrink", (), {}), ("softshrink", (1.0,), {}), ("hardshrink", (), {}), ("hardshrink", (1.5,), {}),
    ("tanhshrink", (), {}), ("hardtanh", (), {}), ("hardtanh", (-2.0, 0.5), {}), ("hardsigmoid", (), {}),
    ("hardswish", (), {}), ("logsigmoid", (), {}), ("softsign", (), {}), ("softmin", (1,), {}),
    ("softmax", (0,), {}), ("log_softmax", (1,), {}), ("glu", (), {"dim": 0}), ("threshold", (0.5, -2.0), {}),
    ("threshold", (-1.0, 4.0), {}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,args,kw", FUNCS, ids=[f"{n}{a}{k}" for n, a, k in FUNCS])
def test_functional_matches_torch(name, args, kw, dtype):
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)
    _check(lambda x: getattr(EF, name)(x, *args, **kw), lambda x: getattr(TF, name)(x, *args, **kw),
           _data(dtype), **tol)


def test_large_and_tiny_inputs_stay_finite():
    x = np.array([-1000.0, -50.0, -20.0, 0.0, 20.0, 50.0, 1000.0])
    for name in ["elu", "selu", "celu", "gelu", "silu", "mish", "softplus", "logsigmoid", "sigmoid", "tanh"]:
        _check(getattr(EF, name), getattr(TF, name), x)
    _check(lambda v: EF.gelu(v, approximate="tanh"), lambda v: TF.gelu(v, approximate="tanh"), x)


def test_nan_propagates_like_torch():
    x = np.array([np.nan, 1.0, -1.0])
    for name in ["relu", "leaky_relu", "elu", "gelu", "silu", "softplus", "softshrink", "hardshrink", "hardtanh",
                 "hardswish", "logsigmoid"]:
        e, t = _pair(x, rg=False)
        np.testing.assert_array_equal(np.isnan(getattr(EF, name)(e).numpy()), np.isnan(getattr(TF, name)(t).numpy()),
                                      err_msg=name)


def test_prelu_functional_shapes():
    rng = np.random.default_rng(0)
    for xshape, wshape in [((2, 3, 4, 5), (3,)), ((2, 3, 4), (1,)), ((5,), (1,)), ((), (1,)), ((4, 6), (6,)),
                           ((2, 3), ())]:
        x = rng.standard_normal(xshape)
        w = rng.uniform(0.05, 0.5, wshape)
        e, t = _pair(x)
        ew, tw = _pair(w)
        eo, to = EF.prelu(e, ew), TF.prelu(t, tw)
        _close(eo, to)
        g = rng.standard_normal(tuple(to.shape))
        (eo * ember.tensor(g)).sum().backward()
        (to * torch.tensor(g)).sum().backward()
        _close(e.grad, t.grad)
        _close(ew.grad, tw.grad)


def test_half_precision_keeps_dtype():
    x = _data(np.float32)
    for name in ["gelu", "silu", "mish", "elu", "softplus", "softshrink", "leaky_relu", "hardswish",
                 "hardsigmoid", "logsigmoid", "hardtanh"]:
        e = getattr(EF, name)(ember.tensor(x).half())
        t = getattr(TF, name)(torch.tensor(x).half())
        assert e.dtype is ember.float16, name
        np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=2e-3, atol=2e-3, err_msg=name)
    e = EF.gelu(ember.tensor(x).bfloat16())
    assert e.dtype is ember.bfloat16


def test_integer_inputs():
    x = np.array([-3, -1, 0, 2, 7])
    for fn in [lambda m, v: m.nn.functional.relu(v), lambda m, v: m.nn.functional.relu6(v),
               lambda m, v: m.nn.functional.hardtanh(v), lambda m, v: m.nn.functional.threshold(v, 1, 5),
               lambda m, v: m.nn.functional.threshold(v, 1.5, 5.5)]:
        e, t = fn(ember, ember.tensor(x)), fn(torch, torch.tensor(x))
        assert e.dtype is ember.int64
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    for m, kname in [("gelu", "GeluKernelImpl"), ("silu", "silu_cpu"), ("elu", "elu_cpu"),
                     ("leaky_relu", "leaky_relu_cpu"), ("softplus", "softplus_cpu"), ("mish", "mish_cpu"),
                     ("softshrink", "softshrink_check"), ("hardshrink", "hardshrink_cpu"),
                     ("hardswish", "hardswish_cpu"), ("hardsigmoid", "hardsigmoid_cpu"),
                     ("logsigmoid", "log_sigmoid_cpu")]:
        with pytest.raises(NotImplementedError, match=f'"{kname}" not implemented for \'Long\''):
            getattr(EF, m)(ember.tensor(x))
        with pytest.raises(NotImplementedError):
            getattr(TF, m)(torch.tensor(x))
    # torch's sigmoid-family ops promote integers to float
    _close(EF.tanhshrink(ember.tensor(x)), TF.tanhshrink(torch.tensor(x)))
    _close(EF.softsign(ember.tensor(x)), TF.softsign(torch.tensor(x)))


def test_errors_match_torch():
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    cases = [
        (lambda m, v: m.nn.functional.hardtanh(v, 2.0, 1.0), ValueError, "min_val cannot be greater than max_val"),
        (lambda m, v: m.nn.functional.softshrink(v, -1.0), RuntimeError,
         r"lambda must be in range \[0, 1.79769e\+308\] for input dtype Double, but found -1"),
        (lambda m, v: m.nn.functional.gelu(v, approximate="foo"), RuntimeError,
         "approximate argument must be either none or tanh."),
        (lambda m, v: m.nn.functional.glu(v, 1), RuntimeError,
         "Halving dimension must be even, but dimension 1 is size 3"),
        (lambda m, v: m.nn.functional.glu(v.sum()), RuntimeError,
         "glu does not support scalars because halving size must be even"),
        (lambda m, v: m.nn.functional.glu(v, 5), IndexError, "Dimension out of range"),
        (lambda m, v: m.nn.functional.celu(v, 0.0), RuntimeError, "ZeroDivisionError: alpha cannot be 0 for CELU"),
        (lambda m, v: m.nn.functional.prelu(v, m.ones(4, dtype=v.dtype)), RuntimeError,
         "Mismatch of parameter numbers and input channel size. Found parameter numbers = 4 and channel size = 3."),
        (lambda m, v: m.nn.functional.prelu(v, m.ones(3, 1, dtype=v.dtype)), RuntimeError,
         "prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = 2"),
        (lambda m, v: m.nn.functional.prelu(v, m.ones(3)), RuntimeError,
         "prelu: Type promoting not supported. Got Double and Float"),
        (lambda m, v: m.nn.functional.relu(v > 0), RuntimeError, "Boolean inputs not supported for relu"),
        (lambda m, v: m.nn.functional.hardtanh(v > 0), RuntimeError, "Bool inputs not supported for hardtanh"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn(torch, torch.tensor(x))
        with pytest.raises(exc, match=msg):
            fn(ember, ember.tensor(x))
    with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, 3.40282e\+38\] for input dtype Float"):
        EF.softshrink(ember.tensor(x).float(), -0.5)


@pytest.mark.parametrize("nd", [0, 1, 2, 3, 4])
def test_softmax_implicit_dim(nd):
    x = np.random.default_rng(nd).standard_normal((2, 3, 4, 5)[:nd])
    for name in ["softmax", "log_softmax", "softmin"]:
        with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name} has been deprecated"):
            eo = getattr(EF, name)(ember.tensor(x))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            to = getattr(TF, name)(torch.tensor(x))
        _close(eo, to)


def test_softmax_dtype_argument():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for name in ["softmax", "log_softmax", "softmin"]:
        eo = getattr(EF, name)(ember.tensor(x), 1, dtype=ember.float64)
        to = getattr(TF, name)(torch.tensor(x), 1, dtype=torch.float64)
        _close(eo, to)


# ---- in-place forms ---------------------------------------------------------------------------------------

INPLACE = [("relu", (), {}), ("relu6", (), {}), ("leaky_relu", (0.1,), {}), ("elu", (0.7,), {}), ("selu", (), {}),
           ("celu", (1.3,), {}), ("silu", (), {}), ("mish", (), {}), ("hardtanh", (-0.5, 0.5), {}),
           ("hardsigmoid", (), {}), ("hardswish", (), {}), ("threshold", (0.2, -1.0), {})]


@pytest.mark.parametrize("name,args,kw", INPLACE, ids=[n for n, _, _ in INPLACE])
def test_inplace_matches_torch(name, args, kw):
    x = _data(np.float64)
    e, t = _pair(x)
    ey, ty = e * 1.5, t * 1.5          # non-leaf, so in-place is allowed under autograd
    eo = getattr(EF, name)(ey, *args, inplace=True, **kw)
    to = getattr(TF, name)(ty, *args, inplace=True, **kw)
    assert eo is ey
    _close(ey, ty)
    g = np.random.default_rng(2).standard_normal(x.shape)
    (eo * ember.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    _close(e.grad, t.grad)


def test_inplace_underscore_functions():
    x = _data(np.float64)
    for name, args in [("relu_", ()), ("elu_", (0.5,)), ("selu_", ()), ("celu_", (2.0,)), ("leaky_relu_", (0.2,)),
                       ("hardtanh_", (-0.3, 0.4)), ("threshold_", (0.1, 7.0)), ("rrelu_", (0.1, 0.3))]:
        e, t = ember.tensor(x.copy()), torch.tensor(x.copy())
        getattr(EF, name)(e, *args)
        getattr(TF, name)(t, *args)
        _close(e, t)


def test_inplace_on_leaf_requiring_grad_raises():
    e = ember.tensor([1.0, -1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        EF.elu(e, inplace=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        EF.relu(e, inplace=True)


def test_inplace_without_grad_writes_buffer():
    x = _data(np.float32)
    e = ember.tensor(x.copy())
    view = e[1]
    EF.hardswish(e, inplace=True)
    np.testing.assert_allclose(view.numpy(), TF.hardswish(torch.tensor(x))[1].numpy(), rtol=1e-6)


# ---- rrelu -------------------------------------------------------------------------------------------------

def test_rrelu_eval_and_train():
    x = _data(np.float64)
    _check(lambda v: EF.rrelu(v, 0.1, 0.3), lambda v: TF.rrelu(v, 0.1, 0.3), x)
    ember.manual_seed(0)
    e = ember.tensor(x, requires_grad=True)
    out = EF.rrelu(e, 0.1, 0.3, training=True)
    out.sum().backward()
    o, g = out.detach().numpy(), e.grad.numpy()
    neg = x <= 0
    np.testing.assert_array_equal(o[~neg], x[~neg])
    slope = g[neg & (x != 0)]
    assert np.all((slope >= 0.1) & (slope <= 0.3)) and len(np.unique(slope)) > 1
    np.testing.assert_allclose(o[neg], x[neg] * g[neg])
    m = enn.RReLU(0.1, 0.3)
    m.eval()
    _close(m(ember.tensor(x)), tnn.RReLU(0.1, 0.3).eval()(torch.tensor(x)))


# ---- modules ---------------------------------------------------------------------------------------------

MODULES = [
    ("ReLU", (), {}), ("ReLU", (True,), {}), ("ReLU6", (), {}), ("ReLU6", (), {"inplace": True}),
    ("LeakyReLU", (), {}), ("LeakyReLU", (0.2, True), {}), ("ELU", (), {}), ("ELU", (0.5,), {"inplace": True}),
    ("SELU", (), {}), ("SELU", (True,), {}), ("CELU", (1.5,), {}), ("GELU", (), {}), ("GELU", ("tanh",), {}),
    ("SiLU", (), {}), ("SiLU", (True,), {}), ("Mish", (), {}), ("Mish", (True,), {}), ("Tanh", (), {}),
    ("Sigmoid", (), {}), ("Softplus", (), {}), ("Softplus", (2, 10), {}), ("Softshrink", (), {}),
    ("Softshrink", (1.0,), {}), ("Hardshrink", (0.25,), {}), ("Tanhshrink", (), {}), ("Hardtanh", (), {}),
    ("Hardtanh", (-2.0, 3.0, True), {}), ("Hardsigmoid", (), {}), ("Hardswish", (True,), {}),
    ("LogSigmoid", (), {}), ("Softsign", (), {}), ("Softmin", (1,), {}), ("Softmax", (), {"dim": -1}),
    ("LogSoftmax", (1,), {}), ("GLU", (), {}), ("GLU", (0,), {}), ("Threshold", (0.1, 20), {}),
    ("Threshold", (0.1, 20.0, True), {}), ("RReLU", (), {}), ("RReLU", (0.1, 0.2, True), {}), ("Softmax2d", (), {}),
    ("PReLU", (), {}), ("PReLU", (4, 0.1), {}),
]


@pytest.mark.parametrize("name,args,kw", MODULES, ids=[f"{n}{a}{k}" for n, a, k in MODULES])
def test_module_repr_and_forward(name, args, kw):
    em, tm = getattr(enn, name)(*args, **kw), getattr(tnn, name)(*args, **kw)
    assert repr(em) == repr(tm)
    em, tm = em.double(), tm.double()
    em.eval()
    tm.eval()
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert list(em.state_dict()) == list(tm.state_dict())
    x = _data(np.float64, shape=(2, 4, 6))
    e, t = _pair(x)
    eo, to = em(e * 1.0), tm(t * 1.0)
    _close(eo, to)
    g = np.random.default_rng(3).standard_normal(tuple(to.shape))
    (eo * ember.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    _close(e.grad, t.grad)
    for (n, ep), (_, tp) in zip(em.named_parameters(), tm.named_parameters()):
        _close(ep.grad, tp.grad)


def test_prelu_module_parameters():
    em = enn.PReLU(3, init=0.3)
    assert isinstance(em.weight, enn.Parameter) and em.weight.requires_grad
    assert em.weight.shape == (3,) and np.all(em.weight.detach().numpy() == np.float32(0.3))
    assert em.weight.dtype is ember.float32
    assert enn.PReLU(dtype=ember.float64).weight.dtype is ember.float64
    em.reset_parameters()
    assert np.all(em.weight.detach().numpy() == np.float32(0.3))
    x = _data(np.float32, shape=(2, 3, 5))
    e = ember.tensor(x, requires_grad=True)
    em(e).sum().backward()
    tm = tnn.PReLU(3, init=0.3)
    t = torch.tensor(x, requires_grad=True)
    tm(t).sum().backward()
    _close(em.weight.grad, tm.weight.grad, rtol=1e-5, atol=1e-5)


def test_module_attributes_and_deprecated_hardtanh_args():
    m = enn.Hardtanh(-2.0, 2.0)
    assert (m.min_val, m.max_val, m.inplace) == (-2.0, 2.0, False)
    with pytest.warns(FutureWarning, match="keyword argument `min_value` is deprecated"):
        m = enn.Hardtanh(min_value=-3.0)
    assert m.min_val == -3.0
    with pytest.raises(AssertionError, match=r"max_val \(1.0\) must be greater than min_val \(2.0\)"):
        enn.Hardtanh(2.0, 1.0)
    assert enn.Softmax(1).dim == 1 and enn.LeakyReLU(0.3).negative_slope == 0.3
    assert enn.GELU("tanh").approximate == "tanh" and enn.Softplus(2, 5).threshold == 5
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
        enn.Softmax2d()(ember.ones(2, 3))


def test_softmax_module_implicit_dim_warns():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        enn.Softmax()(ember.ones(2, 3))


def test_modules_in_sequential_repr():
    em = enn.Sequential(enn.Linear(3, 4), enn.Softshrink(0.3), enn.GELU("tanh"), enn.PReLU(4)) \
        if hasattr(enn, "Linear") else enn.Sequential(enn.Softshrink(0.3), enn.GELU("tanh"), enn.PReLU(4))
    tm = tnn.Sequential(tnn.Linear(3, 4), tnn.Softshrink(0.3), tnn.GELU("tanh"), tnn.PReLU(4)) \
        if hasattr(enn, "Linear") else tnn.Sequential(tnn.Softshrink(0.3), tnn.GELU("tanh"), tnn.PReLU(4))
    assert repr(em) == repr(tm)


def test_grad_fn_names():
    e = ember.tensor([1.0, -2.0], requires_grad=True)
    for name, expect in [("gelu", "GeluBackward0"), ("silu", "SiluBackward0"), ("elu", "EluBackward0"),
                         ("softshrink", "SoftshrinkBackward0"), ("hardtanh", "HardtanhBackward0"),
                         ("leaky_relu", "LeakyReluBackward0"), ("logsigmoid", "LogSigmoidBackward0")]:
        assert getattr(EF, name)(e).grad_fn.name() == expect


def test_top_level_and_method_forms():
    x = _data(np.float64)
    e, t = ember.tensor(x), torch.tensor(x)
    for fn in [lambda m, v: m.selu(v), lambda m, v: m.celu(v, 0.5), lambda m, v: m.hardshrink(v, 0.7),
               lambda m, v: v.hardshrink(0.7), lambda m, v: m.threshold(v, 0.5, -3.0), lambda m, v: m.rrelu(v),
               lambda m, v: v.prelu(m.tensor([0.2]).double()), lambda m, v: m.prelu(v, m.tensor([0.2]).double())]:
        _close(fn(ember, e), fn(torch, t))
    for name, args in [("selu_", ()), ("celu_", (2.0,)), ("threshold_", (0.1, 5.0)), ("rrelu_", ())]:
        a, b = ember.tensor(x.copy()), torch.tensor(x.copy())
        getattr(ember, name)(a, *args)
        getattr(torch, name)(b, *args)
        _close(a, b)


_ELEMENTWISE_MODULES = ["Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU",
                        "Mish", "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU",
                        "LogSigmoid", "Softplus", "Softshrink", "Softsign", "Tanhshrink"]


@pytest.mark.parametrize("name", _ELEMENTWISE_MODULES)
def test_elementwise_module_signature_constants_and_reprs_match_torch(name):
    """The activation modules share one base: constructor signature (names, order, defaults),
    __constants__, repr with defaults, positional and keyword arguments, and inplace all as torch's."""
    import inspect
    tc, ec = getattr(torch.nn, name), getattr(ember.nn, name)
    tsig, esig = inspect.signature(tc), inspect.signature(ec)
    assert [(p.name, p.default) for p in esig.parameters.values()] == \
        [(p.name, p.default) for p in tsig.parameters.values()]
    assert getattr(ec, "__constants__", None) == getattr(tc, "__constants__", None)
    params = [p for p in tsig.parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD and p.name not in
              ("min_value", "max_value")]
    calls = [((), {})] if all(p.default is not p.empty for p in params) else []
    sample = {"threshold": 0.3, "value": -2.0, "lower": 0.1, "upper": 0.2, "min_val": -0.5, "max_val": 0.7,
              "alpha": 0.5, "dim": 0, "approximate": "tanh", "lambd": 0.25, "negative_slope": 0.2, "beta": 2.0,
              "inplace": True}
    if params:
        vals = [sample[p.name] for p in params]
        calls += [(tuple(vals), {}), ((), dict(zip([p.name for p in params], vals)))]
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    for args, kw in calls:
        tm, em = tc(*args, **kw), ec(*args, **kw)
        assert repr(em) == repr(tm)
        tm.eval(), em.eval()
        np.testing.assert_allclose(em(ember.tensor(x.copy())).numpy(), tm(torch.tensor(x.copy())).numpy(),
                                   rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError):
        ec(*([0.1] * (len(tsig.parameters) + 1)))
