import os
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _device_dispatcher_removed_after_each_module():
    """A test module that made device tensors leaves ember's op dispatcher as it found it: the device
    dispatcher is taken out of ``apply`` once its tensors are gone, so later modules see the CPU path
    (tests that check which hooks are installed depend on it)."""
    yield
    import sys as _sys
    dispatch = _sys.modules.get("ember.devices.dispatch")
    if dispatch is not None and dispatch._ACTIVE[0]:
        assert dispatch.deactivate(), "device tensors outlived their test module"
