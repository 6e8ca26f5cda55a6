"""ember.nn losses (functional and module forms) against torch: values and gradients for every
reduction, targets of each kind, deprecated arguments, errors and module reprs/state."""
import math
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
import ember.nn.functional as EF
import torch.nn as tnn
import torch.nn.functional as TF
from oracle import paired_inputs

REDUCTIONS = ["mean", "sum", "none"]
DTYPES = [np.float32, np.float64]


def _tol(dtype):
    return dict(rtol=1e-6, atol=1e-8) if dtype == np.float64 else dict(rtol=3e-5, atol=3e-6)


def _close(e, t, rtol=1e-6, atol=1e-8, what=""):
    assert tuple(e.shape) == tuple(t.shape), what
    assert e.dtype.name == str(t.dtype).replace("torch.", ""), what
    np.testing.assert_allclose(e.detach().numpy().astype(np.float64), t.detach().numpy().astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def _run(fn, arrays, grad, **tol):
    """Call ``fn(lib, *tensors)`` in both libraries; compare the value and the grads of inputs in ``grad``."""
    es, ts = paired_inputs(arrays, grad, lambda a: (ember.tensor(a.copy()), torch.tensor(a.copy())))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to = fn(torch, *ts)
        eo = fn(ember, *es)
    _close(eo, to, what="forward", **tol)
    if not grad:
        return eo
    w = np.random.default_rng(7).standard_normal(tuple(to.shape)).astype(to.detach().numpy().dtype)
    (eo * ember.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    for i in grad:
        _close(es[i].grad, ts[i].grad, what=f"grad of input {i}", **tol)
    return eo


def F(m):
    return m.nn.functional


RNG = np.random.default_rng(0)


def _r(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def _i(hi, *shape):
    return RNG.integers(0, hi, size=shape).astype(np.int64)


# ---- cross_entropy ------------------------------------------------------------------------------------------

# (dtype, weighted, label_smoothing, ignore_index)
CE_OPTIONS = [(np.float32, False, 0.0, -100), (np.float64, True, 0.0, 2), (np.float64, False, 0.15, 2),
              (np.float32, True, 0.15, -100), (np.float64, True, 0.3, 1)]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (6, 5), (3, 5, 4), (2, 5, 3, 2)])
@pytest.mark.parametrize("dtype,weighted,smoothing,ignore", CE_OPTIONS)
def test_cross_entropy_class_indices(dtype, reduction, shape, weighted, smoothing, ignore):
    x = _r(*shape, dtype=dtype) * 2
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = _i(5, *tshape)
    w = _r(5, lo=0.2, hi=2.0, dtype=dtype) if weighted else None

    def fn(m, x, t, w):
        return F(m).cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=smoothing,
                                  ignore_index=ignore)
    _run(fn, [x, t, w], (0,), **_tol(dtype))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (4, 5), (3, 5, 2)])
@pytest.mark.parametrize("dtype,weighted,smoothing", [(np.float32, False, 0.0), (np.float64, True, 0.0),
                                                      (np.float64, False, 0.3), (np.float32, True, 0.3)])
def test_cross_entropy_probabilities(dtype, reduction, shape, weighted, smoothing):
    x = _r(*shape, dtype=dtype)
    cdim = 0 if len(shape) == 1 else 1
    p = np.exp(_r(*shape, dtype=dtype))
    p = (p / p.sum(axis=cdim, keepdims=True)).astype(dtype)
    w = _r(5, lo=0.2, hi=2.0, dtype=dtype) if weighted else None

    def fn(m, x, p, w):
        return F(m).cross_entropy(x, p, weight=w, reduction=reduction, label_smoothing=smoothing)
    _run(fn, [x, p, w], (0, 1), **_tol(dtype))


def test_cross_entropy_uint8_target_and_all_ignored_and_empty():
    x = _r(4, 3)
    t = np.array([0, 2, 1, 1], dtype=np.uint8)
    _run(lambda m, x, t: F(m).cross_entropy(x, t), [x, t], (0,))
    t = np.full(4, -100)
    out = _run(lambda m, x, t: F(m).cross_entropy(x, t), [x, t], ())
    assert math.isnan(out.item())
    _run(lambda m, x, t: F(m).cross_entropy(x, t, reduction="sum"), [x, t], (0,))
    e = _run(lambda m, x, t: F(m).cross_entropy(x, t), [np.zeros((0, 3)), np.zeros(0, dtype=np.int64)], ())
    assert math.isnan(e.item())
    _run(lambda m, x, t: F(m).cross_entropy(x, t, reduction="sum"), [np.zeros((0, 3)), np.zeros(0, dtype=np.int64)],
         ())
    _run(lambda m, x, t: F(m).cross_entropy(x, t, reduction="none"), [np.zeros((0, 3)), np.zeros(0, dtype=np.int64)],
         ())


def test_all_ignored_mean_is_nan_with_zero_gradient():
    x = _r(2, 3)
    t = np.array([2, 2])
    for kw in [{}, {"label_smoothing": 0.1}]:
        out = _run(lambda m, x, t: F(m).cross_entropy(x, t, ignore_index=2, **kw), [x, t], (0,))
        assert math.isnan(out.item())
    _run(lambda m, x, t: F(m).nll_loss(x, t, ignore_index=2), [x, t], (0,))


def test_cross_entropy_extreme_logits_are_stable():
    x = np.array([[1000.0, -1000.0, 0.0], [-1e4, 1e4, 5.0]])
    t = np.array([1, 1])
    _run(lambda m, x, t: F(m).cross_entropy(x, t), [x, t], (0,))
    _run(lambda m, x, t: F(m).cross_entropy(x, t, label_smoothing=0.1), [x, t], (0,))


def test_cross_entropy_half_and_grad_fn():
    x = _r(4, 6).astype(np.float32)
    t = _i(6, 4)
    e = EF.cross_entropy(ember.tensor(x).half(), ember.tensor(t))
    tt = TF.cross_entropy(torch.tensor(x).half(), torch.tensor(t))
    assert e.dtype is ember.float16
    np.testing.assert_allclose(e.float().item(), tt.float().item(), rtol=2e-3)
    xe = ember.tensor(x, requires_grad=True)
    assert EF.cross_entropy(xe, ember.tensor(t)).grad_fn is not None


def test_cross_entropy_double_backward():
    x = _r(4, 5)
    t = _i(5, 4)
    for kw in [{}, {"reduction": "none"}, {"label_smoothing": 0.2, "reduction": "sum"}]:
        xe = ember.tensor(x, requires_grad=True)
        xt = torch.tensor(x, requires_grad=True)
        ge, = ember.autograd.grad(EF.cross_entropy(xe, ember.tensor(t), **kw).sum(), xe, create_graph=True)
        gt, = torch.autograd.grad(TF.cross_entropy(xt, torch.tensor(t), **kw).sum(), xt, create_graph=True)
        _close(ge, gt)
        h = np.random.default_rng(1).standard_normal(x.shape)
        hee, = ember.autograd.grad((ge * ember.tensor(h)).sum(), xe)
        htt, = torch.autograd.grad((gt * torch.tensor(h)).sum(), xt)
        _close(hee, htt)


CE_ERRORS = [
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, 5, 2])), IndexError, "Target 5 is out of bounds."),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, -1, 2])), IndexError, "Target -1 is out of bounds."),
    (lambda m: F(m).nll_loss(m.randn(3, 5), m.tensor([1, 7, 2])), IndexError, "Target 7 is out of bounds."),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, 2])), ValueError,
     r"Expected input batch_size \(3\) to match target batch_size \(2\)."),
    (lambda m: F(m).nll_loss(m.randn(3, 5), m.tensor([1, 2])), ValueError,
     r"Expected input batch_size \(3\) to match target batch_size \(2\)."),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1.0, 2, 3])), RuntimeError,
     "expected target dtype to be Long or Byte, but got Float"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, 2, 3], dtype=m.int32)), RuntimeError,
     "expected target dtype to be Long or Byte, but got Int"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.randn(3, 4)), RuntimeError,
     "0D or 1D target tensor expected, multi-target not supported"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.ones(3, 5, dtype=m.int64)), RuntimeError,
     "Expected floating point type for target with class probabilities, got Long"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, 2, 3]), weight=m.ones(4)), RuntimeError,
     r"weight tensor should be defined either for all 5 classes or no classes but got weight tensor of shape: \[4\]"),
    (lambda m: F(m).nll_loss(m.randn(3, 5), m.tensor([1, 2, 3]), weight=m.ones(4)), RuntimeError,
     r"weight tensor should be defined either for all 5 classes or no classes but got weight tensor of shape: \[4\]"),
    (lambda m: F(m).cross_entropy(m.randn(2, 3, 4), m.zeros(2, 3, dtype=m.int64)), RuntimeError,
     r"Expected target size \[2, 4\], got \[2, 3\]"),
    (lambda m: F(m).nll_loss(m.randn(2, 3, 4), m.zeros(2, 3, dtype=m.int64)), RuntimeError,
     r"Expected target size \[2, 4\], got \[2, 3\]"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, 2, 3]), reduction="foo"), ValueError,
     "foo is not a valid value for reduction"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, 2, 3]), label_smoothing=1.5), RuntimeError,
     "label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5).long(), m.tensor([1, 2, 3])), NotImplementedError,
     "\"log_softmax_lastdim_kernel_impl\" not implemented for 'Long'"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, 2, 3]), weight=m.ones(5).double()), RuntimeError,
     "expected scalar type Float but found Double"),
    (lambda m: F(m).cross_entropy(m.randn(3, 5), m.tensor([1, 2, 3]), weight=m.ones(5, requires_grad=True)),
     RuntimeError, "The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'"),
]


@pytest.mark.parametrize("k", range(len(CE_ERRORS)))
def test_class_target_errors_match_torch(k):
    fn, exc, msg = CE_ERRORS[k]
    with pytest.raises(exc, match=msg):
        fn(torch)
    with pytest.raises(exc, match=msg):
        fn(ember)


# ---- nll_loss -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (6, 5), (3, 5, 4)])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(dtype, reduction, shape, weighted):
    x = _r(*shape, dtype=dtype)
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = _i(5, *tshape)
    if t.ndim:
        t.reshape(-1)[0] = 3          # ignored below
    w = _r(5, lo=0.2, hi=2.0, dtype=dtype) if weighted else None

    def fn(m, x, t, w):
        return F(m).nll_loss(x, t, weight=w, reduction=reduction, ignore_index=3)
    _run(fn, [x, t, w], (0,), **_tol(dtype))


# ---- regression losses -------------------------------------------------------------------------------------

ELEMENTWISE = [
    ("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
    ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}), ("huber_loss", {"delta": 0.4}),
    ("soft_margin_loss", {}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kw", ELEMENTWISE, ids=[f"{n}{k}" for n, k in ELEMENTWISE])
def test_elementwise_losses(name, kw, reduction, dtype):
    x, t = _r(4, 6, dtype=dtype), _r(4, 6, dtype=dtype)
    grad = (0,) if name == "soft_margin_loss" else (0, 1)      # torch: soft_margin_loss has no target grad
    _run(lambda m, x, t: getattr(F(m), name)(x, t, reduction=reduction, **kw), [x, t], grad, **_tol(dtype))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_weighted_regression_losses(name, reduction):
    x, t, w = _r(4, 6), _r(4, 6), _r(4, 6, lo=0.1, hi=2.0)
    _run(lambda m, x, t, w: getattr(F(m), name)(x, t, reduction=reduction, weight=w), [x, t, w], (0, 1))


def test_regression_broadcast_warns_like_torch():
    x, t = _r(4, 1), _r(4)
    with pytest.warns(UserWarning, match=r"Using a target size \(ember.Size\(\[4\]\)\) that is different to the "
                                         r"input size \(ember.Size\(\[4, 1\]\)\)"):
        EF.mse_loss(ember.tensor(x), ember.tensor(t))
    _run(lambda m, x, t: F(m).mse_loss(x, t), [x, t], (0, 1))
    _run(lambda m, x, t: F(m).l1_loss(x, t, reduction="none"), [x, t], (0, 1))
    _run(lambda m, x, t: F(m).smooth_l1_loss(x, t), [x, t], (0, 1))
    with pytest.raises(RuntimeError):
        EF.mse_loss(ember.ones(3, 4), ember.ones(5))


def test_regression_errors():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta."):
        EF.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values for delta."):
        EF.huber_loss(x, x, delta=0.0)
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        EF.mse_loss(x, x, weight=ember.ones(2))
    with pytest.raises(NotImplementedError, match="\"mse_cpu\" not implemented for 'Long'"):
        EF.mse_loss(x.long(), x.long())
    with pytest.raises(ValueError, match="bar is not a valid value for reduction"):
        EF.l1_loss(x, x, reduction="bar")
    with pytest.raises(TypeError):
        EF.mse_loss([1.0], x)


def test_legacy_size_average_and_reduce():
    x, t = _r(3, 4), _r(3, 4)
    for sa, rd in [(False, None), (None, False), (True, True), (False, True), (True, None)]:
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            e = EF.l1_loss(ember.tensor(x), ember.tensor(t), size_average=sa, reduce=rd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tt = TF.l1_loss(torch.tensor(x), torch.tensor(t), size_average=sa, reduce=rd)
        _close(e, tt)
    with pytest.warns(UserWarning, match="reduction='elementwise_mean' is deprecated"):
        e = EF.mse_loss(ember.tensor(x), ember.tensor(t), reduction="elementwise_mean")
    _close(e, TF.mse_loss(torch.tensor(x), torch.tensor(t)))
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        m = enn.MSELoss(size_average=False)
    assert m.reduction == "sum"


# ---- binary cross entropy ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("wshape", [None, (4, 5), (5,)])
def test_binary_cross_entropy(dtype, reduction, wshape):
    x = _r(4, 5, lo=0.01, hi=0.99, dtype=dtype)
    t = _r(4, 5, lo=0.0, hi=1.0, dtype=dtype)
    w = None if wshape is None else _r(*wshape, lo=0.2, hi=2.0, dtype=dtype)
    _run(lambda m, x, t, w: F(m).binary_cross_entropy(x, t, weight=w, reduction=reduction), [x, t, w], (0, 1),
         **_tol(dtype))


def test_binary_cross_entropy_clamps_log():
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    t = np.array([1.0, 0.0, 0.0, 1.0, 0.3])
    e = _run(lambda m, x, t: F(m).binary_cross_entropy(x, t, reduction="none"), [x, t], ())
    assert np.all(np.isfinite(e.numpy()))
    _run(lambda m, x, t: F(m).binary_cross_entropy(x, t), [x, t], (0,))


def test_binary_cross_entropy_errors():
    x = ember.tensor([[0.2, 0.5]])
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        EF.binary_cross_entropy(x + 1, x)
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        EF.binary_cross_entropy(x, x + 1)
    with pytest.raises(ValueError, match=r"Using a target size \(ember.Size\(\[2\]\)\) that is different to the input "
                                         r"size \(ember.Size\(\[1, 2\]\)\) is deprecated. Please ensure they have the "
                                         r"same size."):
        EF.binary_cross_entropy(x, x[0])
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        EF.binary_cross_entropy(x, x.double())
    with pytest.raises(RuntimeError):
        EF.binary_cross_entropy(x, x, weight=ember.ones(3))
    with pytest.raises(RuntimeError, match="is not differentiable with respect to argument 'weight'"):
        EF.binary_cross_entropy(x, x, weight=ember.ones(2, requires_grad=True))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos", [False, True])
def test_binary_cross_entropy_with_logits(dtype, reduction, weighted, pos):
    x = _r(4, 5, lo=-30, hi=30, dtype=dtype)
    t = _r(4, 5, lo=0.0, hi=1.0, dtype=dtype)
    w = _r(5, lo=0.2, hi=2.0, dtype=dtype) if weighted else None
    pw = _r(5, lo=0.2, hi=3.0, dtype=dtype) if pos else None
    _run(lambda m, x, t, w, pw: F(m).binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw,
                                                                      reduction=reduction),
         [x, t, w, pw], (0, 1), **_tol(dtype))


def test_binary_cross_entropy_with_logits_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(ValueError, match=r"Target size \(ember.Size\(\[4\]\)\) must be the same as input size "
                                         r"\(ember.Size\(\[3, 4\]\)\)"):
        EF.binary_cross_entropy_with_logits(x, x[0])
    with pytest.raises(RuntimeError):
        EF.binary_cross_entropy_with_logits(x, x, pos_weight=ember.ones(5))
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'pos_weight'"):
        EF.binary_cross_entropy_with_logits(x, x, pos_weight=ember.ones(4, requires_grad=True))


# ---- divergences, margins, likelihoods ---------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x = np.log(_r(3, 4, lo=0.05, hi=1.0))
    t = _r(3, 4, lo=0.0, hi=1.0)
    t[0, 0] = 0.0
    if log_target:
        t = np.log(t + 0.1)
    _run(lambda m, x, t: F(m).kl_div(x, t, reduction=reduction, log_target=log_target), [x, t], (0, 1))


def test_kl_div_mean_warns():
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the total loss by both the batch size"):
        EF.kl_div(ember.zeros(2, 2), ember.ones(2, 2))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_cosine_embedding_loss(reduction, margin):
    x1, x2 = _r(5, 4), _r(5, 4)
    y = np.array([1.0, -1.0, 1.0, -1.0, -1.0])
    _run(lambda m, a, b, y: F(m).cosine_embedding_loss(a, b, y, margin=margin, reduction=reduction), [x1, x2, y],
         (0, 1))
    _run(lambda m, a, b, y: F(m).cosine_embedding_loss(a, b, y, margin=margin, reduction=reduction),
         [x1[0], x2[0], np.array(-1.0)], (0, 1))


def test_cosine_embedding_loss_errors():
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected, multi-target not supported"):
        EF.cosine_embedding_loss(ember.ones(3, 4), ember.ones(3, 4), ember.ones(3, 1))
    with pytest.raises(RuntimeError, match="1D target tensor expects 2D input tensors"):
        EF.cosine_embedding_loss(ember.ones(4), ember.ones(4), ember.ones(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_hinge_soft_margin(reduction):
    x1, x2 = _r(6), _r(6)
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    _run(lambda m, a, b, y: F(m).margin_ranking_loss(a, b, y, margin=0.2, reduction=reduction), [x1, x2, y], (0, 1))
    _run(lambda m, a, y: F(m).hinge_embedding_loss(a, y, margin=0.7, reduction=reduction), [x1, y], (0,))
    _run(lambda m, a, y: F(m).soft_margin_loss(a, y, reduction=reduction), [x1, y], (0,))
    with pytest.raises(RuntimeError, match="margin_ranking_loss : All input tensors should have same dimension"):
        EF.margin_ranking_loss(ember.ones(3), ember.ones(3), ember.ones(1, 3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin_loss(reduction, weighted):
    x = _r(4, 5)
    t = (RNG.random((4, 5)) > 0.5).astype(np.float64)
    w = _r(5, lo=0.1, hi=2.0) if weighted else None
    _run(lambda m, x, t, w: F(m).multilabel_soft_margin_loss(x, t, weight=w, reduction=reduction), [x, t, w], (0,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("full", [False, True])
def test_poisson_nll_loss(reduction, log_input, full):
    x = _r(3, 4, lo=0.1, hi=2.0)
    t = _r(3, 4, lo=0.0, hi=4.0)
    _run(lambda m, x, t: F(m).poisson_nll_loss(x, t, log_input=log_input, full=full, reduction=reduction),
         [x, t], (0,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("vshape", [(3, 4), (3,), (3, 1), (1, 4)])
@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll_loss(reduction, vshape, full):
    x, t = _r(3, 4), _r(3, 4)
    v = _r(*vshape, lo=0.0, hi=2.0)
    v.reshape(-1)[0] = 1e-9              # below eps: clamped, gradient still flows (as torch)
    _run(lambda m, x, t, v: F(m).gaussian_nll_loss(x, t, v, full=full, reduction=reduction), [x, t, v], (0, 1, 2))


def test_gaussian_nll_loss_float_var_and_errors():
    x, t = _r(3, 4), _r(3, 4)
    _run(lambda m, x, t: F(m).gaussian_nll_loss(x, t, 0.5), [x, t], (0,))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        EF.gaussian_nll_loss(ember.ones(3, 4), ember.ones(3, 4), ember.ones(2, 1))
    with pytest.raises(ValueError, match="var has negative entry/entries"):
        EF.gaussian_nll_loss(ember.ones(3, 4), ember.ones(3, 4), -ember.ones(3, 4))
    with pytest.raises(ValueError, match="foo is not valid"):
        EF.gaussian_nll_loss(ember.ones(3, 4), ember.ones(3, 4), ember.ones(3, 4), reduction="foo")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,swap", [(2, False), (1, True), (3, False)])
def test_triplet_margin_loss(reduction, p, swap):
    a, pos, neg = _r(5, 4), _r(5, 4), _r(5, 4)
    _run(lambda m, a, b, c: F(m).triplet_margin_loss(a, b, c, margin=0.8, p=p, swap=swap, reduction=reduction),
         [a, pos, neg], (0, 1, 2))
    _run(lambda m, a, b, c: F(m).triplet_margin_with_distance_loss(a, b, c, margin=0.8, swap=swap,
                                                                   reduction=reduction),
         [a, pos, neg], (0, 1, 2))
    _run(lambda m, a, b, c: F(m).triplet_margin_with_distance_loss(
        a, b, c, distance_function=lambda u, v: (u - v).abs().sum(-1), reduction=reduction), [a, pos, neg], (0, 1, 2))
    with pytest.raises(RuntimeError, match="The anchor, positive, and negative tensors are expected to have the "
                                           "same number of dimensions"):
        EF.triplet_margin_loss(ember.ones(3, 4), ember.ones(3, 4), ember.ones(4))
    with pytest.raises(ValueError, match="margin must be greater than 0, got 0"):
        EF.triplet_margin_loss(ember.ones(3, 4), ember.ones(3, 4), ember.ones(3, 4), margin=0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_multi_margin_loss(reduction, p, weighted):
    x = _r(5, 4)
    t = _i(4, 5)
    w = _r(4, lo=0.2, hi=2.0) if weighted else None
    _run(lambda m, x, t, w: F(m).multi_margin_loss(x, t, p=p, margin=0.7, weight=w, reduction=reduction),
         [x, t, w], (0,))
    _run(lambda m, x, t: F(m).multi_margin_loss(x, t, reduction=reduction), [x[0], t[:1]], (0,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss(reduction):
    x = _r(3, 4)
    t = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 0, 1]])
    _run(lambda m, x, t: F(m).multilabel_margin_loss(x, t, reduction=reduction), [x, t], (0,))
    _run(lambda m, x, t: F(m).multilabel_margin_loss(x, t, reduction=reduction), [x[0], t[0]], (0,))


# ---- modules -----------------------------------------------------------------------------------------------

def _w(n=5):
    return np.linspace(0.5, 1.5, n)


MODULES = [
    ("L1Loss", {}), ("MSELoss", {"reduction": "sum"}), ("SmoothL1Loss", {"beta": 0.5}), ("HuberLoss", {"delta": 0.3}),
    ("SoftMarginLoss", {}), ("KLDivLoss", {"reduction": "batchmean", "log_target": True}),
    ("PoissonNLLLoss", {"log_input": True, "full": True}), ("BCELoss", {}), ("BCEWithLogitsLoss", {}),
    ("HingeEmbeddingLoss", {"margin": 0.5}), ("MultiLabelSoftMarginLoss", {}), ("CrossEntropyLoss", {}),
    ("CrossEntropyLoss", {"label_smoothing": 0.1, "ignore_index": 2}), ("NLLLoss", {"reduction": "none"}),
    ("MultiMarginLoss", {"p": 2}), ("MultiLabelMarginLoss", {}),
]


def _module_inputs(name):
    x = _r(4, 5)
    if name in ("CrossEntropyLoss", "NLLLoss", "MultiMarginLoss"):
        return [x, _i(5, 4)]
    if name == "MultiLabelMarginLoss":
        return [x, np.array([[1, 2, -1, 0, 0], [0, -1, 0, 0, 0], [4, 3, 2, 1, 0], [-1, 0, 0, 0, 0]])]
    if name == "BCELoss":
        return [_r(4, 5, lo=0.05, hi=0.95), _r(4, 5, lo=0.0, hi=1.0)]
    if name in ("HingeEmbeddingLoss", "SoftMarginLoss"):
        return [x, np.sign(_r(4, 5))]
    if name in ("MultiLabelSoftMarginLoss", "BCEWithLogitsLoss"):
        return [x, _r(4, 5, lo=0.0, hi=1.0)]
    return [x, _r(4, 5, lo=0.1, hi=2.0)]


@pytest.mark.parametrize("name,kw", MODULES, ids=[f"{n}{k}" for n, k in MODULES])
def test_loss_modules(name, kw):
    em, tm = getattr(enn, name)(**kw), getattr(tnn, name)(**kw)
    assert repr(em) == repr(tm)
    assert em.reduction == tm.reduction
    _run(lambda m, x, t: (em if m is ember else tm)(x, t), _module_inputs(name), (0,))


@pytest.mark.parametrize("name", ["CrossEntropyLoss", "NLLLoss", "BCELoss", "MultiLabelSoftMarginLoss",
                                  "MultiMarginLoss"])
def test_weighted_loss_modules_state(name):
    w = _w()
    em, tm = getattr(enn, name)(weight=ember.tensor(w)), getattr(tnn, name)(weight=torch.tensor(w))
    assert repr(em) == repr(tm)
    assert list(em.state_dict()) == list(tm.state_dict()) == ["weight"]
    assert list(getattr(enn, name)().state_dict()) == list(getattr(tnn, name)().state_dict()) == []
    x, t = _module_inputs(name)
    _run(lambda m, x, t: (em if m is ember else tm)(x, t), [x, t], (0,))
    em.float()
    assert em.weight.dtype is ember.float32


def test_bce_with_logits_module_buffers():
    w, pw = _w(), _w()[::-1].copy()
    em = enn.BCEWithLogitsLoss(weight=ember.tensor(w), pos_weight=ember.tensor(pw))
    tm = tnn.BCEWithLogitsLoss(weight=torch.tensor(w), pos_weight=torch.tensor(pw))
    assert list(em.state_dict()) == list(tm.state_dict()) == ["weight", "pos_weight"]
    _run(lambda m, x, t: (em if m is ember else tm)(x, t), _module_inputs("BCEWithLogitsLoss"), (0,))


def test_three_input_loss_modules():
    a, b, c = _r(4, 3), _r(4, 3), _r(4, 3)
    y = np.array([1.0, -1.0, -1.0, 1.0])
    for name, kw, args in [("CosineEmbeddingLoss", {"margin": 0.2}, [a, b, y]),
                           ("MarginRankingLoss", {"margin": 0.1}, [a[:, 0], b[:, 0], y]),
                           ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "swap": True}, [a, b, c]),
                           ("TripletMarginWithDistanceLoss", {"margin": 0.5}, [a, b, c]),
                           ("GaussianNLLLoss", {"full": True}, [a, b, np.abs(c)])]:
        em, tm = getattr(enn, name)(**kw), getattr(tnn, name)(**kw)
        if name != "TripletMarginWithDistanceLoss" or hasattr(enn, "PairwiseDistance"):
            assert repr(em) == repr(tm)
        _run(lambda m, *xs: (em if m is ember else tm)(*xs), args, (0, 1))


def test_loss_module_constructor_errors():
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        enn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater than 0, got 0"):
        enn.TripletMarginLoss(margin=0)
    with pytest.raises(TypeError, match="delta must be a float or int"):
        enn.HuberLoss(delta="1")
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        enn.NLLLoss2d()


def test_cross_entropy_module_in_training_step():
    """A tiny classifier trained with ember matches torch step for step."""
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((16, 4)), rng.integers(0, 3, 16)
    w0, b0 = rng.standard_normal((3, 4)) * 0.1, np.zeros(3)
    ew, eb = ember.tensor(w0, requires_grad=True), ember.tensor(b0, requires_grad=True)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    el, tl = enn.CrossEntropyLoss(label_smoothing=0.05), tnn.CrossEntropyLoss(label_smoothing=0.05)
    for _ in range(3):
        le = el(EF.softshrink(ember.tensor(x), 0.1) @ ew.t() + eb, ember.tensor(y))
        lt = tl(TF.softshrink(torch.tensor(x), 0.1) @ tw.t() + tb, torch.tensor(y))
        _close(le, lt)
        le.backward()
        lt.backward()
        with ember.no_grad():
            ew -= ew.grad * 0.5
            eb -= eb.grad * 0.5
        with torch.no_grad():
            tw -= tw.grad * 0.5
            tb -= tb.grad * 0.5
        ew.grad = eb.grad = None
        tw.grad = tb.grad = None
    _close(ew, tw)
