"""The C text of the native 2-d window kernels (im2col, col2im, max pooling and its gather/scatter),
part of the one library ``eager_source.source()`` builds (see ``eager_kernels.py`` for the Python side).

They do what the NumPy kernels in ``nn/functional/_conv_kernels.py`` and ``_pool_kernels.py`` do, on
float32 (N*C, H, W) planes, without NumPy's per-inner-loop cost on short rows (a 13-wide image row is
13 elements: NumPy pays its loop setup per row). Geometry: kernel (kh, kw), stride (sh, sw), the
top/left padding (ph, pw), dilation (dh, dw), output (OH, OW).

- ``im2col(x, cols, planes, geometry, nt)``: cols holds, per plane, for each kernel offset (i, j) in
  order, the OH x OW values ``x[oh*sh - ph + i*dh][ow*sw - pw + j*dw]`` (0 outside the image): the
  (N, C*kh*kw, OH*OW) columns of a convolution;
- ``col2im(cols, x, planes, geometry, nt)``: the adjoint: each plane zeroed, then the columns added at
  those positions offset by offset in the same order as the NumPy kernel (the same sums, bit for bit);
  positions in the padding are dropped;
- ``max_pool(x, y, idx, planes, geometry, nt)``: each window scanned in torch's order (a later value
  wins when greater, a NaN always wins; the padding reads as -inf), the flat in-plane index of the
  winner; a window whose winner is a padded position (every value -inf) reports its first in-bounds
  element, as torch does;
- ``gather(x, idx, y, planes, HW, L, nt)``: ``y[p][l] = x[p][idx[p][l]]``;
- ``scatter(g, idx, out, planes, HW, L, nt)``: ``out`` zeroed and ``out[p][idx[p][l]] = g[p][l]``
  (windows that do not overlap: every index of a plane distinct).
"""
from __future__ import annotations

BODY = r"""
/* ---- 2-d windows over (planes, H, W) ---- */
typedef struct {
  const float *x; float *y; const long *ci; long *idx;
  long H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
  int scatter;
} em_win_t;

/* the outputs ow in [lo, hi) whose input column w0 + ow * sw lies in [0, W) */
static inline void em_win_cols(long w0, long sw, long W, long OW, long *lo, long *hi) {
  long a = w0 >= 0 ? 0 : (-w0 + sw - 1) / sw;
  long b = W - w0 <= 0 ? 0 : (W - w0 + sw - 1) / sw;
  if (b > OW) b = OW;
  if (a > b) a = b;
  *lo = a; *hi = b;
}

/* im2col (add 0: the image a->x copied into the columns a->y) or col2im (add 1: the columns a->x added
   into the zeroed image a->y) of planes [p0, p1): one walk over the kernel offsets and output rows serves
   both; inlined with a constant `add`, so each direction compiles to its own loops */
static inline __attribute__((always_inline)) void em_cols_planes(const em_win_t *a, long p0, long p1,
                                                                 const int add) {
  const long H = a->H, W = a->W, OH = a->OH, OW = a->OW, sw = a->sw, per = a->kh * a->kw * OH * OW;
  for (long p = p0; p < p1; p++) {
    const float *x = add ? 0 : a->x + p * H * W;
    float *img = add ? a->y + p * H * W : 0;
    float *c = add ? 0 : a->y + p * per;
    const float *cin = add ? a->x + p * per : 0;
    if (add) for (long n = 0; n < H * W; n++) img[n] = 0.0f;
    long row = 0;
    for (long i = 0; i < a->kh; i++)
      for (long j = 0; j < a->kw; j++) {
        const long w0 = j * a->dw - a->pw;
        long lo, hi;
        em_win_cols(w0, sw, W, OW, &lo, &hi);
        for (long oh = 0; oh < OH; oh++, row += OW) {
          const long ih = oh * a->sh - a->ph + i * a->dh;
          const int in = ih >= 0 && ih < H;
          if (add) {
            if (!in) continue;
            float *restrict xr = img + ih * W + w0;
            const float *restrict cr = cin + row;
            if (sw == 1)
              for (long ow = lo; ow < hi; ow++) xr[ow] += cr[ow];
            else
              for (long ow = lo; ow < hi; ow++) xr[ow * sw] += cr[ow];
            continue;
          }
          float *restrict cr = c + row;
          if (!in) {
            for (long ow = 0; ow < OW; ow++) cr[ow] = 0.0f;
            continue;
          }
          const float *restrict xr = x + ih * W + w0;
          for (long ow = 0; ow < lo; ow++) cr[ow] = 0.0f;
          if (sw == 1)
            for (long ow = lo; ow < hi; ow++) cr[ow] = xr[ow];
          else
            for (long ow = lo; ow < hi; ow++) cr[ow] = xr[ow * sw];
          for (long ow = hi; ow < OW; ow++) cr[ow] = 0.0f;
        }
      }
  }
}

static void em_im2col_range(const void *args, long p0, long p1, long item) {
  (void)item;
  em_cols_planes((const em_win_t *)args, p0, p1, 0);
}

static void em_col2im_range(const void *args, long p0, long p1, long item) {
  (void)item;
  em_cols_planes((const em_win_t *)args, p0, p1, 1);
}

/* one output row at a time, offset by offset in torch's order, vectorized along the row: the first
   offset sets (value, index) (-inf and -1 in the padding), later in-bounds ones take over when greater or
   NaN (a padded position, -inf, never does); a winner still at -1 becomes the window's first in-bounds
   element */
static void em_max_pool_range(const void *args, long p0, long p1, long item) {
  (void)item;
  const em_win_t *a = (const em_win_t *)args;
  const long H = a->H, W = a->W, OH = a->OH, OW = a->OW, sw = a->sw;
  for (long p = p0; p < p1; p++) {
    const float *x = a->x + p * H * W;
    for (long oh = 0; oh < OH; oh++) {
      float *restrict y = a->y + (p * OH + oh) * OW;
      long *restrict at = a->idx + (p * OH + oh) * OW;
      const long h0 = oh * a->sh - a->ph;
      int started = 0, padded = 0;
      for (long i = 0; i < a->kh; i++) {
        const long ih = h0 + i * a->dh;
        const int hin = ih >= 0 && ih < H;
        for (long j = 0; j < a->kw; j++) {
          const long w0 = j * a->dw - a->pw;
          long lo, hi;
          em_win_cols(w0, sw, W, OW, &lo, &hi);
          if (!hin) { lo = 0; hi = 0; }
          const float *restrict xr = x + ih * W + w0;
          const long base = ih * W + w0;
          if (!started) {
            for (long ow = 0; ow < OW; ow++) { y[ow] = -INFINITY; at[ow] = -1; }
            for (long ow = lo; ow < hi; ow++) { y[ow] = xr[ow * sw]; at[ow] = base + ow * sw; }
            padded = lo > 0 || hi < OW;
            started = 1;
            continue;
          }
          for (long ow = lo; ow < hi; ow++) {
            const float v = xr[ow * sw], b = y[ow];
            const int upd = (v > b) | (v != v);
            y[ow] = upd ? v : b;
            at[ow] = upd ? base + ow * sw : at[ow];
          }
        }
      }
      if (!padded) continue;
      for (long ow = 0; ow < OW; ow++) {
        if (at[ow] >= 0) continue;
        long fh = h0, fw = ow * sw - a->pw;
        if (fh < 0) fh += (-fh + a->dh - 1) / a->dh * a->dh;
        if (fw < 0) fw += (-fw + a->dw - 1) / a->dw * a->dw;
        at[ow] = fh * W + fw;
      }
    }
  }
}

/* per plane of H (here: HW) elements and OH (here: L) indices ci: gather y[l] = x[ci[l]], or (scatter)
   y zeroed and y[ci[l]] = x[l] */
static void em_index_range(const void *args, long p0, long p1, long item) {
  (void)item;
  const em_win_t *a = (const em_win_t *)args;
  const long HW = a->H, L = a->OH;
  for (long p = p0; p < p1; p++) {
    const long *ix = a->ci + p * L;
    if (a->scatter) {
      const float *g = a->x + p * L;
      float *out = a->y + p * HW;
      for (long n = 0; n < HW; n++) out[n] = 0.0f;
      for (long l = 0; l < L; l++) out[ix[l]] = g[l];
    } else {
      const float *x = a->x + p * HW;
      float *y = a->y + p * L;
      for (long l = 0; l < L; l++) y[l] = x[ix[l]];
    }
  }
}

/* planes per pool item: about EM_ITEM elements of work */
static long em_planes_per_item(long per_plane) { return em_rows_per_item(per_plane); }

static em_win_t em_win(const float *x, float *y, const long *geo) {
  em_win_t a = {0};
  a.x = x; a.y = y;
  a.H = geo[0]; a.W = geo[1]; a.OH = geo[2]; a.OW = geo[3]; a.kh = geo[4]; a.kw = geo[5];
  a.sh = geo[6]; a.sw = geo[7]; a.ph = geo[8]; a.pw = geo[9]; a.dh = geo[10]; a.dw = geo[11];
  return a;
}

/* geo = (H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw) */
void ember_eager_im2col(const float *x, float *cols, long planes, const long *geo, int nt) {
  em_win_t a = em_win(x, cols, geo);
  em_split(nt, planes, em_planes_per_item(a.kh * a.kw * a.OH * a.OW), em_im2col_range, &a);
}

void ember_eager_col2im(const float *cols, float *x, long planes, const long *geo, int nt) {
  em_win_t a = em_win(cols, x, geo);
  em_split(nt, planes, em_planes_per_item(a.kh * a.kw * a.OH * a.OW), em_col2im_range, &a);
}

void ember_eager_max_pool(const float *x, float *y, long *idx, long planes, const long *geo, int nt) {
  em_win_t a = em_win(x, y, geo);
  a.idx = idx;
  em_split(nt, planes, em_planes_per_item(a.kh * a.kw * a.OH * a.OW), em_max_pool_range, &a);
}

void ember_eager_gather(const float *x, const long *idx, float *y, long planes, long hw, long l, int nt) {
  em_win_t a = {0};
  a.x = x; a.y = y; a.ci = idx; a.H = hw; a.OH = l;
  em_split(nt, planes, em_planes_per_item(l), em_index_range, &a);
}

void ember_eager_scatter(const float *g, const long *idx, float *out, long planes, long hw, long l, int nt) {
  em_win_t a = {0};
  a.x = g; a.y = out; a.ci = idx; a.H = hw; a.OH = l; a.scatter = 1;
  em_split(nt, planes, em_planes_per_item(hw), em_index_range, &a);
}
"""
