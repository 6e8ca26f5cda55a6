"""Oracle cases for ember/ops/stats.py: counting, binning, quantiles, differences, integrals, dist/cov."""
import numpy as np

from oracle import Case

LONG = "int64"


def distinct(*shape, scale=0.37):
    """All-distinct values (quantile's gradient goes to the sorted positions; ties would be ambiguous)."""
    def make(rng, dtype):
        n = int(np.prod(shape))
        v = (rng.permutation(n) - n // 2) * scale
        return [v.astype(dtype).reshape(shape)]
    return make


def sorted_rows(*shape):
    def make(rng, dtype):
        return [np.sort(rng.uniform(-2, 2, size=shape), axis=-1).astype(dtype),
                rng.uniform(-2.5, 2.5, size=shape[:-1] + (5,)).astype(dtype)]
    return make


def with_nans(*shape):
    def make(rng, dtype):
        n = int(np.prod(shape))
        a = ((rng.permutation(n) - n // 2) * 0.37).reshape(shape)
        a[0, 1] = np.nan
        a[-1, :] = np.nan
        return [a.astype(dtype)]
    return make


CASES = [
    # counting / binning (no gradients)
    Case("bincount", lambda m, a: m.bincount(a, minlength=9), shapes=((20,),), dtypes=(LONG,),
         int_inputs={0: (0, 7, LONG)}, layouts=("contig",)),
    Case("bincount_weights", lambda m, a, w: m.bincount(a, w), shapes=((20,), (20,)),
         int_inputs={0: (0, 7, LONG)}, grad=False, layouts=("contig",)),
    Case("histc", lambda m, a: m.histc(a, bins=7), shapes=((5, 6),), grad=False),
    Case("histc_range", lambda m, a: a.histc(bins=4, min=-1, max=1), shapes=((5, 6),), grad=False),
    Case("histogram", lambda m, a: tuple(m.histogram(a, bins=5)), shapes=((5, 6),), grad=False),
    Case("histogram_weight_density", lambda m, a, w: tuple(m.histogram(a, bins=4, range=(-1.0, 1.0), weight=w.abs(),
                                                                       density=True)),
         shapes=((5, 6), (5, 6)), grad=False),
    Case("searchsorted", lambda m, s, v: m.searchsorted(s, v), make=sorted_rows(7), grad=False),
    Case("searchsorted_nd_right", lambda m, s, v: m.searchsorted(s, v, right=True), make=sorted_rows(3, 7),
         grad=False, layouts=("contig",)),
    Case("bucketize", lambda m, s, v: m.bucketize(v, s, out_int32=True), make=sorted_rows(7), grad=False),
    Case("isin", lambda m, a, b: m.isin(a, b), shapes=((4, 5), (6,)), dtypes=(LONG,), low=-4, high=4),
    Case("isin_invert", lambda m, a, b: m.isin(a, b, invert=True), shapes=((4, 5), (6,)), dtypes=(LONG,), low=-4,
         high=4),
    # quantiles: sort + gather + lerp, differentiable
    Case("quantile_all", lambda m, a: m.quantile(a, 0.3), make=distinct(4, 5)),
    Case("quantile_dim_q_tensor", lambda m, a: m.quantile(a, m.tensor([0.1, 0.5, 0.9], dtype=a.dtype), dim=1,
                                                          keepdim=True), make=distinct(4, 5), double_backward=True),
    Case("quantile_lower", lambda m, a: a.quantile(0.4, dim=0, interpolation="lower"), make=distinct(4, 5)),
    Case("quantile_midpoint", lambda m, a: a.quantile(0.4, dim=-1, interpolation="midpoint"), make=distinct(4, 5)),
    Case("quantile_nearest", lambda m, a: a.quantile(0.5, dim=-1, interpolation="nearest"), make=distinct(4, 6)),
    Case("quantile_nan", lambda m, a: m.quantile(a, 0.5, dim=1), make=with_nans(4, 5), grad=False),
    Case("nanquantile", lambda m, a: m.nanquantile(a, 0.25, dim=1), make=with_nans(4, 5), grad=False),
    # differences and integrals
    Case("diff", lambda m, a: m.diff(a), shapes=((4, 5),), double_backward=True),
    Case("diff_n2_dim0_prepend", lambda m, a, p: a.diff(n=2, dim=0, prepend=p), shapes=((4, 5), (2, 5))),
    Case("trapezoid_dx", lambda m, a: m.trapezoid(a, dx=0.5), shapes=((4, 5),)),
    Case("trapezoid_x", lambda m, a, x: m.trapezoid(a, x, dim=0), shapes=((4, 5), (4,))),
    Case("trapz", lambda m, a: m.trapz(a), shapes=((4, 5),)),
    Case("cumulative_trapezoid", lambda m, a, x: m.cumulative_trapezoid(a, x), shapes=((4, 5), (5,))),
    # distances and statistics
    Case("dist", lambda m, a, b: m.dist(a, b), shapes=((4, 5), (5,))),
    Case("dist_p1", lambda m, a, b: a.dist(b, p=1), shapes=((4, 5), (4, 5))),
    Case("cov", lambda m, a: m.cov(a), shapes=((3, 6),), double_backward=True),
    Case("cov_weights", lambda m, a, w: m.cov(a, correction=0, aweights=w.abs() + 0.1),
         shapes=((3, 6), (6,))),
    Case("corrcoef", lambda m, a: a.corrcoef(), shapes=((3, 6),)),
    Case("renorm", lambda m, a: m.renorm(a, 2, 0, 1.5), shapes=((4, 5),), double_backward=True),
    Case("renorm_p1_dim1", lambda m, a: a.renorm(1, 1, 2.0), shapes=((4, 5),)),
]

# linalg.matrix_exp (ember/ops/linalg_solvers.py), a composition of matmul and solve: values and gradients
CASES += [
    Case("matrix_exp", lambda m, a: m.linalg.matrix_exp(a), shapes=((4, 4),), double_backward=True),
    Case("matrix_exp_batched_scaled", lambda m, a: (a * 4).matrix_exp(), shapes=((2, 3, 3),)),
]

# torch.gradient and vander (compositions in ember/ops/stats.py)
CASES += [
    Case("gradient_all_dims", lambda m, a: m.gradient(a), shapes=((4, 5),)),
    Case("gradient_edge2_spacing", lambda m, a: m.gradient(a, spacing=0.5, dim=1, edge_order=2), shapes=((4, 5),)),
    Case("gradient_coords", lambda m, a, x: m.gradient(a, spacing=(x.cumsum(0) + m.arange(5.0),), dim=1,
                                                       edge_order=2), shapes=((4, 5), (5,)), low=0.1, high=1.0),
    Case("vander", lambda m, a: m.vander(a, N=4), shapes=((5,),), grad=False),   # torch's own backward fails here
    Case("linalg_vander", lambda m, a: m.linalg.vander(a), shapes=((2, 3),), double_backward=True),
]
