"""The one helper that runs the same call in torch and in ember and compares values and gradients.

A ``Case`` says how to call an op (``fn(lib, *inputs)`` where ``lib`` is ``ember`` or ``torch``) and
what inputs to build. ``run_case`` builds identical inputs for both libraries in a given dtype and
layout (contiguous, non-contiguous (transposed), zero-size), compares outputs (values, shape, dtype),
then backpropagates the same random weights and compares input gradients.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import torch

import ember

FLOATS = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
GRAD_DTYPES = FLOATS + COMPLEX


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable                      # fn(lib, *tensors) -> Tensor | tuple of Tensors
    shapes: tuple = ((3, 4),)         # one shape per tensor input
    dtypes: tuple = FLOATS
    grad: bool = True                 # compare gradients of float inputs
    grad_inputs: tuple | None = None  # indices of inputs that require grad (default: all float ones)
    layouts: tuple = ("contig", "noncontig")
    low: float = -2.0
    high: float = 2.0
    int_inputs: dict = dataclasses.field(default_factory=dict)   # index -> (low, high, dtype) int tensor
    make: Callable | None = None      # make(rng, dtype) -> list of np arrays (overrides shapes)
    atol: float = 1e-5
    rtol: float = 1e-4
    check_dtype: bool = True
    double_backward: bool = False     # also compare second derivatives (float64 only)
    nondeterministic_grad: bool = False

    def __repr__(self):
        return self.name


def _np_dtype(name):
    return {"float32": np.float32, "float64": np.float64, "float16": np.float16,
            "int64": np.int64, "int32": np.int32, "bool": np.bool_, "int8": np.int8, "uint8": np.uint8,
            "int16": np.int16, "complex64": np.complex64, "complex128": np.complex128}[name]


def make_arrays(case: Case, dtype: str, layout: str, rng: np.random.Generator):
    if case.make is not None:
        arrs = case.make(rng, dtype)
    else:
        arrs = []
        for i, shape in enumerate(case.shapes):
            if layout == "zero" and len(shape) > 0:
                shape = (0,) + tuple(shape[1:])
            if i in case.int_inputs:
                lo, hi, idt = case.int_inputs[i]
                arrs.append(rng.integers(lo, hi, size=shape).astype(_np_dtype(idt)))
            elif dtype == "bool":
                arrs.append(rng.random(shape) > 0.5)
            elif dtype in ("int64", "int32", "int16", "int8", "uint8"):
                lo = 0 if dtype == "uint8" else int(case.low)
                arrs.append(rng.integers(lo, max(int(case.high), lo + 1) + 1, size=shape).astype(_np_dtype(dtype)))
            elif dtype in COMPLEX:
                re, im = (rng.uniform(case.low, case.high, size=shape) for _ in range(2))
                arrs.append((re + 1j * im).astype(_np_dtype(dtype)))
            else:
                arrs.append(rng.uniform(case.low, case.high, size=shape).astype(_np_dtype(dtype)))
    if layout == "noncontig":
        out = []
        for a in arrs:
            if a.ndim >= 2:
                # same values, transposed storage: a non-contiguous view
                b = np.ascontiguousarray(np.swapaxes(a, -1, -2))
                out.append(np.swapaxes(b, -1, -2))
            else:
                out.append(a)
        arrs = out
    return arrs


def _to_np(t):
    if isinstance(t, torch.Tensor):
        t = t.detach().resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    return np.asarray(t.detach()._data.astype(np.float32) if t.dtype is ember.bfloat16 else t.detach()._data)


def _flatten(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(_flatten(o))
        return res
    return [out]


def compare(e_out, t_out, case: Case, what: str):
    e_list, t_list = _flatten(e_out), _flatten(t_out)
    assert len(e_list) == len(t_list), f"{case.name}: {what}: ember gave {len(e_list)} outputs, torch {len(t_list)}"
    for k, (e, t) in enumerate(zip(e_list, t_list)):
        if isinstance(t, torch.Tensor):
            assert isinstance(e, ember.Tensor), f"{case.name}: {what}[{k}]: expected a Tensor, got {type(e)}"
            assert tuple(e.shape) == tuple(t.shape), f"{case.name}: {what}[{k}]: shape {tuple(e.shape)} != torch {tuple(t.shape)}"
            if case.check_dtype:
                assert e.dtype.name == str(t.dtype).replace("torch.", ""), \
                    f"{case.name}: {what}[{k}]: dtype {e.dtype} != torch {t.dtype}"
            en, tn = _to_np(e), _to_np(t)
            if tn.dtype.kind in "fc":
                wide = np.complex128 if tn.dtype.kind == "c" else np.float64
                np.testing.assert_allclose(en.astype(wide), tn.astype(wide), rtol=case.rtol,
                                           atol=case.atol, equal_nan=True, err_msg=f"{case.name}: {what}[{k}]")
            else:
                np.testing.assert_array_equal(en, tn, err_msg=f"{case.name}: {what}[{k}]")
        else:
            if isinstance(t, float):
                assert abs(e - t) <= case.atol + case.rtol * abs(t) or (e != e and t != t), f"{case.name}: {what}[{k}]: {e} != {t}"
            else:
                assert e == t, f"{case.name}: {what}[{k}]: {e!r} != {t!r}"


def case_arrays(case: Case, dtype: str, layout: str, rng, grad_kinds: str = "fc", grad_dtypes=GRAD_DTYPES):
    """The inputs of ``case`` (``make_arrays``) and the indices of those that take a gradient: the case's
    ``grad_inputs``, else every array of a kind in ``grad_kinds``; none when the case or ``dtype`` (not in
    ``grad_dtypes``) has no gradient."""
    arrs = make_arrays(case, dtype, layout, rng)
    grad_idx = case.grad_inputs
    if grad_idx is None:
        grad_idx = tuple(i for i, a in enumerate(arrs) if isinstance(a, np.ndarray) and a.dtype.kind in grad_kinds)
    return arrs, (tuple(grad_idx) if case.grad and dtype in grad_dtypes else ())


def paired_inputs(arrs, grad_idx, make):
    """Two argument lists from ``arrs`` (e.g. ember's and torch's): an array becomes the two tensors
    ``make(array)``, both requiring grad when its index is in ``grad_idx``; anything else is passed to
    both as it is."""
    xs, ys = [], []
    for i, a in enumerate(arrs):
        if not isinstance(a, np.ndarray):
            xs.append(a)
            ys.append(a)
            continue
        x, y = make(a)
        if i in grad_idx:
            x.requires_grad_(True)
            y.requires_grad_(True)
        xs.append(x)
        ys.append(y)
    return xs, ys


def run_case(case: Case, dtype: str = "float32", layout: str = "contig", seed: int = 0):
    rng = np.random.default_rng(seed)
    arrs, grad_idx = case_arrays(case, dtype, layout, rng)
    do_grad = bool(grad_idx)
    e_in, t_in = paired_inputs(arrs, grad_idx, lambda a: (
        ember.from_numpy(a.copy() if a.flags.c_contiguous else _same_layout_copy(a)),
        torch.from_numpy(a.copy() if a.flags.c_contiguous else _same_layout_copy(a))))
    t_out = case.fn(torch, *t_in)
    e_out = case.fn(ember, *e_in)
    compare(e_out, t_out, case, f"forward[{dtype},{layout}]")
    if not do_grad:
        return
    t_outs = [o for o in _flatten(t_out) if isinstance(o, torch.Tensor) and o.requires_grad]
    e_outs = [o for o in _flatten(e_out) if isinstance(o, ember.Tensor) and o.requires_grad]
    assert len(t_outs) == len(e_outs), f"{case.name}: {len(e_outs)} ember outputs require grad, torch has {len(t_outs)}"
    if not t_outs:
        return
    # a real loss: complex outputs enter through their (real, imag) pairs
    weights = [rng.standard_normal(tuple(o.shape) + ((2,) if o.is_complex() else ())).astype(
        np.float64 if o.dtype in (torch.float64, torch.complex128) else np.float32) for o in t_outs]
    t_loss = sum((_real_pairs(torch, o) * torch.from_numpy(w)).sum() for o, w in zip(t_outs, weights))
    e_loss = sum((_real_pairs(ember, o) * ember.from_numpy(w.copy())).sum() for o, w in zip(e_outs, weights))
    create = case.double_backward and dtype in ("float64", "complex128")
    t_leaves = [t_in[i] for i in grad_idx]
    e_leaves = [e_in[i] for i in grad_idx]
    t_grads = torch.autograd.grad(t_loss, t_leaves, allow_unused=True, create_graph=create)
    e_grads = ember.autograd.grad(e_loss, e_leaves, allow_unused=True, create_graph=create)
    t_g = [g if g is not None else torch.zeros_like(x) for g, x in zip(t_grads, t_leaves)]
    e_g = [g if g is not None else ember.zeros_like(x) for g, x in zip(e_grads, e_leaves)]
    compare(e_g, t_g, case, f"grad[{dtype},{layout}]")
    if create:
        t_s = sum(_square_sum(g) for g in t_grads if g is not None and g.requires_grad)
        e_s = sum(_square_sum(g) for g in e_grads if g is not None and g.requires_grad)
        if isinstance(t_s, torch.Tensor):
            t_gg = torch.autograd.grad(t_s, t_leaves, allow_unused=True)
            e_gg = ember.autograd.grad(e_s, e_leaves, allow_unused=True)
            t_gg = [g if g is not None else torch.zeros_like(x) for g, x in zip(t_gg, t_leaves)]
            e_gg = [g if g is not None else ember.zeros_like(x) for g, x in zip(e_gg, e_leaves)]
            compare(e_gg, t_gg, case, f"double-grad[{dtype},{layout}]")


def _square_sum(g):
    return (g * g).abs().sum() if g.is_complex() else (g * g).sum()


def _real_pairs(lib, o):
    return lib.view_as_real(o.resolve_conj()) if o.is_complex() else o


def _same_layout_copy(a):
    b = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    return np.swapaxes(b, -1, -2)


def raises_like(fe, ft, base=Exception):
    """``ft()`` (torch) raises (a ``base``), and ``fe()`` (ember) raises the type torch raised. Returns
    (ember's message, torch's)."""
    import pytest
    with pytest.raises(base) as te:
        ft()
    with pytest.raises(type(te.value)) as ee:
        fe()
    return str(ee.value), str(te.value)


def same_error_message(fe, ft):
    """``raises_like`` with the same message, reading "torch." as "ember."."""
    e, t = raises_like(fe, ft)
    assert e == t.replace("torch.", "ember."), (e, t)


def same_error(fn, exact=True, first_line=True):
    """``fn(lib)`` raises the same exception type under torch and ember; with ``exact`` also the same
    message (its first line with ``first_line``), reading "ember" as "torch" and "torch.Size" as "Size"."""
    import pytest
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as ee:
        fn(ember)
    assert ee.type is te.type, f"ember raised {ee.type.__name__}: {ee.value}; torch {te.type.__name__}: {te.value}"
    if exact:
        def norm(e):
            msg = str(e.value)
            msg = msg.split("\n")[0] if first_line else msg
            return msg.replace("ember", "torch").replace("torch.Size", "Size")
        assert norm(ee) == norm(te), f"\nember: {norm(ee)}\ntorch: {norm(te)}"
