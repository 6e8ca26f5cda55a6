"""``LowRankMultivariateNormal(loc, cov_factor, cov_diag)``: a normal whose covariance is
``W W^T + diag(D)`` with ``W`` of shape ``n x r`` (r small). Its log density and entropy use the r x r
"capacitance" ``C = I + W^T D^-1 W`` (Woodbury's identity for the inverse, the matrix determinant lemma
``log|W W^T + D| = log|C| + sum(log D)``), so nothing n x n is factorised."""
from __future__ import annotations

import math

from ..tensor import Size
from . import constraints
from .distribution import Distribution, _CenteredAtLoc
from .utils import lazy_property, _standard_normal

__all__ = ["LowRankMultivariateNormal"]


def _capacitance_tril(W, D):
    """Cholesky factor of ``I + W^T D^-1 W``."""
    from .. import linalg, eye
    r = W.size(-1)
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    K = Wt_Dinv.matmul(W).contiguous()
    return linalg.cholesky(K + eye(r, dtype=W.dtype))


class LowRankMultivariateNormal(_CenteredAtLoc, Distribution):
    """``LowRankMultivariateNormal(loc, cov_factor, cov_diag)``: covariance ``cov_factor @ cov_factor.mT +
    diag(cov_diag)``."""

    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        from .. import broadcast_shapes
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        loc_ = loc.unsqueeze(-1)
        diag_ = cov_diag.unsqueeze(-1)
        try:
            batch = broadcast_shapes(loc_.shape, cov_factor.shape, diag_.shape)
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                             f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}") from e
        batch_shape = Size(batch[:-2])
        self.loc = loc_.expand(tuple(batch[:-1]) + (1,))[..., 0]
        self.cov_diag = diag_.expand(tuple(batch[:-1]) + (1,))[..., 0]
        self.cov_factor = cov_factor.expand(tuple(batch[:-1]) + (cov_factor.size(-1),))
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(shape)
        new.cov_diag = self.cov_diag.expand(shape)
        new.cov_factor = self.cov_factor.expand(shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def variance(self):
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (W.pow(2).sum(-1) + D).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        from .. import linalg
        return linalg.cholesky(self.covariance_matrix)

    @lazy_property
    def covariance_matrix(self):
        from .. import diag_embed
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        cov = W.matmul(W.mT) + diag_embed(D)
        return cov.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        # Woodbury: D^-1 - D^-1 W C^-1 W^T D^-1, with C = L L^T the capacitance
        from .. import linalg, diag_embed
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        Wt_Dinv = W.mT / D.unsqueeze(-2)
        A = linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        prec = diag_embed(D.reciprocal()) - A.mT.matmul(A)
        return prec.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        W_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_W = _standard_normal(W_shape, self.loc.dtype)
        eps_D = _standard_normal(shape, self.loc.dtype)
        W = self._unbroadcasted_cov_factor
        return self.loc + W.matmul(eps_W.unsqueeze(-1)).squeeze(-1) + self._unbroadcasted_cov_diag.sqrt() * eps_D

    def _log_det(self):
        L = self._capacitance_tril
        return 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1) + self._unbroadcasted_cov_diag.log().sum(-1)

    def log_prob(self, value):
        from .. import linalg
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        # x^T (W W^T + D)^-1 x = x^T D^-1 x - |L^-1 W^T D^-1 x|^2
        Wt_Dinv_x = (W.mT / D.unsqueeze(-2)).matmul(diff.unsqueeze(-1))
        L = self._capacitance_tril
        batch = Wt_Dinv_x.shape[:-2]
        sol = linalg.solve_triangular(L.expand(tuple(batch) + tuple(L.shape[-2:])), Wt_Dinv_x, upper=False)
        M = (diff.pow(2) / D).sum(-1) - sol.pow(2).sum((-2, -1))
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M + self._log_det())

    def entropy(self):
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))


def _as_full(d):
    """``d`` as a MultivariateNormal with its full covariance (for the KL divergences)."""
    from .multivariate_normal import MultivariateNormal
    if isinstance(d, MultivariateNormal):
        return d
    return MultivariateNormal(d.loc, scale_tril=d.scale_tril)


def _register_kl():
    from .kl import register_kl, kl_divergence
    from .multivariate_normal import MultivariateNormal

    def kl_via_full(p, q):
        if p.event_shape != q.event_shape:
            raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event "
                             "shapes cannot be computed")
        return kl_divergence(_as_full(p), _as_full(q))
    for pair in ((LowRankMultivariateNormal, LowRankMultivariateNormal),
                 (LowRankMultivariateNormal, MultivariateNormal), (MultivariateNormal, LowRankMultivariateNormal)):
        register_kl(*pair)(kl_via_full)


_register_kl()
