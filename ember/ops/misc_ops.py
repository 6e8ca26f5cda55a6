"""Small torch functions real programs reach for: ``unravel_index``, ``scalar_tensor``, ``asarray``,
``gcd`` / ``lcm``, ``frexp``, the ``*_scatter`` embeddings (``slice_scatter``, ``select_scatter``,
``diagonal_scatter``), ``is_signed``, ``typename``, ``Tensor.new_empty_strided`` and ``Tensor.dim_order``.
They are compositions of ember ops (the scatters differentiate) or NumPy on integer data.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import export, to_tensor

__all__ = ["unravel_index", "scalar_tensor", "asarray", "gcd", "lcm", "frexp", "slice_scatter", "select_scatter",
           "diagonal_scatter", "is_signed", "typename"]

FrexpResult = collections.namedtuple("frexp", ["mantissa", "exponent"])


@export(method=False)
def unravel_index(indices, shape):
    """The coordinates (one tensor per dim of ``shape``) of flat ``indices`` into a tensor of ``shape``."""
    idx = to_tensor(indices)
    if idx._dtype.is_floating_point or idx._dtype.is_complex or idx._dtype is _dt.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {idx.dtype}")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got " + str(shape))
    out, rest = [], idx.long()
    for n in reversed(shape):
        out.append(rest.remainder(n) if n else rest * 0)
        rest = rest.div(n, rounding_mode="floor") if n else rest
    return tuple(reversed(out))


@export(method=False)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
    """A 0-d tensor holding ``s`` (the default float dtype unless ``dtype`` is given)."""
    from .creation import tensor
    dt = _dt.get_default_dtype() if dtype is None else dtype
    return tensor(s, dtype=dt, device=device, requires_grad=requires_grad)


@export(method=False)
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """torch.asarray: a tensor sharing ``obj``'s memory when it can (a tensor or NumPy array of the
    dtype), else a new one; ``copy=True`` always copies."""
    from .creation import as_tensor, tensor
    if isinstance(obj, Tensor):
        r = obj if dtype is None or obj.dtype is dtype else obj.to(dtype)
        r = r.clone() if copy and r is obj else r
    elif isinstance(obj, np.ndarray) and not copy:
        r = as_tensor(obj, dtype=dtype)
    else:
        r = tensor(obj, dtype=dtype)
    if device is not None:
        r = r.to(device)
    return r.requires_grad_(True) if requires_grad else r


def _int_binary(name, fn):
    def op(input, other):
        from .creation import tensor
        a, b = to_tensor(input), to_tensor(other)
        for t in (a, b):
            if not (t._dtype.category < 2 and t._dtype is not _dt.bool):
                raise RuntimeError(f"\"{name}_cpu\" not implemented for '{str(t.dtype).split('.')[-1]}'")
        r = fn(a.numpy(), b.numpy())
        return tensor(r, dtype=_dt.promote_types(a.dtype, b.dtype))
    op.__name__ = name
    return op


gcd = export(method=True)(_int_binary("gcd", np.gcd))
lcm = export(method=True)(_int_binary("lcm", np.lcm))


@export(method=True)
def frexp(input):
    """(mantissa, exponent) with ``input = mantissa * 2 ** exponent``, ``0.5 <= |mantissa| < 1``."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e = np.frexp(input.detach().numpy())
    return FrexpResult(wrap(m, input._dtype), wrap(e.astype(np.int32), _dt.int32))


@export(method=True)
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with ``src`` written into ``input[..., start:end:step, ...]`` along ``dim`` (a new tensor)."""
    out = input.clone()
    key = [slice(None)] * input.dim()
    key[dim] = slice(start, end, step)
    out[tuple(key)] = src
    return out


@export(method=True)
def select_scatter(input, src, dim, index):
    """``input`` with ``src`` written into ``input.select(dim, index)`` (a new tensor)."""
    out = input.clone()
    key = [slice(None)] * input.dim()
    key[dim] = index
    out[tuple(key)] = src
    return out


@export(method=True)
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with ``src`` written onto ``input.diagonal(offset, dim1, dim2)`` (a new tensor)."""
    from .creation import zeros_like
    nd = input.dim()
    d1, d2 = dim1 % nd, dim2 % nd
    mask = zeros_like(input, dtype=_dt.bool)
    mask.diagonal(offset, d1, d2).fill_(True)
    placed = zeros_like(input)
    placed.diagonal(offset, d1, d2).copy_(src)
    from .binary import where
    return where(mask, placed, input)


@export(method=True)
def is_signed(input):
    """Whether ``input``'s dtype has a sign (everything but uint8 and bool)."""
    return input.dtype not in (_dt.uint8, _dt.bool)


@export(method=False)
def typename(obj):
    """torch.typename: ``torch.FloatTensor``-style names for tensors, the qualified type name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    mod = getattr(type(obj), "__module__", "")
    name = type(obj).__qualname__
    return name if mod in ("builtins", "") else f"{mod}.{name}"


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, pin_memory=False,
                       requires_grad=False):
    from .random_ops import empty_strided
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype, device=device,
                         requires_grad=requires_grad)


def _dim_order(self, *, ambiguity_check=False):
    """The dims from outermost to innermost by stride (ties keep their order), as ``Tensor.dim_order``."""
    st = self.stride()
    if ambiguity_check:
        raise RuntimeError("dim_order: ember does not check for ambiguous layouts (ambiguity_check=True)")
    return tuple(sorted(range(len(st)), key=lambda d: -st[d]))


Tensor.new_empty_strided = _new_empty_strided
Tensor.dim_order = _dim_order
