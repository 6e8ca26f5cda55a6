"""C for the kernels that are not plain loop nests: matmuls (BLAS calls, split over threads, or
generated loops), reductions over non-trailing dims, and scatter-adds. Functions of a
``render_c.KernelGen`` ``g`` (its scopes, naming and expression emission). Also the loop-nest
scaffolding both modules use (``Scope``, ``Block``)."""
from __future__ import annotations

import math

import numpy as np

from . import prims as P
from . import lower as L
from . import gemm as _gemm
from .lower import Aff, strided_layout, gemm_operand
from .symbolic import SymInt


class Scope:
    __slots__ = ("level", "lines", "memo")

    def __init__(self, level):
        self.level = level
        self.lines = []
        self.memo = {}


class Block:
    """A loop (header line) around a scope; ``pragma`` goes above the header. ``par``: (variable, extent,
    step, work) of a kernel's parallel loop (render_par.py runs it on ember's pool), else None."""

    __slots__ = ("header", "scope", "pragma", "par")

    def __init__(self, header, scope, pragma=None, par=None):
        self.header = header
        self.scope = scope
        self.pragma = pragma
        self.par = par


_PAR = "EMBER_PARALLEL_FOR("


def _text(lines, indent) -> list:
    out = []
    pad = "  " * indent
    for ln in lines:
        if isinstance(ln, Block):
            p = ln.pragma
            if p and p.startswith(_PAR) and "em_s" in p:
                # a parallel loop over a size known at run time only: the nest twice, the serial copy
                # outside OpenMP's outlined function (where the pointers lose ``restrict`` and the inner
                # loops vectorize worse: a softmax row kernel ran 1.5x slower than with constant sizes)
                out.append(pad + f"if ({p[len(_PAR):-1]} >= EMBER_PARALLEL_MIN) {{")
                out += _text([Block(ln.header, ln.scope, _PAR + "EMBER_PARALLEL_MIN)")], indent + 1)
                out.append(pad + "} else {")
                out += _text([Block(ln.header, ln.scope)], indent + 1)
                out.append(pad + "}")
                continue
            if p:
                out.append(pad + p)
            out.append(pad + ln.header + " {")
            out += _text(ln.scope.lines, indent + 1)
            out.append(pad + "}")
        else:
            out.append(pad + ln)
    return out


def minmax_update(op, sfx, a, v) -> str:
    """``a = max(a, v)`` (or min) as C; bool reductions (any/all) are ``|=`` / ``&=``: GCC 12 at -O3 with
    AVX2 miscompiles a vectorized max-reduction of comparison results (it keeps the 0xFF lane masks)."""
    if sfx == "b8":
        return f"{a} {'|' if op == 'max' else '&'}= {v};"
    return f"{a} = em_{op}_{sfx}({a}, {v});"


def arg_update(g, op, a, ai, v, ridx, R) -> str:
    """argmax/argmin step as C: keep the value in ``a`` and its flat index over the reduced dims ``ridx``
    (of shape ``R``) in ``ai``. NumPy: the first extreme wins; the first NaN wins over everything."""
    lin = Aff()
    for d, s in zip(ridx, L.cstrides(R)):
        lin = lin + d.scale(s)
    cmp = ">" if op == "argmax" else "<"
    return f"if ({a} == {a} && ({v} {cmp} {a} || {v} != {v})) {{ {a} = {v}; {ai} = {g.render_aff(lin, 'val')}; }}"


def _many(nb) -> bool:
    """More than one batch: a symbolic count is (a batch loop of one trip costs nothing)."""
    return type(nb) is SymInt or nb > 1


def emit_gemm(g, st):
    n = st.node
    A, B = n.inputs
    nb, M, N = n.shape
    K = A.shape[2]
    out = g.bufname(st.buffer)
    mat = g.sched.mat

    def is_leaf(x):
        return x.op == "load" or x.id in mat

    def operand(x):
        leaf, strides, off = strided_layout(x, is_leaf)
        buf = leaf.buffer if leaf.op == "load" else g.sched.node_buffer[leaf.id]
        return g.bufname(buf), strides, off

    an, (sab, sam, sak), aoff = operand(A)
    bn, (sbb, sbk, sbn), boff = operand(B)
    t = P.ctype(n.dtype)
    if M * N == 0:
        return
    if K == 0:
        g.emit(0, f"memset({out}, 0, sizeof({t}) * {nb * M * N}LL);")
        return
    small = M * N * K < g.opt.small_gemm_loops
    if g.opt.use_blas and not small:
        g.uses_blas = True
        ta, lda = gemm_operand(sam, sak, M, K)
        tb, ldb = gemm_operand(sbk, sbn, K, N)
        fn = "cblas_sgemm" if n.dtype == np.float32 else "cblas_dgemm"
        one = "1.0f" if n.dtype == np.float32 else "1.0"
        zero = "0.0f" if n.dtype == np.float32 else "0.0"

        def ptr(name, off, bstride):
            p = name + (f" + {off}LL" if off else "")
            return p + (f" + b * {bstride}LL" if _many(nb) and bstride else "")
        work = nb * M * N * K
        symbolic = type(work) is SymInt          # sizes at run time: the choice below is made there too
        native = n.dtype == np.float32 and getattr(g.opt, "native_gemm", False)
        if native and (symbolic or work >= _gemm.MIN_WORK):
            # ember's GEMM (gemm.py: packed panels, the OpenMP pool, M/N/K at run time); the BLAS
            # where the CPU lacks AVX-512/AVX2 or a buffer cannot be allocated
            blas = (f"{fn}(CblasRowMajor, {ta}, {tb}, {M}, {N}, {K}, {one}, {ptr(an, aoff, sab)}, {lda}, "
                    f"{ptr(bn, boff, sbb)}, {ldb}, {zero}, {ptr(out, 0, M * N)}, {N})")
            if _many(nb):
                blas = f"for (int64_t b = 0; b < {nb}LL; b++) {blas}"
            call = (f"EM_SGEMM_NT_OR({blas}, {nb}L, {int(ta == 'CblasTrans')}, {int(tb == 'CblasTrans')}, {M}L, {N}L, "
                    f"{K}L, {an} + {aoff}LL, {lda}L, {sab if _many(nb) else 0}L, {bn} + {boff}LL, {ldb}L, "
                    f"{sbb if _many(nb) else 0}L, {out}, {N}L, {M * N}L);")
            g.emit(0, f"if ({work}LL >= {_gemm.MIN_WORK}LL) {call} else {blas};" if symbolic else call)
            return
        if work >= g.opt.gemm_split_min and nb > 1:
            # batches spread over the OpenMP threads, one single-threaded GEMM each
            call = (f"{fn}(CblasRowMajor, {ta}, {tb}, {M}, {N}, {K}, {one}, {ptr(an, aoff, sab)}, {lda}, "
                    f"{ptr(bn, boff, sbb)}, {ldb}, {zero}, {ptr(out, 0, M * N)}, {N});")
            g.emit(0, "EMBER_PRAGMA(omp parallel for schedule(static))")
            g.emit(0, f"for (int64_t b = 0; b < {nb}LL; b++) {call}")
            return
        if work >= g.opt.gemm_split_min and max(M, N) >= 16:
            # one GEMM split into row (or column) blocks of C, one per OpenMP thread; each block is a
            # single-threaded BLAS call. The OpenMP pool sleeps between kernels (passive waiting),
            # where BLAS's own pool would spin against everything else on the machine
            if M >= N:
                a_p, b_p, c_p, dims = f"{an} + {aoff}LL + lo * {sam}LL", f"{bn} + {boff}LL", f"{out} + lo * {N}LL", \
                    "(int)(hi - lo), " + f"{N}"
                ext = M
            else:
                a_p, b_p, c_p, dims = f"{an} + {aoff}LL", f"{bn} + {boff}LL + lo * {sbn}LL", f"{out} + lo", \
                    f"{M}, " + "(int)(hi - lo)"
                ext = N
            g.emit(0, "{")
            g.emit(0, "  const int np = EM_NTHREADS();")
            g.emit(0, "  EMBER_PRAGMA(omp parallel for schedule(static) if(np > 1))")
            g.emit(0, "  for (int part = 0; part < np; part++) {")
            g.emit(0, f"    const int64_t lo = {ext}LL * part / np, hi = {ext}LL * (part + 1) / np;")
            g.emit(0, f"    if (hi > lo) {fn}(CblasRowMajor, {ta}, {tb}, {dims}, {K}, {one}, {a_p}, {lda}, "
                         f"{b_p}, {ldb}, {zero}, {c_p}, {N});")
            g.emit(0, "  }")
            g.emit(0, "}")
            return
        call = (f"{fn}(CblasRowMajor, {ta}, {tb}, {M}, {N}, {K}, {one}, {ptr(an, aoff, sab)}, {lda}, "
                f"{ptr(bn, boff, sbb)}, {ldb}, {zero}, {ptr(out, 0, M * N)}, {N});")
        if nb == 1:
            g.emit(0, call)
        else:
            g.emit(0, f"for (int64_t b = 0; b < {nb}LL; b++) {call}")
        return
    # generated loops: C[m, :] += A[m, k] * B[k, :] (the inner loop runs along C's rows)
    acc = t
    g.emit(0, f"memset({out}, 0, sizeof({t}) * {nb * M * N}LL);")
    par = "EMBER_PARALLEL_FOR(" + f"{nb * M * N * K}LL)"
    g.emit(0, par)
    g.emit(0, f"for (int64_t bm = 0; bm < {nb * M}LL; bm++) {{")
    g.emit(0, f"  const int64_t b = bm / {M}, m = bm % {M};")
    g.emit(0, f"  {t} *restrict c = {out} + bm * {N}LL;")
    g.emit(0, f"  for (int64_t kk = 0; kk < {K}LL; kk++) {{")
    g.emit(0, f"    const {acc} a = {an}[{aoff} + b * {sab}LL + m * {sam}LL + kk * {sak}LL];")
    g.emit(0, f"    const {t} *restrict bp = {bn} + {boff} + b * {sbb}LL + kk * {sbk}LL;")
    g.emit(0, f"    for (int64_t j = 0; j < {N}LL; j++) c[j] += a * bp[j * {sbn}LL];")
    g.emit(0, "  }")
    g.emit(0, "}")


def gen_colreduce(g, dry, records=None):
    """A reduction whose reduced dims are not all trailing: kept dims outside, reduced inside. When
    the last dim is kept, a block of it is accumulated at once (contiguous, vectorizable)."""
    k = g.k
    g.prologue()
    st = k.stmts[0]
    n = st.node
    x = n.inputs[0]
    axes = n.attrs["axes"]
    op = n.attrs["op"]
    nd = len(x.shape)
    # kept dims after the last reduced dim run innermost
    last_red = max(axes)
    kin = [d for d in range(last_red + 1, nd)]
    kout = [d for d in range(nd) if d not in axes and d not in kin]
    out = g.bufname(st.buffer)
    at = g.dialect.accumulator_type(op, x.dtype)
    init = P.reduce_init(op, x.dtype)
    xidx = [None] * nd
    for d in range(nd):
        v = f"c{d}"
        g.ranges[v] = (0, max(x.shape[d] - 1, 0))
        xidx[d] = Aff.var(v) if x.shape[d] > 1 else Aff()
    lvl = 0
    total = math.prod(x.shape)
    # outer kept loops (one per dim: simple and rarely hot)
    for i, d in enumerate(kout):
        g.var_level[f"c{d}"] = lvl + 1
        sc = Scope(lvl + 1)
        g.scopes.append(sc)
        lvl += 1
    kin_ext = math.prod([x.shape[d] for d in kin]) if kin else 1
    arg = op in ("argmax", "argmin")
    sfx = P.suffix(x.dtype)
    t = P.ctype(n.dtype)
    oidx_base = [xidx[d] if d not in axes else Aff() for d in range(nd)]
    if kin:
        BLK = g.dialect.colreduce_block(kin_ext)
        # the flattened kept-inner index v = kb + q
        g.ranges["q"] = (0, BLK - 1)
        g.ranges["kb"] = (0, max(kin_ext - 1, 0))
        g.ranges["kv"] = (0, max(kin_ext - 1, 0))
        vidx = L.reshape_index(tuple(x.shape[d] for d in kin), (kin_ext,), [Aff.var("kv")], g.ranges) \
            if len(kin) > 1 else [Aff.var("kv")]
        for d, a in zip(kin, vidx):
            xidx[d] = a
            oidx_base[d] = a
        kb_level = lvl + 1
        g.var_level["kb"] = kb_level
        sc_kb = Scope(kb_level)
        g.scopes.append(sc_kb)
        g.emit(kb_level, f"const int64_t nq = {kin_ext}LL - kb < {BLK} ? {kin_ext}LL - kb : {BLK};")
        g.emit(kb_level, f"{at} acc[{BLK}];")
        if arg:
            g.emit(kb_level, f"int64_t ai[{BLK}];")
        g.emit(kb_level, f"for (int64_t q = 0; q < nq; q++) {{ acc[q] = {init};"
                            + (" ai[q] = 0;" if arg else "") + " }")
        # reduced loops
        red_level = kb_level
        for d in axes:
            red_level += 1
            g.var_level[f"c{d}"] = red_level
            g.scopes.append(Scope(red_level))
        ql = red_level + 1
        g.var_level["kv"] = ql
        g.var_level["q"] = ql
        sq = Scope(ql)
        g.scopes.append(sq)
        g.emit(ql, "const int64_t kv = kb + q;")
        v = g.val(x, xidx)
        if op == "sum":
            g.emit(ql, f"acc[q] += {v};")
        elif op == "prod":
            g.emit(ql, f"acc[q] *= {v};")
        elif op in ("max", "min"):
            g.emit(ql, minmax_update(op, sfx, "acc[q]", v))
        else:
            lin = Aff()
            for d, s in zip(axes, L.cstrides(tuple(x.shape[d] for d in axes))):
                lin = lin + xidx[d].scale(s)
            cmp = ">" if op == "argmax" else "<"
            g.emit(ql, f"if (acc[q] == acc[q] && ({v} {cmp} acc[q] || {v} != {v})) {{ acc[q] = {v}; "
                          f"ai[q] = {g.render_aff(lin, 'val')}; }}")
        g.scopes.pop()
        blk = Block("for (int64_t q = 0; q < nq; q++)", sq)
        g.scopes[-1].lines.append(blk)
        for d in reversed(axes):
            sc = g.scopes.pop()
            g.scopes[-1].lines.append(Block(f"for (int64_t c{d} = 0; c{d} < {x.shape[d]}LL; c{d}++)", sc))
        # write back the block
        ooff = L.offset(oidx_base, L.cstrides(n.shape))
        g.ranges["kv"] = (0, max(kin_ext - 1, 0))
        res = "ai[q]" if arg else f"({t})acc[q]"
        g.emit(kb_level, f"for (int64_t q = 0; q < nq; q++) {{ const int64_t kv = kb + q; "
                            f"{out}[{g.render_aff(ooff)}] = {res}; }}")
        sc = g.scopes.pop()
        work = total if not kout else None
        header, par = g.dialect.loop("kb", kin_ext, step=BLK, parallel_work=work)
        g.scopes[-1].lines.append(Block(header, sc, par, ("kb", kin_ext, BLK, work) if work is not None else None))
    else:
        # last dim reduced: a scalar accumulator per kept position
        acc = g.tmp("acc")
        base = lvl
        g.emit(base, f"{at} {acc} = {init};", acc)
        ai = None
        if arg:
            ai = g.tmp("ai")
            g.emit(base, f"int64_t {ai} = 0;", ai)
        red_level = base
        for d in axes:
            red_level += 1
            g.var_level[f"c{d}"] = red_level
            g.scopes.append(Scope(red_level))
        v = g.val(x, xidx)
        reduce_update_at(g, op, acc, ai, v, red_level, sfx, [xidx[d] for d in axes],
                              tuple(x.shape[d] for d in axes))
        for d in reversed(axes):
            sc = g.scopes.pop()
            g.scopes[-1].lines.append(Block(f"for (int64_t c{d} = 0; c{d} < {x.shape[d]}LL; c{d}++)", sc))
        ooff = L.offset(oidx_base, L.cstrides(n.shape))
        res = ai if arg else f"({t}){acc}"
        g.emit(base, f"{out}[{g.render_aff(ooff)}] = {res};")
    for i in range(len(kout) - 1, -1, -1):
        d = kout[i]
        sc = g.scopes.pop()
        header, par = g.dialect.loop(f"c{d}", x.shape[d], parallel_work=total if i == 0 else None)
        g.scopes[-1].lines.append(Block(header, sc, par, (f"c{d}", x.shape[d], 1, total) if i == 0 else None))

def reduce_update_at(g, op, a, ai, v, level, sfx, ridx, R):
    if op == "sum":
        g.emit(level, f"{a} += {v};")
    elif op == "prod":
        g.emit(level, f"{a} *= {v};")
    elif op in ("max", "min"):
        g.emit(level, minmax_update(op, sfx, a, v))
    else:
        g.emit(level, arg_update(g, op, a, ai, v, ridx, R))


def gen_scatter(g, dry, records=None):
    k = g.k
    g.prologue()
    st = k.stmts[0]
    n = st.node
    g2, i1 = n.inputs
    rows, d = g2.shape
    nw = n.attrs["rows"]
    skip = n.attrs["skip"]
    out = g.bufname(st.buffer)
    t = P.ctype(n.dtype)
    g.emit(0, f"memset({out}, 0, sizeof({t}) * {nw * d}LL);")
    g.ranges["si"] = (0, max(rows - 1, 0))
    g.ranges["sj"] = (0, max(d - 1, 0))
    g.var_level["si"] = 1
    g.var_level["sj"] = 2
    si = Scope(1)
    g.scopes.append(si)
    iv = g.val(i1, [Aff.var("si") if rows > 1 else Aff()])
    g.has_check = True
    g.emit(1, f"const int64_t id = {iv};")
    if skip >= 0:
        g.emit(1, f"if (id == {skip}LL) continue;")
    g.emit(1, f"if ((uint64_t)id >= (uint64_t){nw}LL) {{ em_err[0] = -1; em_err[1] = id; continue; }}")
    sj = Scope(2)
    g.scopes.append(sj)
    gv = g.val(g2, [Aff.var("si") if rows > 1 else Aff(), Aff.var("sj") if d > 1 else Aff()])
    g.emit(2, f"{out}[id * {d}LL + sj] += {gv};")
    g.scopes.pop()
    si.lines.append(Block(f"for (int64_t sj = 0; sj < {d}LL; sj++)", sj))
    g.scopes.pop()
    g.scopes[-1].lines.append(Block(f"for (int64_t si = 0; si < {rows}LL; si++)", si))
