"""``HostDataTensor``: the base of tensors whose ``_data`` is not a NumPy array but lives on the host (a
sparse tensor's COO store, an uninitialized parameter's placeholder). ``Tensor.device`` takes any
non-ndarray data for a device array; these say "cpu" themselves."""
from __future__ import annotations

from .tensor import CPU, Tensor


class HostDataTensor(Tensor):
    """A tensor on the CPU whose data is a stand-in object, not an ndarray (see the module docstring)."""

    @property
    def device(self):
        return CPU

    @property
    def is_cpu(self) -> bool:
        return True
