"""Window functions and the short-time Fourier transform: ``hann_window``, ``hamming_window``,
``blackman_window``, ``bartlett_window``, ``kaiser_window``, ``stft`` and ``istft`` (torch's signatures and
conventions), as audio programs use them.

``stft`` frames the (reflect-padded when ``center``) signal with ``unfold``, multiplies by the window and
takes ``fft.rfft`` (``fft.fft`` two-sided) of each frame; ``istft`` inverts each frame, windows it and
overlap-adds with ``F.fold``, dividing by the summed squared window. Both are compositions of ember ops,
so they differentiate.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap, _check_device, _on_device
from .registry import export, FACTORY

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window", "stft", "istft"]


def _window(name, window_length, periodic, dtype, requires_grad, values, device=None):
    """A 1-D window of ``window_length`` from ``values(n, M)`` (n = 0..M-1, M points of the symmetric window;
    a periodic window is the symmetric one of length + 1 without its last point)."""
    if not isinstance(window_length, (int, np.integer)) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window length, got window_length={window_length}")
    dt = _dt.get_default_dtype() if dtype is None else dtype
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    if window_length <= 1:
        arr = np.ones(window_length, dtype=np.float64)
    else:
        M = window_length + 1 if periodic else window_length
        arr = values(np.arange(M, dtype=np.float64), M)[:window_length]
    out = arr.astype(dt.np)
    if FACTORY[0] is not None:
        FACTORY[0](out)
    t = _on_device(wrap(out, dt), _check_device(device))
    return t.requires_grad_(True) if requires_grad else t


def _cos_sum(coeffs):
    def values(n, M):
        x = 2.0 * math.pi * n / (M - 1)
        return sum(c * (-1) ** k * np.cos(k * x) for k, c in enumerate(coeffs))
    return values


@export(method=False)
def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / N) (periodic: N = window_length)."""
    return _window("hann_window", window_length, periodic, dtype, requires_grad, _cos_sum((0.5, 0.5)), device)


@export(method=False)
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    """alpha - beta cos(2 pi n / N)."""
    return _window("hamming_window", window_length, periodic, dtype, requires_grad, _cos_sum((alpha, beta)), device)


@export(method=False)
def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    return _window("blackman_window", window_length, periodic, dtype, requires_grad, _cos_sum((0.42, 0.5, 0.08)),
                   device)


@export(method=False)
def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """The triangle 1 - |2n / N - 1|."""
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad,
                   lambda n, M: 1.0 - np.abs(2.0 * n / (M - 1) - 1.0), device)


@export(method=False)
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=False, requires_grad=False):
    """I0(beta sqrt(1 - (2n / N - 1)^2)) / I0(beta)."""
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad,
                   lambda n, M: np.i0(beta * np.sqrt(np.clip(1.0 - (2.0 * n / (M - 1) - 1.0) ** 2, 0.0, None)))
                   / np.i0(beta), device)


# ---- the short-time Fourier transform ------------------------------------------------------------------

def _full_window(window, win_length, n_fft, like, op):
    """The window (ones when None) centred in n_fft points."""
    from .creation import ones
    if window is None:
        window = ones(win_length, dtype=like.real.dtype if like.is_complex() else like.dtype)
    if window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"{op}: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")
    if win_length < n_fft:
        from ..nn.functional import pad
        left = (n_fft - win_length) // 2
        window = pad(window, (left, n_fft - win_length - left))
    return window


def _lengths(n_fft, hop_length, win_length, op):
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    if n_fft <= 0:
        raise RuntimeError(f"{op}: expected 0 < n_fft, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{op}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got win_length={win}")
    return hop, win


@export(method=True)
def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """torch.stft: (B?, L) -> (B?, n_freq, n_frames) complex, frames ``hop_length`` apart."""
    from .. import fft as _fft
    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' must be Tensor, not {type(input).__name__}")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied, which is known to cause "
                      "spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
                      "recommended to reduce spectral leakage.", UserWarning, stacklevel=2)
    real = not input.is_complex() and (window is None or not window.is_complex())
    if return_complex is None:
        if real:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")
    hop, win = _lengths(int(n_fft), hop_length, win_length, "stft")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if center:
        from ..nn.functional import pad
        p = int(n_fft) // 2
        x = pad(x.unsqueeze(1), (p, p), mode=pad_mode).squeeze(1)
    L = x.shape[-1]
    if not 0 < n_fft <= L:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {L}, but got n_fft={n_fft}")
    w = _full_window(window, win, int(n_fft), input, "stft")
    frames = x.unfold(-1, int(n_fft), hop) * w                      # (B, n_frames, n_fft)
    one = real if onesided is None else bool(onesided)
    spec = _fft.rfft(frames, dim=-1) if one else _fft.fft(frames, dim=-1)
    if normalized:
        spec = spec * (1.0 / math.sqrt(n_fft))
    spec = spec.transpose(-1, -2)
    if input.ndim == 1:
        spec = spec.squeeze(0)
    if not return_complex:
        from .complex_ops import view_as_real
        return view_as_real(spec.contiguous())
    return spec


@export(method=True)
def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """torch.istft: the least-squares inverse of ``stft`` by windowed overlap-add."""
    from .. import fft as _fft
    from ..nn.functional import fold
    if not isinstance(input, Tensor) or not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex values, got {input.ndim}D")
    n_fft = int(n_fft)
    hop, win = _lengths(n_fft, hop_length, win_length, "istft")
    spec = input if input.ndim == 3 else input.unsqueeze(0)
    n_freq, n_frames = spec.shape[-2], spec.shape[-1]
    one = (n_freq != n_fft) if onesided is None else bool(onesided)
    if one and n_freq != n_fft // 2 + 1:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {n_freq}")
    if normalized:
        spec = spec * math.sqrt(n_fft)
    cols = spec.transpose(-1, -2)                                     # (B, n_frames, n_freq)
    frames = _fft.irfft(cols, n=n_fft, dim=-1) if one else _fft.ifft(cols, n=n_fft, dim=-1)
    if not one and not return_complex:
        frames = frames.real
    w = _full_window(window, win, n_fft, frames, "istft")
    frames = frames * w
    total = n_fft + hop * (n_frames - 1)
    y = fold(frames.transpose(-1, -2), output_size=(1, total), kernel_size=(1, n_fft), stride=(1, hop))
    y = y.reshape(y.shape[0], total)
    env = fold((w * w).reshape(1, n_fft, 1).expand(1, n_fft, n_frames), output_size=(1, total),
               kernel_size=(1, n_fft), stride=(1, hop)).reshape(total)
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else min(start + int(length), total)
    y, env = y[:, start:end], env[start:end]
    if float(env.abs().min()) < 1e-11:
        raise RuntimeError("istft: window overlap add min: 0 (the window's squared sum must be nonzero)")
    y = y / env
    if length is not None and y.shape[-1] < int(length):
        from ..nn.functional import pad
        y = pad(y, (0, int(length) - y.shape[-1]))
    return y.squeeze(0) if input.ndim == 2 else y
