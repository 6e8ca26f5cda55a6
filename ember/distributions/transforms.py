"""Bijective transforms (torch.distributions.transforms): ``y = t(x)``, ``x = t.inv(y)`` and
``t.log_abs_det_jacobian(x, y)``, used by ``TransformedDistribution`` (LogNormal, tanh-squashed
policies, normalizing flows).

Here: ``Transform``, ``ComposeTransform``, ``ExpTransform``, ``AffineTransform``, ``SigmoidTransform``,
``TanhTransform``, ``SoftplusTransform``, ``PowerTransform``, ``AbsTransform``, ``identity_transform``.
"""
from __future__ import annotations

import math
import numbers

from . import constraints
from .utils import _sum_rightmost

__all__ = ["Transform", "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform",
           "TanhTransform", "SoftplusTransform", "PowerTransform", "AbsTransform", "identity_transform",
           "SoftmaxTransform", "StickBreakingTransform", "IndependentTransform"]


class Transform:
    """A map with a computable inverse and log |det J|; subclasses define ``_call``, ``_inverse`` and
    ``log_abs_det_jacobian``. ``cache_size=1`` remembers the last (x, y) pair so ``inv(t(x))`` returns
    ``x`` itself."""

    bijective = False
    domain = constraints.real
    codomain = constraints.real
    sign = 1

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = None, None
        self._inv = None

    @property
    def event_dim(self) -> int:
        return max(self.domain.event_dim, self.codomain.event_dim)

    # equality as torch's (kl_divergence of two TransformedDistributions compares their transforms):
    # parameterless maps are equal by class, parameterised ones by their parameters, others by identity
    def __eq__(self, other):
        return self._same(other)

    def __ne__(self, other):
        return not self._same(other)

    __hash__ = object.__hash__

    def _same(self, other) -> bool:
        if type(self) in _BY_CLASS:
            return isinstance(other, type(self))
        return self is other

    def with_cache(self, cache_size=1):
        """This transform with ``cache_size`` (a parameterless transform is rebuilt; others define it)."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        if hasattr(type(self), "_rebuild"):
            return self._rebuild(cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = _InverseTransform(self)
            import weakref
            self._inv = weakref.ref(inv)
        return inv

    def __call__(self, x):
        return self._through_cache(x, self._call, forward=True)

    def _inv_call(self, y):
        return self._through_cache(y, self._inverse, forward=False)

    def _through_cache(self, value, fn, forward: bool):
        """``fn(value)``, or with ``cache_size=1`` the other half of the last (x, y) pair when ``value`` is
        the very tensor seen last on this side."""
        if self._cache_size == 0:
            return fn(value)
        x_old, y_old = self._cached_x_y
        if value is (x_old if forward else y_old):
            return y_old if forward else x_old
        out = fn(value)
        self._cached_x_y = (value, out) if forward else (out, value)
        return out

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} does not define the forward map")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} does not define an inverse")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"{type(self).__name__} does not define log_abs_det_jacobian")

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform (``t.inv``): swaps the forward and inverse maps."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def inv(self):
        return self._inv

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)

    def __call__(self, x):
        return self._inv._inv_call(x)

    def with_cache(self, cache_size=1):
        return self._inv.with_cache(cache_size).inv

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    """Apply ``parts`` in order; the log-det is the sum of the parts' log-dets (each summed over the
    event dims it does not own)."""

    def __init__(self, parts, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    @property
    def domain(self):
        return self.parts[0].domain if self.parts else constraints.real

    @property
    def codomain(self):
        return self.parts[-1].codomain if self.parts else constraints.real

    @property
    def event_dim(self):
        return max([p.event_dim for p in self.parts], default=0)

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    def forward_shape(self, shape):
        for p in self.parts:
            shape = p.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return shape

    @property
    def sign(self):
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    @property
    def inv(self):
        return ComposeTransform([p.inv for p in reversed(self.parts)])

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            from ..ops.creation import zeros_like
            return zeros_like(x)
        event_dim = self.event_dim
        total = 0.0
        for part in self.parts:
            y_part = part(x)
            term = part.log_abs_det_jacobian(x, y_part)
            total = total + _sum_rightmost(term, event_dim - part.event_dim)
            x = y_part
        return total

    def __repr__(self):
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class ExpTransform(Transform):
    """``y = exp(x)``."""
    codomain = constraints.positive
    bijective = True

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class AffineTransform(Transform):
    """``y = loc + scale * x`` (``event_dim`` dims counted as one event)."""
    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.independent(constraints.real, self._event_dim) if self._event_dim else constraints.real

    codomain = domain

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        from ..ops.creation import full_like
        scale = self.scale
        if isinstance(scale, numbers.Real):
            result = full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
            if tuple(result.shape) != tuple(x.shape):
                result = result.expand(x.shape)
        return _sum_rightmost(result, self._event_dim)


class SigmoidTransform(Transform):
    """``y = sigmoid(x)``."""
    codomain = constraints.unit_interval
    bijective = True

    def _call(self, x):
        from .utils import clamp_probs
        return clamp_probs(x.sigmoid())

    def _inverse(self, y):
        from .utils import clamp_probs
        y = clamp_probs(y)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        from ..nn.functional import softplus
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    """``y = tanh(x)``; the log-det uses the stable form ``2 (log 2 - x - softplus(-2x))``."""
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * (y.log1p() - (-y).log1p())

    def log_abs_det_jacobian(self, x, y):
        from ..nn.functional import softplus
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``."""
    codomain = constraints.positive
    bijective = True

    def _call(self, x):
        from ..nn.functional import softplus
        return softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        from ..nn.functional import softplus
        return -softplus(-x)


class PowerTransform(Transform):
    """``y = x ** exponent`` on positive numbers."""
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    @property
    def sign(self):
        """Decreasing for a negative exponent (so a TransformedDistribution's cdf flips)."""
        e = self.exponent
        return (1 if e > 0 else -1 if e < 0 else 0) if isinstance(e, numbers.Real) else e.sign()

    def log_abs_det_jacobian(self, x, y):
        e = self.exponent
        log_e = math.log(abs(e)) if isinstance(e, numbers.Real) else e.abs().log()
        return log_e + (y / x).log()


class AbsTransform(Transform):
    """``y = |x|`` (not bijective: the inverse picks the positive root)."""
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


def _param_equal(a, b) -> bool:
    import numbers
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return a == b
    from .. import as_tensor
    return bool((as_tensor(a) == as_tensor(b)).all())


def _affine_same(self, other) -> bool:
    return (isinstance(other, AffineTransform) and _param_equal(self.loc, other.loc)
            and _param_equal(self.scale, other.scale))


def _power_same(self, other) -> bool:
    return isinstance(other, PowerTransform) and _param_equal(self.exponent, other.exponent)


def _compose_same(self, other) -> bool:
    return isinstance(other, ComposeTransform) and self.parts == other.parts


class SoftmaxTransform(Transform):
    """``y = softmax(x)`` over the last dim (onto the simplex; not bijective, ``inv`` is ``log``)."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        probs = (x - x.max(-1, keepdim=True)[0]).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()


def _clipped_sigmoid(x):
    from .. import dtypes as _dt
    fi = _dt.finfo(x.dtype)
    return x.sigmoid().clamp(min=fi.tiny, max=1.0 - fi.eps)


class StickBreakingTransform(Transform):
    """The stick-breaking bijection from R^(K-1) onto the K-simplex (the ``biject_to(simplex)`` map)."""
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    @staticmethod
    def _offset_log(n, like):
        from ..ops.creation import ones
        return (n + 1 - ones(n, dtype=like.dtype).cumsum(-1)).log()

    def _call(self, x):
        from ..nn.functional import pad
        z = _clipped_sigmoid(x - self._offset_log(x.shape[-1], x))
        z_cumprod = (1 - z).cumprod(-1)
        return pad(z, (0, 1), value=1) * pad(z_cumprod, (1, 0), value=1)

    def _inverse(self, y):
        from .. import dtypes as _dt
        y_crop = y[..., :-1]
        rest = (1 - y_crop.cumsum(-1)).clamp(min=_dt.finfo(y.dtype).tiny)
        return y_crop.log() - rest.log() + self._offset_log(y_crop.shape[-1], y)

    def log_abs_det_jacobian(self, x, y):
        from ..nn.functional import logsigmoid
        x = x - self._offset_log(x.shape[-1], x)
        return (-x + logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class IndependentTransform(Transform):
    """``base_transform`` with ``reinterpreted_batch_ndims`` more rightmost dims counted as one event."""

    def __init__(self, base_transform, reinterpreted_batch_ndims: int, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


_BY_CLASS = (ExpTransform, SigmoidTransform, TanhTransform, SoftplusTransform, AbsTransform, SoftmaxTransform,
             StickBreakingTransform)
# with_cache of the parameterised transforms: the same parameters, another cache size
ComposeTransform._rebuild = lambda self, n: ComposeTransform(self.parts, cache_size=n)
AffineTransform._rebuild = lambda self, n: AffineTransform(self.loc, self.scale, self._event_dim, cache_size=n)
PowerTransform._rebuild = lambda self, n: PowerTransform(self.exponent, cache_size=n)
IndependentTransform._rebuild = lambda self, n: IndependentTransform(self.base_transform,
                                                                     self.reinterpreted_batch_ndims, cache_size=n)
AffineTransform._same = _affine_same
PowerTransform._same = _power_same
ComposeTransform._same = _compose_same



# ---- shape and matrix transforms: ReshapeTransform (event reshape, log-det 0), LowerCholeskyTransform
# (unconstrained square -> lower triangular with a positive diagonal, by exp of the diagonal) and
# PositiveDefiniteTransform (that factor times its transpose) ----------------------------------------------
__all__ += ["ReshapeTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform"]


class ReshapeTransform(Transform):
    """Reshape the rightmost ``in_shape`` dims into ``out_shape`` (same number of elements)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        from ..tensor import Size
        self.in_shape = Size(in_shape)
        self.out_shape = Size(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else ReshapeTransform(self.in_shape, self.out_shape,
                                                                            cache_size=cache_size)

    def _call(self, x):
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch + tuple(self.out_shape))

    def _inverse(self, y):
        batch = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]))

    def _moved(self, shape, src, dst):
        from ..tensor import Size
        if len(shape) < len(src):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(src)
        if tuple(shape[cut:]) != tuple(src):
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} but got {src}")
        return Size(tuple(shape[:cut]) + tuple(dst))

    def forward_shape(self, shape):
        return self._moved(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._moved(shape, self.out_shape, self.in_shape)


class LowerCholeskyTransform(Transform):
    """Square matrix -> its strict lower triangle plus ``exp`` of its diagonal."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _same(self, other) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Square matrix -> ``L L^T`` with ``L`` its LowerCholeskyTransform."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _same(self, other) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    def _call(self, x):
        L = LowerCholeskyTransform()(x)
        return L @ L.mT

    def _inverse(self, y):
        from .. import linalg
        return LowerCholeskyTransform().inv(linalg.cholesky(y))


def __getattr__(name):
    # the joining transforms live in transforms_joint.py (they import this module) and are found here too,
    # at torch's path torch.distributions.transforms.<Name>
    from . import transforms_joint
    if name in transforms_joint.__all__:
        return getattr(transforms_joint, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
