"""Helpers shared by the compiler tests that compare compiled runs with eager ones."""
import numpy as np
import pytest

import ember

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _reset(tmp_path_factory, monkeypatch):
    """Fresh compiler state per test, and a private kernel cache (tests never write to ~/.cache/ember).
    Imported into a test module, it applies to every test there."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ember-cache"))
    ember.compiler.reset()
    yield
    ember.compiler.reset()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh disk cache and an empty in-memory library cache for one test (``ember.compiler.build``)."""
    from ember.compiler import build
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_FAST_MATH", raising=False)
    build.clear_memory_cache()
    yield tmp_path
    build.clear_memory_cache()


def _t(a, rg=False):
    """An ember tensor owning a copy of ``a`` (a leaf requiring grad when ``rg``)."""
    t = ember.from_numpy(np.array(a, copy=True))
    return t.requires_grad_(True) if rg else t


def _close(a, b, what, rtol=1e-5, atol=1e-6):
    """Same shape and dtype; floats within tolerance (NaNs where the other has NaNs), others exactly."""
    a = a.detach().numpy() if isinstance(a, ember.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, ember.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


def _run_with_backward(f, arrays, params=()):
    """``f`` on fresh tensors of ``arrays`` (float ones are leaves requiring grad), then backward of a
    fixed random weighting of its differentiable outputs; ``(outputs, grads of the inputs and params)``."""
    for p in params:
        p.grad = None
    ins = [_t(a, a.dtype.kind == "f") for a in arrays]
    out = f(*ins)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    diff = [o for o in outs if o.requires_grad]
    if diff:
        ws = [np.random.default_rng(7 + k).standard_normal(tuple(o.shape)).astype(o.dtype.np)
              for k, o in enumerate(diff)]
        sum((o * _t(w)).sum() for o, w in zip(diff, ws)).backward()
    return outs, [i.grad for i in ins if i.requires_grad] + [p.grad for p in params]


def _compare_call(fn, cf, call, arrays, rtol, atol, params=()):
    """One call of ``fn`` eagerly and compiled (``cf``): outputs and gradients agree; the eager outputs."""
    eo, eg = _run_with_backward(fn, arrays, params)
    co, cg = _run_with_backward(cf, arrays, params)
    assert len(eo) == len(co)
    for k, (a, b) in enumerate(zip(co, eo)):
        _close(a, b, f"call {call}: output {k}", rtol, atol)
    for k, (a, b) in enumerate(zip(cg, eg)):
        assert (a is None) == (b is None), f"call {call}: gradient {k} is None on one side only"
        if a is not None:
            _close(a, b, f"call {call}: gradient {k}", rtol, atol)
    return eo


def _close_trained_gpts(m1, m2, rtol=1e-3, atol=1e-5, lr=1e-3, steps=7):
    """Parameters of two GPTs trained alike (AdamW, ``steps`` steps of ``lr``) agree. AdamW turns the last
    bits of a gradient that is almost zero into a step of up to ``lr`` either way, so such elements (the
    qkv bias's key third has a zero gradient; a weight element here or there has a near-zero one) are only
    held to that bound: every element within ``2 * lr * steps``, all but 1 in 10,000 within rtol/atol."""
    bound = 2 * lr * steps
    for (name, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        a, b = p1.detach().numpy(), p2.detach().numpy()
        np.testing.assert_allclose(a, b, atol=bound, err_msg=name)
        if name.endswith("attn.qkv.bias"):
            c = a.shape[0] // 3
            a, b = np.concatenate([a[:c], a[2 * c:]]), np.concatenate([b[:c], b[2 * c:]])
        off = ~np.isclose(a, b, rtol=rtol, atol=atol)
        assert off.sum() <= a.size // 10000, (f"{name}: {off.sum()} of {a.size} elements differ beyond "
                                              f"rtol={rtol}, atol={atol}; largest {np.abs(a - b).max():.3g}")
