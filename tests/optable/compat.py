"""Oracle cases for functions added while running real programs on ember: ember.special (compositions of
ember ops), index_reduce, the legacy triangular_solve."""
import numpy as np

from oracle import Case


def spread(lo, hi, n=12):
    def make(rng, dtype):
        return [np.linspace(lo, hi, n).astype(dtype) + rng.uniform(-0.01, 0.01, n).astype(dtype)]
    return make


CASES = [
    Case("special_erfcx", lambda m, a: m.special.erfcx(a), make=spread(-3, 12), double_backward=True, rtol=1e-4),
    Case("special_log_ndtr", lambda m, a: m.special.log_ndtr(a), make=spread(-12, 4)),
    Case("special_ndtr", lambda m, a: m.special.ndtr(a), make=spread(-4, 4)),
    Case("special_ndtri", lambda m, a: m.special.ndtri(a), make=spread(0.02, 0.98), rtol=1e-3, atol=1e-4),
    Case("special_i0e_i1e", lambda m, a: (m.special.i0e(a), m.special.i1e(a)), make=spread(-45, 45), rtol=1e-4),
    Case("special_i1", lambda m, a: m.special.i1(a), make=spread(-5, 5)),
    Case("special_entr", lambda m, a: m.special.entr(a), make=spread(0.05, 3)),
    Case("special_xlog1py", lambda m, a, b: m.special.xlog1py(a, b.abs()), shapes=((3, 4), (3, 4))),
    Case("special_multigammaln", lambda m, a: m.special.multigammaln(a.abs() + 2, 3), shapes=((3, 4),)),
    Case("mvlgamma_method", lambda m, a: (a.abs() + 2).mvlgamma(2), shapes=((3, 4),)),
    Case("special_aliases", lambda m, a: (m.special.expit(a), m.special.gammaln(a.abs() + 1), m.special.psi(a.abs() + 1),
                                          m.special.logit(m.sigmoid(a), eps=0.1), m.special.sinc(a),
                                          m.special.log_softmax(a, 1), m.special.logsumexp(a, 0)),
         shapes=((3, 4),)),
    Case("index_reduce_amax", lambda m, a, i, s: a.index_reduce(0, i, s, "amax"), shapes=((4, 3), (5,), (5, 3)),
         int_inputs={1: (0, 4, "int64")}, layouts=("contig",)),
    Case("index_reduce_mean_noself", lambda m, a, i, s: a.index_reduce(1, i, s, "mean", include_self=False),
         shapes=((3, 4), (6,), (3, 6)), int_inputs={1: (0, 4, "int64")}, layouts=("contig",)),
    Case("index_reduce_prod", lambda m, a, i, s: m.index_reduce(a, 0, i, s, "prod"), shapes=((4, 3), (5,), (5, 3)),
         int_inputs={1: (0, 4, "int64")}, layouts=("contig",)),
    Case("triangular_solve", lambda m, b, A: tuple(m.triangular_solve(b, A.triu() + 3 * m.eye(4), transpose=True)),
         shapes=((4, 2), (4, 4))),
]


def ctc_inputs(rng, dtype):
    return [rng.standard_normal((7, 3, 5)).astype(dtype)]


CASES += [
    # CTC through log_softmax (torch's gradient w.r.t. log_probs itself assumes a log_softmax input)
    Case("ctc_loss_mean", lambda m, x: m.nn.functional.ctc_loss(
        x.log_softmax(2), m.tensor([[1, 2, 2], [1, 1, 0], [3, 4, 1]]), m.tensor([7, 5, 6]), m.tensor([3, 2, 1])),
        make=ctc_inputs, layouts=("contig",)),
    Case("ctc_loss_none_concat_targets", lambda m, x: m.nn.CTCLoss(blank=4, reduction="none")(
        x.log_softmax(2), m.tensor([1, 2, 2, 1, 1, 3]), (7, 7, 4), (3, 2, 1)), make=ctc_inputs, layouts=("contig",)),
    Case("ctc_loss_zero_infinity_sum", lambda m, x: m.nn.functional.ctc_loss(
        x.log_softmax(2), m.tensor([[1, 1, 1, 1]] * 3), m.tensor([7, 3, 6]), m.tensor([4, 3, 0]), reduction="sum",
        zero_infinity=True), make=ctc_inputs, layouts=("contig",)),
]
