"""Make sure an OpenCL platform with a device exists for the test suite (``make test`` runs this).

Checks with pyopencl (in a child process, so a driver installed meanwhile is seen). When there is
none and this machine allows it (root, and apt-get exists), installs Debian's PoCL CPU driver
``pocl-opencl-icd``; otherwise prints exactly what to install. Exits 0 either way (the OpenCL tests
then skip, naming what is missing) unless ``EMBER_REQUIRE_OPENCL=1``, which makes a missing platform an
error. (PoCL from PyPI is not used: its wheel fails on some CPUs.)

    python .ci/ensure_opencl.py
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

PACKAGE = "pocl-opencl-icd"
PROBE = ("import pyopencl as cl\n"
         "devs = [d for p in cl.get_platforms() for d in p.get_devices()]\n"
         "print(devs[0].platform.name.strip() + ': ' + devs[0].name.strip() if devs else '')\n")


def probe() -> tuple:
    """(True, "platform: device") or (False, why not)."""
    try:
        r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return False, "probing OpenCL timed out"
    if r.returncode == 0 and r.stdout.strip():
        return True, r.stdout.strip()
    lines = (r.stderr.strip() or "no OpenCL device found").splitlines()
    return False, lines[-1]


def main() -> int:
    ok, what = probe()
    if ok:
        print(f"OpenCL: {what}")
        return 0
    if "No module named 'pyopencl'" in what:
        print(f"OpenCL: pyopencl is missing: {sys.executable} -m pip install pyopencl")
        return 1 if os.environ.get("EMBER_REQUIRE_OPENCL") == "1" else 0
    print(f"OpenCL: no platform ({what})")
    apt = shutil.which("apt-get")
    if apt and hasattr(os, "geteuid") and os.geteuid() == 0:
        print(f"OpenCL: installing {PACKAGE} with apt-get")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "--no-install-recommends", PACKAGE]):
            r = subprocess.run(cmd, env=env)
            if r.returncode != 0:
                print(f"OpenCL: `{' '.join(cmd)}` failed (exit {r.returncode})")
                break
        ok, what = probe()
        if ok:
            print(f"OpenCL: {what}")
            return 0
        print(f"OpenCL: still no platform after installing {PACKAGE} ({what})")
    else:
        print(f"OpenCL: to run the OpenCL tests, install an OpenCL driver, e.g. as root on Debian/Ubuntu: "
              f"apt-get install {PACKAGE}  (or your GPU vendor's OpenCL ICD)")
    return 1 if os.environ.get("EMBER_REQUIRE_OPENCL") == "1" else 0


if __name__ == "__main__":
    sys.exit(main())
