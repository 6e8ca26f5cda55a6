"""ember.utils.data: DataLoader batches, samplers, datasets, random_split and collation, compared with
torch.utils.data (structure, container types, dtypes and values), plus worker-process loading."""
import collections
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import ember
import ember.utils.data as eud


# ---- helpers ------------------------------------------------------------------------------------------


def to_np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().float().numpy() if t.dtype is torch.bfloat16 else t.detach().numpy()
    return t.numpy().astype(np.float32) if t.dtype is ember.bfloat16 else t.numpy()


def same(e, t, path="batch"):
    """ember structure ``e`` mirrors torch structure ``t``: container types, dtypes, shapes, values."""
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{path}: {type(e).__name__} is not a Tensor"
        assert e.dtype.name == str(t.dtype).replace("torch.", ""), f"{path}: {e.dtype} vs {t.dtype}"
        assert tuple(e.shape) == tuple(t.shape), f"{path}: {tuple(e.shape)} vs {tuple(t.shape)}"
        np.testing.assert_array_equal(to_np(e), to_np(t), err_msg=path)
        return
    assert type(e) is type(t), f"{path}: {type(e).__name__} vs {type(t).__name__}"
    if isinstance(t, dict):
        assert list(e.keys()) == list(t.keys()), path
        for k in t:
            same(e[k], t[k], f"{path}[{k!r}]")
    elif isinstance(t, (list, tuple)):
        assert len(e) == len(t), f"{path}: length {len(e)} vs {len(t)}"
        for i, (a, b) in enumerate(zip(e, t)):
            same(a, b, f"{path}[{i}]")
    elif isinstance(t, np.ndarray):
        np.testing.assert_array_equal(e, t)
    else:
        assert e == t, f"{path}: {e!r} vs {t!r}"


def same_error(fn):
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as ee:
        fn(ember)
    assert ee.type is te.type, f"ember raised {ee.type.__name__}: {ee.value}; torch {te.type.__name__}: {te.value}"
    return str(ee.value), str(te.value)


def tensor_of(lib, arr):
    return lib.tensor(np.asarray(arr))


Point = collections.namedtuple("Point", ["x", "y"])


class _LibDS:
    """A plain map-style dataset (no Dataset base) of ``size`` samples made with ``lib`` (ember or torch)."""

    size = 0

    def __init__(self, lib):
        self.lib = lib

    def __len__(self):
        return self.size


class DictDS(_LibDS):
    """Samples are dicts of mixed types."""

    size = 7

    def __getitem__(self, i):
        return {"img": self.lib.full((2, 3), float(i)), "label": i, "w": 0.5 * i, "name": f"s{i}",
                "flag": i % 2 == 0, "np": np.arange(3, dtype=np.int32) + i}


class TupleDS(_LibDS):
    """Samples are tuples of a tensor, a NumPy scalar, a namedtuple and a list."""

    size = 5

    def __getitem__(self, i):
        return (self.lib.arange(4, dtype=self.lib.float32) * i, np.float32(i) / 2, Point(i, float(i)), [i, i + 1])


# ---- DataLoader against torch (in-process) ---------------------------------------------------------------


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, False), (10, True)])
def test_tensor_dataset_batches_match_torch(batch_size, drop_last):
    x = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)
    y = np.arange(7)

    def run(lib, data):
        ds = data.TensorDataset(tensor_of(lib, x), tensor_of(lib, y))
        dl = data.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
        return len(dl), list(dl)

    (ne, be), (nt, bt) = run(ember, eud), run(torch, tud)
    assert ne == nt == len(bt)
    same(be, bt)


@pytest.mark.parametrize("ds", [DictDS, TupleDS])
def test_structured_batches_match_torch(ds):
    be = list(eud.DataLoader(ds(ember), batch_size=3))
    bt = list(tud.DataLoader(ds(torch), batch_size=3))
    same(be, bt)


def test_batch_size_none_uses_default_convert():
    be = list(eud.DataLoader(TupleDS(ember), batch_size=None))
    bt = list(tud.DataLoader(TupleDS(torch), batch_size=None))
    same(be, bt)
    assert len(eud.DataLoader(TupleDS(ember), batch_size=None)) == 5


def test_custom_collate_and_batch_sampler_match_torch():
    def run(lib, data):
        ds = data.TensorDataset(lib.arange(10))
        bs = [[0, 1], [5, 3, 2], [9]]
        dl = data.DataLoader(ds, batch_sampler=bs, collate_fn=lambda b: [x[0].item() * 2 for x in b])
        dl2 = data.DataLoader(ds, batch_size=4, sampler=[9, 8, 7, 1, 0])
        return list(dl), list(dl2), len(dl2)

    e, t = run(ember, eud), run(torch, tud)
    assert e[0] == t[0]
    same(e[1], t[1])
    assert e[2] == t[2]


def test_getitems_is_used_for_batches():
    class Batched(eud.Dataset):
        calls = 0

        def __len__(self):
            return 6

        def __getitem__(self, i):
            raise AssertionError("__getitems__ should be used")

        def __getitems__(self, idx):
            Batched.calls += 1
            return [ember.tensor(float(i)) for i in idx]

    out = list(eud.DataLoader(Batched(), batch_size=4))
    assert Batched.calls == 2
    assert out[0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_shuffle_with_generator_is_repeatable_permutation():
    ds = eud.TensorDataset(ember.arange(20))

    def epoch(dl):
        return [int(v) for (b,) in dl for v in b.tolist()]

    g1 = ember.Generator().manual_seed(123)
    g2 = ember.Generator().manual_seed(123)
    dl1 = eud.DataLoader(ds, batch_size=6, shuffle=True, generator=g1)
    dl2 = eud.DataLoader(ds, batch_size=6, shuffle=True, generator=g2)
    a1, a2 = epoch(dl1), epoch(dl1)
    b1, b2 = epoch(dl2), epoch(dl2)
    assert a1 == b1 and a2 == b2                      # same seed, same sequence of epochs
    assert sorted(a1) == list(range(20)) and sorted(a2) == list(range(20))
    assert a1 != a2                                   # reshuffled every epoch
    assert a1 != list(range(20))


def test_shuffle_default_generator_follows_manual_seed():
    ds = eud.TensorDataset(ember.arange(30))
    ember.manual_seed(7)
    a = [int(v) for (b,) in eud.DataLoader(ds, batch_size=30, shuffle=True) for v in b.tolist()]
    ember.manual_seed(7)
    b = [int(v) for (b,) in eud.DataLoader(ds, batch_size=30, shuffle=True) for v in b.tolist()]
    assert a == b and sorted(a) == list(range(30))


def test_dataloader_len_matches_torch():
    for n, bs, dl_ in [(10, 3, False), (10, 3, True), (9, 3, True), (1, 5, False), (0, 2, False)]:
        e = eud.DataLoader(list(range(n)), batch_size=bs, drop_last=dl_)
        t = tud.DataLoader(list(range(n)), batch_size=bs, drop_last=dl_)
        assert len(e) == len(t)
        same(list(e), list(t))


def test_option_errors_match_torch():
    def mk(**kw):
        return lambda lib: (lib.utils.data.DataLoader(list(range(4)), **kw))
    cases = [dict(shuffle=True, sampler=[0, 1]),
             dict(batch_sampler=[[0]], batch_size=2),
             dict(batch_sampler=[[0]], shuffle=True),
             dict(batch_sampler=[[0]], sampler=[0]),
             dict(batch_sampler=[[0]], drop_last=True),
             dict(batch_size=None, drop_last=True),
             dict(num_workers=-1),
             dict(timeout=-1),
             dict(prefetch_factor=2),
             dict(persistent_workers=True),
             dict(multiprocessing_context="spawn"),
             dict(num_workers=1, multiprocessing_context="nope"),
             dict(num_workers=1, multiprocessing_context=3),
             dict(batch_size=0),
             dict(batch_size=2, drop_last=1)]
    for kw in cases:
        em, tm = same_error(mk(**kw))
        assert em == tm, kw


def test_iterable_dataset_option_errors_match_torch():
    def it(lib):
        class S(lib.utils.data.IterableDataset):
            def __iter__(self):
                return iter(range(3))
        return S()
    for kw in [dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])]:
        em, tm = same_error(lambda lib: lib.utils.data.DataLoader(it(lib), **kw))
        assert em.split(",")[0] == tm.split(",")[0]


def test_setting_attributes_after_init_raises():
    for lib in (torch, ember):
        dl = lib.utils.data.DataLoader(list(range(3)))
        with pytest.raises(ValueError, match="batch_size attribute should not be set"):
            dl.batch_size = 3
        dl.num_workers = 0            # other attributes can change


def test_timeout_without_workers_asserts_like_torch():
    same_error(lambda lib: iter(lib.utils.data.DataLoader(list(range(3)), timeout=1.0)))


# ---- iterable datasets ----------------------------------------------------------------------------------


class RangeStream:
    """Factory of an IterableDataset over range(n) for either library, sharded across workers."""

    @staticmethod
    def make(lib, n, with_len=False):
        data = lib.utils.data

        class Stream(data.IterableDataset):
            def __iter__(self):
                info = data.get_worker_info()
                if info is None:
                    return iter(range(n))
                return iter(range(info.id, n, info.num_workers))

            if with_len:
                def __len__(self):
                    return n
        return Stream()


@pytest.mark.parametrize("bs,drop", [(3, False), (3, True), (None, False), (1, False)])
def test_iterable_dataset_batches_match_torch(bs, drop):
    e = list(eud.DataLoader(RangeStream.make(ember, 8), batch_size=bs, drop_last=drop))
    t = list(tud.DataLoader(RangeStream.make(torch, 8), batch_size=bs, drop_last=drop))
    same(e, t)


def test_iterable_dataset_len_and_overrun_warning():
    class Liar(eud.IterableDataset):
        def __iter__(self):
            return iter(range(5))

        def __len__(self):
            return 2
    dl = eud.DataLoader(Liar(), batch_size=None)
    assert len(dl) == 2
    with pytest.warns(UserWarning, match="was reported to be 2"):
        list(dl)
    assert len(eud.DataLoader(RangeStream.make(ember, 7, True), batch_size=3)) == 3
    assert len(eud.DataLoader(RangeStream.make(ember, 7, True), batch_size=3, drop_last=True)) == 2
    with pytest.raises(TypeError):
        len(eud.DataLoader(RangeStream.make(ember, 7), batch_size=3))


def test_chain_and_concat_datasets_match_torch():
    def run(lib):
        data = lib.utils.data
        a, b = RangeStream.make(lib, 3, True), RangeStream.make(lib, 2, True)
        chain = a + b
        cat = data.TensorDataset(lib.arange(3)) + data.TensorDataset(lib.arange(10, 14))
        return (type(chain).__name__, list(chain), len(chain), type(cat).__name__, len(cat), cat[4], cat[-1],
                cat.cumulative_sizes, list(data.DataLoader(cat, batch_size=3)))
    e, t = run(ember), run(torch)
    same(list(e), list(t))
    same_error(lambda lib: lib.utils.data.ConcatDataset([lib.utils.data.TensorDataset(lib.arange(3))])[-4])
    same_error(lambda lib: lib.utils.data.ConcatDataset([]))
    same_error(lambda lib: lib.utils.data.ConcatDataset([RangeStream.make(lib, 2)]))


def test_subset_and_stack_dataset_match_torch():
    def run(lib):
        data = lib.utils.data
        base = data.TensorDataset(lib.arange(10) * 2)
        sub = data.Subset(base, [7, 1, 3])
        st = data.StackDataset(lib.arange(4), lib.arange(4) * 10)
        sd = data.StackDataset(a=lib.arange(4), b=[f"x{i}" for i in range(4)])
        return (len(sub), sub[0], sub.__getitems__([0, 2]), list(data.DataLoader(sub, batch_size=2)), len(st), st[2],
                list(data.DataLoader(st, batch_size=3)), sd[1], list(data.DataLoader(sd, batch_size=3)))
    same(list(run(ember)), list(run(torch)))
    same_error(lambda lib: lib.utils.data.StackDataset(lib.arange(3), lib.arange(4)))
    same_error(lambda lib: lib.utils.data.StackDataset())
    same_error(lambda lib: lib.utils.data.TensorDataset(lib.arange(3), lib.arange(4)))


def test_dataset_base_raises_not_implemented():
    same_error(lambda lib: lib.utils.data.Dataset()[0])


# ---- samplers --------------------------------------------------------------------------------------------


def test_sequential_and_batch_sampler_match_torch():
    for n, bs, dl_ in [(10, 3, False), (10, 3, True), (4, 4, True), (3, 5, False)]:
        e = eud.BatchSampler(eud.SequentialSampler(range(n)), bs, dl_)
        t = tud.BatchSampler(tud.SequentialSampler(range(n)), bs, dl_)
        assert list(e) == list(t) and len(e) == len(t)


def test_random_sampler():
    g = ember.Generator().manual_seed(0)
    s = eud.RandomSampler(range(10), generator=g)
    a = list(s)
    assert sorted(a) == list(range(10)) and len(s) == 10
    s = eud.RandomSampler(range(4), num_samples=10, generator=g)
    a = list(s)
    assert len(a) == 10 == len(s)
    assert sorted(a[:4]) == sorted(a[4:8]) == list(range(4))     # whole permutations first
    s = eud.RandomSampler(range(5), replacement=True, num_samples=70, generator=g)
    a = list(s)
    assert len(a) == 70 and set(a) <= set(range(5)) and len(set(a)) == 5
    assert all(isinstance(i, int) for i in a)
    g1, g2 = ember.Generator().manual_seed(5), ember.Generator().manual_seed(5)
    assert list(eud.RandomSampler(range(50), generator=g1)) == list(eud.RandomSampler(range(50), generator=g2))


def test_sampler_errors_match_torch():
    cases = [lambda lib: lib.utils.data.RandomSampler(range(3), replacement=1),
             lambda lib: lib.utils.data.RandomSampler(range(3), num_samples=0),
             lambda lib: lib.utils.data.RandomSampler(range(3), num_samples=2.0),
             lambda lib: lib.utils.data.WeightedRandomSampler([1.0, 2.0], 0),
             lambda lib: lib.utils.data.WeightedRandomSampler([1.0, 2.0], True),
             lambda lib: lib.utils.data.WeightedRandomSampler([1.0, 2.0], 2, replacement=0),
             lambda lib: lib.utils.data.WeightedRandomSampler([[1.0, 2.0]], 2),
             lambda lib: lib.utils.data.BatchSampler(range(3), 0, False),
             lambda lib: lib.utils.data.BatchSampler(range(3), True, False),
             lambda lib: lib.utils.data.BatchSampler(range(3), 2, None)]
    for c in cases:
        em, tm = same_error(c)
        assert em == tm


def test_subset_random_sampler():
    idx = [3, 8, 11, 20]
    g = ember.Generator().manual_seed(1)
    s = eud.SubsetRandomSampler(idx, generator=g)
    a = list(s)
    assert sorted(a) == idx and len(s) == 4
    g1, g2 = ember.Generator().manual_seed(9), ember.Generator().manual_seed(9)
    assert list(eud.SubsetRandomSampler(idx, g1)) == list(eud.SubsetRandomSampler(idx, g2))


def test_weighted_random_sampler():
    g = ember.Generator().manual_seed(0)
    s = eud.WeightedRandomSampler([0.0, 1.0, 3.0, 0.0], 4000, generator=g)
    a = np.array(list(s))
    assert len(s) == 4000 and set(a.tolist()) == {1, 2}
    assert abs((a == 2).mean() - 0.75) < 0.04
    s = eud.WeightedRandomSampler([1.0, 1.0, 5.0, 2.0, 0.5], 5, replacement=False, generator=g)
    assert sorted(s) == [0, 1, 2, 3, 4]
    assert s.weights.dtype is ember.float64
    assert tud.WeightedRandomSampler([1, 2], 2).weights.dtype is torch.float64


# ---- random_split ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n,lengths", [(10, [3, 7]), (10, [0.3, 0.7]), (11, [0.5, 0.5]), (30, [0.3, 0.3, 0.4]),
                                       (7, [0.1, 0.1, 0.8]), (5, [5, 0])])
def test_random_split_sizes_and_disjointness(n, lengths):
    g = ember.Generator().manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parts = eud.random_split(range(n), lengths, generator=g)
        tparts = tud.random_split(range(n), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in tparts]
    assert all(isinstance(p, eud.Subset) for p in parts)
    items = [x for p in parts for x in (p[i] for i in range(len(p)))]
    assert sorted(items) == list(range(n))
    g1, g2 = ember.Generator().manual_seed(3), ember.Generator().manual_seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [p.indices for p in eud.random_split(range(n), lengths, generator=g1)] == \
            [p.indices for p in eud.random_split(range(n), lengths, generator=g2)]


def test_random_split_errors_and_warnings():
    em, tm = same_error(lambda lib: lib.utils.data.random_split(range(10), [3, 8]))
    assert em == tm
    em, tm = same_error(lambda lib: lib.utils.data.random_split(range(10), [1.5, -0.5]))
    assert em == tm
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        eud.random_split(range(2), [1.0, 0.0])


# ---- collation -------------------------------------------------------------------------------------------


def collate_inputs(lib):
    return [
        [lib.ones(2, 3), lib.zeros(2, 3)],
        [lib.tensor([1, 2], dtype=lib.int32), lib.tensor([3, 4], dtype=lib.int32)],
        [1, 2, 3],
        [1.5, 2.5],
        [True, False],
        ["a", "bc"],
        [b"x", b"y"],
        [np.float32(1.5), np.float32(2)],
        [np.int16(3), np.int16(4)],
        [np.float64(1.0), np.float64(2.0)],
        [np.bool_(True), np.bool_(False)],
        [np.arange(3, dtype=np.uint8), np.arange(3, dtype=np.uint8)],
        [np.ones((2, 2), dtype=np.float64), np.zeros((2, 2), dtype=np.float64)],
        [(1, "a", 2.0), (2, "b", 3.0)],
        [[1, 2], [3, 4]],
        [{"x": 1, "y": [np.int64(1), 2.0]}, {"x": 2, "y": [np.int64(3), 4.0]}],
        [Point(1, 2.0), Point(3, 4.0)],
        [collections.OrderedDict(b=1, a=2.0), collections.OrderedDict(b=3, a=4.0)],
        [(lib.ones(2), {"k": (1, "s")}), (lib.zeros(2), {"k": (2, "t")})],
    ]


@pytest.mark.parametrize("i", range(19))
def test_default_collate_matches_torch(i):
    e = eud.default_collate(collate_inputs(ember)[i])
    t = tud.default_collate(collate_inputs(torch)[i])
    same(e, t)


@pytest.mark.parametrize("i", range(19))
def test_default_convert_matches_torch(i):
    e = [eud.default_convert(x) for x in collate_inputs(ember)[i]]
    t = [tud.default_convert(x) for x in collate_inputs(torch)[i]]
    same(e, t)


def test_collate_errors_match_torch():
    for batch in ([object(), object()], [[1, 2], [3]], [np.array(["a"]), np.array(["b"])]):
        with pytest.raises(Exception) as te:
            tud.default_collate(batch)
        with pytest.raises(Exception) as ee:
            eud.default_collate(batch)
        assert ee.type is te.type
        assert str(ee.value) == str(te.value)
    with pytest.raises(RuntimeError):
        eud.default_collate([ember.ones(2), ember.ones(3)])


def test_collate_extensible_map():
    from ember.utils.data._utils.collate import collate, default_collate_fn_map

    class Box:
        def __init__(self, v):
            self.v = v
    fn_map = {**default_collate_fn_map, Box: lambda b, *, collate_fn_map: sum(x.v for x in b)}
    assert collate([(Box(1), 2), (Box(3), 4)], collate_fn_map=fn_map)[0] == 4


# ---- worker processes ------------------------------------------------------------------------------------


class SquaresDS(eud.Dataset):
    def __len__(self):
        return 23

    def __getitem__(self, i):
        if i == 17 and getattr(self, "fail", False):
            raise KeyError("bad index 17")
        return ember.tensor([float(i * i)]), i


class WorkerIdDS(eud.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = eud.get_worker_info()
        return -1 if info is None else info.id * 100 + _INIT_MARK[0]


_INIT_MARK = [0]


def _init_fn(worker_id):
    _INIT_MARK[0] = 7


class Stream(eud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = eud.get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class Unpicklable(eud.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return lambda: i


def test_workers_give_the_same_batches_in_order():
    ref = list(eud.DataLoader(SquaresDS(), batch_size=4))
    got = list(eud.DataLoader(SquaresDS(), batch_size=4, num_workers=2))
    assert len(got) == len(ref) == 6
    for (a, b), (c, d) in zip(ref, got):
        assert a.tolist() == c.tolist() and b.tolist() == d.tolist()
    g1, g2 = ember.Generator().manual_seed(4), ember.Generator().manual_seed(4)
    s1 = [b.tolist() for _, b in eud.DataLoader(SquaresDS(), batch_size=5, shuffle=True, generator=g1)]
    s2 = [b.tolist() for _, b in eud.DataLoader(SquaresDS(), batch_size=5, shuffle=True, generator=g2,
                                                num_workers=2, prefetch_factor=1)]
    assert s1 == s2


def test_worker_info_and_init_fn():
    assert eud.get_worker_info() is None
    assert [int(x) for b in eud.DataLoader(WorkerIdDS(), batch_size=2) for x in b] == [-1] * 8
    out = [int(x) for b in eud.DataLoader(WorkerIdDS(), batch_size=2, num_workers=2, worker_init_fn=_init_fn)
           for x in b]
    assert out == [7, 7, 107, 107, 7, 7, 107, 107]    # batches go round-robin to the workers
    assert _INIT_MARK[0] == 0                          # the init function ran in the workers only


def test_worker_seeds_differ_and_follow_the_generator():
    class Draw(eud.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return ember.rand(1).item(), eud.get_worker_info().seed

    def run(seed):
        g = ember.Generator().manual_seed(seed)
        return [(r.item(), s.item()) for r, s in eud.DataLoader(Draw(), batch_size=1, num_workers=2, generator=g)]
    a, b = run(1), run(1)
    assert a == b
    seeds = [s for _, s in a]
    assert seeds[1] == seeds[0] + 1 and seeds[2] == seeds[0]


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_iterable_dataset_sharded_across_workers():
    got = sorted(int(x) for b in eud.DataLoader(Stream(11), batch_size=2, num_workers=3) for x in b)
    assert got == list(range(11))
    got = sorted(int(x) for x in eud.DataLoader(Stream(5), batch_size=None, num_workers=2))
    assert got == list(range(5))


def test_worker_errors_propagate_with_their_type():
    ds = SquaresDS()
    ds.fail = True
    with pytest.raises(KeyError, match="bad index 17"):
        list(eud.DataLoader(ds, batch_size=4, num_workers=2))
    with pytest.raises(Exception, match="could not be pickled"):
        list(eud.DataLoader(Unpicklable(), batch_size=None, num_workers=1))


def test_persistent_workers_run_several_epochs():
    dl = eud.DataLoader(Stream(6), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(3):
        assert sorted(int(x) for b in dl for x in b) == list(range(6))
    dl = eud.DataLoader(SquaresDS(), batch_size=5, num_workers=2, persistent_workers=True)
    it = iter(dl)
    next(it)                                           # abandon an epoch midway
    assert [b.tolist() for _, b in dl] == [list(range(i, min(i + 5, 23))) for i in range(0, 23, 5)]


def test_pin_memory_and_workers_options_accepted():
    dl = eud.DataLoader(SquaresDS(), batch_size=8, pin_memory=True, num_workers=1, timeout=30,
                        prefetch_factor=3, multiprocessing_context="fork")
    assert sum(len(b) for _, b in dl) == 23


class Dies(eud.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        import os
        os._exit(3)


class Slow(eud.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        import time
        time.sleep(1.0)
        return i


def test_dead_worker_and_timeout_raise():
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(eud.DataLoader(Dies(), batch_size=2, num_workers=1))
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.2 seconds"):
        list(eud.DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.2))


def test_collate_keeps_autograd():
    for lib in (torch, ember):
        a = lib.ones(2, requires_grad=True)
        out = lib.utils.data.default_collate([a, a * 2])
        assert out.requires_grad
        out.sum().backward()
        assert a.grad.tolist() == [3.0, 3.0]
