"""torch's wording for two errors real programs hit: ``cholesky_solve`` with b and the factor in different
dtypes, and ``.to('float16')`` (a dtype name where a device string is expected: torch rejects the string
itself before asking for a device type)."""
import pytest
import torch

import ember


def _msg(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is the subject
        return type(e), str(e)
    raise AssertionError("no error")


@pytest.mark.parametrize("bdt,adt", [("float32", "float64"), ("float64", "float32")])
def test_cholesky_solve_mixed_dtypes(bdt, adt):
    def run(L):
        a = L.tensor([[4.0, 1.0], [1.0, 3.0]])
        c = L.linalg.cholesky(a).to(getattr(L, adt))
        return L.cholesky_solve(L.ones(2, 1, dtype=getattr(L, bdt)), c)
    assert _msg(lambda: run(ember)) == _msg(lambda: run(torch))


@pytest.mark.parametrize("s", ["float16", "float", "cpux", "foo1"])
def test_bad_device_strings(s):
    te, tm = _msg(lambda: torch.ones(2).to(s))
    ee, em = _msg(lambda: ember.ones(2).to(s))
    assert ee is te
    if tm.startswith("Invalid device string"):
        assert em == tm
    else:                                 # torch lists its many device types; ember lists its own
        assert em.startswith("Expected one of cpu, cuda") and em.endswith(f"device string: {s}")
    assert _msg(lambda: ember.device(s))[1] == em


@pytest.mark.parametrize("s", ["cuda:01", "cpu:00", "cuda:²", "cpu:-1", "cuda: 1"])
def test_device_index_spellings_torch_rejects(s):
    """torch takes a device index as plain ASCII digits without a leading zero ('cuda:0', 'cuda:10')."""
    for make in (lambda L: L.device(s), lambda L: L.zeros(2, device=s)):
        te, tm = _msg(lambda: make(torch))
        ee, em = _msg(lambda: make(ember))
        assert (ee, em) == (te, tm) == (RuntimeError, f"Invalid device string: '{s}'")
    assert str(ember.device("cpu:10")) == str(torch.device("cpu:10")) == "cpu:10"
