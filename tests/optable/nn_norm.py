"""Oracle cases for ember.nn.functional's normalization, embedding, dropout and distance ops."""
import numpy as np

from oracle import Case


def _F(m):
    return m.nn.functional


def _bn_train(m, x, w, b):
    rm, rv = m.zeros(3, dtype=x.dtype), m.ones(3, dtype=x.dtype)
    y = _F(m).batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)
    return y, rm, rv


def _bn_make(shape):
    def make(rng, dtype):
        dt = np.dtype(dtype)
        return [rng.uniform(-2, 2, shape).astype(dt), rng.uniform(-1, 1, (3,)).astype(dt),
                rng.uniform(0.5, 2, (3,)).astype(dt), rng.uniform(0.5, 1.5, (3,)).astype(dt),
                rng.uniform(-1, 1, (3,)).astype(dt)]
    return make


def _in_train(m, x, w, b):
    rm, rv = m.zeros(3, dtype=x.dtype), m.ones(3, dtype=x.dtype)
    y = _F(m).instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.2)
    return y, rm, rv


def _emb_grad_of_grad(m, w, v, idx):
    # the weight gradient as a function of the upstream gradient v: exercises embedding's backward op
    # (and, through the oracle's backward, that op's own derivative)
    y = _F(m).embedding(idx, w, padding_idx=2)
    (g,) = m.autograd.grad((y * v).sum(), w, create_graph=True)
    return g * 1.0


def _emb_make(rng, dtype):
    dt = np.dtype(dtype)
    return [rng.uniform(-1, 1, (6, 4)).astype(dt), rng.uniform(-1, 1, (3, 5, 4)).astype(dt),
            rng.integers(0, 6, (3, 5)).astype(np.int64)]


def _cdist_make(p_rows, r_rows, batch=()):
    def make(rng, dtype):
        dt = np.dtype(dtype)
        a = rng.uniform(-1, 1, batch + (p_rows, 4)).astype(dt)
        b = rng.uniform(-1, 1, batch + (r_rows, 4)).astype(dt)
        return [a, b]
    return make


def _bag_make(rng, dtype):
    dt = np.dtype(dtype)
    return [rng.uniform(-1, 1, (7, 3)).astype(dt), rng.uniform(0.5, 1.5, (9,)).astype(dt),
            rng.integers(0, 7, (9,)).astype(np.int64)]


def _bag(mode, psw=False, pad=None):
    def fn(m, w, s, idx):
        offs = m.tensor([0, 2, 2, 6])
        return _F(m).embedding_bag(idx, w, offs, mode=mode, per_sample_weights=s if psw else None,
                                   padding_idx=pad)
    return fn


CASES = [
    # layer norm
    Case("layer_norm", lambda m, x, w, b: _F(m).layer_norm(x, (4,), w, b), shapes=((3, 5, 4), (4,), (4,)),
         double_backward=True),
    Case("layer_norm_2d_shape", lambda m, x, w, b: _F(m).layer_norm(x, (3, 4), w, b, eps=1e-3),
         shapes=((2, 3, 4), (3, 4), (3, 4)), double_backward=True),
    Case("layer_norm_noaffine", lambda m, x: _F(m).layer_norm(x, [6]), shapes=((4, 6),), double_backward=True),
    Case("layer_norm_weight_only", lambda m, x, w: _F(m).layer_norm(x, (5,), w), shapes=((2, 3, 5), (5,))),
    # rms norm
    Case("rms_norm", lambda m, x, w: _F(m).rms_norm(x, (4,), w), shapes=((3, 5, 4), (4,)),
         double_backward=True),
    Case("rms_norm_eps_noweight", lambda m, x: _F(m).rms_norm(x, (2, 3), eps=1e-4), shapes=((4, 2, 3),),
         double_backward=True),
    # group norm
    Case("group_norm", lambda m, x, w, b: _F(m).group_norm(x, 2, w, b), shapes=((3, 4, 5), (4,), (4,)),
         double_backward=True),
    Case("group_norm_4d", lambda m, x, w, b: _F(m).group_norm(x, 3, w, b, eps=1e-3),
         shapes=((2, 6, 3, 2), (6,), (6,))),
    Case("group_norm_noaffine", lambda m, x: _F(m).group_norm(x, 1), shapes=((2, 3, 4),), double_backward=True),
    # batch norm
    Case("batch_norm_train", _bn_train, shapes=((5, 3, 4), (3,), (3,)), double_backward=True),
    Case("batch_norm_train_2d", lambda m, x: _F(m).batch_norm(x, None, None, training=True),
         shapes=((6, 3),), double_backward=True),
    Case("batch_norm_train_4d", _bn_train, shapes=((2, 3, 3, 4), (3,), (3,))),
    Case("batch_norm_eval", lambda m, x, rm, rv, w, b: _F(m).batch_norm(x, rm, rv, w, b, training=False),
         make=_bn_make((4, 3, 5)), grad_inputs=(0, 3, 4), double_backward=True),
    # instance norm
    Case("instance_norm", _in_train, shapes=((2, 3, 6), (3,), (3,)), double_backward=True),
    Case("instance_norm_eval", lambda m, x, rm, rv, w, b: _F(m).instance_norm(x, rm, rv, w, b, use_input_stats=False),
         make=_bn_make((2, 3, 5)), grad_inputs=(0, 3, 4)),
    # normalize / local response norm
    Case("normalize", lambda m, x: _F(m).normalize(x, dim=-1), shapes=((3, 5),), double_backward=True),
    Case("normalize_p1", lambda m, x: _F(m).normalize(x, p=1.0, dim=0), shapes=((3, 5),)),
    Case("local_response_norm", lambda m, x: _F(m).local_response_norm(x, 3, alpha=0.1, beta=0.6, k=2.0),
         shapes=((2, 5, 4),)),
    Case("local_response_norm_4d", lambda m, x: _F(m).local_response_norm(x, 2), shapes=((2, 4, 3, 2),)),
    # embedding
    Case("embedding", lambda m, w, idx: _F(m).embedding(idx, w), shapes=((6, 4), (3, 5)),
         int_inputs={1: (0, 6, "int64")}, double_backward=True),
    Case("embedding_padding_freq", lambda m, w, idx: _F(m).embedding(idx, w, padding_idx=1, scale_grad_by_freq=True),
         shapes=((5, 3), (4, 6)), int_inputs={1: (0, 5, "int64")}),
    Case("embedding_int32_idx", lambda m, w, idx: _F(m).embedding(idx, w, padding_idx=-1),
         shapes=((5, 3), (7,)), int_inputs={1: (0, 5, "int32")}),
    Case("embedding_backward_backward", _emb_grad_of_grad, make=_emb_make, grad_inputs=(0, 1)),
    Case("embedding_bag_sum", _bag("sum"), make=_bag_make, grad_inputs=(0,)),
    Case("embedding_bag_mean_pad", _bag("mean", pad=3), make=_bag_make, grad_inputs=(0,)),
    Case("embedding_bag_max", _bag("max"), make=_bag_make, grad_inputs=(0,)),
    Case("embedding_bag_psw", _bag("sum", psw=True), make=_bag_make, grad_inputs=(0, 1)),
    # distance
    Case("cosine_similarity", lambda m, a, b: _F(m).cosine_similarity(a, b), shapes=((3, 4, 2), (3, 4, 2)),
         double_backward=True),
    Case("cosine_similarity_bcast", lambda m, a, b: _F(m).cosine_similarity(a, b, dim=-1, eps=1e-6),
         shapes=((3, 1, 5), (4, 5))),
    Case("pairwise_distance", lambda m, a, b: _F(m).pairwise_distance(a, b), shapes=((4, 5), (4, 5)),
         double_backward=True),
    Case("pairwise_distance_p1_keepdim", lambda m, a, b: _F(m).pairwise_distance(a, b, p=1.0, keepdim=True),
         shapes=((4, 5), (5,))),
    Case("pairwise_distance_pinf", lambda m, a, b: _F(m).pairwise_distance(a, b, p=float("inf")),
         shapes=((4, 5), (4, 5))),
    Case("cdist", lambda m, a, b: m.cdist(a, b), make=_cdist_make(4, 5)),
    Case("cdist_batched_mm", lambda m, a, b: m.cdist(a, b), make=_cdist_make(30, 27, (2,)), atol=1e-4),
    Case("cdist_p1", lambda m, a, b: m.cdist(a, b, p=1.0), make=_cdist_make(4, 3)),
    Case("cdist_p3", lambda m, a, b: m.cdist(a, b, p=3.0), make=_cdist_make(4, 3, (2,))),
    Case("cdist_pinf", lambda m, a, b: m.cdist(a, b, p=float("inf")), make=_cdist_make(3, 4)),
    Case("cdist_p0", lambda m, a, b: m.cdist(a, b, p=0.0), make=_cdist_make(3, 4)),
    Case("pdist", lambda m, a: _F(m).pdist(a), shapes=((5, 3),)),
    Case("pdist_p1", lambda m, a: _F(m).pdist(a, p=1.0), shapes=((4, 3),)),
    # dropout in eval / p=0 (the random cases are in tests/test_nn_embedding_dropout.py)
    Case("dropout_eval", lambda m, x: _F(m).dropout(x, 0.5, training=False) * 1.0),
    Case("alpha_dropout_eval", lambda m, x: _F(m).alpha_dropout(x, 0.5) * 1.0),
    Case("dropout_p1", lambda m, x: _F(m).dropout(x, 1.0, training=True)),
    Case("one_hot", lambda m, i: _F(m).one_hot(i, 5), shapes=((3, 4),), int_inputs={0: (0, 5, "int64")},
         dtypes=("int64",)),
]
