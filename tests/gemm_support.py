"""Shared checks of the tests of ember's threaded GEMM (test_threads_gemm.py, test_gemm_ksplit.py)."""
import numpy as np

from ember.compiler import gemm


def assert_bits_of_one_thread(a, b, base, threads=(2, 3), runs=3):
    """``a @ b`` on each thread count of ``threads`` (exactly that many), ``runs`` times, plain and added
    to ``base`` (accumulate=True), is bitwise the one-thread result; that one is checked against float64."""
    K = a.shape[1]
    one, one_acc = gemm.sgemm(a, b, threads=1), base.copy()
    gemm.sgemm(a, b, threads=1, out=one_acc, accumulate=True)
    np.testing.assert_allclose(one, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5 * np.sqrt(K))
    np.testing.assert_allclose(one_acc, base + a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5 * np.sqrt(K))
    for nt in threads:
        for _ in range(runs):
            np.testing.assert_array_equal(gemm.sgemm(a, b, threads=nt, exact_threads=True), one)
            acc = base.copy()
            gemm.sgemm(a, b, threads=nt, out=acc, accumulate=True, exact_threads=True)
            np.testing.assert_array_equal(acc, one_acc)
