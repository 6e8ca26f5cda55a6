"""What the OpenCL device tests share: skip only when no OpenCL platform exists (saying why), and keep
the once-per-op CPU-fallback warnings out of the output (tests that check them turn them back on)."""
import warnings

import pytest

from ember.devices import opencl as ocl

needs_opencl = pytest.mark.skipif(not ocl.is_available(), reason=f"no OpenCL platform: {ocl.unavailable_reason()}")


@pytest.fixture(autouse=True)
def _quiet_fallback_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
