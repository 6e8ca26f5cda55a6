"""ember.backends.cpu: ``get_cpu_capability()``, the SIMD level of this CPU as NumPy detected it."""
from __future__ import annotations


def get_cpu_capability() -> str:
    """"AVX512", "AVX2" or "DEFAULT" on x86 (as torch reports), "SVE256" or "DEFAULT" on Arm."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as f
    except ImportError:           # older NumPy layout
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as f
        except ImportError:
            return "DEFAULT"
    if all(f.get(k) for k in ("AVX512F", "AVX512BW", "AVX512VL", "AVX512DQ")):
        return "AVX512"
    if f.get("AVX2") and f.get("FMA3"):
        return "AVX2"
    if f.get("SVE"):
        return "SVE256"
    return "DEFAULT"
