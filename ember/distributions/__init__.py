"""ember.distributions: probability distributions with torch.distributions' API and formulas.

Available: Normal, Laplace, Categorical, OneHotCategorical, Bernoulli, Geometric, Uniform, Exponential,
Independent, MultivariateNormal, Gamma, Chi2, Beta, Dirichlet, MixtureSameFamily, TransformedDistribution
with ``transforms`` (Exp, Affine, Sigmoid, Tanh, Softplus, Power, Abs, Compose), LogNormal, Poisson, Binomial, StudentT, Cauchy, Gumbel, HalfNormal;
``kl_divergence`` with ``register_kl`` (``kl.py``, ``kl_families.py``, ``kl_cross.py``: the pairs torch registers among these
families and across the continuous ones); ``constraints``. ``rsample`` of Gamma, Beta,
Dirichlet, Chi2 and StudentT is differentiable in the concentrations (implicit reparameterisation,
``_incomplete_gamma.py``). Also RelaxedBernoulli / RelaxedOneHotCategorical, Weibull, Pareto, HalfCauchy, Multinomial, NegativeBinomial,
InverseGamma, Kumaraswamy, GeneralizedPareto, LogisticNormal, OneHotCategoricalStraightThrough, FisherSnedecor, ContinuousBernoulli, LowRankMultivariateNormal, VonMises, Wishart and LKJCholesky (with ``constraints.corr_cholesky``).
"""
from . import constraints  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .exp_family import ExponentialFamily  # noqa: F401
from .normal import Normal  # noqa: F401
from .laplace import Laplace  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough  # noqa: F401
from .bernoulli import Bernoulli  # noqa: F401
from .geometric import Geometric  # noqa: F401
from .uniform import Uniform  # noqa: F401
from .exponential import Exponential  # noqa: F401
from .independent import Independent  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .lowrank_multivariate_normal import LowRankMultivariateNormal  # noqa: F401
from .von_mises import VonMises  # noqa: F401
from .wishart import Wishart  # noqa: F401
from .lkj_cholesky import LKJCholesky  # noqa: F401
from .gamma import Gamma  # noqa: F401
from .chi2 import Chi2  # noqa: F401
from .dirichlet import Dirichlet  # noqa: F401
from .beta import Beta  # noqa: F401
from .mixture_same_family import MixtureSameFamily  # noqa: F401
from .poisson import Poisson  # noqa: F401
from .binomial import Binomial  # noqa: F401
from .studentT import StudentT  # noqa: F401
from .cauchy import Cauchy  # noqa: F401
from .gumbel import Gumbel  # noqa: F401
from .half_normal import HalfNormal  # noqa: F401
from . import transforms  # noqa: F401
from .transforms import (Transform, ComposeTransform, ExpTransform, AffineTransform,  # noqa: F401
                         SigmoidTransform, TanhTransform, SoftplusTransform, PowerTransform, AbsTransform,
                         identity_transform, SoftmaxTransform, StickBreakingTransform, IndependentTransform,
                         ReshapeTransform, LowerCholeskyTransform, PositiveDefiniteTransform)
from .transforms_joint import (CatTransform, StackTransform, CorrCholeskyTransform,  # noqa: F401
                               CumulativeDistributionTransform)
from . import constraint_registry  # noqa: F401,E402
from .constraint_registry import biject_to, transform_to  # noqa: F401,E402
from .transformed_distribution import TransformedDistribution  # noqa: F401
from .log_normal import LogNormal  # noqa: F401
from .relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli  # noqa: F401
from .relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical  # noqa: F401
from .weibull import Weibull  # noqa: F401
from .pareto import Pareto  # noqa: F401
from .half_cauchy import HalfCauchy  # noqa: F401
from .multinomial import Multinomial  # noqa: F401
from .negative_binomial import NegativeBinomial  # noqa: F401
from .inverse_gamma import InverseGamma  # noqa: F401
from .fishersnedecor import FisherSnedecor  # noqa: F401
from .continuous_bernoulli import ContinuousBernoulli  # noqa: F401
from .kumaraswamy import Kumaraswamy  # noqa: F401
from .generalized_pareto import GeneralizedPareto  # noqa: F401
from .logistic_normal import LogisticNormal  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from . import kl  # noqa: F401,E402  (torch.distributions.kl)
from . import kl_families  # noqa: F401,E402  (registers the other families' KL divergences)
from . import kl_cross  # noqa: F401,E402  (registers the KL divergences across families)

__all__ = ["Distribution", "Normal", "Laplace", "Categorical", "OneHotCategorical", "Bernoulli", "Geometric", "Uniform",
           "Exponential", "Independent", "MultivariateNormal", "Gamma", "Chi2", "Beta", "Dirichlet",
           "MixtureSameFamily", "Poisson", "Binomial", "StudentT", "Cauchy", "Gumbel", "HalfNormal",
           "TransformedDistribution", "LogNormal", "transforms", "Transform", "ComposeTransform",
           "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform", "SoftplusTransform",
           "PowerTransform", "AbsTransform", "identity_transform", "kl_divergence", "register_kl", "constraints",
           "LogitRelaxedBernoulli", "RelaxedBernoulli", "ExpRelaxedCategorical", "RelaxedOneHotCategorical",
           "Weibull", "Pareto", "HalfCauchy", "Multinomial", "NegativeBinomial", "SoftmaxTransform",
           "StickBreakingTransform", "IndependentTransform", "biject_to", "transform_to", "LowRankMultivariateNormal",
           "VonMises", "Wishart", "LKJCholesky", "InverseGamma", "Kumaraswamy", "LogisticNormal",
           "OneHotCategoricalStraightThrough", "FisherSnedecor", "ContinuousBernoulli", "ReshapeTransform",
           "LowerCholeskyTransform", "PositiveDefiniteTransform", "CatTransform", "StackTransform",
           "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExponentialFamily", "GeneralizedPareto"]
