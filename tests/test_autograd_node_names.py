"""Autograd node names against torch: ``y.grad_fn.name()``, ``type(y.grad_fn).__name__`` and the
``grad_fn=<...>`` of ``repr(y)``, for common ops (binary ops with tensors and scalars, in-place ops,
views, reductions, linear algebra, nn layers, losses and activations, index ops).

Where ember runs one op where torch records two nodes, ember shows the name of torch's outermost node
(the one ``y.grad_fn`` is). Each case also checks the forward values against torch. Also checked: the
gradient copy ``backward(create_graph=True)`` stores, and the node of a compiled function's outputs.
"""
import re

import numpy as np
import pytest
import torch

import ember

from autograd_support import unary_function


def F(m):
    return m.nn.functional


def _i(m, *v):
    return m.tensor(list(v))


def _iadd(m, x):
    y = x * 1
    y += 1
    return y


def _setitem(m, x):
    y = x * 1
    y[0] = 0.0
    return y


def _setitem_tensor(m, x):
    y = x * 1
    y[:, 0] = x[:, 1]
    return y


def _setitem_index(m, x):
    y = x * 1
    y[m.tensor([0, 2])] = 0.0
    return y


def _img(x):
    return x.reshape(1, 1, 3, 4)


# name -> fn(m, x), with m the module (torch or ember) and x a 3x4 float32 leaf that requires grad
CASES = {
    # binary ops with tensors and Python scalars (either side)
    "add": lambda m, x: x + x, "add_scalar": lambda m, x: x + 1, "radd": lambda m, x: 1 + x,
    "add_alpha": lambda m, x: m.add(x, x, alpha=2), "sub": lambda m, x: x - x, "sub_scalar": lambda m, x: x - 1,
    "rsub": lambda m, x: 1 - x, "rsub_fn": lambda m, x: m.rsub(x, x), "rsub_fn_scalar": lambda m, x: m.rsub(x, 5, alpha=2),
    "mul": lambda m, x: x * x, "mul_scalar": lambda m, x: x * 2, "rmul": lambda m, x: 2 * x, "mul_bool": lambda m, x: x * True,
    "div": lambda m, x: x / x, "div_scalar": lambda m, x: x / 2, "rdiv": lambda m, x: 2 / x,
    "true_divide": lambda m, x: m.true_divide(x, 2), "div_floor": lambda m, x: m.div(x, 2, rounding_mode="floor"),
    "div_trunc": lambda m, x: m.div(x, 2, rounding_mode="trunc"), "pow_scalar": lambda m, x: x ** 2,
    "pow_tensor": lambda m, x: x.abs() ** x, "rpow": lambda m, x: 2 ** x, "float_power": lambda m, x: x.float_power(2),
    "remainder": lambda m, x: x % 2, "fmod": lambda m, x: m.fmod(x, 2), "maximum": lambda m, x: m.maximum(x, x * 2),
    "minimum": lambda m, x: m.minimum(x, x * 2), "atan2": lambda m, x: m.atan2(x, x + 1),
    "hypot": lambda m, x: m.hypot(x, x + 1), "xlogy": lambda m, x: m.xlogy(x, x.abs() + 1),
    "copysign_scalar": lambda m, x: m.copysign(x, -1.0), "copysign": lambda m, x: x.copysign(x),
    "lerp": lambda m, x: m.lerp(x, x * 2, 0.5), "lerp_tensor": lambda m, x: m.lerp(x, x * 2, x.detach()),
    "addcmul": lambda m, x: m.addcmul(x, x, x), "addcdiv": lambda m, x: m.addcdiv(x, x, x + 20),
    "clamp": lambda m, x: x.clamp(-1, 1), "clamp_min_kw": lambda m, x: x.clamp(min=0),
    "clamp_tensor": lambda m, x: x.clamp(x * 0), "clamp_min": lambda m, x: m.clamp_min(x, 0.0),
    "clamp_max_tensor": lambda m, x: m.clamp_max(x, x * 0), "clip": lambda m, x: m.clip(x, -1, 1),
    "where": lambda m, x: m.where(x > 0, x, 0.0), "where_tensor": lambda m, x: m.where(x > 0, x, x * 2),
    # unary
    "neg": lambda m, x: -x, "abs": lambda m, x: x.abs(), "exp": lambda m, x: x.exp(), "exp2": lambda m, x: m.exp2(x),
    "log": lambda m, x: x.abs().log(), "log2": lambda m, x: x.abs().log2(), "log10": lambda m, x: x.abs().log10(),
    "log1p": lambda m, x: x.abs().log1p(), "expm1": lambda m, x: x.expm1(), "sin": lambda m, x: x.sin(),
    "cos": lambda m, x: x.cos(), "sinh": lambda m, x: x.sinh(), "asin": lambda m, x: (x / 20).asin(),
    "atan": lambda m, x: x.atan(), "tanh": lambda m, x: x.tanh(), "sigmoid": lambda m, x: x.sigmoid(),
    "logit": lambda m, x: x.sigmoid().logit(), "sqrt": lambda m, x: x.abs().sqrt(), "rsqrt": lambda m, x: x.abs().rsqrt(),
    "reciprocal": lambda m, x: x.reciprocal(), "square": lambda m, x: x.square(), "erf": lambda m, x: x.erf(),
    "erfinv": lambda m, x: (x / 20).erfinv(), "lgamma": lambda m, x: x.abs().lgamma(),
    "digamma": lambda m, x: x.abs().digamma(), "sign": lambda m, x: x.sign(), "sgn": lambda m, x: x.sgn(),
    "floor": lambda m, x: x.floor(), "ceil": lambda m, x: x.ceil(), "round": lambda m, x: x.round(),
    "trunc": lambda m, x: x.trunc(), "frac": lambda m, x: x.frac(), "nan_to_num": lambda m, x: x.nan_to_num(),
    # activations
    "relu": lambda m, x: m.relu(x), "F_relu": lambda m, x: F(m).relu(x), "gelu": lambda m, x: F(m).gelu(x),
    "gelu_tanh": lambda m, x: F(m).gelu(x, approximate="tanh"), "silu": lambda m, x: F(m).silu(x),
    "softplus": lambda m, x: F(m).softplus(x), "elu": lambda m, x: F(m).elu(x), "selu": lambda m, x: F(m).selu(x),
    "celu": lambda m, x: F(m).celu(x), "leaky_relu": lambda m, x: F(m).leaky_relu(x),
    "rrelu_eval": lambda m, x: F(m).rrelu(x, training=False), "rrelu_train": lambda m, x: F(m).rrelu(x, training=True),
    "hardtanh": lambda m, x: F(m).hardtanh(x), "relu6": lambda m, x: F(m).relu6(x), "mish": lambda m, x: F(m).mish(x),
    "logsigmoid": lambda m, x: F(m).logsigmoid(x), "F_sigmoid": lambda m, x: F(m).sigmoid(x),
    "F_tanh": lambda m, x: F(m).tanh(x), "hardswish": lambda m, x: F(m).hardswish(x),
    "hardsigmoid": lambda m, x: F(m).hardsigmoid(x), "softsign": lambda m, x: F(m).softsign(x),
    "tanhshrink": lambda m, x: F(m).tanhshrink(x), "threshold": lambda m, x: F(m).threshold(x, 0.0, 0.0),
    "hardshrink": lambda m, x: F(m).hardshrink(x), "softshrink": lambda m, x: F(m).softshrink(x),
    "softmax": lambda m, x: x.softmax(1), "log_softmax": lambda m, x: x.log_softmax(1),
    "F_softmax": lambda m, x: F(m).softmax(x, dim=0), "softmin": lambda m, x: F(m).softmin(x, 1),
    "normalize": lambda m, x: F(m).normalize(x), "glu": lambda m, x: F(m).glu(x),
    "prelu": lambda m, x: F(m).prelu(x, m.tensor([0.25])),
    "dropout_train": lambda m, x: F(m).dropout(x, 0.5, True), "dropout_p0": lambda m, x: F(m).dropout(x, 0.0, True),
    "dropout_eval": lambda m, x: F(m).dropout(x, 0.5, False), "alpha_dropout_eval": lambda m, x: F(m).alpha_dropout(x, 0.5, False),
    # in-place ops (on a non-leaf)
    "add_": lambda m, x: (x * 1).add_(1), "add_tensor_": lambda m, x: (x * 1).add_(x), "iadd": _iadd,
    "sub_": lambda m, x: (x * 1).sub_(1), "mul_": lambda m, x: (x * 1).mul_(2), "div_": lambda m, x: (x * 1).div_(2),
    "div_floor_": lambda m, x: (x * 1).div_(2, rounding_mode="floor"), "pow_": lambda m, x: (x * 1).pow_(2),
    "neg_": lambda m, x: (x * 1).neg_(), "abs_": lambda m, x: (x * 1).abs_(), "exp_": lambda m, x: (x * 1).exp_(),
    "sqrt_": lambda m, x: (x * 0 + 1).sqrt_(), "sigmoid_": lambda m, x: (x * 1).sigmoid_(),
    "clamp_": lambda m, x: (x * 1).clamp_(-1, 1), "clamp_min_": lambda m, x: (x * 1).clamp_min_(0.0),
    "addcmul_": lambda m, x: (x * 1).addcmul_(x, x), "lerp_": lambda m, x: (x * 1).lerp_(x * 2, 0.5),
    "relu_": lambda m, x: (x * 1).relu_(), "F_relu_inplace": lambda m, x: F(m).relu(x * 1, inplace=True),
    "silu_inplace": lambda m, x: F(m).silu(x * 1, inplace=True), "elu_inplace": lambda m, x: F(m).elu(x * 1, inplace=True),
    "selu_": lambda m, x: F(m).selu_(x * 1), "celu_": lambda m, x: F(m).celu_(x * 1),
    "leaky_relu_": lambda m, x: F(m).leaky_relu_(x * 1), "rrelu_": lambda m, x: F(m).rrelu_(x * 1),
    "threshold_": lambda m, x: F(m).threshold_(x * 1, 0.0, 0.0), "hardtanh_": lambda m, x: F(m).hardtanh_(x * 1),
    "zero_": lambda m, x: (x * 1).zero_(), "fill_": lambda m, x: (x * 1).fill_(2.0),
    "fill_tensor_": lambda m, x: (x * 1).fill_(m.tensor(1.0)), "copy_": lambda m, x: (x * 1).copy_(x),
    "masked_fill_": lambda m, x: (x * 1).masked_fill_(x > 0, 0.0), "triu_": lambda m, x: (x * 1).triu_(),
    "setitem": _setitem, "setitem_tensor": _setitem_tensor, "setitem_index": _setitem_index,
    # views and shape ops
    "view": lambda m, x: x.view(-1), "view_as": lambda m, x: x.view_as(x), "reshape": lambda m, x: x.reshape(4, 3),
    "reshape_copy": lambda m, x: x.t().reshape(12), "flatten": lambda m, x: x.flatten(),
    "flatten_partial": lambda m, x: x[None].flatten(0, 1), "ravel": lambda m, x: x.t().ravel(),
    "unflatten": lambda m, x: x.unflatten(1, (2, 2)), "transpose": lambda m, x: x.transpose(0, 1),
    "swapaxes": lambda m, x: x.swapaxes(0, 1), "t": lambda m, x: x.t(), "T": lambda m, x: x.T, "mT": lambda m, x: x.mT,
    "permute": lambda m, x: x.permute(1, 0), "movedim": lambda m, x: x.movedim(0, 1),
    "unsqueeze": lambda m, x: x.unsqueeze(0), "squeeze": lambda m, x: x.unsqueeze(0).squeeze(),
    "squeeze_dim": lambda m, x: x.unsqueeze(0).squeeze(0), "squeeze_dims": lambda m, x: x.unsqueeze(0).squeeze((0,)),
    "expand": lambda m, x: x[:1].expand(3, 4), "expand_same": lambda m, x: x.expand(3, 4),
    "expand_as": lambda m, x: x[:1].expand_as(x), "broadcast_to": lambda m, x: x[:1].broadcast_to(3, 4),
    "atleast_2d": lambda m, x: m.atleast_2d(x[0]),
    "slice": lambda m, x: x[0:2], "slice_cols": lambda m, x: x[:, 1:], "slice_step": lambda m, x: x[:, ::2],
    "slice_full": lambda m, x: x[:], "ellipsis_full": lambda m, x: x[...], "select": lambda m, x: x[0],
    "select_col": lambda m, x: x[:, 1], "select_ellipsis": lambda m, x: x[..., 0], "select_then_slice": lambda m, x: x[0, 1:],
    "none_index": lambda m, x: x[None], "none_then_select": lambda m, x: x[None, 0],
    "select_then_none": lambda m, x: x[0, None], "select_fn": lambda m, x: m.select(x, 1, 0),
    "narrow": lambda m, x: x.narrow(1, 0, 2), "chunk": lambda m, x: x.chunk(2, 1)[0], "split": lambda m, x: x.split(2, 1)[1],
    "split_sizes": lambda m, x: x.split([1, 3], 1)[1], "tensor_split": lambda m, x: x.tensor_split(2, 1)[0],
    "unbind": lambda m, x: x.unbind(0)[1], "unbind_cols": lambda m, x: x.unbind(1)[0],
    "diagonal": lambda m, x: x.diagonal(), "unfold": lambda m, x: x.unfold(1, 2, 1),
    "as_strided": lambda m, x: x.as_strided((2, 2), (1, 2)), "clone": lambda m, x: x.clone(),
    "contiguous": lambda m, x: x.t().contiguous(), "contiguous_noop": lambda m, x: x.contiguous(),
    "t_": lambda m, x: (x * 1).t_(), "transpose_": lambda m, x: (x * 1).transpose_(0, 1),
    "unsqueeze_": lambda m, x: (x * 1).unsqueeze_(0), "squeeze_": lambda m, x: (x * 1)[None].squeeze_(0),
    "squeeze_all_": lambda m, x: (x * 1)[None].squeeze_(),
    "cat": lambda m, x: m.cat([x, x]), "stack": lambda m, x: m.stack([x, x]), "hstack": lambda m, x: m.hstack([x, x]),
    "vstack": lambda m, x: m.vstack([x, x]), "dstack": lambda m, x: m.dstack([x, x]),
    "column_stack": lambda m, x: m.column_stack([x, x]), "block_diag": lambda m, x: m.block_diag(x, x),
    "repeat": lambda m, x: x.repeat(2, 1), "tile": lambda m, x: x.tile(2),
    "repeat_interleave": lambda m, x: x.repeat_interleave(2, 0),
    "repeat_interleave_tensor": lambda m, x: x.repeat_interleave(m.tensor([1, 2, 1]), 0),
    "flip": lambda m, x: x.flip(0), "fliplr": lambda m, x: x.fliplr(), "roll": lambda m, x: x.roll(1, 0),
    "rot90": lambda m, x: x.rot90(), "rot90_2": lambda m, x: x.rot90(2), "tril": lambda m, x: x.tril(),
    "triu": lambda m, x: x.triu(1), "meshgrid": lambda m, x: m.meshgrid(x[0], x[1], indexing="ij")[0],
    "cartesian_prod": lambda m, x: m.cartesian_prod(x[0], x[1]),
    "to64": lambda m, x: x.to(m.float64), "double": lambda m, x: x.double(), "half": lambda m, x: x.half(),
    "float": lambda m, x: x.float(), "type_as": lambda m, x: x.type_as(m.zeros(1, dtype=m.float64)),
    # reductions
    "sum": lambda m, x: x.sum(), "sum_dim": lambda m, x: x.sum(1), "sum_keepdim": lambda m, x: x.sum(0, keepdim=True),
    "sum_dims": lambda m, x: x.sum((0, 1)), "sum_dtype": lambda m, x: x.sum(dtype=m.float64),
    "sum_to_size": lambda m, x: x.sum_to_size(1, 4), "mean": lambda m, x: x.mean(), "mean_dim": lambda m, x: x.mean(0),
    "mean_keepdim": lambda m, x: x.mean(1, keepdim=True), "nansum": lambda m, x: x.nansum(),
    "prod": lambda m, x: x.prod(), "prod_dim": lambda m, x: x.prod(1), "max": lambda m, x: x.max(),
    "min": lambda m, x: x.min(), "max_dim": lambda m, x: x.max(1).values, "min_dim": lambda m, x: x.min(0)[0],
    "amax": lambda m, x: x.amax(1), "amin": lambda m, x: x.amin(0), "aminmax": lambda m, x: x.aminmax()[0],
    "std": lambda m, x: x.std(), "std_dim": lambda m, x: x.std(1), "var": lambda m, x: x.var(1),
    "var_mean": lambda m, x: m.var_mean(x)[0], "std_mean": lambda m, x: m.std_mean(x)[0],
    "nanmean": lambda m, x: x.nanmean(), "norm": lambda m, x: x.norm(), "norm_dim": lambda m, x: x.norm(dim=1),
    "vector_norm": lambda m, x: m.linalg.vector_norm(x), "matrix_norm": lambda m, x: m.linalg.matrix_norm(x),
    "linalg_norm": lambda m, x: m.linalg.norm(x), "dist": lambda m, x: m.dist(x, x + 1),
    "renorm": lambda m, x: x.renorm(2, 0, 1.0), "logsumexp": lambda m, x: x.logsumexp(1),
    "cumsum": lambda m, x: x.cumsum(1), "cumprod": lambda m, x: x.cumprod(1), "cummax": lambda m, x: x.cummax(1)[0],
    "logcumsumexp": lambda m, x: x.logcumsumexp(1), "topk": lambda m, x: x.topk(2).values,
    "sort": lambda m, x: x.sort(1).values, "kthvalue": lambda m, x: x.kthvalue(2, 1)[0], "mode": lambda m, x: x.mode(1)[0],
    "median": lambda m, x: x.median(), "quantile": lambda m, x: x.quantile(0.5), "diff": lambda m, x: x.diff(),
    "trace": lambda m, x: x.trace(),
    # linear algebra
    "mm": lambda m, x: x @ x.t(), "mm_fn": lambda m, x: m.mm(x, x.t()), "mv": lambda m, x: x @ x[0],
    "vec_mat": lambda m, x: x[:, 0] @ x, "dot": lambda m, x: x[0] @ x[1], "vdot": lambda m, x: m.vdot(x[0], x[1]),
    "bmm": lambda m, x: m.bmm(x[None], x.t()[None]), "batch_mat": lambda m, x: x[None] @ x.t(),
    "batch_batch": lambda m, x: x[None, None] @ x.t()[None, None], "mat_batch": lambda m, x: x.t() @ x[None],
    "outer": lambda m, x: m.outer(x[0], x[1]), "inner": lambda m, x: m.inner(x, x),
    "tensordot": lambda m, x: m.tensordot(x, x, ([1], [1])), "kron": lambda m, x: m.kron(x, x),
    "multi_dot": lambda m, x: m.linalg.multi_dot([x, x.t(), x]), "addmm": lambda m, x: m.addmm(x[:, :3], x, x.t()),
    "addmv": lambda m, x: m.addmv(x[:, 0], x, x[0]), "addr": lambda m, x: m.addr(x, x[:, 0], x[0]),
    "baddbmm": lambda m, x: m.baddbmm(x[None, :, :3], x[None], x.t()[None]),
    "einsum": lambda m, x: m.einsum("ij,kj->ik", x, x), "einsum_sum": lambda m, x: m.einsum("ij->", x),
    "einsum_outer": lambda m, x: m.einsum("i,j->ij", x[0], x[1]), "einsum_perm": lambda m, x: m.einsum("ij->ji", x),
    "cross": lambda m, x: m.cross(x[:, :3], x[:, :3] + 1, dim=1), "diag": lambda m, x: m.diag(x),
    "diag_1d": lambda m, x: m.diag(x[0]), "cdist": lambda m, x: m.cdist(x, x + 1),
    "linear": lambda m, x: F(m).linear(x, x), "linear_bias": lambda m, x: F(m).linear(x, x, x[:, 0]),
    "linear_3d": lambda m, x: F(m).linear(x[None], x), "linear_3d_bias": lambda m, x: F(m).linear(x[None], x, x[:, 0]),
    "linear_1d": lambda m, x: F(m).linear(x[0], x), "bilinear": lambda m, x: F(m).bilinear(x, x, m.ones(2, 4, 4)),
    # losses
    "mse": lambda m, x: F(m).mse_loss(x, x.detach() * 0),
    "mse_sum": lambda m, x: F(m).mse_loss(x, x.detach() * 0, reduction="sum"),
    "mse_none": lambda m, x: F(m).mse_loss(x, x.detach() * 0, reduction="none"),
    "l1": lambda m, x: F(m).l1_loss(x, x.detach() * 0), "l1_none": lambda m, x: F(m).l1_loss(x, x.detach() * 0, reduction="none"),
    "smooth_l1": lambda m, x: F(m).smooth_l1_loss(x, x.detach() * 0),
    "smooth_l1_none": lambda m, x: F(m).smooth_l1_loss(x, x.detach() * 0, reduction="none"),
    "smooth_l1_beta0": lambda m, x: F(m).smooth_l1_loss(x, x.detach() * 0, beta=0.0),
    "huber": lambda m, x: F(m).huber_loss(x, x.detach() * 0),
    "huber_sum": lambda m, x: F(m).huber_loss(x, x.detach() * 0, reduction="sum"),
    "cross_entropy": lambda m, x: F(m).cross_entropy(x, _i(m, 0, 1, 2)),
    "cross_entropy_none": lambda m, x: F(m).cross_entropy(x, _i(m, 0, 1, 2), reduction="none"),
    "cross_entropy_weight": lambda m, x: F(m).cross_entropy(x, _i(m, 0, 1, 2), weight=m.ones(4)),
    "cross_entropy_smoothing": lambda m, x: F(m).cross_entropy(x, _i(m, 0, 1, 2), label_smoothing=0.1),
    "cross_entropy_probs": lambda m, x: F(m).cross_entropy(x, x.detach().softmax(1)),
    "cross_entropy_probs_sum": lambda m, x: F(m).cross_entropy(x, x.detach().softmax(1), reduction="sum"),
    "cross_entropy_spatial": lambda m, x: F(m).cross_entropy(_img(x).reshape(1, 3, 4), m.tensor([[0, 1, 2, 0]])),
    "cross_entropy_spatial_none": lambda m, x: F(m).cross_entropy(x.reshape(1, 3, 4), m.tensor([[0, 1, 2, 0]]),
                                                                  reduction="none"),
    "cross_entropy_2d": lambda m, x: F(m).cross_entropy(x.reshape(1, 3, 2, 2), m.tensor([[[0, 1], [2, 0]]])),
    "nll": lambda m, x: F(m).nll_loss(x, _i(m, 0, 1, 2)),
    "nll_none": lambda m, x: F(m).nll_loss(x, _i(m, 0, 1, 2), reduction="none"),
    "bce": lambda m, x: F(m).binary_cross_entropy(x.sigmoid(), x.detach().gt(0).float()),
    "bce_logits": lambda m, x: F(m).binary_cross_entropy_with_logits(x, x.detach().gt(0).float()),
    "kl_div": lambda m, x: F(m).kl_div(x.log_softmax(1), x.detach().softmax(1), reduction="batchmean"),
    "kl_div_sum": lambda m, x: F(m).kl_div(x.log_softmax(1), x.detach().softmax(1), reduction="sum"),
    "soft_margin": lambda m, x: F(m).soft_margin_loss(x, m.ones(3, 4)),
    "multi_margin": lambda m, x: F(m).multi_margin_loss(x, _i(m, 0, 1, 2)),
    "multilabel_margin": lambda m, x: F(m).multilabel_margin_loss(x, m.tensor([[0, 1, -1, 0]] * 3)),
    "multilabel_soft_margin": lambda m, x: F(m).multilabel_soft_margin_loss(x, m.ones(3, 4)),
    "cosine_embedding": lambda m, x: F(m).cosine_embedding_loss(x, x + 1, m.ones(3)),
    "margin_ranking": lambda m, x: F(m).margin_ranking_loss(x, x + 1, m.ones(3, 4)),
    "hinge_embedding": lambda m, x: F(m).hinge_embedding_loss(x, m.ones(3, 4)),
    "poisson_nll": lambda m, x: F(m).poisson_nll_loss(x, x.detach().abs()),
    "gaussian_nll": lambda m, x: F(m).gaussian_nll_loss(x, x.detach(), m.ones(3, 4)),
    "triplet_margin": lambda m, x: F(m).triplet_margin_loss(x, x + 1, x + 2),
    "cosine_similarity": lambda m, x: F(m).cosine_similarity(x, x + 1),
    "pairwise_distance": lambda m, x: F(m).pairwise_distance(x, x + 1),
    # nn layers
    "embedding": lambda m, x: F(m).embedding(_i(m, 0, 2), x),
    "embedding_bag": lambda m, x: F(m).embedding_bag(m.tensor([[0, 2]]), x),
    "conv2d": lambda m, x: F(m).conv2d(_img(x), x[:2, :2].reshape(1, 1, 2, 2)),
    "conv2d_unbatched": lambda m, x: F(m).conv2d(_img(x)[0], x[:2, :2].reshape(1, 1, 2, 2)),
    "conv1d": lambda m, x: F(m).conv1d(x[None], x[:, :2].reshape(1, 3, 2)),
    "conv_transpose2d": lambda m, x: F(m).conv_transpose2d(_img(x), x[:2, :2].reshape(1, 1, 2, 2)),
    "conv_transpose1d": lambda m, x: F(m).conv_transpose1d(x[None], x[:, :2].reshape(3, 1, 2)),
    "batch_norm": lambda m, x: F(m).batch_norm(x, None, None, training=True),
    "batch_norm_eval": lambda m, x: F(m).batch_norm(x, m.zeros(4), m.ones(4)),
    "layer_norm": lambda m, x: F(m).layer_norm(x, (4,)), "group_norm": lambda m, x: F(m).group_norm(x, 2),
    "instance_norm": lambda m, x: F(m).instance_norm(x.reshape(1, 3, 4)),
    "rms_norm": lambda m, x: F(m).rms_norm(x, (4,)),
    "local_response_norm": lambda m, x: F(m).local_response_norm(x.reshape(1, 3, 4), 2),
    "max_pool2d": lambda m, x: F(m).max_pool2d(_img(x), 2),
    "max_pool2d_indices": lambda m, x: F(m).max_pool2d(_img(x), 2, return_indices=True)[0],
    "max_pool2d_unbatched": lambda m, x: F(m).max_pool2d(x[None], 2),
    "max_pool1d": lambda m, x: F(m).max_pool1d(x[None], 2), "avg_pool2d": lambda m, x: F(m).avg_pool2d(_img(x), 2),
    "avg_pool2d_unbatched": lambda m, x: F(m).avg_pool2d(x[None], 2), "avg_pool1d": lambda m, x: F(m).avg_pool1d(x[None], 2),
    "adaptive_avg_pool2d": lambda m, x: F(m).adaptive_avg_pool2d(_img(x), 1),
    "adaptive_avg_pool2d_2": lambda m, x: F(m).adaptive_avg_pool2d(_img(x), 2),
    "adaptive_avg_pool2d_same": lambda m, x: F(m).adaptive_avg_pool2d(_img(x), (3, 4)),
    "adaptive_avg_pool1d": lambda m, x: F(m).adaptive_avg_pool1d(x[None], 2),
    "adaptive_max_pool2d": lambda m, x: F(m).adaptive_max_pool2d(_img(x), 1),
    "adaptive_max_pool2d_2": lambda m, x: F(m).adaptive_max_pool2d(_img(x), 2),
    "adaptive_max_pool1d": lambda m, x: F(m).adaptive_max_pool1d(x[None], 2),
    "lp_pool2d": lambda m, x: F(m).lp_pool2d(_img(x), 2, 2),
    "pad": lambda m, x: F(m).pad(x, (1, 1)), "pad_reflect": lambda m, x: F(m).pad(x, (1, 1), mode="reflect"),
    "pad_reflect_2d": lambda m, x: F(m).pad(_img(x), (1, 1, 1, 1), mode="reflect"),
    "pad_replicate": lambda m, x: F(m).pad(x[None], (1, 1), mode="replicate"),
    "pad_circular": lambda m, x: F(m).pad(x[None], (1, 1), mode="circular"),
    "interpolate_nearest": lambda m, x: F(m).interpolate(_img(x), scale_factor=2),
    "interpolate_nearest_1d": lambda m, x: F(m).interpolate(x[None], scale_factor=2),
    "interpolate_nearest_exact": lambda m, x: F(m).interpolate(_img(x), scale_factor=2, mode="nearest-exact"),
    "interpolate_bilinear": lambda m, x: F(m).interpolate(_img(x), scale_factor=2, mode="bilinear"),
    "interpolate_bicubic": lambda m, x: F(m).interpolate(_img(x), size=(5, 5), mode="bicubic", align_corners=True),
    "interpolate_linear": lambda m, x: F(m).interpolate(x[None], scale_factor=2, mode="linear"),
    "interpolate_area": lambda m, x: F(m).interpolate(_img(x), scale_factor=2, mode="area"),
    "interpolate_same_size": lambda m, x: F(m).interpolate(_img(x), size=(3, 4)),
    "pixel_shuffle": lambda m, x: F(m).pixel_shuffle(x.reshape(1, 4, 3, 1), 2),
    "pixel_unshuffle": lambda m, x: F(m).pixel_unshuffle(x.reshape(1, 1, 2, 6), 2),
    "F_unfold": lambda m, x: F(m).unfold(_img(x), 2), "F_fold": lambda m, x: F(m).fold(x.reshape(1, 4, 3), (2, 4), 2),
    "one_hot_mul": lambda m, x: F(m).one_hot(_i(m, 0, 1, 2), 4) * x,
    "sdpa": lambda m, x: F(m).scaled_dot_product_attention(x[None], x[None], x[None]),
    # index ops
    "index": lambda m, x: x[_i(m, 0, 1)], "index_cols": lambda m, x: x[:, _i(m, 0, 1)], "mask_index": lambda m, x: x[x > 0],
    "index_select": lambda m, x: x.index_select(0, _i(m, 0, 2)), "gather": lambda m, x: x.gather(1, m.tensor([[0], [1], [2]])),
    "take_along_dim": lambda m, x: x.take_along_dim(m.tensor([[0], [1], [2]]), 1),
    "masked_select": lambda m, x: x.masked_select(x > 0), "masked_fill": lambda m, x: x.masked_fill(x > 0, 0.0),
    "masked_scatter": lambda m, x: x.masked_scatter(x > 0, x * 2), "take": lambda m, x: x.take(_i(m, 0, 5)),
    "put": lambda m, x: x.put(_i(m, 0), x[0, :1]), "scatter": lambda m, x: x.scatter(1, m.tensor([[0], [1], [2]]), 0.0),
    "scatter_tensor": lambda m, x: x.scatter(1, m.tensor([[0], [1], [2]]), x[:, :1]),
    "scatter_add": lambda m, x: x.scatter_add(1, m.tensor([[0], [1], [2]]), x[:, :1]),
    "index_add": lambda m, x: x.index_add(0, _i(m, 0), x[:1]), "index_fill": lambda m, x: x.index_fill(0, _i(m, 0), 0.0),
    "index_copy": lambda m, x: x.index_copy(0, _i(m, 0), x[:1] * 2),
    "index_put": lambda m, x: x.index_put((_i(m, 0),), x[0] * 2), "narrow_copy": lambda m, x: x.narrow_copy(1, 0, 2),
    # overloads and composites: other arguments of the ops above
    "prod_keepdim": lambda m, x: x.prod(0, keepdim=True), "prod_1d_dim": lambda m, x: x[0].prod(0),
    "max_keepdim": lambda m, x: x.max(1, keepdim=True)[0], "max_0d": lambda m, x: x[0, 0].max(),
    "max_other": lambda m, x: x.max(x * 2), "min_fn": lambda m, x: m.min(x, 0).values,
    "aminmax_max": lambda m, x: x.aminmax()[1], "aminmax_dim": lambda m, x: m.aminmax(x, dim=0, keepdim=True).max,
    "var_mean_mean": lambda m, x: m.var_mean(x, 1)[1], "std_mean_dim": lambda m, x: m.std_mean(x, 1)[0],
    "nanmean_dim": lambda m, x: m.nanmean(x, 1, keepdim=True), "norm_p1": lambda m, x: x.norm(1),
    "norm_fro_dims": lambda m, x: x.norm("fro", (0, 1)), "norm_nuc": lambda m, x: x.norm("nuc"),
    "torch_norm_dim": lambda m, x: m.norm(x, 2, 1), "norm_dtype": lambda m, x: x.norm(dtype=m.float64),
    "take_fn": lambda m, x: m.take(x, _i(m, 11, 0)),
    "put_accumulate": lambda m, x: x.put(_i(m, 0), x[0, :1], accumulate=True),
    "put_": lambda m, x: (x * 1).put_(_i(m, 0), x[0, :1]),
    "scatter_value_kw": lambda m, x: m.scatter(x, 1, m.tensor([[0], [1], [2]]), value=1.0),
    "scatter_reduce_legacy": lambda m, x: x.scatter(1, m.tensor([[0], [1], [2]]), 2.0, reduce="multiply"),
    "scatter_": lambda m, x: (x * 1).scatter_(1, m.tensor([[0], [1], [2]]), 0.0),
    "scatter_tensor_": lambda m, x: (x * 1).scatter_(1, m.tensor([[0], [1], [2]]), x[:, :1]),
    "instance_norm_affine": lambda m, x: F(m).instance_norm(x.reshape(1, 3, 2, 2), weight=m.ones(3), bias=m.zeros(3)),
    "instance_norm_eval": lambda m, x: F(m).instance_norm(x.reshape(1, 3, 4), m.zeros(3), m.ones(3),
                                                          use_input_stats=False),
    "InstanceNorm1d": lambda m, x: m.nn.InstanceNorm1d(3)(x.reshape(1, 3, 4)),
    "rms_norm_weight": lambda m, x: F(m).rms_norm(x.detach(), (4,), x[0]), "RMSNorm": lambda m, x: m.nn.RMSNorm(4)(x),
    "narrow_copy_fn": lambda m, x: m.narrow_copy(x, 0, 1, 2),
}

# values drawn at random: only names are compared
RANDOM = {"dropout_train", "rrelu_train"}


def _x(m):
    return m.tensor([[1., -2, 3, 4], [5, 6, -7, 8], [9, 10, 11, -12]], requires_grad=True)


def _grad_fn_repr(y):
    """The ``grad_fn=<...>`` part of a tensor's repr (None without one)."""
    m = re.search(r"grad_fn=<([^>]*)>", repr(y))
    return m.group(1) if m else None


@pytest.mark.parametrize("name", list(CASES))
def test_node_name_matches_torch(name):
    fn = CASES[name]
    ty, ey = fn(torch, _x(torch)), fn(ember, _x(ember))
    tg, eg = ty.grad_fn, ey.grad_fn
    if tg is None:
        assert eg is None, f"torch records no node, ember records {eg.name()}"
    else:
        assert eg is not None, f"torch records {tg.name()}, ember records no node"
        assert eg.name() == tg.name()
        assert type(eg).__name__ == type(tg).__name__
        # repr(grad_fn) is "<Name object at 0x...>"; the tensor's repr shows grad_fn=<Name>
        assert repr(eg).split(" object at ")[0] == repr(tg).split(" object at ")[0]
        assert _grad_fn_repr(ey) == _grad_fn_repr(ty)
    assert tuple(ey.shape) == tuple(ty.shape)
    if name not in RANDOM:
        np.testing.assert_allclose(ey.detach().double().numpy(), ty.detach().double().numpy(), rtol=1e-4, atol=1e-5)


def test_node_classes_are_made_once_per_name():
    x = _x(ember)
    a, b, c = x + 1, x * x + x, x.transpose(0, 1)
    assert type(a.grad_fn) is type(b.grad_fn)
    assert type(c.grad_fn) is type(x.t().transpose(1, 0).grad_fn)
    assert type(a.grad_fn) is not type(c.grad_fn)
    from ember.autograd.graph import Node
    assert isinstance(a.grad_fn, Node) and isinstance(c.grad_fn, Node)
    # the renamed node is the same node: backward through it still works
    c.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((3, 4), np.float32))


def test_node_name_depending_on_arguments():
    """One op, several torch names: chosen per call (sum with and without dim, matmul by rank)."""
    x = _x(ember)
    names = [x.sum().grad_fn.name(), x.sum(0).grad_fn.name(), x.sum().grad_fn.name(),
             (x @ x.t()).grad_fn.name(), (x @ x[0]).grad_fn.name(), (x @ x.t()).grad_fn.name()]
    assert names == ["SumBackward0", "SumBackward1", "SumBackward0", "MmBackward0", "MvBackward0", "MmBackward0"]


def test_custom_function_node_name():
    def make(m):
        return unary_function(m, lambda x: x * 2, lambda g: g * 2, "Double")

    ty = make(torch).apply(_x(torch))
    ey = make(ember).apply(_x(ember))
    assert ey.grad_fn.name() == ty.grad_fn.name() == "DoubleBackward"
    assert type(ey.grad_fn).__name__ == type(ty.grad_fn).__name__
    assert _grad_fn_repr(ey) == _grad_fn_repr(ty)


def test_next_functions_names_match_torch():
    """The names along the graph, not just at its head: (x.t() @ x).sum() through mm, t and the leaf."""
    def chain(m):
        x = _x(m)
        y = (x.t() @ x).sum()
        out, fn = [], y.grad_fn
        while fn is not None:
            out.append(type(fn).__name__)
            fn = next((f for f, _ in fn.next_functions if f is not None), None)
        return out
    assert chain(ember) == chain(torch)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_create_graph_gradient_copy_node_matches_torch():
    """``backward(create_graph=True)`` stores a differentiable copy of the first gradient in ``.grad``
    (torch's ``CopyBackwards`` node); a second backward adds to it (``AddBackward0``)."""
    def run(m):
        x = _x(m)
        (x * x).sum().backward(create_graph=True)
        first = x.grad
        (x ** 3).sum().backward(create_graph=True)
        # the copy keeps the graph of the gradient: differentiate through it
        gg, = m.autograd.grad(first.sum(), x)
        return first, x.grad, gg

    for t, e in zip(run(torch), run(ember)):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5)
        if t.grad_fn is None:
            assert e.grad_fn is None
            continue
        assert e.grad_fn.name() == t.grad_fn.name()
        assert type(e.grad_fn).__name__ == type(t.grad_fn).__name__
        assert repr(e.grad_fn).split(" object at ")[0] == repr(t.grad_fn).split(" object at ")[0]
        assert _grad_fn_repr(e) == _grad_fn_repr(t)
    first = run(ember)[0]
    assert first.grad_fn.name() == "torch::autograd::CopyBackwards"
    assert type(first.grad_fn).__name__ == "CopyBackwards"


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_function_node_name(backend):
    """A compiled function's outputs share one node running the ahead-of-time backward; torch.compile
    names it ``CompiledFunctionBackward`` (checked by hand: torch.compile is too slow for a test)."""
    from ember.compiler import counters

    def f(m, x):
        return (x * 2).sin().sum(1)

    ember.compiler.reset()
    cf = ember.compile(lambda x: f(ember, x), backend=backend)
    cf(_x(ember))           # the first call captures (and runs eagerly); later calls replay the graph
    for scale in (1.0, -0.5):
        ex, tx = _x(ember), _x(torch)
        with ember.no_grad():
            ex.mul_(scale)
        with torch.no_grad():
            tx.mul_(scale)
        ey, ty = cf(ex), f(torch, tx)
        node = ey.grad_fn
        assert node.name() == "CompiledFunctionBackward"
        assert type(node).__name__ == "CompiledFunctionBackward"
        assert _grad_fn_repr(ey) == "CompiledFunctionBackward"
        assert [type(n).__name__ for n, _ in node.next_functions] == ["AccumulateGrad"]
        ey.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert counters["fallbacks"] == 0
    ember.compiler.reset()
