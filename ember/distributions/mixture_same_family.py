"""``MixtureSameFamily`` (torch.distributions.mixture_same_family): a mixture whose components are one batched distribution, weighted by a
Categorical over the rightmost batch dim (mixture-density networks, Gaussian mixtures)."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .categorical import Categorical
from .distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """``MixtureSameFamily(Categorical(logits=w), Normal(mu, sigma))``: component ``k`` of the last batch
    dim of ``component_distribution`` is chosen with probability ``w[..., k]``."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        mdbs = mixture_distribution.batch_shape
        cdbs = component_distribution.batch_shape[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not compatible with "
                                 f"`component_distribution.batch_shape`({cdbs})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, component_distribution.event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = Size(batch_shape)
        component = self._component_distribution.expand(batch_shape + (self._num_component,))
        mixture = self._mixture_distribution.expand(batch_shape)
        return type(self)(mixture, component, validate_args=False)

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    def _pad_mixture(self, t):
        """Mixture weights ``(..., K)`` shaped to broadcast against component values ``(..., K, *event)``."""
        return t.reshape(t.shape + (1,) * self._event_ndims)

    @property
    def mean(self):
        probs = self._pad_mixture(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture(self.mixture_distribution.probs)
        dim = -1 - self._event_ndims
        mean_cond_var = (probs * self.component_distribution.variance).sum(dim)
        var_cond_mean = (probs * (self.component_distribution.mean - self._pad(self.mean)).pow(2)).sum(dim)
        return mean_cond_var + var_cond_mean

    def _pad(self, x):
        """A value ``(*sample, *batch, *event)`` with a component dim inserted before the event dims."""
        return x.unsqueeze(-1 - self._event_ndims)

    def log_prob(self, value):
        from .. import logsumexp
        if self._validate_args:
            self._validate_sample(value)
        value = self._pad(value)
        log_prob_x = self.component_distribution.log_prob(value)       # (*sample, *batch, K)
        log_mix_prob = self.mixture_distribution.logits.log_softmax(-1)
        return logsumexp(log_prob_x + log_mix_prob, dim=-1)

    def cdf(self, x):
        x = self._pad(x)
        cdf_x = self.component_distribution.cdf(x)
        return (cdf_x * self.mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape=Size()):
        from ..autograd.grad_mode import no_grad
        from .. import gather
        with no_grad():
            sample_shape = Size(sample_shape)
            n_sample, n_batch = len(sample_shape), len(self.batch_shape)
            mix_sample = self.mixture_distribution.sample(sample_shape)          # (*sample, *batch)
            comp_samples = self.component_distribution.sample(sample_shape)     # (*sample, *batch, K, *event)
            es = self.event_shape
            index = mix_sample.reshape(tuple(mix_sample.shape) + (1,) * (len(es) + 1))
            index = index.expand(tuple(mix_sample.shape) + (1,) + tuple(es))
            picked = gather(comp_samples, n_sample + n_batch, index)
            return picked.squeeze(n_sample + n_batch)

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self.mixture_distribution},\n  {self.component_distribution})")
