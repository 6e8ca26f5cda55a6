"""The learning-rate schedulers behind ``ember.optim.lr_scheduler`` (the module to import), one file per kind:
``base`` (LRScheduler and the param-group helpers), ``lambdas`` (LambdaLR, MultiplicativeLR), ``decay``
(StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR, PolynomialLR, CosineAnnealingLR), ``plateau``
(ReduceLROnPlateau), ``composite`` (SequentialLR, ChainedScheduler) and ``cyclic`` (CyclicLR,
CosineAnnealingWarmRestarts, OneCycleLR).
"""
