"""Grad-mode switches: no_grad, enable_grad, set_grad_enabled, inference_mode.

The state is a one-element list read on the hot path (``GRAD[0]``), so checking it costs one index.
Every switch is a context manager and a decorator (``@ember.no_grad()`` and ``@ember.no_grad``); a
decorated generator function switches the mode only while its body runs, as in torch.

    >>> x = ember.ones(2, requires_grad=True)
    >>> with ember.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
"""
from __future__ import annotations

import functools
import inspect

GRAD = [True]
INFERENCE = [False]


class _DecoratorContextManager:
    """Base for context managers that also work as decorators (torch's behaviour)."""

    def __call__(self, fn):
        if inspect.isclass(fn):
            raise RuntimeError(f"{type(self).__name__} cannot decorate a class; decorate its methods instead")
        if inspect.isgeneratorfunction(fn):
            return self._wrap_generator(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def _wrap_generator(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as exc:  # noqa: BLE001 - forwarded into the generator
                        with self.clone():
                            response = gen.throw(exc)
                    else:
                        with self.clone():
                            response = gen.send(request)
            except StopIteration as e:
                return e.value
        return wrapper

    def clone(self):
        return self.__class__()


class _GradSwitch(_DecoratorContextManager):
    """A context manager that sets ``GRAD[0]`` to ``_value`` and restores it on exit; also a decorator, with or
    without parentheses (``@no_grad`` / ``@no_grad()``)."""

    _value = True

    def __enter__(self):
        self._prev = GRAD[0]
        GRAD[0] = self._value
        return None

    def __exit__(self, *exc):
        GRAD[0] = self._prev
        return False

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        if not callable(orig_func):
            raise TypeError(f"{cls.__name__}() takes no arguments or a function to decorate, got {orig_func!r}")
        return cls()(orig_func)     # ``@no_grad`` without parentheses

    def __init__(self, orig_func=None):
        pass


class no_grad(_GradSwitch):
    """Disable gradient recording inside the block (or the decorated function)."""

    _value = False


class enable_grad(_GradSwitch):
    """Enable gradient recording inside the block, even under no_grad."""

    _value = True


class set_grad_enabled(_DecoratorContextManager):
    """Set grad mode on or off: takes effect at once (a plain call), and also works as a context
    manager or decorator that restores the previous mode."""

    def __init__(self, mode: bool):
        self.prev = GRAD[0]
        self.mode = bool(mode)
        GRAD[0] = self.mode

    def __call__(self, fn):
        GRAD[0] = self.prev     # the constructor switched mode; as a decorator it must not
        return super().__call__(fn)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        GRAD[0] = self.prev
        return False

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """Like no_grad, and ``is_inference_mode_enabled()`` reports True inside. ``inference_mode(False)``
    leaves inference mode and turns grad mode on, as torch does. (ember keeps no separate
    inference-tensor state: tensors made inside behave like tensors made under no_grad.)"""

    def __new__(cls, mode=True):
        if mode is None or isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)          # ``@inference_mode`` without parentheses

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = (GRAD[0], INFERENCE[0])
        GRAD[0] = not self.mode
        INFERENCE[0] = self.mode
        return None

    def __exit__(self, *exc):
        GRAD[0], INFERENCE[0] = self._prev
        return False

    def clone(self):
        return self.__class__(self.mode)


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad are recorded."""
    return GRAD[0]


def is_inference_mode_enabled() -> bool:
    """True inside ``inference_mode()``."""
    return INFERENCE[0]
