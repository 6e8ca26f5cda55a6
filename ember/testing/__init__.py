"""``ember.testing``: ``assert_close`` (and the deprecated ``assert_allclose``) as in torch.testing.

``assert_close(actual, expected)`` compares tensors, NumPy arrays, Python numbers and (nested)
sequences / mappings of them: shapes must match, dtypes too unless ``check_dtype=False``, and values
must satisfy ``|actual - expected| <= atol + rtol * |expected|`` with torch's default tolerances per
dtype (float32: rtol 1.3e-6, atol 1e-5; float64: 1e-7, 1e-7; float16: 1e-3, 1e-5; bfloat16: 1.6e-2,
1e-5; integers and bool exact). Mismatches raise ``AssertionError`` with the counts and the greatest
absolute and relative differences.
"""
from __future__ import annotations

import collections.abc
import numbers

import numpy as np

__all__ = ["assert_close", "assert_allclose"]

_TOLS = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7),
         "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def _leaf(x):
    """(NumPy array, dtype name, is_tensor) of a comparable leaf."""
    from ..tensor import Tensor
    if isinstance(x, Tensor):
        return x.detach().cpu().numpy(), str(x.dtype).split(".")[-1], True
    if isinstance(x, np.ndarray):
        return x, str(x.dtype), False
    if isinstance(x, bool):
        return np.asarray(x), "bool", False
    if isinstance(x, numbers.Integral):
        return np.asarray(x), "int64", False
    if isinstance(x, numbers.Real):
        return np.asarray(x, dtype=np.float64), "float64", False
    if isinstance(x, numbers.Complex):
        return np.asarray(x, dtype=np.complex128), "complex128", False
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(x)}")


def _compare(actual, expected, rtol, atol, equal_nan, check_dtype, check_device, path, msg):
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        if set(actual) != set(expected):
            raise AssertionError(f"The keys of the mappings do not match{path}: {sorted(map(str, actual))} != "
                                 f"{sorted(map(str, expected))}")
        for k in expected:
            _compare(actual[k], expected[k], rtol, atol, equal_nan, check_dtype, check_device, f"{path}[{k!r}]", msg)
        return
    seq = (list, tuple)
    if isinstance(actual, seq) and isinstance(expected, seq):
        if len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch{path}: {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_dtype, check_device, f"{path}[{i}]", msg)
        return
    a, adt, a_t = _leaf(actual)
    e, edt, e_t = _leaf(expected)
    where = f" at item {path}" if path else ""
    if a_t != e_t and not (isinstance(actual, numbers.Number) and isinstance(expected, numbers.Number)):
        raise AssertionError(f"Comparing {type(actual).__name__} and {type(expected).__name__}{where}: the types differ")
    if a.shape != e.shape:
        raise AssertionError(msg or f"The values for attribute 'shape' do not match{where}: {a.shape} != {e.shape}.")
    if check_dtype and adt != edt:
        raise AssertionError(msg or f"The values for attribute 'dtype' do not match{where}: {adt} != {edt}.")
    if check_device and a_t and e_t and str(actual.device) != str(expected.device):
        raise AssertionError(msg or f"The values for attribute 'device' do not match{where}: "
                                    f"{actual.device} != {expected.device}.")
    if rtol is None:
        ta, te = _TOLS.get(adt, (0.0, 0.0)), _TOLS.get(edt, (0.0, 0.0))
        rtol, atol = max(ta[0], te[0]), max(ta[1], te[1])     # the looser of the two dtypes
    a64 = a.astype(np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(e) else np.float64)
    e64 = e.astype(a64.dtype)
    ok = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if not ok.all():
        diff = np.abs(a64 - e64)
        bad = ~ok
        with np.errstate(all="ignore"):
            rel = diff / np.where(np.abs(e64) > 0, np.abs(e64), np.inf)
        kind = "Scalars" if a.ndim == 0 else "Tensor-likes"
        raise AssertionError(msg or (
            f"{kind} are not close{where}!\n\nMismatched elements: {int(bad.sum())} / {bad.size} "
            f"({100.0 * bad.sum() / bad.size:.1f}%)\nGreatest absolute difference: {np.max(diff[bad])}\n"
            f"Greatest relative difference: {np.max(rel[bad])}\n(up to {atol} allowed absolute, {rtol} relative)"))


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol=None, atol=None, equal_nan: bool = False,
                 check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                 check_stride: bool = False, msg=None):
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close (see the module docstring)."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {'rtol' if rtol is None else 'atol'}.")
    _compare(actual, expected, rtol, atol, equal_nan, check_dtype, check_device, "", msg)


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan: bool = True, msg: str = ""):
    """The deprecated ``torch.testing.assert_allclose``: no dtype check, NaNs equal by default."""
    from ..ops.creation import as_tensor
    from ..tensor import Tensor
    if not isinstance(actual, Tensor):
        actual = as_tensor(actual)
    if not isinstance(expected, Tensor):
        expected = as_tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = _TOLS.get(str(actual.dtype).split(".")[-1], (0.0, 0.0))
    _compare(actual, expected, rtol, atol, equal_nan, False, False, "", msg or None)
