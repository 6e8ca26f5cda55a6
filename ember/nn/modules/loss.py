"""Loss layers (torch.nn's): modules over ``ember.nn.functional``'s losses.

``size_average``/``reduce`` (deprecated) map to ``reduction`` with torch's warning; class weights and
``pos_weight`` are buffers, so they appear in ``state_dict`` and follow ``.to(dtype)``.
"""
from __future__ import annotations

import warnings

from .module import Module
from .. import functional as F
from ..functional.loss import _legacy_reduction

__all__ = ["L1Loss", "NLLLoss", "NLLLoss2d", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss", "MSELoss", "BCELoss",
           "BCEWithLogitsLoss", "HingeEmbeddingLoss", "MultiLabelMarginLoss", "SmoothL1Loss", "HuberLoss",
           "SoftMarginLoss", "CrossEntropyLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss",
           "MarginRankingLoss", "MultiMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss"]


class _Loss(Module):
    """A loss layer. Most forwards call the functional form named ``_functional`` (looked up in
    ``nn.functional`` at each call) on (input, target) with ``reduction`` and the options read from the
    layer's attributes named in ``_options``; a layer with other inputs defines its own ``forward``."""

    _functional = ""
    _options: tuple = ()

    def forward(self, input, target):
        return getattr(F, self._functional)(input, target, reduction=self.reduction,
                                            **{k: getattr(self, k) for k in self._options})

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            self.reduction = _legacy_reduction(size_average, reduce)
        else:
            self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """Mean absolute error."""

    __constants__ = ["reduction"]
    _functional = "l1_loss"


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of class-index targets given log-probabilities."""

    __constants__ = ["ignore_index", "reduction"]
    _functional = "nll_loss"
    _options = ("weight", "ignore_index")

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index


class NLLLoss2d(NLLLoss):
    """Deprecated alias of :class:`NLLLoss`."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean") -> None:
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and "
                      "see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more details.",
                      FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class PoissonNLLLoss(_Loss):
    """Poisson negative log likelihood."""

    __constants__ = ["log_input", "full", "eps", "reduction"]

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None, eps: float = 1e-8,
                 reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log likelihood with predicted variances."""

    __constants__ = ["full", "eps", "reduction"]

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of log-probabilities ``input`` from ``target``."""

    __constants__ = ["reduction"]
    _functional = "kl_div"
    _options = ("log_target",)

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target


class MSELoss(_Loss):
    """Mean squared error."""

    __constants__ = ["reduction"]
    _functional = "mse_loss"


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities."""

    __constants__ = ["reduction"]
    _functional = "binary_cross_entropy"
    _options = ("weight",)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid + binary cross entropy, numerically stable; ``pos_weight`` weighs positive examples."""

    _functional = "binary_cross_entropy_with_logits"
    _options = ("weight", "pos_weight")

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight=None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)


class HingeEmbeddingLoss(_Loss):
    """x for target 1, max(0, margin - x) for target -1."""

    __constants__ = ["margin", "reduction"]
    _functional = "hinge_embedding_loss"
    _options = ("margin",)

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss over class-index targets (ended by -1)."""

    __constants__ = ["reduction"]
    _functional = "multilabel_margin_loss"


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta``, linear above."""

    __constants__ = ["reduction"]
    _functional = "smooth_l1_loss"
    _options = ("beta",)

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta


class HuberLoss(_Loss):
    """Quadratic below ``delta``, linear (slope ``delta``) above."""

    __constants__ = ["reduction", "delta"]
    _functional = "huber_loss"
    _options = ("delta",)

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        if not isinstance(delta, (float, int)):
            raise TypeError(f"delta must be a float or int, got: {type(delta)}")
        super().__init__(reduction=reduction)
        self.delta = delta


class SoftMarginLoss(_Loss):
    """log(1 + exp(-target * input))."""

    __constants__ = ["reduction"]
    _functional = "soft_margin_loss"


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits and class indices or class probabilities."""

    __constants__ = ["ignore_index", "reduction", "label_smoothing"]
    _functional = "cross_entropy"
    _options = ("weight", "ignore_index", "label_smoothing")

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per-label logistic loss averaged over classes."""

    __constants__ = ["reduction"]
    _functional = "multilabel_soft_margin_loss"
    _options = ("weight",)


class _PairMarginLoss(_Loss):
    """A loss of two inputs and a +1/-1 ``target`` with a ``margin``; ``_functional`` names its functional
    form."""

    __constants__ = ["margin", "reduction"]

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return getattr(F, self._functional)(input1, input2, target, margin=self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_PairMarginLoss):
    """1 - cos for similar pairs, max(0, cos - margin) for dissimilar ones."""

    _functional = "cosine_embedding_loss"


class MarginRankingLoss(_PairMarginLoss):
    """max(0, -target (x1 - x2) + margin)."""

    _functional = "margin_ranking_loss"


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss."""

    __constants__ = ["p", "margin", "reduction"]
    _functional = "multi_margin_loss"
    _options = ("p", "margin", "weight")

    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p != 1 and p != 2:
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.dim()}D instead")
        self.p = p
        self.margin = margin


class TripletMarginLoss(_Loss):
    """max(d(a, p) - d(a, n) + margin, 0) with the p-norm distance."""

    __constants__ = ["margin", "p", "eps", "swap", "reduction"]

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """Triplet loss with a custom distance function."""

    __constants__ = ["margin", "swap", "reduction"]

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        if distance_function is None:
            try:    # torch's default is a PairwiseDistance module (shown in repr)
                from .distance import PairwiseDistance
                distance_function = PairwiseDistance()
            except ImportError:
                pass    # the functional form then falls back to the p=2 pairwise distance
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                   distance_function=self.distance_function, margin=self.margin,
                                                   swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    """Connectionist Temporal Classification loss (see ``F.ctc_loss``)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)

