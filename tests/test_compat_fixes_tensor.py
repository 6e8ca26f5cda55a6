"""Regression tests for what the compat programs (examples/compat) found missing or wrong, tensor side, each
checked against torch: Tensor.type_as / new / legacy constructors / Variable, tensor([]) dtype, in-place view
ops, resize_, fill_diagonal_, stats-op errors and small op edge cases (isin, real, special, ctc_loss, ...)."""
import io
import warnings

import numpy as np
import pytest
import torch

import ember
from compat_support import _assert_same, assert_same, both, fixed_linear, same_error


# ---- tensor basics ----------------------------------------------------------------------------------------


def test_tensor_of_empty_list_is_default_float():
    for data in ([], [[]], [[], []]):
        t, e = torch.tensor(data), ember.tensor(data)
        assert str(e.dtype).replace("ember.", "") == str(t.dtype).replace("torch.", "")
        assert tuple(e.shape) == tuple(t.shape)
    assert ember.tensor([True, False]).dtype is ember.bool       # non-empty inference unchanged
    assert ember.tensor([[1], []] if False else [1, 2]).dtype is ember.int64


def test_type_as_and_type_errors():
    assert_same(lambda m: m.tensor([1, 2]).type_as(m.ones(2)))
    assert_same(lambda m: m.tensor([1.5, 2.5]).type_as(m.tensor([1])))
    x = ember.ones(2)
    assert x.type_as(x) is x
    same_error(lambda m: m.ones(2).type_as(3))
    same_error(lambda m: m.ones(2).type("torch.Foo"), exact=True)
    assert ember.ones(2).type(ember.LongTensor).dtype is ember.int64


def test_legacy_constructors():
    assert_same(lambda m: m.FloatTensor([1, 2]))
    assert_same(lambda m: m.LongTensor([1.7, -2.2]))
    assert_same(lambda m: m.BoolTensor([1, 0]))
    assert_same(lambda m: m.DoubleTensor(np.ones(3)))
    for lib in (torch, ember):
        assert tuple(lib.FloatTensor(2, 3).shape) == (2, 3) and lib.FloatTensor(2, 3).dtype == lib.float32
        assert tuple(lib.ByteTensor(lib.Size([2, 2])).shape) == (2, 2)
        assert tuple(lib.FloatTensor().shape) == (0,)
        assert isinstance(lib.ones(2), lib.FloatTensor) and not isinstance(lib.ones(2), lib.LongTensor)
        assert lib.LongTensor.__name__ == "LongTensor"
    same_error(lambda m: m.FloatTensor(m.tensor([1, 2])))


def test_tensor_new():
    for lib in (torch, ember):
        x = lib.ones(2, dtype=lib.float64)
        assert tuple(x.new(2, 3).shape) == (2, 3) and x.new(2, 3).dtype == lib.float64
        assert x.new([1, 2]).dtype == lib.float64 and x.new([1, 2]).tolist() == [1.0, 2.0]
        assert tuple(x.new().shape) == (0,)
        assert x.new(lib.Size([3])).shape == (3,)
    same_error(lambda m: m.ones(2).new(m.tensor([1, 2])))


def test_autograd_variable():
    for lib in (torch, ember):
        V = lib.autograd.Variable
        x = lib.ones(2)
        v = V(x)
        assert v is not x and not v.requires_grad
        v.add_(1)
        assert x.tolist() == [2.0, 2.0]          # shares the data
        w = V(x, requires_grad=True)
        assert w.requires_grad and not x.requires_grad and w.grad_fn is None
        assert isinstance(x, V)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            V(x, volatile=True)
        assert any("volatile" in str(r.message) for r in rec)
        assert tuple(V().shape) == (0,)
    same_error(lambda m: m.autograd.Variable([1, 2]), exact=True)


def test_inplace_view_ops():
    for lib in (torch, ember):
        a = lib.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            a.unsqueeze_(0)
        b = a * 2
        assert b.unsqueeze_(0) is b and tuple(b.shape) == (1, 2, 3)
        (b * lib.arange(3.0)).sum().backward()
        assert a.grad.tolist() == [[0.0, 2.0, 4.0]] * 2
        c = lib.zeros(2, 3)
        v = c[0]
        v.unsqueeze_(0)
        v.fill_(1)
        assert tuple(v.shape) == (1, 3) and c.sum().item() == 3
        d = lib.arange(6.0).view(2, 3)
        assert d.t_() is d and tuple(d.shape) == (3, 2) and not d.is_contiguous() and d.stride() == (1, 3)
        f = lib.ones(2, 1, 3)
        f.squeeze_()
        assert tuple(f.shape) == (2, 3)
        f.transpose_(0, 1)
        assert tuple(f.shape) == (3, 2)
        f.swapdims_(0, 1)
        assert tuple(f.shape) == (2, 3)


def test_resize_():
    assert_same(lambda m: m.arange(6.0).resize_(2, 3))
    assert_same(lambda m: m.arange(6.0).resize_(1, 2))
    assert_same(lambda m: m.arange(6.0).resize_as_(m.ones(2, 2)))
    for lib in (torch, ember):
        h = lib.arange(4.0)
        h.resize_(3, 3)
        assert tuple(h.shape) == (3, 3) and h.view(-1)[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    same_error(lambda m: m.ones(2, requires_grad=True).resize_(3))


def test_fill_diagonal_():
    for shape, wrap in [((3, 3), False), ((7, 3), False), ((7, 3), True), ((3, 5), True), ((2, 2, 2), False)]:
        assert_same(lambda m: m.zeros(*shape).fill_diagonal_(5, wrap=wrap))
    assert_same(lambda m: m.ones(2, 2, dtype=m.long).fill_diagonal_(2.7))

    def grad(m):
        a = m.ones(3, 3, requires_grad=True)
        b = a * 2
        b.fill_diagonal_(float("-inf"))
        b.exp().sum().backward()
        return a.grad
    assert_same(grad, atol=1e-5)
    same_error(lambda m: m.zeros(3).fill_diagonal_(1), exact=True)
    same_error(lambda m: m.zeros(2, 3, 2).fill_diagonal_(1), exact=True)
    same_error(lambda m: m.ones(2, 2, requires_grad=True).fill_diagonal_(0))


# ---- stats-family errors (values and gradients are in tests/optable/stats.py) ------------------------------


@pytest.mark.parametrize("fn", [
    lambda m: m.bincount(m.tensor([-1, 2])),
    lambda m: m.bincount(m.tensor([[1, 2]])),
    lambda m: m.bincount(m.tensor([1.0, 2.0])),
    lambda m: m.bincount(m.tensor([1, 2]), minlength=-1),
    lambda m: m.bincount(m.tensor([1, 2]), weights=m.tensor([1.0])),
    lambda m: m.histc(m.tensor([1, 2])),
    lambda m: m.histc(m.tensor([1.0, 2.0]), bins=0),
    lambda m: m.histc(m.tensor([1.0]), bins=4, min=3, max=1),
    lambda m: m.histc(m.tensor([1.0, float("inf")]), bins=4),
    lambda m: m.bucketize(m.tensor([3.0]), m.tensor([[1.0, 3.0], [5.0, 7.0]])),
    lambda m: m.searchsorted(m.tensor([1.0, 3.0]), m.tensor([2.0]), side="mid"),
    lambda m: m.searchsorted(m.tensor([1.0, 3.0]), m.tensor([2.0]), side="left", right=True),
    lambda m: m.searchsorted(m.tensor([[1.0, 3.0], [2.0, 4.0]]), m.tensor([2.0, 3.0])),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), 1.5),
    lambda m: m.quantile(m.tensor([1, 2]), 0.5),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), m.tensor(0.5, dtype=m.float64)),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), m.tensor([[0.5]])),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), 0.5, interpolation="foo"),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), m.tensor([0.5, 2.0])),
    lambda m: m.quantile(m.ones(2, 0), 0.5, dim=1),
    lambda m: m.diff(m.tensor([1, 3, 6]), n=-1),
    lambda m: m.diff(m.tensor(1)),
    lambda m: m.diff(m.tensor([[1, 3, 6]]), prepend=m.tensor([0])),
    lambda m: m.trapezoid(m.tensor([1.0, 2.0]), m.tensor([1.0, 2.0, 3.0])),
    lambda m: m.dist(m.tensor([1, 2]), m.tensor([0, 0])),
])
def test_stats_errors_match_torch(fn):
    same_error(fn, exact=True)


def test_stats_values_edge_cases():
    assert_same(lambda m: m.bincount(m.tensor([1, 3, 3, 0]), weights=m.tensor([1, 2, 3, 4])))
    assert_same(lambda m: m.bincount(m.tensor([], dtype=m.long)))
    assert_same(lambda m: m.histc(m.tensor([1.0, 1.0, 1.0]), bins=4))
    assert_same(lambda m: m.histc(m.tensor([1.0, float("nan"), 1.0]), bins=4, min=0, max=3))
    assert_same(lambda m: m.searchsorted(m.tensor([5.0, 1.0, 3.0]), m.tensor([2.0]), sorter=m.tensor([1, 2, 0])))
    assert_same(lambda m: m.searchsorted(m.tensor([1, 3]), m.tensor([2.0, 4.0])))
    assert_same(lambda m: m.bucketize(3, m.tensor([1.0, 3.0, 5.0])))
    assert_same(lambda m: m.isin(m.tensor([1.0, float("nan")]), m.tensor([float("nan")])))
    assert_same(lambda m: m.isin(2, m.tensor([1, 2])))
    assert_same(lambda m: m.diff(m.tensor([True, False, False])))
    assert_same(lambda m: m.diff(m.tensor([1, 3, 6]), n=5))
    assert_same(lambda m: m.trapezoid(m.tensor([1, 2, 3]), dx=2))
    assert_same(lambda m: m.trapezoid(m.tensor([])))
    assert_same(lambda m: m.cov(m.tensor([[0, 1, 2], [2, 1, 0]])))
    assert_same(lambda m: m.cov(m.tensor([[0.0, 1, 2, 5], [2, 1, 0, 1]]), fweights=m.tensor([1, 2, 1, 3]),
                                aweights=m.tensor([0.5, 1, 2, 1])))
    assert_same(lambda m: m.corrcoef(m.tensor([1.0, 2, 4])))
    for interp in ("linear", "lower", "higher", "midpoint", "nearest"):
        assert_same(lambda m: m.quantile(m.tensor([1.0, 2, 3, 4]), m.tensor([0.5, 1 / 6, 0.3]), interpolation=interp))
    assert_same(lambda m: m.nanquantile(m.tensor([float("nan")] * 2), 0.5))
    assert_same(lambda m: m.quantile(m.tensor(3.0), 0.5, dim=0, keepdim=True))
    assert_same(lambda m: m.quantile(m.arange(12.0).view(3, 4), m.tensor([0.2, 0.7]), keepdim=True))
    assert_same(lambda m: m.tensor([[1.0, 2, 3], [4, 5, 6]]).renorm_(2, 0, 1), atol=1e-6)
    t, e = both(lambda m: m.histogram(m.tensor([1.0, 2, 1]), bins=4, range=(0.0, 3.0)))
    _assert_same(tuple(t), tuple(e), 1e-6)
    assert repr(e).startswith("ember.return_types.histogram(") and e.hist is e[0] and e.bin_edges is e[1]




def test_isin_edge_cases():
    assert_same(lambda m: m.isin(m.tensor([1.0, float("nan"), 3.0]), m.tensor([], dtype=m.float32)))
    assert_same(lambda m: m.isin(m.tensor([[1, 5], [3, 2]]), m.tensor([[2, 3], [3, 9]]), invert=True))
    assert_same(lambda m: m.isin(m.tensor([1.5, 2.0]), m.tensor([2, 7])))
    same_error(lambda m: m.isin(m.tensor(True), m.tensor([False])), exact=True)


def test_real_tensor_surface():
    def run(lib):
        x = lib.ones(2, 3)
        return [(x.is_sparse, x.is_quantized, x.is_mkldnn, x.is_nested, x.is_sparse_csr, x.is_inference(),
                 x.is_conj(), x.is_neg()), x.real is x, x.conj() is x, lib.conj(x) is x, x.resolve_neg() is x,
                x.split_with_sizes([1, 2], dim=1)[1], x.narrow_copy(1, 0, 2), [c.shape[1] for c in x.unsafe_chunk(2, 1)],
                lib.tensor([0.0]).is_nonzero(), lib.is_nonzero(lib.tensor(3)), lib.is_same_size(x, lib.ones(3)),
                lib.arange(3.0).apply_(lambda v: v * 2), lib.arange(3.0).map_(lib.ones(3), lambda a, b: a + b),
                lib.real(x) is x]
    assert_same(run)
    for fn in (lambda m: m.ones(2).imag, lambda m: m.imag(m.ones(2)), lambda m: m.tensor([1, 2]).is_nonzero(),
               lambda m: m.tensor([]).is_nonzero(), lambda m: m.ones(3).split_with_sizes([1, 1]),
               lambda m: m.ones(2, requires_grad=True).apply_(lambda v: v)):
        same_error(fn, exact=True)


def test_special_namespace_edge_values():
    assert_same(lambda m: m.special.erfcx(m.tensor([-30.0, -2.0, 0.5, 1.0, 3.0, 20.0, 1e5], dtype=m.float64)),
                atol=1e-12)
    assert_same(lambda m: m.special.log_ndtr(m.tensor([-40.0, -5.0, -1.0, 0.0, 5.0], dtype=m.float64)), atol=1e-10)
    assert_same(lambda m: m.special.i0e(m.tensor([0.0, 1.0, 29.9, 30.0, 800.0, -800.0], dtype=m.float64)), atol=1e-12)
    assert_same(lambda m: m.special.i1e(m.tensor([0.0, -5.0, 31.0, 800.0, -800.0], dtype=m.float64)), atol=1e-12)
    assert_same(lambda m: m.special.entr(m.tensor([-1.0, 0.0, 0.5])))
    assert_same(lambda m: m.special.xlog1py(m.tensor([0.0, 2.0]), m.tensor([-1.0, 1.0])))
    assert_same(lambda m: m.special.xlog1py(m.tensor([2]), 1))
    assert_same(lambda m: m.special.ndtr(m.tensor([1])))
    assert_same(lambda m: m.special.ndtri(m.tensor([0.0, 0.5, 1.0])))
    assert_same(lambda m: m.special.multigammaln(m.tensor([0.5]), 3))
    assert_same(lambda m: m.special.softmax(m.tensor([1, 2]), 0, dtype=m.float32))
    same_error(lambda m: m.special.multigammaln(m.ones(1), 0), exact=True)


def test_gradient_index_reduce_triangular_solve_errors():
    for fn in (lambda m: m.gradient(m.tensor([1.0, 2.0]), edge_order=2),
               lambda m: m.gradient(m.tensor([1.0, 2.0]), edge_order=3),
               lambda m: m.zeros(3, 2).index_reduce(0, m.tensor([0, 0, 2]), m.ones(3, 2), "foo"),
               lambda m: m.zeros(3, 2).index_reduce(0, m.tensor([0, 0]), m.ones(3, 2), "prod"),
               lambda m: m.zeros(3, 2).index_reduce(0, m.tensor([0.0, 0, 2]), m.ones(3, 2), "prod")):
        same_error(fn, exact=True)
    assert_same(lambda m: m.ones(3, 2).index_reduce_(0, m.tensor([0, 0, 2]), m.arange(6.0).view(3, 2), "mean",
                                                     include_self=False))
    with pytest.warns(UserWarning, match="triangular_solve is deprecated"):
        r = ember.triangular_solve(ember.ones(2, 1), ember.eye(2) * 2)
    assert r.solution.tolist() == [[0.5], [0.5]] and r.cloned_coefficient.tolist() == [[2.0, 0.0], [0.0, 2.0]]


def test_ctc_loss_values_and_errors():
    rs = np.random.RandomState(1)
    lp = rs.randn(5, 2, 4)
    assert_same(lambda m: m.nn.functional.ctc_loss(m.tensor(lp).log_softmax(2), m.tensor([[1, 1, 1, 1]] * 2),
                                                   m.tensor([5, 3]), m.tensor([4, 2]), reduction="none"))
    assert_same(lambda m: m.nn.functional.ctc_loss(m.tensor(lp[:, 0]).log_softmax(1), m.tensor([1, 2]), m.tensor(5),
                                                   m.tensor(2)))
    for fn in (lambda m: m.nn.functional.ctc_loss(m.tensor(lp), m.tensor([[1, 2]] * 2), m.tensor([6, 5]),
                                                  m.tensor([2, 2])),
               lambda m: m.nn.functional.ctc_loss(m.tensor(lp), m.tensor([[1, 2]] * 2), m.tensor([5, 5]),
                                                  m.tensor([3, 2]))):
        same_error(fn, exact=True)
    assert repr(ember.nn.CTCLoss(blank=2)) == repr(torch.nn.CTCLoss(blank=2))


def test_post_accumulate_grad_hook_must_return_none():
    same_error(lambda m: (lambda x: (x.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(3)),
                                     (x * 1).sum().backward()))(m.ones(2, requires_grad=True)), exact=True)
    x = ember.ones(2, requires_grad=True)

    def triple(p):
        p.grad.mul_(3)
    x.register_post_accumulate_grad_hook(triple)
    (x * 1).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_data_parallel_on_cpu_and_distributed_queries():
    def run(lib):
        m = lib.nn.DataParallel(fixed_linear(lib))
        return repr(m), list(m.state_dict()), m(lib.ones(2, 3)), m.device_ids
    assert_same(run)
    same_error(lambda m: m.nn.parallel.DistributedDataParallel(m.nn.Linear(2, 2)), exact=True)
    for name in ("get_rank", "get_world_size", "barrier"):
        same_error(lambda m: getattr(m.distributed, name)(), exact=True)
    assert ember.distributed.is_initialized() is torch.distributed.is_initialized() is False
    # is_available() and init_process_group on MPI: tests/test_distributed.py


def test_jit_entry_points_run_eagerly():
    def twice(x):
        return x * 2
    assert ember.jit.script(twice) is twice
    lin = ember.nn.Linear(2, 1)
    assert ember.jit.trace(lin, ember.ones(1, 2)) is lin
    assert ember.jit.ignore(twice) is twice and ember.jit.unused(twice) is twice
    assert ember.jit.ignore(drop=True)(twice) is twice
    assert not ember.jit.is_scripting() and not ember.jit.is_tracing()
    assert ember.jit.annotate(int, 3) == 3
    assert ember.jit.wait(ember.jit.fork(twice, ember.ones(1))).tolist() == [2.0]
    assert not isinstance(lin, ember.jit.ScriptModule)
    with pytest.raises(NotImplementedError, match="state_dict"):
        ember.jit.save(lin, io.BytesIO())


@pytest.mark.parametrize("call", [
    lambda L: L.tensor([[1, 2], [3]]),
    lambda L: L.tensor([[[1, 2], [3, 4]], [[1, 2], [3]]]),
    lambda L: L.tensor([[1, 2], [3, 4], [5, 6, 7]]),
    lambda L: L.ones(3, 2).expand(4, 3),
    lambda L: L.ones(3, 2).expand(-1, 4, -1),
    lambda L: L.arange(0, 5, -1),
    lambda L: setattr(L.nn.Linear(2, 2), "weight", L.ones(2, 2)),
    lambda L: setattr(L.nn.Sequential(L.nn.ReLU()), "0", L.ones(2, dtype=L.float64)),
])
def test_common_mistakes_raise_torchs_errors(call):
    same_error(call)


def test_float_of_a_tensor_requiring_grad_warns_once_like_torch():
    import subprocess
    import sys
    import warnings
    code = ("import torch, warnings\nx = torch.tensor(2., requires_grad=True)\n"
            "with warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n"
            "    float(x); float(x * 2); float(x.detach())\nprint(len(w)); print(str(w[0].message).split(' (Triggered')[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n", 1)
    sys.modules["ember.tensor"]._FLOAT_WARNED[0] = False       # (the module; ember.tensor is the factory)
    x = ember.tensor(2.0, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        float(x)
        float(x * 2)
        float(x.detach())
    assert len(w) == int(out[0]) == 1
    assert str(w[0].message) == out[1].rstrip("\n")
    assert w[0].category is UserWarning and w[0].filename == __file__
