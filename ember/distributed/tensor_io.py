"""Tensors in and out of MPI: argument type checks, descriptions, the host array a tensor's bytes move
through (:class:`_Host`) and writing received values back."""
from __future__ import annotations

import numpy as np

_DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
_DTYPE_CODE = {n: i for i, n in enumerate(_DTYPE_NAMES)}


def _check_tensor(t, param: str, op: str):
    from ..tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{param}` of type Tensor but got "
                        f"{type(t)} instead ({op}).")


def _check_tensor_list(ts, param: str, op: str):
    from ..tensor import Tensor
    if not isinstance(ts, list) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"Invalid function argument. Expected parameter `{param}` of type List[Tensor] but got "
                        f"{type(ts)} instead ({op}).")


def _desc(t) -> str:
    return f"{t.dtype.name}[{', '.join(str(d) for d in t.shape)}]"


class _Host:
    """A C-contiguous host array of a tensor's values; ``done()`` writes changes back and bumps the
    version. Device tensors go through ``.cpu()`` and ``copy_``; strided CPU tensors through a copy."""

    def __init__(self, t, writes: bool):
        self.t = t
        self.writes = writes
        self.host = None
        if t.device.type != "cpu":
            self.host = t.detach().cpu()
            src = self.host._data
        else:
            src = t._data
        self.arr = src if src.flags.c_contiguous else np.ascontiguousarray(src)
        self.copied = self.arr is not src

    def bytes(self):
        return self.arr.reshape(-1).view(np.uint8)

    def done(self) -> None:
        if not self.writes:
            return
        t = self.t
        if self.host is not None:
            if self.copied:
                np.copyto(self.host._data, self.arr)
            from ..autograd.grad_mode import no_grad
            with no_grad():
                t.copy_(self.host)
            return
        if self.copied:
            np.copyto(t._data, self.arr)
        t._bump()


def _same(t, ref) -> bool:
    return t.dtype == ref.dtype and tuple(t.shape) == tuple(ref.shape)


def _write(t, values: np.ndarray) -> None:
    """Copy ``values`` into tensor ``t`` (its own layout, device through a host copy) and bump its version."""
    if t.device.type != "cpu":
        from ..autograd.grad_mode import no_grad
        from ..tensor import wrap
        with no_grad():
            t.copy_(wrap(np.ascontiguousarray(values), t.dtype))
        return
    np.copyto(t._data, values.reshape(t._data.shape))
    t._bump()
