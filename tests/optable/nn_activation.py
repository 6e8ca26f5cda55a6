"""Oracle cases for the fused ops of ember.nn.functional (activations and losses): values, gradients
and, where torch defines them, second derivatives (which exercise the ``*_backward`` ops)."""
from oracle import Case


def F(m):
    return m.nn.functional


def _ce(m, x, t, **kw):
    return F(m).cross_entropy(x, t, **kw)


def _weighted_ce(m, x, t, **kw):
    w = m.arange(1, x.shape[1] + 1, dtype=x.dtype) / x.shape[1]
    return F(m).cross_entropy(x, t, weight=w, **kw)


def _nll(m, x, t, **kw):
    return F(m).nll_loss(F(m).log_softmax(x, 1), t, **kw)


def _weighted_nll(m, x, t, **kw):
    w = m.arange(1, x.shape[1] + 1, dtype=x.dtype) / x.shape[1]
    return F(m).nll_loss(F(m).log_softmax(x, 1), t, weight=w, **kw)


def _probs(rng, dtype):
    x = rng.uniform(0.02, 0.98, size=(4, 5)).astype(dtype)
    t = rng.uniform(0.0, 1.0, size=(4, 5)).astype(dtype)
    w = rng.uniform(0.5, 1.5, size=(5,)).astype(dtype)
    return [x, t, w]


def _logits(rng, dtype):
    x = rng.uniform(-3, 3, size=(4, 5)).astype(dtype)
    t = rng.uniform(0.0, 1.0, size=(4, 5)).astype(dtype)
    w = rng.uniform(0.5, 1.5, size=(4, 5)).astype(dtype)
    pw = rng.uniform(0.5, 2.0, size=(5,)).astype(dtype)
    return [x, t, w, pw]


CASES = [
    # piecewise-linear activations: forward op + activation_mask_backward
    Case("nn_threshold", lambda m, a: F(m).threshold(a, 0.3, -1.5), double_backward=True),
    Case("nn_hardtanh", lambda m, a: F(m).hardtanh(a, -0.7, 1.2), double_backward=True),
    Case("nn_relu6", lambda m, a: F(m).relu6(a * 4), double_backward=True),
    Case("nn_hardsigmoid", lambda m, a: F(m).hardsigmoid(a * 3)),
    Case("nn_leaky_relu", lambda m, a: F(m).leaky_relu(a, 0.2), double_backward=True),
    Case("nn_softshrink", lambda m, a: F(m).softshrink(a, 0.6), double_backward=True),
    Case("nn_hardshrink", lambda m, a: F(m).hardshrink(a, 0.6), double_backward=True),
    # smooth activations: forward op + <name>_backward (second derivatives in ember ops)
    Case("nn_elu", lambda m, a: F(m).elu(a, 0.8), double_backward=True),
    Case("nn_selu", lambda m, a: F(m).selu(a), double_backward=True),
    Case("nn_celu", lambda m, a: F(m).celu(a, 1.5), double_backward=True),
    Case("nn_gelu", lambda m, a: F(m).gelu(a * 2), double_backward=True, shapes=((4, 5),)),
    Case("nn_gelu_tanh", lambda m, a: F(m).gelu(a * 2, approximate="tanh"), double_backward=True),
    Case("nn_silu", lambda m, a: F(m).silu(a * 2), double_backward=True),
    Case("nn_mish", lambda m, a: F(m).mish(a * 2), double_backward=True),
    Case("nn_softplus", lambda m, a: F(m).softplus(a, 2.0, 2.0), double_backward=True),
    Case("nn_hardswish", lambda m, a: F(m).hardswish(a * 3), double_backward=True),
    Case("nn_logsigmoid", lambda m, a: F(m).logsigmoid(a * 4), double_backward=True),
    Case("nn_prelu", lambda m, a, w: F(m).prelu(a, w), shapes=((2, 3, 4), (3,))),
    Case("nn_glu", lambda m, a: F(m).glu(a, 0), shapes=((4, 3),), double_backward=True),
    # cross entropy (one fused op + its backward) and nll_loss (+ nll_loss_backward)
    Case("nn_cross_entropy", lambda m, x, t: _ce(m, x, t), shapes=((5, 4), (5,)), int_inputs={1: (0, 4, "int64")},
         double_backward=True),
    Case("nn_cross_entropy_sum_smooth", lambda m, x, t: _ce(m, x, t, reduction="sum", label_smoothing=0.2),
         shapes=((5, 4), (5,)), int_inputs={1: (0, 4, "int64")}, double_backward=True),
    Case("nn_cross_entropy_none_kdim", lambda m, x, t: _ce(m, x, t, reduction="none", ignore_index=1),
         shapes=((2, 4, 3), (2, 3)), int_inputs={1: (0, 4, "int64")}, double_backward=True),
    Case("nn_cross_entropy_weight_smooth", lambda m, x, t: _weighted_ce(m, x, t, label_smoothing=0.1,
                                                                         ignore_index=2),
         shapes=((6, 4), (6,)), int_inputs={1: (0, 4, "int64")}, double_backward=True),
    Case("nn_nll_loss", lambda m, x, t: _nll(m, x, t), shapes=((5, 4), (5,)), int_inputs={1: (0, 4, "int64")},
         double_backward=True),
    Case("nn_nll_loss_weight_none", lambda m, x, t: _weighted_nll(m, x, t, reduction="none", ignore_index=0),
         shapes=((2, 4, 3), (2, 3)), int_inputs={1: (0, 4, "int64")}, double_backward=True),
    # binary cross entropy (probabilities and logits)
    Case("nn_bce", lambda m, x, t, w: F(m).binary_cross_entropy(x, t, weight=w), make=_probs,
         grad_inputs=(0, 1), layouts=("contig",)),
    Case("nn_bce_none", lambda m, x, t, w: F(m).binary_cross_entropy(x, t, reduction="none"), make=_probs,
         grad_inputs=(0, 1), layouts=("contig",)),
    Case("nn_bce_logits", lambda m, x, t, w, pw: F(m).binary_cross_entropy_with_logits(x, t, weight=w,
                                                                                          pos_weight=pw),
         make=_logits, grad_inputs=(0, 1), layouts=("contig",), double_backward=True),
    Case("nn_bce_logits_sum", lambda m, x, t, w, pw: F(m).binary_cross_entropy_with_logits(x, t,
                                                                                              reduction="sum"),
         make=_logits, grad_inputs=(0, 1), layouts=("contig",), double_backward=True),
]
