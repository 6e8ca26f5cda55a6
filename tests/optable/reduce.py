"""Oracle cases for the reductions beyond sum/mean (ember/ops/reduce_values.py, reduce_order.py, reduce_scan.py,
reduce_softmax.py, reduce_norm.py): reductions, scans, sorting, norms and softmax."""
import numpy as np

from oracle import Case

NAN = float("nan")
INTS = ("int32", "int64")


def _np(dtype):
    return {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32,
            "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}[dtype]


def distinct(*shape, scale=0.37):
    """Inputs with all-distinct values (ties would make index choices and gradients ambiguous)."""
    def make(rng, dtype):
        n = int(np.prod(shape))
        v = rng.permutation(n) - n // 2
        return [(v * scale if dtype.startswith("float") else v).astype(_np(dtype)).reshape(shape)]
    return make


def ties(*shape, levels=3):
    """Inputs drawn from a few values, so ties are everywhere."""
    def make(rng, dtype):
        return [rng.integers(0, levels, size=shape).astype(_np(dtype))]
    return make


def with_values(arr):
    def make(rng, dtype):
        return [np.array(arr, dtype=_np(dtype))]
    return make


def zeros_in(*shape):
    """Positive values with zeros planted: one zero in some rows, two in another (prod/cumprod)."""
    def make(rng, dtype):
        a = rng.uniform(0.5, 1.5, size=shape)
        a[0, 1] = 0.0
        if shape[0] > 1:
            a[1, 0] = a[1, 2] = 0.0
        return [a.astype(_np(dtype))]
    return make


def nans_in(*shape):
    def make(rng, dtype):
        n = int(np.prod(shape))
        a = ((rng.permutation(n) - n // 2) * 0.37).reshape(shape)
        a[0, 1] = NAN
        a[-1, 0] = a[-1, -1] = NAN
        return [a.astype(_np(dtype))]
    return make


def _vn(m):
    if m.__name__ == "torch":
        return m.linalg.vector_norm
    from ember.ops.reduce_norm import vector_norm
    return vector_norm


def _mn(m):
    if m.__name__ == "torch":
        return m.linalg.matrix_norm
    from ember.ops.reduce_norm import matrix_norm
    return matrix_norm


CASES = [
    # prod
    Case("prod_all", lambda m, a: m.prod(a), low=0.5, high=1.5, double_backward=True),
    Case("prod_dim", lambda m, a: a.prod(1), shapes=((2, 3, 4),), low=0.5, high=1.5, double_backward=True),
    Case("prod_dim_keepdim", lambda m, a: m.prod(a, -1, keepdim=True), shapes=((2, 3, 4),)),
    Case("prod_zeros_dim", lambda m, a: a.prod(1), make=zeros_in(3, 4), double_backward=True),
    Case("prod_zeros_all", lambda m, a: a.prod(), make=zeros_in(1, 4), double_backward=True),
    Case("prod_zeros_all2", lambda m, a: a.prod(), make=zeros_in(3, 4)),
    Case("prod_dtype", lambda m, a: m.prod(a, 1, dtype=m.float64), shapes=((3, 4),)),
    Case("prod_int", lambda m, a: (a.prod(), a.prod(0)), dtypes=("int32", "uint8", "bool"), low=-3, high=3),
    Case("prod_empty", lambda m, a: (a.prod(0), a.prod(1)), shapes=((3, 4),), layouts=("zero",)),
    Case("prod_0d", lambda m, a: a.sum().prod(0)),
    # scans
    Case("cumsum", lambda m, a: (a.cumsum(1), m.cumsum(a, dim=0)), double_backward=True),
    Case("cumsum_int", lambda m, a: (m.cumsum(a, 0), m.cumsum(a, 1, dtype=m.int32)), dtypes=("int8", "int64", "bool")),
    Case("cumsum_dtype", lambda m, a: m.cumsum(a, -1, dtype=m.float64)),
    Case("cumsum_inplace", lambda m, a: (a * 1).cumsum_(1)),
    Case("cumprod", lambda m, a: m.cumprod(a, 1), low=0.5, high=1.5, double_backward=True),
    Case("cumprod_zeros", lambda m, a: (m.cumprod(a, 1), m.cumprod(a, 0)), make=zeros_in(3, 4), double_backward=True),
    Case("cumprod_int", lambda m, a: m.cumprod(a, 0), dtypes=INTS + ("uint8",), low=-2, high=2),
    Case("cumprod_inplace", lambda m, a: (a * 1).cumprod_(0)),
    Case("logcumsumexp", lambda m, a: (m.logcumsumexp(a, 1), a.logcumsumexp(0)), double_backward=True),
    Case("logcumsumexp_inf", lambda m, a: m.logcumsumexp(a, 0), make=with_values([-np.inf, 0.5, -np.inf, 2.0]),
         grad=False),
    # max / min / amax / amin / argmax / argmin / aminmax
    Case("max_all", lambda m, a: (a.max(), m.min(a)), make=distinct(3, 4), double_backward=True),
    Case("max_all_ties", lambda m, a: (a.max(), a.min()), make=ties(3, 4)),
    Case("max_dim", lambda m, a: (m.max(a, 1), a.min(dim=0)), make=distinct(3, 4), double_backward=True),
    Case("max_dim_keepdim", lambda m, a: (a.max(-1, keepdim=True), m.min(a, 1, True)), make=distinct(2, 3, 4)),
    Case("max_dim_ties", lambda m, a: (a.max(1), a.min(0)), make=ties(4, 5)),
    Case("max_int", lambda m, a: (a.max(), a.max(1), a.min(0, True), a.amax(0)), dtypes=INTS + ("uint8", "bool")),
    Case("max_0d", lambda m, a: (a.sum().max(0), a.sum().min(-1, True))),
    Case("max_empty", lambda m, a: (a.max(1), a.amin(1), a.argmax(1)), layouts=("zero",)),
    Case("amax", lambda m, a: (m.amax(a, (0, 2)), a.amin(1, keepdim=True), a.amax()), make=distinct(2, 3, 4)),
    Case("amax_ties", lambda m, a: (m.amax(a, 1), m.amin(a, (0, 1), keepdim=True)), make=ties(3, 5),
         double_backward=True),
    Case("argmax", lambda m, a: (a.argmax(), m.argmin(a), a.argmax(1), m.argmin(a, 0, keepdim=True),
                                 a.argmax(keepdim=True)), make=distinct(3, 4)),
    Case("argmax_int", lambda m, a: (a.argmax(), a.argmin(1)), dtypes=INTS),
    Case("aminmax", lambda m, a: (m.aminmax(a), m.aminmax(a, dim=1, keepdim=True)), make=distinct(3, 4)),
    # sort family
    Case("sort", lambda m, a: (a.sort(), m.sort(a, 0, descending=True)), make=distinct(4, 5), double_backward=True),
    Case("sort_stable_ties", lambda m, a: (m.sort(a, stable=True), m.sort(a, dim=0, descending=True, stable=True)),
         make=ties(4, 6)),
    Case("sort_int", lambda m, a: m.sort(a, dim=1, descending=True, stable=True), dtypes=INTS + ("uint8", "bool")),
    Case("sort_nan", lambda m, a: (m.sort(a, 1), m.sort(a, 0, descending=True)), make=nans_in(3, 4)),
    Case("argsort", lambda m, a: (a.argsort(), m.argsort(a, 0, descending=True)), make=distinct(4, 5)),
    Case("msort", lambda m, a: m.msort(a), make=distinct(4, 3)),
    Case("topk", lambda m, a: (a.topk(2), m.topk(a, 3, dim=0, largest=False)), make=distinct(4, 5),
         double_backward=True),
    Case("topk_int", lambda m, a: m.topk(a, 2, 1), make=distinct(3, 4), dtypes=INTS),
    Case("kthvalue", lambda m, a: (a.kthvalue(2), m.kthvalue(a, 3, 0, keepdim=True)), make=distinct(4, 5)),
    Case("median_all", lambda m, a: a.median(), make=distinct(3, 4)),
    Case("median_all_odd", lambda m, a: m.median(a), make=distinct(3, 3)),
    Case("median_all_ties", lambda m, a: a.median(), make=ties(3, 4)),
    Case("median_dim", lambda m, a: (a.median(1), m.median(a, 0, keepdim=True)), make=distinct(4, 5)),
    Case("median_int", lambda m, a: (a.median(), a.median(0)), make=distinct(3, 5), dtypes=INTS),
    Case("median_nan", lambda m, a: (a.median(), a.median(1)), make=nans_in(3, 5)),
    Case("nanmedian", lambda m, a: (m.nanmedian(a), a.nanmedian(1), a.nanmedian(0, True)), make=nans_in(4, 5)),
    Case("mode", lambda m, a: (a.mode(), m.mode(a, 0, keepdim=True)), make=ties(4, 7)),
    Case("mode_int", lambda m, a: a.mode(1), make=ties(3, 8, levels=4), dtypes=INTS),
    Case("cummax", lambda m, a: (m.cummax(a, 1), a.cummin(0)), make=distinct(4, 5), double_backward=True),
    Case("cummax_ties", lambda m, a: (m.cummax(a, 1), m.cummin(a, 1)), make=ties(3, 7)),
    Case("cummax_nan", lambda m, a: (m.cummax(a, 1), m.cummin(a, 1)), make=nans_in(3, 4)),
    Case("cummax_int", lambda m, a: (a.cummax(0), a.cummin(1)), dtypes=INTS + ("bool",)),
    # var / std
    Case("var", lambda m, a: (a.var(), m.var(a, 1), m.var(a, (0, 2), keepdim=True)), shapes=((2, 3, 4),),
         double_backward=True),
    Case("var_correction", lambda m, a: (m.var(a, 1, correction=0), a.var(0, unbiased=False),
                                         m.var(a, 1, True, True), m.var(a, False))),
    Case("std", lambda m, a: (a.std(), m.std(a, -1), m.std(a, (0, 1), correction=2, keepdim=True)),
         shapes=((2, 3, 4),), double_backward=True),
    Case("std_zero", lambda m, a: m.std(a * 0, 1)),
    Case("var_mean", lambda m, a: (m.var_mean(a, 1), m.std_mean(a, (0, 1), keepdim=True), m.std_mean(a)),
         shapes=((2, 3, 4),)),
    # norms
    Case("norm", lambda m, a: (a.norm(), m.norm(a, dim=1), a.norm(p=1), m.norm(a, p=3, dim=0, keepdim=True)),
         double_backward=True),
    Case("norm_inf", lambda m, a: (a.norm(float("inf")), m.norm(a, -float("inf"), dim=1), m.norm(a, 0)),
         make=distinct(3, 4)),
    Case("norm_frac_p", lambda m, a: (m.norm(a, 0.5), m.norm(a, 1.5, dim=1), m.norm(a, -2, dim=0)),
         low=0.5, high=2.0, double_backward=True),
    Case("norm_fro", lambda m, a: (m.norm(a, "fro"), m.norm(a, "fro", dim=(0, 2)), m.norm(a, dtype=m.float64)),
         shapes=((2, 3, 4),)),
    Case("norm_zero_vector", lambda m, a: (m.norm(a * 0, dim=1), m.norm(a * 0, 3, dim=1))),
    Case("vector_norm", lambda m, a: (_vn(m)(a), _vn(m)(a, 4, dim=(0, 2), keepdim=True), _vn(m)(a, 1, -1)),
         shapes=((2, 3, 4),)),
    Case("matrix_norm", lambda m, a: tuple(_mn(m)(a, o) for o in ("fro", 1, -1, float("inf"), -float("inf"))),
         make=distinct(2, 3, 4)),
    Case("matrix_norm_svd", lambda m, a: (_mn(m)(a, "nuc"), _mn(m)(a, 2, dim=(0, 2)), _mn(m)(a, -2),
                                          m.norm(a[0], "nuc")), shapes=((2, 3, 4),), rtol=1e-3,
         double_backward=True),
    # logsumexp / softmax / log_softmax
    Case("logsumexp", lambda m, a: (m.logsumexp(a, 1), a.logsumexp((0, 2), keepdim=True)), shapes=((2, 3, 4),),
         double_backward=True),
    Case("logsumexp_int", lambda m, a: m.logsumexp(a, 1), dtypes=INTS),
    Case("logsumexp_inf", lambda m, a: m.logsumexp(a, 0), make=with_values([[-np.inf, 1.0], [-np.inf, np.inf]]),
         grad=False),
    Case("softmax", lambda m, a: (m.softmax(a, 1), a.softmax(0), m.softmax(a, -1, dtype=m.float64)),
         double_backward=True),
    Case("log_softmax", lambda m, a: (m.log_softmax(a, 1), a.log_softmax(-1, dtype=m.float64)),
         shapes=((2, 3, 4),), double_backward=True),
    Case("softmax_empty", lambda m, a: (m.softmax(a, 1), m.log_softmax(a, 0)), layouts=("zero",)),
    Case("softmax_0d", lambda m, a: (m.softmax(a.sum(), 0), m.log_softmax(a.sum(), -1))),
    # all / any / count_nonzero
    Case("all_any", lambda m, a: (a.all(), m.any(a), m.all(a, 1), a.any(0, keepdim=True), m.all(a, (0, 1))),
         make=zeros_in(3, 4)),
    Case("all_any_int", lambda m, a: (a.all(), m.any(a, 1), m.all(a, 0, True)),
         dtypes=("uint8", "int64", "bool"), low=0, high=2),
    Case("all_any_empty", lambda m, a: (m.all(a), m.any(a), m.all(a, 1), m.any(a, 0)), layouts=("zero",)),
    Case("count_nonzero", lambda m, a: (m.count_nonzero(a), a.count_nonzero(1), m.count_nonzero(a, (0, 1))),
         make=zeros_in(3, 4)),
    Case("count_nonzero_int", lambda m, a: m.count_nonzero(a, 0), dtypes=INTS + ("bool",), low=0, high=2),
    # nan-aware
    Case("nansum", lambda m, a: (m.nansum(a), a.nansum(1), m.nansum(a, 0, keepdim=True)), make=nans_in(3, 4),
         double_backward=True),
    Case("nansum_int", lambda m, a: (m.nansum(a), m.nansum(a, 1)), dtypes=INTS + ("bool",)),
    Case("nanmean", lambda m, a: (m.nanmean(a), a.nanmean(1), m.nanmean(a, 0, keepdim=True)), make=nans_in(3, 4),
         double_backward=True),
    # unique
    Case("unique", lambda m, a: (m.unique(a), m.unique(a, return_inverse=True, return_counts=True)),
         make=ties(3, 5, levels=4), grad=False),
    Case("unique_int", lambda m, a: (a.unique(return_counts=True), m.unique(a, dim=0, return_inverse=True)),
         make=ties(5, 2, levels=2), dtypes=INTS, grad=False),
    Case("unique_consecutive", lambda m, a: (m.unique_consecutive(a, return_inverse=True, return_counts=True),
                                             m.unique_consecutive(a, dim=1, return_counts=True)),
         make=ties(2, 8, levels=2), grad=False),
]
