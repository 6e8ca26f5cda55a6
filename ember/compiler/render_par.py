"""Parallel loops of generated C on ember's work pool (instead of OpenMP regions).

Why: OpenMP regions took their thread count from the process's OpenMP runtime, which torch shares
(``torch.set_num_threads(1)`` in any imported module made every compiled kernel single-threaded), forked
only from 1M iterations, and joined at a barrier that waits for a thread whose core is busy. ember's pool
(pool_c.py, in the GEMM's library) counts threads itself, sleeps passively and hands out items from a
claim counter, so a thread that wakes late takes fewer items instead of holding the others up.

How: a kernel whose outermost loop is parallel (``Block.par``: its variable, extent, step and work, the
loop's element count times its statements) is rendered as one C function with four more parameters::

    static void kernN(void **bufs, float *restrict p0, ..., int64_t em_lo, int64_t em_hi, int em_mode,
                      unsigned char *restrict em_v)

``em_mode & 1`` runs the code before the loop (a GEMM, a prologue's scalar stores, loop-invariant
values), ``& 4`` then saves the invariant values the loop reads into ``em_v`` (16 bytes each), ``& 2``
runs the loop over ``[em_lo, em_hi)`` (its invariants read back from ``em_v`` when the code before it did
not run). The entry calls it once with mode 3 over the whole extent when the loop is small (below
``EMBER_PARALLEL_MIN`` work, ``Options.parallel_min``) or ember runs one thread; else once with mode 5,
then on the pool with mode 2, one call per item, each a chunk of the extent (whole steps; multiples of
16 iterations when there are enough, so chunks start on vector boundaries). The code before the loop
thus runs once, as before (a prologue's ``step += 1`` must not run per chunk), and the loop runs with
``restrict`` parameters in every case (an outlined OpenMP body lost them and vectorized worse).

The task function and its argument struct (``kernN_task``, ``kernN_ctx``) are written beside the entry
functions, so ``units.py`` moves kernel functions to other translation units as before. Where the pool
is not bound (a CPU without ember's GEMM library) the items run in an OpenMP loop.
"""
from __future__ import annotations

import re

from . import prims as P
from .render_special import Block, _text

__all__ = ["POOL_STUB_C", "outline", "task_text", "call_text", "uses_pool", "PAR_PARAMS"]

PAR_PARAMS = "int64_t em_lo, int64_t em_hi, int em_mode, unsigned char *restrict em_v"

# a local defined by one statement at the kernel's top level: "const float t3 = <expr>;"
_DECL = re.compile(r"^(?:const )?(?P<type>(?:unsigned |signed )?[A-Za-z_]\w*) (?P<name>[A-Za-z_]\w*) = (?P<expr>.+);$")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
# any declaration at the top level (a local the loop might read that _DECL cannot carry: not outlined)
_ANY_DECL = re.compile(r"^(?:const )?(?:unsigned |signed )?[A-Za-z_]\w*(?: \*+| \*restrict| )+(?P<name>[A-Za-z_]\w*)\s*(?:\[|=|;)")

POOL_STUB_C = r"""/* ember's work pool for parallel loops, in the GEMM's library (ember.compiler.render_par) */
#include <string.h>
typedef void (*em_par_task)(void *, long, int);
typedef void (*em_par_pool_fn)(int, long, em_par_task, void *);
typedef int (*em_par_threads_fn)(void);
typedef struct { int64_t ext, step, chunk; long items; int nt; } em_par_span;
#ifndef EM_UNIT_EXTERN
__attribute__((visibility("hidden"))) em_par_pool_fn em_par_pool_ptr = 0;
__attribute__((visibility("hidden"))) em_par_threads_fn em_par_threads_ptr = 0, em_par_hot_ptr = 0;
__attribute__((visibility("hidden"))) int em_par_last_nt = 0;
__attribute__((visibility("hidden"))) long em_par_runs = 0;
void ember_bind_pool(void *run, void *threads, void *hot) {
  em_par_pool_ptr = (em_par_pool_fn)run;
  em_par_threads_ptr = (em_par_threads_fn)threads;
  em_par_hot_ptr = (em_par_threads_fn)hot;
}
/* the thread count the last parallel loop ran on (1: it ran on the caller alone) */
int ember_par_last_threads(void) { return em_par_last_nt; }
/* how many loops ran on several threads so far */
long ember_par_runs(void) { return em_par_runs; }
#else
extern __attribute__((visibility("hidden"))) long em_par_runs;
extern __attribute__((visibility("hidden"))) em_par_pool_fn em_par_pool_ptr;
extern __attribute__((visibility("hidden"))) em_par_threads_fn em_par_threads_ptr, em_par_hot_ptr;
extern __attribute__((visibility("hidden"))) int em_par_last_nt;
#endif
/* concurrent kernels (ember.compiler.concurrent): em_conc_in is 1 on a thread running one of a job's
   lanes, whose kernels then run on that thread alone (their loops unsplit, their GEMMs on one thread:
   the pool runs one job at a time, and a lane is already one of its items) */
#ifndef EM_UNIT_EXTERN
__attribute__((visibility("hidden"))) __thread int em_conc_in = 0;
__attribute__((visibility("hidden"))) long em_conc_jobs = 0;
/* how many concurrent jobs ran on the pool so far (tests, the bench) */
long ember_conc_jobs(void) { return em_conc_jobs; }
#else
extern __attribute__((visibility("hidden"))) __thread int em_conc_in;
extern __attribute__((visibility("hidden"))) long em_conc_jobs;
#endif
/* ember's GEMM on this thread alone inside a lane, else on ember's thread count (shared_gemm.GEMM_STUB_C's
   GEMM call, with the thread count passed) */
#define EM_SGEMM_NT_OR(blas, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc) \
  do { if (!em_sgemm_ptr || !em_sgemm_ptr(em_conc_in, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc)) \
       { blas; } } while (0)
#ifndef EM_PAR_ITEMS
#define EM_PAR_ITEMS 4            /* items per thread: a thread that wakes late takes fewer of them */
#endif
#ifndef EM_PAR_HOT_DIV
#define EM_PAR_HOT_DIV 4          /* while the pool's threads poll, loops split from this much less work */
#endif
#ifndef EM_PAR_HOT_DIV_EW
#define EM_PAR_HOT_DIV_EW 16      /* ... elementwise kernels from this much less (render_par.call_text) */
#endif
/* 1 when a loop of `work` runs on several threads: then s->chunk and s->items are set. From
   EMBER_PARALLEL_MIN work; from `hot_min` while the pool's threads poll for the next job (jobs in a
   train, pool_c.py): the threshold prices a 30-100 us wake-up that a polling thread does not pay */
__attribute__((unused)) static int em_par_plan(int64_t work, int64_t hot_min, em_par_span *s) {
  if (em_conc_in) return 0;                /* (a lane of a concurrent job: see em_conc_run) */
  if (work < EMBER_PARALLEL_MIN &&
      (work < hot_min || !em_par_hot_ptr || !em_par_hot_ptr())) {
    em_par_last_nt = 1;
    return 0;
  }
#ifdef _OPENMP
  const int nt = em_par_threads_ptr ? em_par_threads_ptr() : omp_get_max_threads();
#else
  const int nt = em_par_threads_ptr ? em_par_threads_ptr() : 1;
#endif
  const int64_t iters = (s->ext + s->step - 1) / s->step;
  if (nt <= 1 || iters < 2) { em_par_last_nt = 1; return 0; }
  int64_t items = (int64_t)nt * EM_PAR_ITEMS;
  if (items > iters) items = iters;
  int64_t per = (iters + items - 1) / items;
  if (s->step == 1 && per >= 64) per = (per + 15) / 16 * 16;
  s->chunk = per * s->step;
  s->items = (long)((s->ext + s->chunk - 1) / s->chunk);
  s->nt = nt;
  em_par_last_nt = nt;
  em_par_runs++;
  return 1;
}
__attribute__((unused)) static void em_par_run(em_par_span *s, em_par_task fn, void *ctx) {
  if (em_par_pool_ptr) { em_par_pool_ptr(s->nt, s->items, fn, ctx); return; }
#ifdef _OPENMP
  EMBER_PRAGMA(omp parallel for schedule(dynamic, 1) num_threads(s->nt))
  for (long i = 0; i < s->items; i++) fn(ctx, i, omp_get_thread_num());
#else
  for (long i = 0; i < s->items; i++) fn(ctx, i, 0);
#endif
}
/* a concurrent job: lane(bufs, 0) and lane(bufs, 1) touch disjoint memory (concurrent.py). On exactly two
   threads they run as the pool's two items, each on one thread (the pool's late-helper handling covers
   them: a helper that wakes late finds both taken by the caller, a preempted one is moved onto the
   caller's CPU); otherwise, and inside a lane, one after the other on this thread with its kernels split
   as usual (on more threads a split uses every core, two lanes only two) */
typedef void (*em_conc_lane)(void **, long);
typedef struct { em_conc_lane fn; void **bufs; } em_conc_ctx;
__attribute__((unused)) static void em_conc_item(void *ctx, long it, int w) {
  const em_conc_ctx *c = (const em_conc_ctx *)ctx;
  (void)w;
  const int was = em_conc_in;
  em_conc_in = 1;
  c->fn(c->bufs, it);
  em_conc_in = was;
}
__attribute__((unused)) static void em_conc_run(em_conc_lane fn, void **bufs) {
  if (!em_conc_in && em_par_pool_ptr && em_par_threads_ptr && em_par_threads_ptr() == 2) {
    em_conc_ctx c = {fn, bufs};
    em_conc_jobs++;
    em_par_pool_ptr(2, 2, em_conc_item, &c);
    return;
  }
  fn(bufs, 0);
  fn(bufs, 1);
}
#define EM_PAR_RANGE(s, it, lo, hi) \
  const int64_t lo = (int64_t)(it) * (s).chunk, hi = lo + (s).chunk < (s).ext ? lo + (s).chunk : (s).ext
"""

def uses_pool(source: str) -> bool:
    """Whether a generated source runs parallel loops, concurrent kernels or GEMMs that must know whether
    they run in a lane (then it holds POOL_STUB_C and is bound to the pool)."""
    return "em_par_plan(" in source or "em_conc_run(" in source or "EM_SGEMM_NT_OR(" in source


def outline(g, names: dict):
    """The body of kernel ``g`` (a rendered ``render_c.KernelGen``) as a parallel-loop function, or None
    when it has no parallel loop it can split (then it renders as before): ``(body, par)`` with ``par``
    a dict of ``ext``, ``step``, ``work`` (numbers or symbolic sizes) and ``nv`` (values carried)."""
    lines = g.root.lines
    if not lines:
        return None
    blk = lines[-1]
    par = getattr(blk, "par", None) if isinstance(blk, Block) else None
    if par is None:
        return None
    pre = lines[:-1]
    if any(isinstance(ln, Block) and getattr(ln, "par", None) is not None for ln in pre):
        return None
    var, ext, step, work = par
    inc = f"{var}++" if step == 1 else f"{var} += {step}"
    loop = _text([Block(f"for (int64_t {var} = em_lo; {var} < em_hi; {inc})", blk.scope)], 2)
    used = set(_IDENT.findall("\n".join(loop)))
    carried = []                 # (name, C type) of top-level locals the loop reads
    top = set()                  # indices of the pre lines outside any brace (raw C blocks such as the
    depth = 0                    # generated GEMM loops declare their own locals)
    for i, ln in enumerate(pre):
        if isinstance(ln, Block):
            continue
        if depth == 0:
            top.add(i)
        depth += ln.count("{") - ln.count("}")
    for i in sorted(top):
        ln = pre[i]
        m = _DECL.match(ln)
        if m is not None:
            if m.group("name") in used:
                carried.append((m.group("name"), m.group("type")))
            continue
        m = _ANY_DECL.match(ln)
        if m is not None and m.group("name") in used:
            return None          # (an array or pointer local the loop reads: not carried)
    keep = {n for n, _ in carried}
    pre_lines = []
    for i, ln in enumerate(pre):
        m = _DECL.match(ln) if i in top else None
        if m is not None and m.group("name") in keep:
            pre_lines.append(f"{m.group('name')} = {m.group('expr')};")
        else:
            pre_lines.append(ln)
    out = [f"  {t} {n};" for n, t in carried]
    out.append("  if (em_mode & 1) {")
    out += _text(pre_lines, 2)
    if carried:
        out.append("    if (em_mode & 4) {")
        out += [f"      memcpy(em_v + {16 * i}, &{n}, sizeof({n}));" for i, (n, _) in enumerate(carried)]
        out.append("    }")
        out.append("  } else {")
        out += [f"    memcpy(&{n}, em_v + {16 * i}, sizeof({n}));" for i, (n, _) in enumerate(carried)]
    out.append("  }")
    out.append("  if (em_mode & 2) {")
    out += loop
    out.append("  }")
    body = "\n".join(out)
    body = re.sub(r"\bb\d+\b", lambda m: names.get(m.group(0), m.group(0)), body)
    return body, {"ext": ext, "step": step, "work": work * cost_factor(loop), "nv": len(carried)}


_CALL = re.compile(r"\b(?!em_max_|em_min_|if\b|for\b|sizeof\b|_Pragma\b)[A-Za-z_]\w*\(")
_DIV = re.compile(r"\) / \(")


def cost_factor(loop_lines) -> int:
    """How much more an element of this loop costs than a load, an add and a store: a loop of cheap
    elementwise arithmetic is memory-bound and two threads gained nothing below a million elements here,
    while one with an exp (or another libm call) per element gained from ~64K (measured: GELU 1.3x at
    64K elements, 0.85x at 16K; softmax rows alike; x*2+1 0.6-0.95x up to 1M on two shared cores)."""
    text = "\n".join(loop_lines)
    return 1 + 16 * len(_CALL.findall(text)) + 4 * len(_DIV.findall(text))


def _fields(params: str) -> list:
    """(C type without restrict, name) of a kernel's parameters after ``void **bufs``."""
    out = []
    for p in params.split(", ")[1:]:
        p = p.replace(" *restrict ", " *")
        t, _, n = p.rpartition(" ")
        if n.startswith("*"):
            t, n = t + " *", n.lstrip("*")
        out.append((t, n))
    return out


def task_text(fn: str, params: str) -> str:
    """The argument struct and pool task of parallel kernel function ``fn`` (parameters ``params``)."""
    fields = _fields(params[:-len(PAR_PARAMS) - 2] if params.endswith(PAR_PARAMS) else params)
    decl = "".join(f" {t} {n};" for t, n in fields)
    call = ", ".join(["c->bufs"] + [f"c->{n}" for _, n in fields])
    return (f"typedef struct {{ em_par_span s; unsigned char *v; void **bufs;{decl} }} {fn}_ctx;\n"
            f"static void {fn}_task(void *ctx, long it, int w) {{\n"
            f"  const {fn}_ctx *c = (const {fn}_ctx *)ctx;\n"
            f"  (void)w;\n"
            f"  EM_PAR_RANGE(c->s, it, lo, hi);\n"
            f"  {fn}({call}, lo, hi, 2, c->v);\n"
            f"}}")


def call_text(fn: str, args: list, par: dict, desc: str, kind: str | None = None) -> str:
    """The entry's lines calling parallel kernel function ``fn`` with ``args`` (see the module doc).
    ``kind``: the kernel's; an elementwise one (``"loop"``) splits from a sixteenth of
    ``EMBER_PARALLEL_MIN`` while the pool's threads poll (``EM_PAR_HOT_DIV_EW``), other kinds from a
    quarter. Measured on the GPT b16 AdamW step on two threads, per-kernel timing, interleaved with one
    thread: its 127 elementwise kernels (copies for the heads' layout, the zero fills and adds of the
    backward, 64K-400K elements each) took 11.1 ms on one thread, 10.6 ms on two from a quarter (most did
    not split, and a kernel reading what both threads just wrote pays for the half in the other core's
    cache), 7.9 ms from a sixteenth; column reductions split from less got slower (1.9 -> 2.8 ms)."""
    a = ", ".join(args)
    nv = max(16 * par["nv"], 16)
    ext = f"({par['ext']}LL)"
    div = "EM_PAR_HOT_DIV_EW" if kind == "loop" else "EM_PAR_HOT_DIV"
    return (f"  {{ unsigned char em_v[{nv}]; {fn}_ctx em_c = {{{{{ext}, {par['step']}LL, 0, 0, 1}}, em_v, {a}}};  "
            f"/* {desc} */\n"
            f"    if (em_par_plan(({par['work']}LL), EMBER_PARALLEL_MIN / {div}, &em_c.s)) {{ {fn}({a}, 0, 0, 5, em_v); "
            f"em_par_run(&em_c.s, {fn}_task, &em_c); }}\n"
            f"    else {fn}({a}, 0, {ext}, 3, em_v); }}")


_POOL: dict = {}            # "fns": (ember_pool_run, ember_pool_threads, ember_pool_hot addresses) or None


def _pool():
    """The pool functions of ember's GEMM library, or None where it has no pool (a CPU without AVX2 or
    AVX-512, or the library does not build: the loops then run in OpenMP). On first use the pool takes
    ``ember.get_num_threads()`` and follows ``ember.set_num_threads`` from then on."""
    if "fns" not in _POOL:
        import ctypes
        fns = None
        try:
            from . import gemm, build
            lib, _, have, _ = gemm.library()
            if have:
                addr = [ctypes.cast(lib.get(name, (), None), ctypes.c_void_p).value
                        for name in ("ember_pool_run", "ember_pool_threads", "ember_pool_hot")]
                setter = lib.get("ember_pool_set_threads", (ctypes.c_int,), None)
                from .._settings import get_num_threads
                setter(get_num_threads())
                build.THREAD_LISTENERS.append(setter)
                fns = tuple(addr)
        except Exception:      # (the GEMM's own tests report its build; OpenMP still runs the loops)
            fns = None
        _POOL["fns"] = fns
    return _POOL["fns"]


def bind(lib) -> None:
    """Point a loaded graph library (a ``build.CompiledLibrary``) that runs parallel loops at the pool."""
    import ctypes
    try:
        setter = lib.get("ember_bind_pool", (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p), None)
    except AttributeError:
        return
    fns = _pool()
    if fns is not None:
        setter(*fns)
