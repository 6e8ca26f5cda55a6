"""The C text of the native index-selecting kernels, gather and topk (part of the one library
``eager_source.source()`` builds; the Python side is ``eager_kernels.gather_dim`` / ``topk_last``).

On small tensors these ops cost their fixed overheads: NumPy's gather is a fancy index with a grid of
index arrays plus a separate bounds check (a strided reduction), its topk a stable argsort, a reversal,
a slice and a gather. Here each is one pass, and the call takes the ndarray objects themselves
(ctypes ``py_object``): the kernel reads data pointer, rank, shape and strides from the array struct at
the offsets ``eager_kernels`` checked on live arrays at load (``EM_ND_*``), so the caller builds no
pointer or shape arguments.

- ``gather_dim(x, idx, out, dim, esize)``: ``out`` (C-contiguous, idx's shape) = x at idx along
  ``dim`` for elements of ``esize`` bytes (1, 2, 4, 8); x and idx (int64) of one rank, any strides.
  Returns -1, or the flat position (C order of idx) of the first index outside ``[0, x.shape[dim])``
  (then ``out`` is partly written and the caller raises).
- ``softmax_o`` / ``softmax_backward_o`` / ``gelu_o`` / ``gelu_backward_o`` / ``cross_entropy_o`` /
  ``layer_norm_forward_o`` / ``mask_grad_o``: those kernels of ``eager_source.py`` called with the arrays themselves
  (sizes read from them; ``has`` flags the optional arrays, bit 0 the first): the pointer and size
  arguments cost more than a 16x16 softmax.
- ``topk_last(x, vals, inds, k, largest)``: the ``k`` largest (smallest) float32 values of each row
  of a C-contiguous array over its last dim, in order, with their int64 indices: an insertion into
  the k kept so far, stable (equal values keep their index order) with NaN counted as the largest,
  the same order as the stable argsort the NumPy path takes.
"""
from __future__ import annotations

import ctypes

import numpy as np


def layout():
    """``(data, ndim, dims, strides)``: the byte offsets of those ndarray struct fields, checked on live
    arrays of several ranks and layouts (NumPy's public ``PyArrayObject_fields``: a data pointer after
    the object head, then an int rank, then the dims and strides pointers), or None when anything
    disagrees (then these kernels are not used)."""
    from ..compiler import build
    if build._OFFSETS is None or ctypes.sizeof(ctypes.c_long) != 8 or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    data = build._OFFSETS[3]
    offs = (data, data + 8, data + 16, data + 24)
    at = ctypes.c_void_p.from_address
    try:
        base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        for a in (base, base[:, ::2, 1:], base.T, np.zeros(5, np.int64), base[None]):
            i = id(a)
            dims = at(i + offs[2]).value
            sts = at(i + offs[3]).value
            if (at(i + offs[0]).value != a.__array_interface__["data"][0]
                    or ctypes.c_int.from_address(i + offs[1]).value != a.ndim
                    or tuple((ctypes.c_long * a.ndim).from_address(dims)) != a.shape
                    or tuple((ctypes.c_long * a.ndim).from_address(sts)) != a.strides):
                return None
    except Exception:       # any surprise means: do not trust the layout
        return None
    return offs


def body(nd_data: int, nd_ndim: int, nd_dims: int, nd_strides: int) -> str:
    """The C text with the ndarray struct offsets (bytes from the object's address) filled in."""
    return f"""
/* ---- gather along one dim / topk over the last dim (ndarray objects in) ---- */
#define EM_ND_DATA(o) (*(char *const *)((const char *)(o) + {nd_data}))
#define EM_ND_NDIM(o) (*(const int *)((const char *)(o) + {nd_ndim}))
#define EM_ND_DIMS(o) (*(const long *const *)((const char *)(o) + {nd_dims}))
#define EM_ND_STRIDES(o) (*(const long *const *)((const char *)(o) + {nd_strides}))
""" + _BODY


_BODY = r"""
long ember_eager_gather_dim(const void *xo, const void *io, void *oo, int dim, int esize) {
  const char *x = EM_ND_DATA(xo), *ip = EM_ND_DATA(io);
  char *out = EM_ND_DATA(oo);
  const int nd = EM_ND_NDIM(io);
  const long *shape = EM_ND_DIMS(io), *ist = EM_ND_STRIDES(io), *xst = EM_ND_STRIDES(xo);
  const unsigned long size = (unsigned long)EM_ND_DIMS(xo)[dim];
  const long xsd = xst[dim];
  long n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  if (n == 0) return -1;
  long pos[64] = {0};
  if (nd > 64) return -2;
  const long inner = shape[nd - 1], iin = ist[nd - 1], xin = (nd - 1 == dim) ? 0 : xst[nd - 1];
  long f = 0, ioff = 0, xoff = 0;
  while (f < n) {
    const char *ir = ip + ioff, *xr = x + xoff;
    char *o = out + f * esize;
    for (long j = 0; j < inner; j++) {
      const long v = *(const long *)(ir + j * iin);
      if ((unsigned long)v >= size) return f + j;
      const char *s = xr + j * xin + v * xsd;
      switch (esize) {
        case 8: *(uint64_t *)o = *(const uint64_t *)s; break;
        case 4: *(uint32_t *)o = *(const uint32_t *)s; break;
        case 2: *(uint16_t *)o = *(const uint16_t *)s; break;
        default: *o = *s;
      }
      o += esize;
    }
    f += inner;
    for (int d = nd - 2; d >= 0; d--) {     /* the next row of idx: carry through the outer dims */
      pos[d]++;
      ioff += ist[d];
      if (d != dim) xoff += xst[d];
      if (pos[d] < shape[d]) break;
      ioff -= ist[d] * shape[d];
      if (d != dim) xoff -= xst[d] * shape[d];
      pos[d] = 0;
    }
  }
  return -1;
}

static long em_nd_size(const void *o) {
  const int nd = EM_ND_NDIM(o);
  const long *sh = EM_ND_DIMS(o);
  long n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  return n;
}

static long em_nd_last(const void *o) {
  const int nd = EM_ND_NDIM(o);
  return nd ? EM_ND_DIMS(o)[nd - 1] : 1;
}

void ember_eager_softmax_o(const void *xo, void *yo, int log_form, int nt) {
  const long d = em_nd_last(xo);
  ember_eager_softmax((const float *)EM_ND_DATA(xo), (float *)EM_ND_DATA(yo), em_nd_size(xo) / d, d, log_form, nt);
}

void ember_eager_softmax_backward_o(const void *go, const void *yo, void *gxo, int log_form, int nt) {
  const long d = em_nd_last(yo);
  ember_eager_softmax_backward((const float *)EM_ND_DATA(go), (const float *)EM_ND_DATA(yo),
                               (float *)EM_ND_DATA(gxo), em_nd_size(yo) / d, d, log_form, nt);
}

void ember_eager_gelu_o(const void *xo, void *yo, int tanh_form, int nt) {
  ember_eager_gelu((const float *)EM_ND_DATA(xo), (float *)EM_ND_DATA(yo), em_nd_size(xo), tanh_form, nt);
}

void ember_eager_gelu_backward_o(const void *go, const void *xo, void *gxo, int tanh_form, int nt) {
  ember_eager_gelu_backward((const float *)EM_ND_DATA(go), (const float *)EM_ND_DATA(xo),
                            (float *)EM_ND_DATA(gxo), em_nd_size(xo), tanh_form, nt);
}

long ember_eager_cross_entropy_o(const void *xo, const void *to, void *logpo, void *losso, void *sumso,
                                 int has, long ignore, int nt) {
  const long *sh = EM_ND_DIMS(xo);
  return ember_eager_cross_entropy((const float *)EM_ND_DATA(xo), (const long *)EM_ND_DATA(to),
                                   (float *)EM_ND_DATA(logpo), (has & 1) ? (float *)EM_ND_DATA(losso) : 0,
                                   (double *)EM_ND_DATA(sumso), sh[0], sh[1], ignore, nt);
}

void ember_eager_layer_norm_forward_o(const void *xo, const void *wo, const void *bo, void *meano, void *varo,
                                      void *yo, int has, float eps, int nt) {
  const long *sh = EM_ND_DIMS(xo);
  ember_eager_layer_norm_forward((const float *)EM_ND_DATA(xo), (has & 1) ? (const float *)EM_ND_DATA(wo) : 0,
                                 (has & 2) ? (const float *)EM_ND_DATA(bo) : 0, (float *)EM_ND_DATA(meano),
                                 (float *)EM_ND_DATA(varo), (float *)EM_ND_DATA(yo), sh[0], sh[1], eps, nt);
}

void ember_eager_mask_grad_o(const void *go, const void *xo, void *yo, int mode, float a, float b, float s_in,
                             float s_out, int zero_out, int nt) {
  ember_eager_mask_grad((const float *)EM_ND_DATA(go), (const float *)EM_ND_DATA(xo), (float *)EM_ND_DATA(yo),
                        em_nd_size(go), mode, a, b, s_in, s_out, zero_out, nt);
}

/* a goes before b: larger (smaller) first, NaN the largest */
static inline int em_before(float a, float b, int largest) {
  if (largest) return a > b || (a != a && b == b);
  return a < b || (a == a && b != b);
}

void ember_eager_topk_last(const void *xo, void *vo, void *io, long k, int largest) {
  const float *x = (const float *)EM_ND_DATA(xo);
  float *vals = (float *)EM_ND_DATA(vo);
  long *inds = (long *)EM_ND_DATA(io);
  const int nd = EM_ND_NDIM(xo);
  const long *shape = EM_ND_DIMS(xo);
  const long d = shape[nd - 1];
  long rows = 1;
  for (int i = 0; i < nd - 1; i++) rows *= shape[i];
  if (k == 0) return;
  for (long r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    float *vr = vals + r * k;
    long *ir = inds + r * k;
    long cnt = 0;
    for (long j = 0; j < d; j++) {
      const float v = xr[j];
      if (cnt == k && !em_before(v, vr[k - 1], largest)) continue;
      long p = cnt < k ? cnt++ : k - 1;
      while (p > 0 && em_before(v, vr[p - 1], largest)) {
        vr[p] = vr[p - 1];
        ir[p] = ir[p - 1];
        p--;
      }
      vr[p] = v;
      ir[p] = j;
    }
  }
}
"""
