"""What an array that lives outside NumPy answers about its layout: the base of ``DeviceArray`` (OpenCL)
and ``MetaArray`` (the meta device), which hold ``shape``, ``dtype`` (NumPy's) and ``strides`` in elements."""
from __future__ import annotations

import math

__all__ = ["StridedInfo"]


class StridedInfo:
    """``ndim``, ``size``, ``itemsize``, ``nbytes`` and torch's contiguity rule from shape/dtype/strides."""

    __slots__ = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def is_contiguous(self) -> bool:
        """C-contiguous, ignoring the strides of size-1 dims (torch's rule); empty arrays are."""
        expected = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n == 0:
                return True
            if n != 1:
                if s != expected:
                    return False
                expected *= n
        return True
