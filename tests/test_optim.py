"""ember.optim against torch.optim: trajectories, param groups, state_dict (incl. torch checkpoints), errors."""
import io
import math
import pickle

import numpy as np
import pytest
import torch

import ember

STEPS = 20
# float32: ~1e-5 of the O(1) parameter scale. Bitwise equality is out of reach (torch's vectorised kernels fuse
# multiply-adds) and the adaptive methods amplify rounding differences where a gradient nears zero.
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-10, atol=1e-12)}


# ---- the shared problem: a tiny linear model on fixed data plus a non-quadratic term ---------------------
def _data(seed=0):
    rs = np.random.RandomState(seed)
    return dict(W=rs.randn(3, 4), b=rs.randn(3), v=rs.randn(5), X=rs.randn(8, 4), Y=rs.randn(8, 3), c=rs.randn(5))


def _problem(lib, dtype="float32", seed=0):
    d = _data(seed)
    dt = getattr(lib, dtype)
    params = [lib.tensor(d[k], dtype=dt, requires_grad=True) for k in ("W", "b", "v")]
    X, Y, c = (lib.tensor(d[k], dtype=dt) for k in ("X", "Y", "c"))

    def loss_fn():
        W, b, v = params
        out = X @ W.T + b
        return ((out - Y) ** 2).mean() + (((v - c) ** 2) * (v * 0.1 + 1.5)).sum() * 0.5
    return params, loss_fn


def _train(opt, params, loss_fn, steps, set_to_none=True):
    for _ in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        loss_fn().backward()
        opt.step()


def _np(params):
    return [p.detach().numpy().copy() for p in params]


def _groups(params, spec):
    """spec None: plain param list; otherwise a list of per-group option dicts (params split W | b, v)."""
    if spec is None:
        return params
    return [dict(params=[params[0]], **spec[0]), dict(params=params[1:], **spec[1])]


def _run(lib, name, kw, dtype, steps=STEPS, groups=None, seed=0):
    params, loss_fn = _problem(lib, dtype, seed)
    opt = getattr(lib.optim, name)(_groups(params, groups), **kw)
    _train(opt, params, loss_fn, steps)
    return _np(params), opt


def _assert_close(a, b, dtype):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, **TOL[dtype])


CONFIGS = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("SGD", dict(lr=0.02, weight_decay=0.2, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True, maximize=True)),
    ("Adam", dict(lr=0.05, betas=(0.3, 0.8), eps=1e-3)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    ("AdamW", dict(lr=0.05, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1, alpha=0.9)),
    ("RMSprop", dict(lr=0.01, maximize=True, eps=1e-4)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, maximize=True, eps=1e-4)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.5, weight_decay=0.1)),
    ("Adadelta", dict(maximize=True, eps=1e-4)),
    ("Adamax", dict(lr=0.05)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, betas=(0.3, 0.9), maximize=True)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, betas=(0.8, 0.9))),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, t0=5, lambd=0.01, alpha=0.5, weight_decay=0.1)),
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
    ("Rprop", dict(lr=0.05)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in CONFIGS]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, kw", CONFIGS, ids=IDS)
def test_trajectory_matches_torch(name, kw, dtype):
    a, ot = _run(torch, name, kw, dtype)
    b, oe = _run(ember, name, kw, dtype)
    if dtype == "float32" and kw.get("centered"):
        # sqrt(E[g^2] - E[g]^2) cancels catastrophically once a gradient settles: float32 rounding
        # differences (torch's kernels fuse multiply-adds) are amplified there
        for x, y in zip(b, a):
            np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-5)
    else:
        _assert_close(b, a, dtype)
    # same state layout: per-parameter keys (in order), dtypes and values
    st, se = ot.state_dict(), oe.state_dict()
    assert list(se["state"].keys()) == list(st["state"].keys())
    for k in st["state"]:
        assert list(se["state"][k].keys()) == list(st["state"][k].keys())
        for key, tv in st["state"][k].items():
            ev = se["state"][k][key]
            assert str(ev.dtype).replace("ember", "torch") == str(tv.dtype), key
            tv = tv.numpy()
            np.testing.assert_allclose(ev.numpy(), tv, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(tv).max())))
    assert se["param_groups"] == st["param_groups"]


GROUP_CONFIGS = [
    ("SGD", dict(lr=0.05, momentum=0.9), [dict(lr=0.02, nesterov=True), dict(weight_decay=0.1, dampening=0.1)]),
    ("Adam", dict(lr=0.05), [dict(lr=0.01, amsgrad=True), dict(betas=(0.5, 0.9), weight_decay=0.2)]),
    ("AdamW", dict(lr=0.05), [dict(weight_decay=0.0), dict(maximize=True)]),
    ("RMSprop", dict(lr=0.01), [dict(centered=True), dict(momentum=0.9, lr=0.003)]),
    ("Adagrad", dict(lr=0.1), [dict(lr_decay=0.1), dict(weight_decay=0.3)]),
    ("Adadelta", dict(), [dict(rho=0.6), dict(lr=0.3)]),
    ("NAdam", dict(lr=0.05), [dict(momentum_decay=0.02), dict(weight_decay=0.1)]),
    ("RAdam", dict(lr=0.05), [dict(lr=0.1), dict(betas=(0.7, 0.95))]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, kw, groups", GROUP_CONFIGS, ids=[c[0] for c in GROUP_CONFIGS])
def test_param_groups_match_torch(name, kw, groups, dtype):
    a, ot = _run(torch, name, kw, dtype, groups=groups)
    b, oe = _run(ember, name, kw, dtype, groups=groups)
    _assert_close(b, a, dtype)
    assert oe.state_dict()["param_groups"] == ot.state_dict()["param_groups"]
    assert repr(oe) == repr(ot)


@pytest.mark.parametrize("name, kw", [("SGD", dict(lr=0.05, momentum=0.9)), ("Adam", dict(lr=0.05)),
                                      ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.2)),
                                      ("RMSprop", dict(lr=0.01, centered=True))])
def test_add_param_group_midway(name, kw):
    res = []
    for lib in (torch, ember):
        params, loss_fn = _problem(lib, "float64")
        opt = getattr(lib.optim, name)([params[0]], **kw)
        _train(opt, params, loss_fn, 5)
        opt.add_param_group({"params": params[1:], "lr": 0.02})
        _train(opt, params, loss_fn, 10)
        res.append((_np(params), opt.state_dict()))
    _assert_close(res[1][0], res[0][0], "float64")
    assert res[1][1]["param_groups"] == res[0][1]["param_groups"]


def test_add_param_group_errors():
    for lib in (torch, ember):
        p, q = lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True)
        opt = lib.optim.SGD([p], lr=0.1)
        with pytest.raises(ValueError, match="more than one parameter group"):
            opt.add_param_group({"params": [p]})
        with pytest.raises(TypeError, match="param_group must be a dict"):
            opt.add_param_group([q])
        with pytest.raises(TypeError, match="ordered collections"):
            opt.add_param_group({"params": {q}})
        with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
            opt.add_param_group({"params": [1.0]})
        with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
            opt.add_param_group({"params": [q * 2]})
        with pytest.raises(ValueError, match="with/without names"):
            opt.add_param_group({"params": [("q", q)]})
        opt.add_param_group({"params": q, "momentum": 0.5})
        assert opt.param_groups[1]["params"][0] is q
        assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["lr"] == 0.1
        with pytest.warns(UserWarning, match="duplicate parameters"):
            lib.optim.SGD([q, q], lr=0.1)


def test_constructor_errors():
    for lib in (torch, ember):
        p = lib.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match="empty parameter list"):
            lib.optim.SGD([], lr=0.1)
        with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
            lib.optim.SGD(p, lr=0.1)


ERRORS = [
    ("SGD", dict(lr=-0.1), "Invalid learning rate: -0.1"),
    ("SGD", dict(momentum=-1), "Invalid momentum value: -1"),
    ("SGD", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    ("SGD", dict(nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", dict(nesterov=True, momentum=0.9, dampening=0.1), "Nesterov momentum requires"),
    ("Adam", dict(lr=-1.0), "Invalid learning rate: -1.0"),
    ("Adam", dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    ("Adam", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    ("Adam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    ("Adam", dict(betas=(0, 0.9)), "betas must be either both floats or both Tensors"),
    ("Adam", dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    ("AdamW", dict(lr=-1.0), "Invalid learning rate"),
    ("AdamW", dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1"),
    ("RMSprop", dict(lr=-1.0), "Invalid learning rate"),
    ("RMSprop", dict(eps=-1.0), "Invalid epsilon value"),
    ("RMSprop", dict(momentum=-1.0), "Invalid momentum value"),
    ("RMSprop", dict(weight_decay=-1.0), "Invalid weight_decay value"),
    ("RMSprop", dict(alpha=-1.0), "Invalid alpha value: -1.0"),
    ("Adagrad", dict(lr=-1.0), "Invalid learning rate"),
    ("Adagrad", dict(lr_decay=-1.0), "Invalid lr_decay value: -1.0"),
    ("Adagrad", dict(weight_decay=-1.0), "Invalid weight_decay value"),
    ("Adagrad", dict(initial_accumulator_value=-1.0), "Invalid initial_accumulator_value value: -1.0"),
    ("Adagrad", dict(eps=-1.0), "Invalid epsilon value"),
    ("Adadelta", dict(lr=-1.0), "Invalid learning rate"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
    ("Adadelta", dict(eps=-1.0), "Invalid epsilon value"),
    ("Adadelta", dict(weight_decay=-1.0), "Invalid weight_decay value"),
    ("Adamax", dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1"),
    ("Adamax", dict(eps=-1.0), "Invalid epsilon value"),
    ("NAdam", dict(momentum_decay=-1.0), "Invalid momentum_decay value: -1.0"),
    ("NAdam", dict(betas=(-0.1, 0.9)), "Invalid beta parameter at index 0"),
    ("RAdam", dict(weight_decay=-1.0), "Invalid weight_decay value"),
    ("RAdam", dict(lr=-1.0), "Invalid learning rate"),
    ("ASGD", dict(lr=-1.0), "Invalid learning rate"),
    ("ASGD", dict(weight_decay=-1.0), "Invalid weight_decay value"),
    ("Rprop", dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
    ("Rprop", dict(lr=-1.0), "Invalid learning rate"),
    ("LBFGS", dict(lr=-1.0), "Invalid learning rate"),
]


@pytest.mark.parametrize("name, kw, match", ERRORS, ids=[f"{e[0]}-{list(e[1])[0]}" for e in ERRORS])
def test_invalid_options_raise_like_torch(name, kw, match):
    for lib in (torch, ember):
        p = lib.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match=match):
            getattr(lib.optim, name)([p], **kw)


def test_defaults_and_repr_match_torch():
    for name in ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD",
                 "Rprop", "LBFGS"]:
        ot = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)])
        oe = getattr(ember.optim, name)([ember.zeros(2, requires_grad=True)])
        assert oe.defaults == ot.defaults, name
        assert list(oe.defaults) == list(ot.defaults), name
        assert repr(oe) == repr(ot), name


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    for lib in (torch, ember):
        params, loss_fn = _problem(lib)
        opt = lib.optim.SGD(params, lr=0.1)
        loss_fn().backward()
        g0 = params[0].grad
        opt.zero_grad(set_to_none=set_to_none)
        if set_to_none:
            assert all(p.grad is None for p in params)
        else:
            assert params[0].grad is g0
            assert all(float(p.grad.abs().sum()) == 0.0 for p in params)
            assert not g0.requires_grad


def test_zero_grad_detaches_graph_grads():
    for lib in (torch, ember):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        (x ** 3).sum().backward(create_graph=True)
        assert x.grad.requires_grad
        opt = lib.optim.SGD([x], lr=0.1)
        g = x.grad
        opt.zero_grad(set_to_none=False)
        assert x.grad is g and g.grad_fn is None and not g.requires_grad
        assert g.tolist() == [0.0, 0.0]


def test_set_to_none_false_trajectory():
    a = _np(_run_with(torch, set_to_none=False))
    b = _np(_run_with(ember, set_to_none=False))
    _assert_close(b, a, "float64")


def _run_with(lib, set_to_none):
    params, loss_fn = _problem(lib, "float64")
    opt = lib.optim.SGD(params, lr=0.05, momentum=0.9)
    _train(opt, params, loss_fn, STEPS, set_to_none=set_to_none)
    return params


def test_params_without_grad_are_skipped():
    for lib in (torch, ember):
        p = lib.ones(3, requires_grad=True)
        q = lib.ones(3, requires_grad=True)
        opt = lib.optim.Adam([p, q], lr=0.1)
        (p * 2).sum().backward()
        opt.step()
        assert q.tolist() == [1.0, 1.0, 1.0]
        assert len(opt.state) == 1


@pytest.mark.parametrize("name, kw", [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)), ("Adam", dict(lr=0.05, amsgrad=True)),
    ("AdamW", dict(lr=0.05)), ("RMSprop", dict(lr=0.01, centered=True, momentum=0.3)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)), ("Adadelta", dict()), ("Adamax", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05)), ("RAdam", dict(lr=0.05)), ("ASGD", dict(lr=0.05, t0=3)), ("Rprop", dict(lr=0.05)),
])
def test_state_dict_resume_is_exact(name, kw):
    full, _ = _run(ember, name, kw, "float32", steps=STEPS)
    params, loss_fn = _problem(ember, "float32")
    opt = getattr(ember.optim, name)(params, **kw)
    _train(opt, params, loss_fn, STEPS // 2)
    buf = io.BytesIO()
    ember.save({"opt": opt.state_dict(), "params": [p.detach() for p in params]}, buf)
    buf.seek(0)
    ck = ember.load(buf)
    params2, loss_fn2 = _problem(ember, "float32")
    with ember.no_grad():
        for p, saved in zip(params2, ck["params"]):
            p.copy_(saved)
    opt2 = getattr(ember.optim, name)(params2, **kw)
    opt2.load_state_dict(ck["opt"])
    _train(opt2, params2, loss_fn2, STEPS // 2)
    for x, y in zip(_np(params2), full):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name, kw", [
    ("SGD", dict(lr=0.05, momentum=0.9)), ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.05)), ("RMSprop", dict(lr=0.01, centered=True, momentum=0.3)),
    ("Adagrad", dict(lr=0.1)), ("Adadelta", dict()), ("Adamax", dict(lr=0.05)), ("NAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05)), ("ASGD", dict(lr=0.05, t0=3)), ("Rprop", dict(lr=0.05)),
])
def test_state_dict_round_trip_with_torch(name, kw, tmp_path):
    """ember state -> ember.save -> torch.load(weights_only) -> torch optimizer continues as after torch's own
    save/load, and torch state -> torch.save -> ember.load -> ember optimizer continues the same way."""
    half = STEPS // 2

    def first_half(lib):
        params, loss_fn = _problem(lib, "float64")
        opt = getattr(lib.optim, name)(params, **kw)
        _train(opt, params, loss_fn, half)
        return params, opt

    def second_half(lib, values, state_dict):
        params, loss_fn = _problem(lib, "float64")
        with lib.no_grad():
            for p, v in zip(params, values):
                p.copy_(lib.tensor(v))
        opt = getattr(lib.optim, name)(params, **kw)
        opt.load_state_dict(state_dict)
        _train(opt, params, loss_fn, half)
        return _np(params)

    # reference: torch, interrupted by its own save/load (loading casts float32 counters like ASGD's eta to
    # the parameters' dtype, so the reference must include the round trip too)
    pt, ot = first_half(torch)
    torch.save(ot.state_dict(), tmp_path / "t.pt")
    ref = second_half(torch, _np(pt), torch.load(tmp_path / "t.pt", weights_only=True))
    # ember's checkpoint continued in torch
    pe, oe = first_half(ember)
    ember.save(oe.state_dict(), tmp_path / "e.pt")
    _assert_close(second_half(torch, _np(pe), torch.load(tmp_path / "e.pt", weights_only=True)), ref, "float64")
    # torch's checkpoint continued in ember
    _assert_close(second_half(ember, _np(pt), ember.load(tmp_path / "t.pt")), ref, "float64")
    # the checkpoints hold the same structure
    se, st = ember.load(tmp_path / "e.pt"), torch.load(tmp_path / "t.pt", weights_only=True)
    assert se["param_groups"] == st["param_groups"]
    assert {k: list(v) for k, v in se["state"].items()} == {k: list(v) for k, v in st["state"].items()}


def test_state_dict_is_live_and_load_casts_dtype():
    params, loss_fn = _problem(ember, "float64")
    opt = ember.optim.Adam(params, lr=0.05)
    _train(opt, params, loss_fn, 3)
    sd = opt.state_dict()
    assert sd["state"][0]["exp_avg"] is opt.state[params[0]]["exp_avg"]
    assert sd["state"][0]["step"].dtype == ember.float32 and float(sd["state"][0]["step"]) == 3.0
    # state saved from float64 params loads into float32 params cast to float32 ('step' keeps float32)
    p32, loss32 = _problem(ember, "float32")
    o32 = ember.optim.Adam(p32, lr=0.05)
    o32.load_state_dict(sd)
    st = o32.state[p32[0]]
    assert st["exp_avg"].dtype == ember.float32 and st["step"].dtype == ember.float32
    # torch does the same
    pt, lt = _problem(torch, "float64")
    ot = torch.optim.Adam(pt, lr=0.05)
    _train(ot, pt, lt, 3)
    pt32, _ = _problem(torch, "float32")
    ot32 = torch.optim.Adam(pt32, lr=0.05)
    ot32.load_state_dict(ot.state_dict())
    assert ot32.state[pt32[0]]["exp_avg"].dtype == torch.float32


def test_load_state_dict_errors():
    for lib in (torch, ember):
        params, _ = _problem(lib)
        opt = lib.optim.SGD(params, lr=0.1)
        sd = opt.state_dict()
        opt2 = lib.optim.SGD([{"params": params[:1]}, {"params": params[1:]}], lr=0.1)
        with pytest.raises(ValueError, match="different number of parameter groups"):
            opt2.load_state_dict(sd)
        opt3 = lib.optim.SGD(params[:2], lr=0.1)
        with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
            opt3.load_state_dict(sd)


def test_load_state_dict_restores_hyperparameters():
    params, _ = _problem(ember)
    opt = ember.optim.SGD(params, lr=0.1, momentum=0.9)
    opt.param_groups[0]["lr"] = 0.003
    sd = opt.state_dict()
    opt2 = ember.optim.SGD(params, lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.003 and opt2.param_groups[0]["momentum"] == 0.9
    assert opt2.param_groups[0]["params"] == params


def test_named_parameters_groups():
    for lib in (torch, ember):
        params, _ = _problem(lib)
        opt = lib.optim.SGD([("w", params[0]), ("b", params[1])], lr=0.1)
        assert opt.param_groups[0]["param_names"] == ["w", "b"]
        assert opt.state_dict()["param_groups"][0]["param_names"] == ["w", "b"]


def test_hooks():
    calls = []
    params, loss_fn = _problem(ember)
    opt = ember.optim.SGD(params, lr=0.1)
    h1 = opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre", o is opt)))
    h2 = opt.register_step_post_hook(lambda o, a, k: calls.append(("post", o is opt)))
    g = ember.optim.optimizer.register_optimizer_step_pre_hook(lambda o, a, k: calls.append(("gpre",)))
    loss_fn().backward()
    opt.step()
    assert calls == [("gpre",), ("pre", True), ("post", True)]
    h1.remove()
    h2.remove()
    g.remove()
    calls.clear()
    opt.step()
    assert calls == []

    def sd_post(o, sd):
        sd["extra"] = 1
        return sd
    opt.register_state_dict_pre_hook(lambda o: calls.append("sdpre"))
    opt.register_state_dict_post_hook(sd_post)
    sd = opt.state_dict()
    assert calls == ["sdpre"] and sd["extra"] == 1
    opt.register_load_state_dict_pre_hook(lambda o, sd: calls.append("lpre"))
    opt.register_load_state_dict_post_hook(lambda o: calls.append("lpost"))
    opt.load_state_dict(sd)
    assert calls == ["sdpre", "lpre", "lpost"]


def test_step_pre_hook_can_replace_args():
    params, loss_fn = _problem(ember)
    opt = ember.optim.SGD(params, lr=0.1)
    opt.register_step_pre_hook(lambda o, a, k: ((o,), {"closure": lambda: 7.0}))
    assert opt.step() == 7.0
    opt.register_step_pre_hook(lambda o, a, k: 3)
    with pytest.raises(RuntimeError, match="must return None or a tuple"):
        opt.step()


def test_closure_returns_loss_and_runs_with_grad():
    params, loss_fn = _problem(ember)
    opt = ember.optim.Adam(params, lr=0.1)
    closure = _closure(opt, loss_fn)
    with ember.no_grad():
        loss = opt.step(closure)
    assert loss.requires_grad is False or loss.grad_fn is not None
    assert isinstance(float(loss), float)


def test_tensor_lr():
    res = []
    for lib in (torch, ember):
        params, loss_fn = _problem(lib, "float64")
        opt = lib.optim.Adam(params, lr=lib.tensor(0.05))
        _train(opt, params, loss_fn, 5)
        res.append(_np(params))
    _assert_close(res[1], res[0], "float64")
    for lib in (torch, ember):
        with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
            lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=lib.tensor([0.1, 0.2]))


def test_unsupported_options_raise():
    for lib in (torch, ember):
        p = lib.ones(2, requires_grad=True)
        p.grad = lib.ones(2)
        with pytest.raises(AssertionError, match="capturable=True"):
            lib.optim.Adam([p], capturable=True).step()
        with pytest.raises(RuntimeError):
            lib.optim.SGD([p], lr=0.1, differentiable=True).step()
    # fused / foreach are accepted and give the same result as the default path
    res = []
    for kw in [dict(), dict(fused=True), dict(foreach=True)]:
        params, loss_fn = _problem(ember, "float64")
        opt = ember.optim.Adam(params, lr=0.05, **kw)
        _train(opt, params, loss_fn, 3)
        res.append(_np(params))
    for r in res[1:]:
        _assert_close(r, res[0], "float64")


def test_version_counter_bumped():
    p = ember.ones(3, requires_grad=True)
    y = p * p                            # saves p for backward
    opt = ember.optim.SGD([p], lr=0.1)
    p.grad = ember.ones(3)
    v = p._version
    opt.step()
    assert p._version > v
    with pytest.raises(RuntimeError):
        y.sum().backward()


def test_optimizer_pickle():
    params, loss_fn = _problem(ember)
    opt = ember.optim.Adam(params, lr=0.05)
    _train(opt, params, loss_fn, 2)
    opt2 = pickle.loads(pickle.dumps(opt))
    assert opt2.param_groups[0]["lr"] == 0.05
    assert len(opt2.state) == 3


def test_adagrad_state_exists_before_step():
    for lib in (torch, ember):
        params, _ = _problem(lib)
        opt = lib.optim.Adagrad(params, initial_accumulator_value=0.3)
        sd = opt.state_dict()
        assert list(sd["state"][0].keys()) == ["step", "sum"]
        assert float(sd["state"][1]["sum"][0]) == pytest.approx(0.3)


# ---- LBFGS -------------------------------------------------------------------------------------------

def _closure(opt, loss_fn):
    """The closure LBFGS (or any optimizer) calls each step: zero the grads, evaluate and backpropagate."""
    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss
    return closure


def _run_lbfgs(lib, kw, dtype, steps):
    params, loss_fn = _problem(lib, dtype)
    opt = lib.optim.LBFGS(params, **kw)
    losses = []
    closure = _closure(opt, loss_fn)
    for _ in range(steps):
        losses.append(float(opt.step(closure).detach()))
    return _np(params), losses, opt


LBFGS_CONFIGS = [dict(), dict(line_search_fn="strong_wolfe"), dict(lr=0.5, history_size=3, max_iter=7),
                 dict(line_search_fn="strong_wolfe", history_size=2, max_iter=10),
                 dict(max_iter=4, max_eval=3), dict(lr=0.3, max_iter=8, tolerance_change=1e-3),
                 dict(lr=0.1, max_iter=8, tolerance_change=1e-2),
                 dict(tolerance_grad=1e-2, line_search_fn="strong_wolfe"),
                 dict(tolerance_change=1e-4, line_search_fn="strong_wolfe")]


@pytest.mark.parametrize("kw", LBFGS_CONFIGS, ids=[str(k) for k in LBFGS_CONFIGS])
def test_lbfgs_matches_torch(kw):
    a, la, ot = _run_lbfgs(torch, kw, "float64", 3)
    b, lb, oe = _run_lbfgs(ember, kw, "float64", 3)
    # dozens of quasi-Newton iterations amplify last-bit differences of the gradients a little
    for x, y in zip(b, a):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lb, la, rtol=1e-10)
    st = ot.state_dict()["state"][0]
    se = oe.state_dict()["state"][0]
    assert list(se.keys()) == list(st.keys())
    assert se["func_evals"] == st["func_evals"] and se["n_iter"] == st["n_iter"]
    assert len(se["old_dirs"]) == len(st["old_dirs"])


@pytest.mark.parametrize("kw", [dict(max_iter=5), dict(line_search_fn="strong_wolfe", max_iter=5)])
def test_lbfgs_float32_first_iterations(kw):
    a, _, _ = _run_lbfgs(torch, kw, "float32", 1)
    b, _, _ = _run_lbfgs(ember, kw, "float32", 1)
    for x, y in zip(b, a):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


def test_lbfgs_state_dict_round_trip(tmp_path):
    kw = dict(history_size=4, max_iter=5, line_search_fn="strong_wolfe")
    full, _, _ = _run_lbfgs(torch, kw, "float64", 4)
    pe, _, oe = _run_lbfgs(ember, kw, "float64", 2)
    ember.save(oe.state_dict(), tmp_path / "l.pt")
    sd = torch.load(tmp_path / "l.pt", weights_only=True)
    pt, loss_fn = _problem(torch, "float64")
    with torch.no_grad():
        for a, b in zip(pt, pe):
            a.copy_(torch.from_numpy(b))
    ot = torch.optim.LBFGS(pt, **kw)
    ot.load_state_dict(sd)
    closure = _closure(ot, loss_fn)
    for _ in range(2):
        ot.step(closure)
    _assert_close(_np(pt), full, "float64")


def test_lbfgs_loads_torch_state(tmp_path):
    kw = dict(history_size=3, max_iter=6)
    full, _, _ = _run_lbfgs(torch, kw, "float64", 4)
    pt, _, ot = _run_lbfgs(torch, kw, "float64", 2)
    torch.save(ot.state_dict(), tmp_path / "t.pt")
    pe, loss_fn = _problem(ember, "float64")
    with ember.no_grad():
        for a, b in zip(pe, pt):
            a.copy_(ember.tensor(b))
    oe = ember.optim.LBFGS(pe, **kw)
    oe.load_state_dict(ember.load(tmp_path / "t.pt"))
    closure = _closure(oe, loss_fn)
    for _ in range(2):
        oe.step(closure)
    for x, y in zip(_np(pe), full):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9)


def test_lbfgs_errors():
    for lib in (torch, ember):
        p, q = lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match="doesn't support per-parameter options"):
            lib.optim.LBFGS([{"params": [p]}, {"params": [q]}])
        opt = lib.optim.LBFGS([p], line_search_fn="wolfe")

        def closure():
            opt.zero_grad()
            loss = ((p - 1) ** 2).sum()
            loss.backward()
            return loss
        with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
            opt.step(closure)


def test_lbfgs_converges_on_quadratic():
    x = ember.tensor([3.0, -2.0, 1.0], dtype=ember.float64, requires_grad=True)
    A = ember.tensor([[3.0, 0.5, 0.0], [0.5, 2.0, 0.1], [0.0, 0.1, 1.0]], dtype=ember.float64)
    opt = ember.optim.LBFGS([x], line_search_fn="strong_wolfe", max_iter=50)

    def closure():
        opt.zero_grad()
        loss = (x @ (A @ x)) * 0.5 - x.sum()
        loss.backward()
        return loss
    opt.step(closure)
    expect = np.linalg.solve(A.numpy(), np.ones(3))
    np.testing.assert_allclose(x.detach().numpy(), expect, rtol=1e-6)


def test_all_optimizers_exported():
    for name in ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "LBFGS", "Adamax", "NAdam",
                 "RAdam", "ASGD", "Rprop", "lr_scheduler"]:
        assert hasattr(ember.optim, name), name
    assert math.isfinite(ember.optim.SGD([ember.zeros(1, requires_grad=True)]).defaults["lr"])
