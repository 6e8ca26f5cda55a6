"""Bad-input rows for tensor basics: factories, random, elementwise ops, dims, reductions, shapes, indexing."""
import numpy as np

from bad_input_support import A, B, E, E2, I, N, R, S, V, inf, inplace, meta, nan


# issue 9 item 5, verbatim
R("ones('3')", lambda m: m.ones('3'))
R("normal(mean, std with nan)", lambda m: meta(m.normal(m.zeros(3), m.tensor([1., nan, 1.]))))
R("uniform_(0, inf)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.uniform_(0, inf))))
R("arange(0, nan)", lambda m: m.arange(0, nan))
R("index_add_ out of bounds", inplace(lambda m: m.zeros(3), lambda m, x: x.index_add_(0, m.tensor([5]), m.ones(1))))
R("to(complex64)", lambda m: m.ones(3).to(m.complex64))
R("linalg.inv with nan", lambda m: m.linalg.inv(m.tensor([[1., nan], [3., 4.]])))
R("linalg.inv with nan 4x4", lambda m: m.linalg.inv(m.eye(4) + m.tensor([[0., 0, 0, nan]] + [[0.] * 4] * 3)))
R("ones(0).split(1)", lambda m: m.ones(0).split(1))

# ---- factories: bad sizes ----
SIZES = {"str": ('3',), "None": (None,), "neg": (-1,), "neg2": (2, -3), "float": (2.5,), "float_in_tuple": ((2, 3.0),),
         "str_in_list": ([2, 'a'],), "zero": (0,), "empty_tuple": ((),), "bool": (True,), "list": ([2, 3],),
         "zero_in_tuple": ((0, 3),), "np_int": (np.int64(2),), "tensor0d": ("T",)}


def _size_args(m, args):
    return tuple(m.tensor(2) if a == "T" else a for a in args)


for fname in ("zeros", "ones", "empty", "rand", "randn"):
    for sname, args in SIZES.items():
        R(f"{fname}(size {sname})", lambda m, f=fname, a=args: meta(getattr(m, f)(*_size_args(m, a))) if f in
          ("empty", "rand", "randn") else getattr(m, f)(*_size_args(m, a)))
for sname in ("str", "None", "neg", "float", "float_in_tuple", "zero_in_tuple"):
    R(f"full(size {sname})", lambda m, a=SIZES[sname]: m.full(a[0] if len(a) == 1 else a, 1.5))
R("zeros(dtype='float32')", lambda m: m.zeros(3, dtype='float32'))
R("zeros(dtype=None)", lambda m: m.zeros(2, dtype=None))
R("full(nan)", lambda m: m.full((2,), nan))
R("full('a')", lambda m: m.full((2,), 'a'))
R("full(None)", lambda m: m.full((2,), None))
R("full(inf, int64)", lambda m: m.full((2,), inf, dtype=m.int64))
R("full(nan, int64)", lambda m: m.full((2,), nan, dtype=m.int64))
R("full(300, uint8)", lambda m: m.full((2,), 300, dtype=m.uint8))
R("full(1.7, int64)", lambda m: m.full((2,), 1.7, dtype=m.int64))
R("full(-1, bool)", lambda m: m.full((2,), -1, dtype=m.bool))
R("zeros_like('a')", lambda m: m.zeros_like('a'))
R("zeros_like(list)", lambda m: m.zeros_like([1., 2.]))
R("full_like(nan, int)", lambda m: m.full_like(I(m), nan))
R("full_like(1e20, int32)", lambda m: m.full_like(I(m).int(), 1e20))
R("ones_like(dtype str)", lambda m: m.ones_like(A(m), dtype='float'))

# arange / linspace / logspace / eye
for name, args in {"0,nan": (0, nan), "0,inf": (0, inf), "nan": (nan,), "inf": (inf,), "step0": (0, 5, 0),
                   "wrong_sign": (5, 0, 1), "wrong_sign_neg": (0, 5, -1), "str": ('a',), "None": (None,),
                   "float_step": (0, 2, 0.5), "float_end": (5.5,), "neg_end": (-3,), "down": (0, -3, -1),
                   "empty": (3, 3), "tensor_end": ("T",), "nan_step": (0, 5, nan), "-inf,0": (-inf, 0)}.items():
    R(f"arange({name})", lambda m, a=args: m.arange(*_size_args(m, a)))
R("arange(5, dtype=bool)", lambda m: m.arange(5, dtype=m.bool))
R("arange(0, 1, 0.1, dtype=int64)", lambda m: m.arange(0, 1, 0.1, dtype=m.int64))
for name, args in {"neg_steps": (0, 1, -1), "float_steps": (0, 1, 2.5), "zero_steps": (0, 1, 0), "nan_end": (0, nan, 3),
                   "inf_end": (0, inf, 3), "str_steps": (0, 1, '3'), "one_step": (0, 1, 1), "None_steps": (0, 1, None),
                   "str_start": ('a', 1, 3)}.items():
    R(f"linspace({name})", lambda m, a=args: m.linspace(*a))
R("linspace(int dtype)", lambda m: m.linspace(0, 1, 5, dtype=m.int64))
R("logspace(neg steps)", lambda m: m.logspace(0, 1, -1))
R("logspace(nan base)", lambda m: m.logspace(0, 1, 3, base=nan))
for name, args in {"neg": (-1,), "float": (2.5,), "str": ('3',), "zero": (0,), "neg_m": (2, -1), "rect": (2, 3),
                   "None": (None,)}.items():
    R(f"eye({name})", lambda m, a=args: m.eye(*a))

# tensor()
for name, data in {"str": 'abc', "None": None, "mixed": [1, 'a'], "ragged": [[1, 2], [3]], "empty": [],
                   "empty2": [[]], "nan": nan, "None_in_list": [1, None], "set": {1, 2}, "dict": {1: 2},
                   "tensors": "TT", "big_int": 2 ** 64, "bool_int_mix": [True, 2], "nested_empty": [[], []],
                   "inf_int": "inf_int"}.items():
    def _mk(m, d=data):
        if d == "TT":
            return m.tensor([m.tensor(1.), m.tensor(2.)])
        if d == "inf_int":
            return m.tensor([inf], dtype=m.int64)
        return m.tensor(d)
    R(f"tensor({name})", _mk)
R("tensor(dtype str)", lambda m: m.tensor([1, 2], dtype='float'))
R("tensor(300, uint8)", lambda m: m.tensor([300], dtype=m.uint8))
R("tensor(-1, uint8)", lambda m: m.tensor([-1], dtype=m.uint8))
R("tensor(1.5, int64)", lambda m: m.tensor([1.5], dtype=m.int64))
R("tensor(nan, int64)", lambda m: m.tensor([nan], dtype=m.int64))
R("as_tensor(str)", lambda m: m.as_tensor('a'))

# ---- random ----
R("randint(low>=high)", lambda m: m.randint(0, -1, (3,)))
R("randint(low==high)", lambda m: m.randint(3, 3, (3,)))
R("randint(float size)", lambda m: m.randint(5, (2.5,)))
R("randint(neg size)", lambda m: meta(m.randint(0, 5, (-1,))))
R("randint(int size)", lambda m: m.randint(0, 5, 3))
R("randint(float dtype)", lambda m: meta(m.randint(0, 5, (3,), dtype=m.float32)))
R("randint(str high)", lambda m: m.randint('5', (3,)))
R("randint(high out of uint8)", lambda m: m.randint(0, 300, (3,), dtype=m.uint8))
R("randint(bool dtype)", lambda m: meta(m.randint(0, 2, (3,), dtype=m.bool)))
for name, arg in {"neg": -1, "float": 2.5, "str": '3', "zero": 0, "None": None}.items():
    R(f"randperm({name})", lambda m, a=arg: meta(m.randperm(a)))
R("randperm(float dtype)", lambda m: meta(m.randperm(4, dtype=m.float32)))
R("randperm(300, uint8)", lambda m: meta(m.randperm(300, dtype=m.uint8)))
R("normal(std negative)", lambda m: meta(m.normal(0., -1., (3,))))
R("normal(std nan)", lambda m: meta(m.normal(0., nan, (3,))))
R("normal(std inf)", lambda m: meta(m.normal(0., inf, (3,))))
R("normal(mean nan)", lambda m: m.normal(nan, 1., (3,)))
R("normal(tensor std negative)", lambda m: meta(m.normal(m.zeros(3), m.tensor([1., -1., 1.]))))
R("normal(shape mismatch)", lambda m: meta(m.normal(m.zeros(3), m.ones(4))))
R("normal(no size)", lambda m: meta(m.normal(0., 1.)))
R("normal(tensor mean, float std negative)", lambda m: meta(m.normal(m.zeros(3), -1.)))
R("normal(int mean tensor)", lambda m: meta(m.normal(m.zeros(3, dtype=m.int64), 1.)))
R("normal(neg size)", lambda m: meta(m.normal(0., 1., (-1,))))
R("uniform_(from > to)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.uniform_(1, 0))))
R("uniform_(nan, 1)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.uniform_(nan, 1))))
R("uniform_(-inf, 0)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.uniform_(-inf, 0))))
R("uniform_(0, 1e39) float32", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.uniform_(0, 1e39))))
R("uniform_ on int", inplace(lambda m: m.zeros(3, dtype=m.int64), lambda m, x: meta(x.uniform_(0, 1))))
R("uniform_(equal bounds)", inplace(lambda m: m.zeros(3), lambda m, x: x.uniform_(2, 2)))
R("normal_(std negative)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.normal_(0, -1))))
R("normal_(std nan)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.normal_(0, nan))))
R("normal_ on int", inplace(lambda m: m.zeros(3, dtype=m.int64), lambda m, x: meta(x.normal_())))
R("exponential_(negative)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.exponential_(-1.))))
R("exponential_ on int", inplace(lambda m: m.zeros(3, dtype=m.int64), lambda m, x: meta(x.exponential_())))
R("random_(from > to)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.random_(5, 2))))
R("bernoulli_(p > 1)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.bernoulli_(1.5))))
R("bernoulli_(p < 0)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.bernoulli_(-0.5))))
R("bernoulli_(p nan)", inplace(lambda m: m.zeros(3), lambda m, x: meta(x.bernoulli_(nan))))
R("bernoulli(p tensor > 1)", lambda m: meta(m.bernoulli(m.tensor([0.5, 2.0]))))
R("bernoulli(p tensor nan)", lambda m: meta(m.bernoulli(m.tensor([0.5, nan]))))
R("bernoulli(int tensor)", lambda m: meta(m.bernoulli(m.tensor([0, 1]))))
R("bernoulli(p = 0 and 1)", lambda m: m.bernoulli(m.tensor([0., 1., 1.])))
R("multinomial(negative prob)", lambda m: meta(m.multinomial(m.tensor([0.5, -0.1, 0.6]), 1)))
R("multinomial(nan prob)", lambda m: meta(m.multinomial(m.tensor([0.5, nan]), 1)))
R("multinomial(inf prob)", lambda m: meta(m.multinomial(m.tensor([0.5, inf]), 1)))
R("multinomial(zero sum)", lambda m: meta(m.multinomial(m.zeros(3), 1)))
R("multinomial(too many w/o replacement)", lambda m: meta(m.multinomial(m.ones(3), 4)))
R("multinomial(zero samples)", lambda m: meta(m.multinomial(m.ones(3), 0)))
R("multinomial(negative samples)", lambda m: meta(m.multinomial(m.ones(3), -1)))
R("multinomial(3d)", lambda m: meta(m.multinomial(m.ones(2, 2, 2), 1)))
R("multinomial(int probs)", lambda m: meta(m.multinomial(m.ones(3, dtype=m.int64), 1)))
R("multinomial(empty)", lambda m: meta(m.multinomial(m.ones(0), 1)))
R("rand(int dtype)", lambda m: meta(m.rand(3, dtype=m.int64)))
R("randn(int dtype)", lambda m: meta(m.randn(3, dtype=m.int64)))
R("dropout(p > 1)", lambda m: meta(m.nn.functional.dropout(A(m), 1.5)))
R("dropout(p < 0)", lambda m: meta(m.nn.functional.dropout(A(m), -0.1)))
R("dropout(p = 1)", lambda m: m.nn.functional.dropout(A(m), 1.0))
R("dropout(int tensor)", lambda m: meta(m.nn.functional.dropout(I(m), 0.5)))
R("nn.Dropout(p > 1)", lambda m: m.nn.Dropout(1.5))

# ---- unary elementwise ops x odd inputs ----
UNARY = ("exp", "log", "sqrt", "abs", "neg", "sigmoid", "tanh", "relu", "floor", "round", "sign", "reciprocal",
         "bitwise_not", "logical_not", "isnan", "erf", "frac", "ceil", "sin", "rsqrt", "square", "log1p", "sgn",
         "signbit", "isinf")
UNARY_INPUTS = {"nan_inf": N, "empty": E, "int": I, "bool": B, "str": lambda m: 'a', "None": lambda m: None,
                "list": lambda m: [1., 2.]}
for op in UNARY:
    for iname, mk in UNARY_INPUTS.items():
        R(f"{op}({iname})", lambda m, op=op, mk=mk: getattr(m, op)(mk(m)))

# ---- binary elementwise ops x odd operands ----
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "fmod", "remainder", "atan2", "eq", "lt",
          "logical_and", "bitwise_and", "floor_divide", "hypot", "copysign", "true_divide", "ne", "fmax")
BIN_OPERANDS = {
    "shape_mismatch": lambda m: (A(m), m.ones(5)),
    "str": lambda m: (A(m), 'a'),
    "None": lambda m: (A(m), None),
    "list": lambda m: (A(m), [1., 2., 3., 4.]),
    "bool_bool": lambda m: (B(m), B(m)),
    "int_by_zero": lambda m: (I(m), m.zeros(3, 4, dtype=m.int64)),
    "nan_inf": lambda m: (N(m), m.tensor([nan, 1., inf, inf, 0., -inf])),
    "empty_vs_3": lambda m: (E(m), V(m)),
    "empty_vs_1": lambda m: (E(m), m.ones(1)),
    "float_int_scalar0": lambda m: (I(m), 0),
}
for op in BINARY:
    for oname, mk in BIN_OPERANDS.items():
        R(f"{op}({oname})", lambda m, op=op, mk=mk: getattr(m, op)(*mk(m)))
R("add(alpha float on int)", lambda m: m.add(I(m), I(m), alpha=1.5))
R("add(alpha on bool)", lambda m: m.add(B(m), B(m), alpha=2))
R("sub(alpha str)", lambda m: m.sub(A(m), A(m), alpha='a'))
R("div(rounding_mode bad)", lambda m: m.div(A(m), 2, rounding_mode='round'))
R("div(int by zero, floor)", lambda m: m.div(I(m), 0, rounding_mode='floor'))
R("div(int by zero, trunc)", lambda m: m.div(I(m), 0, rounding_mode='trunc'))
R("int // 0 operator", lambda m: I(m) // 0)
R("int % 0 operator", lambda m: I(m) % 0)
R("int ** -1", lambda m: I(m) ** -1)
R("int pow negative tensor", lambda m: m.pow(I(m), m.tensor(-2)))
R("0-dim int ** -1", lambda m: m.tensor(2) ** -1)
R("float + str operator", lambda m: A(m) + 'a')
R("bool - bool operator", lambda m: B(m) - B(m))
R("-bool operator", lambda m: -B(m))
R("~float", lambda m: ~A(m))
R("float & float", lambda m: A(m) & A(m))
R("float << 1", lambda m: A(m) << 1)
R("int << -1", lambda m: I(m) << -1)
R("add(out wrong dtype)", lambda m: m.add(A(m), A(m), out=m.zeros(3, 4, dtype=m.int64)))
R("add(out int from int)", lambda m: m.add(I(m), I(m), out=m.zeros(3, 4)))
R("add(out wrong shape)", lambda m: m.add(A(m), A(m), out=m.zeros(2)))
R("add_(promotes to float)", inplace(I, lambda m, x: x.add_(1.5)))
R("mul_(broadcast grows self)", inplace(lambda m: m.ones(4), lambda m, x: x.mul_(A(m))))
R("add_(shape mismatch)", inplace(A, lambda m, x: x.add_(m.ones(5))))
R("div_(int)", inplace(I, lambda m, x: x.div_(2)))
R("sub_(bool)", inplace(B, lambda m, x: x.sub_(B(m))))
R("pow_(int, negative)", inplace(I, lambda m, x: x.pow_(-1)))
R("floor_divide_(int by 0)", inplace(I, lambda m, x: x.floor_divide_(0)))
R("remainder_(int by 0)", inplace(I, lambda m, x: x.remainder_(0)))
R("clamp_(int, float bound)", inplace(I, lambda m, x: x.clamp_(0.5, 3.5)))
R("copy_(shape mismatch)", inplace(A, lambda m, x: x.copy_(m.ones(5))))
R("copy_(broadcast)", inplace(A, lambda m, x: x.copy_(m.ones(4))))
R("copy_(str)", inplace(A, lambda m, x: x.copy_('a')))
R("fill_(non-0d tensor)", inplace(A, lambda m, x: x.fill_(m.ones(2))))
R("fill_(nan) on int", inplace(I, lambda m, x: x.fill_(nan)))
R("fill_(str)", inplace(A, lambda m, x: x.fill_('a')))
R("zero_ on empty", inplace(E, lambda m, x: x.zero_()))
R("lerp(weight shape mismatch)", lambda m: m.lerp(A(m), A(m), m.ones(5)))
R("lerp(int)", lambda m: m.lerp(I(m), I(m), 0.5))
R("where(float cond)", lambda m: m.where(A(m), A(m), A(m)))
R("where(shape mismatch)", lambda m: m.where(B(m), A(m), m.ones(5)))
R("where(scalar operands)", lambda m: m.where(B(m), 1., 0))
R("where(None operand)", lambda m: m.where(B(m), A(m), None))
R("where(cond only, empty)", lambda m: m.where(m.zeros(0, dtype=m.bool)))
R("clamp(no bounds)", lambda m: m.clamp(A(m)))
R("clamp(min > max)", lambda m: m.clamp(A(m), 5, 2))
R("clamp(min nan)", lambda m: m.clamp(A(m), min=nan))
R("clamp(max nan)", lambda m: m.clamp(A(m), max=nan))
R("clamp(min tensor mismatch)", lambda m: m.clamp(A(m), min=m.ones(5)))
R("clamp(str)", lambda m: m.clamp(A(m), min='a'))
R("clamp(bool)", lambda m: m.clamp(B(m), 0, 1))
R("clamp(int, float bound)", lambda m: m.clamp(I(m), 0.5, 3.5))
R("nan_to_num(int)", lambda m: m.nan_to_num(I(m)))
R("nan_to_num(nan inf)", lambda m: m.nan_to_num(N(m)))
R("allclose(shape mismatch)", lambda m: m.allclose(A(m), m.ones(5)))
R("allclose(int vs float)", lambda m: m.allclose(A(m), I(m)))
R("allclose(nan)", lambda m: m.allclose(N(m), N(m)))
R("equal(shape mismatch)", lambda m: m.equal(A(m), m.ones(5)))
R("isclose(dtype mismatch)", lambda m: m.isclose(A(m), I(m)))
R("isclose(negative rtol)", lambda m: m.isclose(A(m), A(m), rtol=-1.))

# ---- dim arguments out of range / of the wrong type ----
DIM_OPS = {
    "sum": lambda m, x, d: x.sum(d), "mean": lambda m, x, d: x.mean(d), "prod": lambda m, x, d: x.prod(d),
    "max": lambda m, x, d: x.max(d), "min": lambda m, x, d: x.min(d), "argmax": lambda m, x, d: x.argmax(d),
    "argmin": lambda m, x, d: x.argmin(d), "std": lambda m, x, d: x.std(d), "var": lambda m, x, d: x.var(d),
    "cumsum": lambda m, x, d: x.cumsum(d), "cumprod": lambda m, x, d: x.cumprod(d),
    "softmax": lambda m, x, d: x.softmax(d), "log_softmax": lambda m, x, d: x.log_softmax(d),
    "logsumexp": lambda m, x, d: x.logsumexp(d), "all": lambda m, x, d: x.all(d), "any": lambda m, x, d: x.any(d),
    "sort": lambda m, x, d: x.sort(d), "argsort": lambda m, x, d: x.argsort(d), "topk": lambda m, x, d: x.topk(1, d),
    "kthvalue": lambda m, x, d: x.kthvalue(1, d), "median": lambda m, x, d: x.median(d),
    "mode": lambda m, x, d: x.mode(d), "squeeze": lambda m, x, d: x.squeeze(d),
    "unsqueeze": lambda m, x, d: x.unsqueeze(d), "flatten": lambda m, x, d: x.flatten(d),
    "transpose": lambda m, x, d: x.transpose(d, 0), "select": lambda m, x, d: x.select(d, 0),
    "narrow": lambda m, x, d: x.narrow(d, 0, 1), "split": lambda m, x, d: x.split(1, d),
    "chunk": lambda m, x, d: x.chunk(2, d), "unbind": lambda m, x, d: x.unbind(d),
    "flip": lambda m, x, d: x.flip([d]), "roll": lambda m, x, d: x.roll(1, d),
    "movedim": lambda m, x, d: x.movedim(d, 0), "cat": lambda m, x, d: m.cat([x, x], d),
    "stack": lambda m, x, d: m.stack([x, x], d), "gather": lambda m, x, d: x.gather(d, m.zeros(3, 4, dtype=m.int64)),
    "index_select": lambda m, x, d: x.index_select(d, m.tensor([0])), "norm": lambda m, x, d: x.norm(dim=d),
    "diff": lambda m, x, d: x.diff(dim=d), "count_nonzero": lambda m, x, d: x.count_nonzero(d),
    "nansum": lambda m, x, d: x.nansum(d), "amax": lambda m, x, d: x.amax(d), "amin": lambda m, x, d: x.amin(d),
    "cummax": lambda m, x, d: x.cummax(d), "logcumsumexp": lambda m, x, d: x.logcumsumexp(d),
    "var_mean": lambda m, x, d: m.var_mean(x, d), "aminmax": lambda m, x, d: x.aminmax(dim=d),
    "diagonal": lambda m, x, d: x.diagonal(0, d, 0), "unflatten": lambda m, x, d: x.unflatten(d, (1, -1)),
    "F.softmax": lambda m, x, d: m.nn.functional.softmax(x, d), "F.normalize": lambda m, x, d: m.nn.functional.normalize(x, dim=d),
    "repeat_interleave": lambda m, x, d: x.repeat_interleave(2, d), "tensor_split": lambda m, x, d: x.tensor_split(2, d),
    "nanmean": lambda m, x, d: x.nanmean(d), "cumsum_int": lambda m, x, d: m.cumsum(x.long(), d),
    "F.one_hot_argmax": lambda m, x, d: m.nn.functional.one_hot(x.argmax(d).long()),
}
for op, f in DIM_OPS.items():
    for dname, d in (("2", 2), ("-3", -3), ("5", 5), ("1.5", 1.5), ("'1'", '1')):
        R(f"{op}(dim={dname})", lambda m, f=f, d=d: f(m, A(m), d))
R("sum(dim=(0, 0))", lambda m: A(m).sum((0, 0)))
R("sum(dim=[])", lambda m: A(m).sum([]))
R("sum(dim=(0, 5))", lambda m: A(m).sum((0, 5)))
R("mean(dim=None, keepdim)", lambda m: A(m).mean(None, True))
R("sum(dtype=int) of float", lambda m: A(m).sum(dtype=m.int64))
R("sum(dtype str)", lambda m: A(m).sum(dtype='float'))
R("permute(wrong count)", lambda m: A(m).permute(0))
R("permute(repeated)", lambda m: A(m).permute(0, 0))
R("permute(out of range)", lambda m: A(m).permute(0, 5))
R("permute(float)", lambda m: A(m).permute(0, 1.0))
R("movedim(repeated)", lambda m: A(m).movedim((0, 1), (1, 1)))
R("flip(repeated dims)", lambda m: A(m).flip([0, 0]))
R("roll(shift/dims mismatch)", lambda m: A(m).roll((1, 2), (0,)))
R("roll(empty)", lambda m: E(m).roll(1))
R("flatten(start after end)", lambda m: A(m).flatten(1, 0))
R("transpose on 0-dim", lambda m: S(m).transpose(0, 0))
R("squeeze(dim tuple)", lambda m: A(m).reshape(3, 1, 4).squeeze((1, 2)))
R("0-dim sum(dim=0)", lambda m: S(m).sum(0))
R("0-dim sum(dim=1)", lambda m: S(m).sum(1))
R("0-dim softmax(dim=0)", lambda m: S(m).softmax(0))
R("0-dim unsqueeze(dim=2)", lambda m: S(m).unsqueeze(2))
R("0-dim cumsum(dim=-1)", lambda m: S(m).cumsum(-1))

# ---- reductions over empty tensors ----
EMPTY_RED = {
    "sum": lambda x, *d: x.sum(*d), "mean": lambda x, *d: x.mean(*d), "prod": lambda x, *d: x.prod(*d),
    "max": lambda x, *d: x.max(*d), "min": lambda x, *d: x.min(*d), "argmax": lambda x, *d: x.argmax(*d),
    "argmin": lambda x, *d: x.argmin(*d), "std": lambda x, *d: x.std(*d), "var": lambda x, *d: x.var(*d),
    "logsumexp": lambda x, *d: x.logsumexp(*(d or (0,))), "amax": lambda x, *d: x.amax(*d),
    "median": lambda x, *d: x.median(*d), "mode": lambda x, *d: x.mode(*(d or (-1,))),
    "all": lambda x, *d: x.all(*d), "any": lambda x, *d: x.any(*d), "softmax": lambda x, *d: x.softmax(*(d or (0,))),
    "cumsum": lambda x, *d: x.cumsum(*(d or (0,))), "sort": lambda x, *d: x.sort(*d),
    "topk": lambda x, *d: x.topk(1, *d), "kthvalue": lambda x, *d: x.kthvalue(1, *d), "norm": lambda x, *d: x.norm(dim=d or None),
    "nansum": lambda x, *d: x.nansum(*d), "aminmax": lambda x, *d: x.aminmax(dim=d[0] if d else None),
    "count_nonzero": lambda x, *d: x.count_nonzero(*d), "var_mean": lambda x, *d: ember_or_torch_var_mean(x, *d),
    "unique": lambda x, *d: x.unique(dim=d[0] if d else None), "cummax": lambda x, *d: x.cummax(*(d or (0,))),
}


def ember_or_torch_var_mean(x, *d):
    return (x.var(*d), x.mean(*d))


for op, f in EMPTY_RED.items():
    R(f"{op}(empty)", lambda m, f=f: f(E(m)))
    R(f"{op}(empty (0,4), dim=0)", lambda m, f=f: f(E2(m), 0))
    R(f"{op}(empty (0,4), dim=1)", lambda m, f=f: f(E2(m), 1))

# float-only reductions on ints and bools
for op in ("mean", "std", "var", "softmax", "log_softmax", "logsumexp", "norm", "nanmean", "median", "cumsum", "prod",
           "sum", "amax", "argmax"):
    for dt in ("int64", "bool"):
        def _f(m, op=op, dt=dt):
            x = A(m).to(getattr(m, dt))
            return getattr(x, op)(1) if op in ("softmax", "log_softmax", "logsumexp", "cumsum") else getattr(x, op)()
        R(f"{op}({dt})", _f)

# ---- shapes: bad sizes ----
SHAPE_ROWS = {
    "reshape(-2)": lambda m: A(m).reshape(-2), "reshape(5)": lambda m: A(m).reshape(5),
    "reshape(2.5)": lambda m: A(m).reshape(2.5), "reshape('a')": lambda m: A(m).reshape('a'),
    "reshape(-1, -1)": lambda m: A(m).reshape(-1, -1), "reshape(0, -1)": lambda m: A(m).reshape(0, -1),
    "reshape(None)": lambda m: A(m).reshape(None), "empty reshape(0, -1)": lambda m: E(m).reshape(0, -1),
    "empty reshape(-1, 0)": lambda m: E(m).reshape(-1, 0), "reshape((3, 4.0))": lambda m: A(m).reshape((3, 4.0)),
    "view(5)": lambda m: A(m).view(5), "view(2.5)": lambda m: A(m).view(2.5), "view(-1, -1)": lambda m: A(m).view(-1, -1),
    "view noncontig": lambda m: A(m).t().view(12), "view(int32 dtype)": lambda m: A(m).view(m.int32),
    "view(float64 dtype) bad size": lambda m: V(m).view(m.float64),
    "expand mismatch": lambda m: A(m).expand(2, 4), "expand(-2, 4)": lambda m: A(m).expand(-2, 4),
    "expand(float)": lambda m: A(m).expand(3, 4.0), "expand fewer dims": lambda m: A(m).expand(4),
    "expand new -1": lambda m: A(m).expand(-1, 3, 4), "expand_as mismatch": lambda m: A(m).expand_as(V(m)),
    "repeat fewer dims": lambda m: A(m).repeat(2), "repeat(-1, 1)": lambda m: A(m).repeat(-1, 1),
    "repeat(1.5, 1)": lambda m: A(m).repeat(1.5, 1), "repeat(0, 1)": lambda m: A(m).repeat(0, 1),
    "tile(-1)": lambda m: A(m).tile(-1), "tile(0)": lambda m: A(m).tile(0),
    "split(0)": lambda m: A(m).split(0), "split(-1)": lambda m: A(m).split(-1),
    "split(sizes mismatch)": lambda m: A(m).split([1, 1]), "split(1.5)": lambda m: A(m).split(1.5),
    "split(sizes negative)": lambda m: A(m).split([4, -1]), "split(10)": lambda m: A(m).split(10),
    "chunk(0)": lambda m: A(m).chunk(0), "chunk(-1)": lambda m: A(m).chunk(-1), "chunk(1.5)": lambda m: A(m).chunk(1.5),
    "ones(0).chunk(2)": lambda m: m.ones(0).chunk(2), "ones(0).unbind()": lambda m: m.ones(0).unbind(),
    "ones(0, 4).split(2, 1)": lambda m: E2(m).split(2, 1), "ones(0).split([0])": lambda m: E(m).split([0]),
    "ones(0).tensor_split(2)": lambda m: E(m).tensor_split(2), "ones(0).chunk(1)": lambda m: E(m).chunk(1),
    "tensor_split(0)": lambda m: A(m).tensor_split(0),
    "narrow(start 5)": lambda m: A(m).narrow(0, 5, 1), "narrow(length 5)": lambda m: A(m).narrow(0, 0, 5),
    "narrow(start -5)": lambda m: A(m).narrow(0, -5, 1), "narrow(length -1)": lambda m: A(m).narrow(0, 0, -1),
    "narrow(start 0.5)": lambda m: A(m).narrow(0, 0.5, 1), "narrow(start 3, length 0)": lambda m: A(m).narrow(0, 3, 0),
    "select(index 5)": lambda m: A(m).select(0, 5), "select(index -5)": lambda m: A(m).select(0, -5),
    "select(index 1.5)": lambda m: A(m).select(0, 1.5), "select on 0-dim": lambda m: S(m).select(0, 0),
    "unflatten mismatch": lambda m: A(m).unflatten(1, (3, 3)), "unflatten(2 x -1)": lambda m: A(m).unflatten(1, (-1, -1)),
    "view_as mismatch": lambda m: A(m).view_as(V(m)), "t() on 3-D": lambda m: A(m).reshape(1, 3, 4).t(),
    "mT on 1-D": lambda m: V(m).mT, "diag on 3-D": lambda m: A(m).reshape(1, 3, 4).diag(),
    "tril on 1-D": lambda m: V(m).tril(), "triu on 1-D": lambda m: V(m).triu(), "tril(float k)": lambda m: A(m).tril(0.5),
    "diagonal(same dims)": lambda m: A(m).diagonal(0, 0, 0), "diag_embed on 0-dim": lambda m: S(m).diag_embed(),
    "cat([])": lambda m: m.cat([]), "cat(tensor)": lambda m: m.cat(A(m)), "cat with str": lambda m: m.cat([A(m), 'a']),
    "cat dims mismatch": lambda m: m.cat([A(m), V(m)]), "cat shapes mismatch": lambda m: m.cat([A(m), m.ones(3, 5)]),
    "cat 0-dim": lambda m: m.cat([S(m), S(m)]), "cat legacy empty 1-D": lambda m: m.cat([E(m), A(m)]),
    "cat int with float": lambda m: m.cat([I(m), A(m)]), "cat bool with int": lambda m: m.cat([B(m), I(m)]),
    "cat (0,4) with (3,4)": lambda m: m.cat([E2(m), A(m)]), "cat None": lambda m: m.cat(None),
    "cat out wrong dtype": lambda m: m.cat([A(m), A(m)], out=m.zeros(6, 4, dtype=m.int64)),
    "stack([])": lambda m: m.stack([]), "stack mismatch": lambda m: m.stack([A(m), V(m)]),
    "stack(tensor)": lambda m: m.stack(A(m)), "stack 0-dim": lambda m: m.stack([S(m), S(m)]),
    "stack dtype mix": lambda m: m.stack([I(m), A(m)]), "hstack([])": lambda m: m.hstack([]),
    "vstack mismatch": lambda m: m.vstack([A(m), m.ones(5)]),
    "broadcast_to mismatch": lambda m: m.broadcast_to(A(m), (3, 5)), "broadcast_to fewer dims": lambda m: m.broadcast_to(A(m), (4,)),
    "broadcast_tensors mismatch": lambda m: m.broadcast_tensors(A(m), m.ones(5)),
    "broadcast_shapes mismatch": lambda m: m.broadcast_shapes((3, 4), (5,)),
    "broadcast_shapes negative": lambda m: m.broadcast_shapes((3, -1), (4,)),
    "meshgrid 2-D": lambda m: m.meshgrid(A(m), V(m), indexing='ij'), "meshgrid bad indexing": lambda m: m.meshgrid(V(m), V(m), indexing='zz'),
    "atleast_2d(str)": lambda m: m.atleast_2d('a'), "squeeze 0-dim": lambda m: S(m).squeeze(),
    "rot90(dims repeated)": lambda m: A(m).rot90(1, (0, 0)), "rot90(1-D)": lambda m: V(m).rot90(),
    "kron(int, float)": lambda m: m.kron(I(m), A(m)), "contiguous on empty": lambda m: E2(m).t().contiguous(),
    "item() multi": lambda m: A(m).item(), "item() empty": lambda m: E(m).item(), "float() multi": lambda m: float(A(m)),
    "int() empty": lambda m: int(E(m)), "bool() multi": lambda m: bool(V(m)), "bool() empty": lambda m: bool(E(m)),
    "int() nan": lambda m: int(m.tensor(nan)), "int() inf": lambda m: int(m.tensor(inf)),
    "len() 0-dim": lambda m: len(S(m)), "iter 0-dim": lambda m: list(S(m)), "index() float": lambda m: [1, 2][m.tensor(1.)],
    "index() int": lambda m: [1, 2, 3][m.tensor(1)], "range(tensor)": lambda m: list(range(m.tensor(3))),
    "tolist empty": lambda m: E2(m).tolist(),
}
for name, f in SHAPE_ROWS.items():
    R(name, f)

# ---- indexing ----
IDX_ROWS = {
    "x[5]": lambda m: A(m)[5], "x[-5]": lambda m: A(m)[-5], "x[:, 5]": lambda m: A(m)[:, 5],
    "x[0, 0, 0]": lambda m: A(m)[0, 0, 0], "x[tensor([5])]": lambda m: A(m)[m.tensor([5])],
    "x[tensor([-5])]": lambda m: A(m)[m.tensor([-5])], "x[tensor([1.5])]": lambda m: A(m)[m.tensor([1.5])],
    "x['a']": lambda m: A(m)['a'], "x[1.5]": lambda m: A(m)[1.5], "x[None, ..., None]": lambda m: A(m)[None, ..., None],
    "x[..., ...]": lambda m: A(m)[..., ...], "x[mask wrong size]": lambda m: A(m)[m.tensor([True, False])],
    "x[[0, 5]]": lambda m: A(m)[[0, 5]], "x[::0]": lambda m: A(m)[::0], "x[::-1]": lambda m: A(m)[::-1],
    "x[10:20]": lambda m: A(m)[10:20], "x[-10:2]": lambda m: A(m)[-10:2], "x[2:1]": lambda m: A(m)[2:1],
    "x[[]]": lambda m: A(m)[[]], "x[empty long]": lambda m: A(m)[m.tensor([], dtype=m.int64)],
    "x[empty float]": lambda m: A(m)[m.tensor([])], "x[tensor(1)]": lambda m: A(m)[m.tensor(1)],
    "x[tensor(True)]": lambda m: A(m)[m.tensor(True)], "x[bool mask 2d mismatch]": lambda m: A(m)[m.ones(2, 2, dtype=m.bool)],
    "x[idx, idx mismatch]": lambda m: A(m)[m.tensor([0, 1]), m.tensor([0, 1, 2])], "x[None]": lambda m: A(m)[None],
    "x[[0, 'a']]": lambda m: A(m)[[0, 'a']], "x[int32 idx]": lambda m: A(m)[m.tensor([1, 2], dtype=m.int32)],
    "x[uint8 idx]": lambda m: A(m)[m.tensor([1, 0, 1], dtype=m.uint8)], "x[int8 idx]": lambda m: A(m)[m.tensor([1, 2], dtype=m.int8)],
    "0-dim[0]": lambda m: S(m)[0], "0-dim[...]": lambda m: S(m)[...], "0-dim[None]": lambda m: S(m)[None],
    "empty[0]": lambda m: E(m)[0], "x[(0, 1), 2]": lambda m: A(m)[(0, 1), 2],
}
for name, f in IDX_ROWS.items():
    R(name, f)
SETITEM = {
    "x[5] = 1": lambda m, x: x.__setitem__(5, 1.), "x[0] = ones(5)": lambda m, x: x.__setitem__(0, m.ones(5)),
    "x[0] = 'a'": lambda m, x: x.__setitem__(0, 'a'), "x[mask] = ones(3)": lambda m, x: x.__setitem__(x > 5, m.ones(3)),
    "x[tensor([0, 5])] = 1": lambda m, x: x.__setitem__(m.tensor([0, 5]), 1.), "x[0] = None": lambda m, x: x.__setitem__(0, None),
    "x[0] = nan": lambda m, x: x.__setitem__(0, nan), "x[:, 5] = 1": lambda m, x: x.__setitem__((slice(None), 5), 1.),
    "x[0, 0, 0] = 1": lambda m, x: x.__setitem__((0, 0, 0), 1.), "x[0] = [1, 2, 3, 4]": lambda m, x: x.__setitem__(0, [1, 2, 3, 4]),
    "x[0] = ones(2, 4)": lambda m, x: x.__setitem__(0, m.ones(2, 4)), "x[0] = ones(1, 4)": lambda m, x: x.__setitem__(0, m.ones(1, 4)),
}
for name, f in SETITEM.items():
    R(f"float {name}", inplace(A, lambda m, x, f=f: (f(m, x), x)[1]))
R("int x[0] = nan", inplace(I, lambda m, x: (x.__setitem__(0, nan), x)[1]))
R("int x[0] = 1.7", inplace(I, lambda m, x: (x.__setitem__(0, 1.7), x)[1]))
R("int x[0] = float tensor", inplace(I, lambda m, x: (x.__setitem__(0, m.ones(4) * 1.5), x)[1]))
R("uint8 x[0] = 300", inplace(lambda m: m.zeros(3, dtype=m.uint8), lambda m, x: (x.__setitem__(0, 300), x)[1]))

INDEX_OPS = {
    "gather(oob)": lambda m: A(m).gather(1, m.tensor([[0, 4]] * 3)),
    "gather(negative)": lambda m: A(m).gather(1, m.tensor([[0, -1]] * 3)),
    "gather(float index)": lambda m: A(m).gather(1, m.tensor([[0., 1.]] * 3)),
    "gather(int32 index)": lambda m: A(m).gather(1, m.tensor([[0, 1]] * 3, dtype=m.int32)),
    "gather(index ndim)": lambda m: A(m).gather(1, m.tensor([0, 1])),
    "gather(index larger)": lambda m: A(m).gather(1, m.zeros(4, 2, dtype=m.int64)),
    "gather(index list)": lambda m: A(m).gather(1, [[0]]),
    "gather(empty index)": lambda m: A(m).gather(1, m.zeros(3, 0, dtype=m.int64)),
    "take(oob)": lambda m: A(m).take(m.tensor([12])), "take(negative)": lambda m: A(m).take(m.tensor([-1])),
    "take(-13)": lambda m: A(m).take(m.tensor([-13])), "take(float)": lambda m: A(m).take(m.tensor([1.])),
    "take_along_dim(oob)": lambda m: m.take_along_dim(A(m), m.tensor([[5]]), 1),
    "index_select(oob)": lambda m: A(m).index_select(0, m.tensor([3])),
    "index_select(negative)": lambda m: A(m).index_select(0, m.tensor([-1])),
    "index_select(float)": lambda m: A(m).index_select(0, m.tensor([0.])),
    "index_select(2-D index)": lambda m: A(m).index_select(0, m.tensor([[0]])),
    "index_select(int32)": lambda m: A(m).index_select(0, m.tensor([2], dtype=m.int32)),
    "index_select(empty)": lambda m: A(m).index_select(0, m.tensor([], dtype=m.int64)),
    "masked_select(mismatch)": lambda m: A(m).masked_select(m.ones(5, dtype=m.bool)),
    "masked_select(float mask)": lambda m: A(m).masked_select(A(m)),
    "masked_fill(float mask)": lambda m: A(m).masked_fill(A(m), 0.),
    "masked_fill(mask mismatch)": lambda m: A(m).masked_fill(m.ones(5, dtype=m.bool), 0.),
    "masked_fill(value 1-D)": lambda m: A(m).masked_fill(B(m), m.ones(2)),
    "masked_fill(nan into int)": lambda m: I(m).masked_fill(B(m), nan),
    "masked_fill(str)": lambda m: A(m).masked_fill(B(m), 'a'),
    "masked_fill(uint8 mask)": lambda m: A(m).masked_fill(B(m).to(m.uint8), 0.),
    "nonzero(0-dim)": lambda m: S(m).nonzero(), "nonzero(empty)": lambda m: E2(m).nonzero(),
    "argwhere(nan)": lambda m: m.argwhere(N(m)),
    "embedding(oob)": lambda m: m.nn.functional.embedding(m.tensor([5]), A(m)),
    "embedding(negative)": lambda m: m.nn.functional.embedding(m.tensor([-1]), A(m)),
    "embedding(float idx)": lambda m: m.nn.functional.embedding(m.tensor([1.]), A(m)),
    "embedding(1-D weight)": lambda m: m.nn.functional.embedding(m.tensor([0]), V(m)),
    "one_hot(negative)": lambda m: m.nn.functional.one_hot(m.tensor([-1, 0])),
    "one_hot(too few classes)": lambda m: m.nn.functional.one_hot(m.tensor([3]), 2),
    "one_hot(float)": lambda m: m.nn.functional.one_hot(m.tensor([1.])),
    "one_hot(empty, no classes)": lambda m: m.nn.functional.one_hot(m.tensor([], dtype=m.int64)),
    "one_hot(empty, 3 classes)": lambda m: m.nn.functional.one_hot(m.tensor([], dtype=m.int64), 3),
    "one_hot(num_classes float)": lambda m: m.nn.functional.one_hot(m.tensor([1]), 2.5),
    "bincount(negative)": lambda m: m.bincount(m.tensor([1, -1])), "bincount(2-D)": lambda m: m.bincount(I(m)),
    "bincount(float)": lambda m: m.bincount(V(m)), "bincount(weights mismatch)": lambda m: m.bincount(m.tensor([1, 2]), m.ones(3)),
    "bincount(empty)": lambda m: m.bincount(m.tensor([], dtype=m.int64)),
    "bincount(negative minlength)": lambda m: m.bincount(m.tensor([1]), minlength=-1),
    "searchsorted(dims mismatch)": lambda m: m.searchsorted(A(m), m.ones(2, 2)),
    "searchsorted(nan)": lambda m: m.searchsorted(m.tensor([1., 2., nan]), m.tensor([nan, 1.5])),
    "bucketize(2-D boundaries)": lambda m: m.bucketize(V(m), A(m)),
    "unique(dim oob)": lambda m: A(m).unique(dim=5), "histc(min > max)": lambda m: m.histc(V(m), 5, 3, 1),
    "histc(negative bins)": lambda m: m.histc(V(m), -1), "histc(int)": lambda m: m.histc(m.tensor([1, 2]), 3),
    "histc(nan)": lambda m: m.histc(N(m), 4, 0, 3), "histc(empty)": lambda m: m.histc(E(m), 3),
    "quantile(q > 1)": lambda m: m.quantile(V(m), 1.5), "quantile(q nan)": lambda m: m.quantile(V(m), nan),
    "quantile(int)": lambda m: m.quantile(m.tensor([1, 2]), 0.5), "quantile(empty)": lambda m: m.quantile(E(m), 0.5),
    "quantile(bad interpolation)": lambda m: m.quantile(V(m), 0.5, interpolation='x'),
    "quantile(q 2-D)": lambda m: m.quantile(V(m), m.ones(2, 2) * 0.5),
    "nanmedian(all nan)": lambda m: m.nanmedian(m.tensor([nan, nan])), "median(nan)": lambda m: m.median(N(m)),
    "max(nan)": lambda m: N(m).max(), "argmax(nan)": lambda m: N(m).argmax(), "sort(nan)": lambda m: N(m).sort(),
    "topk(nan)": lambda m: N(m).topk(2), "topk(k too big)": lambda m: V(m).topk(4), "topk(k negative)": lambda m: V(m).topk(-1),
    "topk(k float)": lambda m: V(m).topk(1.5), "topk(k=0)": lambda m: V(m).topk(0),
    "kthvalue(k=0)": lambda m: V(m).kthvalue(0), "kthvalue(k too big)": lambda m: V(m).kthvalue(4),
    "cummax(nan)": lambda m: N(m).cummax(0), "unique(nan)": lambda m: m.tensor([nan, 1., nan]).unique(),
    "diff(n negative)": lambda m: V(m).diff(-1), "diff(0-dim)": lambda m: S(m).diff(),
    "repeat_interleave(negative)": lambda m: V(m).repeat_interleave(m.tensor([1, -1, 1])),
    "repeat_interleave(size mismatch)": lambda m: V(m).repeat_interleave(m.tensor([1, 2])),
    "repeat_interleave(float repeats)": lambda m: V(m).repeat_interleave(m.tensor([1., 2., 1.])),
    "repeat_interleave(-1)": lambda m: V(m).repeat_interleave(-1),
    "isin(empty)": lambda m: m.isin(V(m), E(m)), "isin(nan)": lambda m: m.isin(N(m), N(m)),
    "cdist(dim mismatch)": lambda m: m.cdist(A(m), m.ones(2, 3)), "cdist(1-D)": lambda m: m.cdist(V(m), V(m)),
    "cdist(p negative)": lambda m: m.cdist(A(m), A(m), p=-1.), "trace(1-D)": lambda m: V(m).trace(),
    "trace(3-D)": lambda m: A(m).reshape(1, 3, 4).trace(), "cross(size 2)": lambda m: m.linalg.cross(m.ones(2), m.ones(2)),
    "cross(mismatch)": lambda m: m.linalg.cross(m.ones(3), m.ones(4, 3)[:, :2]),
    "einsum(bad string)": lambda m: m.einsum('ij,jk->', A(m)), "einsum(size mismatch)": lambda m: m.einsum('ij,ij->i', A(m), m.ones(3, 5)),
    "einsum(bad char)": lambda m: m.einsum('i#->i', A(m)), "einsum(repeated out)": lambda m: m.einsum('ij->ii', A(m)),
    "tensordot(mismatch)": lambda m: m.tensordot(A(m), A(m), dims=([1], [1])) if False else m.tensordot(A(m), A(m), dims=([1], [0])),
    "tensordot(negative dims)": lambda m: m.tensordot(A(m), A(m), dims=-1),
}
for name, f in INDEX_OPS.items():
    R(name, f)

INPLACE_INDEX = {
    "index_add_(negative)": (lambda m: m.zeros(3), lambda m, x: x.index_add_(0, m.tensor([-1]), m.ones(1))),
    "index_add_(float index)": (lambda m: m.zeros(3), lambda m, x: x.index_add_(0, m.tensor([1.]), m.ones(1))),
    "index_add_(source mismatch)": (lambda m: m.zeros(3), lambda m, x: x.index_add_(0, m.tensor([0, 1]), m.ones(3))),
    "index_add_(source dtype)": (lambda m: m.zeros(3), lambda m, x: x.index_add_(0, m.tensor([0]), m.ones(1, dtype=m.int64))),
    "index_add_(dim 5)": (lambda m: m.zeros(3), lambda m, x: x.index_add_(5, m.tensor([0]), m.ones(1))),
    "index_add_(second index oob)": (lambda m: m.zeros(3), lambda m, x: x.index_add_(0, m.tensor([0, 3]), m.ones(2))),
    "index_add_(2-D, oob)": (A, lambda m, x: x.index_add_(1, m.tensor([0, 4]), m.ones(3, 2))),
    "index_add_(alpha)": (lambda m: m.zeros(3), lambda m, x: x.index_add_(0, m.tensor([0, 0]), m.ones(2), alpha=2.)),
    "index_copy_(oob)": (lambda m: m.zeros(3), lambda m, x: x.index_copy_(0, m.tensor([3]), m.ones(1))),
    "index_copy_(source mismatch)": (lambda m: m.zeros(3), lambda m, x: x.index_copy_(0, m.tensor([0]), m.ones(2))),
    "index_fill_(oob)": (lambda m: m.zeros(3), lambda m, x: x.index_fill_(0, m.tensor([3]), 1.)),
    "index_fill_(negative)": (lambda m: m.zeros(3), lambda m, x: x.index_fill_(0, m.tensor([-1]), 1.)),
    "index_fill_(float index)": (lambda m: m.zeros(3), lambda m, x: x.index_fill_(0, m.tensor([1.]), 1.)),
    "index_fill_(value 1-D)": (lambda m: m.zeros(3), lambda m, x: x.index_fill_(0, m.tensor([1]), m.ones(2))),
    "index_put_(oob)": (lambda m: m.zeros(3), lambda m, x: x.index_put_((m.tensor([3]),), m.ones(1))),
    "index_put_(values mismatch)": (lambda m: m.zeros(3), lambda m, x: x.index_put_((m.tensor([0, 1]),), m.ones(3))),
    "index_put_(float index)": (lambda m: m.zeros(3), lambda m, x: x.index_put_((m.tensor([0.]),), m.ones(1))),
    "index_put_(accumulate oob)": (lambda m: m.zeros(3), lambda m, x: x.index_put_((m.tensor([4]),), m.ones(1), accumulate=True)),
    "scatter_(oob)": (A, lambda m, x: x.scatter_(1, m.tensor([[4]]), 1.)),
    "scatter_(negative)": (A, lambda m, x: x.scatter_(1, m.tensor([[-1]]), 1.)),
    "scatter_(float index)": (A, lambda m, x: x.scatter_(1, m.tensor([[1.]]), 1.)),
    "scatter_(src smaller)": (A, lambda m, x: x.scatter_(1, m.zeros(3, 4, dtype=m.int64), m.ones(2, 2))),
    "scatter_(src dtype)": (A, lambda m, x: x.scatter_(1, m.zeros(1, 1, dtype=m.int64), m.ones(1, 1, dtype=m.int64))),
    "scatter_(bad reduce)": (A, lambda m, x: x.scatter_(1, m.zeros(1, 1, dtype=m.int64), 1., reduce='max')),
    "scatter_(index ndim)": (A, lambda m, x: x.scatter_(1, m.tensor([0]), 1.)),
    "scatter_add_(oob)": (A, lambda m, x: x.scatter_add_(0, m.tensor([[3]]), m.ones(1, 1))),
    "scatter_add_(second oob)": (A, lambda m, x: x.scatter_add_(1, m.tensor([[0, 9]]), m.ones(1, 2))),
    "scatter_reduce_(bad reduce)": (A, lambda m, x: x.scatter_reduce_(1, m.tensor([[0]]), m.ones(1, 1), 'avg')),
    "masked_fill_(mask broadcast grows)": (V, lambda m, x: x.masked_fill_(m.ones(2, 3, dtype=m.bool), 0.)),
    "masked_fill_(float mask)": (V, lambda m, x: x.masked_fill_(m.ones(3), 0.)),
    "masked_scatter_(source too small)": (V, lambda m, x: x.masked_scatter_(m.ones(3, dtype=m.bool), m.ones(2))),
    "put_(oob)": (A, lambda m, x: x.put_(m.tensor([12]), m.ones(1))),
    "put_(size mismatch)": (A, lambda m, x: x.put_(m.tensor([0, 1]), m.ones(3))),
    "fill_diagonal_(1-D)": (V, lambda m, x: x.fill_diagonal_(1.)),
    "clamp_(min tensor broadcast grows)": (V, lambda m, x: x.clamp_(min=m.zeros(2, 3))),
    "resize_(negative)": (V, lambda m, x: x.resize_(-1)),
    "t_() 3-D": (lambda m: m.ones(1, 2, 3), lambda m, x: x.t_()),
    "squeeze_(dim 5)": (A, lambda m, x: x.squeeze_(5)),
    "unsqueeze_(dim 5)": (A, lambda m, x: x.unsqueeze_(5)),
    "transpose_(dim 5)": (A, lambda m, x: x.transpose_(0, 5)),
    "requires_grad_ on int": (I, lambda m, x: x.requires_grad_()),
    "sort_ on int via sort(out) dtype": (V, lambda m, x: m.sort(x, out=(m.zeros(3), m.zeros(3)))),
}
for name, (mk, f) in INPLACE_INDEX.items():
    R(name, inplace(mk, f))

