"""ember.distributions: probability distributions with torch.distributions' API and formulas.

Available: Normal, Laplace, Categorical, OneHotCategorical, Bernoulli, Uniform, Exponential,
Independent, MultivariateNormal; ``kl_divergence`` with ``register_kl`` for their same-type pairs;
``constraints``. Not yet here: Beta, Gamma, Dirichlet, Binomial, Poisson, transformed distributions
(``TransformedDistribution``, ``transforms``), mixtures and relaxed distributions.
"""
from . import constraints  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .normal import Normal  # noqa: F401
from .laplace import Laplace  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .one_hot_categorical import OneHotCategorical  # noqa: F401
from .bernoulli import Bernoulli  # noqa: F401
from .uniform import Uniform  # noqa: F401
from .exponential import Exponential  # noqa: F401
from .independent import Independent  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from . import kl  # noqa: F401,E402  (torch.distributions.kl)

__all__ = ["Distribution", "Normal", "Laplace", "Categorical", "OneHotCategorical", "Bernoulli", "Uniform",
           "Exponential", "Independent", "MultivariateNormal", "kl_divergence", "register_kl", "constraints"]
