"""NumPy's BLAS on one thread while builds run beside a program's steps (compiler/tiers.py's hold):
counted holders released in any order restore the count once; ember.set_num_threads during a hold wins."""
import threading

import numpy as np
import pytest

import ember
from ember.compiler import shared_gemm, tiers

threadpoolctl = pytest.importorskip("threadpoolctl", reason="the BLAS limit needs threadpoolctl")


def _blas_threads():
    info = threadpoolctl.threadpool_info()
    blas = [i["num_threads"] for i in info if i["user_api"] == "blas"]
    if not blas:
        pytest.skip("threadpoolctl finds no BLAS in NumPy here")
    return blas[0]


@pytest.fixture
def two_threads():
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)


def test_holds_released_out_of_order_restore_once(two_threads, monkeypatch):
    monkeypatch.delenv("EMBER_BACKGROUND_BLAS_ONE", raising=False)
    assert _blas_threads() == 2
    assert tiers.hold_one_blas_thread()
    assert _blas_threads() == 1
    # a second holder on another thread, released before the first one
    out = []
    t = threading.Thread(target=lambda: out.append(tiers.hold_one_blas_thread()))
    t.start()
    t.join()
    assert out == [True] and _blas_threads() == 1
    tiers.release_blas_thread()
    assert _blas_threads() == 1          # the first holder still holds
    tiers.release_blas_thread()
    assert _blas_threads() == 2


def test_set_num_threads_during_a_hold_is_kept(two_threads, monkeypatch):
    monkeypatch.delenv("EMBER_BACKGROUND_BLAS_ONE", raising=False)
    assert tiers.hold_one_blas_thread()
    ember.set_num_threads(1)
    ember.set_num_threads(2)             # (set while held: in force again at the release)
    tiers.hold_one_blas_thread()
    tiers.release_blas_thread()
    tiers.release_blas_thread()
    assert _blas_threads() == 2


def test_turned_off_by_env(two_threads, monkeypatch):
    monkeypatch.setenv("EMBER_BACKGROUND_BLAS_ONE", "0")
    assert tiers.hold_one_blas_thread() is False
    assert _blas_threads() == 2


def test_products_on_one_blas_thread_match_two_closely(two_threads):
    # OpenBLAS splits a product differently on one thread than on two, so the last bits may differ (as
    # with any set_num_threads change), never more than float32 rounding of the sums
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 128), dtype=np.float32)
    b = rng.standard_normal((128, 512), dtype=np.float32)
    two = a @ b
    assert tiers.hold_one_blas_thread()
    try:
        one = a @ b
    finally:
        tiers.release_blas_thread()
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(one, exact, rtol=0, atol=1e-4)
    np.testing.assert_allclose(one, two, rtol=0, atol=1e-4)


def test_prefetch_thread_releases_its_hold(monkeypatch):
    # the GEMM build's thread ends its hold whatever the build does
    monkeypatch.setattr(shared_gemm, "_library", lambda: None)
    n = tiers._BLAS_HOLD["n"]
    monkeypatch.setattr(shared_gemm, "_PREFETCH", {"blas_held": tiers.hold_one_blas_thread()})
    assert tiers._BLAS_HOLD["n"] == n + 1
    shared_gemm._build_in_background()
    assert tiers._BLAS_HOLD["n"] == n and "blas_held" not in shared_gemm._PREFETCH
