"""Generated OpenCL GEMM kernels: ``C[b] = A[b] @ B[b]`` for one shape, layout and dtype.

Shapes, strides and offsets are constants in the source (kernels are shape-specialised like the rest of
the generated code), so a transposed operand is just other strides: no copy, no flag. The batch is the
third NDRange dimension. Sizes need not be multiples of any tile: edge blocks are guarded.

Two families, :func:`kernel` picks:

- CPU devices, explicit vectors (:func:`vector_source`): a work-item computes a 4 x 16 block of C from
  ``float8`` loads of B's rows times broadcast A elements when B's rows are contiguous (``A @ B``,
  ``A.T @ B``), or 4 x 4 dot products from ``float8`` loads along K when A's rows and B's columns are
  (``A @ B.T``, nn.Linear's forward); other layouts use the register-blocked scalar kernel below.
- GPUs (and the other CPU layouts): work-group ``(LX, LY)`` computes a ``TM x TN`` tile of C, each
  work-item an ``RM x RN`` block of it; with ``local=True`` K is walked in ``TK`` steps through tiles of A
  and B staged in local memory (loaded in the order that reads each operand's memory contiguously,
  zero-padded past the edges): the standard GPU kernel (16x16 work-groups, 4x4 per item).

Measured with ``python -m ember.compiler.cl_gemm 512`` on this project's machine (PoCL 3.1, CPU device
"pthread-haswell", 2 cores shared with other work, so +-50% between runs; float32 512^3, GFLOP/s):
local-memory tiles 16x16, 1 per item: 0.5-1.0; 16x16 tiles 4x4 per item: 1.2-2.4; register blocks
without local memory (8x8 items, 4x4 each): 2.5-4.5; explicit vectors: 18-25 ("rows") and 15-48
("dots"); CLBlast 1.5.3 through pyclblast 1.4.0 (Debian's libclblast, untuned for this device): 2.0.
CLBlast is therefore not used: on PoCL the generated vector kernels are ~10x faster, and they need
no extra library. (For scale: NumPy's OpenBLAS on one core of this machine does ~60-100.)
"""
from __future__ import annotations

import numpy as np

class Config:
    __slots__ = ("LX", "LY", "RM", "RN", "TK", "local")

    def __init__(self, LX=16, LY=16, RM=4, RN=4, TK=16, local=True):
        self.LX, self.LY, self.RM, self.RN, self.TK, self.local = LX, LY, RM, RN, TK, local

    @property
    def TM(self):
        return self.LY * self.RM

    @property
    def TN(self):
        return self.LX * self.RN

    def key(self):
        return (self.LX, self.LY, self.RM, self.RN, self.TK, self.local)

    def __repr__(self):
        return f"Config(LX={self.LX}, LY={self.LY}, RM={self.RM}, RN={self.RN}, TK={self.TK}, local={self.local})"


def kernel(fname, ctype, nb, M, N, K, a_layout, b_layout, dev, epi=None) -> tuple:
    """(source, global size, local size or None) of the GEMM kernel ``fname`` for device ``dev``.

    ``epi`` fuses an elementwise epilogue: ``(extra kernel parameters, call)`` where ``call(e)`` is the
    statement that finishes element ``e`` (its linear index in C) once the work-item stored it."""
    if getattr(dev, "is_cpu", False):
        kind = vector_kind(a_layout, b_layout, M, N, K)
        if kind is not None:
            gs, ls = vector_sizes(kind, nb, M, N)
            return vector_source(fname, ctype, kind, nb, M, N, K, a_layout, b_layout, epi=epi), gs, ls
    cfg = choose(dev, M, N, K)
    gs, ls = sizes(cfg, nb, M, N)
    return source(fname, ctype, ctype, nb, M, N, K, a_layout, b_layout, cfg, epi=epi), gs, ls


def _epi(epi, N):
    """(extra parameters, fn(row, col) -> statement finishing that element of C or "")."""
    if epi is None:
        return "", lambda r, c: ""
    params, call = epi
    return params, lambda r, c: " " + call(f"em_cb + ({r}) * {N}L + ({c})")


def _head(fname, T, M, N, a_layout, b_layout, epi, attributes=""):
    """The first lines of a GEMM kernel (its signature; ``a``, ``b``, ``c`` pointing at batch ``bt``'s
    operands; ``em_cb``, the batch's first element of C, the epilogue's index base) and the epilogue's
    ``fin`` (see ``_epi``): (lines, fin)."""
    sab, aoff = a_layout[0], a_layout[3]
    sbb, boff = b_layout[0], b_layout[3]
    extra, fin = _epi(epi, N)
    return [f"__kernel{attributes}",
            f"void {fname}(__global {T} *c_, const long c_o, __global const {T} *a_, const long a_o, "
            f"__global const {T} *b_, const long b_o{extra}) {{",
            "  const long bt = get_global_id(2);",
            f"  const long em_cb = bt * {M * N}L;",
            f"  __global const {T} *a = a_ + a_o + {aoff}L + bt * {sab}L;",
            f"  __global const {T} *b = b_ + b_o + {boff}L + bt * {sbb}L;",
            f"  __global {T} *c = c_ + c_o + bt * {M * N}L;"], fin


def choose(rt, M, N, K) -> Config:
    """The configuration for an ``M x N x K`` product on runtime ``rt`` (see the module docstring)."""
    if rt is not None and getattr(rt, "is_cpu", False):
        # CPU devices: no local memory staging, a 4x4 block per work-item, 8x8 work-groups
        cfg = Config(LX=8, LY=8, RM=4, RN=4, local=False)
    else:
        cfg = Config(LX=16, LY=16, RM=4, RN=4, TK=16, local=True)
    wg = int(getattr(rt, "max_work_group", 256) or 256)
    while cfg.LX * cfg.LY > wg:            # the device's work-group limit
        if cfg.LY >= cfg.LX:
            cfg.LY //= 2
        else:
            cfg.LX //= 2
    # small products: smaller tiles, so there are work-groups enough to fill the device
    while cfg.RM > 1 and (M < cfg.TM or N < cfg.TN) and (M * N) < 64 * cfg.TM * cfg.TN:
        cfg.RM //= 2
        cfg.RN //= 2
    return cfg


def sizes(cfg: Config, nb, M, N):
    """(global size, local size) of the NDRange."""
    gx = -(-N // cfg.TN) * cfg.LX
    gy = -(-M // cfg.TM) * cfg.LY
    return (gx, gy, nb), (cfg.LX, cfg.LY, 1)


def vector_kind(a_layout, b_layout, M, N, K, vw=8):
    """"rows" when B's rows are contiguous (C's columns are loaded as vectors), "dots" when A's rows
    and B's columns are (products along K as vectors), else None."""
    sab, sam, sak, aoff = a_layout
    sbb, sbk, sbn, boff = b_layout
    if sbn == 1 and N >= vw:
        return "rows"
    if sak == 1 and sbk == 1 and K >= vw:
        return "dots"
    return None


def vector_sizes(kind, nb, M, N, RM=4, RV=2, RN=4, vw=8):
    if kind == "rows":
        return (-(-N // (vw * RV)), -(-M // RM), nb), None
    return (-(-N // RN), -(-M // RM), nb), None


def vector_source(fname, ctype, kind, nb, M, N, K, a_layout, b_layout, RM=4, RV=2, RN=4, vw=8, epi=None) -> str:
    """Explicit-vector kernels for CPU devices: each work-item computes an ``RM x (vw*RV)`` block of C
    (``kind="rows"``: B's rows contiguous, a ``vload`` of B times a broadcast A element) or ``RM x RN``
    dot products along K (``kind="dots"``: A's rows and B's columns contiguous). Blocks cut by the edges
    of C take a scalar path with clamped reads."""
    sab, sam, sak, aoff = a_layout
    sbb, sbk, sbn, boff = b_layout
    T = ctype
    V = f"{T}{vw}"
    L, fin = _head(fname, T, M, N, a_layout, b_layout, epi)
    e = L.append
    if kind == "rows":
        W = vw * RV
        e(f"  const long m = (long)get_global_id(1) * {RM}, n = (long)get_global_id(0) * {W};")
        e(f"  if (m + {RM} <= {M}L && n + {W} <= {N}L) {{")
        for i in range(RM):
            for v in range(RV):
                e(f"    {V} c{i}_{v} = ({V})(0);")
        e(f"    for (long k = 0; k < {K}L; k++) {{")
        for v in range(RV):
            e(f"      const {V} b{v} = vload{vw}(0, b + k * {sbk}L + n + {v * vw});")
        for i in range(RM):
            e(f"      const {V} a{i} = ({V})(a[(m + {i}) * {sam}L + k * {sak}L]);")
            for v in range(RV):
                e(f"      c{i}_{v} += a{i} * b{v};")
        e("    }")
        for i in range(RM):
            for v in range(RV):
                e(f"    vstore{vw}(c{i}_{v}, 0, c + (m + {i}) * {N}L + n + {v * vw});")
        if epi is not None:
            e(f"    for (int i = 0; i < {RM}; i++) for (int j = 0; j < {W}; j++){fin('m + i', 'n + j')}")
        e("    return;")
        e("  }")
        # edge blocks: scalar
        e(f"  for (long i = m; i < m + {RM} && i < {M}L; i++)")
        e(f"    for (long j = n; j < n + {W} && j < {N}L; j++) {{")
        e(f"      {T} s = 0;")
        e(f"      for (long k = 0; k < {K}L; k++) s += a[i * {sam}L + k * {sak}L] * b[k * {sbk}L + j];")
        e(f"      c[i * {N}L + j] = s;{fin('i', 'j')}")
        e("    }")
    else:
        e(f"  const long m = (long)get_global_id(1) * {RM}, n = (long)get_global_id(0) * {RN};")
        e(f"  long ra[{RM}], cb[{RN}];")
        for i in range(RM):
            e(f"  ra[{i}] = (m + {i} < {M}L ? m + {i} : 0) * {sam}L;")
        for j in range(RN):
            e(f"  cb[{j}] = (n + {j} < {N}L ? n + {j} : 0) * {sbn}L;")
        for i in range(RM):
            for j in range(RN):
                e(f"  {V} d{i}_{j} = ({V})(0);")
        KV = K // vw * vw
        e(f"  for (long k = 0; k < {KV}L; k += {vw}) {{")
        for j in range(RN):
            e(f"    const {V} b{j} = vload{vw}(0, b + cb[{j}] + k);")
        for i in range(RM):
            e(f"    const {V} a{i} = vload{vw}(0, a + ra[{i}] + k);")
            for j in range(RN):
                e(f"    d{i}_{j} += a{i} * b{j};")
        e("  }")
        for i in range(RM):
            for j in range(RN):
                e(f"  {T} s{i}_{j} = " + " + ".join(f"d{i}_{j}.s{q:x}" for q in range(vw)) + ";")
        if KV < K:
            e(f"  for (long k = {KV}L; k < {K}L; k++) {{")
            for i in range(RM):
                for j in range(RN):
                    e(f"    s{i}_{j} += a[ra[{i}] + k] * b[cb[{j}] + k];")
            e("  }")
        for i in range(RM):
            for j in range(RN):
                e(f"  if (m + {i} < {M}L && n + {j} < {N}L) {{ c[(m + {i}) * {N}L + n + {j}] = s{i}_{j};"
                  f"{fin(f'm + {i}', f'n + {j}')} }}")
    e("}")
    return "\n".join(L)


def source(fname, ctype, acc_type, nb, M, N, K, a_layout, b_layout, cfg: Config, epi=None) -> str:
    """OpenCL C of kernel ``fname(c, c_off, a, a_off, b, b_off)``.

    ``a_layout`` = (batch stride, row stride, k stride, offset) of A in elements (B: batch, k, column
    strides and offset); ``ctype`` is the element type, ``acc_type`` what products are summed in."""
    sab, sam, sak, aoff = a_layout
    sbb, sbk, sbn, boff = b_layout
    LX, LY, RM, RN, TK = cfg.LX, cfg.LY, cfg.RM, cfg.RN, cfg.TK
    TM, TN = cfg.TM, cfg.TN
    T, A = ctype, acc_type
    L, fin = _head(fname, T, M, N, a_layout, b_layout, epi, f" __attribute__((reqd_work_group_size({LX}, {LY}, 1)))")
    e = L.append
    e("  const int lx = get_local_id(0), ly = get_local_id(1);")
    e(f"  const long m0 = (long)get_group_id(1) * {TM}, n0 = (long)get_group_id(0) * {TN};")
    e(f"  {A} acc[{RM}][{RN}];")
    e(f"  for (int i = 0; i < {RM}; i++) for (int j = 0; j < {RN}; j++) acc[i][j] = 0;")
    if cfg.local:
        e(f"  __local {T} As[{TK}][{TM}];")
        e(f"  __local {T} Bs[{TK}][{TN}];")
        e(f"  const int lid = ly * {LX} + lx;")
        e(f"  for (long k0 = 0; k0 < {K}L; k0 += {TK}) {{")
        # A tile (TM rows x TK): the contiguous direction of A varies fastest across work-items
        if sak == 1 or sam != 1:
            e(f"    for (int l = lid; l < {TM * TK}; l += {LX * LY}) {{ const int r = l / {TK}, q = l % {TK};")
        else:
            e(f"    for (int l = lid; l < {TM * TK}; l += {LX * LY}) {{ const int r = l % {TM}, q = l / {TM};")
        e("      const long m = m0 + r, k = k0 + q;")
        e(f"      As[q][r] = (m < {M}L && k < {K}L) ? a[m * {sam}L + k * {sak}L] : ({T})0; }}")
        if sbn == 1 or sbk != 1:
            e(f"    for (int l = lid; l < {TN * TK}; l += {LX * LY}) {{ const int q = l / {TN}, s = l % {TN};")
        else:
            e(f"    for (int l = lid; l < {TN * TK}; l += {LX * LY}) {{ const int q = l % {TK}, s = l / {TK};")
        e("      const long k = k0 + q, n = n0 + s;")
        e(f"      Bs[q][s] = (k < {K}L && n < {N}L) ? b[k * {sbk}L + n * {sbn}L] : ({T})0; }}")
        e("    barrier(CLK_LOCAL_MEM_FENCE);")
        e(f"    for (int q = 0; q < {TK}; q++) {{")
        e(f"      {T} ar[{RM}], br[{RN}];")
        e(f"      for (int i = 0; i < {RM}; i++) ar[i] = As[q][ly + i * {LY}];")
        e(f"      for (int j = 0; j < {RN}; j++) br[j] = Bs[q][lx + j * {LX}];")
        e(f"      for (int i = 0; i < {RM}; i++) for (int j = 0; j < {RN}; j++) acc[i][j] += ({A})ar[i] * ({A})br[j];")
        e("    }")
        e("    barrier(CLK_LOCAL_MEM_FENCE);")
        e("  }")
    else:
        # rows and columns past the edge read row/column 0 (valid memory) and are not stored
        e(f"  long ra[{RM}], cb[{RN}];")
        e(f"  for (int i = 0; i < {RM}; i++) {{ const long m = m0 + ly + i * {LY}; "
          f"ra[i] = (m < {M}L ? m : 0) * {sam}L; }}")
        e(f"  for (int j = 0; j < {RN}; j++) {{ const long n = n0 + lx + j * {LX}; "
          f"cb[j] = (n < {N}L ? n : 0) * {sbn}L; }}")
        e(f"  for (long k = 0; k < {K}L; k++) {{")
        e(f"    {T} ar[{RM}], br[{RN}];")
        e(f"    for (int i = 0; i < {RM}; i++) ar[i] = a[ra[i] + k * {sak}L];")
        e(f"    for (int j = 0; j < {RN}; j++) br[j] = b[k * {sbk}L + cb[j]];")
        e(f"    for (int i = 0; i < {RM}; i++) for (int j = 0; j < {RN}; j++) acc[i][j] += ({A})ar[i] * ({A})br[j];")
        e("  }")
    e(f"  for (int i = 0; i < {RM}; i++) {{")
    e(f"    const long m = m0 + ly + i * {LY};")
    e(f"    if (m >= {M}L) break;")
    e(f"    for (int j = 0; j < {RN}; j++) {{")
    e(f"      const long n = n0 + lx + j * {LX};")
    e(f"      if (n < {N}L) {{ c[m * {N}L + n] = ({T})acc[i][j];{fin('m', 'n')} }}")
    e("    }")
    e("  }")
    e("}")
    return "\n".join(L)


# ---- measuring ------------------------------------------------------------------------------------------

def _median_seconds(call, finish, reps):
    """The median wall time of ``call(); finish()`` over ``reps`` runs, after one warm-up run."""
    import time
    call()
    finish()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        finish()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def _time_gemm(rt, src, launch, A, B, out_shape, reps):
    """Build ``src`` (kernel ``gemm(C, 0, A, 0, B, 0)``), run it on ``A``, ``B`` with the ``launch``
    (global, local) sizes: the median seconds per run and the result on the host."""
    k = rt.build(src, "-DEM_FP64" if rt.fp64 else "").gemm
    da, db = rt.to_device(A), rt.to_device(B)
    dc = rt.empty(out_shape, A.dtype)
    z = np.int64(0)
    k.set_args(dc.block.buffer, z, da.block.buffer, z, db.block.buffer, z)
    gs, ls = launch
    t = _median_seconds(lambda: rt.cl.enqueue_nd_range_kernel(rt.queue, k, gs, ls), rt.finish, reps)
    return t, rt.to_host(dc)


def _gflops_and_error(M, N, K, t, C, ref):
    err = float(np.max(np.abs(C - ref)) / (np.max(np.abs(ref)) + 1e-30))
    return 2.0 * M * N * K / t / 1e9, err


def _bench(rt, cfg, M, N, K, reps=5, dtype=np.float32, trans_a=False):
    from .render_cl import CL_HEAD
    ct = "float" if dtype == np.float32 else "double"
    a_lay = (0, 1, M, 0) if trans_a else (0, K, 1, 0)
    src = CL_HEAD + source("gemm", ct, ct, 1, M, N, K, a_lay, (0, N, 1, 0), cfg)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((K, M) if trans_a else (M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    t, C = _time_gemm(rt, src, sizes(cfg, 1, M, N), A, B, (M, N), reps)
    ref = (A.T if trans_a else A).astype(np.float64) @ B.astype(np.float64)
    return _gflops_and_error(M, N, K, t, C, ref)


def _bench_vec(rt, M, N, K, reps=5, trans=False):
    from .render_cl import CL_HEAD
    a_lay = (0, K, 1, 0)
    b_lay = (0, 1, K, 0) if trans else (0, N, 1, 0)
    kind = vector_kind(a_lay, b_lay, M, N, K)
    src = CL_HEAD + vector_source("gemm", "float", kind, 1, M, N, K, a_lay, b_lay)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((N, K) if trans else (K, N)).astype(np.float32)
    t, C = _time_gemm(rt, src, vector_sizes(kind, 1, M, N), A, B, (M, N), reps)
    ref = A.astype(np.float64) @ (B.T if trans else B).astype(np.float64)
    return _gflops_and_error(M, N, K, t, C, ref)


def _bench_clblast(rt, M, N, K, reps=5):
    import pyclblast
    import pyopencl.array as cla
    rng = np.random.default_rng(0)
    A = cla.to_device(rt.queue, rng.standard_normal((M, K)).astype(np.float32))
    B = cla.to_device(rt.queue, rng.standard_normal((K, N)).astype(np.float32))
    C = cla.zeros(rt.queue, (M, N), np.float32)
    t = _median_seconds(lambda: pyclblast.gemm(rt.queue, M, N, K, A, B, C, a_ld=K, b_ld=N, c_ld=N),
                        rt.finish, reps)
    return 2.0 * M * N * K / t / 1e9


if __name__ == "__main__":
    import sys
    from .cl_device import runtime
    rt = runtime()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    print(f"device: {rt.device.name}; {n}x{n}x{n} float32")
    for cfg in (Config(16, 16, 1, 1, 16, True), Config(16, 16, 4, 4, 16, True),
                Config(8, 8, 4, 4, 0, False), Config(4, 16, 4, 4, 0, False)):
        g, err = _bench(rt, cfg, n, n, n)
        print(f"  {cfg}: {g:7.2f} GFLOP/s (rel. error {err:.1e})")
    for tr in (False, True):
        g, err = _bench_vec(rt, n, n, n, trans=tr)
        print(f"  explicit vectors ({'dots' if tr else 'rows'}): {g:7.2f} GFLOP/s (rel. error {err:.1e})")
    try:
        print(f"  CLBlast: {_bench_clblast(rt, n, n, n):7.2f} GFLOP/s")
    except ImportError as e:
        print(f"  CLBlast: not available ({e})")
