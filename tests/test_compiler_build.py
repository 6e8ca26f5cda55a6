"""ember.compiler.build (cc + disk cache + loading + calling) and ember.compiler.blas.

Results of compiled C are checked against NumPy. Cache behaviour across processes is checked with child
processes that share an EMBER_CACHE_DIR and print their STATS.
"""
import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ember.compiler import blas, build
from compile_support import cache  # noqa: F401  (a fresh disk cache per test)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SAXPY = build.OMP_PRELUDE + r"""
void saxpy(long n, float a, const float *x, float *y) {
    EMBER_PARALLEL_FOR(n)
    for (long i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
/* graph-entry convention: args[0] = x, args[1] = y, args[2] = out */
void entry(void **args) {
    const float *x = args[0], *y = args[1]; float *out = args[2];
    for (int i = 0; i < 5; i++) out[i] = x[i] * y[i];
}
int nthreads_used(void) {
    int seen = 1;
    #pragma omp parallel
    {
        #pragma omp single
        seen = omp_get_num_threads();
    }
    return seen;
}
"""

# A child process that imports only ember.compiler.build (ember/__init__ would cost a second per child):
# the `ember` and `ember.compiler` packages are stubbed so their __init__ files are not run.
CHILD = textwrap.dedent(f"""
    import json, sys, types
    for name, path in (("ember", {os.path.join(ROOT, "ember")!r}),
                       ("ember.compiler", {os.path.join(ROOT, "ember", "compiler")!r})):
        pkg = types.ModuleType(name); pkg.__path__ = [path]; sys.modules[name] = pkg
    import ctypes
    from ember.compiler import build
    src = sys.stdin.read()
    lib = build.compile_source(src, name="child")
    f = lib.get("triple", [ctypes.c_int], ctypes.c_int)
    print(json.dumps({{"stats": build.STATS, "value": f(14), "hit": lib.cache_hit, "path": lib.path}}))
""")
CHILD_SRC = "int triple(int x) { return 3 * x; }\n"


@pytest.fixture(scope="module")
def saxpy_lib(tmp_path_factory):
    """SAXPY compiled once for the tests that only call it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EMBER_CACHE_DIR", str(tmp_path_factory.mktemp("saxpy_cache")))
        mp.delenv("EMBER_FAST_MATH", raising=False)
        return build.compile_source(SAXPY, name="saxpy")


def _stats():
    return dict(build.STATS)


def _spawn(cache_dir, source=CHILD_SRC):
    env = {**os.environ, "EMBER_CACHE_DIR": str(cache_dir)}
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    p.stdin.write(source)
    p.stdin.close()
    return p


def _result(p):
    out, err = p.stdout.read(), p.stderr.read()
    assert p.wait(timeout=120) == 0, err
    return json.loads(out.strip().splitlines()[-1])


# ---- compiling, loading, calling ---------------------------------------------------------------------

def test_saxpy_openmp_matches_numpy(saxpy_lib):
    lib = saxpy_lib
    assert isinstance(lib.lib, ctypes.CDLL) and os.path.isfile(lib.path) and len(lib.key) == 64
    saxpy = lib.get("saxpy", [ctypes.c_long, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p], None)
    rng = np.random.default_rng(0)
    for n in (0, 7, 200_003):    # the last one is above EMBER_PARALLEL_MIN: the parallel branch runs
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        expected = np.float32(2.5) * x + y
        saxpy(n, 2.5, x.ctypes.data, y.ctypes.data)
        # gnu11 contracts a*x+y into one fused multiply-add (one rounding): within an ulp of NumPy
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    # the runtime first: loading it applies ember's count to the OpenMP runtime, which another library
    # sharing it may have changed (torch.set_num_threads(1) at a test module's import did); ember's own
    # kernels count their threads themselves (test_compiler_parallel.py)
    expected = build.omp_max_threads()
    assert lib.get("nthreads_used", [], ctypes.c_int)() == expected >= 1
    with pytest.raises(AttributeError, match="no function 'nope'"):
        lib.get("nope")


def test_fp_contract_off_matches_numpy_exactly(cache):
    lib = build.compile_source(SAXPY, name="saxpy", extra_flags=("-ffp-contract=off",))
    saxpy = lib.get("saxpy", [ctypes.c_long, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p], None)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    expected = np.float32(2.5) * x + y
    saxpy(1000, 2.5, x.ctypes.data, y.ctypes.data)
    np.testing.assert_array_equal(y, expected)


def test_openmp_passive_wait_policy_is_set():
    # set on import unless the user chose a policy; spinning idle threads collapse throughput on 2 cores
    assert os.environ.get("OMP_WAIT_POLICY")
    assert "EMBER_PARALLEL_FOR" in build.OMP_PRELUDE


def test_entry_point_calling_convention(saxpy_lib):
    lib = saxpy_lib
    run = lib.entry("entry")
    assert lib.entry("entry") is run
    x = np.arange(5, dtype=np.float32)
    y = np.full(5, 2.0, np.float32)
    out = np.zeros(5, np.float32)
    run((x, y, out))
    np.testing.assert_array_equal(out, x * y)
    out[:] = 0
    run([x, y, out])                                   # any sequence
    np.testing.assert_array_equal(out, x * y)
    out[:] = 0
    build.call(run, (x, y, out))
    np.testing.assert_array_equal(out, x * y)
    out[:] = 0
    build.call(lib.get("entry", [ctypes.c_void_p]), (x, y, out))    # a plain ctypes function
    np.testing.assert_array_equal(out, x * y)
    # views pass the address of their first element
    big = np.arange(20, dtype=np.float32)
    out[:] = 0
    run((big[10:15], y, out))
    np.testing.assert_array_equal(out, big[10:15] * y)
    # ndarray subclasses take the slower path; non-arrays are refused before the kernel runs
    out[:] = 0
    run((np.ma.masked_array(x), y, out))
    np.testing.assert_array_equal(out, x * y)
    with pytest.raises(TypeError, match=r"entry point 'entry': argument 1 must be a numpy.ndarray, got float"):
        run((x, 1.0, out))


def test_pointer_array(saxpy_lib):
    fn = saxpy_lib.get("entry", [ctypes.c_void_p])
    pa = build.PointerArray(3)
    x, y, out = np.arange(5, dtype=np.float32), np.ones(5, np.float32), np.zeros(5, np.float32)
    buf = pa.fill((x, y, out))
    assert [buf[i] for i in range(3)] == [a.__array_interface__["data"][0] for a in (x, y, out)]
    pa.call(fn, (x, y, out))
    np.testing.assert_array_equal(out, x)
    with pytest.raises(ValueError, match="PointerArray"):
        pa.fill((x, y))
    with pytest.raises(TypeError, match="must be a numpy.ndarray, got list"):
        pa.fill((x, y, [1.0]))


def test_compile_error_keeps_source(cache):
    src = "int broken(void) { return undeclared_thing + 1; }\n"
    with pytest.raises(build.CompileError) as info:
        build.compile_source(src, name="broken")
    err = info.value
    assert isinstance(err, RuntimeError)
    assert "undeclared_thing" in str(err) and "undeclared_thing" in err.stderr
    assert err.source_path and err.source_path in str(err)
    with open(err.source_path) as f:
        assert f.read() == src
    assert not any(n.endswith(".so") for n in os.listdir(cache / "kernels"))   # nothing half-built kept


def test_missing_compiler(cache, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/cc")
    with pytest.raises(build.CompileError, match="not found"):
        build.compile_source("int f(void) { return 1; }", name="nocc")


# ---- caching -----------------------------------------------------------------------------------------

def test_memory_and_disk_cache(cache):
    src = "int twice(int x) { return 2 * x; }\n"
    before = _stats()
    a = build.compile_source(src, name="twice")
    assert not a.cache_hit and a.compile_seconds > 0
    assert build.STATS["compiles"] == before["compiles"] + 1
    assert build.STATS["disk_misses"] == before["disk_misses"] + 1
    assert build.STATS["compile_seconds"] > before["compile_seconds"]
    b = build.compile_source(src, name="twice")
    assert b is a and build.STATS["memory_hits"] == before["memory_hits"] + 1
    build.clear_memory_cache()
    c = build.compile_source(src, name="twice")
    assert c is not a and c.cache_hit and c.compile_seconds == 0.0 and c.path == a.path
    assert build.STATS["compiles"] == before["compiles"] + 1
    assert build.STATS["disk_hits"] == before["disk_hits"] + 1
    assert c.get("twice", [ctypes.c_int], ctypes.c_int)(21) == 42
    with open(a.path[:-3] + ".json") as f:
        meta = json.load(f)
    assert meta["schema"] == build.CACHE_SCHEMA and meta["key"] == a.key
    with open(a.source_path) as f:
        assert f.read() == src


def test_key_covers_flags_and_source(cache, monkeypatch):
    src = "int one(void) { return 1; }\n"
    keys = {build.compile_source(src, name="k").key,
            build.compile_source(src + "\n", name="k").key,
            build.compile_source(src, name="k", extra_flags=("-DEXTRA=1",)).key}
    monkeypatch.setenv("EMBER_FAST_MATH", "1")
    keys.add(build.compile_source(src, name="k").key)
    assert len(keys) == 4


def test_fast_math_does_not_flush_denormals_process_wide(cache, monkeypatch):
    # gcc < 13 links crtfastmath.o into -ffast-math shared objects, which sets FTZ/DAZ when loaded
    monkeypatch.setenv("EMBER_FAST_MATH", "1")
    lib = build.compile_source("float half(float x) { return x * 0.5f; }\n", name="fm")
    assert lib.get("half", [ctypes.c_float], ctypes.c_float)(3.0) == 1.5
    tiny = np.array([1e-39], np.float32)
    assert (tiny * np.float32(1.0))[0] != 0.0


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "drop_sidecar", "bad_sidecar"])
def test_corrupt_entry_is_rebuilt(cache, damage):
    src = "int add3(int x) { return x + 3; }\n"
    lib = build.compile_source(src, name="add3")
    path, meta = lib.path, lib.path[:-3] + ".json"
    with open(path, "rb") as f:
        data = f.read()
    if damage in ("truncate", "flip_byte"):
        bad = data[: len(data) // 2] if damage == "truncate" else data[:-1] + bytes([data[-1] ^ 0xFF])
        # a new file moved over the old one: this process still maps the old inode, as a real reader would
        with open(path + ".tmp", "wb") as f:
            f.write(bad)
        os.replace(path + ".tmp", path)
    elif damage == "drop_sidecar":
        os.remove(meta)
    else:
        with open(meta, "w") as f:
            f.write("{not json")
    build.clear_memory_cache()
    before = _stats()
    again = build.compile_source(src, name="add3")
    assert not again.cache_hit
    assert build.STATS["compiles"] == before["compiles"] + 1
    assert build.STATS["disk_misses"] == before["disk_misses"] + 1
    assert again.get("add3", [ctypes.c_int], ctypes.c_int)(4) == 7
    with open(path, "rb") as f:
        assert f.read() == data        # the build is reproducible
    build.clear_memory_cache()
    assert build.compile_source(src, name="add3").cache_hit


def test_second_process_hits_the_disk_cache(tmp_path):
    first = _result(_spawn(tmp_path))
    assert first["value"] == 42 and not first["hit"]
    assert first["stats"]["compiles"] == 1 and first["stats"]["disk_misses"] == 1
    second = _result(_spawn(tmp_path))
    assert second["value"] == 42 and second["hit"] and second["path"] == first["path"]
    assert second["stats"]["compiles"] == 0 and second["stats"]["disk_hits"] == 1


def test_concurrent_processes_build_once(tmp_path):
    src = "int triple(int x) { return x + x + x; }\n"
    procs = [_spawn(tmp_path, src) for _ in range(2)]
    results = [_result(p) for p in procs]
    assert all(r["value"] == 42 for r in results)
    # the build lock makes the second process wait and load the first one's library
    assert sum(r["stats"]["compiles"] for r in results) == 1
    assert sum(r["stats"]["disk_hits"] for r in results) == 1
    leftovers = [n for n in os.listdir(tmp_path / "kernels") if n.startswith(".build-")]
    assert leftovers == []


# ---- BLAS --------------------------------------------------------------------------------------------

GEMM = r"""
void sgemm_nn(int m, int n, int k, const float *a, const float *b, float *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
void dgemm_tn(int m, int n, int k, const double *a, const double *b, double *c) {
    /* a is stored k x m and used transposed */
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0, a, m, b, n, 0.0, c, n);
}
"""


def test_blas_info():
    assert blas.blas_available(), "scipy-openblas32 is a dependency of ember"
    info = blas.BLAS
    assert os.path.isfile(os.path.join(info.include_dir, "cblas.h")) and os.path.isfile(info.lib_path)
    assert info.symbol_prefix == "scipy_" and info.int_bits == 32
    assert "#define cblas_sgemm scipy_cblas_sgemm" in info.prelude
    assert "#define cblas_dgemm scipy_cblas_dgemm" in info.prelude


def test_blas_gemm_matches_numpy(cache):
    lib = build.compile_source(blas.BLAS.prelude + GEMM, name="gemm", link_blas=True)
    args = [ctypes.c_int] * 3 + [ctypes.c_void_p] * 3
    sgemm = lib.get("sgemm_nn", args, None)
    dgemm = lib.get("dgemm_tn", args, None)
    rng = np.random.default_rng(1)
    m, n, k = 37, 23, 61
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    sgemm(m, n, k, a.ctypes.data, b.ctypes.data, c.ctypes.data)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    at = rng.standard_normal((k, m))
    bd = rng.standard_normal((k, n))
    cd = np.empty((m, n))
    dgemm(m, n, k, at.ctypes.data, bd.ctypes.data, cd.ctypes.data)
    np.testing.assert_allclose(cd, at.T @ bd, rtol=1e-12, atol=1e-12)


def test_blas_missing_falls_back(cache, monkeypatch):
    monkeypatch.setattr(blas, "_FOUND", [None])
    assert not blas.blas_available() and blas.BLAS is None
    with pytest.raises(build.CompileError, match="no BLAS found"):
        build.compile_source("int f(void) { return 0; }", name="noblas", link_blas=True)


def test_blas_thread_count():
    n = blas.get_num_threads()
    try:
        blas.set_num_threads(1)
        assert blas.get_num_threads() == 1
    finally:
        blas.set_num_threads(n)
    with pytest.raises(ValueError, match="positive int"):
        blas.set_num_threads(0)


def test_module_docstring_example(cache):
    import doctest
    failures, tried = doctest.testmod(build, verbose=False, optionflags=doctest.ELLIPSIS)[:2]
    assert tried >= 4 and failures == 0
