"""Fixtures shared by the tests of ember.compile on OpenCL device tensors."""
import warnings

import pytest

import ember
from ember.devices import opencl as ocl

needs_device = pytest.mark.skipif(not ocl.is_available(), reason=f"no OpenCL platform: {ocl.unavailable_reason()}")

DEV = "opencl"


@pytest.fixture(autouse=True, scope="module")
def _dispatcher_out_afterwards():
    yield
    ember.compiler.reset()          # compiled entries hold their device parameters
    from ember.devices import dispatch
    assert dispatch.deactivate(), "device tensors are still alive after the compiled device tests"


@pytest.fixture(autouse=True)
def _fresh():
    ember.compiler.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # the once-per-op fallback warnings
        yield


def train_step(model, opt, x, y):
    """One optimizer step on the cross-entropy of ``model(x)`` against ``y``; returns the loss."""
    import ember.nn.functional as F
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss
