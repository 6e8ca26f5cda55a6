"""``Wishart(df, covariance_matrix | precision_matrix | scale_tril)``: the distribution of ``sum x x^T`` over
``df`` draws ``x ~ N(0, V)``, on positive-definite ``p x p`` matrices.

Draws use Bartlett's decomposition: ``X = (L A)(L A)^T`` with ``L`` the Cholesky factor of ``V`` and ``A``
lower triangular, ``A_ii = sqrt(chi2(df - i))`` and standard normals below the diagonal; the chi-squared
draws are reparameterised (Gamma's implicit gradients), so ``rsample`` is differentiable in ``df`` and ``V``.
"""
from __future__ import annotations

import math
import warnings

from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property, _standard_normal

__all__ = ["Wishart"]


def _mvdigamma(x, p: int):
    """The multivariate digamma ``sum_{i<p} digamma(x - i/2)``."""
    from .. import arange, special
    return special.digamma(x.unsqueeze(-1) - arange(p, dtype=x.dtype) / 2).sum(-1)


class Wishart(Distribution):
    """``Wishart(df, covariance_matrix=None, precision_matrix=None, scale_tril=None)``."""

    arg_constraints = {"covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(0)}
    support = constraints.positive_definite
    has_rsample = True

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        from .. import broadcast_shapes, as_tensor, linalg, get_default_dtype
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                                 "specified.")
        param = next(p for p in (scale_tril, covariance_matrix, precision_matrix) if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        dtype = param.dtype if param.dtype.is_floating_point else get_default_dtype()
        df = as_tensor(df, dtype=dtype)
        batch_shape = broadcast_shapes(param.shape[:-2], df.shape)
        event_shape = param.shape[-2:]
        p = event_shape[-1]
        if df.le(p - 1).any():
            shown = df.item() if df.numel() == 1 else df
            raise ValueError(f"Value of df={shown} expected to be greater than ndim - 1 = {p - 1}.")
        if df.lt(p).any():
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < ndim.")
        self.df = df.expand(batch_shape)
        full = tuple(batch_shape) + tuple(event_shape)
        if scale_tril is not None:
            self.scale_tril = param.expand(full)
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(full)
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self.precision_matrix = param.expand(full)
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self.arg_constraints = dict(type(self).arg_constraints, df=constraints.greater_than(p - 1))
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        full = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(full))
        new.arg_constraints = self.arg_constraints
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._full())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return L.matmul(L.mT).expand(self._full())

    @lazy_property
    def precision_matrix(self):
        from .. import eye, cholesky_solve
        L = self._unbroadcasted_scale_tril
        Id = eye(self._event_shape[-1], dtype=L.dtype)
        return cholesky_solve(Id, L).expand(self._full())

    @property
    def mean(self):
        return self.df[..., None, None] * self.covariance_matrix

    @property
    def mode(self):
        from .. import where, full_like
        factor = self.df - self._event_shape[-1] - 1
        factor = where(factor <= 0, full_like(factor, float("nan")), factor)
        return factor[..., None, None] * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        d = V.diagonal(dim1=-2, dim2=-1)
        return self.df[..., None, None] * (V.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def rsample(self, sample_shape=Size(), max_try_correction=None):
        """A Bartlett draw; a draw that is not numerically positive definite warns "Singular sample
        detected." and is redrawn up to ``max_try_correction`` (10) times, the other draws kept. (torch 2.13
        means to do the same but tests the opposite condition: it warns on every call and redraws the
        positive-definite draws, returning a singular one as it is; the intent is followed here.)"""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        bad = self._singular(sample)
        if bad.any():
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                new = self._bartlett_sampling(Size(bad[bad].shape))
                where = bad.clone()                    # (the index the graph keeps; bad changes next)
                sample[where] = new
                bad[where] = self._singular(new)
                if not bad.any():
                    break
        return sample

    def _singular(self, sample):
        """Per draw (over the sample dims): is any matrix of the batch not positive definite?"""
        bad = ~self.support.check(sample)
        nb = len(self._batch_shape)
        return bad.amax(tuple(range(-nb, 0))) if nb else bad

    def _bartlett_sampling(self, sample_shape):
        from .. import tril_indices, arange, finfo
        from .chi2 import Chi2
        p = self._event_shape[-1]
        chi2 = Chi2(self.df.unsqueeze(-1) - arange(p, dtype=self.df.dtype))
        diag = chi2.rsample(sample_shape).sqrt().clamp(min=finfo(self.df.dtype).eps)
        A = diag.diag_embed(dim1=-2, dim2=-1)
        i, j = tril_indices(p, p, offset=-1)
        shape = tuple(self._extended_shape(sample_shape))
        noise = _standard_normal(shape[:-2] + (len(i),), self.df.dtype)
        A = _put_below(A, i, j, noise)
        chol = self._unbroadcasted_scale_tril.matmul(A)
        return chol.matmul(chol.mT)

    def log_prob(self, value):
        from .. import linalg, cholesky_solve, mvlgamma
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        half_logdet_v = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        tr = cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * math.log(2) / 2 + half_logdet_v) - mvlgamma(nu / 2, p=p)
                + (nu - p - 1) / 2 * linalg.slogdet(value).logabsdet - tr / 2)

    def entropy(self):
        from .. import mvlgamma
        nu = self.df
        p = self._event_shape[-1]
        half_logdet_v = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * half_logdet_v + p * (p + 1) * math.log(2) / 2 + mvlgamma(nu / 2, p=p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)


def _put_below(A, i, j, noise):
    """``A`` with ``noise[..., k]`` written at ``(i[k], j[k])`` of every matrix (differentiable in ``A``)."""
    from .. import zeros
    p = A.shape[-1]
    lower = zeros(tuple(noise.shape[:-1]) + (p * p,), dtype=A.dtype)
    lower[..., i * p + j] = noise
    return A + lower.reshape(tuple(noise.shape[:-1]) + (p, p))
