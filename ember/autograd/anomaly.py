"""Anomaly detection: remember where each node's forward ran, and name it when its backward makes NaN."""
from __future__ import annotations

import traceback
import warnings

ENABLED = [False]
CHECK_NAN = [True]


def capture_stack() -> str:
    return "".join(traceback.format_stack()[:-3])


class detect_anomaly:
    """Context manager/decorator: record forward traces and raise when a backward returns NaN."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self.prev = (ENABLED[0], CHECK_NAN[0])
        ENABLED[0] = True
        CHECK_NAN[0] = self.check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and "
                      "should only be enabled for debugging.", stacklevel=2)
        return self

    def __exit__(self, *exc):
        ENABLED[0], CHECK_NAN[0] = self.prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with self.__class__(self.check_nan):
                return fn(*a, **k)
        return wrapper


class set_detect_anomaly:
    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (ENABLED[0], CHECK_NAN[0])
        ENABLED[0] = bool(mode)
        CHECK_NAN[0] = check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        ENABLED[0], CHECK_NAN[0] = self.prev
        return False


def is_anomaly_enabled() -> bool:
    return ENABLED[0]
