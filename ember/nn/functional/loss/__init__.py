"""torch.nn.functional's losses, one file per family.

- ``classification``: ``nll_loss`` and ``cross_entropy`` with class-index targets (fused ops);
- ``binary``: ``binary_cross_entropy`` and ``binary_cross_entropy_with_logits`` (fused ops);
- ``regression``: MSE, L1, smooth L1, Huber;
- ``margin``: divergences (KL), likelihoods (Poisson, Gaussian), margin and embedding losses;
- ``ctc``: connectionist temporal classification;
- ``_common``: the reduction arguments, argument checks and class-index helpers they share.

The fused losses have derivatives written in ember ops, so double backward works; the others are
compositions of ember ops that follow torch's formulas, so their gradients match torch's too.
"""
import warnings

# 0/0 for a 'mean' over nothing is NaN, as in torch, without NumPy's warning
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ember\.nn\.functional\.loss(\.\w+)?$")

from ._common import _legacy_reduction, _reduction  # noqa: E402,F401 - used by the loss modules
from .classification import cross_entropy, nll_loss  # noqa: E402
from .regression import mse_loss, l1_loss, smooth_l1_loss, huber_loss  # noqa: E402
from .binary import binary_cross_entropy, binary_cross_entropy_with_logits  # noqa: E402
from .margin import (kl_div, cosine_embedding_loss, margin_ranking_loss, hinge_embedding_loss,  # noqa: E402
                     soft_margin_loss, multilabel_soft_margin_loss, poisson_nll_loss, gaussian_nll_loss,
                     triplet_margin_loss, triplet_margin_with_distance_loss, multi_margin_loss,
                     multilabel_margin_loss)
from .ctc import ctc_loss  # noqa: E402
from .._autocast_fp32 import autocast_fp32 as _fp32  # noqa: E402

# CPU autocast runs these in float32, as torch's (its fp32 list; the composite multilabel_soft_margin_loss
# and gaussian_nll_loss run in their inputs' dtype there too)
(cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy,
 binary_cross_entropy_with_logits, kl_div, cosine_embedding_loss, margin_ranking_loss, hinge_embedding_loss,
 soft_margin_loss, poisson_nll_loss, triplet_margin_loss, multi_margin_loss, multilabel_margin_loss, ctc_loss) = map(
    _fp32, (cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy,
            binary_cross_entropy_with_logits, kl_div, cosine_embedding_loss, margin_ranking_loss,
            hinge_embedding_loss, soft_margin_loss, poisson_nll_loss, triplet_margin_loss, multi_margin_loss,
            multilabel_margin_loss, ctc_loss))

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
           "multi_margin_loss", "multilabel_margin_loss", "ctc_loss"]

from . import toplevel as _toplevel  # noqa: E402
_toplevel.install(vars(__import__("sys").modules["ember"]))   # torch.kl_div & co.: int reduction
