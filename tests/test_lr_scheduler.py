"""ember.optim.lr_scheduler against torch: lr sequences, momentum cycling, state_dict, errors, warnings."""
import math
import pickle
import warnings

import numpy as np
import pytest
import torch

import ember

EPOCHS = 40


def _opt(lib, name="SGD", groups=1, **kw):
    params = [lib.zeros(2, requires_grad=True) for _ in range(groups)]
    if groups == 1:
        kw.setdefault("lr", 0.1)
        return getattr(lib.optim, name)(params, **kw)
    return getattr(lib.optim, name)([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)], **kw)


def _trace(lib, make, epochs=EPOCHS, opt_name="SGD", groups=1, opt_kw=None, metrics=None, extra=None):
    """Build the optimizer and scheduler with ``make(lib, opt)`` and record every group's lr (and momentum
    / beta1) after construction and after each of ``epochs`` steps."""
    opt = _opt(lib, opt_name, groups, **(opt_kw or {}))
    sched = make(lib, opt)
    key = "betas" if "betas" in opt.defaults else "momentum"

    def snap():
        row = [g["lr"] for g in opt.param_groups]
        row += [g[key][0] if key == "betas" else g[key] for g in opt.param_groups]
        row += list(sched.get_last_lr())
        return row
    out = [snap()]
    for e in range(epochs):
        opt.step()
        if metrics is not None:
            sched.step(metrics[e])
        else:
            sched.step()
        out.append(snap())
    return np.array(out, dtype=float), sched, opt


def _compare(make, **kw):
    t, _, _ = _trace(torch, make, **kw)
    e, _, _ = _trace(ember, make, **kw)
    np.testing.assert_allclose(e, t, rtol=1e-13, atol=0)


def S(lib):
    return lib.optim.lr_scheduler


SCHEDULERS = {
    "StepLR": lambda lib, o: S(lib).StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda lib, o: S(lib).MultiStepLR(o, milestones=[3, 10, 10, 25], gamma=0.3),
    "ExponentialLR": lambda lib, o: S(lib).ExponentialLR(o, gamma=0.93),
    "CosineAnnealingLR": lambda lib, o: S(lib).CosineAnnealingLR(o, T_max=9, eta_min=0.001),
    "CosineAnnealingLR0": lambda lib, o: S(lib).CosineAnnealingLR(o, T_max=10),
    "LambdaLR": lambda lib, o: S(lib).LambdaLR(o, lambda e: 1.0 / (1 + e)),
    "MultiplicativeLR": lambda lib, o: S(lib).MultiplicativeLR(o, lambda e: 0.95),
    "LinearLR": lambda lib, o: S(lib).LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=12),
    "LinearLRdefault": lambda lib, o: S(lib).LinearLR(o),
    "ConstantLR": lambda lib, o: S(lib).ConstantLR(o, factor=0.4, total_iters=6),
    "PolynomialLR": lambda lib, o: S(lib).PolynomialLR(o, total_iters=20, power=2.0),
    "PolynomialLR1": lambda lib, o: S(lib).PolynomialLR(o),
    "CosineAnnealingWarmRestarts": lambda lib, o: S(lib).CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2,
                                                                                      eta_min=0.01),
    "CosineAnnealingWarmRestarts1": lambda lib, o: S(lib).CosineAnnealingWarmRestarts(o, T_0=7),
    "OneCycleLR": lambda lib, o: S(lib).OneCycleLR(o, max_lr=1.0, total_steps=EPOCHS),
    "OneCycleLR_linear3": lambda lib, o: S(lib).OneCycleLR(o, max_lr=[0.5], epochs=4, steps_per_epoch=10,
                                                           anneal_strategy="linear", three_phase=True,
                                                           pct_start=0.25),
    "OneCycleLR_nomom": lambda lib, o: S(lib).OneCycleLR(o, max_lr=2.0, total_steps=EPOCHS + 5,
                                                         cycle_momentum=False, div_factor=10.0,
                                                         final_div_factor=100.0),
    "CyclicLR": lambda lib, o: S(lib).CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "CyclicLR2": lambda lib, o: S(lib).CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=5,
                                                mode="triangular2"),
    "CyclicLRexp": lambda lib, o: S(lib).CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4, mode="exp_range",
                                                  gamma=0.97),
    "CyclicLRfn": lambda lib, o: S(lib).CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                                 scale_fn=lambda x: 0.9 ** x, scale_mode="iterations"),
    "SequentialLR": lambda lib, o: S(lib).SequentialLR(
        o, [S(lib).LinearLR(o, start_factor=0.1, total_iters=5), S(lib).ExponentialLR(o, gamma=0.9),
            S(lib).StepLR(o, 4, 0.5)], milestones=[5, 17]),
    "SequentialLRcos": lambda lib, o: S(lib).SequentialLR(
        o, [S(lib).ConstantLR(o, factor=0.5, total_iters=3), S(lib).CosineAnnealingLR(o, T_max=10)],
        milestones=[8]),
    "ChainedScheduler": lambda lib, o: S(lib).ChainedScheduler(
        [S(lib).ConstantLR(o, factor=0.1, total_iters=4), S(lib).ExponentialLR(o, gamma=0.9)]),
    "ChainedScheduler3": lambda lib, o: S(lib).ChainedScheduler(
        [S(lib).LinearLR(o, start_factor=0.3, total_iters=6), S(lib).MultiStepLR(o, [5, 9]),
         S(lib).CosineAnnealingLR(o, T_max=13)], optimizer=o),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_lr_sequence_matches_torch(name):
    _compare(SCHEDULERS[name])


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "LambdaLR", "OneCycleLR", "CyclicLR",
                                  "SequentialLR", "ChainedScheduler", "MultiplicativeLR",
                                  "CosineAnnealingWarmRestarts"])
def test_lr_sequence_two_groups(name):
    _compare(SCHEDULERS[name], groups=2, opt_kw={"momentum": 0.9})


@pytest.mark.parametrize("name", ["OneCycleLR", "OneCycleLR_linear3", "CyclicLR", "CyclicLRexp"])
@pytest.mark.parametrize("opt_name", ["Adam", "AdamW", "NAdam"])
def test_momentum_cycles_beta1(name, opt_name):
    # schedulers that cycle momentum write Adam's beta1 instead
    _compare(SCHEDULERS[name], opt_name=opt_name)


def test_one_cycle_with_adam_trains_like_torch():
    def run(lib):
        rs = np.random.RandomState(0)
        w = lib.tensor(rs.randn(5), requires_grad=True)
        target = lib.tensor(rs.randn(5))
        opt = lib.optim.Adam([w], lr=0.1)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.3, total_steps=30)
        for _ in range(30):
            opt.zero_grad()
            ((w - target) ** 2).sum().backward()
            opt.step()
            sched.step()
        return w.detach().numpy(), opt.param_groups[0]["betas"]
    wt, bt = run(torch)
    we, be = run(ember)
    np.testing.assert_allclose(we, wt, rtol=1e-10)
    assert bt == be


PLATEAU_METRICS = [5.0, 4.0, 4.0, 4.0, 3.99, 3.999, 4.1, 4.2, 4.3, 4.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.9999,
                   2.1, 2.2, 2.3, 2.4, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5,
                   0.5, 0.5, 0.5, 0.5]


@pytest.mark.parametrize("kw", [
    {},
    {"patience": 2},
    {"patience": 1, "cooldown": 2, "factor": 0.5},
    {"mode": "max", "patience": 2, "threshold": 0.01},
    {"mode": "min", "patience": 1, "threshold": 0.05, "threshold_mode": "abs", "min_lr": 0.003},
    {"mode": "max", "patience": 0, "threshold_mode": "abs", "factor": 0.7, "min_lr": [0.02]},
    {"patience": 0, "factor": 0.5, "eps": 0.02},
])
def test_reduce_lr_on_plateau(kw):
    metrics = PLATEAU_METRICS if kw.get("mode") != "max" else [-m for m in PLATEAU_METRICS]
    _compare(lambda lib, o: S(lib).ReduceLROnPlateau(o, **kw), metrics=metrics)


def test_reduce_lr_on_plateau_tensor_metric_and_groups():
    metrics = [ember.tensor(m) for m in PLATEAU_METRICS]
    _, s, o = _trace(ember, lambda lib, o: S(lib).ReduceLROnPlateau(o, patience=1, min_lr=[0.0, 0.05]),
                     groups=2, metrics=metrics)
    tm = [torch.tensor(m) for m in PLATEAU_METRICS]
    t, ts, _ = _trace(torch, lambda lib, o: S(lib).ReduceLROnPlateau(o, patience=1, min_lr=[0.0, 0.05]),
                      groups=2, metrics=tm)
    assert s.get_last_lr() == ts.get_last_lr()
    assert s.state_dict() == ts.state_dict()


def test_state_dict_keys_and_values_match_torch():
    for name, make in SCHEDULERS.items():
        _, st, _ = _trace(torch, make, epochs=7)
        _, se, _ = _trace(ember, make, epochs=7)
        dt, de = st.state_dict(), se.state_dict()
        assert list(de.keys()) == list(dt.keys()), name
        for k in dt:
            if k in ("_schedulers",):
                for a, b in zip(dt[k], de[k]):
                    assert list(a.keys()) == list(b.keys()), name
            elif k not in ("lr_lambdas", "_scale_fn_custom"):
                assert de[k] == dt[k], (name, k)


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_state_dict_resume(name):
    make = SCHEDULERS[name]
    # reference: one uninterrupted run
    full, _, _ = _trace(ember, make, epochs=30)
    # run 12 epochs, save, build a fresh optimizer + scheduler, load, continue
    part, sched, opt = _trace(ember, make, epochs=12)
    sd_s = pickle.loads(pickle.dumps(sched.state_dict()))
    sd_o = opt.state_dict()
    opt2 = _opt(ember)
    sched2 = make(ember, opt2)
    opt2.load_state_dict(sd_o)
    sched2.load_state_dict(sd_s)
    key = "momentum"
    rows = []
    for _ in range(18):
        opt2.step()
        sched2.step()
        rows.append([g["lr"] for g in opt2.param_groups] + [g[key] for g in opt2.param_groups]
                    + list(sched2.get_last_lr()))
    np.testing.assert_allclose(np.array(rows), full[13:], rtol=1e-13)


def test_state_dict_loads_torch_state_dict():
    # a torch scheduler's state dict (plain Python values) loads into ember's and continues identically
    for name in ["StepLR", "CosineAnnealingLR", "OneCycleLR", "CosineAnnealingWarmRestarts", "LinearLR"]:
        make = SCHEDULERS[name]
        t, st, _ = _trace(torch, make, epochs=30)
        _, st10, ot10 = _trace(torch, make, epochs=10)
        opt = _opt(ember)
        s = make(ember, opt)
        for g, tg in zip(opt.param_groups, ot10.param_groups):
            g["lr"] = tg["lr"]
            g["momentum"] = tg["momentum"]
        s.load_state_dict(st10.state_dict())
        lrs = []
        for _ in range(20):
            opt.step()
            s.step()
            lrs.append(s.get_last_lr()[0])
        np.testing.assert_allclose(lrs, t[11:, -1], rtol=1e-13)


def test_lambda_state_dict_saves_callable_objects():
    class Fn:
        def __init__(self, k):
            self.k = k

        def __call__(self, e):
            return self.k ** e

    for lib in (torch, ember):
        o = _opt(lib, groups=2)
        s = S(lib).LambdaLR(o, [Fn(0.9), lambda e: 1.0])
        sd = s.state_dict()
        assert sd["lr_lambdas"] == [{"k": 0.9}, None]
        s2 = S(lib).LambdaLR(_opt(lib, groups=2), [Fn(0.5), lambda e: 1.0])
        s2.load_state_dict(sd)
        assert s2.lr_lambdas[0].k == 0.9


def test_get_last_lr_and_base_lrs():
    o = _opt(ember, groups=2)
    s = S(ember).StepLR(o, 2, 0.5)
    assert s.base_lrs == [0.1, 0.2]
    assert s.get_last_lr() == [0.1, 0.2]
    assert all(g["initial_lr"] == g["lr"] for g in o.param_groups)
    o.step()
    s.step()
    o.step()
    s.step()
    assert s.get_last_lr() == [0.05, 0.1]
    assert s.last_epoch == 2


def test_initial_lr_required_when_resuming():
    for lib in (torch, ember):
        o = _opt(lib)
        with pytest.raises(KeyError, match="initial_lr"):
            S(lib).StepLR(o, 3, last_epoch=4)
    # with initial_lr present the scheduler resumes at last_epoch + 1
    res = []
    for lib in (torch, ember):
        o = _opt(lib)
        o.param_groups[0]["initial_lr"] = 1.0
        s = S(lib).CosineAnnealingLR(o, T_max=10, last_epoch=4)
        vals = [s.get_last_lr()[0]]
        for _ in range(8):
            o.step()
            s.step()
            vals.append(s.get_last_lr()[0])
        res.append(vals)
    np.testing.assert_allclose(res[1], res[0], rtol=1e-13)


def test_step_with_epoch_uses_closed_form():
    for name in ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "ConstantLR",
                 "PolynomialLR", "LambdaLR"]:
        make = SCHEDULERS[name]
        out = []
        for lib in (torch, ember):
            o = _opt(lib)
            s = make(lib, o)
            vals = []
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                for e in [3, 7, 1, 15, 15, 30]:
                    o.step()
                    s.step(e)
                    vals.append(s.get_last_lr()[0])
            assert any("epoch parameter" in str(x.message) for x in w)
            out.append(vals)
        np.testing.assert_allclose(out[1], out[0], rtol=1e-13, err_msg=name)


def test_warm_restarts_fractional_epochs():
    out = []
    for lib in (torch, ember):
        o = _opt(lib)
        s = S(lib).CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001)
        vals = []
        for e in np.arange(0, 20, 0.25):
            o.step()
            s.step(float(e))
            vals.append((s.get_last_lr()[0], s.T_cur, s.T_i, s.last_epoch))
        out.append(vals)
    np.testing.assert_allclose(np.array(out[1], dtype=float), np.array(out[0], dtype=float), rtol=1e-13)
    o = _opt(ember)
    with pytest.raises(ValueError, match="non-negative epoch"):
        S(ember).CosineAnnealingWarmRestarts(o, T_0=3).step(-1)


def test_warnings_like_torch():
    for lib in (torch, ember):
        o = _opt(lib)
        s = S(lib).StepLR(o, 3)
        with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
            s.step()
        o = _opt(lib)
        s = S(lib).StepLR(o, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            o.step()
            s.step()
        with pytest.warns(UserWarning, match="get_last_lr"):
            s.get_lr()


def test_tensor_lr_is_filled_in_place():
    outs = []
    for lib in (torch, ember):
        p = lib.zeros(2, requires_grad=True)
        lr = lib.tensor(0.5)
        o = lib.optim.SGD([p], lr=lr)
        s = S(lib).ExponentialLR(o, 0.5)
        o.step()
        s.step()
        assert o.param_groups[0]["lr"] is lr
        outs.append(float(lr))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("make, exc, match", [
    (lambda lib, o: S(lib).ConstantLR(o, factor=1.5), ValueError, "between 0 and 1"),
    (lambda lib, o: S(lib).LinearLR(o, start_factor=0), ValueError, "Starting multiplicative"),
    (lambda lib, o: S(lib).LinearLR(o, end_factor=2), ValueError, "Ending multiplicative"),
    (lambda lib, o: S(lib).ReduceLROnPlateau(o, factor=1.0), ValueError, "Factor should be < 1.0."),
    (lambda lib, o: S(lib).ReduceLROnPlateau(o, mode="avg"), ValueError, "mode avg is unknown!"),
    (lambda lib, o: S(lib).ReduceLROnPlateau(o, threshold_mode="x"), ValueError, "threshold mode x is unknown!"),
    (lambda lib, o: S(lib).ReduceLROnPlateau(o, min_lr=[0.1, 0.2]), ValueError, "expected 1 min_lrs, got 2"),
    (lambda lib, o: S(lib).OneCycleLR(o, 1.0), ValueError, "total_steps OR"),
    (lambda lib, o: S(lib).OneCycleLR(o, 1.0, total_steps=0), ValueError, "positive integer total_steps"),
    (lambda lib, o: S(lib).OneCycleLR(o, 1.0, epochs=2, steps_per_epoch=0), ValueError, "steps_per_epoch"),
    (lambda lib, o: S(lib).OneCycleLR(o, 1.0, total_steps=10, pct_start=1), ValueError, "pct_start"),
    (lambda lib, o: S(lib).OneCycleLR(o, 1.0, total_steps=10, anneal_strategy="exp"), ValueError,
     "anneal_strategy"),
    (lambda lib, o: S(lib).OneCycleLR(o, [1.0, 2.0], total_steps=10), ValueError, "same length"),
    (lambda lib, o: S(lib).CyclicLR(o, 0.1, 1.0, mode="zigzag"), ValueError, "mode is invalid"),
    (lambda lib, o: S(lib).CosineAnnealingWarmRestarts(o, T_0=0), ValueError, "positive integer T_0"),
    (lambda lib, o: S(lib).CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1.5), ValueError, "T_mult"),
    (lambda lib, o: S(lib).CosineAnnealingWarmRestarts(o, T_0=2, eta_min="a"), ValueError, "eta_min"),
    (lambda lib, o: S(lib).LambdaLR(o, [lambda e: 1, lambda e: 2]), ValueError, "Expected 1 lr_lambdas"),
    (lambda lib, o: S(lib).MultiplicativeLR(o, 3), TypeError, "lr_lambda should be a function"),
    (lambda lib, o: S(lib).StepLR("opt", 3), TypeError, "str is not an Optimizer"),
    (lambda lib, o: S(lib).SequentialLR(o, [], []), ValueError, "at least one scheduler"),
    (lambda lib, o: S(lib).SequentialLR(o, [S(lib).StepLR(o, 2)], [3]), ValueError, "one more than"),
    (lambda lib, o: S(lib).SequentialLR(o, [S(lib).ReduceLROnPlateau(o)], []), ValueError, "ReduceLROnPlateau"),
    (lambda lib, o: S(lib).SequentialLR(o, [S(lib).StepLR(_opt(lib), 2)], []), ValueError, "same optimizer"),
    (lambda lib, o: S(lib).ChainedScheduler([]), ValueError, "at least one scheduler"),
    (lambda lib, o: S(lib).ChainedScheduler([S(lib).StepLR(o, 2), S(lib).StepLR(_opt(lib), 2)]), ValueError,
     "same optimizer"),
])
def test_errors_like_torch(make, exc, match):
    for lib in (torch, ember):
        with pytest.raises(exc, match=match):
            make(lib, _opt(lib))


def test_cycle_momentum_needs_momentum():
    for lib in (torch, ember):
        p = lib.zeros(2, requires_grad=True)
        o = lib.optim.Adagrad([p])
        with pytest.raises(ValueError, match="momentum or beta1"):
            S(lib).OneCycleLR(o, 1.0, total_steps=5)
        with pytest.raises(ValueError, match="momentum or beta1"):
            S(lib).CyclicLR(o, 0.1, 1.0)


def test_one_cycle_too_many_steps():
    for lib in (torch, ember):
        o = _opt(lib)
        s = S(lib).OneCycleLR(o, 1.0, total_steps=3)
        for _ in range(3):
            o.step()
            s.step()
        with pytest.raises(ValueError, match="Tried to step 4 times"):
            o.step()
            s.step()


def test_plateau_new_param_group():
    o = _opt(ember)
    s = S(ember).ReduceLROnPlateau(o, patience=0, min_lr=[0.0])
    o.add_param_group({"params": [ember.zeros(2, requires_grad=True)]})
    s.step(1.0)
    with pytest.raises(RuntimeError, match="differs from when `ReduceLROnPlateau` was initialized"):
        s.step(2.0)
    o = _opt(ember)
    s = S(ember).ReduceLROnPlateau(o, patience=0, min_lr=0.01)
    o.add_param_group({"params": [ember.zeros(2, requires_grad=True)], "lr": 0.5})
    s.step(1.0)
    s.step(2.0)
    assert s.min_lrs == [0.01, 0.01]
    assert [g["lr"] for g in o.param_groups] == pytest.approx([0.01, 0.05])


def test_exports():
    m = ember.optim.lr_scheduler
    for name in ["LRScheduler", "_LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                 "LambdaLR", "MultiplicativeLR", "LinearLR", "ConstantLR", "OneCycleLR", "SequentialLR",
                 "ChainedScheduler", "CosineAnnealingWarmRestarts", "CyclicLR", "PolynomialLR", "ReduceLROnPlateau"]:
        assert hasattr(m, name)
    assert issubclass(m.ReduceLROnPlateau, m.LRScheduler)
    assert math.isclose(m.OneCycleLR._annealing_cos(1.0, 0.0, 0.5), 0.5)
