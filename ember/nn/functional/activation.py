"""torch.nn.functional's activations.

Activations that are one NumPy expression but several ember ops (gelu, silu, mish, elu, softplus,
leaky_relu, hardtanh, hardswish, softshrink, ...) are registered as ONE fused op each, so a layer costs
one kernel call forward and one backward. Their derivatives are written in ember ops:

- piecewise-linear ops (threshold, hardtanh, hardsigmoid, leaky_relu, softshrink, hardshrink) pass
  ``grad * factor(x)`` through one masking op, ``activation_mask_backward``, which is linear in
  ``grad`` and piecewise constant in ``x`` (so its own derivative is itself);
- smooth ops (elu, gelu, silu, mish, softplus, hardswish) have a ``<name>_backward`` op computing
  ``grad * f'(x)`` in one kernel, whose derivative (for double backward) is ``grad * f''(x)`` written
  with ember ops.

float16/bfloat16 inputs are computed in float32 and rounded back, as torch's CPU kernels do.
relu, sigmoid and tanh are ember's own ops (``ember.relu`` ...); the activations that normalize along a
dim (softmax, log_softmax, softmin, glu, gumbel_softmax) are in ``activation_softmax.py``.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor
from ...ops.registry import register, apply, dtype_name, node_class, rename
from ...ops.binary import _no_derivative
from ...amp.state import AUTOCAST as _AUTOCAST
from ..._native import eager_kernels as _native
from ._channels_last import keep as _keep_cl
from ._normal_cdf import _ERFC_P, gelu_exact as _gelu_exact, gelu_exact_d1 as _gelu_exact_d1  # noqa: F401 (_ERFC_P: the compiler's)

# exp overflow in branches that np.where discards is expected: torch is silent there too (a module
# filter costs nothing per call, unlike np.errstate)
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ember\.nn\.functional\.activation$")

__all__ = ["threshold", "threshold_", "relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "prelu", "rrelu",
           "rrelu_", "elu", "elu_", "selu", "selu_", "celu", "celu_", "gelu", "silu", "mish", "tanh", "sigmoid",
           "softplus", "softshrink", "hardshrink", "tanhshrink", "hardtanh", "hardtanh_", "hardsigmoid",
           "hardswish", "logsigmoid", "softsign"]

_FLOAT = 2
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


# ---- helpers ------------------------------------------------------------------------------------------

def _ember():
    # the top-level package, for ops other families attach (ember.exp, ember.where, ...)
    import ember
    return ember


def _check_tensor(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    return x


_F32 = np.dtype(np.float32)


def _need_float(x, kernel_name: str, name: str) -> Tensor:
    """torch's float-only activations raise NotImplementedError naming their CPU kernel and the dtype."""
    _check_tensor(x, name)
    if x._dtype.category != _FLOAT:
        raise NotImplementedError(f'"{kernel_name}" not implemented for \'{dtype_name(x._dtype)}\'')
    return x


def _opmath(f):
    """Kernel wrapper: 2-byte floats (float16, bfloat16) are computed in float32 and rounded back; 0-d
    arrays run as 1-element ones (NumPy's ufuncs turn 0-d results into scalars, which ``out=`` refuses)."""
    def k(*arrs, **kw):
        dt = arrs[0].dtype
        if arrs[0].ndim == 0:
            return k(*[a.reshape(1) if isinstance(a, np.ndarray) and a.ndim == 0 else a for a in arrs],
                     **kw).reshape(())
        if dt.itemsize == 2 and dt.kind != "i" and dt.kind != "u":
            r = f(*[a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in arrs], **kw)
            return np.asarray(r).astype(dt)
        r = f(*arrs, **kw)
        return r if r.dtype == dt else r.astype(dt)
    k.__name__ = getattr(f, "__name__", "kernel")
    return k


_INT_OF_SIZE = {2: np.int16, 4: np.int32, 8: np.int64}


def _where(m, a, b=0):
    """``np.where(m, a, b)`` for floating ``a``/``b``, exact, by bit masks.

    np.where branches per element and is ~15x slower than a multiply on an unpredictable mask (the
    usual case for activations); selecting bits with and/or costs a few cheap passes instead.
    """
    dt = a.dtype if isinstance(a, (np.ndarray, np.generic)) else b.dtype     # (a NumPy scalar from 0-d math)
    if dt.kind in "iub":
        return np.where(m, a, b)
    it = _INT_OF_SIZE[dt.itemsize]
    full = np.negative(np.asarray(m).view(np.int8)).astype(it)      # all bits set where m
    r = np.bitwise_and(np.asarray(a, dtype=dt).view(it), full)
    if not (isinstance(b, (int, float)) and b == 0 and not math.copysign(1.0, b) < 0):
        r = np.bitwise_or(r, np.bitwise_and(np.asarray(b, dtype=dt).view(it), np.invert(full)))
    return r.view(dt)


def _clamp(x, lo=None, hi=None):
    """min(max(x, lo), hi) for scalar bounds, NaN-propagating.

    Measured on NumPy 2.4: np.clip is the fastest two-sided clamp, while a one-sided np.maximum/minimum
    against a broadcast scalar is ~2x slower than against a filled array of the same shape.
    """
    if x.dtype.kind in "iub":
        r = np.clip(x, lo, hi)
        return r if r.dtype == x.dtype else r.astype(x.dtype)
    if lo is not None and hi is not None:
        return np.clip(x, lo, hi)
    if lo is not None:
        r = np.full_like(x, lo)
        return np.maximum(x, r, out=r)
    r = np.full_like(x, hi)
    return np.minimum(x, r, out=r)


# torch's names for activations ember runs through a shared op or composes (the in-place forms of some
# are overloads of their own, numbered 1)
_NODES = {n: node_class(n) for n in (
    "ThresholdBackward1", "LeakyReluBackward1", "EluBackward1", "CeluBackward0", "CeluBackward1",
    "RreluWithNoiseBackward0", "RreluWithNoiseBackward1", "PreluKernelBackward0")}


def _inplace(input: Tensor, fn, name: str) -> Tensor:
    """Run ``fn(input)`` and write the result back into ``input`` (torch's ``op_``)."""
    from ...ops.inplace import write_result
    return write_result(input, fn, name)


# ---- the masking derivative of piecewise-linear activations -------------------------------------------

def _mask_of(x, mode, a, b):
    if mode == "gt":            # x > a
        return np.greater(x, a)
    if mode == "open":          # a < x < b (NaN drops, as torch's vectorized hardtanh backward)
        return np.greater(x, a) & np.less(x, b)
    if mode == "notle":         # not (x <= a): x > a, and NaN passes (torch's threshold backward)
        return ~np.less_equal(x, a)
    if mode == "outside":       # not (a <= x <= b); NaN passes, as in torch's shrink backward
        return ~(np.greater_equal(x, a) & np.less_equal(x, b))
    if mode == "nonzero":       # on an output: softshrink's output is nonzero exactly where |x| > lambd
        return np.not_equal(x, 0)
    raise ValueError(f"activation_mask_backward: unknown mode {mode!r}")


def _mask_bw_kernel(g, x, mode, a=0.0, b=0.0, s_in=1.0, s_out=0.0):
    if g.dtype == _F32:
        r = _native.mask_grad(g, x, mode, a, b, s_in, s_out)     # one native pass (None: NumPy runs)
        if r is not None:
            return r
    m = _mask_of(x, mode, a, b)
    gi = g if s_in == 1 else g * s_in
    if s_out == 0:
        return _where(m, gi)
    return _where(m, gi, g * s_out)


def _mask_bw_bw(ctx, gg):
    # linear in grad, piecewise constant in x
    return apply(MASK_BW, (gg, ctx.inputs[1]), ctx.attrs), None


# grad * (s_in where mask(x) else s_out)
MASK_BW = register("activation_mask_backward", _mask_bw_kernel, _mask_bw_bw, save="i")


def _masked(g, x, mode, a=0.0, b=0.0, s_in=1.0, s_out=0.0):
    return apply(MASK_BW, (g, x), {"mode": mode, "a": a, "b": b, "s_in": s_in, "s_out": s_out})


# ---- threshold / relu / relu6 / hardtanh --------------------------------------------------------------

def _threshold_kernel(x, threshold, value):
    # torch: value where x <= threshold, else x (so NaN stays NaN)
    if x.dtype.kind in "iub":
        r = np.where(np.less_equal(x, threshold), value, x)
    else:
        r = _where(np.less_equal(x, threshold), np.asarray(value, dtype=x.dtype), x)
    return r if r.dtype == x.dtype else r.astype(x.dtype)


THRESHOLD = register("threshold", _threshold_kernel,
                     lambda ctx, g: (_masked(g, ctx.inputs[0], "notle", a=ctx.attrs["threshold"]),), save="i")


def threshold(input, threshold, value, inplace: bool = False):  # noqa: A002 - torch's names
    """``value`` where ``input <= threshold``, else ``input``."""
    _check_tensor(input, "threshold")
    if input._dtype is _dt.bool:
        raise NotImplementedError("\"threshold_cpu\" not implemented for 'Bool'")
    if inplace:
        return _inplace(input, lambda s: rename(threshold_fn(s, threshold, value), _NODES["ThresholdBackward1"]),
                        "threshold_")
    return apply(THRESHOLD, (input,), {"threshold": threshold, "value": value})


threshold_fn = threshold


def threshold_(input, threshold, value):  # noqa: A002
    """In-place :func:`threshold`."""
    return threshold_fn(input, threshold, value, inplace=True)


def relu(input, inplace: bool = False):
    """max(input, 0) (``ember.relu``); ``inplace=True`` writes into ``input``."""
    e = _ember()
    return e.relu_(input) if inplace else e.relu(input)


def relu_(input):
    """In-place :func:`relu`."""
    return _ember().relu_(input)


def _hardtanh_kernel(x, min_val, max_val):
    return _clamp(x, min_val, max_val)


HARDTANH = register(
    "hardtanh", _opmath(_hardtanh_kernel),
    lambda ctx, g: (_masked(g, ctx.inputs[0], "open", ctx.attrs["min_val"], ctx.attrs["max_val"]),), save="i")


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """Clamp to ``[min_val, max_val]``; the gradient is zero at and beyond the bounds (torch's rule)."""
    _check_tensor(input, "hardtanh")
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input._dtype is _dt.bool:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if inplace:
        return _inplace(input, lambda s: apply(HARDTANH, (s,), {"min_val": min_val, "max_val": max_val}),
                        "hardtanh_")
    return apply(HARDTANH, (input,), {"min_val": min_val, "max_val": max_val})


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace: bool = False):
    """min(max(input, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


# ---- leaky_relu / prelu / rrelu -----------------------------------------------------------------------

def _leaky_kernel(x, negative_slope):
    return _where(np.greater(x, 0), x, x * negative_slope)


LEAKY_RELU = register(
    "leaky_relu", _opmath(_leaky_kernel),
    lambda ctx, g: (_masked(g, ctx.inputs[0], "gt", 0.0, s_out=ctx.attrs["negative_slope"]),), save="i")


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """``input`` where positive, else ``negative_slope * input``."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "leaky_relu_cpu", "leaky_relu")
    if inplace:
        return _inplace(input, lambda s: rename(apply(LEAKY_RELU, (s,), {"negative_slope": negative_slope}),
                                                _NODES["LeakyReluBackward1"]), "leaky_relu_")
    return apply(LEAKY_RELU, (input,), {"negative_slope": negative_slope})


def leaky_relu_(input, negative_slope: float = 0.01):
    """In-place :func:`leaky_relu`."""
    return leaky_relu(input, negative_slope, inplace=True)


def prelu(input, weight):
    """Leaky ReLU with a learned slope: a scalar, or one slope per channel (dim 1)."""
    if _AUTOCAST[0] is not None:            # (on torch's CPU autocast lower-precision list)
        from ...amp.state import cast_args
        input, weight = cast_args(input, weight)
    _need_float(_check_tensor(input, "prelu"), "prelu_cpu", "prelu")
    if not isinstance(weight, Tensor):
        raise TypeError(f"prelu(): argument 'weight' (position 2) must be Tensor, not {type(weight).__name__}")
    if weight._dtype is not input._dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {dtype_name(input._dtype)} and "
                           f"{dtype_name(weight._dtype)}")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    n = weight.numel()
    nd = input.ndim
    channels = input.shape[1] if nd >= 2 else 1
    if n != 1 and n != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} "
                           f"and channel size = {channels}.")
    w = weight
    if n != 1 and nd >= 2:
        w = weight.reshape((n,) + (1,) * (nd - 2))     # one slope per channel, broadcast over the rest
    elif weight.ndim == 1 and nd == 0:
        w = weight.reshape(())
    e = _ember()
    return rename(e.where(input > 0, input, w * input), _NODES["PreluKernelBackward0"])


def _rrelu_train(input, lower, upper):
    e = _ember()
    with e.no_grad():
        u = e.empty_like(input).uniform_(lower, upper)
        noise = e.where(input > 0, 1.0, u)      # torch samples a slope for every non-positive element
    return input * noise


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False):
    """Randomized leaky ReLU: slopes ~ U(lower, upper) in training, their mean otherwise."""
    _need_float(input, "leaky_relu_cpu", "rrelu")
    node0, node1 = _NODES["RreluWithNoiseBackward0"], _NODES["RreluWithNoiseBackward1"]
    if not training:
        slope = (lower + upper) / 2
        if inplace:
            return _inplace(input, lambda s: rename(apply(LEAKY_RELU, (s,), {"negative_slope": slope}), node1),
                            "rrelu_")
        return rename(leaky_relu(input, slope), node0)
    if inplace:
        return _inplace(input, lambda s: rename(_rrelu_train(s, lower, upper), node1), "rrelu_")
    return rename(_rrelu_train(input, lower, upper), node0)


def rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False):
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True)


# ---- smooth activations: forward op + fused backward op -----------------------------------------------

def _smooth(name, forward, fprime, fsecond, native_bw=None):
    """Register ``name`` (kernel ``forward``) and ``name_backward`` = grad * f'(x).

    ``fprime(x, **attrs)`` is NumPy; ``fsecond(x, **attrs)`` is f''(x) in ember ops (double backward);
    ``native_bw(g, x, **attrs)``, when given, computes grad * f'(x) in one native call (None: not for
    these arrays).
    """
    def bw_kernel(g, x, **attrs):
        if native_bw is not None:
            r = native_bw(g, x, **attrs)
            if r is not None:
                return r
        return np.multiply(g, fprime(x, **attrs))

    def bw_bw(ctx, gg):
        g, x = ctx.inputs
        need = ctx.edges
        dg = apply(BW, (gg, x), ctx.attrs) if need[0] is not None else None
        dx = gg * g * fsecond(x, **ctx.attrs) if need[1] is not None else None
        return dg, dx

    BW = register(name + "_backward", _opmath(bw_kernel), bw_bw, save="i")
    FW = register(name, _opmath(forward), lambda ctx, g: (apply(BW, (g, ctx.inputs[0]), ctx.attrs),), save="i")
    return FW


# elu (also selu and celu): scale * x for x > 0, else scale * alpha * (exp(x * input_scale) - 1)

def _elu_fwd(x, alpha, scale, input_scale):
    neg = np.expm1(_clamp(x, hi=0) * input_scale) * (alpha * scale)
    return _where(np.greater(x, 0), x * scale if scale != 1 else x, neg)


def _elu_d1(x, alpha, scale, input_scale):
    neg = np.exp(_clamp(x, hi=0) * input_scale) * (alpha * scale * input_scale)
    return _where(np.greater(x, 0), np.asarray(scale, dtype=neg.dtype), neg)


def _elu_d2(x, alpha, scale, input_scale):
    e = _ember()
    neg = (e.clamp_max(x, 0) * input_scale).exp() * (alpha * scale * input_scale * input_scale)
    return e.where(x >= 0, 0.0, neg)           # 0 at x == 0 too, as torch's elu double backward


ELU = _smooth("elu", _elu_fwd, _elu_d1, _elu_d2)


def _elu_call(input, alpha, scale, input_scale, inplace, name):
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "elu_cpu", name)
    attrs = {"alpha": alpha, "scale": scale, "input_scale": input_scale}
    if inplace:
        node = _NODES["CeluBackward1" if name == "celu" else "EluBackward1"]
        return _inplace(input, lambda s: rename(apply(ELU, (s,), attrs), node), name + "_")
    r = apply(ELU, (input,), attrs)
    return rename(r, _NODES["CeluBackward0"]) if name == "celu" else r


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """x for x > 0, else alpha * (exp(x) - 1)."""
    return _elu_call(input, float(alpha), 1.0, 1.0, inplace, "elu")


def elu_(input, alpha: float = 1.0):
    """In-place :func:`elu`."""
    return elu(input, alpha, inplace=True)


def selu(input, inplace: bool = False):
    """Scaled ELU with the self-normalising constants (alpha ~ 1.6733, scale ~ 1.0507)."""
    return _elu_call(input, _SELU_ALPHA, _SELU_SCALE, 1.0, inplace, "selu")


def selu_(input):
    """In-place :func:`selu`."""
    return selu(input, inplace=True)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _elu_call(input, float(alpha), 1.0, 1.0 / alpha, inplace, "celu")


def celu_(input, alpha: float = 1.0):
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


# gelu: x * Phi(x) (exact) or its tanh approximation

def _gelu_fwd(x, approximate):
    if x.dtype == np.float32:
        r = _native.gelu(x, approximate)        # one native pass (ember/_native); None: NumPy's
        if r is not None:
            return r
    if approximate == "tanh":
        t = np.tanh((x + x * x * x * _GELU_C) * _GELU_K)
        return x * 0.5 * (t + 1)
    return _gelu_exact(x)


def _gelu_d1(x, approximate):
    if approximate == "tanh":
        x2 = x * x
        t = np.tanh((x + x2 * x * _GELU_C) * _GELU_K)
        return 0.5 * (t + 1) + 0.5 * x * (1 - t * t) * (_GELU_K * (1 + 3 * _GELU_C * x2))
    return _gelu_exact_d1(x)


def _gelu_d2(x, approximate):
    if approximate == "tanh":
        x2 = x * x
        t = ((x + x2 * x * _GELU_C) * _GELU_K).tanh()
        du = (x2 * (3 * _GELU_C) + 1) * _GELU_K
        ddu = x * (6 * _GELU_K * _GELU_C)
        return (1 - t * t) * (du - x * t * du * du + x * ddu * 0.5)
    x2 = x * x
    return (x2 * -0.5).exp() * _INV_SQRT_2PI * (2 - x2)


GELU = _smooth("gelu", _gelu_fwd, _gelu_d1, _gelu_d2, _native.gelu_backward)


def gelu(input, approximate: str = "none"):
    """Gaussian error linear unit: x * Phi(x); ``approximate='tanh'`` uses the tanh formula."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "GeluKernelImpl", "gelu")
    if approximate != "none" and approximate != "tanh":
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _keep_cl(apply(GELU, (input,), {"approximate": approximate}), input)


# silu: x * sigmoid(x)

def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _silu_fwd(x):
    return x * _sig(x)


def _silu_d1(x):
    s = _sig(x)
    return s * (1 + x * (1 - s))


def _silu_d2(x):
    s = x.sigmoid()
    return s * (1 - s) * (2 + x * (1 - 2 * s))


SILU = _smooth("silu", _silu_fwd, _silu_d1, _silu_d2)


def silu(input, inplace: bool = False):
    """x * sigmoid(x) (swish)."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "silu_cpu", "silu")
    if inplace:
        return _inplace(input, lambda s: apply(SILU, (s,)), "silu_")
    return apply(SILU, (input,))


# mish: x * tanh(softplus(x))

def _softplus1(x):
    # log(1 + exp(x)) without overflow
    return _clamp(x, lo=0) + np.log1p(np.exp(-np.abs(x)))


def _mish_fwd(x):
    return x * np.tanh(_softplus1(x))


def _mish_d1(x):
    t = np.tanh(_softplus1(x))
    return t + x * _sig(x) * (1 - t * t)


def _mish_d2(x):
    e = _ember()
    s = x.sigmoid()
    t = (e.clamp_min(x, 0) + (-x.abs()).exp().log1p()).tanh()
    return (1 - t * t) * s * (2 + x * ((1 - s) - 2 * t * s))


MISH = _smooth("mish", _mish_fwd, _mish_d1, _mish_d2)


def mish(input, inplace: bool = False):
    """x * tanh(softplus(x))."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "mish_cpu", "mish")
    if inplace:
        return _inplace(input, lambda s: apply(MISH, (s,)), "mish_")
    return apply(MISH, (input,))


# softplus: log(1 + exp(beta x)) / beta, linear above the threshold

def _softplus_fwd(x, beta, threshold):
    z = x * beta
    return _where(np.greater(z, threshold), x, np.log1p(np.exp(z)) / beta)


def _softplus_d1(x, beta, threshold):
    z = x * beta
    s = _sig(z)
    return _where(np.greater(z, threshold), np.asarray(1, dtype=s.dtype), s)


def _softplus_d2(x, beta, threshold):
    e = _ember()
    z = x * beta
    s = z.sigmoid()
    return e.where(z > threshold, 0.0, s * (1 - s) * beta)


SOFTPLUS = _smooth("softplus", _softplus_fwd, _softplus_d1, _softplus_d2)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):  # noqa: A002 - torch's names
    """Smooth ReLU: log(1 + exp(beta * x)) / beta, and x where beta * x > threshold."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "softplus_cpu", "softplus")
    return apply(SOFTPLUS, (input,), {"beta": beta, "threshold": threshold})


# hardswish: x * relu6(x + 3) / 6

def _hardswish_fwd(x):
    return x * _clamp(x + 3, 0, 6) / 6


def _hardswish_d1(x):
    mid = x / 3 + 0.5
    return _where(np.less_equal(x, -3), np.asarray(0, dtype=mid.dtype),
                  _where(np.less(x, 3), mid, np.asarray(1, dtype=mid.dtype)))


def _hardswish_bw_bw(ctx, gg):
    g, x = ctx.inputs
    dg = apply(HARDSWISH_BW, (gg, x)) if ctx.edges[0] is not None else None
    dx = _masked(gg * g, x, "open", -3.0, 3.0, s_in=1.0 / 3) if ctx.edges[1] is not None else None
    return dg, dx


HARDSWISH_BW = register("hardswish_backward", _opmath(lambda g, x: g * _hardswish_d1(x)), _hardswish_bw_bw,
                        save="i")
HARDSWISH = register("hardswish", _opmath(_hardswish_fwd),
                     lambda ctx, g: (apply(HARDSWISH_BW, (g, ctx.inputs[0])),), save="i")


def hardswish(input, inplace: bool = False):
    """x * relu6(x + 3) / 6."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "hardswish_cpu", "hardswish")
    if inplace:
        return _inplace(input, lambda s: apply(HARDSWISH, (s,)), "hardswish_")
    return apply(HARDSWISH, (input,))


def _hardsigmoid_kernel(x):
    return _clamp(x + 3, 0, 6) / 6


# torch's backward multiplies by the float32 constant 1/6 in every dtype; so does this one
_ONE_SIXTH_F32 = float(np.float32(1.0 / 6.0))
# torch has no derivative for hardsigmoid's backward: a double backward through it raises, as there
HARDSIGMOID_BW = register("hardsigmoid_backward", _mask_bw_kernel, _no_derivative("hardsigmoid_backward"))
HARDSIGMOID = register("hardsigmoid", _opmath(_hardsigmoid_kernel),
                       lambda ctx, g: (apply(HARDSIGMOID_BW, (g, ctx.inputs[0]), {
                           "mode": "open", "a": -3.0, "b": 3.0, "s_in": _ONE_SIXTH_F32, "s_out": 0.0}),),
                       save="i")


def hardsigmoid(input, inplace: bool = False):
    """relu6(x + 3) / 6."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "hardsigmoid_cpu", "hardsigmoid")
    if inplace:
        return _inplace(input, lambda s: apply(HARDSIGMOID, (s,)), "hardsigmoid_")
    return apply(HARDSIGMOID, (input,))


# ---- shrinkage -----------------------------------------------------------------------------------------

def _softshrink_kernel(x, lambd):
    # x - clamp(x, -l, l) is x - l above l, x + l below -l, 0 between (and NaN stays NaN)
    r = _clamp(x, -lambd, lambd)
    return np.subtract(x, r, out=r)


# the output is nonzero exactly where |x| > lambd, so the mask reads the saved output
SOFTSHRINK = register("softshrink", _opmath(_softshrink_kernel),
                      lambda ctx, g: (_masked(g, ctx.output, "nonzero"),), save="o")


def softshrink(input, lambd: float = 0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 in between."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "softshrink_check", "softshrink")
    if not lambd >= 0:
        mx = float(np.finfo(np.float32 if input._dtype.itemsize <= 4 else np.float64).max)
        raise RuntimeError(f"lambda must be in range [0, {mx:g}] for input dtype {dtype_name(input._dtype)}, "
                           f"but found {lambd:g}")
    return apply(SOFTSHRINK, (input,), {"lambd": lambd})


def _hardshrink_kernel(x, lambd):
    return _where(~(np.greater_equal(x, -lambd) & np.less_equal(x, lambd)), x)


HARDSHRINK = register("hardshrink", _opmath(_hardshrink_kernel),
                      lambda ctx, g: (_masked(g, ctx.inputs[0], "outside", -ctx.attrs["lambd"],
                                              ctx.attrs["lambd"]),), save="i")


def hardshrink(input, lambd: float = 0.5):
    """x where |x| > lambd, else 0."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "hardshrink_cpu", "hardshrink")
    return apply(HARDSHRINK, (input,), {"lambd": lambd})


def tanhshrink(input):
    """x - tanh(x)."""
    _check_tensor(input, "tanhshrink")
    return input - _ember().tanh(input)


# ---- sigmoid-like --------------------------------------------------------------------------------------

def _logsigmoid_kernel(x):
    return _clamp(x, hi=0) - np.log1p(np.exp(-np.abs(x)))


LOG_SIGMOID = register("log_sigmoid", _opmath(_logsigmoid_kernel),
                       lambda ctx, g: (g * _ember().sigmoid(-ctx.inputs[0]),), save="i")


def logsigmoid(input):
    """log(sigmoid(x)), computed without overflow."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        _need_float(input, "log_sigmoid_cpu", "logsigmoid")
    return apply(LOG_SIGMOID, (input,))


def sigmoid(input):
    """1 / (1 + exp(-x)) (``ember.sigmoid``)."""
    return _ember().sigmoid(input)


def tanh(input):
    """Hyperbolic tangent (``ember.tanh``)."""
    return _ember().tanh(input)


def softsign(input):
    """x / (1 + |x|)."""
    _check_tensor(input, "softsign")
    return input / (input.abs() + 1)


# ---- torch.<name> forms ------------------------------------------------------------------------------------

def _top_rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, generator=None):
    """torch.rrelu: :func:`rrelu` without ``inplace`` (``generator`` is not supported)."""
    if generator is not None:
        raise NotImplementedError("rrelu: the generator= argument is not supported by ember; seed with "
                                  "ember.manual_seed instead")
    return rrelu(input, lower, upper, training)


def _top_rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, generator=None):
    """torch.rrelu_: in-place :func:`rrelu`."""
    if generator is not None:
        raise NotImplementedError("rrelu_: the generator= argument is not supported by ember; seed with "
                                  "ember.manual_seed instead")
    return rrelu(input, lower, upper, training, inplace=True)


def _top_threshold(input, threshold, value):  # noqa: A002
    """torch.threshold: :func:`threshold` without ``inplace``."""
    return threshold_fn(input, threshold, value)


def _top_selu(input):
    """torch.selu."""
    return selu(input)


def _top_celu(input, alpha: float = 1.0):
    """torch.celu."""
    return celu(input, alpha)


def _export_top_level():
    """torch has some activations as ``torch.<name>`` too (and ``Tensor.prelu`` / ``Tensor.hardshrink``).

    ember's package namespace is filled before ``ember.nn`` is imported, so the functions are also set on
    the (already importing) package module here.
    """
    import sys
    from ...ops.registry import attach, FUNCTIONS
    pkg = sys.modules.get("ember")
    forms = {"selu": _top_selu, "selu_": selu_, "celu": _top_celu, "celu_": celu_, "rrelu": _top_rrelu,
             "rrelu_": _top_rrelu_, "prelu": prelu, "hardshrink": hardshrink, "threshold": _top_threshold,
             "threshold_": threshold_}
    for name, fn in forms.items():
        if name in FUNCTIONS:       # an op family already defines it
            continue
        attach(name, fn, method=name in ("prelu", "hardshrink"))
        if pkg is not None and not hasattr(pkg, name):
            setattr(pkg, name, fn)


_export_top_level()
