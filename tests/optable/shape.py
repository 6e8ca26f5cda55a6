"""Oracle cases for ember/ops/shape_join.py, shape_rearrange.py and copies.py (joining, repeating, flipping,
diagonals, grids, fill_/copy_)
and for the differentiable samplers of ember/ops/random_ops.py, run with inputs that make the samples
deterministic (std 0, probabilities 0/1, rate 0) so values and gradients compare with torch."""

from oracle import Case, _np_dtype

Z = ("contig", "noncontig", "zero")     # layouts including a zero-size first dim


def _zero_one(shape):
    def make(rng, dtype):
        return [rng.integers(0, 2, size=shape).astype(_np_dtype(dtype))]
    return make


def _copy_into(m, a, b):
    x = a * 1.0
    x.copy_(b)
    return x


def _copy_view(m, a, b):
    x = a * 1.0
    x.narrow(0, 1, 1).copy_(b)
    return x


def _copy_cast(m, a, b):
    x = a.double() * 1.0
    x.copy_(b)
    return x


def _fill_scalar(m, a):
    x = a * 1.0
    x.fill_(2.5)
    return x


def _fill_tensor(m, a, b):
    x = a * 1.0
    x.fill_(b.sum())
    return x * 3


def _zero(m, a, b):
    x = a * 2.0
    x.zero_()
    return x + b


def _inplace_random(m, a):
    x = a * 1.0
    x.select(0, 0).uniform_(1.5, 1.5)
    x.select(0, 1).normal_(2.0, 0.0)
    x.select(0, 2).bernoulli_(1.0)
    return x


def _random_int(m, a):
    x = a * 1.0
    x.random_(3, 4)
    return x


CASES = [
    # ---- cat / stack family
    Case("cat_dim1", lambda m, a, b: m.cat([a, b], 1), shapes=((3, 4), (3, 2)), layouts=Z, double_backward=True),
    Case("cat_dim0_neg", lambda m, a, b: m.cat((a, b, a), dim=-2), shapes=((2, 3), (4, 3))),
    Case("cat_legacy_empty", lambda m, a, b: m.cat([a, a.new_zeros(0), b]), shapes=((2, 3), (1, 3))),
    Case("cat_promote", lambda m, a, b: m.cat([a, b.double()], 1), shapes=((2, 3), (2, 2))),
    Case("cat_int_bool", lambda m, a, b: m.cat([a, b], 0), shapes=((2, 3), (1, 3)), dtypes=("int64", "bool", "int32")),
    Case("concat", lambda m, a, b: m.concat([a, b], 0), shapes=((2, 3), (1, 3))),
    Case("concatenate", lambda m, a, b: m.concatenate([a, b], axis=1), shapes=((2, 3), (2, 1))),
    Case("stack", lambda m, a, b: m.stack([a, b], 1), shapes=((3, 4), (3, 4)), layouts=Z),
    Case("stack_last", lambda m, a, b: m.stack((a, b), dim=-1), shapes=((3, 4), (3, 4))),
    Case("hstack", lambda m, a, b: m.hstack([a, b]), shapes=((3, 4), (3, 2))),
    Case("hstack_1d", lambda m, a, b: m.hstack([a, b]), shapes=((3,), (2,))),
    Case("vstack", lambda m, a, b: m.vstack([a, b]), shapes=((4,), (2, 4))),
    Case("row_stack", lambda m, a, b: m.row_stack([a, b]), shapes=((2, 4), (2, 4))),
    Case("dstack", lambda m, a, b, c: m.dstack([a, b, c]), shapes=((3,), (1, 3), (1, 3, 2))),
    Case("column_stack", lambda m, a, b, c: m.column_stack([a, b, c]), shapes=((3,), (3, 2), (3,))),
    # ---- repeat / tile / repeat_interleave
    Case("repeat", lambda m, a: a.repeat(2, 1, 3), shapes=((3, 4),), layouts=Z, double_backward=True),
    Case("repeat_list", lambda m, a: a.repeat([2, 2]), shapes=((2, 3),)),
    Case("repeat_scalar", lambda m, a: a.repeat(3), shapes=((),)),
    Case("repeat_zero", lambda m, a: a.repeat(0, 2), shapes=((2, 3),)),
    Case("tile", lambda m, a: m.tile(a, (2,)), shapes=((2, 3),), layouts=Z),
    Case("tile_method_more", lambda m, a: a.tile(2, 1, 2), shapes=((2, 3),)),
    Case("repeat_interleave_int", lambda m, a: m.repeat_interleave(a, 3, dim=1), shapes=((2, 3),), layouts=Z,
         double_backward=True),
    Case("repeat_interleave_flat", lambda m, a: a.repeat_interleave(2), shapes=((2, 3),)),
    Case("repeat_interleave_tensor", lambda m, a: m.repeat_interleave(a, m.tensor([1, 0, 3, 2]), dim=1),
         shapes=((3, 4),), layouts=Z, double_backward=True),
    Case("repeat_interleave_tensor_dim0", lambda m, a: a.repeat_interleave(m.tensor([2, 1]), dim=0, output_size=3),
         shapes=((2, 3),)),
    Case("repeat_interleave_tensor_flat", lambda m, a: m.repeat_interleave(a, m.tensor([2])), shapes=((2, 3),)),
    Case("repeat_interleave_counts", lambda m: m.repeat_interleave(m.tensor([2, 0, 3, 1])), shapes=()),
    # ---- flip / roll / rot90
    Case("flip", lambda m, a: m.flip(a, (0, 2)), shapes=((2, 3, 4),), layouts=Z, double_backward=True),
    Case("flip_method", lambda m, a: a.flip(-1), shapes=((3, 4),)),
    Case("flip_int", lambda m, a: m.flip(a, [0, 1]), shapes=((3, 4),), dtypes=("int64", "bool")),
    Case("fliplr", lambda m, a: m.fliplr(a), shapes=((3, 4),)),
    Case("flipud", lambda m, a: a.flipud(), shapes=((3, 4),)),
    Case("roll_flat", lambda m, a: m.roll(a, 5), shapes=((3, 4),), layouts=Z, double_backward=True),
    Case("roll_dims", lambda m, a: a.roll((1, -2), (0, 1)), shapes=((3, 4),), layouts=Z),
    Case("roll_same_dim", lambda m, a: m.roll(a, (1, 2), (1, 1)), shapes=((3, 4),)),
    Case("rot90_k1", lambda m, a: m.rot90(a), shapes=((3, 4),)),
    Case("rot90_k2", lambda m, a: m.rot90(a, 2, [1, 2]), shapes=((2, 3, 4),)),
    Case("rot90_k3_neg", lambda m, a: a.rot90(-1, (0, 1)), shapes=((3, 4),), layouts=Z),
    Case("rot90_k4", lambda m, a: m.rot90(a, 4) * 2, shapes=((3, 4),)),
    # ---- grids, products
    Case("meshgrid_ij", lambda m, a, b: m.meshgrid(a, b, indexing="ij"), shapes=((3,), (4,))),
    Case("meshgrid_xy", lambda m, a, b, c: m.meshgrid([a, b, c], indexing="xy"), shapes=((3,), (4,), (2,))),
    Case("meshgrid_0d", lambda m, a, b: m.meshgrid(a, b, indexing="ij"), shapes=((), (4,))),
    Case("cartesian_prod", lambda m, a, b: m.cartesian_prod(a, b), shapes=((3,), (2,))),
    Case("cartesian_prod_one", lambda m, a: m.cartesian_prod(a) * 2, shapes=((3,),)),
    Case("combinations", lambda m, a: m.combinations(a), shapes=((4,),), double_backward=True),
    Case("combinations_r3_repl", lambda m, a: m.combinations(a, 3, with_replacement=True), shapes=((3,),)),
    Case("combinations_r0", lambda m, a: m.combinations(a, 0), shapes=((3,),), grad=False),
    Case("combinations_too_long", lambda m, a: m.combinations(a, 4), shapes=((3,),), grad=False),
    Case("tril_indices", lambda m: (m.tril_indices(3, 4), m.tril_indices(4, 3, 1), m.tril_indices(3, 3, -1)), shapes=()),
    Case("triu_indices", lambda m: (m.triu_indices(3, 4), m.triu_indices(4, 3, -1, dtype=m.int32),
                                    m.triu_indices(0, 3)), shapes=()),
    # ---- diagonals
    Case("diag_1d", lambda m, a: m.diag(a), shapes=((4,),), layouts=Z, double_backward=True),
    Case("diag_1d_offset", lambda m, a: m.diag(a, -2), shapes=((3,),)),
    Case("diag_2d", lambda m, a: m.diag(a, 1), shapes=((3, 4),), layouts=Z),
    Case("diag_2d_method", lambda m, a: a.diag(-1), shapes=((3, 4),)),
    Case("diag_embed", lambda m, a: m.diag_embed(a), shapes=((2, 3),), layouts=Z, double_backward=True),
    Case("diag_embed_dims", lambda m, a: m.diag_embed(a, 1, 0, 2), shapes=((2, 3),)),
    Case("diag_embed_dims_rev", lambda m, a: a.diag_embed(-1, 2, 0), shapes=((2, 3),)),
    Case("diagflat", lambda m, a: m.diagflat(a, 1), shapes=((2, 3),), layouts=Z),
    Case("diagflat_0d", lambda m, a: m.diagflat(a), shapes=((),)),
    Case("diag_int", lambda m, a: m.diag(a), shapes=((3,),), dtypes=("int64",)),
    # no zero-size layout: torch's block_diag backward skips empty blocks without moving past their rows
    # and columns, so its gradients for later blocks are misplaced (ember's forward matches; see
    # tests/test_shape.py for the zero-size forward check)
    Case("block_diag", lambda m, a, b, c: m.block_diag(a, b, c), shapes=((2, 3), (4,), ()), double_backward=True),
    Case("block_diag_promote", lambda m, a, b: m.block_diag(a.int(), b.double(), a), shapes=((2, 2), (1, 3))),
    # ---- atleast / broadcast
    Case("atleast_1d", lambda m, a, b: (m.atleast_1d(a), m.atleast_1d(a, b)), shapes=((), (2, 3))),
    Case("atleast_2d", lambda m, a, b, c: m.atleast_2d([a, b, c]), shapes=((), (3,), (2, 3))),
    Case("atleast_3d", lambda m, a, b, c, d: m.atleast_3d(a, b, c, d), shapes=((), (3,), (2, 3), (1, 2, 3, 1))),
    Case("broadcast_tensors", lambda m, a, b, c: m.broadcast_tensors(a, b, c), shapes=((3, 1), (4,), ())),
    Case("broadcast_tensors_zero", lambda m, a, b: m.broadcast_tensors(a, b), shapes=((3, 4), (1, 4)), layouts=Z),
    # ---- whole-tensor writes (autograd through write_result)
    Case("copy_", _copy_into, shapes=((3, 4), (4,)), double_backward=True),
    Case("copy_same_shape", _copy_into, shapes=((3, 4), (3, 4)), layouts=Z),
    Case("copy_view", _copy_view, shapes=((3, 4), (1, 4))),
    Case("copy_cast", _copy_cast, shapes=((3, 4), (3, 4))),
    Case("fill_scalar", _fill_scalar, shapes=((3, 4),)),
    Case("fill_tensor", _fill_tensor, shapes=((3, 4), (2,)), double_backward=True),
    Case("fill_function", lambda m, a: m.fill(a, 1.5) * a, shapes=((3, 4),)),
    Case("zero_", _zero, shapes=((3, 4), (3, 4)), layouts=Z),
    Case("inplace_random_deterministic", _inplace_random, shapes=((3, 4),)),
    Case("random_range_one", _random_int, shapes=((3, 4),)),
    # ---- samplers with deterministic inputs (gradients are zero, as in torch)
    Case("normal_std0", lambda m, a, b: m.normal(a, b * 0), shapes=((3, 4), (4,))),
    Case("normal_float_std", lambda m, a: m.normal(a, 0.0), shapes=((3, 4),), layouts=Z),
    Case("normal_float_mean", lambda m, a: m.normal(1.5, a * 0), shapes=((3, 4),)),
    Case("bernoulli_01", lambda m, a: m.bernoulli(a), make=_zero_one((3, 4))),
    Case("bernoulli_method_01", lambda m, a: a.bernoulli() * 2, make=_zero_one((2, 5))),
    Case("bernoulli_p", lambda m, a: (m.bernoulli(a, 0.0), m.bernoulli(a, p=1.0)), shapes=((3, 4),), grad=False),
    # the factories draw through the random_draw op; these statistics of a draw are deterministic
    Case("random_factories", lambda m, a: (a + (m.rand(3, 4) < 1).to(a.dtype), m.randn(4) * 0,
                                           m.randint(2, 3, (2,)), m.randperm(5).sort().values,
                                           m.nn.functional.dropout(a, 0.5).ne(0).sum() * 0),
         shapes=((3, 4),), grad=False),
    Case("poisson_rate0", lambda m, a: m.poisson(a * 0), shapes=((3, 4),), layouts=Z),
]
