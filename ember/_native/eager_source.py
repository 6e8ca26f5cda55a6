"""The C text of ember's native eager kernels (program output: generated at run time, built by
``ember.compiler.build`` into one library for all of them; see ``eager_kernels.py``).

Every kernel is float32, on C-contiguous arrays, and written as plain loops that gcc vectorizes
(``-O3 -march=native``). Two measured choices make them as fast as torch's:

- every exp here has an argument <= ~0 (x - max, P(t) - x^2/2, -x^2/2, -2|u|), so ``em_exp_small``
  is the compiler's ``em_exp_f32`` (``ember.compiler.prims``: the same range reduction and polynomial)
  without the clamps and the double scaling it needs for large arguments; below -87.33 it returns 0
  (it flushes results under 1.2e-38 to zero). 0.68 -> 0.45 ns per element here.
- GELU's loops run in two stages over blocks of ``EM_BLOCK`` elements (t and the exp's argument into
  a stack buffer, then exp and the rest): one loop doing it all is bound by its dependency chain
  (~110 cycles per vector, more than the out-of-order window hides); split, it runs 1.5x faster.

Sums and maxima run over ``EM_LANES`` independent accumulators so that they vectorize without
reassociating anything the compiler may not reassociate. Work is split into items of a fixed size
(elements or rows), independent of the thread count, and column sums are added up item by item in
order, so results are the same bits on any number of threads. Items run on ember's work pool
(``ember.compiler.pool_c``) with ``nt`` threads, chosen by the caller.

Kernels (all exported names start with ``ember_eager_``):

- ``gelu(x, y, n, tanh, nt)`` / ``gelu_backward(g, x, gx, n, tanh, nt)``: x * Phi(x) with the same
  erfc fit as the NumPy path (``nn/functional/_normal_cdf.py``) or the tanh approximation, and
  g * d/dx of it;
- ``softmax(x, y, rows, d, log, nt)`` / ``softmax_backward(g, y, gx, rows, d, log, nt)``: softmax or
  log_softmax over the last dim, and their derivatives ``y * (g - sum(g * y))`` /
  ``g - exp(y) * sum(g)``;
- ``norm_stats(x, mean, var, rows, d, nt)``: the mean and the two-pass biased variance of each row;
- ``layer_norm(x, w, b, mean, var, y, rows, d, eps, nt)`` and ``layer_norm_backward(g, x, w, mean,
  var, gx, gw, gb, rows, d, eps, nt)``: layer norm's normalize + affine and its closed-form
  derivative (w, b, gx, gw, gb may be NULL when absent or not needed); ``layer_norm_forward(x, w, b,
  mean, var, y, rows, d, eps, nt)`` runs both forward steps in one call;
- ``cross_entropy(x, t, logp, loss, sums, rows, d, ignore, nt)`` / ``cross_entropy_backward(logp, t,
  row_g, gx, rows, d, ignore, scale, nt)``: cross entropy with class indices over (rows, d) logits (no
  class weights, no label smoothing): log_softmax, the per-row losses and their sum; and
  ``(softmax - onehot) * scale``;
- the gradient mask of piecewise-linear activations (``eager_source_mask.py``);
- the 2-d window kernels of convolution and max pooling (``eager_source_window.py``);
- the fused Adam/AdamW and SGD parameter updates (``eager_source_optim.py``);
- gather along a dim, topk over the last dim, and wrappers of the kernels above that take the ndarray
  objects themselves (``eager_source_select.py``).
"""
from __future__ import annotations

import math

from ..compiler.pool_c import POOL_C
from ..compiler.prims import C_PRELUDE, _EXP
from .eager_source_mask import BODY as MASK_BODY
from .eager_source_optim import BODY as OPTIM_BODY
from .eager_source_window import BODY as WINDOW_BODY
from . import eager_source_select as _select

# elements of an elementwise item; rows of a row item are chosen so an item is about this much work
ITEM = 1 << 14
LANES = 16
BLOCK = 256


def _f(v: float) -> str:
    return f"{float(v)!r}f"


def _exp_small() -> str:
    """``em_exp_small``: exp for arguments up to ~88, with em_exp_f32's constants (see the docstring)."""
    row = _EXP[0]
    inv_ln2, ln2_hi, ln2_lo, coeffs = row[9], row[10], row[11], row[12]
    horner = "".join(f"  p = p * r + {c};\n" for c in coeffs[1:])
    return ("static inline float em_exp_small(float x) {\n"
            f"  float n = __builtin_rintf(x * {inv_ln2});\n"
            f"  float r = x - n * {ln2_hi};\n"
            f"  r = r - n * {ln2_lo};\n"
            f"  float p = {coeffs[0]};\n{horner}"
            "  p = p * (r * r) + r + 1.0f;\n"
            "  int32_t b = ((int32_t)n + 127) << 23;\n"
            "  float s;\n"
            "  __builtin_memcpy(&s, &b, 4);\n"
            "  return x < -87.33f ? 0.0f : p * s;     /* NaN stays NaN (through p) */\n"
            "}\n")


def source() -> str:
    """The whole translation unit."""
    from ..nn.functional._normal_cdf import _P32
    p = _P32
    horner = "".join(f"  p = p * t + {_f(c)};\n" for c in p[2:])
    consts = {
        "SQH": _f(math.sqrt(0.5)), "INV_SQRT_2PI": _f(1.0 / math.sqrt(2.0 * math.pi)),
        "GELU_K": _f(math.sqrt(2.0 / math.pi)), "GELU_C": _f(0.044715),
    }
    defines = "".join(f"#define EM_{k} {v}\n" for k, v in consts.items())
    phi = (
        "/* Phi(x) by the fit erfc(a) = t exp(P(t) - a^2), t = 1 / (1 + a/2), a = |x| / sqrt(2), in two\n"
        "   steps: em_phi_arg gives t and P(t) - x^2/2 (the last coefficient holds the 1/2 of Phi = erfc / 2),\n"
        "   em_phi_end Phi(x) from them */\n"
        "static inline float em_phi_arg(float x, float *t_out) {\n"
        "  float t = 1.0f / (fabsf(x) * EM_SQH * 0.5f + 1.0f);\n"
        f"  float p = t * {_f(p[0])} + {_f(p[1])};\n{horner}"
        "  *t_out = t;\n"
        "  return p - x * x * 0.5f;\n"
        "}\n"
        "static inline float em_phi_end(float x, float t, float arg) {\n"
        "  float e = em_exp_small(arg) * t;\n"
        "  return x > 0.0f ? 1.0f - e : e;\n"
        "}\n")
    sizes = f"#define EM_LANES {LANES}\n#define EM_ITEM {ITEM}\n#define EM_BLOCK {BLOCK}\n"
    select = _select.body(*(_select.layout() or (0, 0, 0, 0)))
    return "\n".join((C_PRELUDE, POOL_C, sizes + defines, _exp_small(), phi, _BODY, MASK_BODY, WINDOW_BODY, OPTIM_BODY,
                      select))


_BODY = r"""
/* ---- splitting work into items on the pool ---- */
typedef void (*em_range_fn)(const void *args, long i0, long i1, long item);
typedef struct { em_range_fn fn; const void *args; long n, chunk; } em_split_t;

static void em_split_task(void *ctx, long item, int worker) {
  (void)worker;
  const em_split_t *s = (const em_split_t *)ctx;
  long i0 = item * s->chunk, i1 = i0 + s->chunk;
  s->fn(s->args, i0, i1 < s->n ? i1 : s->n, item);
}

/* fn(args, i0, i1, item) over [0, n) in items of `chunk` */
static void em_split(int nt, long n, long chunk, em_range_fn fn, const void *args) {
  long items = (n + chunk - 1) / chunk;
  if (nt <= 1 || items <= 1) {
    for (long it = 0; it < items; it++) {
      long i0 = it * chunk, i1 = i0 + chunk;
      fn(args, i0, i1 < n ? i1 : n, it);
    }
    return;
  }
  em_split_t s = {fn, args, n, chunk};
  em_pool_run(nt, items, em_split_task, &s);
}

static long em_rows_per_item(long d) {
  long r = EM_ITEM / (d > 0 ? d : 1);
  return r > 0 ? r : 1;
}

/* ---- vectorizable row reductions ---- */
/* sum of TERM(k) for k in [0, d): EM_LANES float accumulators over blocks of EM_SUM_BLOCK elements, the
   blocks' sums added in double (so the error grows like a pairwise sum's, not like one long float sum) */
#define EM_SUM_BLOCK 1024
#define EM_ROW_REDUCE(NAME, PARAMS, TERM) \
static inline float NAME PARAMS { \
  double total = 0.0; \
  for (long b0 = 0; b0 < d; b0 += EM_SUM_BLOCK) { \
    const long b1 = d - b0 < EM_SUM_BLOCK ? d : b0 + EM_SUM_BLOCK; \
    float acc[EM_LANES] = {0}; \
    long k = b0; \
    for (; k + EM_LANES <= b1; k += EM_LANES) \
      for (int j = 0; j < EM_LANES; j++) acc[j] += TERM(k + j); \
    float s = 0.0f; \
    for (int j = 0; j < EM_LANES; j++) s += acc[j]; \
    for (; k < b1; k++) s += TERM(k); \
    total += s; \
  } \
  return (float)total; \
}
#define EM_TERM_SUM(k) x[k]
#define EM_TERM_DOT(k) (x[k] * y[k])
#define EM_TERM_SQDEV(k) ((x[k] - mean) * (x[k] - mean))
EM_ROW_REDUCE(em_row_sum, (const float *restrict x, long d), EM_TERM_SUM)
EM_ROW_REDUCE(em_row_dot, (const float *restrict x, const float *restrict y, long d), EM_TERM_DOT)
EM_ROW_REDUCE(em_row_sqdev, (const float *restrict x, float mean, long d), EM_TERM_SQDEV)

/* the largest value (a NaN in the row makes the softmax NaN through the sum anyway) */
static inline float em_row_max(const float *x, long d) {
  float acc[EM_LANES];
  for (int j = 0; j < EM_LANES; j++) acc[j] = -INFINITY;
  long i = 0;
  for (; i + EM_LANES <= d; i += EM_LANES)
    for (int j = 0; j < EM_LANES; j++) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = -INFINITY;
  for (int j = 0; j < EM_LANES; j++) m = acc[j] > m ? acc[j] : m;
  for (; i < d; i++) m = x[i] > m ? x[i] : m;
  return m;
}

/* ---- gelu ---- */
typedef struct { const float *g, *x; float *y; int tanh_form; } em_gelu_t;

/* (1 + tanh(u)) / 2 from e = exp(-2|u|) <= 1, without the cancellation of 1 + tanh(u) for u << 0:
   e / (1 + e) for u < 0, 1 / (1 + e) otherwise; and 1 - tanh(u)^2 = 4 e / (1 + e)^2 */
static inline float em_half_1p_tanh(float u, float e) {
  float q = 1.0f / (1.0f + e);
  return u < 0.0f ? e * q : q;
}

static inline float em_gelu_u(float v) { return (v + v * v * v * EM_GELU_C) * EM_GELU_K; }

/* gelu (g NULL) or g * gelu' over [i0, i1); each block: a first loop up to the exp's argument into stack
   buffers, then the rest */
static void em_gelu_range(const void *args, long i0, long i1, long item) {
  (void)item;
  const em_gelu_t *a = (const em_gelu_t *)args;
  float ta[EM_BLOCK], tb[EM_BLOCK];
  for (long b0 = i0; b0 < i1; b0 += EM_BLOCK) {
    const long m = i1 - b0 < EM_BLOCK ? i1 - b0 : EM_BLOCK;
    const float *restrict x = a->x + b0, *restrict g = a->g ? a->g + b0 : 0;
    float *restrict y = a->y + b0;
    if (a->tanh_form) {
      for (long i = 0; i < m; i++) ta[i] = em_exp_small(-2.0f * fabsf(em_gelu_u(x[i])));
      if (!g) {
        for (long i = 0; i < m; i++) y[i] = x[i] * em_half_1p_tanh(em_gelu_u(x[i]), ta[i]);
        continue;
      }
      for (long i = 0; i < m; i++) {
        float v = x[i], e = ta[i], q = 1.0f / (1.0f + e);
        float d = em_half_1p_tanh(em_gelu_u(v), e) + 2.0f * v * e * q * q * (EM_GELU_K * (1.0f + 3.0f * EM_GELU_C * v * v));
        y[i] = g[i] * d;
      }
    } else {
      for (long i = 0; i < m; i++) tb[i] = em_phi_arg(x[i], &ta[i]);
      if (!g) {
        for (long i = 0; i < m; i++) y[i] = x[i] * em_phi_end(x[i], ta[i], tb[i]);
        continue;
      }
      for (long i = 0; i < m; i++) ta[i] = em_phi_end(x[i], ta[i], tb[i]);
      for (long i = 0; i < m; i++) {
        float v = x[i];
        y[i] = g[i] * (ta[i] + v * em_exp_small(v * v * -0.5f) * EM_INV_SQRT_2PI);
      }
    }
  }
}

void ember_eager_gelu(const float *x, float *y, long n, int tanh_form, int nt) {
  em_gelu_t a = {0, x, y, tanh_form};
  em_split(nt, n, EM_ITEM, em_gelu_range, &a);
}

void ember_eager_gelu_backward(const float *g, const float *x, float *gx, long n, int tanh_form, int nt) {
  em_gelu_t a = {g, x, gx, tanh_form};
  em_split(nt, n, EM_ITEM, em_gelu_range, &a);
}

/* ---- softmax / log_softmax over the last dim ---- */
typedef struct { const float *g, *x; float *y; long d; int log_form; } em_softmax_t;

/* softmax (log_form 0) or log_softmax of one row */
static inline void em_softmax_row(const float *restrict x, float *restrict y, long d, int log_form) {
  const float m = em_row_max(x, d);
  for (long i = 0; i < d; i++) y[i] = em_exp_small(x[i] - m);
  const float s = em_row_sum(y, d);
  if (log_form) {
    const float ls = logf(s);
    for (long i = 0; i < d; i++) y[i] = (x[i] - m) - ls;
  } else {
    const float inv = 1.0f / s;
    for (long i = 0; i < d; i++) y[i] *= inv;
  }
}

static void em_softmax_range(const void *args, long r0, long r1, long item) {
  (void)item;
  const em_softmax_t *a = (const em_softmax_t *)args;
  const long d = a->d;
  for (long r = r0; r < r1; r++) em_softmax_row(a->x + r * d, a->y + r * d, d, a->log_form);
}

static void em_softmax_bw_range(const void *args, long r0, long r1, long item) {
  (void)item;
  const em_softmax_t *a = (const em_softmax_t *)args;
  const long d = a->d;
  for (long r = r0; r < r1; r++) {
    const float *restrict g = a->g + r * d, *restrict y = a->x + r * d;
    float *restrict gx = a->y + r * d;
    if (a->log_form) {
      const float s = em_row_sum(g, d);
      for (long i = 0; i < d; i++) gx[i] = g[i] - em_exp_small(y[i]) * s;
    } else {
      const float s = em_row_dot(g, y, d);
      for (long i = 0; i < d; i++) gx[i] = y[i] * (g[i] - s);
    }
  }
}

void ember_eager_softmax(const float *x, float *y, long rows, long d, int log_form, int nt) {
  em_softmax_t a = {0, x, y, d, log_form};
  em_split(nt, rows, em_rows_per_item(d), em_softmax_range, &a);
}

void ember_eager_softmax_backward(const float *g, const float *y, float *gx, long rows, long d, int log_form,
                                  int nt) {
  em_softmax_t a = {g, y, gx, d, log_form};
  em_split(nt, rows, em_rows_per_item(d), em_softmax_bw_range, &a);
}

/* ---- cross entropy with class indices over (rows, d) float32 logits ---- */
typedef struct {
  const float *x, *logp; const long *t; float *y, *loss; double *partial; long d, ignore; float scale;
} em_ce_t;

/* log_softmax rows into logp; loss (may be NULL) -logp[t] per row (0 where ignored); the item's sums of
   the losses and of the valid rows into partial[3 item], partial[3 item + 1], its first row whose target
   is out of range (or -1) into partial[3 item + 2] */
static void em_ce_range(const void *args, long r0, long r1, long item) {
  const em_ce_t *a = (const em_ce_t *)args;
  const long d = a->d;
  double sum = 0.0, count = 0.0, bad = -1.0;
  for (long r = r0; r < r1; r++) {
    float *restrict y = a->y + r * d;
    em_softmax_row(a->x + r * d, y, d, 1);
    const long t = a->t[r];
    float l = 0.0f;
    if (t != a->ignore) {
      if (t < 0 || t >= d) {
        if (bad < 0.0) bad = (double)r;
        continue;
      }
      l = -y[t];
      sum += l;
      count += 1.0;
    }
    if (a->loss) a->loss[r] = l;
  }
  a->partial[3 * item] = sum;
  a->partial[3 * item + 1] = count;
  a->partial[3 * item + 2] = bad;
}

/* d/dx of the loss: (exp(logp) * valid - onehot(t)) * scale per row (rows with the ignored target: 0 * p) */
static void em_ce_bw_range(const void *args, long r0, long r1, long item) {
  (void)item;
  const em_ce_t *a = (const em_ce_t *)args;
  const long d = a->d;
  for (long r = r0; r < r1; r++) {
    const float *restrict lp = a->logp + r * d;
    float *restrict gx = a->y + r * d;
    const long t = a->t[r];
    const float valid = t != a->ignore ? 1.0f : 0.0f;
    const float s = a->loss ? a->loss[r] : a->scale;     /* reduction 'none': the row's own gradient */
    for (long i = 0; i < d; i++) gx[i] = em_exp_small(lp[i]) * valid;
    if (valid != 0.0f && t >= 0 && t < d) gx[t] = (float)((double)gx[t] - 1.0);   /* (the forward checked t) */
    for (long i = 0; i < d; i++) gx[i] *= s;
  }
}

/* returns the first row whose target is out of range, -1 if none, -2 when out of memory; sums[0] the loss total, sums[1] the count
   of valid rows (added item by item in order: the same on any number of threads) */
long ember_eager_cross_entropy(const float *x, const long *t, float *logp, float *loss, double *sums,
                               long rows, long d, long ignore, int nt) {
  const long per = em_rows_per_item(d), items = (rows + per - 1) / per;
  double *partial = (double *)malloc(sizeof(double) * 3 * (items > 0 ? items : 1));
  if (!partial) return -2;
  em_ce_t a = {0};
  a.x = x; a.t = t; a.y = logp; a.loss = loss; a.partial = partial; a.d = d; a.ignore = ignore;
  em_split(nt, rows, per, em_ce_range, &a);
  long bad = -1;
  sums[0] = sums[1] = 0.0;
  for (long it = 0; it < items; it++) {
    sums[0] += partial[3 * it];
    sums[1] += partial[3 * it + 1];
    if (bad < 0 && partial[3 * it + 2] >= 0.0) bad = (long)partial[3 * it + 2];
  }
  free(partial);
  return bad;
}

/* scale: the gradient of every row (g, or g / count for 'mean'); row_g: per-row gradients ('none') or NULL */
void ember_eager_cross_entropy_backward(const float *logp, const long *t, const float *row_g, float *gx,
                                        long rows, long d, long ignore, float scale, int nt) {
  em_ce_t a = {0};
  a.logp = logp; a.t = t; a.y = gx; a.loss = (float *)row_g; a.d = d; a.ignore = ignore; a.scale = scale;
  em_split(nt, rows, em_rows_per_item(d), em_ce_bw_range, &a);
}

/* ---- layer norm over the last dim ---- */
typedef struct {
  const float *g, *x, *w, *b, *mean, *var;
  float *y, *mean_out, *var_out, *partial, *scratch;
  long d, rows_per_item;
  float eps;
} em_norm_t;

static void em_stats_range(const void *args, long r0, long r1, long item) {
  (void)item;
  const em_norm_t *a = (const em_norm_t *)args;
  const long d = a->d;
  for (long r = r0; r < r1; r++) {
    const float *x = a->x + r * d;
    const float mean = em_row_sum(x, d) / (float)d;
    a->mean_out[r] = mean;
    a->var_out[r] = em_row_sqdev(x, mean, d) / (float)d;
  }
}

static void em_layer_norm_range(const void *args, long r0, long r1, long item) {
  (void)item;
  const em_norm_t *a = (const em_norm_t *)args;
  const long d = a->d;
  const float *restrict w = a->w, *restrict b = a->b;
  for (long r = r0; r < r1; r++) {
    const float *restrict x = a->x + r * d;
    float *restrict y = a->y + r * d;
    const float mean = a->mean[r], rstd = 1.0f / sqrtf(a->var[r] + a->eps);
    for (long i = 0; i < d; i++) y[i] = (x[i] - mean) * rstd;
    if (w) for (long i = 0; i < d; i++) y[i] *= w[i];
    if (b) for (long i = 0; i < d; i++) y[i] += b[i];
  }
}

/* the statistics, then the normalized rows, range by range (the rows are still in cache) */
static void em_layer_norm_fwd_range(const void *args, long r0, long r1, long item) {
  em_stats_range(args, r0, r1, item);
  em_layer_norm_range(args, r0, r1, item);
}

/* gx = rstd * (gxhat - xhat * mean(gxhat * xhat) - mean(gxhat)), gxhat = g * w; the item's column sums
   of g * xhat and g go to partial[item * 2d ...] (added up in item order by the caller) */
static void em_layer_norm_bw_range(const void *args, long r0, long r1, long item) {
  const em_norm_t *a = (const em_norm_t *)args;
  const long d = a->d;
  const float *restrict w = a->w;
  float *restrict pw = a->partial ? a->partial + item * 2 * d : 0;
  float *restrict pb = pw ? pw + d : 0;
  if (pw) for (long i = 0; i < 2 * d; i++) pw[i] = 0.0f;
  float *restrict xhat = a->scratch + item * 2 * d, *restrict gxhat = xhat + d;
  for (long r = r0; r < r1; r++) {
    const float *restrict x = a->x + r * d, *restrict g = a->g + r * d;
    const float mean = a->mean[r], rstd = 1.0f / sqrtf(a->var[r] + a->eps);
    for (long i = 0; i < d; i++) xhat[i] = (x[i] - mean) * rstd;
    if (pw) {
      for (long i = 0; i < d; i++) pw[i] += g[i] * xhat[i];
      for (long i = 0; i < d; i++) pb[i] += g[i];
    }
    if (!a->y) continue;
    if (w) for (long i = 0; i < d; i++) gxhat[i] = g[i] * w[i];
    else for (long i = 0; i < d; i++) gxhat[i] = g[i];
    const float proj = em_row_dot(gxhat, xhat, d) / (float)d;
    const float mg = em_row_sum(gxhat, d) / (float)d;
    float *restrict gx = a->y + r * d;
    for (long i = 0; i < d; i++) gx[i] = ((gxhat[i] - xhat[i] * proj) - mg) * rstd;
  }
}

void ember_eager_norm_stats(const float *x, float *mean, float *var, long rows, long d, int nt) {
  em_norm_t a = {0};
  a.x = x; a.mean_out = mean; a.var_out = var; a.d = d;
  em_split(nt, rows, em_rows_per_item(d), em_stats_range, &a);
}

void ember_eager_layer_norm(const float *x, const float *w, const float *b, const float *mean,
                            const float *var, float *y, long rows, long d, float eps, int nt) {
  em_norm_t a = {0};
  a.x = x; a.w = w; a.b = b; a.mean = mean; a.var = var; a.y = y; a.d = d; a.eps = eps;
  em_split(nt, rows, em_rows_per_item(d), em_layer_norm_range, &a);
}

/* norm_stats and layer_norm in one call: mean and var are written, then read back per row */
void ember_eager_layer_norm_forward(const float *x, const float *w, const float *b, float *mean, float *var,
                                    float *y, long rows, long d, float eps, int nt) {
  em_norm_t a = {0};
  a.x = x; a.w = w; a.b = b; a.mean_out = mean; a.var_out = var; a.mean = mean; a.var = var;
  a.y = y; a.d = d; a.eps = eps;
  em_split(nt, rows, em_rows_per_item(d), em_layer_norm_fwd_range, &a);
}

/* gx (may be NULL), gw and gb (both NULL, or both set: the column sums are wanted) */
int ember_eager_layer_norm_backward(const float *g, const float *x, const float *w, const float *mean,
                                    const float *var, float *gx, float *gw, float *gb, long rows, long d,
                                    float eps, int nt) {
  em_norm_t a = {0};
  a.g = g; a.x = x; a.w = w; a.mean = mean; a.var = var; a.y = gx; a.d = d; a.eps = eps;
  /* at most 256 items and about 2^21 floats of partial sums: larger items when rows are many */
  long per = em_rows_per_item(d), most = (1L << 21) / (d > 0 ? d : 1);
  most = most < 1 ? 1 : (most > 256 ? 256 : most);
  if ((rows + per - 1) / per > most) per = (rows + most - 1) / most;
  const long items = (rows + per - 1) / per;
  /* per item: xhat and gxhat rows (scratch), the column sums (partial) */
  float *buf = (float *)malloc(sizeof(float) * 2 * d * (items > 0 ? items : 1) * (gw ? 2 : 1));
  if (!buf) return 1;
  a.scratch = buf;
  a.partial = gw ? buf + 2 * d * items : 0;
  em_split(nt, rows, per, em_layer_norm_bw_range, &a);
  if (gw) {
    for (long i = 0; i < d; i++) {      /* the items' column sums, in item order, in double */
      double sw = 0.0, sb = 0.0;
      for (long it = 0; it < items; it++) {
        sw += a.partial[it * 2 * d + i];
        sb += a.partial[it * 2 * d + d + i];
      }
      gw[i] = (float)sw;
      gb[i] = (float)sb;
    }
  }
  free(buf);
  return 0;
}
"""
