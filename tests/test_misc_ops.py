"""unravel_index, scalar_tensor, asarray, gcd/lcm, frexp, slice/select/diagonal_scatter, is_signed, typename and
Tensor.new_empty_strided against torch."""
import numpy as np
import torch

import ember


def _show(v):
    if isinstance(v, tuple):
        return [_show(x) for x in v]
    if hasattr(v, "detach"):
        return str(v.dtype).split(".")[-1], v.detach().numpy().tolist()
    return v


def _program(lib):
    out = [lib.unravel_index(lib.tensor([5, 7]), (2, 4)), lib.unravel_index(lib.tensor(5), (2, 4)),
           lib.scalar_tensor(3), lib.scalar_tensor(3, dtype=lib.int64), lib.asarray([1, 2]),
           lib.asarray(lib.ones(2), dtype=lib.float64), lib.asarray(3.0)]
    a = np.ones(3, np.float32)
    t = lib.asarray(a)
    a[0] = 5                                              # shares the NumPy array's memory
    out += [t, lib.gcd(lib.tensor([12, 18]), lib.tensor([8, 27])), lib.lcm(lib.tensor([4, 6]), lib.tensor([6, 4])),
            lib.tensor([12]).gcd(lib.tensor([8])), tuple(lib.frexp(lib.tensor([8.0, 0.3, -3.0])))]
    x = lib.zeros(3, 4)
    out += [lib.slice_scatter(x, lib.ones(3, 2), dim=1, start=1, end=3), lib.select_scatter(x, lib.ones(4), 0, 1),
            lib.diagonal_scatter(x, lib.ones(3)), lib.diagonal_scatter(x, lib.ones(3), 1),
            lib.is_signed(lib.tensor([1], dtype=lib.uint8)), lib.ones(1).is_signed(),
            lib.typename(lib.ones(1)).split(".")[-1], lib.ones(2, 3).new_empty_strided((2, 3), (1, 2)).stride(),
            lib.ones(2, 3, 4, 5).dim_order(), lib.ones(2, 3, 4, 5).to(memory_format=lib.channels_last).dim_order(),
            lib.ones(3, 4).t().dim_order()]
    s = lib.ones(3, 2, requires_grad=True)
    (lib.slice_scatter(lib.zeros(3, 4), s, 1, 1, 3) * lib.arange(12.).reshape(3, 4)).sum().backward()
    return out + [s.grad]


def test_misc_ops_match_torch():
    assert [_show(v) for v in _program(ember)] == [_show(v) for v in _program(torch)]
