"""torch's argument parser reads NumPy's spellings ``axis=`` for ``dim`` and ``keepdims=`` for ``keepdim``
in its native functions and Tensor methods; ember's reductions, scans and sorts take them the same way.
Each call runs in torch and in ember (oracle) and must give the same values, or the same exception."""
import numpy as np
import pytest
import torch

import ember
from oracle import Case, run_case, same_error

# name -> extra positional arguments after the input, whether it takes keepdim(s)
REDUCTIONS = {
    "sum": ((), True), "mean": ((), True), "max": ((), True), "min": ((), True), "amax": ((), True),
    "amin": ((), True), "any": ((), True), "all": ((), True), "std": ((), True), "var": ((), True),
    "std_mean": ((), True), "var_mean": ((), True), "prod": ((), True), "nansum": ((), True),
    "nanmean": ((), True), "logsumexp": ((), True), "argmax": ((), True), "argmin": ((), True),
    "median": ((), True), "nanmedian": ((), True), "mode": ((), True), "kthvalue": ((2,), True),
    "quantile": ((0.25,), True), "nanquantile": ((0.75,), True), "aminmax": ((), True),
    "count_nonzero": ((), False), "cumsum": ((), False), "cumprod": ((), False), "logcumsumexp": ((), False),
    "cummax": ((), False), "cummin": ((), False), "softmax": ((), False), "log_softmax": ((), False),
    "sort": ((), False), "argsort": ((), False), "topk": ((2,), False), "diff": ((), False),
}
NO_METHOD = {"std_mean", "var_mean", "trapezoid", "cumulative_trapezoid"}
KWARGS = [{"axis": 0}, {"axis": -1}, {"axis": 1, "keepdims": True}, {"dim": 0, "keepdims": True},
          {"axis": 0, "keepdims": False}]


def _cases():
    for name, (extra, keep) in REDUCTIONS.items():
        for kind in ("fn", "method"):
            if kind == "method" and name in NO_METHOD:
                continue
            for kw in KWARGS:
                if "keepdims" in kw and not keep:
                    continue
                yield name, kind, extra, kw


def _call(lib, name, kind, x, extra, kw):
    if kind == "fn":
        return getattr(lib, name)(x, *extra, **kw)
    return getattr(x, name)(*extra, **kw)


@pytest.mark.parametrize("name,kind,extra,kw", list(_cases()),
                         ids=[f"{n}-{k}-{'-'.join(f'{a}={b}' for a, b in kw.items())}" for n, k, _, kw in _cases()])
def test_numpy_spellings_match_torch(name, kind, extra, kw):
    dtypes = ("bool",) if name in ("any", "all") else ("float64",)
    run_case(Case(name, lambda m, x: _call(m, name, kind, x, extra, kw), shapes=((3, 4),), dtypes=dtypes,
                  layouts=("contig",)), dtypes[0])


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_integration_along_axis(name):
    run_case(Case(name, lambda m, y: getattr(m, name)(y, axis=0), shapes=((3, 4),), layouts=("contig",)), "float64")


def test_axis_tuple_and_all_dims():
    run_case(Case("sum_axes", lambda m, x: m.sum(x, axis=(0, 2), keepdims=True), shapes=((2, 3, 4),)))
    run_case(Case("count_axes", lambda m, x: m.count_nonzero(x, axis=(0, 1)), shapes=((2, 3, 4),), grad=False))
    run_case(Case("argmax_all", lambda m, x: x.argmax(axis=None, keepdims=True), shapes=((3, 4),), grad=False))


@pytest.mark.parametrize("call", [
    lambda m: m.sum(m.ones(3, 4), 0, axis=1),                      # dim and axis at once
    lambda m: m.ones(3, 4).sum(dim=0, axis=1),
    lambda m: m.mean(m.ones(3, 4), 0, True, keepdims=True),        # keepdim and keepdims at once
    lambda m: m.max(m.ones(3, 4), 1, axis=0),
    lambda m: m.cumsum(m.ones(3, 4)),                              # a required dim given by neither name
    lambda m: m.logsumexp(m.ones(3, 4), keepdims=True),
    lambda m: m.ones(3, 4).cummax(),
    lambda m: m.sort(m.ones(3, 4), keepdims=True),                 # no keepdim: no keepdims either
    lambda m: m.count_nonzero(m.ones(3, 4), axis=0, keepdims=True),
    lambda m: m.norm(m.ones(3, 4), axis=0),                        # Python-level functions take no alias
    lambda m: m.nn.functional.softmax(m.ones(3, 4), axis=0),
], ids=["dim+axis", "method-dim+axis", "keepdim+keepdims", "max-dim+axis", "cumsum-no-dim", "logsumexp-no-dim",
        "cummax-no-dim", "sort-keepdims", "count_nonzero-keepdims", "norm-axis", "F.softmax-axis"])
def test_rejected_like_torch(call):
    same_error(call, exact=False)


def test_default_calls_unchanged():
    x = ember.tensor(np.arange(12.0).reshape(3, 4))
    assert x.sum().item() == 66.0 and ember.cumsum(x, 1)[0, -1].item() == 6.0
    assert ember.logsumexp(x, 0).shape == (4,) and x.sort()[0].shape == (3, 4)
    t = torch.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(ember.std(x, axis=1, correction=0).numpy(), torch.std(t, 1, correction=0).numpy())


@pytest.mark.parametrize("call", [
    lambda m, x: m.squeeze(x[None], axis=0), lambda m, x: x[:, None].squeeze(axis=(1,)),
    lambda m, x: m.unsqueeze(x, axis=-1), lambda m, x: x.unsqueeze(axis=0), lambda m, x: m.stack([x, x], axis=1),
    lambda m, x: m.chunk(x, 2, axis=1), lambda m, x: x.tensor_split(3, axis=1), lambda m, x: x.unbind(axis=1),
    lambda m, x: m.repeat_interleave(x, 2, axis=0), lambda m, x: x.take_along_dim(m.tensor([[0], [2], [1]]), axis=1),
], ids=["squeeze", "squeeze-method", "unsqueeze", "unsqueeze-method", "stack", "chunk", "tensor_split", "unbind",
        "repeat_interleave", "take_along_dim"])
def test_shape_ops_take_axis(call):
    run_case(Case("shape_axis", call, shapes=((3, 4),), layouts=("contig",)), "float64")


@pytest.mark.parametrize("call", [lambda m: m.ones(3).unsqueeze(), lambda m: m.unsqueeze(m.ones(3), 0, axis=0),
                                  lambda m: m.ones(1, 3).squeeze(0, axis=0)],
                         ids=["unsqueeze-no-dim", "unsqueeze-both", "squeeze-both"])
def test_shape_ops_rejected_like_torch(call):
    same_error(call, exact=False)
