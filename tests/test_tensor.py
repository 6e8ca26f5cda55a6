"""Tensor basics against torch: metadata, conversions, memory sharing with NumPy, views' layout,
``repr`` text, Python protocol errors, iteration, deepcopy and ``Size``."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import ember
from autograd_support import same, same_error


def _both(data, **kw):
    return torch.tensor(data, **{k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}), \
        ember.tensor(data, **{k: getattr(ember, v) if k == "dtype" else v for k, v in kw.items()})


# ---- metadata -----------------------------------------------------------------------------------------

def test_metadata():
    def f(m):
        x = m.arange(24).reshape(2, 3, 4).to(m.float32)
        s = m.tensor(3.5)
        e = m.zeros(0, 3)
        out = []
        for t in (x, s, e, x.transpose(0, 2), x.narrow(2, 1, 2)):
            out.append([tuple(t.shape), tuple(t.size()), t.stride(), t.ndim, t.dim(), t.numel(), t.nelement(),
                        t.is_contiguous(), t.storage_offset(), t.element_size(), str(t.dtype)[6:],
                        t.is_floating_point(), t.ndimension(), t.itemsize, t.nbytes])
        out.append([x.size(1), x.size(-1), x.stride(0), x.stride(-1), str(x.device), x.device.type,
                    x.is_cuda, x.is_cpu, x.get_device(), x.is_leaf, x.requires_grad])
        return out
    same(f)
    same_error(lambda m: m.zeros(2, 3).size(2))
    same_error(lambda m: m.zeros(2, 3).stride(-3))


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                                "uint8", "bool"])
def test_dtype_properties(dt):
    def f(m):
        d = getattr(m, dt)
        t = m.zeros(2, dtype=d)
        return [str(t.dtype)[6:], t.element_size(), t.is_floating_point(), t.is_signed(), d.is_floating_point,
                d.is_signed, d.itemsize, repr(d)[6:], t.dtype == d]
    same(f)


def test_is_contiguous_and_strides_of_views():
    def f(m):
        x = m.zeros(3, 4, 5)
        views = [x, x.transpose(0, 1), x.permute(2, 0, 1), x.narrow(2, 0, 3), x.narrow(0, 1, 2), x.select(1, 2),
                 x.unsqueeze(1), x.t() if False else x.transpose(1, 2).contiguous(), x.narrow(1, 0, 1),
                 m.zeros(3, 1).expand(3, 4), x.reshape(60), x.view(12, 5), x.flatten(1), x.diagonal(0, 1, 2),
                 x.unfold(2, 2, 1), m.zeros(0, 4), m.zeros(1, 4).t(), x.narrow(2, 1, 1).squeeze(2)]
        return [(tuple(v.shape), v.stride(), v.is_contiguous(), v.storage_offset()) for v in views]
    same(f)


def test_storage_offset_of_views_and_aliases():
    def f(m):
        x = m.arange(20.0)
        v = x.narrow(0, 5, 10)
        w = v.narrow(0, 2, 3)
        d = w.detach()
        dv = d.narrow(0, 1, 1)
        return [v.storage_offset(), w.storage_offset(), d.storage_offset(), dv.storage_offset(),
                x.data.storage_offset(), w.data.storage_offset(), (x * 1).storage_offset(),
                x.view(4, 5).select(0, 3).storage_offset(), x.view(4, 5).t().narrow(0, 2, 1).storage_offset()]
    same(f)


def test_item_tolist_and_python_numbers():
    def f(m):
        out = []
        for t in (m.tensor(2.5), m.tensor([7]), m.tensor([[True]]), m.tensor(3, dtype=m.int32),
                  m.tensor(1.5, dtype=m.float16), m.tensor(1.5, dtype=m.bfloat16)):
            out.append([t.item(), type(t.item()).__name__, float(t), int(t), bool(t), t.tolist()])
        x = m.arange(6).reshape(2, 3)
        out.append([x.tolist(), m.tensor([1.5, 2.5]).tolist(), m.zeros(0).tolist(), m.zeros(2, 0).tolist(),
                    m.tensor([True, False]).tolist(), m.tensor([1.5], dtype=m.bfloat16).tolist()])
        out.append([int(m.tensor(-2.7)), float(m.tensor(3)), m.tensor(5).__index__(), [10, 20, 30][m.tensor(1)],
                    m.tensor(True).__index__(), round(m.tensor(2.567).item(), 2), f"{m.tensor(3.14159):.2f}"])
        return out
    same(f)


def test_conversion_errors():
    same_error(lambda m: m.tensor([1.0, 2.0]).item())
    same_error(lambda m: m.zeros(0).item())
    same_error(lambda m: bool(m.tensor([1, 2])))
    same_error(lambda m: bool(m.zeros(0)))
    same_error(lambda m: float(m.tensor([1.0, 2.0])))
    same_error(lambda m: int(m.tensor([1, 2])))
    same_error(lambda m: [1, 2][m.tensor(1.0)])
    same_error(lambda m: [1, 2][m.tensor([0, 1])])
    same_error(lambda m: m.tensor([1.0], requires_grad=True).numpy())
    same_error(lambda m: m.ones(2, dtype=m.bfloat16).numpy())


def test_len_and_iteration():
    def f(m):
        x = m.arange(6).reshape(3, 2)
        rows = [r for r in x]
        return [len(x), len(m.zeros(4)), rows, [type(r).__name__ for r in rows], list(m.tensor([1.5, 2.5])),
                len(m.zeros(0, 2)), list(m.zeros(0, 2))]
    same(f)
    same_error(lambda m: len(m.tensor(1.0)))
    same_error(lambda m: iter(m.tensor(1.0)))


def test_iteration_keeps_autograd():
    def f(m):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        total = None
        for i, row in enumerate(x):
            total = row * (i + 1) if total is None else total + row * (i + 1)
        total.sum().backward()
        return x.grad
    same(f)


def test_contains():
    def f(m):
        x = m.tensor([[1, 2], [3, 4]])
        return [2 in x, 5 in x, m.tensor(3) in x, 2.0 in x]
    same(f)
    same_error(lambda m: "a" in m.tensor([1, 2]))


# ---- NumPy interop -------------------------------------------------------------------------------------

def test_from_numpy_and_as_tensor_share_memory_both_ways():
    for m in (torch, ember):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = m.from_numpy(a)
        a[0, 0] = 100
        assert t[0, 0].item() == 100
        t.add_(1)
        assert a[1, 2] == 6.0
        b = np.ones(3)
        u = m.as_tensor(b)
        b[1] = 7
        assert u.tolist() == [1.0, 7.0, 1.0]
        u.mul_(2)
        assert b.tolist() == [2.0, 14.0, 2.0]
        assert str(u.dtype)[6:] == "float64"
        n = t.numpy()
        n[0, 1] = -5
        assert t.tolist()[0][1] == -5
        assert np.shares_memory(n, a)
        c = m.as_tensor(b, dtype=m.float32)      # a dtype change copies
        c.add_(1)
        assert b.tolist() == [2.0, 14.0, 2.0]
        v = np.arange(10.0)[2:]
        assert m.from_numpy(v).storage_offset() == 0


def test_numpy_of_views_shares_memory():
    for m in (torch, ember):
        x = m.zeros(3, 4)
        n = x.t().numpy()
        n[0, 2] = 9
        assert x.tolist()[2][0] == 9
        assert n.strides == (4, 16)


def test_from_numpy_dtypes():
    def f(m):
        out = []
        for npdt in (np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_):
            out.append(str(m.from_numpy(np.zeros(2, dtype=npdt)).dtype)[6:])
        return out
    same(f)
    with pytest.raises(TypeError):
        ember.from_numpy(np.zeros(2, dtype=np.uint32))
    with pytest.raises(TypeError):
        ember.from_numpy([1, 2])


# ---- repr ------------------------------------------------------------------------------------------------

def _repr_cases(m):
    f32 = m.float32
    cases = [
        m.tensor([1, 2, 3]),
        m.tensor([[1, -20, 300], [4, 5, 6]]),
        m.tensor([1.5, 2.25, -3.0]),
        m.tensor([1.0, 2.0, 3.0]),
        m.tensor([0.0, -0.0, 5.0]),
        m.tensor([1e-5, 1.0, 100.0]),
        m.tensor([1e10, 1.0]),
        m.tensor([123456789.0, 1.0]),
        m.tensor([1.0, 2000.0]),
        m.tensor([0.1, 0.25, 1000.5]),
        m.tensor([float("nan"), 1.5, float("inf"), -float("inf")]),
        m.tensor([float("nan"), 0.0]),
        m.tensor([float("nan")]),
        m.tensor([0.0, 0.0]),
        m.tensor([True, False, True]),
        m.tensor(True),
        m.tensor(3.5),
        m.tensor(2.0),
        m.tensor(-7),
        m.tensor(1e-8),
        m.zeros(0),
        m.zeros(0, 3),
        m.zeros(2, 0, dtype=m.int64),
        m.zeros(0, dtype=m.int64),
        m.zeros(0, dtype=m.bool),
        m.zeros(0, dtype=m.float64),
        m.tensor([1.0, 2.0], dtype=m.float64),
        m.tensor([1.5, 2.0], dtype=m.float16),
        m.tensor([1.5, 2.0], dtype=m.bfloat16),
        m.tensor([1, 2], dtype=m.int32),
        m.tensor([1, 2], dtype=m.uint8),
        m.tensor([1, 2], dtype=m.int8),
        m.tensor([1, 2], dtype=m.int16),
        m.tensor(5, dtype=m.int32),
        m.arange(1001),
        m.arange(2000.0).reshape(40, 50),
        m.arange(1200.0).reshape(2, 3, 200) / 7,
        m.arange(30.0).reshape(2, 3, 5) / 3,
        m.arange(60.0).reshape(3, 4, 5) - 30,
        m.arange(1, 25).reshape(2, 3, 4) * 1000000,
        m.arange(100.0) / 3,
        m.arange(40) * 123456,
        m.arange(12.0).reshape(3, 4).t(),
        m.ones(5, 5, dtype=m.bool),
        m.tensor([[1.5, 2.0], [3.25, 4.0]], requires_grad=True),
        m.tensor([1.0, 2.0], requires_grad=True) * 2,
        m.tensor([1.0, 2.0], requires_grad=True) + 1,
        (m.tensor([1.0, 2.0], requires_grad=True) * 2).sum(),
        m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True) / 3,
        m.tensor([1.0, 2.0], requires_grad=True).clone(),
        m.tensor(1.0, requires_grad=True),
        m.zeros(0, 2, requires_grad=True),
        m.zeros(3, 0, dtype=m.float64, requires_grad=True),
        m.arange(1500.0, dtype=m.float64, requires_grad=False) / 9,
        m.arange(12).reshape(3, 4) - 5,
        m.tensor([-1.5e-3, 2.5e-2]),
        m.tensor([12345.678, 0.5]),
        m.tensor([[1e-10, 1e10]], dtype=m.float64),
    ]
    return cases


def test_repr_matches_torch():
    tc, ec = _repr_cases(torch), _repr_cases(ember)
    assert len(tc) == len(ec)
    for t, e in zip(tc, ec):
        want = repr(t)
        got = repr(e).replace("ember.", "torch.")
        assert got == want, f"\nember:\n{got}\ntorch:\n{want}"
        assert str(e) == repr(e)


def test_repr_with_printoptions():
    try:
        for kw in [dict(precision=2), dict(sci_mode=True), dict(sci_mode=False), dict(threshold=5),
                   dict(edgeitems=1, threshold=5), dict(linewidth=30), dict(profile="short"), dict(profile="full")]:
            for m in (torch, ember):
                m.set_printoptions(profile="default")
                m.set_printoptions(**kw)
            for t, e in zip(_repr_cases(torch)[:12] + [torch.arange(40.0) / 7, torch.tensor([1e9, 1.0])],
                            _repr_cases(ember)[:12] + [ember.arange(40.0) / 7, ember.tensor([1e9, 1.0])]):
                assert repr(e).replace("ember.", "torch.") == repr(t), f"{kw}:\n{e!r}\n{t!r}"
    finally:
        torch.set_printoptions(profile="default")
        ember.set_printoptions(profile="default")


def test_repr_of_subclass_and_default_dtype():
    class MyT(ember.Tensor):
        pass
    t = ember.tensor([1.0, 2.0])
    s = MyT.__new__(MyT)
    s._data = t._data
    s._dtype = t._dtype
    assert repr(s) == "MyT([1., 2.])"
    try:
        ember.set_default_dtype(ember.float64)
        torch.set_default_dtype(torch.float64)
        for mk in (lambda m: m.tensor([1.5, 2.0]), lambda m: m.tensor([1.5], dtype=m.float32),
                   lambda m: m.zeros(0), lambda m: m.zeros(0, dtype=m.float32)):
            assert repr(mk(ember)).replace("ember.", "torch.") == repr(mk(torch))
    finally:
        ember.set_default_dtype(ember.float32)
        torch.set_default_dtype(torch.float32)


def test_format():
    def f(m):
        return [f"{m.tensor(2.5)}", f"{m.tensor(2.5):.3f}", f"{m.tensor(7):>4}", f"{m.tensor([1.0, 2.0])}"]
    e, t = same(lambda m: f(m)[:3])
    assert f(ember)[3] == f(torch)[3]
    same_error(lambda m: f"{m.tensor([1.0, 2.0]):.2f}")


# ---- deepcopy, pickling of Size -----------------------------------------------------------------------------

def test_deepcopy_leaf():
    def f(m):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        (x * x).sum().backward()
        y = copy.deepcopy(x)
        with m.no_grad():
            y.add_(10)
        return [x, y, y.requires_grad, y.is_leaf, y.grad, y.grad is not x.grad, y.data_ptr() != x.data_ptr()]
    same(f)
    same_error(lambda m: copy.deepcopy(m.tensor([1.0], requires_grad=True) * 2))


def test_deepcopy_preserves_shared_storage():
    def f(m):
        base = m.arange(12.0)
        a = base.view(3, 4)
        b = base.narrow(0, 4, 4)
        ca, cb = copy.deepcopy([a, b])
        ca.add_(100)
        return [ca, cb, base, cb.storage_offset(), ca.stride(), copy.deepcopy(a.t()).stride()]
    same(f)


def test_deepcopy_memo_and_dtypes():
    def f(m):
        x = m.tensor([1, 2, 3], dtype=m.int16)
        d = copy.deepcopy({"a": x, "b": x})
        return [d["a"] is d["b"], d["a"], str(d["a"].dtype)[6:]]
    same(f)


def test_size():
    def f(m):
        s = m.Size([2, 3, 4])
        return [s, type(s).__name__, s.numel(), m.Size([]).numel(), s[1], type(s[1:]).__name__, tuple(s[1:]),
                type(s + (5,)).__name__, type((1,) + s).__name__, tuple((1,) + s), type(s * 2).__name__,
                s == (2, 3, 4), s == m.Size([2, 3, 4]), hash(s) == hash((2, 3, 4)), len(s), list(s),
                repr(s)[6:], str(s)[6:], m.zeros(2, 3).shape == (2, 3), type(m.zeros(2).shape).__name__,
                s.count(3), s.index(4), m.Size(np.array([2, 3])) == (2, 3),
                type(pickle.loads(pickle.dumps(s))).__name__, pickle.loads(pickle.dumps(s)) == s,
                type(copy.deepcopy(s)).__name__]
    same(f)
    same_error(lambda m: m.Size([2.5]))
    same_error(lambda m: m.Size(["a"]))


# ---- misc ---------------------------------------------------------------------------------------------

def test_data_ptr_and_element_size():
    def f(m):
        x = m.zeros(4, 4)
        return [x.narrow(0, 1, 1).data_ptr() - x.data_ptr(), x.t().data_ptr() == x.data_ptr(),
                x.element_size(), m.zeros(2, dtype=m.float16).element_size(), x.is_shared() is False]
    same(f)


def test_requires_grad_flags_and_grad_setting():
    def f(m):
        x = m.zeros(2)
        x.requires_grad = True
        r = [x.requires_grad, x.is_leaf]
        x.requires_grad_(False)
        r.append(x.requires_grad)
        y = m.ones(2, requires_grad=True)
        y.grad = m.ones(2)
        r.append(y.grad)
        del y.grad
        r.append(y.grad is None)
        return r
    same(f)


def test_hash_and_identity():
    def f(m):
        a, b = m.ones(2), m.ones(2)
        d = {a: 1, b: 2}
        return [len(d), d[a], len({a, b, a})]
    same(f)


def test_deepcopy_base_and_view_together():
    def f(m):
        base = m.arange(6.0)
        v = base.narrow(0, 2, 3)
        cb, cv = copy.deepcopy([base, v])
        cb.add_(100)
        cv2, cb2 = copy.deepcopy([v, base])
        cb2.mul_(-1)
        return [cb, cv, cv.storage_offset(), cv2, cb2, cv2.storage_offset(), base]
    same(f)


def test_untyped_storage_is_shared_by_views_and_aliases():
    def f(m):
        x = m.zeros(3, 4)
        s = x.untyped_storage()
        views = [x.t(), x.narrow(0, 1, 1), x.detach(), x.data, x.view(12), x.t().detach().narrow(0, 1, 2)]
        return [s.nbytes(), len(s), [v.untyped_storage().data_ptr() == s.data_ptr() for v in views],
                [v.untyped_storage().nbytes() for v in views], (x + 1).untyped_storage().data_ptr() != s.data_ptr()]
    same(f)


@pytest.mark.parametrize("seed", range(60))
def test_repr_random_tensors_match_torch(seed):
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(0, 4))
    shape = tuple(int(rng.integers(1, 6)) for _ in range(nd))
    if seed % 7 == 0:
        shape = (int(rng.integers(2, 5)), int(rng.integers(300, 500)))      # summarised
    dt = ["float32", "float64", "float16", "int64", "int32", "bool", "bfloat16", "uint8"][seed % 8]
    scale = 10.0 ** float(rng.integers(-6, 10))
    vals = rng.standard_normal(shape) * scale
    if seed % 3 == 0:
        vals = np.round(vals)
    if seed % 5 == 0 and vals.size > 2:
        vals.reshape(-1)[0] = np.nan
        vals.reshape(-1)[1] = -np.inf
    if dt == "bool":
        vals = vals > 0
    elif dt in ("int64", "int32", "uint8"):
        vals = np.nan_to_num(np.abs(vals) if dt == "uint8" else vals, posinf=0, neginf=0).clip(-1e9, 1e9)
        vals = vals.clip(0, 255) if dt == "uint8" else vals
    t = torch.tensor(vals.tolist(), dtype=getattr(torch, dt))
    e = ember.tensor(vals.tolist(), dtype=getattr(ember, dt))
    if dt in ("float32", "float64") and seed % 2:
        t.requires_grad_()
        e.requires_grad_()
    assert repr(e).replace("ember.", "torch.") == repr(t), f"\n{e!r}\n{t!r}"
