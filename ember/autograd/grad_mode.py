"""Grad-mode switches: no_grad, enable_grad, set_grad_enabled, inference_mode.

The state is a one-element list read on the hot path (``GRAD[0]``), so checking it costs one index.
"""
from __future__ import annotations

import functools

GRAD = [True]
INFERENCE = [False]


class _Mode:
    """Base for context managers that also work as decorators (torch's behaviour)."""

    _value = True

    def __enter__(self):
        self._prev = GRAD[0]
        GRAD[0] = self._value
        return self

    def __exit__(self, *exc):
        GRAD[0] = self._prev
        return False

    def __call__(self, fn):
        value = self._value

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = GRAD[0]
            GRAD[0] = value
            try:
                return fn(*args, **kwargs)
            finally:
                GRAD[0] = prev
        return wrapper


class no_grad(_Mode):
    """Disable gradient recording inside the block (or the decorated function)."""

    _value = False

    def __init__(self, orig_func=None):
        # torch allows ``@no_grad`` without parentheses
        self._orig = orig_func

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        if callable(orig_func):
            self.__init__()
            return self(orig_func)
        return self


class enable_grad(_Mode):
    """Enable gradient recording inside the block, even under no_grad."""

    _value = True

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        if callable(orig_func):
            return self(orig_func)
        return self

    def __init__(self, orig_func=None):
        pass


class set_grad_enabled(_Mode):
    """Set grad mode on or off; takes effect at once, and also works as a context manager."""

    def __init__(self, mode: bool):
        self._value = bool(mode)
        self._prev = GRAD[0]
        GRAD[0] = self._value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        GRAD[0] = self._prev
        return False

    def __call__(self, fn):
        GRAD[0] = self._prev  # the constructor switched mode; as a decorator it must not
        value = self._value

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = GRAD[0]
            GRAD[0] = value
            try:
                return fn(*args, **kwargs)
            finally:
                GRAD[0] = prev
        return wrapper


class inference_mode(_Mode):
    """Like no_grad (ember keeps no extra inference-tensor state)."""

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):
            self._value = False
            return self(mode)
        return self

    def __init__(self, mode: bool = True):
        self._value = not bool(mode) if not callable(mode) else False
        self._mode = mode if not callable(mode) else True

    def __enter__(self):
        self._prev_inf = INFERENCE[0]
        INFERENCE[0] = bool(self._mode)
        return super().__enter__()

    def __exit__(self, *exc):
        INFERENCE[0] = self._prev_inf
        return super().__exit__(*exc)


def is_grad_enabled() -> bool:
    return GRAD[0]


def is_inference_mode_enabled() -> bool:
    return INFERENCE[0]
