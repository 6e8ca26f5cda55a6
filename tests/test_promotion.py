"""Type promotion against torch: ``result_type`` / ``promote_types`` / ``can_cast`` over every dtype pair
and operand kind (dimensioned tensor, zero-dim tensor, Python bool/int/float), and the result dtypes
(and values) of add / mul / div / comparisons, exhaustively for result_type and by hypothesis for ops."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st, HealthCheck

import ember

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
KINDS = ["tensor", "zerodim", "py_bool", "py_int", "py_float"]


def _values(dt, n, rng):
    if dt == "bool":
        return rng.random(n) > 0.5
    if dt == "uint8":
        return rng.integers(0, 6, n)
    if dt.startswith("int"):
        return rng.integers(-5, 6, n)
    return np.round(rng.uniform(-4, 4, n), 2)


def make(kind, dt, seed=0):
    """The same operand for torch and ember: (torch_value, ember_value)."""
    rng = np.random.default_rng(seed)
    if kind == "py_bool":
        v = bool(rng.random() > 0.5)
        return v, v
    if kind == "py_int":
        v = int(rng.integers(-3, 4))
        return v, v
    if kind == "py_float":
        v = float(np.round(rng.uniform(-3, 3), 2)) or 0.5
        return v, v
    vals = _values(dt, 4 if kind == "tensor" else 1, rng)
    if kind == "zerodim":
        vals = vals[0]
    t = torch.tensor(vals.tolist() if hasattr(vals, "tolist") else vals, dtype=getattr(torch, dt))
    e = ember.tensor(vals.tolist() if hasattr(vals, "tolist") else vals, dtype=getattr(ember, dt))
    return t, e


def _name(d):
    return str(d).split(".")[-1]


@pytest.mark.parametrize("a", DTYPES)
def test_promote_types_and_can_cast_all_pairs(a):
    for b in DTYPES:
        ta, tb = getattr(torch, a), getattr(torch, b)
        ea, eb = getattr(ember, a), getattr(ember, b)
        assert _name(ember.promote_types(ea, eb)) == _name(torch.promote_types(ta, tb)), (a, b)
        assert ember.can_cast(ea, eb) == torch.can_cast(ta, tb), (a, b)


def test_promote_types_and_can_cast_errors():
    from autograd_support import same_error
    same_error(lambda m: m.can_cast(1, m.int32))
    same_error(lambda m: m.promote_types(m.int32, "float"))


@pytest.mark.parametrize("ka,kb", list(itertools.product(KINDS, KINDS)))
def test_result_type_every_dtype_pair_and_kind(ka, kb):
    for a in (DTYPES if ka in ("tensor", "zerodim") else ["-"]):
        for b in (DTYPES if kb in ("tensor", "zerodim") else ["-"]):
            ta, ea = make(ka, a if a != "-" else "float32", 1)
            tb, eb = make(kb, b if b != "-" else "float32", 2)
            want = torch.result_type(ta, tb)
            got = ember.result_type(ea, eb)
            assert _name(got) == _name(want), (ka, a, kb, b, ta, tb)


def test_result_type_respects_default_dtype():
    try:
        torch.set_default_dtype(torch.float64)
        ember.set_default_dtype(ember.float64)
        for a in DTYPES:
            ta, ea = make("tensor", a)
            assert _name(ember.result_type(ea, 2.5)) == _name(torch.result_type(ta, 2.5)), a
            assert _name(ember.result_type(2, 2.5)) == _name(torch.result_type(2, 2.5))
    finally:
        torch.set_default_dtype(torch.float32)
        ember.set_default_dtype(ember.float32)


def _run(lib_fn, a, b):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                return lib_fn(a, b), None
    except Exception as exc:  # noqa: BLE001 - compared below
        return None, exc


OPS = {
    "add": (lambda m: m.add),
    "mul": (lambda m: m.mul),
    "div": (lambda m: m.div),
    "sub": (lambda m: m.sub),
    "lt": (lambda m: getattr(m, "lt", None)),
    "eq": (lambda m: getattr(m, "eq", None)),
    "ge": (lambda m: getattr(m, "ge", None)),
}


def _check_op(op, ka, a, kb, b, seed):
    tf, ef = OPS[op](torch), OPS[op](ember)
    if ef is None:
        pytest.skip(f"ember.{op} not available yet")
    ta, ea = make(ka, a, seed)
    tb, eb = make(kb, b, seed + 1)
    if not isinstance(ta, torch.Tensor) and not isinstance(tb, torch.Tensor):
        return
    tr, texc = _run(tf, ta, tb)
    er, eexc = _run(ef, ea, eb)
    if texc is not None:
        assert eexc is not None, f"{op}({ka} {a}, {kb} {b}): torch raised {texc!r}, ember returned {er!r}"
        assert isinstance(eexc, type(texc)) or type(texc).__name__ in type(eexc).__mro__.__repr__(), \
            f"{op}: ember raised {eexc!r}, torch {texc!r}"
        return
    assert eexc is None, f"{op}({ka} {a}={ea!r}, {kb} {b}={eb!r}): ember raised {eexc!r}, torch gave {tr!r}"
    assert _name(er.dtype) == _name(tr.dtype), f"{op}({ka} {a}, {kb} {b}): ember {er.dtype} != torch {tr.dtype}"
    assert tuple(er.shape) == tuple(tr.shape)
    if not tr.dtype.is_floating_point and op in ("lt", "eq", "ge"):
        # comparisons are computed in the promoted dtype: identical results expected
        np.testing.assert_array_equal(er.numpy(), tr.numpy())
        assert _name(ember.result_type(ea, eb)) == _name(torch.result_type(ta, tb))
        return
    tv = tr.to(torch.float64).numpy() if tr.dtype != torch.bool else tr.numpy()
    ev = er.to(ember.float64).numpy() if er.dtype is not ember.bool else er.numpy()
    tol = 1e-2 if tr.dtype in (torch.float16, torch.bfloat16) else 1e-6
    np.testing.assert_allclose(ev, tv, rtol=tol, atol=tol, equal_nan=True,
                               err_msg=f"{op}({ka} {a}={ta!r}, {kb} {b}={tb!r})")
    if op in ("add", "mul", "sub"):
        assert _name(er.dtype) == _name(ember.result_type(ea, eb))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(sorted(OPS)), ka=st.sampled_from(KINDS), a=st.sampled_from(DTYPES),
       kb=st.sampled_from(KINDS), b=st.sampled_from(DTYPES), seed=st.integers(0, 1000))
def test_op_result_dtypes_match_torch(op, ka, a, kb, b, seed):
    _check_op(op, ka, a, kb, b, seed)


@pytest.mark.parametrize("op", ["add", "mul", "div", "lt"])
def test_op_result_dtypes_every_tensor_pair(op):
    # exhaustive over dtype pairs for dimensioned tensors, and tensor with each scalar kind
    for a, b in itertools.product(DTYPES, DTYPES):
        _check_op(op, "tensor", a, "tensor", b, 3)
        _check_op(op, "tensor", a, "zerodim", b, 4)
    for a, kb in itertools.product(DTYPES, ["py_bool", "py_int", "py_float"]):
        _check_op(op, "tensor", a, kb, "float32", 5)
        _check_op(op, kb, "float32", "tensor", a, 6)
        _check_op(op, "zerodim", a, kb, "float32", 7)
