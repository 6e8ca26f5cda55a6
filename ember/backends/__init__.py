"""ember.backends: torch's backend switches (``cudnn``, ``cuda``, ``mps``, ``mkldnn``, ``mkl``,
``openmp``, ``opt_einsum``, ``cpu``).

ember computes with NumPy on the CPU, so none of these libraries is used: every flag is accepted
(bool flags type-checked as in torch), stored and readable, and the ``is_available()`` queries answer
honestly (no cuDNN, no CUDA, no MPS). ``cpu.get_cpu_capability()`` reports the SIMD level NumPy detected.
"""
from __future__ import annotations

import contextlib
import types

__all__ = ["cpu", "cuda", "cudnn", "mps", "mkldnn", "mkl", "openmp", "opt_einsum", "fp32_precision"]

fp32_precision = "none"     # torch's global TF32 switch ("none", "ieee" or "tf32"); unused on the CPU


class _FlagModule(types.ModuleType):
    """A module whose bool flags refuse non-bool values, as torch's backend modules do."""

    _bool_flags: tuple = ()

    def __setattr__(self, name, value):
        if name in self._bool_flags and not isinstance(value, bool):
            raise RuntimeError(f"{self.__name__}.{name} expects a bool, but got {type(value).__name__}")
        super().__setattr__(name, value)


def _checked_module(mod_name: str, bool_flags: tuple) -> None:
    """Give module ``mod_name`` type-checked bool flags (swap its class; its globals stay as they are)."""
    import sys
    mod = sys.modules[mod_name]
    mod.__class__ = type("_Flags", (_FlagModule,), {"_bool_flags": bool_flags})


@contextlib.contextmanager
def _flags(module, **values):
    """Set attributes of ``module`` for the duration of a ``with`` block, then restore them."""
    old = {k: getattr(module, k) for k in values}
    try:
        for k, v in values.items():
            setattr(module, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


from . import cpu, cuda, cudnn, mps, mkldnn, mkl, openmp, opt_einsum  # noqa: E402,F401
