"""ember's GEMM split along K on several threads (compiler/gemm_ksplit_c.py): a small C against a long K
(weight gradients) gives bitwise the one-thread result, accumulating too, whoever runs which item; the
split runs where it is chosen and ``ember_gemm_ksplit = 0`` turns it off (correctness only; speed is in
``python -m ember.bench gemm --threads 2``)."""
import ctypes

import numpy as np
import pytest

from ember.compiler import gemm
from gemm_support import assert_bits_of_one_thread

needs_gemm = pytest.mark.skipif(not gemm.available(), reason="this CPU has neither AVX-512 nor AVX2+FMA: "
                                                             "ember's GEMM is not compiled (the BLAS runs)")


def _lib():
    return gemm.library()[0]


def _knob():
    return ctypes.c_int.in_dll(_lib().lib, "ember_gemm_ksplit")


def _last_job():
    out = (ctypes.c_longlong * 5)()
    _lib().get("ember_pool_last", (ctypes.c_void_p,), None)(ctypes.addressof(out))
    return list(out)


def _operand(rng, rows, cols, trans):
    x = rng.uniform(-1, 1, (cols, rows) if trans else (rows, cols)).astype(np.float32)
    return x.T if trans else x


@pytest.fixture
def ksplit():
    knob = _knob()
    old = knob.value
    yield knob
    knob.value = old


@needs_gemm
@pytest.mark.parametrize("mode", [2, 1])
@pytest.mark.parametrize("ta,tb", [(1, 0), (0, 0), (0, 1), (1, 1)])
def test_k_split_gives_the_bits_of_one_thread(ksplit, mode, ta, tb):
    """K over 2-5 blocks of at most 256 (uneven last blocks: 257, 600, 1100), partial tiles, N = 10, the
    GPT's 128x512x1024 weight gradient; 2-4 threads, three runs each, with and without accumulate; forced
    wherever there are two K blocks (mode 2) and where chosen (mode 1)."""
    rng = np.random.default_rng(ta * 2 + tb + 10 * mode)
    ksplit.value = mode
    for M, N, K in ((128, 512, 1024), (97, 33, 257), (13, 10, 600), (7, 5, 1100), (256, 10, 512)):
        a, b = _operand(rng, M, K, ta), _operand(rng, K, N, tb)
        assert_bits_of_one_thread(a, b, rng.uniform(-1, 1, (M, N)).astype(np.float32), threads=(2, 3, 4))


@needs_gemm
def test_k_split_runs_where_chosen_and_can_be_turned_off(ksplit):
    """60x10x600 on two threads (three K blocks): the split's job has three items (the caller's first
    block, then one item per later block; its final sums are small enough for the caller alone); with the
    knob at 0 the same product runs as row or block items instead, with the same bits."""
    rng = np.random.default_rng(3)
    a, b = _operand(rng, 60, 600, 1), _operand(rng, 600, 10, 0)
    one = gemm.sgemm(a, b, threads=1)
    ksplit.value = 1
    np.testing.assert_array_equal(gemm.sgemm(a, b, threads=2, exact_threads=True), one)
    assert _last_job()[0] == 3
    ksplit.value = 0
    np.testing.assert_array_equal(gemm.sgemm(a, b, threads=2, exact_threads=True), one)
    assert _last_job()[0] != 3
