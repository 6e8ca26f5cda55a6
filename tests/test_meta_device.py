"""The meta device (ember/devices/meta.py): tensors with shapes and no data, checked against torch's meta
tensors: shapes, dtypes and strides through creation, views, elementwise ops, matmul and modules; module
construction on meta then ``to_empty`` / ``skip_init`` / ``load_state_dict(assign=True)``; torch's errors
when values are read; the CPU path without the hook once the last meta tensor is gone."""
import gc

import numpy as np
import pytest
import torch

import ember
from ember.ops import registry as R


def _meta_info(t):
    return tuple(t.shape), str(t.dtype).split(".")[-1], tuple(t.stride()), t.is_contiguous(), t.is_meta, \
        str(t.device)


def same(fn):
    """``fn(lib)`` gives meta tensors (or tuples of them) with the same shapes, dtypes and strides."""
    a, b = fn(torch), fn(ember)
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert [_meta_info(x) for x in b] == [_meta_info(x) for x in a]


CASES = {
    "empty": lambda L: L.empty(2, 3, device="meta"),
    "zeros_int": lambda L: L.zeros(4, dtype=L.int64, device="meta"),
    "ones_like": lambda L: L.ones_like(L.empty(2, 3, device="meta")),
    "randn": lambda L: L.randn(3, 2, device="meta"),
    "full": lambda L: L.full((2, 2), 3.0, device="meta"),
    "to_meta": lambda L: L.randn(3, 4).to("meta"),
    "t": lambda L: L.empty(2, 3, device="meta").t(),
    "permute": lambda L: L.empty(2, 3, 4, device="meta").permute(2, 0, 1),
    "slice": lambda L: L.empty(4, 6, device="meta")[1:, ::2],
    "select": lambda L: L.empty(4, 6, device="meta")[2],
    "expand": lambda L: L.empty(3, 1, device="meta").expand(3, 5),
    "view": lambda L: L.empty(4, 6, device="meta").view(2, 12),
    "reshape_copy": lambda L: L.empty(4, 6, device="meta").t().reshape(-1),
    "contiguous": lambda L: L.empty(4, 6, device="meta").t().contiguous(),
    "chunk": lambda L: L.empty(4, 6, device="meta").chunk(3, 1),
    "add_scalar_tensor": lambda L: L.empty(2, 3, device="meta") + L.tensor(1.0),
    "broadcast": lambda L: L.empty(2, 1, device="meta") * L.empty(1, 3, device="meta"),
    "promote": lambda L: L.empty(2, dtype=L.int64, device="meta") / 2,
    "compare": lambda L: L.empty(2, 3, device="meta") > 0,
    "matmul": lambda L: L.empty(5, 2, 3, device="meta") @ L.empty(3, 4, device="meta"),
    "sum": lambda L: L.empty(2, 3, device="meta").sum(1),
    "max": lambda L: tuple(L.empty(2, 3, device="meta").max(1)),
    "cat": lambda L: L.cat([L.empty(2, 3, device="meta"), L.empty(1, 3, device="meta")]),
    "softmax": lambda L: L.empty(2, 3, device="meta").softmax(-1),
    "to_dtype": lambda L: L.empty(2, 3, device="meta").to(L.float64),
    "inplace": lambda L: L.empty(2, 3, device="meta").add_(1).mul_(2),
    "index_cpu": lambda L: L.empty(5, 3, device="meta")[L.tensor([0, 2])],
    "conv": lambda L: L.nn.functional.conv2d(L.empty(2, 3, 9, 9, device="meta"), L.empty(4, 3, 3, 3, device="meta"),
                                             stride=2, padding=1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_meta_ops_match_torch(name):
    same(CASES[name])


def _modules(L):
    nn = L.nn
    return [nn.Linear(4, 3), nn.Conv2d(3, 8, 3), nn.Embedding(10, 4, padding_idx=0), nn.LayerNorm(6),
            nn.BatchNorm2d(5), nn.LSTM(4, 6, batch_first=True), nn.MultiheadAttention(8, 2),
            nn.TransformerEncoderLayer(8, 2, 16)]


def test_module_construction_on_meta_and_forward_shapes():
    for build in (lambda L: _modules(L), ):
        with torch.device("meta"):
            tm = build(torch)
        with ember.device("meta"):
            em = build(ember)
        for a, b in zip(tm, em):
            assert [(n, _meta_info(p)) for n, p in b.named_parameters()] == \
                [(n, _meta_info(p)) for n, p in a.named_parameters()]
            assert [(n, _meta_info(p)) for n, p in b.named_buffers()] == \
                [(n, _meta_info(p)) for n, p in a.named_buffers()]
    # forward through the modules on meta inputs, including autograd
    for L in (torch, ember):
        with L.device("meta"):
            enc = L.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dropout=0.0)
        out = enc(L.empty(2, 5, 8, device="meta"))
        out.sum().backward()
        assert tuple(out.shape) == (2, 5, 8) and out.is_meta
        assert enc.linear1.weight.grad.is_meta and tuple(enc.linear1.weight.grad.shape) == (16, 8)
    same(lambda L: L.nn.Conv2d(3, 8, 3, stride=2, device="meta")(L.empty(2, 3, 16, 16, device="meta")))
    same(lambda L: L.nn.Embedding(10, 4, device="meta")(L.zeros(2, 5, dtype=L.int64, device="meta")))
    same(lambda L: L.nn.LSTM(4, 6, batch_first=True, device="meta")(L.empty(2, 5, 4, device="meta"))[1])


def test_materialize_with_to_empty_skip_init_and_assign():
    with ember.device("meta"):
        m = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2))
    assert ember.empty(1).device == ember.device("cpu")          # the block's default device is restored
    assert all(p.is_meta for p in m.parameters())
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    m.to_empty(device="cpu")
    assert all(p.device == ember.device("cpu") and isinstance(p, ember.nn.Parameter) for p in m.parameters())
    m.load_state_dict({k: ember.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    x = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    np.testing.assert_allclose(m(ember.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    with ember.device("meta"):
        m2 = ember.nn.Linear(4, 8)
    m2.load_state_dict({k: ember.tensor(v.numpy()) for k, v in ref[0].state_dict().items()}, assign=True)
    assert not m2.weight.is_meta and m2.weight.requires_grad
    np.testing.assert_array_equal(m2.weight.detach().numpy(), ref[0].weight.detach().numpy())
    lin = ember.nn.utils.skip_init(ember.nn.Linear, 3, 5)
    assert tuple(lin.weight.shape) == (5, 3) and lin.weight.device == ember.device("cpu")

    class NoDevice(ember.nn.Module):
        def __init__(self, n):
            super().__init__()
    with pytest.raises(RuntimeError, match="Module must support a 'device' arg"):
        ember.nn.utils.skip_init(NoDevice, 3)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        ember.nn.utils.skip_init(int, 3)


READS = ["t.tolist()", "t.cpu()", "t.to('cpu')", "t.numpy()", "bool(t.sum())", "t.nonzero()",
         "t + L.ones(2, 3)", "t.item()"]


@pytest.mark.parametrize("expr", READS)
def test_reading_values_raises_torchs_error(expr):
    errs = []
    for L in (torch, ember):
        t = L.empty(2, 3, device="meta")
        with pytest.raises(Exception) as info:
            eval(expr)
        errs.append(info.type)
    assert errs[1] is errs[0]


def test_repr_and_misc_match_torch():
    for L in (torch, ember):
        t = L.empty(2, 3, device="meta")
        assert t.get_device() == -1 and t.data_ptr() == 0
    assert repr(ember.empty(2, 3, device="meta")) == repr(torch.empty(2, 3, device="meta"))
    assert repr(ember.empty(2, dtype=ember.int64, device="meta")) == \
        repr(torch.empty(2, dtype=torch.int64, device="meta")).replace("torch.", "ember.")
    p = ember.nn.Linear(2, 3, device="meta").weight
    assert repr(p) == repr(torch.nn.Linear(2, 3, device="meta").weight)
    t = ember.empty(2, 3, device="meta")
    assert t.uniform_(-1, 1) is t and t.normal_() is t


def test_hook_leaves_when_the_last_meta_tensor_goes():
    gc.collect()
    t = ember.empty(3, device="meta")
    assert any(getattr(h, "__module__", "") == "ember.devices.meta" for h in R.HOOKS)
    del t
    gc.collect()
    assert not any(getattr(h, "__module__", "") == "ember.devices.meta" for h in R.HOOKS)
    assert R.DEVICE_RUN[0] is None or getattr(R.DEVICE_RUN[0], "__module__", "") != "ember.devices.meta"


def test_copy_across_meta_and_cpu_like_torch():
    for L in (torch, ember):
        m = L.empty(3, device="meta")
        assert m.copy_(L.ones(3)) is m and m.is_meta
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            L.ones(3).copy_(m)
        assert L.nn.Linear(3, 4).to("meta").weight.is_meta


def _init_empty_weights(L, build):
    """accelerate's ``init_empty_weights``: every parameter registered while building is re-wrapped on meta
    with ``param_cls(p.to(meta), **p.__dict__)``."""
    nn = L.nn
    old_register = nn.Module.register_parameter

    def register_empty_parameter(module, name, param):
        old_register(module, name, param)
        if param is not None:
            param_cls = type(module._parameters[name])
            kwargs = module._parameters[name].__dict__
            kwargs["requires_grad"] = param.requires_grad
            module._parameters[name] = param_cls(module._parameters[name].to(L.device("meta")), **kwargs)
    nn.Module.register_parameter = register_empty_parameter
    try:
        return build()
    finally:
        nn.Module.register_parameter = old_register


def test_accelerate_style_empty_weights_then_assign():
    outs = []
    for L in (torch, ember):
        m = _init_empty_weights(L, lambda: L.nn.Sequential(L.nn.Linear(4, 8), L.nn.LayerNorm(8), L.nn.Linear(8, 2)))
        assert all(p.is_meta and p.requires_grad and type(p) is L.nn.Parameter for p in m.parameters())
        m.load_state_dict({k: L.ones(v.shape) for k, v in m.state_dict().items()}, assign=True)
        assert not any(p.is_meta for p in m.parameters())
        outs.append(m(L.ones(1, 4)).detach().numpy())
        with L.device("meta"):
            assert L.get_default_device().type == "meta" and L.arange(5).is_meta and L.tensor([1.0]).is_meta
        assert L.get_default_device().type == "cpu"
    np.testing.assert_allclose(outs[1], outs[0])
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        ember.nn.Parameter(ember.ones(2), foo=1)


def test_huge_meta_factories_allocate_nothing():
    a = ember.zeros(100000, 100000, device="meta")       # 40 GB if it were allocated
    b = ember.ones(60000, 60000, device=ember.device("meta"))
    with ember.device("meta"):
        c = ember.empty(100000, 100000)
        lin = ember.nn.Linear(40000, 40000)
    assert a.is_meta and b.is_meta and c.is_meta and lin.weight.is_meta
    assert tuple((a @ c).shape) == (100000, 100000)
