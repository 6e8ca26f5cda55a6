"""Oracle cases for indexing: __getitem__/__setitem__, gather/scatter, index_*, masked_*, take/put, nonzero."""
import numpy as np

from oracle import Case

LONG = "int64"
ZERO = ("contig", "noncontig", "zero")


def _np(dtype):
    return np.dtype(dtype)


def _perm_index(rng, n, shape):
    """Index values with no repeats along axis 0 (so scatter/index_copy results are deterministic)."""
    cols = [rng.permutation(n)[:shape[0]] for _ in range(int(np.prod(shape[1:], dtype=np.int64)))]
    return np.stack(cols, axis=-1).reshape(shape).astype(np.int64)


def _mask_case(shape_x, shape_m):
    def make(rng, dtype):
        return [rng.uniform(-2, 2, size=shape_x).astype(_np(dtype)), rng.random(shape_m) > 0.4]
    return make


# ---- __getitem__ ----------------------------------------------------------------------------------

GETITEM = [
    Case("getitem_basic_mix", lambda m, a: a[1:, None, ..., ::2] * 1.0, shapes=((4, 5, 6),), layouts=ZERO),
    Case("getitem_int_negative", lambda m, a: a[-1, :, -2], shapes=((3, 4, 5),), double_backward=True),
    Case("getitem_neg_bounds", lambda m, a: a[-3:-1, -10:], shapes=((4, 5),)),
    Case("getitem_list_duplicates", lambda m, a: a[[0, 2, 2, -1]], shapes=((4, 5),), double_backward=True),
    Case("getitem_int_tensor", lambda m, a, i: a[i], shapes=((4, 5), (2, 3)), int_inputs={1: (-4, 4, LONG)},
         double_backward=True),
    Case("getitem_int32_tensor", lambda m, a, i: a[:, i], shapes=((4, 5), (3,)), int_inputs={1: (0, 5, "int32")}),
    Case("getitem_adv_adjacent", lambda m, a, i, j: a[:, i, j], shapes=((3, 4, 5), (2, 1), (3,)),
         int_inputs={1: (0, 4, LONG), 2: (-5, 5, LONG)}),
    Case("getitem_adv_nonadjacent", lambda m, a, i, j: a[i, :, j], shapes=((3, 4, 5), (2,), (2,)),
         int_inputs={1: (0, 3, LONG), 2: (0, 5, LONG)}, double_backward=True),
    Case("getitem_int_then_adv", lambda m, a: a[0, :, [1, 2]], shapes=((3, 4, 5),)),
    Case("getitem_adv_slice_none", lambda m, a: a[[1, 0], None, 1:3, [2, 3]], shapes=((3, 4, 5),)),
    Case("getitem_ellipsis_adv", lambda m, a: a[None, ..., [0, 2]], shapes=((3, 4, 5),)),
    Case("getitem_bool_scalars", lambda m, a: (a[True], a[..., False], a[1, True]), shapes=((3, 4),)),
    Case("getitem_mask_full", lambda m, a, k: a[k], make=_mask_case((3, 4), (3, 4)), double_backward=True),
    Case("getitem_mask_partial", lambda m, a, k: a[:, k], make=_mask_case((3, 4, 5), (4,))),
    Case("getitem_mask_2d_middle", lambda m, a, k: a[1:, k], make=_mask_case((3, 4, 5), (4, 5))),
    Case("getitem_mask_and_int", lambda m, a, k: a[k, [0, 2]], make=_mask_case((3, 4), (3,))),
    Case("getitem_ndarray", lambda m, a: a[np.array([1, 0])], shapes=((3, 4),)),
    Case("getitem_zero_size", lambda m, a: a[:, [0, 1]], shapes=((3, 4),), layouts=ZERO),
    Case("getitem_noncontig_adv", lambda m, a: a.t()[[1, 3]], shapes=((3, 4),)),
    Case("getitem_int_dtype", lambda m, a: (a[[2, 0]], a[1, [1, 2]], a[a.shape[0] - 1]), shapes=((3, 4),),
         dtypes=("int64", "int32", "bool")),
]


# ---- __setitem__ with autograd --------------------------------------------------------------------


def _set_basic(m, a, b):
    x = a.clone()
    x[1:] = b * 2
    return x


def _set_number(m, a):
    x = a * 1
    x[..., 0] = 3.5
    x[1, 1:3] = 0
    return x


def _set_adv(m, a, b):
    x = a * 1
    x[[0, 2]] = b
    return x


def _set_adv_mixed(m, a, b):
    x = a * 1
    x[1:, [0, 3]] = b.reshape(1, 1, 2)
    return x


def _set_mask(m, a, k, b):
    x = a * 1
    x[k] = b[0, 0]
    return x


def _set_into_constant(m, a, b):
    x = m.zeros(3, 4, dtype=a.dtype)
    x[1] = a[0]
    x[[0, 2], 1:3] = b
    return x


def _set_cast(m, a):
    x = a * 1
    x[0] = m.arange(4)
    return x


SETITEM = [
    Case("setitem_basic_autograd", _set_basic, shapes=((3, 4), (4,)), double_backward=True),
    Case("setitem_number", _set_number, shapes=((3, 4),)),
    Case("setitem_adv_autograd", _set_adv, shapes=((3, 4), (4,)), double_backward=True),
    Case("setitem_adv_mixed", _set_adv_mixed, shapes=((3, 4), (2,))),
    Case("setitem_mask_tensor_value",
         _set_mask, make=lambda rng, dt: [rng.uniform(-2, 2, (3, 4)).astype(dt), rng.random((3, 4)) > 0.5,
                                          rng.uniform(-2, 2, (1, 1)).astype(dt)]),
    Case("setitem_into_constant", _set_into_constant, shapes=((3, 4), (2, 2))),
    Case("setitem_dtype_cast", _set_cast, shapes=((3, 4),)),
]


# ---- index_put ----------------------------------------------------------------------------------


def _index_put_inplace(m, a, i, j, v):
    x = a * 1
    x.index_put_((i, j), v)
    return x


INDEX_PUT = [
    Case("index_put_accumulate", lambda m, a, i, b: m.index_put(a, (i,), b, accumulate=True),
         shapes=((4, 3), (6,), (6, 3)), int_inputs={1: (-4, 4, LONG)}, double_backward=True),
    Case("index_put_broadcast_value", lambda m, a, i, b: a.index_put((i,), b),
         make=lambda rng, dt: [rng.uniform(-2, 2, (5, 3)).astype(dt), rng.permutation(5)[:3].astype(np.int64),
                               rng.uniform(-2, 2, (3,)).astype(dt)], double_backward=True),
    Case("index_put_inplace_two", _index_put_inplace,
         make=lambda rng, dt: [rng.uniform(-2, 2, (4, 5)).astype(dt), np.array([0, 3, 1]), np.array([4, 0, 2]),
                               rng.uniform(-2, 2, (3,)).astype(dt)]),
    Case("index_put_mask", lambda m, a, k: m.index_put(a, (k,), m.tensor(0.5, dtype=a.dtype)),
         make=_mask_case((3, 4), (3, 4))),
    Case("index_put_acc_zero", lambda m, a, i, b: m.index_put(a, (i,), b, accumulate=True),
         shapes=((4, 3), (5,), (5, 3)), int_inputs={1: (0, 4, LONG)}, layouts=ZERO),
]


# ---- gather / scatter family ----------------------------------------------------------------------


def _scatter_make(xs, idx_shape, n, dim_src=None):
    def make(rng, dt):
        x = rng.uniform(-2, 2, xs).astype(dt)
        i = _perm_index(rng, n, idx_shape)
        s = rng.uniform(-2, 2, dim_src or idx_shape).astype(dt)
        return [x, i, s]
    return make


def _reduce_make(xs, idx_shape, n):
    def make(rng, dt):
        x = rng.uniform(0.5, 2, xs).astype(dt) * rng.choice([-1, 1], xs)
        i = rng.integers(0, n, idx_shape).astype(np.int64)
        s = rng.uniform(0.5, 2, idx_shape).astype(dt) * rng.choice([-1, 1], idx_shape)
        return [x.astype(dt), i, s.astype(dt)]
    return make


def _prod_zero_make(rng, dt):
    x = rng.uniform(0.5, 2, (3, 4)).astype(dt)
    x[0, 1] = 0
    i = np.array([[0, 1, 2, 0], [0, 1, 1, 2], [2, 1, 0, 0]], dtype=np.int64)
    s = rng.uniform(0.5, 2, (3, 4)).astype(dt)
    s[0, 2] = 0          # a single zero scattered to (2, 2)
    s[1, 3] = 0
    s[2, 3] = 0          # two zeros scattered to (0, 3)
    return [x, i, s]


GATHER = [
    Case("gather_dim1", lambda m, a, i: m.gather(a, 1, i), shapes=((3, 4), (3, 6)), int_inputs={1: (0, 4, LONG)},
         double_backward=True, layouts=ZERO),
    Case("gather_dim0_larger_index", lambda m, a, i: a.gather(0, i), shapes=((3, 4), (5, 2)),
         int_inputs={1: (0, 3, LONG)}),
    Case("gather_int32_3d", lambda m, a, i: a.gather(-1, i), shapes=((2, 3, 4), (2, 3, 2)),
         int_inputs={1: (0, 4, "int32")}),
    Case("scatter_src", lambda m, a, i, s: m.scatter(a, 0, i, s), make=_scatter_make((4, 3), (3, 3), 4),
         double_backward=True),
    # torch's backward fails when src is larger than index, so only values are compared here
    Case("scatter_src_larger", lambda m, a, i, s: a.scatter(1, i, s), make=_scatter_make((3, 5), (2, 3), 5, (3, 4)),
         grad=False),
    Case("scatter_value", lambda m, a, i: a.scatter(0, i, 2.5), make=lambda rng, dt: _scatter_make((4, 3), (3, 3), 4)(rng, dt)[:2]),
    Case("scatter_inplace", lambda m, a, i, s: (a * 1).scatter_(0, i, s), make=_scatter_make((4, 3), (2, 3), 4)),
    Case("scatter_legacy_reduce", lambda m, a, i, s: (a.scatter(0, i, s, reduce="add"), a.scatter(0, i, s, reduce="multiply")),
         shapes=((4, 3), (3, 3), (3, 3)), int_inputs={1: (0, 4, LONG)}, grad=False),
    Case("scatter_add", lambda m, a, i, s: m.scatter_add(a, 0, i, s), shapes=((4, 3), (5, 3), (5, 3)),
         int_inputs={1: (0, 4, LONG)}, double_backward=True, layouts=ZERO),
    Case("scatter_add_inplace", lambda m, a, i, s: (a * 1).scatter_add_(1, i, s), shapes=((3, 4), (3, 6), (3, 6)),
         int_inputs={1: (0, 4, LONG)}),
    Case("scatter_add_int", lambda m, a, i, s: a.scatter_add(0, i, s), shapes=((4, 3), (5, 3), (5, 3)),
         int_inputs={1: (0, 4, LONG)}, dtypes=("int64", "int32")),
]
for _red in ("sum", "mean", "amax", "amin", "prod"):
    for _incl in (True, False):
        GATHER.append(Case(f"scatter_reduce_{_red}_{'incl' if _incl else 'excl'}",
                           (lambda r, inc: lambda m, a, i, s: m.scatter_reduce(a, 0, i, s, r, include_self=inc))(_red, _incl),
                           make=_reduce_make((4, 3), (6, 3), 4), double_backward=_red in ("sum", "mean", "prod")))
GATHER += [
    Case("scatter_reduce_prod_zeros", lambda m, a, i, s: a.scatter_reduce(0, i, s, "prod"), make=_prod_zero_make),
    Case("scatter_reduce_inplace_mean", lambda m, a, i, s: (a * 1).scatter_reduce_(1, i, s, "mean", include_self=False),
         make=_reduce_make((3, 4), (3, 5), 4)),
    Case("scatter_reduce_int_mean", lambda m, a, i, s: a.scatter_reduce(0, i, s, "mean"), shapes=((4, 3), (6, 3), (6, 3)),
         int_inputs={1: (0, 4, LONG)}, dtypes=("int64",), low=-9, high=9),
]


# ---- index_select / index_add / index_copy / index_fill -------------------------------------------

INDEX_DIM = [
    Case("index_select", lambda m, a, i: m.index_select(a, 1, i), shapes=((3, 4), (6,)), int_inputs={1: (0, 4, LONG)},
         double_backward=True, layouts=ZERO),
    Case("index_select_int32_dim0", lambda m, a, i: a.index_select(0, i), shapes=((3, 4), (2,)),
         int_inputs={1: (0, 3, "int32")}),
    Case("index_add_alpha", lambda m, a, i, s: m.index_add(a, 0, i, s, alpha=2.5), shapes=((4, 3), (5,), (5, 3)),
         int_inputs={1: (0, 4, LONG)}, double_backward=True),
    Case("index_add_inplace", lambda m, a, i, s: (a * 1).index_add_(1, i, s), shapes=((3, 4), (2,), (3, 2)),
         int_inputs={1: (0, 4, LONG)}),
    Case("index_copy", lambda m, a, i, s: m.index_copy(a, 0, i, s),
         make=lambda rng, dt: [rng.uniform(-2, 2, (5, 3)).astype(dt), rng.permutation(5)[:3].astype(np.int64),
                               rng.uniform(-2, 2, (3, 3)).astype(dt)], double_backward=True),
    Case("index_copy_inplace", lambda m, a, i, s: (a * 1).index_copy_(1, i, s),
         make=lambda rng, dt: [rng.uniform(-2, 2, (3, 5)).astype(dt), rng.permutation(5)[:2].astype(np.int64),
                               rng.uniform(-2, 2, (3, 2)).astype(dt)]),
    Case("index_fill_number", lambda m, a, i: m.index_fill(a, 1, i, -1.5), shapes=((3, 4), (3,)),
         int_inputs={1: (-4, 4, LONG)}, double_backward=True),
    Case("index_fill_tensor_value", lambda m, a, i, v: a.index_fill(0, i, v[0, 0]), shapes=((4, 3), (3,), (1, 1)),
         int_inputs={1: (0, 4, LONG)}),
    Case("index_fill_inplace", lambda m, a, i: (a * 1).index_fill_(0, i, 2), shapes=((4, 3), (2,)),
         int_inputs={1: (0, 4, LONG)}),
]


# ---- masked_* -------------------------------------------------------------------------------------

MASKED = [
    Case("masked_fill", lambda m, a, k: m.masked_fill(a, k, -3.0), make=_mask_case((3, 4), (3, 4)),
         double_backward=True),
    Case("masked_fill_broadcast_mask", lambda m, a, k: a.masked_fill(k, 1), make=_mask_case((3, 4), (4,))),
    Case("masked_fill_broadcast_self", lambda m, a, k: a.masked_fill(k, 0.5), make=_mask_case((4,), (3, 4))),
    Case("masked_fill_tensor_value", lambda m, a, k, v: a.masked_fill(k, v.sum()),
         make=lambda rng, dt: _mask_case((3, 4), (3, 4))(rng, dt) + [rng.uniform(-1, 1, (2,)).astype(dt)]),
    Case("masked_fill_inplace", lambda m, a, k: (a * 1).masked_fill_(k, 2.0), make=_mask_case((3, 4), (1, 4))),
    Case("masked_select", lambda m, a, k: m.masked_select(a, k), make=_mask_case((3, 4), (3, 4)),
         double_backward=True),
    Case("masked_select_broadcast", lambda m, a, k: a.masked_select(k), make=_mask_case((4,), (3, 4)),
         double_backward=True),
    Case("masked_scatter", lambda m, a, k, s: m.masked_scatter(a, k, s),
         make=lambda rng, dt: _mask_case((3, 4), (3, 4))(rng, dt) + [rng.uniform(-2, 2, (4, 4)).astype(dt)],
         double_backward=True),
    Case("masked_scatter_inplace", lambda m, a, k, s: (a * 1).masked_scatter_(k, s),
         make=lambda rng, dt: _mask_case((3, 4), (4,))(rng, dt) + [rng.uniform(-2, 2, (12,)).astype(dt)]),
    Case("masked_int", lambda m, a, k: (a.masked_fill(k, 7), a.masked_select(k)),
         make=lambda rng, dt: [rng.integers(-5, 5, (3, 4)).astype(dt), rng.random((3, 4)) > 0.5],
         dtypes=("int64", "int32")),
]


# ---- take / take_along_dim / put / nonzero ---------------------------------------------------------

OTHERS = [
    Case("take", lambda m, a, i: m.take(a, i), shapes=((3, 4), (2, 5)), int_inputs={1: (-12, 12, LONG)},
         double_backward=True),
    Case("take_along_dim", lambda m, a, i: m.take_along_dim(a, i, 1), shapes=((3, 4), (3, 2)),
         int_inputs={1: (-4, 4, LONG)}),
    Case("take_along_dim_broadcast", lambda m, a, i: a.take_along_dim(i, dim=0), shapes=((3, 4), (2, 1)),
         int_inputs={1: (0, 3, LONG)}),
    # torch views the input as 1-D here, which fails for non-contiguous inputs
    Case("take_along_dim_flat", lambda m, a, i: m.take_along_dim(a, i), shapes=((3, 4), (5,)),
         int_inputs={1: (0, 12, LONG)}, layouts=("contig",)),
    Case("put_accumulate", lambda m, a, i, s: m.put(a, i, s, accumulate=True), shapes=((3, 4), (2, 3), (6,)),
         int_inputs={1: (-12, 12, LONG)}, double_backward=True),
    Case("put_inplace", lambda m, a, i, s: (a * 1).put_(i, s),
         make=lambda rng, dt: [rng.uniform(-2, 2, (3, 4)).astype(dt), rng.permutation(12)[:5].astype(np.int64),
                               rng.uniform(-2, 2, (5,)).astype(dt)]),
    Case("nonzero", lambda m, a: (m.nonzero(a), a.nonzero(as_tuple=True), m.argwhere(a)),
         make=lambda rng, dt: [rng.integers(-1, 2, (3, 4)).astype(dt)], dtypes=("float32", "int64", "bool"), grad=False),
    Case("nonzero_values", lambda m, a: a[a.nonzero(as_tuple=True)] * 2,
         make=lambda rng, dt: [rng.integers(-1, 2, (3, 4)).astype(dt)]),
    Case("where_condition_only", lambda m, a, k: m.where(k), make=_mask_case((3, 4), (3, 4)), grad=False),
]

CASES = GETITEM + SETITEM + INDEX_PUT + GATHER + INDEX_DIM + MASKED + OTHERS
