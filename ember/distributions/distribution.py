"""``Distribution``: the base class of ember's probability distributions (torch.distributions API).

A distribution has a ``batch_shape`` (independent, differently parameterised copies) and an
``event_shape`` (the shape of one draw). ``sample`` draws without gradient, ``rsample`` draws with the
reparameterisation trick (gradients flow to the parameters), ``log_prob`` scores values. Arguments
and ``log_prob`` values are validated against ``arg_constraints`` / ``support`` unless validation is
turned off (``validate_args=False`` or ``Distribution.set_default_validate_args(False)``).
"""
from __future__ import annotations

import numbers
import warnings

from ..tensor import Tensor, Size
from . import constraints
from .utils import broadcast_all, lazy_property

__all__ = ["Distribution"]


class Distribution:
    """Abstract base class for probability distributions."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for every distribution created afterwards."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}` "
                              "or initialize the distribution with `validate_args=False` to turn off validation.",
                              stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                    continue      # a lazily derived parameter (probs from logits) is not checked
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution with the parameters expanded to ``batch_shape`` (no data copied)."""
        raise NotImplementedError(f"{self.__class__.__name__} does not implement expand")

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        raise NotImplementedError(f"{self.__class__.__name__} does not declare arg_constraints")

    @property
    def support(self):
        raise NotImplementedError(f"{self.__class__.__name__} does not declare its support")

    @property
    def mean(self):
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()):
        """Draw ``sample_shape`` samples without recording gradients."""
        from ..autograd.grad_mode import no_grad
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement rsample (reparameterized sampling)")

    def sample_n(self, n: int):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement log_prob")

    def cdf(self, value):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement icdf")

    def enumerate_support(self, expand: bool = True):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement enumerate_support")

    def entropy(self):
        raise NotImplementedError(f"{self.__class__.__name__} does not implement entropy")

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()) -> Size:
        if not isinstance(sample_shape, Size):
            sample_shape = Size(sample_shape)
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.size()) - len(self._event_shape)
        if value.size()[event_dim_start:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {value.size()} vs "
                             f"{self._event_shape}.")
        actual_shape = value.size()
        expected_shape = self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs "
                                 f"{expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.",
                          stacklevel=2)
            return
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _expand_into(self, cls, batch_shape, _instance, fill):
        """``expand``'s frame: a new instance (``cls``'s check as above), ``fill(new, batch_shape)`` sets
        its parameters, then the shapes and the validation flag carry over."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = Size(batch_shape)
        fill(new, batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _init_broadcast(self, names, values, validate_args) -> None:
        """The constructor of a family whose parameters ``names`` broadcast together: their broadcast
        shape is the batch shape (empty when all are Python numbers)."""
        for name, t in zip(names, broadcast_all(*values)):
            setattr(self, name, t)
        batch = Size() if all(isinstance(v, numbers.Number) for v in values) else getattr(self, names[0]).size()
        Distribution.__init__(self, batch, validate_args=validate_args)

    def _expand_broadcast(self, cls, names, batch_shape, _instance):
        """``expand`` for a family built by ``_init_broadcast``."""
        def fill(new, shape):
            for name in names:
                setattr(new, name, getattr(self, name).expand(shape))
        return self._expand_into(cls, batch_shape, _instance, fill)

    def __repr__(self):
        param_names = [k for k in self.arg_constraints if k in self.__dict__]
        args_string = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in param_names)
        return self.__class__.__name__ + "(" + args_string + ")"


class _CenteredAtLoc:
    """Mixin for families whose mean and mode are the parameter ``loc`` (Normal, Laplace, the
    multivariate normal)."""

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc
