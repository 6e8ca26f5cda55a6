from oracle import Case

CASES = [
    Case("add", lambda m, a, b: m.add(a, b), shapes=((3, 4), (3, 4))),
    Case("add_broadcast", lambda m, a, b: a + b, shapes=((3, 1, 4), (5, 1))),
    Case("add_alpha", lambda m, a, b: m.add(a, b, alpha=2.5), shapes=((3, 4), (4,))),
    Case("sub", lambda m, a, b: a - b, shapes=((3, 4), (3, 4))),
    Case("sub_alpha", lambda m, a, b: m.sub(a, b, alpha=-0.5), shapes=((3, 4), (4,))),
    Case("rsub_scalar", lambda m, a: 2.0 - a),
    Case("mul", lambda m, a, b: a * b, shapes=((2, 3, 4), (3, 4)), double_backward=True),
    Case("div", lambda m, a, b: a / b, shapes=((3, 4), (3, 4)), low=0.5, high=2.0, double_backward=True),
    Case("div_floor", lambda m, a, b: m.div(a, b, rounding_mode="floor"), shapes=((3, 4), (3, 4)), low=0.5, grad=False),
    Case("div_trunc", lambda m, a, b: m.div(a, b, rounding_mode="trunc"), shapes=((3, 4), (3, 4)), low=0.5, grad=False),
    Case("div_int", lambda m, a, b: a / b, shapes=((3, 4), (3, 4)), dtypes=("int64", "int32"), low=1, high=9),
    Case("floor_divide_int", lambda m, a, b: a // b, shapes=((3, 4), (3, 4)), dtypes=("int64",), low=1, high=9),
    Case("neg", lambda m, a: -a),
    Case("view", lambda m, a: a.contiguous().view(4, 3) * 2, layouts=("contig",)),
    Case("reshape", lambda m, a: a.reshape(2, 6) * 2),
    Case("permute", lambda m, a: a.permute(2, 0, 1) * 1.5, shapes=((2, 3, 4),)),
    Case("transpose", lambda m, a: a.transpose(0, 1).contiguous(), double_backward=True),
    Case("expand", lambda m, a: a.expand(5, 3, 4) * 1.0, shapes=((3, 1),)),
    Case("squeeze_unsqueeze", lambda m, a: a.unsqueeze(0).squeeze(2).unsqueeze(-1), shapes=((3, 1, 4),)),
    Case("flatten_unflatten", lambda m, a: a.flatten().unflatten(0, (4, 6)), shapes=((2, 3, 4),)),
    Case("getitem_slice", lambda m, a: a[1:, ::2], shapes=((4, 6),), double_backward=True),
    Case("narrow_select", lambda m, a: a.narrow(1, 1, 2).select(0, 1), shapes=((3, 4),)),
    Case("split", lambda m, a: a.split(2, dim=1), shapes=((3, 5),)),
    Case("split_with_sizes", lambda m, a: a.split([1, 0, 4], dim=-1), shapes=((3, 5),)),
    Case("chunk", lambda m, a: a.chunk(3, 0), shapes=((7, 2),)),
    Case("tensor_split", lambda m, a: a.tensor_split([1, 3], dim=1), shapes=((3, 5),)),
    Case("unbind", lambda m, a: a.unbind(1), shapes=((3, 4),)),
    Case("unfold", lambda m, a: a.unfold(1, 3, 2), shapes=((2, 7),), double_backward=True),
    Case("diagonal", lambda m, a: m.diagonal(a, 1), shapes=((4, 5),), double_backward=True),
    Case("as_strided", lambda m, a: m.as_strided(a, (3, 2), (2, 1), 1), shapes=((12,),), double_backward=True),
    Case("clone", lambda m, a: a.clone()),
    Case("contiguous", lambda m, a: a.t().contiguous()),
    Case("to_dtype", lambda m, a: a.to(m.float64) * 2),
    Case("to_int", lambda m, a: a.long(), grad=False),
    Case("sum", lambda m, a: a.sum(), double_backward=True),
    Case("sum_dim", lambda m, a: a.sum(dim=(0, 2), keepdim=True), shapes=((2, 3, 4),)),
    Case("sum_int", lambda m, a: a.sum(1), dtypes=("int32", "bool")),
    Case("mean", lambda m, a: a.mean(-1), shapes=((2, 3, 4),), double_backward=True),
    Case("setitem_view_autograd", lambda m, a, b: _setitem(m, a, b), shapes=((3, 4), (4,))),
    Case("inplace_on_view", lambda m, a: _inplace_view(m, a), shapes=((3, 4),), double_backward=True),
]


def _setitem(m, a, b):
    x = a * 1.0
    x[1] = b * 2
    return x


def _inplace_view(m, a):
    x = a * 1.0
    x[:, 1:3].mul_(a[:, :2])
    return x
