"""Complex tensors: the parts (real, imag, view_as_real, view_as_complex), conj, angle, sgn, complex(),
polar(), and the derivative convention shared by every op that computes in complex.

torch's convention for a real loss L of a complex z = x + iy: the gradient is dL/dx + i dL/dy (the
conjugate Wirtinger derivative times two). For a holomorphic f, the input gradient is then
``grad * conj(f'(z))``. The existing derivative rules compute ``grad * f'(z)`` in ember ops, so one
wrapper, ``holomorphic``, serves them all: conj(rule(conj(grad))) = grad * conj(f'(z)). It only acts
when the incoming gradient is complex; real tensors keep their rules untouched (the forward path pays
nothing). A real input that met a complex one gets the real part of its gradient (``engine._validate``).

``real``/``imag``/``view_as_real``/``view_as_complex`` are views sharing memory, as in torch, so writes
through them reach the complex tensor. ``conj`` returns a conjugated copy (torch returns a lazy view
with the conj bit; values, dtype and gradients are the same, ``is_conj()`` is False).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import register, apply, apply_view, attach, dtype_name, REGISTRY


# ---- the derivative convention ---------------------------------------------------------------------------

def _conj(t):
    return t if t is None or not t._dtype.is_complex else apply(CONJ, (t,))


def holomorphic(op) -> None:
    """Make ``op``'s derivative rule (written as grad * f'(z)) follow torch's complex convention."""
    rule = op.backward

    def backward(ctx, g):
        if not g._dtype.is_complex:
            return rule(ctx, g)
        res = rule(ctx, apply(CONJ, (g,)))
        if type(res) is tuple:
            return tuple(r if r is None or not r._dtype.is_complex else apply(CONJ, (r,)) for r in res)
        return _conj(res) if res._dtype.is_complex else res
    backward.__name__ = getattr(rule, "__name__", op.name + "_bw")
    op.backward = backward


def _need_tensor(t, op: str):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(t).__name__}")


# ---- conj ------------------------------------------------------------------------------------------------

CONJ = register("conj_physical", np.conjugate, lambda ctx, g: (_conj(g) if g._dtype.is_complex else g,))
CONJ.node_name = "ConjBackward0"


def conj_physical(input):
    """The complex conjugate (a copy); real tensors are returned as they are (torch does the same)."""
    _need_tensor(input, "conj_physical")
    return apply(CONJ, (input,)) if input._dtype.is_complex else input


def conj(input):
    """The complex conjugate. ember materialises it (torch sets a lazy conj bit; same values)."""
    _need_tensor(input, "conj")
    return apply(CONJ, (input,)) if input._dtype.is_complex else input


def resolve_conj(input):
    return input


# ---- parts as views --------------------------------------------------------------------------------------

def _real_view(x):
    return x.real


def _imag_view(x):
    return x.imag


def _as_real_view(x):
    # NumPy allows a dtype view when the last axis is contiguous: a size-1 axis always is
    return x[..., None].view(x.real.dtype)


def _as_complex_view(x):
    return x.view(np.complex64 if x.dtype == np.float32 else np.complex128)[..., 0]


REAL = register("real", _real_view, lambda ctx, g: (_place(g, 0),))
IMAG = register("imag", _imag_view, lambda ctx, g: (_place(g, 1),))
REAL.node_name = IMAG.node_name = "SelectBackward0"     # torch: view_as_real(z).select(-1, k)
VIEW_AS_REAL = register("view_as_real", _as_real_view, lambda ctx, g: (view_as_complex(g.contiguous()),))
VIEW_AS_COMPLEX = register("view_as_complex", _as_complex_view, lambda ctx, g: (view_as_real(g),))


def _place(g, part):
    zeros = wrap(np.zeros(g._data.shape, dtype=g._dtype.np), g._dtype)
    return complex(g, zeros) if part == 0 else complex(zeros, g)


def real(input):
    """The real part: a view for complex tensors, the tensor itself for real ones."""
    _need_tensor(input, "real")
    return apply_view(REAL, (input,)) if input._dtype.is_complex else input


def imag(input):
    """The imaginary part as a view (complex tensors only, as torch)."""
    _need_tensor(input, "imag")
    if not input._dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return apply_view(IMAG, (input,))


def view_as_real(input):
    """A real view with a last dimension of size 2 holding (real, imag)."""
    _need_tensor(input, "view_as_real")
    if not input._dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return apply_view(VIEW_AS_REAL, (input,))


def view_as_complex(input):
    """A complex view of a float32/float64 tensor whose last dimension (size 2, stride 1) holds (real, imag)."""
    _need_tensor(input, "view_as_complex")
    dt = input._dtype
    if dt is _dt.float16:
        raise RuntimeError("view_as_complex of a Half tensor would be complex32 (torch.chalf), which ember does "
                           "not support; supported: float and double tensors")
    if dt is not _dt.float32 and dt is not _dt.float64:
        raise RuntimeError("view_as_complex is only supported for half, float and double tensors, but got a "
                           f"tensor of scalar type: {dtype_name(dt)}")
    a = input._data
    if a.ndim == 0 or a.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if a.strides[-1] != a.itemsize and a.size:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * a.itemsize) for s in a.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if input.storage_offset() % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return apply_view(VIEW_AS_COMPLEX, (input,))


# ---- complex() and polar() -------------------------------------------------------------------------------

def _complex_kernel(re, im):
    """A complex array of the broadcast shape from real and imaginary parts (float32 -> complex64)."""
    cdt = np.complex64 if re.dtype == np.float32 else np.complex128
    out = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), dtype=cdt)
    out.real = re
    out.imag = im
    return out


COMPLEX = register("complex", _complex_kernel, lambda ctx, g: (real(g), imag(g)))


def _check_pair(a, b, op, names):
    for i, (t, n) in enumerate(zip((a, b), names)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): argument '{n}' (position {i + 1}) must be Tensor, not {type(t).__name__}")
    for t in (a, b):
        if t._dtype is not _dt.float32 and t._dtype is not _dt.float64:
            raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                               f"{dtype_name(a._dtype)} and {dtype_name(b._dtype)}")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"Expected object of scalar type {dtype_name(a._dtype)} but got scalar type "
                           f"{dtype_name(b._dtype)} for second argument")


def _pair_op(op, a, b, names, out):
    """complex() / polar(): two real tensors of one floating dtype in, a complex tensor out."""
    _check_pair(a, b, op.name, names)
    return _with_out(apply(op, (a, b)), out)


def _with_out(r, out):
    if out is None:
        return r
    from .inplace import copy_out
    return copy_out(r, out)


def complex(real, imag, *, out=None):  # noqa: A001 - torch's name
    """A complex tensor from its real and imaginary parts (both float32 or both float64)."""
    return _pair_op(COMPLEX, real, imag, ("real", "imag"), out)


def _polar_kernel(r, theta):
    return _complex_kernel(r * np.cos(theta), r * np.sin(theta))


def _polar_bw(ctx, g):
    r, theta = ctx.inputs
    # d out / d r = e^{i theta}, d out / d theta = i r e^{i theta}; a real input gets Re(g * conj(d out))
    ge = g * complex(theta.cos(), -theta.sin())     # g * conj(e^{i theta})
    return real(ge), imag(ge) * r


POLAR = register("polar", _polar_kernel, _polar_bw, save="i")


def polar(abs, angle, *, out=None):  # noqa: A002 - torch's names
    """``abs * (cos(angle) + i sin(angle))``."""
    return _pair_op(POLAR, abs, angle, ("abs", "angle"), out)


# ---- angle and sgn ---------------------------------------------------------------------------------------

def _angle_kernel(x):
    r = np.angle(x)
    return r.astype(x.real.dtype if x.dtype.kind == "c" else x.dtype, copy=False)


def _angle_bw(ctx, g):
    z = ctx.inputs[0]
    if not z._dtype.is_complex:
        from .creation import zeros_like
        return (zeros_like(g),)
    a2 = _nonzero_or_one(real(z * _conj(z)), z)      # |z|^2, 1 where z == 0 (the gradient is 0 there)
    v = g * z / a2 * 1j
    return (_masked_zero(v, z),)


ANGLE = register("angle", _angle_kernel, _angle_bw, save="i")


def angle(input, *, out=None):
    """The argument of each element (radians); for real tensors pi where negative, else 0."""
    _need_tensor(input, "angle")
    x = input
    if x._dtype.category < 2:
        x = x.to(_dt.get_default_dtype())
    return _with_out(apply(ANGLE, (x,)), out)


def _sgn_kernel(x):
    a = np.abs(x)
    return np.divide(x, a, out=np.zeros_like(x), where=a != 0)


def _sgn_bw(ctx, g):
    z = ctx.inputs[0]
    s = ctx.output
    a = _nonzero_or_one(z.abs(), z)
    v = (g - s * real(g * _conj(s))) / a
    return (_masked_zero(v, z),)


SGN_C = register("sgn_complex", _sgn_kernel, _sgn_bw, save="io")
SGN_C.node_name = "SgnBackward0"


def sgn_complex(z):
    return apply(SGN_C, (z,))


def _masked_zero(v, z):
    from .unary import _where_mask
    return _where_mask(v, z, "nonzero")


def _nonzero_or_one(v, z):
    from .unary import _where_mask
    return _where_mask(v, z, "nonzero", fill=1.0)


# ---- Tensor surface --------------------------------------------------------------------------------------

def _real_get(self):
    return real(self)


def _real_set(self, value):
    real(self).copy_(value)


def _imag_get(self):
    return imag(self)


def _imag_set(self, value):
    imag(self).copy_(value)


def _conjugating(transpose_of):
    """The conjugate transposes (``H``, ``mH``, ``adjoint``): the transposes of ``ember/ops/shape.py``
    followed by conj, which leaves real tensors as they are."""
    def f(self):
        return conj(transpose_of(self))
    return f


_H, _MH = _conjugating(Tensor.H.fget), _conjugating(Tensor.mH.fget)
Tensor.H = property(_H)
Tensor.mH = property(_MH)
attach("adjoint", _MH)
Tensor.real = property(_real_get, _real_set)
Tensor.imag = property(_imag_get, _imag_set)
for _n, _f in [("conj", conj), ("conj_physical", conj_physical), ("resolve_conj", resolve_conj),
               ("view_as_real", view_as_real), ("view_as_complex", view_as_complex), ("angle", angle)]:
    attach(_n, _f, method=_n not in ("view_as_real", "view_as_complex"))
attach("real", real, method=False)
attach("imag", imag, method=False)
attach("complex", complex, method=False)
attach("polar", polar, method=False)


# ordering ops torch refuses for complex (NumPy would order complex numbers lexicographically): torch's
# kernel name or sentence for the message. max/min/amax/amin/argmax/argmin check in their functions
# (ember/ops/reduce_order.py), where the check costs nothing measurable; these rarer ones wrap the kernel
_SORT = " Sort does not support complex dtypes on CPU"
_ORDERED = {"sort": _SORT, "argsort": _SORT, "topk": " topk does not support complex dtypes on CPU",
            "kthvalue": "kthvalue_cpu", "median": "median_cpu", "median_dim": "median_out", "mode": "mode_cpu",
            "cummax": "cummax_cpu", "cummin": "cummin_cpu", "unique": "unique",
            "nansum": "nansum on CPU does not support complex inputs"}


def _refuse_complex(op, kname):
    kernel = op.kernel

    def k(x, *args, **kw):
        if x.dtype.kind == "c":
            if " " in kname:        # torch's own sentence (a RuntimeError)
                raise RuntimeError(kname)
            raise NotImplementedError(f"\"{kname}\" not implemented for '{_CNAMES[x.dtype]}'")
        return kernel(x, *args, **kw)
    k.__name__ = getattr(kernel, "__name__", op.name)
    op.kernel = k


_CNAMES = {np.dtype(np.complex64): "ComplexFloat", np.dtype(np.complex128): "ComplexDouble"}


# ops whose derivative rules multiply by input values (holomorphic in each complex argument)
_HOLOMORPHIC = ("mul", "div", "matmul", "einsum", "prod", "square", "pow", "pow_tensor_scalar", "pow_scalar_tensor",
                "cumprod", "linear", "addcmul", "addcdiv", "add_scaled", "cross", "conv2d", "conv_transpose2d",
                "conv2d_weight")


def install_conventions():
    """Apply the refusals and the derivative convention to the registered ops named above. Idempotent:
    ``ember/__init__`` calls it again once ember.nn has registered its ops (linear, conv2d)."""
    from .unary import COMPLEX_OK
    for name, kname in _ORDERED.items():
        op = REGISTRY.get(name)
        if op is not None and not getattr(op.kernel, "_refuses_complex", False):
            _refuse_complex(op, kname)
            op.kernel._refuses_complex = True
    for name in tuple(COMPLEX_OK) + _HOLOMORPHIC:
        op = REGISTRY.get(name)
        if op is not None and not getattr(op.backward, "_holomorphic", False):
            holomorphic(op)
            op.backward._holomorphic = True


install_conventions()
