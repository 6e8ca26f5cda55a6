"""The C text of the fused optimizer updates (part of the one library ``eager_source.source()`` builds; the
Python side is ``eager_kernels.adam_many`` / ``sgd_many``, called by ``ember.optim``'s Adam/AdamW and
SGD on float32 CPU parameters).

torch's single-tensor update of one parameter is about ten passes over it (maximize, weight decay, lerp,
mul, addcmul, sqrt, div, add, addcdiv); NumPy runs the same. Here it is one pass, doing per element what
those passes do, in their order and with their roundings:

- ``adam(param, grad, m, v, vmax, n, wd, decay, w1, b2, w2, step_size_neg, bc2_sqrt, eps, maximize, nt)``:
  ``g = maximize ? -grad : grad``; ``param *= decay`` (decoupled decay; 1 without it); ``g += wd * param``
  (L2 decay, 0 without it; torch's ``add(alpha=)`` is a fused multiply-add); ``m.lerp_(g, w1)`` (torch's
  vectorized lerp: ``fma(w1, g - m, m)`` for w1 < 0.5, else ``fma(w1 - 1, g - m, g)``);
  ``v = fma(w2 * g, g, v * b2)`` (``mul_`` then ``addcmul_``, which torch's build contracts to a fused
  multiply-add); with ``vmax`` (amsgrad, else NULL)
  ``vmax = max(vmax, v)`` read in place of v; ``param += step_size_neg * m / (sqrt(v) / bc2_sqrt + eps)``.
- ``sgd(param, grad, buf, n, wd, mom, w, nesterov, neg_lr, maximize, nt)``: ``g = maximize ? -grad :
  grad``; ``g = fma(param, wd, g)`` when wd != 0; with ``buf`` (momentum, else NULL) ``buf = fma(g, w,
  buf * mom)`` (w = 1 - dampening) and ``g = nesterov ? fma(buf, mom, g) : buf``; ``param = fma(g,
  neg_lr, param)``. (A first step's buffer, a copy of the gradient, is seeded by the caller.)
- ``adam_many`` / ``sgd_many``: the same updates over a whole param group in one call (arrays of the
  parameters' buffer pointers, sizes and per-parameter scalars), saving a foreign call per parameter.

The functions are built with ``fp-contract=off`` so that a multiply and an add stay two roundings unless
the code asks for a fused one (``fmaf``), where torch's kernels fuse. Measured against torch 2.13 here,
the SGD updates and Adam's moments agree bit for bit; Adam's parameter can differ by an ulp where torch's
vectorized ``sqrt`` is not correctly rounded (``sqrtf`` here is).
"""
from __future__ import annotations

BODY = r"""
/* ---- fused optimizer updates ---- */
#pragma GCC push_options
#pragma GCC optimize ("fp-contract=off")
typedef struct {
  float *p; const float *g; float *m, *v, *vmax;
  float wd, decay, w1, b2, w2, ssn, bc2s, eps; int maximize;
} em_adam_t;

static void em_adam_range(const void *args, long i0, long i1, long item) {
  (void)item;
  const em_adam_t *a = (const em_adam_t *)args;
  float *restrict p = a->p, *restrict m = a->m, *restrict v = a->v, *restrict vmax = a->vmax;
  const float *restrict g = a->g;
  const float wd = a->wd, decay = a->decay, w1 = a->w1, b2 = a->b2, w2 = a->w2, ssn = a->ssn;
  const float bc2s = a->bc2s, eps = a->eps;
  const float sgn = a->maximize ? -1.0f : 1.0f;
  const int small = w1 < 0.5f;
  const float coeff = small ? w1 : w1 - 1.0f;
  /* two loops, with and without vmax: one loop testing vmax inside is not vectorized (5x slower) */
#define EM_ADAM_BODY(AMS) \
  for (long i = i0; i < i1; i++) { \
    const float pi = p[i] * decay; \
    const float gi = wd != 0.0f ? fmaf(pi, wd, g[i] * sgn) : g[i] * sgn; \
    const float mi0 = m[i], diff = gi - mi0; \
    const float mi = fmaf(coeff, diff, small ? mi0 : gi); \
    const float vi = fmaf(w2 * gi, gi, v[i] * b2); \
    m[i] = mi; \
    v[i] = vi; \
    float vs = vi; \
    if (AMS) { \
      const float x = vmax[i]; \
      vs = (x > vi || x != x) ? x : vi;     /* torch.maximum: a NaN wins */ \
      vmax[i] = vs; \
    } \
    const float den = sqrtf(vs) / bc2s + eps; \
    p[i] = pi + (ssn * mi) / den; \
  }
  if (vmax) {
    EM_ADAM_BODY(1)
  } else {
    EM_ADAM_BODY(0)
  }
#undef EM_ADAM_BODY
}

void ember_eager_adam(float *p, const float *g, float *m, float *v, float *vmax, long n, float wd, float decay,
                      float w1, float b2, float w2, float ssn, float bc2s, float eps, int maximize, int nt) {
  em_adam_t a = {p, g, m, v, vmax, wd, decay, w1, b2, w2, ssn, bc2s, eps, maximize};
  em_split(nt, n, EM_ITEM, em_adam_range, &a);
}

/* a param group in one call: bufs holds 5 pointers per parameter (p, g, m, v, vmax or NULL), n, ssn and
   bc2s one entry each; a parameter of fewer than par_min elements runs on one thread */
void ember_eager_adam_many(long count, void *const *bufs, const long *n, const float *ssn, const float *bc2s,
                           float wd, float decay, float w1, float b2, float w2, float eps, int maximize,
                           long par_min, int nt) {
  for (long k = 0; k < count; k++) {
    void *const *b = bufs + 5 * k;
    ember_eager_adam((float *)b[0], (const float *)b[1], (float *)b[2], (float *)b[3], (float *)b[4], n[k], wd,
                     decay, w1, b2, w2, ssn[k], bc2s[k], eps, maximize, n[k] < par_min ? 1 : nt);
  }
}

typedef struct { float *p; const float *g; float *buf; float wd, mom, w, neg_lr; int nesterov, maximize; } em_sgd_t;

static void em_sgd_range(const void *args, long i0, long i1, long item) {
  (void)item;
  const em_sgd_t *a = (const em_sgd_t *)args;
  float *restrict p = a->p, *restrict buf = a->buf;
  const float *restrict g = a->g;
  const float wd = a->wd, mom = a->mom, w = a->w, neg_lr = a->neg_lr;
  const float sgn = a->maximize ? -1.0f : 1.0f;
  const int nesterov = a->nesterov;
  for (long i = i0; i < i1; i++) {
    float gi = g[i] * sgn;
    if (wd != 0.0f) gi = fmaf(p[i], wd, gi);
    if (buf) {
      const float b = fmaf(gi, w, buf[i] * mom);
      buf[i] = b;
      gi = nesterov ? fmaf(b, mom, gi) : b;
    }
    p[i] = fmaf(gi, neg_lr, p[i]);
  }
}

void ember_eager_sgd(float *p, const float *g, float *buf, long n, float wd, float mom, float w, int nesterov,
                     float neg_lr, int maximize, int nt) {
  em_sgd_t a = {p, g, buf, wd, mom, w, neg_lr, nesterov, maximize};
  em_split(nt, n, EM_ITEM, em_sgd_range, &a);
}

/* a param group in one call: bufs holds 3 pointers per parameter (p, g, momentum buffer or NULL), n and w
   (1 - dampening, or 1 on a buffer's first step) one entry each */
void ember_eager_sgd_many(long count, void *const *bufs, const long *n, const float *w, float wd, float mom,
                          int nesterov, float neg_lr, int maximize, long par_min, int nt) {
  for (long k = 0; k < count; k++) {
    void *const *b = bufs + 3 * k;
    ember_eager_sgd((float *)b[0], (const float *)b[1], (float *)b[2], n[k], wd, mom, w[k], nesterov, neg_lr,
                    maximize, n[k] < par_min ? 1 : nt);
  }
}
#pragma GCC pop_options
"""
