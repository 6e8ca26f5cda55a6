"""Learning-rate schedulers with torch.optim.lr_scheduler's API, semantics and state_dict layout.

This is the module to import (``ember.optim.lr_scheduler.StepLR``, as ``torch.optim.lr_scheduler.StepLR``);
the schedulers live in ``ember/optim/_schedulers/``, one file per kind (see its ``__init__``). Each class
and the scale functions CyclicLR keeps carry this module's name, so pickles, reprs and the weights-only
loader's torch twins (``torch.optim.lr_scheduler.X`` <-> ``ember.optim.lr_scheduler.X``) see one path.
"""
from ._schedulers.base import LRScheduler, _LRScheduler
from ._schedulers.composite import ChainedScheduler, SequentialLR
from ._schedulers.cyclic import (CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR, _exp_range, _triangular,
                                 _triangular2)
from ._schedulers.decay import (ConstantLR, CosineAnnealingLR, ExponentialLR, LinearLR, MultiStepLR, PolynomialLR,
                                StepLR)
from ._schedulers.lambdas import LambdaLR, MultiplicativeLR
from ._schedulers.plateau import ReduceLROnPlateau

__all__ = ["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
           "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR", "LRScheduler"]

for _obj in (LRScheduler, _LRScheduler, LambdaLR, MultiplicativeLR, StepLR, MultiStepLR, ConstantLR, LinearLR,
             ExponentialLR, SequentialLR, CosineAnnealingLR, ChainedScheduler, ReduceLROnPlateau, CyclicLR,
             CosineAnnealingWarmRestarts, OneCycleLR, PolynomialLR, _triangular, _triangular2, _exp_range):
    _obj.__module__ = __name__
del _obj
