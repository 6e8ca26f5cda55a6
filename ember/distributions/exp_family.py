"""``ExponentialFamily`` (torch.distributions.exp_family): the base of the distributions whose density is
``p(x) = h(x) exp(<theta, t(x)> - F(theta))``. A subclass gives its natural parameters ``theta``
(``_natural_params``), the log-normalizer ``F`` (``_log_normalizer(*theta)``) and ``E[log h(x)]``
(``_mean_carrier_measure``); then ``entropy`` and the KL divergence between two members of one family
(the Bregman divergence of ``F``) come from autograd through ``F``.
"""
from __future__ import annotations

from .distribution import Distribution
from .utils import _sum_rightmost

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class: see the module docstring."""

    @property
    def _natural_params(self):
        raise NotImplementedError(f"{type(self).__name__} does not define _natural_params")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__} does not define _log_normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(f"{type(self).__name__} does not define _mean_carrier_measure")

    def entropy(self):
        """``F(theta) - <theta, grad F(theta)> - E[log h(x)]``, by autograd through ``F``."""
        from ..autograd import grad
        from ..autograd.grad_mode import enable_grad
        result = -self._mean_carrier_measure
        with enable_grad():
            params = [p.detach().requires_grad_() for p in self._natural_params]
            lg = self._log_normalizer(*params)
            grads = grad(lg.sum(), params, create_graph=True)
        result = result + lg
        for p, g in zip(params, grads):
            result = result - (p * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result


def _kl_bregman(p, q):
    """KL(p || q) for two members of one exponential family: ``F(theta_q) - F(theta_p) -
    <theta_q - theta_p, grad F(theta_p)>``."""
    from ..autograd import grad
    from ..autograd.grad_mode import enable_grad
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  "computed using Bregman divergences")
    with enable_grad():
        p_params = [t.detach().requires_grad_() for t in p._natural_params]
        lg = p._log_normalizer(*p_params)
        grads = grad(lg.sum(), p_params, create_graph=True)
    q_params = q._natural_params
    result = q._log_normalizer(*q_params) - lg
    for pn, qn, g in zip(p_params, q_params, grads):
        result = result - _sum_rightmost((qn - pn) * g, len(q.event_shape))
    return result
