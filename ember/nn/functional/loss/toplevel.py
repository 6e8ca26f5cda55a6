"""torch's top-level loss functions (``torch.kl_div``, ``torch.binary_cross_entropy_with_logits``, ...):
the ATen forms of the functional losses, whose ``reduction`` is an int (1 mean, 2 sum, any other value
none, as ATen's reduction step) and which take no ``size_average``/``reduce``. Left out, ``reduction``
is none: torch's bindings of these forms return the unreduced loss by default (unlike ``F``'s 'mean'). Each checks its arguments
as torch's parser does, then calls ``ember.nn.functional``'s loss (looked up at call time, so autocast's
wrappers apply). Installed on ``ember`` by the loss package."""
from __future__ import annotations

import operator
import sys

__all__ = ["kl_div", "binary_cross_entropy_with_logits", "cosine_embedding_loss", "hinge_embedding_loss",
           "margin_ranking_loss", "poisson_nll_loss", "triplet_margin_loss", "ctc_loss"]


def _F():
    return sys.modules["ember.nn.functional"]


def _red(op: str, reduction) -> str:
    try:
        r = operator.index(reduction)
    except TypeError:
        raise TypeError(f"{op}(): argument 'reduction' must be int, not {type(reduction).__name__}") from None
    return {1: "mean", 2: "sum"}.get(r, "none")


def kl_div(input, target, reduction=0, *, log_target: bool = False):
    return _F().kl_div(input, target, reduction=_red("kl_div", reduction), log_target=log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    return _F().binary_cross_entropy_with_logits(input, target, weight, reduction=_red(
        "binary_cross_entropy_with_logits", reduction), pos_weight=pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_red("cosine_embedding_loss", reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return _F().hinge_embedding_loss(input, target, margin, reduction=_red("hinge_embedding_loss", reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_red("margin_ranking_loss", reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_red("poisson_nll_loss", reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, reduction=0):
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_red("triplet_margin_loss", reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0, zero_infinity=False):
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         reduction=_red("ctc_loss", reduction), zero_infinity=zero_infinity)


def install(namespace: dict) -> None:
    """Put the top-level forms on ``namespace`` (ember's) where nothing of that name is there yet."""
    mod = sys.modules[__name__]
    for name in __all__:
        namespace.setdefault(name, getattr(mod, name))
