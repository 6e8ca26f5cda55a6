"""Every case of the op table compiled (aot_eager: captured forward, ahead-of-time backward, kernels
replayed without the dispatcher) against eager ember, forward values and gradients. A case either
compiles and matches, or is refused with a recorded reason and runs eagerly."""
import numpy as np
import pytest

import ember
from oracle import case_arrays, _flatten, _real_pairs
from optable import all_cases

CASES = all_cases()


def _inputs(case, dtype, layout, seed):
    arrs, grad_idx = case_arrays(case, dtype, layout, np.random.default_rng(seed))
    ins = []
    for i, a in enumerate(arrs):
        if not isinstance(a, np.ndarray):
            ins.append(a)
            continue
        t = ember.from_numpy(np.array(a, copy=True, order="K"))
        if i in grad_idx:
            t.requires_grad_(True)
        ins.append(t)
    return ins, grad_idx


def _run(fn, ins, grad_idx, seed):
    out = fn(*ins)
    outs = [o for o in _flatten(out) if isinstance(o, ember.Tensor)]
    grads = []
    diff = [o for o in outs if o.requires_grad]
    leaves = [ins[i] for i in grad_idx]
    if diff and leaves:
        rng = np.random.default_rng(seed + 1)
        # a real loss: complex outputs enter through their (real, imag) pairs
        pairs = [_real_pairs(ember, o) for o in diff]
        loss = sum((p * ember.from_numpy(rng.standard_normal(tuple(p.shape)).astype(p.dtype.np))).sum() for p in pairs)
        grads = ember.autograd.grad(loss, leaves, allow_unused=True)
    return [o.detach() for o in outs], grads


def _close(a, b, what):
    assert len(a) == len(b), what
    for x, y in zip(a, b):
        if x is None or y is None:
            assert x is None and y is None, what
            continue
        assert tuple(x.shape) == tuple(y.shape) and x.dtype == y.dtype, what
        xa, ya = x._data, y._data
        if xa.dtype.kind in "fc" or str(xa.dtype) == "bfloat16":
            wide = np.complex128 if xa.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(xa.astype(wide), ya.astype(wide), rtol=1e-5, atol=1e-6,
                                       equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(xa, ya, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_compiled_op_matches_eager(case):
    ember.compiler.reset()
    dtype = "float32" if "float32" in case.dtypes else case.dtypes[0]
    fn = lambda *xs: case.fn(ember, *xs)   # noqa: E731
    cf = ember.compile(fn, backend="aot_eager")
    for call, seed in enumerate((0, 1)):          # trace, then replay with new values
        ins, gi = _inputs(case, dtype, "contig", seed)
        eager = _run(fn, ins, gi, seed)
        ins2, _ = _inputs(case, dtype, "contig", seed)
        try:
            comp = _run(cf, ins2, gi, seed)
        except ember.compiler.GraphBreakError:
            raise
        _close(comp[0], eager[0], f"{case.name}: forward (call {call})")
        _close(list(comp[1]), list(eager[1]), f"{case.name}: gradients (call {call})")
    c = ember.compiler.counters
    if c["fallbacks"]:
        assert c["fallback_reasons"], f"{case.name}: ran eagerly without a recorded reason"
