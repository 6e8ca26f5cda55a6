"""``biject_to`` and ``transform_to`` (torch.distributions.constraint_registry): the transform from
unconstrained reals onto a constraint's support, as variational and constrained-parameter code uses them
(``transform_to(constraints.positive)(raw)``). ``biject_to`` gives bijections (stick-breaking for the
simplex); ``transform_to`` may give a cheaper non-bijective map (softmax for the simplex).
"""
from __future__ import annotations

import numbers

from . import constraints, transforms

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """Constraint class -> factory(constraint) -> Transform."""

    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        """Register ``factory`` for ``constraint`` (a Constraint subclass or instance); a decorator when
        ``factory`` is omitted."""
        if factory is None:
            return lambda f: self.register(constraint, f)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got "
                            f"{constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _real(constraint):
    return transforms.identity_transform


def _independent(registry):
    def factory(constraint):
        return transforms.IndependentTransform(registry(constraint.base_constraint),
                                               constraint.reinterpreted_batch_ndims)
    return factory


def _greater_than(constraint):
    # (positive and nonnegative too: the registry is keyed by constraint class, as torch's, so they get
    # the general form exp then shift, as in torch)
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.lower_bound, 1)])


def _less_than(constraint):
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.upper_bound, -1)])


def _interval(constraint):
    lb, ub = constraint.lower_bound, constraint.upper_bound
    if isinstance(lb, numbers.Number) and isinstance(ub, numbers.Number) and lb == 0 and ub == 1:
        return transforms.SigmoidTransform()
    return transforms.ComposeTransform([transforms.SigmoidTransform(), transforms.AffineTransform(lb, ub - lb)])


for _reg in (biject_to, transform_to):
    _reg.register(constraints.real, _real)
    _reg.register(constraints._IndependentConstraint, _independent(_reg))
    _reg.register(constraints.positive, _greater_than)
    _reg.register(constraints.nonnegative, _greater_than)
    _reg.register(constraints.less_than, _less_than)
    _reg.register(constraints.unit_interval, _interval)
    _reg.register(constraints.half_open_interval, _interval)
biject_to.register(constraints.simplex, lambda c: transforms.StickBreakingTransform())
transform_to.register(constraints.simplex, lambda c: transforms.SoftmaxTransform())


def _joined(reg, kind):
    def factory(constraint):
        from . import transforms_joint
        parts = [reg(c) for c in constraint.cseq]
        if kind == "cat":
            return transforms_joint.CatTransform(parts, constraint.dim, constraint.lengths)
        return transforms_joint.StackTransform(parts, constraint.dim)
    return factory


def _corr_cholesky(constraint):
    from .transforms_joint import CorrCholeskyTransform
    return CorrCholeskyTransform()


for _reg in (biject_to, transform_to):
    _reg.register(constraints._Cat, _joined(_reg, "cat"))
    _reg.register(constraints._Stack, _joined(_reg, "stack"))
    _reg.register(constraints.corr_cholesky, _corr_cholesky)
transform_to.register(constraints.lower_cholesky, lambda c: transforms.LowerCholeskyTransform())
transform_to.register(constraints.positive_definite, lambda c: transforms.PositiveDefiniteTransform())
transform_to.register(constraints.positive_semidefinite, lambda c: transforms.PositiveDefiniteTransform())
