"""``grid_sample``'s bicubic mode (4-D input) and volumetric sampling (5-D input, trilinear or nearest),
written with ember ops like the 2-D bilinear path in ``vision.py`` (gathers at integer taps, weights
differentiable in the grid), so autograd gives both the input's and the grid's gradients.

torch's rules: bicubic reads the 4 x 4 pixels around the unnormalised point (no padding applied to the point
itself), each tap mapped by the padding mode (border: clamped; reflection: reflected then clamped; zeros:
outside taps read 0), and combines them with the cubic convolution kernel of ``A = -0.75``. Volumetric
sampling unnormalises and pads (x, y, z) as the 2-D modes do and weights the 8 corners (trilinear) or
rounds half to even (nearest).
"""
from __future__ import annotations

from ... import dtypes as _dt

_A = -0.75


def _conv1(x):
    """Cubic convolution kernel for |x| <= 1."""
    return ((_A + 2) * x - (_A + 3)) * x * x + 1


def _conv2(x):
    """Cubic convolution kernel for 1 < |x| < 2."""
    return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A


def _cubic_weights(t):
    return _conv2(t + 1.0), _conv1(t), _conv1(1.0 - t), _conv2((1.0 - t) + 1.0)


def _tap_coordinate(c, size: int, padding_mode: str, align_corners: bool):
    """An integer tap position (as floats, no gradient) mapped by the padding mode, as an int64 index and
    whether it lies inside."""
    from .vision import _reflect
    if padding_mode == "border":
        c = c.clamp(0, size - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        c = c.clamp(0, size - 1)
    i = c.trunc().to(_dt.int64)
    return i.clamp(0, size - 1), (i >= 0) & (i <= size - 1)


def _gather(flat, lin, shape):
    """``flat`` (N, C, P) read at the flat positions ``lin`` (N, *out) -> (N, C, *out)."""
    from ...ops.registry import apply
    from ...ops.index_scatter import GATHER
    N, C = flat.shape[0], flat.shape[1]
    idx = lin.reshape(N, 1, -1).expand(N, C, lin[0].numel())
    return apply(GATHER, (flat, idx), {"dim": 2}).reshape((N, C) + tuple(shape))


def grid_sample_bicubic(input, grid, padding_mode: str, align_corners: bool):
    """Bicubic sampling of ``input`` (N, C, H, W) at ``grid`` (N, Ho, Wo, 2)."""
    from .vision import _unnormalize
    N, C, H, W = input.shape
    out_shape = tuple(grid.shape[1:3])
    ix = _unnormalize(grid[..., 0], W, align_corners)
    iy = _unnormalize(grid[..., 1], H, align_corners)
    x0 = ix.detach().floor()
    y0 = iy.detach().floor()
    wx = _cubic_weights(ix - x0)
    wy = _cubic_weights(iy - y0)
    flat = input.reshape(N, C, H * W)
    idt = input.dtype
    xs = [_tap_coordinate(x0 + (k - 1), W, padding_mode, align_corners) for k in range(4)]
    out = None
    for j in range(4):
        yi, yin = _tap_coordinate(y0 + (j - 1), H, padding_mode, align_corners)
        row = None
        for k in range(4):
            xi, xin = xs[k]
            v = _gather(flat, yi * W + xi, out_shape) * ((xin & yin).to(idt) * wx[k]).unsqueeze(1)
            row = v if row is None else row + v
        term = row * wy[j].unsqueeze(1)
        out = term if out is None else out + term
    return out


def grid_sample_3d(input, grid, mode: str, padding_mode: str, align_corners: bool):
    """Trilinear or nearest sampling of ``input`` (N, C, D, H, W) at ``grid`` (N, Do, Ho, Wo, 3)."""
    from .vision import _grid_source_index
    from ... import where, zeros
    if mode == "bicubic":
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    N, C, D, H, W = input.shape
    out_shape = tuple(grid.shape[1:4])
    ix = _grid_source_index(grid[..., 0], W, padding_mode, align_corners)
    iy = _grid_source_index(grid[..., 1], H, padding_mode, align_corners)
    iz = _grid_source_index(grid[..., 2], D, padding_mode, align_corners)
    flat = input.reshape(N, C, D * H * W)
    idt = input.dtype
    i64 = _dt.int64

    def axis(c, n):
        return c.clamp(0, n - 1), (c >= 0) & (c <= n - 1)

    def read(x, y, z):
        (xo, xin), (yo, yin), (zo, zin) = axis(x, W), axis(y, H), axis(z, D)
        return _gather(flat, (zo * H + yo) * W + xo, out_shape), (xin & yin & zin).to(idt)

    if mode == "nearest":
        v, m = read(ix.detach().round().to(i64), iy.detach().round().to(i64), iz.detach().round().to(i64))
        none = zeros(tuple(ix.shape), dtype=_dt.bool)        # (the grid gets a zero gradient, as torch's)
        return v * m.unsqueeze(1) + where(none, ix + iy + iz, 0.0).unsqueeze(1)
    corners = []
    for c in (ix, iy, iz):
        f = c.detach().floor()
        corners.append((f.to(i64), (f + 1) - c, c - f))      # (low index, low weight, high weight)
    out = None
    for dz in (0, 1):
        for dy in (0, 1):
            for dx in (0, 1):
                (x0, wx0, wx1), (y0, wy0, wy1), (z0, wz0, wz1) = corners
                w = (wx1 if dx else wx0) * (wy1 if dy else wy0) * (wz1 if dz else wz0)
                v, m = read(x0 + dx, y0 + dy, z0 + dz)
                term = v * (w * m).unsqueeze(1)
                out = term if out is None else out + term
    return out
