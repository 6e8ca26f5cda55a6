"""The C text of the native gradient mask (part of the one library ``eager_source.source()`` builds; the
Python side is ``eager_kernels.mask_grad``).

Piecewise-linear activations and relu pass their gradient where a condition on x (or on the output)
holds and scale or drop it elsewhere. NumPy needs a comparison, a mask and a bitwise select, four or
five passes; this is one:

- ``mask_grad(g, x, y, n, mode, a, b, s_in, s_out, zero_out, nt)``: ``y = cond(x) ? g * s_in :
  (zero_out ? +0 : g * s_out)`` with ``cond`` one of ``x > a`` (mode 0), ``a < x < b`` (1),
  ``not (a <= x <= b)`` (2, NaN passes), ``x != 0`` (3, NaN passes), ``not (x <= a)`` (4, NaN passes; relu's ``pos`` with a = 0).
  ``s_in`` 1 multiplies by one, so the passed gradient keeps its bits, as NumPy's bitwise select does.
"""
from __future__ import annotations

BODY = r"""
/* ---- gradient masks ---- */
typedef struct { const float *g, *x; float *y; int mode, zero_out; float a, b, s_in, s_out; } em_mask_t;

#define EM_MASK_LOOP(COND) \
  for (long i = i0; i < i1; i++) { \
    const float v = x[i], gi = g[i]; \
    const float keep = gi * s_in, drop = zero_out ? 0.0f : gi * s_out; \
    y[i] = (COND) ? keep : drop; \
  }

static void em_mask_range(const void *args, long i0, long i1, long item) {
  (void)item;
  const em_mask_t *p = (const em_mask_t *)args;
  const float *restrict g = p->g, *restrict x = p->x;
  float *restrict y = p->y;
  const float a = p->a, b = p->b, s_in = p->s_in, s_out = p->s_out;
  const int zero_out = p->zero_out;
  switch (p->mode) {
    case 0: EM_MASK_LOOP(v > a) break;
    case 1: EM_MASK_LOOP(v > a && v < b) break;
    case 2: EM_MASK_LOOP(!(v >= a && v <= b)) break;
    case 3: EM_MASK_LOOP(v != 0.0f) break;
    default: EM_MASK_LOOP(!(v <= a)) break;
  }
}

void ember_eager_mask_grad(const float *g, const float *x, float *y, long n, int mode, float a, float b,
                           float s_in, float s_out, int zero_out, int nt) {
  em_mask_t p = {g, x, y, mode, zero_out, a, b, s_in, s_out};
  em_split(nt, n, EM_ITEM, em_mask_range, &p);
}
"""
