"""Random sampling and range/identity creation ops.

Every draw goes through an ``ember.Generator`` (the default one unless ``generator=`` is given), so
``ember.manual_seed(s)`` makes results repeat run after run. The numbers are NumPy PCG64 streams, not
torch's: distributions, shapes, dtypes and errors match torch, individual values do not.

* factories: rand, randn, randint, randperm, normal(mean, std, size) and the ``*_like`` forms;
* samplers over tensors: normal (tensor mean/std), bernoulli, poisson (differentiable with zero
  gradient, as in torch), multinomial (int64 indices);
* in-place methods: uniform_, normal_, bernoulli_, random_, exponential_, geometric_, log_normal_,
  cauchy_ (the old values get a zero gradient, through ``copy_``'s autograd rule);
* ranges: linspace, logspace, eye, empty_strided.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap, _check_device, _on_device
from ..random import _gen, _GEN_HOOK
from ..memory import _alloc, _check_new
from .registry import register, apply, attach, dtype_name, FACTORY
from ._util import shape_arg, fmt_shape, SCALAR_C_NAMES, VALUE_RANGE
from .copies import overwrite, _size_mismatch

_MANTISSA = {_dt.float16: 11, _dt.bfloat16: 8, _dt.float32: 24, _dt.float64: 53}
_CTYPE = {_dt.bool: "bool", _dt.uint8: "unsigned char", _dt.int8: "signed char", _dt.int16: "short",
          _dt.int32: "int", _dt.int64: "long"}
_CTYPE_LONG = {_dt.bool: "bool", _dt.uint8: "unsigned char", _dt.int8: "signed char", _dt.int16: "short int",
               _dt.int32: "int", _dt.int64: "long int"}


# ---- helpers -----------------------------------------------------------------------------------------


def _fmt(x) -> str:
    """A number as torch's C++ stream prints it (``-1``, ``1.5``)."""
    return f"{float(x):g}"


def _shape(size, op: str) -> tuple:
    shape = shape_arg(size)
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {fmt_shape(shape)}")
    return shape


def _need_float(dt, kernel: str, complex_ok: bool = False) -> None:
    if not (dt.is_floating_point or complex_ok and dt.is_complex):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype_name(dt)}'")


def _draw_kernel(gen, kind, shape, dt, a=None, b=None):
    """The NumPy draw behind every random factory (see ``RANDOM_DRAW``); ``gen`` is an ember Generator or
    None (the default generator, looked up at each draw, as ``manual_seed`` may replace its state)."""
    if dt.is_complex:
        # real and imaginary parts drawn as the last axis of a real array (normal: variance 1/2 each)
        r = _draw_kernel(gen, kind, tuple(shape) + (2,), dt.to_real(), a, b)
        if kind == "normal":
            r *= np.sqrt(0.5).astype(r.dtype)
        return r.view(dt.np)[..., 0]
    gen = _gen(gen)
    if kind == "uniform":
        r = _uniform01(gen, shape, dt)
    elif kind == "normal":
        r = _standard_normal(gen, shape, dt)
    elif kind == "integers":
        r = _randint_array(gen, a, b, shape, dt)
    elif kind == "permutation":
        r = gen.permutation(a)
    elif kind == "keep":            # dropout's keep mask: 1 with probability 1 - a, else 0
        r = gen.random(shape, dtype=np.float64) >= a
    elif kind == "below":           # bernoulli_(p): 1 with probability a (bernoulli_'s own comparison)
        r = gen.random(shape, dtype=np.float64) < a
    else:
        raise ValueError(f"random_draw: unknown kind {kind!r}")
    return np.asarray(r).astype(dt.np, copy=False)


# Every random factory (rand, randn, randint, randperm, dropout masks) draws through this op, so the draw
# is an op of its own: eagerly it is one NumPy call; ember.compile records it as a graph node that draws
# fresh numbers from the same generator, in program order, on every run (not a constant baked in)
RANDOM_DRAW = register("random_draw", _draw_kernel, differentiable=False)


def draw(gen, kind, shape, dt, a=None, b=None) -> Tensor:
    """``RANDOM_DRAW`` applied: a new tensor of ``shape`` and ember dtype ``dt`` (``gen``: an ember
    Generator or None for the default one)."""
    _check_new(shape, dt.np)           # a size no machine holds, or past the memory limit: refused first
    return apply(RANDOM_DRAW, (), {"gen": gen, "kind": kind, "shape": tuple(shape), "dt": dt, "a": a, "b": b})


def _result(arr, dt, requires_grad=False, device=None, out=None) -> Tensor:
    dev = _check_device(device)
    if isinstance(arr, Tensor):
        t = arr                 # drawn by RANDOM_DRAW (a node of its own when captured)
    else:
        t = wrap(np.asarray(arr).astype(dt.np, copy=False), dt)
        if FACTORY[0] is not None:
            FACTORY[0](t._data)     # a constant
    t = _on_device(t, dev)      # drawn on the host with the CPU generator, then copied
    if requires_grad:
        t.requires_grad_(True)
    if out is not None:
        from .inplace import copy_out
        return copy_out(t, out)
    return t


def _copy_out(r, out):
    from .inplace import copy_out
    return copy_out(r, out)


def _uniform01(g: np.random.Generator, shape, dt) -> np.ndarray:
    """Uniform [0, 1) values with the resolution of ``dt`` (so rounding never reaches 1)."""
    if dt is _dt.float64:
        return g.random(shape)
    if dt is _dt.float32:
        return g.random(shape, dtype=np.float32)
    bits = _MANTISSA[dt]
    return (g.integers(0, 1 << bits, size=shape) * (1.0 / (1 << bits))).astype(np.float32)


def _standard_normal(g: np.random.Generator, shape, dt) -> np.ndarray:
    return g.standard_normal(shape, dtype=np.float64 if dt is _dt.float64 else np.float32)


def _dtype_for(dtype, out, default):
    if dtype is not None:
        return dtype
    if out is not None and isinstance(out, Tensor):
        return out._dtype
    return default


def _size_args(size, kw_size, op):
    if kw_size is not None:
        if size:
            raise TypeError(f"{op}() got multiple values for argument 'size'")
        size = (kw_size,)
    if not size:
        raise TypeError(f"{op}() received an invalid combination of arguments - got (), but expected (tuple of ints size)")
    return _shape(size, op)


# ---- rand / randn / randint / randperm ------------------------------------------------------------------


def _float_draw(op, kind, kernel, size, kw, generator, out, dtype, device, requires_grad) -> Tensor:
    """rand/randn: a floating or complex tensor of ``kind`` draws (``kernel`` names torch's kernel in its dtype
    error)."""
    shape = _size_args(size, kw.pop("size", None), op)
    dt = _dtype_for(dtype, out, _dt.get_default_dtype())
    _need_float(dt, kernel, True)
    _check_device(device)
    return _result(draw(generator, kind, shape, dt), dt, requires_grad, device, out)


def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False, **kw) -> Tensor:
    """Uniform samples from [0, 1) with the given shape (default dtype unless ``dtype``)."""
    return _float_draw("rand", "uniform", "check_uniform_bounds", size, kw, generator, out, dtype, device,
                       requires_grad)


def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, **kw) -> Tensor:
    """Standard normal samples with the given shape."""
    return _float_draw("randn", "normal", "normal_kernel_cpu", size, kw, generator, out, dtype, device,
                       requires_grad)


def _int_bounds(dt):
    """The [lo, hi] integers representable exactly in ``dt``."""
    if dt is _dt.bool:
        return 0, 1
    if dt.category == 1:
        ii = np.iinfo(dt.np)
        return int(ii.min), int(ii.max)
    m = 1 << _MANTISSA[dt]
    return -m, m


def _check_random_range(frm: int, to: int, dt) -> None:
    """torch's checks for an integer range [frm, to) in dtype ``dt``."""
    if frm >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={frm} >= to={to}")
    if dt.category <= 1:
        lo, hi = _int_bounds(dt)
        name = _CTYPE[dt]
        if not lo <= frm <= hi:
            raise RuntimeError(f"from is out of bounds for {name}")
        if not lo <= to - 1 <= hi:
            raise RuntimeError(f"to - 1 is out of bounds for {name}")


def _randint_array(g, lo: int, hi_incl: int, shape, dt) -> np.ndarray:
    if hi_incl > np.iinfo(np.int64).max or lo < np.iinfo(np.int64).min:
        raise RuntimeError(f"random_: range [{lo}, {hi_incl}] does not fit in int64")
    return g.integers(lo, hi_incl, size=shape, dtype=np.int64, endpoint=True).astype(dt.np)


def _as_int(x, op: str, arg: str, pos: int) -> int:
    if isinstance(x, Tensor):
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be int, not {type(x).__name__}")
    return int(x)


def randint(*args, size=None, low=None, high=None, generator=None, out=None, dtype=None, layout=None,
            device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``; int64 by default."""
    args = list(args)
    if size is None and args and not isinstance(args[-1], (int, np.integer, Tensor)):
        size = args.pop()
    if len(args) == 2:
        low, high = args
    elif len(args) == 1:
        if high is None:
            high = args[0]
        else:
            low = args[0]
    elif len(args) > 2:
        raise TypeError("randint() received an invalid combination of arguments: too many positional arguments")
    if high is None or size is None:
        raise TypeError("randint() received an invalid combination of arguments - expected (int high, tuple of "
                        "ints size) or (int low, int high, tuple of ints size)")
    low = 0 if low is None else _as_int(low, "randint", "low", 1)
    high = _as_int(high, "randint", "high", 2 if len(args) == 2 else 1)
    shape = _shape((size,), "randint")
    dt = _dtype_for(dtype, out, _dt.int64)
    _check_random_range(low, high, dt)
    if high - 1 > np.iinfo(np.int64).max or low < np.iinfo(np.int64).min:
        raise RuntimeError(f"random_: range [{low}, {high - 1}] does not fit in int64")
    _check_device(device)
    return _result(draw(generator, "integers", shape, dt, low, high - 1), dt, requires_grad, device, out)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
             pin_memory=False) -> Tensor:
    """A random permutation of 0 .. n-1 (int64 by default)."""
    n = _as_int(n, "randperm", "n", 1)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    dt = _dtype_for(dtype, out, _dt.int64)
    if dt.category == 1 and n - 1 > np.iinfo(dt.np).max:
        raise RuntimeError(f"value cannot be converted to type {dt.c_name} without overflow")
    _check_device(device)
    return _result(draw(generator, "permutation", (n,), dt, n), dt, requires_grad, device, out)


def _laid_out(r: Tensor, input: Tensor, memory_format, fn: str) -> Tensor:
    """A fresh ``*_like`` result in ``memory_format``'s layout (or, by default, a channels-last input's),
    as torch lays out its ``*_like`` results; the values stay where they are."""
    d = input._data
    if memory_format is None and (type(d) is not np.ndarray or d.flags.c_contiguous):
        return r
    if type(r._data) is np.ndarray:
        from .._memory_format import like_layout
        r._data = like_layout(r._data, input, memory_format, fn)
    return r


def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None,
              generator=None) -> Tensor:
    """``rand`` with ``input``'s shape (and dtype unless ``dtype``)."""
    return _laid_out(rand(input._data.shape, dtype=dtype or input._dtype, device=device,
                          requires_grad=requires_grad, generator=generator), input, memory_format, "rand_like")


def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None,
               generator=None) -> Tensor:
    """``randn`` with ``input``'s shape (and dtype unless ``dtype``)."""
    return _laid_out(randn(input._data.shape, dtype=dtype or input._dtype, device=device,
                           requires_grad=requires_grad, generator=generator), input, memory_format, "randn_like")


def randint_like(input, low=None, high=None, *, dtype=None, layout=None, device=None, requires_grad=False,
                 memory_format=None, generator=None) -> Tensor:
    """``randint`` with ``input``'s shape: ``randint_like(x, high)`` or ``randint_like(x, low, high)``."""
    if high is None:
        if low is None:
            raise TypeError("randint_like() missing required argument 'high'")
        low, high = 0, low
    low = 0 if low is None else low
    return randint(low, high, input._data.shape, dtype=dtype or input._dtype, device=device,
                   requires_grad=requires_grad, generator=generator)


for _n, _f in [("rand", rand), ("randn", randn), ("randint", randint), ("randperm", randperm),
               ("rand_like", rand_like), ("randn_like", randn_like), ("randint_like", randint_like)]:
    attach(_n, _f, method=False)

# ---- samplers over tensors: normal / bernoulli / poisson / multinomial -------------------------------------


def _zero_grads(ctx, g):
    # sampling is not differentiable in its parameters: torch defines the gradient as zero
    # (made like ``g``: on its device)
    return tuple(g.new_zeros(ctx.in_shape(i)) if e is not None else None for i, e in enumerate(ctx.edges))


def _normal_kernel(mean, std, gen, shape, dt):
    # (gen: an ember Generator or None, looked up at each call as in _draw_kernel, so a compiled replay
    # draws from the generator's current state)
    z = _gen(gen).standard_normal(shape, dtype=np.float64 if dt == np.float64 else np.float32)
    return (np.asarray(mean, dtype=dt) + np.asarray(std, dtype=dt) * z.astype(dt)).astype(dt, copy=False)


NORMAL = register("normal", _normal_kernel, _zero_grads)
NORMAL.node_name = "NormalBackward3"


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False) -> Tensor:
    """Normal samples: ``normal(mean, std)`` with tensor mean and/or std (broadcast; the result takes
    the dtype of ``mean`` if it is a tensor, else of ``std``), or ``normal(mean, std, size)`` with numbers."""
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not tm and not ts:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got (float, float), but "
                            "expected (Tensor mean, Tensor std), (Tensor mean, float std), (float mean, Tensor std) "
                            "or (float mean, float std, tuple of ints size)")
        shape = _shape((size,), "normal")
        dt = _dtype_for(dtype, out, _dt.get_default_dtype())
        _need_float(dt, "normal_kernel_cpu")
        if not std >= 0:        # (NaN too)
            raise RuntimeError(f"normal expects std >= 0.0, but found std {_fmt(std)}")
        z = draw(generator, "normal", shape, dt)      # (an op: ember.compile records the draw)
        if std != 1:
            z = z * std
        if mean != 0:
            z = z + mean
        return _result(z, dt, requires_grad, device, out)
    if size is not None:
        raise TypeError("normal() received an invalid combination of arguments - got (Tensor, Tensor, tuple): "
                        "size= is only accepted with float mean and std")
    dt = mean._dtype if tm else std._dtype
    for t in (mean, std):
        if isinstance(t, Tensor):
            _need_float(t._dtype, "normal_kernel_cpu")
    if ts:
        if std._data.size and not (std._data >= 0).all():     # (NaN too)
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_fmt(std)}")
    ms = mean._data.shape if tm else ()
    ss = std._data.shape if ts else ()
    try:
        shape = np.broadcast_shapes(ms, ss)
    except ValueError:
        raise RuntimeError(_size_mismatch(ms, ss)) from None
    r = apply(NORMAL, (mean, std), {"gen": generator, "shape": shape, "dt": dt.np})
    return r if out is None else _copy_out(r, out)


attach("normal", normal, method=False)


def _bernoulli_kernel(p, gen, dt):
    u = _gen(gen).random(np.shape(p))
    return (u < p).astype(dt)


BERNOULLI = register("bernoulli", _bernoulli_kernel, _zero_grads)


def _bernoulli_scalar_bw(ctx, g):
    raise RuntimeError("derivative for aten::bernoulli is not implemented")


# bernoulli(input, p): the result does not depend on input's values; torch has no derivative for it
BERNOULLI_P = register("bernoulli_p", lambda x, p, gen: (_gen(gen).random(x.shape) < p).astype(x.dtype),
                       _bernoulli_scalar_bw)
BERNOULLI_P.node_name = "torch::autograd::NotImplemented"


_P_RANGE_MSG = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
                "improved?  If so, please report an enhancement request to PyTorch.)")


def bernoulli(input, p=None, *, generator=None, out=None) -> Tensor:
    """Draw 0/1 values: with probability ``input[i]`` each, or with probability ``p`` (shape of ``input``)."""
    g = generator                               # (the kernels look the generator up as they draw)
    if p is None:
        if not input._dtype.is_floating_point:
            raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{dtype_name(input._dtype)}'")
        d = input.cpu()._data                   # (a device tensor's probabilities are checked on the host)
        if d.size and not ((d >= 0) & (d <= 1)).all():
            raise RuntimeError(_P_RANGE_MSG)
        r = apply(BERNOULLI, (input,), {"gen": g, "dt": input._dtype.np})
    else:
        p = float(p)
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_fmt(p)}")
        r = apply(BERNOULLI_P, (input, p), {"gen": g})
    if out is not None and out._dtype is not r._dtype:
        r = r.to(out._dtype)        # 0/1 values: any output dtype holds them, as torch allows
    return r if out is None else _copy_out(r, out)


attach("bernoulli", bernoulli)


def _poisson_kernel(rates, gen):
    return _gen(gen).poisson(rates.astype(np.float64)).astype(rates.dtype)


POISSON = register("poisson", _poisson_kernel, _zero_grads)


def poisson(input, generator=None) -> Tensor:
    """Poisson samples with rates ``input`` (same dtype; zero gradient)."""
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{dtype_name(input._dtype)}'")
    d = input._data
    if d.size and not (d >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return apply(POISSON, (input,), {"gen": generator})


attach("poisson", poisson, method=False)


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None, out=None) -> Tensor:
    """Category indices (int64) drawn from each row of (unnormalised) probabilities ``input``."""
    nd = input._data.ndim
    if nd not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input._dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {dtype_name(input._dtype)}")
    if out is not None and out._dtype is not _dt.int64:
        raise RuntimeError(f"multinomial expects Long tensor out, got: {dtype_name(out._dtype)}")
    n = int(num_samples)
    if n <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    ncat = input._data.shape[-1]
    if not replacement and n > ncat:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if ncat > (1 << 24):
        raise RuntimeError("number of categories cannot exceed 2^24")
    probs = input.cpu()._data.astype(np.float64).reshape((input._data.shape[0] if nd == 2 else 1, ncat))
    if probs.size and not (np.isfinite(probs).all() and (probs >= 0).all()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    totals = probs.sum(axis=1)
    if probs.shape[0] and (totals <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    g = _gen(generator)
    rows = probs.shape[0]
    if replacement:
        cdf = np.cumsum(probs, axis=1)
        u = g.random((rows, n)) * totals[:, None]
        res = np.stack([np.searchsorted(cdf[i], u[i], side="right") for i in range(rows)]) if rows else \
            np.zeros((0, n), dtype=np.int64)
        res = np.minimum(res, ncat - 1)
    else:
        # sampling without replacement = the n largest of p / Exp(1) keys (exponential race)
        keys = probs / g.exponential(size=probs.shape)
        res = np.argsort(-keys, axis=1, kind="stable")[:, :n]
    res = res.astype(np.int64).reshape(input._data.shape[:-1] + (n,))
    return _result(res, _dt.int64, out=out)


attach("multinomial", multinomial)

# ---- in-place samplers ------------------------------------------------------------------------------


def _fill_random(self: Tensor, arr: np.ndarray, name: str) -> Tensor:
    """Write freshly drawn values into ``self`` (old values get a zero gradient, as in torch)."""
    return overwrite(self, wrap(np.asarray(arr).astype(self._dtype.np, copy=False), self._dtype), name)


def _from_to(args, kw, name):
    frm = kw.pop("from", None)
    to = kw.pop("to", None)
    if kw:
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kw))}'")
    return frm, to, list(args)


def uniform_(self, *args, generator=None, **kw) -> Tensor:
    """Fill with uniform samples from [from, to) (``uniform_(from=0, to=1)``)."""
    if self.is_meta:                # (no values to draw: nothing happens, as in torch)
        return self
    frm, to, args = _from_to(args, kw, "uniform_")
    if args:
        frm = args.pop(0) if frm is None else frm
    if args:
        to = args.pop(0) if to is None else to
    frm = 0.0 if frm is None else float(frm)
    to = 1.0 if to is None else float(to)
    if self._dtype.is_complex:      # torch: the real and imaginary parts each uniform in [from, to)
        _as_real(self).uniform_(frm, to, generator=generator)
        return self
    _need_float(self._dtype, "check_uniform_bounds")
    lo, hi = VALUE_RANGE[self._dtype]
    for what, v in (("from", frm), ("to", to)):
        if not lo <= v <= hi:       # (NaN and inf too)
            raise RuntimeError(f"{what} is out of bounds for {SCALAR_C_NAMES[self._dtype]}")
    if frm > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={_fmt(frm)} > to={_fmt(to)}")
    if to - frm > hi:
        raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<{dtype_name(self._dtype)}>::max(), but "
                           f"found to={_fmt(to)} and from={_fmt(frm)} which result in to-from to exceed the limit")
    u = _uniform01(_gen(generator), self._data.shape, self._dtype)
    return _fill_random(self, frm + (to - frm) * u.astype(np.float64), "uniform_")


def _as_real(t):
    from .complex_ops import view_as_real
    return view_as_real(t)


def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with normal samples N(mean, std**2) (complex: each part with variance std**2 / 2, as torch)."""
    if self.is_meta:
        return self
    if self._dtype.is_complex:
        _as_real(self).normal_(mean, std / np.sqrt(2.0), generator=generator)
        return self
    _need_float(self._dtype, "normal_kernel_cpu")
    if not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_fmt(std)}")
    z = _standard_normal(_gen(generator), self._data.shape, self._dtype)
    return _fill_random(self, mean + std * z.astype(np.float64), "normal_")


def bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
    """Fill with 0/1 draws with probability ``p`` (a number or a tensor broadcastable to ``self``)."""
    if _GEN_HOOK[0] is not None and not isinstance(p, Tensor) and 0 <= float(p) <= 1:
        # being captured (ember.compile): the same draw as an op the trace records (drop-path's
        # x.new_empty(shape).bernoulli_(keep) in a compiled forward), written with copy_
        return overwrite(self, draw(generator, "below", self._data.shape, self._dtype, a=float(p)), "bernoulli_")
    g = _gen(generator)
    if isinstance(p, Tensor):
        pd = p.expand(self._data.shape)._data
        if pd.size and not ((pd >= 0) & (pd <= 1)).all():
            raise RuntimeError(_P_RANGE_MSG)
        arr = g.random(self._data.shape) < pd
    else:
        p = float(p)
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_fmt(p)}")
        arr = g.random(self._data.shape) < p
    return _fill_random(self, arr, "bernoulli_")


def random_(self, *args, generator=None, **kw) -> Tensor:
    """Fill with integers: ``random_()`` over [0, 2**mantissa] (floats) or [0, max] (integers),
    ``random_(to)`` over [0, to), ``random_(from, to)`` over [from, to) (``to=None``: up to the max)."""
    frm, to, args = _from_to(args, kw, "random_")
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    if len(args) == 1 and frm is None and to is None:
        to = args[0]                 # random_(to)
    elif len(args) == 1:
        frm = args[0]
    elif len(args) == 2:
        frm, to = args
    dt = self._dtype
    frm = 0 if frm is None else int(frm)
    g = _gen(generator)
    if to is None:
        lo, hi = _int_bounds(dt)
        if dt.category <= 1 and not lo <= frm <= hi:
            raise RuntimeError(f"from is out of bounds for {_CTYPE[dt]}")
        if frm > hi:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={frm} >= to={hi + 1}")
        arr = _randint_array(g, frm, hi, self._data.shape, _dt.int64)
    else:
        to = int(to)
        _check_random_range(frm, to, dt)
        arr = _randint_array(g, frm, to - 1, self._data.shape, _dt.int64)
    return _fill_random(self, arr, "random_")


def exponential_(self, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with exponential samples of rate ``lambd``."""
    if not self._dtype.is_floating_point:
        raise RuntimeError("Exponential distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {dtype_name(self._dtype)}")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_fmt(lambd)}")
    return _fill_random(self, _gen(generator).exponential(1.0 / lambd, self._data.shape), "exponential_")


def geometric_(self, p: float, *, generator=None) -> Tensor:
    """Fill with geometric samples: the number of Bernoulli(p) trials up to the first success (>= 1)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_fmt(p)}")
    return _fill_random(self, _gen(generator).geometric(p, self._data.shape), "geometric_")


def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill with exp(N(mean, std**2)) samples."""
    _need_float(self._dtype, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_fmt(std)}")
    return _fill_random(self, _gen(generator).lognormal(mean, std, self._data.shape), "log_normal_")


def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill with Cauchy(median, sigma) samples."""
    if not self._dtype.is_floating_point:
        raise RuntimeError("Cauchy distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {_CTYPE_LONG[self._dtype]}")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_fmt(sigma)}")
    return _fill_random(self, median + sigma * _gen(generator).standard_cauchy(self._data.shape), "cauchy_")


for _n, _f in [("uniform_", uniform_), ("normal_", normal_), ("bernoulli_", bernoulli_), ("random_", random_),
               ("exponential_", exponential_), ("geometric_", geometric_), ("log_normal_", log_normal_),
               ("cauchy_", cauchy_)]:
    attach(_n, _f, function=False)

# ---- ranges and identity --------------------------------------------------------------------------------


def _range_endpoints(start, end, op):
    for t in (start, end):
        if isinstance(t, Tensor) and t._data.ndim != 0:
            sd = start._data.ndim if isinstance(start, Tensor) else 0
            ed = end._data.ndim if isinstance(end, Tensor) else 0
            raise RuntimeError(f"{op} only supports 0-dimensional start and end tensors, but got start with {sd} "
                               f"dimension(s) and end with {ed} dimension(s).")
    s = start.item() if isinstance(start, Tensor) else start
    e = end.item() if isinstance(end, Tensor) else end
    for v in (s, e):
        if not isinstance(v, (int, float, np.number, np.bool_)):
            raise TypeError(f"{op}() received an invalid combination of arguments - got ({type(start).__name__}, "
                            f"{type(end).__name__}, ...), but expected (Number start, Number end, int steps)")
    return s, e


def _linspace_values(start, end, steps, dt) -> np.ndarray:
    """torch's linspace: the first half counts up from ``start``, the second half down from ``end``.

    The arithmetic follows torch's CPU kernel so values agree bit for bit where feasible: float32 and
    float64 evaluate ``start + step * i`` as one fused multiply-add (reproduced by computing in a wider
    type and rounding once); integer dtypes truncate the endpoints first and step in double; half
    types round the step and each product to the half type.
    """
    if steps == 1:
        return np.array([start], dtype=np.float64)
    idx = np.arange(steps)
    if dt.category == 1:
        s, e = np.float64(int(start)), np.float64(int(end))
        step, wide = (e - s) / (steps - 1), np.longdouble
    elif dt in (_dt.float16, _dt.bfloat16):
        h = dt.np.type
        s, e = np.float32(h(start)), np.float32(h(end))
        step = np.float32(h((e - s) / np.float32(steps - 1)))
        up = s + (step * idx.astype(np.float32)).astype(dt.np).astype(np.float32)
        down = e - (step * (steps - 1 - idx).astype(np.float32)).astype(dt.np).astype(np.float32)
        return np.where(idx < steps // 2, up, down)
    else:
        narrow_t = dt.np.type
        s, e = narrow_t(start), narrow_t(end)
        step = (e - s) / narrow_t(steps - 1)
        wide = np.float64 if narrow_t is np.float32 else np.longdouble
    up = wide(s) + wide(step) * idx.astype(wide)
    down = wide(e) - wide(step) * (steps - 1 - idx).astype(wide)
    res = np.where(idx < steps // 2, up, down)
    return res.astype(np.float64 if dt.category == 1 else dt.np)


def _finish_range(vals, dt, requires_grad, device, out):
    if dt.category == 1:
        vals = np.trunc(vals)
    return _result(vals, dt, requires_grad, device, out)


def _spaced_args(op, start, end, steps, dtype, out):
    """linspace/logspace's checked arguments: the endpoints, ``steps`` >= 0 and a non-bool dtype."""
    start, end = _range_endpoints(start, end, op)
    steps = _as_int(steps, op, "steps", 3)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _dtype_for(dtype, out, _dt.get_default_dtype())
    if dt is _dt.bool:
        raise NotImplementedError(f"\"{op}_cpu\" not implemented for 'Bool'")
    return start, end, steps, dt


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (default dtype unless ``dtype``)."""
    start, end, steps, dt = _spaced_args("linspace", start, end, steps, dtype, out)
    vals = _alloc((steps,), dt.np, _linspace_values, start, end, steps, dt) if steps else np.zeros(0)
    return _finish_range(vals, dt, requires_grad, device, out)


def logspace(start, end, steps, base: float = 10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False) -> Tensor:
    """``base ** linspace(start, end, steps)``."""
    start, end, steps, dt = _spaced_args("logspace", start, end, steps, dtype, out)
    if steps == 0:
        vals = np.zeros(0)
    else:
        exps = _alloc((steps,), dt.np, _linspace_values, float(start), float(end), steps, _dt.float64)
        vals = np.power(float(base), exps.astype(np.float64))
    return _finish_range(vals, dt, requires_grad, device, out)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
        pin_memory=False) -> Tensor:
    """An ``n x m`` (default ``n x n``) matrix with ones on the diagonal."""
    n = _as_int(n, "eye", "n", 1)
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    m = n if m is None else _as_int(m, "eye", "m", 2)
    if m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    dt = _dtype_for(dtype, out, _dt.get_default_dtype())
    return _result(_alloc((n, m), dt.np, np.eye, n, m, 0, dt.np), dt, requires_grad, device, out)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False) -> Tensor:
    """An uninitialised tensor with the given sizes and strides (in elements)."""
    size = tuple(int(s) for s in size)
    stride = tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of strides ({len(stride)})")
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {fmt_shape(size)}")
    if builtins.any(st < 0 for st in stride):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={fmt_shape(size)} and "
                           f"strides={fmt_shape(stride)}")
    dt = dtype or _dt.get_default_dtype()
    dev = _check_device(device)
    numel = math.prod(size)
    storage = 0 if numel == 0 else 1 + builtins.sum((s - 1) * st for s, st in zip(size, stride))
    if dev.type == "opencl":            # the storage on the device, viewed with these strides
        from ..devices import dispatch, opencl
        dispatch.activate()
        block = opencl.empty((builtins.max(storage, 1),), dt.np, dev.index or 0, op="empty_strided")
        t = wrap(block.view(0, size, stride), dt)
        return t.requires_grad_(True) if requires_grad else t
    buf = _alloc((builtins.max(storage, 1),), dt.np, np.empty, builtins.max(storage, 1), dt.np)
    isz = buf.itemsize
    arr = np.lib.stride_tricks.as_strided(buf, shape=size, strides=tuple(st * isz for st in stride))
    t = wrap(arr, dt)
    if requires_grad:
        t.requires_grad_(True)
    return t


for _n, _f in [("linspace", linspace), ("logspace", logspace), ("eye", eye), ("empty_strided", empty_strided)]:
    attach(_n, _f, method=False)
