"""Build ember's fixed native libraries ahead of time: ``python -m ember.compiler.prebuild``.

Three libraries are not program code: the runtime trampoline (``build._runtime``), ember's GEMM
(``gemm.library``, which compiled graphs call through ``shared_gemm.py``) and the native eager kernels
(``ember._native``). Each is generated for this CPU and compiler, built on first use and kept in the
kernel cache like any library; they are the same for every program, so their build belongs to the
installation (once per machine, cache directory and compiler), not to a program's first compile.
This module builds all of them at once (one compiler process each, side by side), so that the first
``ember.compile`` of a program pays only for its own code. Run it after installing ember or as a
step of a deployment; ``ember.bench compile`` reports cold compiles with and without it.

``support_libraries()`` returns ``{name: seconds to have it ready}`` (milliseconds when the cache held
it; None where the library does not apply here or did not build: ember then uses its fallback).
"""
from __future__ import annotations

import threading
import time


def _runtime():
    from . import build
    build._runtime()
    return True


def _gemm():
    from . import gemm
    if not gemm.enabled():
        return None
    _, _, have, _ = gemm.library()
    return bool(have)


def _eager():
    from .._native import eager_kernels
    return eager_kernels.available() or None


_LIBRARIES = {"ember_runtime": _runtime, "ember_sgemm": _gemm, "ember_eager": _eager}


def support_libraries() -> dict:
    """Build (or load) the fixed libraries, side by side; ``{name: seconds or None}``."""
    out: dict = {}

    def one(name, fn):
        t = time.perf_counter()
        try:
            ok = fn()
        except Exception:           # (each has its fallback; its own use reports the error)
            ok = None
        out[name] = time.perf_counter() - t if ok else None
    threads = [threading.Thread(target=one, args=item, name=f"ember-prebuild-{item[0]}")
               for item in _LIBRARIES.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main() -> int:
    from .build import cache_dir
    t = time.perf_counter()
    got = support_libraries()
    for name, s in got.items():
        state = "not used here (or did not build)" if s is None else f"ready in {s:.2f} s"
        print(f"{name:14s} {state}")
    print(f"cache: {cache_dir()}  ({time.perf_counter() - t:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
