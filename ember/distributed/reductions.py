"""Reductions: :class:`ReduceOp` and how a dtype is reduced with one over MPI (:class:`_Reduction`)."""
from __future__ import annotations

import enum

import numpy as np

from . import _mpi


class ReduceOp(enum.Enum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class _Reduction:
    """How a dtype is reduced with one ReduceOp over MPI: the work buffer's NumPy dtype, the MPI datatype
    and op, and whether AVG divides afterwards."""

    def __init__(self, dt, op: ReduceOp, opname: str):
        MPI = _mpi._MPI
        if not isinstance(op, ReduceOp):
            raise TypeError(f"{opname}: op must be a ReduceOp, got {op!r}")
        if op is ReduceOp.PREMUL_SUM:
            raise ValueError(f"{opname}: ReduceOp.PREMUL_SUM is not supported by ember's MPI backend")
        name = dt.name
        bitwise = op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)
        self.avg = op is ReduceOp.AVG
        if name == "bool":
            if self.avg:
                raise RuntimeError(f"{opname}: ReduceOp.AVG is not defined for bool tensors")
            self.np = np.dtype(np.uint8)
            self.mpi_type = MPI.UINT8_T
            self.mpi_op = {ReduceOp.SUM: MPI.MAX, ReduceOp.MAX: MPI.MAX, ReduceOp.PRODUCT: MPI.MIN,
                           ReduceOp.MIN: MPI.MIN, ReduceOp.BAND: MPI.BAND, ReduceOp.BOR: MPI.BOR,
                           ReduceOp.BXOR: MPI.BXOR}[op]
            return
        if bitwise and dt.is_floating_point:
            raise RuntimeError(f"{opname}: ReduceOp.{op.name} needs an integral or bool tensor, got {name}")
        work = "float32" if name in ("float16", "bfloat16") else name
        self.np = np.dtype(work)
        self.mpi_type = {"uint8": MPI.UINT8_T, "int8": MPI.INT8_T, "int16": MPI.INT16_T, "int32": MPI.INT32_T,
                         "int64": MPI.INT64_T, "float32": MPI.FLOAT, "float64": MPI.DOUBLE}[work]
        self.mpi_op = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
                       ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
                       ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op]

    def buffer(self, arr: np.ndarray) -> np.ndarray:
        """The array to reduce: ``arr`` itself when MPI reduces its dtype directly, else a converted copy."""
        if arr.dtype == self.np:
            return arr.reshape(-1)
        return arr.reshape(-1).astype(self.np)

    def finish(self, buf: np.ndarray, out: np.ndarray, n: int) -> None:
        """Divide for AVG and write the result into ``out`` (same number of elements)."""
        if self.avg:
            if buf.dtype.kind == "f":
                buf /= n
            else:
                q = np.abs(buf) // n
                np.copyto(buf, np.where(buf < 0, -q, q), casting="unsafe")
        flat = out.reshape(-1)
        if buf.__array_interface__["data"][0] != flat.__array_interface__["data"][0] or buf.dtype != flat.dtype:
            np.copyto(flat, buf, casting="unsafe")         # a converted work buffer (not the tensor's memory)


_REDUCTIONS: dict = {}


def _reduction(dt, op: ReduceOp, opname: str) -> _Reduction:
    """The (cached) _Reduction of ``dt`` with ``op``; raises for combinations that do not exist."""
    key = (dt.name, op)
    spec = _REDUCTIONS.get(key)
    if spec is None:
        spec = _REDUCTIONS[key] = _Reduction(dt, op, opname)
    return spec


def _reduction_or_error(dt, op: ReduceOp, opname: str):
    """``(_reduction(dt, op, opname), None)``, or ``(None, the error)`` for the caller to raise on every rank
    alike through _check_args."""
    try:
        return _reduction(dt, op, opname), None
    except Exception as e:       # noqa: BLE001 - raised on every rank by _check_args
        return None, e


def _as_op(op, opname: str) -> ReduceOp:
    if isinstance(op, ReduceOp):
        return op
    raise TypeError(f"{opname}: op must be a ReduceOp (e.g. ReduceOp.SUM), got {op!r}")
