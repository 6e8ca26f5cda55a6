"""Native eager kernels: the exp-bound composites (gelu, softmax/log_softmax, layer norm, cross entropy
with class indices), the 2-d window kernels of convolution and max pooling (im2col, col2im, max_pool, its
gather and scatter) and the optimizers' parameter updates (Adam/AdamW, SGD) as one call each into a C library ember generates and builds on first use (``eager_source.py``).

Each function takes NumPy arrays and returns the result array, or None when the native path does not
apply (not float32, a layout it does not handle, no C compiler, ``EMBER_EAGER_NATIVE=0``); the caller
then runs its NumPy kernel. The library is built once by ``ember.compiler.build.compile_source`` (same
flags and disk cache as compiled graphs: one build per machine and compiler, loaded by every later
process in milliseconds). If the build fails, the failure is remembered for the process and
``EMBER_LOGS=kernels`` says why; everything keeps working on NumPy.

Threads: ``ember.get_num_threads()``, on ember's work pool, once an array holds at least
``PARALLEL_MIN`` elements. Measured here with a busy loop on the second core: GELU on 65,536 elements
took 1.25x longer on two threads than on one (waking a pool thread whose core is busy), on 524,288 the
same; so 2^18 elements is the threshold. Results do not depend on the thread count (see
``eager_source.py``).
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

_F32 = np.dtype(np.float32)
_NDARRAY = np.ndarray
PARALLEL_MIN = 1 << 18

_P, _L, _I, _F, _O = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_float, ctypes.py_object
_SIGNATURES = {
    "gelu": ((_P, _P, _L, _I, _I), None),
    "gelu_backward": ((_P, _P, _P, _L, _I, _I), None),
    "softmax": ((_P, _P, _L, _L, _I, _I), None),
    "softmax_backward": ((_P, _P, _P, _L, _L, _I, _I), None),
    "norm_stats": ((_P, _P, _P, _L, _L, _I), None),
    "layer_norm": ((_P, _P, _P, _P, _P, _P, _L, _L, _F, _I), None),
    "layer_norm_forward": ((_P, _P, _P, _P, _P, _P, _L, _L, _F, _I), None),
    "layer_norm_backward": ((_P, _P, _P, _P, _P, _P, _P, _P, _L, _L, _F, _I), ctypes.c_int),
    "cross_entropy": ((_P, _P, _P, _P, _P, _L, _L, _L, _I), _L),
    "cross_entropy_backward": ((_P, _P, _P, _P, _L, _L, _L, _F, _I), None),
    "mask_grad": ((_P, _P, _P, _L, _I, _F, _F, _F, _F, _I, _I), None),
    "im2col": ((_P, _P, _L, _P, _I), None),
    "col2im": ((_P, _P, _L, _P, _I), None),
    "max_pool": ((_P, _P, _P, _L, _P, _I), None),
    "gather": ((_P, _P, _P, _L, _L, _L, _I), None),
    "scatter": ((_P, _P, _P, _L, _L, _L, _I), None),
    "adam": ((_P, _P, _P, _P, _P, _L) + (_F,) * 8 + (_I, _I), None),
    "sgd": ((_P, _P, _P, _L, _F, _F, _F, _I, _F, _I, _I), None),
    "adam_many": ((_L, _P, _P, _P, _P) + (_F,) * 6 + (_I, _L, _I), None),
    "sgd_many": ((_L, _P, _P, _P, _F, _F, _I, _F, _I, _L, _I), None),
    # (ndarray objects in: eager_source_select.py; used only when its layout check passed)
    "gather_dim": ((_O, _O, _O, _I, _I), _L),
    "topk_last": ((_O, _O, _O, _L, _I), None),
    "softmax_o": ((_O, _O, _I, _I), None),
    "softmax_backward_o": ((_O, _O, _O, _I, _I), None),
    "gelu_o": ((_O, _O, _I, _I), None),
    "gelu_backward_o": ((_O, _O, _O, _I, _I), None),
    "cross_entropy_o": ((_O, _O, _O, _O, _O, _I, _L, _I), _L),
    "layer_norm_forward_o": ((_O, _O, _O, _O, _O, _O, _I, _F, _I), None),
    "mask_grad_o": ((_O, _O, _O, _I, _F, _F, _F, _F, _I, _I), None),
}

# state: None = not tried yet, False = unavailable (disabled or the build failed), else the functions.
# A first compile's trace, which runs the eager ops, neither waits for a library missing from the cache
# nor builds it (its ops run their NumPy kernels: the compiled code does not call these); the first eager
# op outside a trace builds it and waits, so eager results never change kernels partway through a process
# (``python -m ember.compiler.prebuild``, run by ``make install``, builds it ahead of time).
_STATE: list = [None]
_NOT_CACHED: list = [False]  # the cache did not hold the library (looked up once per process)
_DISABLED = os.environ.get("EMBER_EAGER_NATIVE", "").strip().lower() in ("0", "false", "no", "off")


def _bind(lib) -> dict:
    fns = {}
    for name, (argtypes, restype) in _SIGNATURES.items():
        fns[name] = lib.get("ember_eager_" + name, argtypes, restype)
    from ..compiler import build
    from .eager_source_select import layout
    fns["_ptr"] = build._data_pointer
    fns["_objects"] = layout() is not None      # (the select kernels read the array structs)
    return fns


def _unavailable(e) -> bool:
    from ..compiler import logs
    logs.log("kernels", f"native eager kernels unavailable, NumPy runs them: {type(e).__name__}: {e}")
    return False


def _load(wait: bool = True):
    """Load the library from the cache; when it must be built, build it here (``wait``) or return False
    for now (NumPy runs, the next call outside a trace builds it)."""
    if _DISABLED:
        _STATE[0] = False
        return False
    if not wait and _NOT_CACHED[0]:
        return False                 # (known to be missing: a trace, the only caller not waiting, builds nothing)
    global _THREADS
    try:
        from .._settings import _THREADS
        from ..compiler import build
        from .eager_source import source
        src = source()
        lib = None if _NOT_CACHED[0] else build.compile_source(src, name="ember_eager", cached_only=True)
        if lib is None and not wait:
            _NOT_CACHED[0] = True
            return False
        if lib is None:
            lib = build.compile_source(src, name="ember_eager")
        _STATE[0] = _bind(lib)
    except Exception as e:       # no compiler, a failed build, an unloadable library: NumPy it is
        _STATE[0] = _unavailable(e)
    return _STATE[0]


_LATER: list = [False]     # build_later started its build (once per process)
LATER_NICE = 10            # the niceness of build_later's compiler (it runs beside the program's steps)


def build_later() -> bool:
    """Build the library into the disk cache in the background, when a trace of this process found it
    missing (``_NOT_CACHED``), so the next process's trace runs these kernels instead of NumPy's (the
    small GPT's warm trace: gelu, layer_norm, softmax, cross_entropy, about 70 ms of CPU). Called once a
    compiled graph's own library has landed (``compiler/background.py``): its compiler then competes with
    no build of the program's, and at a lower CPU priority (LATER_NICE) with none of its steps. This
    process keeps what its first eager use decides (the library is not bound here). A ``tiers.Pending``:
    a process that ends first waits for it, ``tiers.wait_background`` too. Returns whether it started."""
    if _DISABLED or _LATER[0] or not _NOT_CACHED[0] or _STATE[0] is not None:
        return False
    _LATER[0] = True
    from ..compiler import tiers
    tiers.start("ember_eager", _build_into_cache, kind="support")
    return True


def _build_into_cache():
    from ..compiler import build, logs, tiers
    tiers.lower_priority(LATER_NICE)
    from .eager_source import source
    try:
        return build.compile_source(source(), name="ember_eager")
    except Exception as e:       # (remembered nowhere: this process's first eager use decides, as always)
        logs.log("kernels", f"native eager kernels: the background build failed: {type(e).__name__}: {e}")
        return None


def _tracing() -> bool:
    """Whether ``ember.compile`` is tracing: its compiled code does not call these kernels, so a trace
    starts no build of them (its C compilers would compete with the program's own)."""
    from ..compiler.capture import Tracer
    from ..compiler.background import holding      # (a compiled function's interpreter, library building)
    return Tracer.active is not None or holding()


def available() -> bool:
    """Whether the native kernels are in use (builds the library on the first call)."""
    fns = _STATE[0]
    if fns is None:
        fns = _load()
    return fns is not False


_SAVED: list = [None]     # the functions while set_enabled(False) holds them aside


def set_enabled(on: bool) -> bool:
    """Turn the native kernels on or off for this process (tests and the bench compare both paths);
    returns whether they were on. Turning them on builds the library if needed."""
    global _DISABLED
    was = _STATE[0] is not False and not _DISABLED
    if on:
        _DISABLED = False
        _STATE[0] = _SAVED[0] if _SAVED[0] else (_STATE[0] or None)
    else:
        if _STATE[0]:
            _SAVED[0] = _STATE[0]
        _STATE[0] = False
    return was


def _fns():
    fns = _STATE[0]
    if fns is None:
        fns = _load(wait=not _tracing())
    return fns


_THREADS: dict = {"intra": 1}      # ember._settings._THREADS once the library is loaded


def _threads(n: int) -> int:
    return 1 if n < PARALLEL_MIN else _THREADS["intra"]


def _dense(a):
    """``a`` as a C-contiguous float32 ndarray (a copy when it is a strided view), or None if it is not a
    float32 ndarray."""
    if type(a) is not _NDARRAY or a.dtype != _F32:
        return None
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _ok(*arrays) -> bool:
    for a in arrays:
        if type(a) is not _NDARRAY or a.dtype != _F32 or not a.flags.c_contiguous:
            return False
    return True


# ---- gelu ---------------------------------------------------------------------------------------------

def gelu(x, approximate: str):
    """x * Phi(x) (``approximate='none'``) or its tanh form, float32; None where NumPy should run."""
    fns = _STATE[0] or _fns()
    if not fns:
        return None
    x = _dense(x)
    if x is None:
        return None
    y = np.empty_like(x)
    if fns["_objects"]:
        fns["gelu_o"](x, y, approximate == "tanh", _threads(x.size))
        return y
    p = fns["_ptr"]
    fns["gelu"](p(x), p(y), x.size, approximate == "tanh", _threads(x.size))
    return y


def gelu_backward(g, x, approximate: str):
    """g * gelu'(x), float32; None where NumPy should run."""
    fns = _STATE[0] or _fns()
    if not fns or g.shape != x.shape:
        return None
    g, x = _dense(g), _dense(x)
    if g is None or x is None:
        return None
    gx = np.empty_like(x)
    if fns["_objects"]:
        fns["gelu_backward_o"](g, x, gx, approximate == "tanh", _threads(x.size))
        return gx
    p = fns["_ptr"]
    fns["gelu_backward"](p(g), p(x), p(gx), x.size, approximate == "tanh", _threads(x.size))
    return gx


# ---- softmax / log_softmax over the last dim ------------------------------------------------------------

def softmax(x, axis: int, log: bool):
    """softmax (or log_softmax) of float32 ``x`` over ``axis``; None unless it is the last axis."""
    fns = _STATE[0] or _fns()
    if not fns or x.ndim == 0 or axis != x.ndim - 1 or not _ok(x) or x.size == 0:
        return None
    y = np.empty_like(x)
    if fns["_objects"]:
        fns["softmax_o"](x, y, log, _threads(x.size))
        return y
    d = x.shape[-1]
    p = fns["_ptr"]
    fns["softmax"](p(x), p(y), x.size // d, d, log, _threads(x.size))
    return y


def softmax_backward(g, y, axis: int, log: bool):
    """The derivative of softmax (``y * (g - sum(g * y))``) or log_softmax (``g - exp(y) * sum(g)``)
    over ``axis`` of float32 arrays; None unless it is the last axis."""
    fns = _STATE[0] or _fns()
    if not fns or y.ndim == 0 or axis != y.ndim - 1 or g.shape != y.shape or y.size == 0:
        return None
    g, y = _dense(g), _dense(y)
    if g is None or y is None:
        return None
    gx = np.empty_like(y)
    if fns["_objects"]:
        fns["softmax_backward_o"](g, y, gx, log, _threads(y.size))
        return gx
    d = y.shape[-1]
    p = fns["_ptr"]
    fns["softmax_backward"](p(g), p(y), p(gx), y.size // d, d, log, _threads(y.size))
    return gx


# ---- layer norm over the last dim -----------------------------------------------------------------------

def norm_stats(x2):
    """(mean, var) of the rows of a float32 (M, D) array, each shaped (M, 1); None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or not _ok(x2) or x2.shape[1] == 0:
        return None
    m = x2.shape[0]
    mean = np.empty((m, 1), _F32)
    var = np.empty((m, 1), _F32)
    p = fns["_ptr"]
    fns["norm_stats"](p(x2), p(mean), p(var), m, x2.shape[1], _threads(x2.size))
    return mean, var


def _opt(p, a):
    return None if a is None else p(a)


def layer_norm(x2, w, b, mean, var, eps: float):
    """``(x - mean) * rstd * w + b`` over the rows of a float32 (M, D) array (w, b: D elements or None;
    mean, var: M elements); None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or not _ok(x2, mean, var) or (w is not None and not _ok(w)) or (b is not None and not _ok(b)):
        return None
    y = np.empty_like(x2)
    p = fns["_ptr"]
    fns["layer_norm"](p(x2), _opt(p, w), _opt(p, b), p(mean), p(var), p(y), x2.shape[0], x2.shape[1], eps,
                      _threads(x2.size))
    return y


def layer_norm_forward(x2, w, b, eps: float):
    """``(y, mean, var)``: ``norm_stats`` and ``layer_norm`` in one native call (the same arithmetic);
    None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or not _ok(x2) or x2.shape[1] == 0 or (w is not None and not _ok(w)) or (
            b is not None and not _ok(b)):
        return None
    m = x2.shape[0]
    mean = np.empty((m, 1), _F32)
    var = np.empty((m, 1), _F32)
    y = np.empty_like(x2)
    if fns["_objects"] and x2.ndim == 2:
        fns["layer_norm_forward_o"](x2, x2 if w is None else w, x2 if b is None else b, mean, var, y,
                                    (w is not None) | (b is not None) << 1, eps, _threads(x2.size))
        return y, mean, var
    p = fns["_ptr"]
    fns["layer_norm_forward"](p(x2), _opt(p, w), _opt(p, b), p(mean), p(var), p(y), m, x2.shape[1], eps,
                              _threads(x2.size))
    return y, mean, var


def layer_norm_backward(g2, x2, w, mean, var, eps: float, need_x: bool, need_wb: bool):
    """``(gx, gw, gb)`` of layer norm over the rows of float32 (M, D) arrays (gx None unless ``need_x``;
    gw and gb None unless ``need_wb``, both D elements); None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or not _ok(g2, x2, mean, var) or (w is not None and not _ok(w)) or g2.shape != x2.shape:
        return None
    m, d = x2.shape
    gx = np.empty_like(x2) if need_x else None
    gw = np.empty(d, _F32) if need_wb else None
    gb = np.empty(d, _F32) if need_wb else None
    p = fns["_ptr"]
    if fns["layer_norm_backward"](p(g2), p(x2), _opt(p, w), p(mean), p(var), _opt(p, gx), _opt(p, gw),
                                  _opt(p, gb), m, d, eps, _threads(x2.size)):
        raise MemoryError(f"layer_norm backward: could not allocate {2 * d} floats per row block")
    return gx, gw, gb


# ---- cross entropy with class indices over (N, C) float32 logits ----------------------------------------

def _targets_ok(t, rows) -> bool:
    return type(t) is _NDARRAY and t.dtype == _I64 and t.shape == (rows,) and t.flags.c_contiguous


def cross_entropy(x, t, ignore_index: int, per_row: bool):
    """``(logp, losses, total, count, bad)`` of cross entropy over float32 (N, C) logits and int64 (N,)
    targets: log_softmax, the per-row losses (when ``per_row``, else None; 0 where the target is
    ``ignore_index``), their sum and the number of rows not ignored (floats), and the first row whose
    target is out of range (-1: none); None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or x.ndim != 2 or not _ok(x) or x.size == 0 or not _targets_ok(t, x.shape[0]):
        return None
    rows, d = x.shape
    logp = np.empty_like(x)
    losses = np.empty(rows, _F32) if per_row else None
    sums = np.empty(2, np.float64)
    if fns["_objects"]:
        bad = fns["cross_entropy_o"](x, t, logp, logp if losses is None else losses, sums, losses is not None,
                                     ignore_index, _threads(x.size))
    else:
        p = fns["_ptr"]
        bad = fns["cross_entropy"](p(x), p(t), p(logp), _opt(p, losses), p(sums), rows, d, ignore_index,
                                   _threads(x.size))
    if bad == -2:
        raise MemoryError(f"cross_entropy: could not allocate the partial sums of {rows} rows")
    return logp, losses, float(sums[0]), float(sums[1]), bad


def cross_entropy_backward(logp, t, ignore_index: int, scale, row_g=None):
    """``(softmax - onehot(t)) * scale`` per row of float32 (N, C) log-probabilities (rows whose target is
    ``ignore_index``: ``0 * softmax``); ``row_g`` (float32 (N,)) gives each row its own scale (reduction
    'none'); None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or logp.ndim != 2 or not _ok(logp) or logp.size == 0 or not _targets_ok(t, logp.shape[0]) \
            or (row_g is not None and not (_ok(row_g) and row_g.shape == t.shape)):
        return None
    rows, d = logp.shape
    gx = np.empty_like(logp)
    p = fns["_ptr"]
    fns["cross_entropy_backward"](p(logp), p(t), _opt(p, row_g), p(gx), rows, d, ignore_index, float(scale),
                                  _threads(logp.size))
    return gx


# ---- the gradient mask of piecewise-linear activations -------------------------------------------------

MASK_MODES = {"gt": 0, "open": 1, "outside": 2, "nonzero": 3, "pos": 4, "notle": 4}
_NUMBER = (float, int)


def mask_grad(g, x, mode: str, a=0.0, b=0.0, s_in=1.0, s_out=0.0):
    """``g * s_in`` where the condition ``mode`` holds on ``x``, else ``g * s_out`` (+0 when ``s_out`` is
    0), for float32 arrays of one shape; the bounds and scales are Python numbers (compared and multiplied
    in float32, as NumPy does with them); None where NumPy runs."""
    fns = _STATE[0] or _fns()
    code = MASK_MODES.get(mode)
    if not fns or code is None or g.shape != x.shape or not _ok(g, x) or g.size == 0:
        return None
    for v in (a, b, s_in, s_out):
        if type(v) not in _NUMBER:
            return None
    y = np.empty_like(g)
    if fns["_objects"]:
        fns["mask_grad_o"](g, x, y, code, a, b, s_in, s_out, s_out == 0, _threads(g.size))
        return y
    p = fns["_ptr"]
    fns["mask_grad"](p(g), p(x), p(y), g.size, code, a, b, s_in, s_out, s_out == 0, _threads(g.size))
    return y


# ---- 2-d windows: im2col / col2im / max pooling over (N, C, H, W) float32 ----------------------------------

_I64 = np.dtype(np.int64)


def _geometry(hw, out, k, stride, top_left, dil):
    """The geometry array the window kernels read: (H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw)."""
    return np.array((hw[0], hw[1], out[0], out[1], k[0], k[1], stride[0], stride[1], top_left[0], top_left[1],
                     dil[0], dil[1]), dtype=np.int64)


def im2col(x, k, stride, pad, dil, out):
    """Columns (N, C*kh*kw, OH*OW) of a float32 (N, C, H, W) array (``pad``: top, bottom, left, right;
    ``out``: (OH, OW)); None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or x.ndim != 4 or not _ok(x) or x.size == 0:
        return None
    N, C = x.shape[:2]
    K, L = k[0] * k[1], out[0] * out[1]
    cols = np.empty((N, C * K, L), _F32)
    p = fns["_ptr"]
    geo = _geometry(x.shape[2:], out, k, stride, (pad[0], pad[2]), dil)
    fns["im2col"](p(x), p(cols), N * C, p(geo), _threads(cols.size))
    return cols


def col2im(cols, out_hw, stride, pad, dil):
    """The adjoint of ``im2col``: float32 columns (N, C, kh, kw, OH, OW) summed into (N, C, *out_hw);
    None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or cols.ndim != 6 or not _ok(cols) or cols.size == 0:
        return None
    N, C, kh, kw, OH, OW = cols.shape
    x = np.empty((N, C) + tuple(out_hw), _F32)
    p = fns["_ptr"]
    geo = _geometry(out_hw, (OH, OW), (kh, kw), stride, (pad[0], pad[2]), dil)
    fns["col2im"](p(cols), p(x), N * C, p(geo), _threads(cols.size))
    return x


def max_pool(x, k, s, p, d, outs):
    """(values, int64 flat in-plane indices) of 2-d max pooling of a float32 (N, C, H, W) array with
    symmetric padding ``p`` and output size ``outs``; None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or x.ndim != 4 or not _ok(x) or x.size == 0:
        return None
    N, C = x.shape[:2]
    y = np.empty((N, C) + tuple(outs), _F32)
    idx = np.empty((N, C) + tuple(outs), _I64)
    ptr = fns["_ptr"]
    geo = _geometry(x.shape[2:], outs, k, s, p, d)
    fns["max_pool"](ptr(x), ptr(y), ptr(idx), N * C, ptr(geo), _threads(x.size))
    return y, idx


def _plane_args(a, idx):
    """(planes, elements per plane of ``a``, indices per plane) when ``a`` is float32 and ``idx`` int64,
    both C-contiguous (N, C, ...) arrays; else None."""
    if a.ndim < 2 or idx.ndim != a.ndim or not _ok(a) or type(idx) is not _NDARRAY or idx.dtype != _I64 \
            or not idx.flags.c_contiguous or a.shape[:2] != idx.shape[:2] or a.size == 0 or idx.size == 0:
        return None
    planes = a.shape[0] * a.shape[1]
    return planes, a.size // planes, idx.size // planes


def gather_planes(x, idx):
    """``x`` read at the in-plane indices ``idx`` (in range: they come from max pooling); None where NumPy
    runs."""
    fns = _STATE[0] or _fns()
    args = fns and _plane_args(x, idx)
    if not args:
        return None
    planes, hw, l = args
    y = np.empty(idx.shape, _F32)
    p = fns["_ptr"]
    fns["gather"](p(x), p(idx), p(y), planes, hw, l, _threads(idx.size))
    return y


def scatter_planes(g, idx, in_hw):
    """Zeros of (N, C, *in_hw) with ``g`` written at the in-plane indices ``idx`` (in range and distinct in
    each plane: windows that do not overlap); None where NumPy runs."""
    fns = _STATE[0] or _fns()
    args = fns and g.shape == idx.shape and _plane_args(g, idx)
    if not args:
        return None
    planes, l, _ = args
    out = np.empty(g.shape[:2] + tuple(in_hw), _F32)
    p = fns["_ptr"]
    fns["scatter"](p(g), p(idx), p(out), planes, out.size // planes, l, _threads(out.size))
    return out


# ---- optimizer updates: one pass per parameter (eager_source_optim.py) ---------------------------------------

def optim_ready() -> bool:
    """Whether the optimizer kernels can run (loads or builds the library on first use, as every kernel)."""
    return bool(_STATE[0] or _fns())


def optim_fits(d, *arrays) -> bool:
    """Whether ``d`` and every array given (None skipped) are C-contiguous float32 ndarrays of one shape."""
    if type(d) is not _NDARRAY or d.dtype != _F32 or not d.flags.c_contiguous:
        return False
    shape = d.shape
    for a in arrays:
        if a is not None and (type(a) is not _NDARRAY or a.dtype != _F32 or not a.flags.c_contiguous
                              or a.shape != shape):
            return False
    return True


# ---- a whole param group in one call (the C text loops over ``adam`` / ``sgd``, one pass per parameter) ----

def pointer():
    """The function giving an ndarray's first element's address (after ``optim_ready()``)."""
    return _STATE[0]["_ptr"]


def _arrays(ptrs, sizes, *scalars):
    return (np.array(ptrs, np.uintp), np.array(sizes, np.int64)) + tuple(np.array(s, _F32) for s in scalars)


def adam_many(ptrs, sizes, ssn, bc2s, wd, decay, w1, b2, w2, eps, maximize) -> None:
    """``adam_update`` of each parameter of a group in one native call: ``ptrs`` holds five addresses per
    parameter (``pointer()`` of d, g, m, v and of vmax, or 0 without amsgrad), ``sizes``, ``ssn`` (the
    negated step sizes) and ``bc2s`` one entry each; the shared scalars as ``adam_update`` takes them."""
    fns = _STATE[0]
    p = fns["_ptr"]
    b, n, s, c = _arrays(ptrs, sizes, ssn, bc2s)
    fns["adam_many"](len(n), p(b), p(n), p(s), p(c), wd, decay, w1, b2, w2, eps, maximize, PARALLEL_MIN,
                     _THREADS["intra"])


def sgd_many(ptrs, sizes, ws, wd, momentum, nesterov, neg_lr, maximize) -> None:
    """``sgd_update`` of each parameter of a group in one native call: ``ptrs`` holds three addresses per
    parameter (d, g, and the momentum buffer or 0), ``sizes`` and ``ws`` (each buffer's weight: 1 -
    dampening, 1 on its first step) one entry each."""
    fns = _STATE[0]
    p = fns["_ptr"]
    b, n, w = _arrays(ptrs, sizes, ws)
    fns["sgd_many"](len(n), p(b), p(n), p(w), wd, momentum, nesterov, neg_lr, maximize, PARALLEL_MIN,
                    _THREADS["intra"])


# ---- gather along a dim / topk over the last dim (eager_source_select.py: ndarray objects in) ---------------

_GATHER_SIZES = (1, 2, 4, 8)


def gather_dim(x, idx, dim: int):
    """``(out, bad)``: x at the int64 indices ``idx`` along ``dim`` (x and idx of one rank >= 1, idx no
    larger than x off ``dim``, any strides) and -1, or ``(None, flat position of the first index out of
    range)``; None where NumPy runs."""
    fns = _STATE[0] or _fns()
    if not fns or not fns["_objects"] or type(x) is not _NDARRAY or type(idx) is not _NDARRAY \
            or idx.dtype != _I64 or x.itemsize not in _GATHER_SIZES or x.dtype.hasobject:
        return None
    out = np.empty(idx.shape, x.dtype)
    bad = fns["gather_dim"](x, idx, out, dim, x.itemsize)
    if bad == -2:
        return None
    return (out, -1) if bad < 0 else (None, bad)


def topk_last(x, k: int, largest: bool):
    """``(values, int64 indices)`` of the ``k`` largest (smallest) of each row of a C-contiguous float32
    array over its last dim, in order (stable, NaN largest); None where NumPy runs (k above 64: the
    insertion is O(n k))."""
    fns = _STATE[0] or _fns()
    if not fns or not fns["_objects"] or k > 64 or not _ok(x) or x.ndim == 0:
        return None
    shape = x.shape[:-1] + (k,)
    vals = np.empty(shape, _F32)
    inds = np.empty(shape, _I64)
    fns["topk_last"](x, vals, inds, k, largest)
    return vals, inds
