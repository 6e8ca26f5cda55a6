"""``mode``'s indices where torch's answer follows from the exact steps of its ``std::sort`` (slices
holding NaN; ties in slices longer than 16 elements, where introsort is not stable): compared with torch
on many random slices, float and integer, short and long. (The heapsort fallback past introsort's depth
limit is not reached by these inputs; it is only checked to sort.)"""
import numpy as np
import pytest
import torch

import ember


def _check(a, dim=-1):
    tv, ti = torch.mode(torch.tensor(a), dim)
    ev, ei = ember.mode(ember.tensor(a), dim)
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    np.testing.assert_array_equal(ev.numpy(), tv.numpy())


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16, 17, 24, 40, 100])
def test_mode_with_nans_matches_torch(n):
    rng = np.random.default_rng(n)
    a = rng.integers(0, 4, size=(60, n)).astype(np.float32)
    a[rng.random(a.shape) < 0.3] = np.nan
    a[0] = np.nan
    _check(a)
    _check(a.T.copy(), 0)


@pytest.mark.parametrize("n", [17, 33, 64, 300])
def test_mode_ties_in_long_slices_match_torch(n):
    rng = np.random.default_rng(n + 1)
    _check(rng.integers(0, 3, size=(20, n)).astype(np.int64))
    _check(rng.integers(0, 5, size=(20, n)).astype(np.float64))
    _check(np.ones((3, n), np.float32))
    _check(np.arange(n, dtype=np.float32)[::-1] % 4)


def test_mode_mostly_nan_long_slices_match_torch():
    rng = np.random.default_rng(7)
    a = np.full((10, 200), np.nan, np.float32)
    a[rng.random(a.shape) < 0.1] = 1.0
    _check(a)


def test_heapsort_fallback_sorts():
    from ember.ops._std_sort import _heapsort
    rng = np.random.default_rng(3)
    for n in (2, 5, 16, 31, 100):
        vals = rng.integers(0, 7, n).tolist()
        items = [(v, i) for i, v in enumerate(vals)]
        _heapsort(items, 0, n)
        assert [v for v, _ in items] == sorted(vals)
        assert sorted(i for _, i in items) == list(range(n))
