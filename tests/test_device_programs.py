"""Pieces of real training programs on the OpenCL device, each compared with torch (or with the same
program on ember's CPU): gradient clipping, norms, long cats, writes through basic indexing, factories
with device=, checks that read values back, checkpoints across devices, autocast and GradScaler.
Every test also checks that nothing fell back to the CPU where the device has the kernels."""
import io
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.devices import opencl as ocl

from device_support import needs_opencl, _quiet_fallback_warnings  # noqa: E402,F401 - autouse fixture

pytestmark = needs_opencl
DEV = "opencl"


def _np(t):
    return t.detach().cpu().numpy()


def _pair(shape, seed=0, dtype=np.float32):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return ember.tensor(a, device=DEV), torch.tensor(a)


@pytest.fixture
def no_fallback():
    """Forbid CPU fallbacks inside the test (an op without a device kernel raises)."""
    ocl.set_fallback_allowed(False)
    yield
    ocl.set_fallback_allowed(None)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_on_device_matches_torch(no_fallback, norm_type):
    shapes = [(4, 3), (3,), (2, 2, 2), (5,), (1,), (3, 3), (2,), (4,), (2, 3), (6,)]   # 10 tensors: > 8
    eg, tg = [], []
    for i, s in enumerate(shapes):
        e, t = _pair(s, seed=i)
        ep, tp = ember.zeros(s, device=DEV, requires_grad=True), torch.zeros(s, requires_grad=True)
        ep.grad, tp.grad = e * 3, t * 3
        eg.append(ep)
        tg.append(tp)
    en = nn.utils.clip_grad_norm_(eg, 0.5, norm_type=norm_type)
    tn = torch.nn.utils.clip_grad_norm_(tg, 0.5, norm_type=norm_type)
    assert en.device.type == DEV and en.dtype is ember.float32 and en.shape == ()
    np.testing.assert_allclose(_np(en), tn.numpy(), rtol=1e-5)
    for e, t in zip(eg, tg):
        assert e.grad.device.type == DEV
        np.testing.assert_allclose(_np(e.grad), t.grad.numpy(), rtol=1e-5, atol=1e-7)
    nn.utils.clip_grad_value_(eg, 0.01)
    torch.nn.utils.clip_grad_value_(tg, 0.01)
    for e, t in zip(eg, tg):
        np.testing.assert_allclose(_np(e.grad), t.grad.numpy(), rtol=1e-6)


def test_clip_grad_norm_nonfinite_error_on_device():
    p = ember.zeros(3, device=DEV, requires_grad=True)
    p.grad = ember.tensor([1.0, float("inf"), 0.0], device=DEV)
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(_np(p.grad), [1.0, np.inf, 0.0])    # refused before touching the grads


def test_norms_and_normalize_on_device(no_fallback):
    e, t = _pair((5, 7))
    for p in (2, 1, float("inf"), -float("inf"), 0, 3, 0.5):
        np.testing.assert_allclose(_np(ember.linalg.vector_norm(e, p)), torch.linalg.vector_norm(t, p).numpy(),
                                   rtol=1e-5)
        np.testing.assert_allclose(_np(e.norm(p, dim=1, keepdim=True)), t.norm(p, dim=1, keepdim=True).numpy(),
                                   rtol=1e-5)
    ex, tx = e.clone().requires_grad_(), t.clone().requires_grad_()
    ey, ty = F.normalize(ex, dim=1), torch.nn.functional.normalize(tx, dim=1)
    (ey * ey.flip(0)).sum().backward()
    (ty * ty.flip(0)).sum().backward()
    np.testing.assert_allclose(_np(ey), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(ex.grad), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert ex.grad.device.type == DEV


def test_cat_of_many_tensors_on_device(no_fallback):
    pairs = [_pair((2, i + 1, 3), seed=i) for i in range(11)]
    es = [e.requires_grad_() for e, _ in pairs]
    ts = [t.requires_grad_() for _, t in pairs]
    ec, tc = ember.cat(es, 1), torch.cat(ts, 1)
    np.testing.assert_array_equal(_np(ec), tc.detach().numpy())
    es2 = ember.stack([e[:, 0] for e in es], 2)
    ts2 = torch.stack([t[:, 0] for t in ts], 2)
    np.testing.assert_array_equal(_np(es2), ts2.detach().numpy())
    (ec.sin().sum() + es2.cos().sum()).backward()
    (tc.sin().sum() + ts2.cos().sum()).backward()
    for e, t in zip(es, ts):
        assert e.grad.device.type == DEV
        np.testing.assert_allclose(_np(e.grad), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    mixed = ember.cat([e.detach().double() if i % 2 else e.detach() for i, e in enumerate(es)], 1)
    assert mixed.dtype is ember.float64 and mixed.device.type == DEV
    np.testing.assert_allclose(_np(mixed), tc.detach().double().numpy())
    ints = ember.cat([ember.arange(i, device=DEV) for i in range(10)])
    assert ints.dtype is ember.int64
    np.testing.assert_array_equal(_np(ints), torch.cat([torch.arange(i) for i in range(10)]).numpy())


def test_basic_index_writes_on_device():
    for lib, dev in ((ember, DEV), (torch, "cpu")):
        a = lib.arange(12.0, device=dev).reshape(3, 4)
        a[:, 2] += 1
        a[0] = lib.tensor([9.0, 8, 7, 6], device=dev)
        a[1, 1:3] = 5
        a[2] = lib.tensor([[1.0, 2, 3, 4]], device=dev)      # leading 1-dims of the value are dropped
        x = lib.ones(3, 4, device=dev, requires_grad=True)
        y = x * 2
        y[:, 1] = a[:, 0]
        (y * lib.arange(12.0, device=dev).reshape(3, 4)).sum().backward()
        if lib is ember:
            got = (_np(a), _np(y), _np(x.grad))
            assert a.device.type == y.device.type == x.grad.device.type == DEV
        else:
            want = (a.numpy(), y.detach().numpy(), x.grad.numpy())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    z = ember.arange(6.0, device=DEV)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        z[1:] = z[:-1]
    np.testing.assert_array_equal(_np(z), np.arange(6.0))          # refused before writing


def test_factories_honour_device():
    cases = [("hann_window", (5,)), ("hamming_window", (5,)), ("blackman_window", (5,)), ("bartlett_window", (5,)),
             ("kaiser_window", (5,)), ("tril_indices", (3, 4, 1)), ("triu_indices", (3, 3))]
    for name, args in cases:
        e, t = getattr(ember, name)(*args, device=DEV), getattr(torch, name)(*args)
        assert e.device.type == DEV, name
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(_np(e), t.numpy(), rtol=1e-6, atol=1e-7, err_msg=name)
    s = ember.empty_strided((2, 3), (1, 2), device=DEV)
    assert s.device.type == DEV and s.stride() == torch.empty_strided((2, 3), (1, 2)).stride()
    s.copy_(ember.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(_np(s), np.arange(6.0).reshape(2, 3))


def test_value_reading_helpers_on_device():
    e, t = _pair((6, 7), seed=1)
    ew, tw = ember.where(e > 0), torch.where(t > 0)
    assert len(ew) == len(tw) == 2 and all(x.device.type == DEV for x in ew)
    for x, y in zip(ew, tw):
        np.testing.assert_array_equal(_np(x), y.numpy())
    assert ember.equal(e, e.clone()) and not ember.equal(e, e + 1)
    assert ember.allclose(e, e + 1e-9) and not ember.allclose(e, e + 1)
    idx = ember.tensor([3, 0, 5], device=DEV)
    oh = F.one_hot(idx, 6)
    assert oh.device.type == DEV and oh.dtype is ember.int64
    np.testing.assert_array_equal(_np(oh), torch.nn.functional.one_hot(torch.tensor([3, 0, 5]), 6).numpy())
    np.testing.assert_array_equal(_np(F.one_hot(idx)), torch.nn.functional.one_hot(torch.tensor([3, 0, 5])).numpy())
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        F.one_hot(idx, 4)
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.bincount(ember.tensor([1, -1], device=DEV))
    np.testing.assert_array_equal(_np(ember.bincount(ember.tensor([1, 1, 3], device=DEV), minlength=5)),
                                  [0, 2, 0, 1, 0])
    e[1, 2] = float("nan")
    t[1, 2] = float("nan")
    for how in ("linear", "lower", "higher", "midpoint", "nearest"):
        q = ember.quantile(e, ember.tensor([0.1, 0.5], device=DEV), dim=1, interpolation=how)
        assert q.device.type == DEV
        np.testing.assert_allclose(_np(q), torch.quantile(t, torch.tensor([0.1, 0.5]), dim=1, interpolation=how)
                                   .numpy(), rtol=1e-5)
        nq = ember.nanquantile(e, 0.3, dim=0, keepdim=True, interpolation=how)
        np.testing.assert_allclose(_np(nq), torch.nanquantile(t, 0.3, dim=0, keepdim=True, interpolation=how)
                                   .numpy(), rtol=1e-5)


def _mlp(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.BatchNorm1d(16), lib.nn.ReLU(), lib.nn.Linear(16, 4))


def test_checkpoint_across_devices_and_resume():
    m = _mlp(ember).to(DEV)
    opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
    x, y = ember.randn(10, 8, device=DEV), ember.randint(0, 4, (10,), device=DEV)
    for _ in range(2):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    buf = io.BytesIO()
    ember.save({"model": m.state_dict(), "opt": opt.state_dict()}, buf)
    for where, want in (("cpu", "cpu"), (None, DEV), (DEV, DEV), ({"opencl:0": "cpu"}, "cpu")):
        buf.seek(0)
        ck = ember.load(buf, map_location=where)
        assert {v.device.type for v in ck["model"].values()} == {want}
    for where in ("cpu", DEV):       # a CPU-mapped or device-mapped checkpoint into device parameters
        buf.seek(0)
        ck = ember.load(buf, map_location=where)
        m2 = _mlp(ember)
        m2.load_state_dict(ck["model"])
        m2.to(DEV)
        opt2 = ember.optim.AdamW(m2.parameters(), lr=1e-2)
        opt2.load_state_dict(ck["opt"])
        moved = {v.device.type for s in opt2.state.values() for k, v in s.items() if k != "step"}
        assert moved == {DEV}
        F.cross_entropy(m2(x), y).backward()
        opt2.step()
        got = [_np(p) for p in m2.parameters()]
        m3 = _mlp(ember).to(DEV)
        m3.load_state_dict(ck["model"])
        opt3 = ember.optim.AdamW(m3.parameters(), lr=1e-2)
        buf.seek(0)
        opt3.load_state_dict(ember.load(buf)["opt"])
        F.cross_entropy(m3(x), y).backward()
        opt3.step()
        for g, w in zip(got, (_np(p) for p in m3.parameters())):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_copy_between_devices_in_both_directions():
    d = ember.arange(6.0, device=DEV).reshape(2, 3)
    h = ember.empty(2, 3).copy_(d)
    assert h.device.type == "cpu"
    np.testing.assert_array_equal(h.numpy(), np.arange(6.0).reshape(2, 3))
    hi = ember.zeros(2, 3, dtype=ember.int32).copy_(d * 1.5)            # casts as it copies
    np.testing.assert_array_equal(hi.numpy(), (np.arange(6.0) * 1.5).astype(np.int32).reshape(2, 3))
    x = ember.ones(2, 3, device=DEV, requires_grad=True)
    buf = ember.zeros(2, 3, requires_grad=False)
    buf.copy_(x * 3)
    assert buf.requires_grad and buf.grad_fn is not None
    buf.sum().backward()
    assert x.grad.device.type == DEV
    np.testing.assert_array_equal(_np(x.grad), np.full((2, 3), 3.0))


def test_autocast_on_device_disables_itself_and_grad_scaler_runs():
    m = _mlp(ember).to(DEV)
    x, y = ember.randn(8, 8, device=DEV), ember.randint(0, 4, (8,), device=DEV)
    assert ember.amp.is_autocast_available(DEV)
    with pytest.warns(UserWarning, match="Disabling autocast"):
        ctx = ember.autocast(device_type=DEV, dtype=ember.float16)
    with ctx:
        out = m(x)
    assert out.dtype is ember.float32 and out.device.type == DEV
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler(DEV)
    before = [_np(p) for p in m.parameters()]
    scaler.scale(F.cross_entropy(m(x), y)).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 65536.0
    assert any(not np.array_equal(b, _np(p)) for b, p in zip(before, m.parameters()))
    m[0].weight.grad[0, 0] = float("inf")                                  # an overflow: the step is skipped
    opt.zero_grad()
    scaler.scale(F.cross_entropy(m(x), y)).backward()
    m[0].weight.grad[0, 0] = float("inf")
    before = [_np(p) for p in m.parameters()]
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 32768.0
    for b, p in zip(before, m.parameters()):
        np.testing.assert_array_equal(b, _np(p))


def test_mlp_training_loop_device_matches_cpu():
    def run(dev):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.LayerNorm(12), nn.Linear(12, 3)).to(dev)
        opt = ember.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
        sched = ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
        g = np.random.default_rng(0)
        X = ember.tensor(g.standard_normal((32, 6)), dtype=ember.float32)
        Y = ember.tensor(g.integers(0, 3, 32))
        dl = ember.utils.data.DataLoader(ember.utils.data.TensorDataset(X, Y), batch_size=16, pin_memory=True)
        losses = []
        for _ in range(2):
            for xb, yb in dl:
                xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
                loss = F.cross_entropy(model(xb), yb, label_smoothing=0.1)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                opt.step()
                sched.step()
                losses.append(loss.item())
        with ember.no_grad():
            out = model(X.to(dev))
        return losses, out, [p.grad for p in model.parameters()]
    ocl.reset_fallback_counts()
    dl, dout, dg = run(DEV)
    assert ocl.fallback_counts() == {}
    cl, cout, cg = run("cpu")
    np.testing.assert_allclose(dl, cl, rtol=1e-5)
    assert dout.device.type == DEV and dout.dtype is cout.dtype
    np.testing.assert_allclose(_np(dout), cout.numpy(), rtol=1e-4, atol=1e-5)
    for a, b in zip(dg, cg):
        assert a.device.type == DEV and a.dtype is b.dtype and a.shape == b.shape
        np.testing.assert_allclose(_np(a), b.numpy(), rtol=1e-4, atol=1e-6)


def test_no_warnings_leak_from_numpy_on_device_paths():
    e, _ = _pair((3, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ember.linalg.vector_norm(e / 0, 2)


def test_boolean_masks_and_nonzero_on_device():
    e, t = _pair((6, 7), seed=1)
    e3, t3 = _pair((3, 4, 5), seed=2)
    ocl.reset_fallback_counts()
    cases = [(lambda x, y: x[x > 0]), (lambda x, y: x[x.sum(1) > 0]), (lambda x, y: x[:, x[0] > 0]),
             (lambda x, y: y[y[..., 0] > 0]), (lambda x, y: y[:, y[0, :, 0] > 0, 1:3]),
             (lambda x, y: (x > 0.5).nonzero()), (lambda x, y: y.nonzero()), (lambda x, y: x.argwhere()),
             (lambda x, y: x.masked_select(x > 0)), (lambda x, y: x.masked_select(x[0] > 0))]
    for i, f in enumerate(cases):
        got, want = f(e, e3), f(t, t3)
        assert got.device.type == DEV and str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], i
        np.testing.assert_array_equal(_np(got), want.numpy(), err_msg=str(i))
    x, tx = e.clone().requires_grad_(), t.clone().requires_grad_()
    (x[x > 0] * ember.arange(float((_np(e) > 0).sum()), device=DEV)).sum().backward()
    (tx[tx > 0] * torch.arange(float((t.numpy() > 0).sum()))).sum().backward()
    np.testing.assert_array_equal(_np(x.grad), tx.grad.numpy())
    assert ocl.fallback_counts() == {}
    assert _np(e[e > 100]).shape == (0,) and _np((e > 100).nonzero()).shape == (0, 2)   # empty results


def test_einsum_isclose_roll_on_device(no_fallback):
    pairs = {k: _pair(s, seed=i) for i, (k, s) in enumerate(
        {"a": (6, 7), "b": (5, 7), "q": (2, 3, 4, 8), "k": (2, 3, 5, 8), "v": (3, 4)}.items())}
    es = {k: e.requires_grad_() for k, (e, _) in pairs.items()}
    ts = {k: t.requires_grad_() for k, (_, t) in pairs.items()}
    eqs = [("ij,kj->ik", "ab"), ("bhqd,bhkd->bhqk", "qk"), ("ij->j", "a"), ("ij->ji", "a"), ("ij,ij->i", "aa"),
           ("ij,kl->ijkl", "vv"), ("bhqd,bhkd->bqk", "qk")]
    e_tot, t_tot = 0, 0
    for eq, names in eqs:
        got = ember.einsum(eq, *[es[c] for c in names])
        want = torch.einsum(eq, *[ts[c] for c in names])
        assert got.device.type == DEV
        np.testing.assert_allclose(_np(got), want.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=eq)
        e_tot, t_tot = e_tot + got.sum(), t_tot + want.sum()
    e_tot.backward()
    t_tot.backward()
    for k in es:
        np.testing.assert_allclose(_np(es[k].grad), ts[k].grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)
    e, t = pairs["a"][0].detach(), pairs["a"][1].detach()
    for kw in ({}, {"rtol": 0.5, "equal_nan": True}, {"atol": 0.0, "rtol": 0.0}):
        np.testing.assert_array_equal(_np(ember.isclose(e, e.flip(0) * 0.9 + e * 0.1, **kw)),
                                      torch.isclose(t, t.flip(0) * 0.9 + t * 0.1, **kw).numpy())
    np.testing.assert_array_equal(_np(ember.isclose(ember.arange(5, device=DEV), ember.tensor([0, 1, 3, 3, 5],
                                                                                              device=DEV), atol=1)),
                                  torch.isclose(torch.arange(5), torch.tensor([0, 1, 3, 3, 5]), atol=1).numpy())
    for args in ((2, 1), ((1, -3), (0, 1)), (5,), (-9, 0)):
        np.testing.assert_array_equal(_np(e.roll(*args)), t.roll(*args).numpy())


def test_float_floor_division_on_device(no_fallback):
    e, t = _pair((5, 6), seed=3)
    e2, t2 = _pair((5, 6), seed=4)
    e2[0, 0] = 0.0
    t2[0, 0] = 0.0
    for f in (lambda a, b: a * 10 // b, lambda a, b: a // 3, lambda a, b: a // -2.5, lambda a, b: 7.0 // b,
              lambda a, b: (a * 10).div(b, rounding_mode="floor"), lambda a, b: a.double() // b.double()):
        np.testing.assert_array_equal(_np(f(e, e2)), f(t, t2).numpy())


def test_integer_index_writes_last_duplicate_wins(no_fallback):
    e, t = _pair((6, 7), seed=5)
    writes = [(lambda lib, d: lib.tensor([3, 0, 5], device=d), lambda lib, d, a: 1.5),
              (lambda lib, d: lib.tensor([3, 0, 3, -1], device=d), lambda lib, d, a: a[:4] * 2),
              (lambda lib, d: lib.tensor([1, 1], device=d), lambda lib, d, a: lib.arange(7.0, device=d))]
    for make_idx, make_val in writes:
        c, tc = e.clone(), t.clone()
        c[make_idx(ember, DEV)] = make_val(ember, DEV, e)
        tc[make_idx(torch, "cpu")] = make_val(torch, "cpu", t)
        np.testing.assert_array_equal(_np(c), tc.numpy())
    ci = ember.arange(10, device=DEV)
    ci.index_put_((ember.tensor([2, 2, 9], device=DEV),), ember.tensor([7, 8, 9], device=DEV))
    assert _np(ci).tolist() == [0, 1, 8, 3, 4, 5, 6, 7, 8, 9]
    with pytest.raises(IndexError, match="index 6 is out of bounds for dimension 0 with size 6"):
        e.clone()[ember.tensor([6], device=DEV)] = 1.0
    x, tx = e.clone().requires_grad_(), t.clone().requires_grad_()
    y, ty = x * 1, tx * 1
    y[ember.tensor([2, 2], device=DEV)] = e[:2]
    ty[torch.tensor([2, 2])] = t[:2]
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_array_equal(_np(x.grad), tx.grad.numpy())
