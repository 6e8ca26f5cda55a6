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
