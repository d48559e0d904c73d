/* conv module: causal depthwise conv1d + SiLU over a sliding window kept in the state.
 *
 * For one sequence and channel the window is the K-1 state values (oldest first)
 * followed by the sequence's L inputs; output t reads window[t .. t+K-1] and the new
 * state is window[L .. L+K-2].  When L < K-1 part of the old state survives, shifted. */
#include "cpu_kernels.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Entry i of a channel's window: the K-1 state values (zeros for padding), then the
 * sequence's inputs x[token, ch] (x points at the first token's row [C]). */
static inline float window_at(const float *st, const float *x, int64_t i, int64_t hist,
                              uint32_t c, uint32_t ch) {
  if (i < hist) return st ? st[i] : 0.0f;
  return x[(size_t)(i - hist) * c + ch];
}

/* One sequence of L tokens on channel ch.  x, y point at the first token's row [C];
 * st is the channel's state [K-1], or NULL for padding (zero state, not written). */
static void conv_channel(float *y, const float *x, const metrale_bf16 *w, float *st,
                         int64_t len, uint32_t c, uint32_t ch, uint32_t kw) {
  const metrale_bf16 *wc = w + (size_t)ch * kw; /* [K] */
  int64_t hist = (int64_t)kw - 1;               /* K-1 */
  for (int64_t t = 0; t < len; t++) {
    float acc = 0.0f;
    for (uint32_t j = 0; j < kw; j++) acc += cpu_bf(wc[j]) * window_at(st, x, t + j, hist, c, ch);
    y[(size_t)t * c + ch] = cpu_silu(acc);
  }
  if (!st || len == 0) return;
  /* new state = window[L .. L+K-2]; ascending order only reads entries at or after
   * the one being written, so the shift is safe in place */
  for (int64_t i = 0; i < hist; i++) st[i] = window_at(st, x, len + i, hist, c, ch);
}

void cpu_conv1d_prefill(float *y, const float *x, const metrale_bf16 *w, float *state,
                        const int32_t *cu_seqlens, const int32_t *slots, uint32_t s, uint32_t c,
                        uint32_t kw) {
  int64_t work = (int64_t)s * c; /* (sequence, channel) */
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < work; i++) {
    int64_t seq = i / c;
    uint32_t ch = (uint32_t)(i % c);
    int64_t t0 = cu_seqlens[seq], len = (int64_t)cu_seqlens[seq + 1] - t0;
    int32_t slot = slots[seq];
    float *st = slot < 0 ? NULL : state + ((size_t)slot * c + ch) * (kw - 1);
    conv_channel(y + (size_t)t0 * c, x + (size_t)t0 * c, w, st, len, c, ch, kw);
  }
}

void cpu_conv1d_update(float *y, const float *x, const metrale_bf16 *w, float *state,
                       const int32_t *slots, uint32_t bsz, uint32_t c, uint32_t kw) {
  int64_t work = (int64_t)bsz * c; /* (slot b, channel) */
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < work; i++) {
    int64_t b = i / c;
    uint32_t ch = (uint32_t)(i % c);
    int32_t slot = slots[b];
    float *st = slot < 0 ? NULL : state + ((size_t)slot * c + ch) * (kw - 1);
    conv_channel(y + (size_t)b * c, x + (size_t)b * c, w, st, 1, c, ch, kw);
  }
}

metrale_status cpu_k_conv1d_prefill(const gpu_arg *args) {
  if (cpu_arg_u(args, 8) == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv1d_prefill: kw must be >= 1");
  cpu_conv1d_prefill(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_p(args, 3),
                     cpu_arg_p(args, 4), cpu_arg_p(args, 5), cpu_arg_u(args, 6), cpu_arg_u(args, 7),
                     cpu_arg_u(args, 8));
  return METRALE_OK;
}

metrale_status cpu_k_conv1d_update(const gpu_arg *args) {
  if (cpu_arg_u(args, 7) == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv1d_update: kw must be >= 1");
  cpu_conv1d_update(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_p(args, 3),
                    cpu_arg_p(args, 4), cpu_arg_u(args, 5), cpu_arg_u(args, 6), cpu_arg_u(args, 7));
  return METRALE_OK;
}

/* conv1d_prefill then l2norm_qk on its output (ld = C): the GPU kernel keeps the q and k
 * heads in registers between the two; the op is the two ops in order. */
metrale_status cpu_k_conv1d_prefill_l2norm(const gpu_arg *args) {
  const uint32_t s = cpu_arg_u(args, 6), c = cpu_arg_u(args, 7), nk = cpu_arg_u(args, 9), dk = cpu_arg_u(args, 10);
  const int32_t *cu = cpu_arg_p(args, 4);
  if (cpu_arg_u(args, 8) == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv1d_prefill_l2norm: kw must be >= 1");
  if (2 * (uint64_t)nk * dk > c)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv1d_prefill_l2norm: 2*nk*dk = %llu > C = %u",
                         (unsigned long long)(2 * (uint64_t)nk * dk), c);
  METRALE_RETURN_IF_ERROR(cpu_k_conv1d_prefill(args));
  cpu_l2norm_qk(cpu_arg_p(args, 0), s ? (uint32_t)cu[s] : 0u, nk, dk, c);
  return METRALE_OK;
}

/* conv1d_prefill_l2norm on x IEEE half [T, C]: the halves widened (exactly) into an f32 copy,
 * then the same op. */
metrale_status cpu_k_conv1d_prefill_l2norm_xh(const gpu_arg *args) {
  const uint32_t s = cpu_arg_u(args, 6), c = cpu_arg_u(args, 7);
  const int32_t *cu = cpu_arg_p(args, 4);
  const size_t n = (size_t)(s && cu[s] > 0 ? (uint32_t)cu[s] : 0u) * c;
  const uint16_t *xh = cpu_arg_p(args, 1);
  float *xf = malloc((n ? n : 1) * sizeof *xf);
  if (!xf) return METRALE_ERROR(OUT_OF_MEMORY, "conv1d_prefill_l2norm_xh: f32 copy of x [%zu values]", n);
  for (size_t i = 0; i < n; i++) xf[i] = metrale_f16_to_f32(xh[i]);
  gpu_arg a[11];
  memcpy(a, args, sizeof a);
  a[1].v.ptr = (uint64_t)(uintptr_t)xf;
  const metrale_status st = cpu_k_conv1d_prefill_l2norm(a);
  free(xf);
  return st;
}

/* conv1d_prefill_l2norm_xh's op for its _xhv and _qkh forms (their arguments are xh's with vh after
 * the first): into a fresh f32 copy of y [t, c] (*yf, which the caller frees). */
static metrale_status xh_into_copy(const char *kernel, const gpu_arg *args, size_t t, uint32_t c, float **yf) {
  *yf = malloc((t * c + 1) * sizeof **yf);
  if (!*yf) return METRALE_ERROR(OUT_OF_MEMORY, "%s: f32 copy of y [%zu, %u]", kernel, t, c);
  gpu_arg a[11]; /* conv1d_prefill_l2norm_xh's arguments: vh left out, y the copy */
  a[0] = args[0];
  memcpy(a + 1, args + 2, 10 * sizeof *a);
  a[0].v.ptr = (uint64_t)(uintptr_t)*yf;
  return cpu_k_conv1d_prefill_l2norm_xh(a);
}

/* conv1d_prefill_l2norm_xh with the value channels [2*nk*dk, C) stored to vh IEEE half
 * [T, C - 2*nk*dk] (rounded to nearest even, saturated at +-65504) and left as they were in y:
 * the op into an f32 copy of y, then each channel to its place. */
metrale_status cpu_k_conv1d_prefill_l2norm_xhv(const gpu_arg *args) {
  const uint32_t s = cpu_arg_u(args, 7), c = cpu_arg_u(args, 8), nk = cpu_arg_u(args, 10), dk = cpu_arg_u(args, 11);
  const int32_t *cu = cpu_arg_p(args, 5);
  if (2 * (uint64_t)nk * dk > c)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv1d_prefill_l2norm_xhv: 2*nk*dk = %llu > C = %u",
                         (unsigned long long)(2 * (uint64_t)nk * dk), c);
  if ((uintptr_t)cpu_arg_p(args, 1) % 8u != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv1d_prefill_l2norm_xhv: needs an 8-byte aligned vh");
  const size_t t = s && cu[s] > 0 ? (uint32_t)cu[s] : 0u, qk = 2 * (size_t)nk * dk, nvdv = c - qk;
  float *y = cpu_arg_p(args, 0), *yf = NULL;
  uint16_t *vh = cpu_arg_p(args, 1);
  const metrale_status st = xh_into_copy("conv1d_prefill_l2norm_xhv", args, t, c, &yf);
  if (st == METRALE_OK)
    for (size_t tok = 0; tok < t; tok++) {
      memcpy(y + tok * c, yf + tok * c, qk * sizeof *y);
      for (size_t j = 0; j < nvdv; j++) vh[tok * nvdv + j] = metrale_f32_to_f16_sat(yf[tok * c + qk + j]);
    }
  free(yf);
  return st;
}

/* conv1d_prefill_l2norm_xhv with the q and k heads into the whole-head kernels' q/k planes at the
 * start of ws (kernels.def delta_rule_prefill_chunked_wh_prep; dk = 128) instead of y: the op
 * into an f32 copy of y, then its q and k to the planes and its value channels to vh. */
metrale_status cpu_k_conv1d_prefill_l2norm_qkh(const gpu_arg *args) {
  const uint32_t s = cpu_arg_u(args, 7), c = cpu_arg_u(args, 8), nk = cpu_arg_u(args, 10), dk = cpu_arg_u(args, 11);
  const int32_t *cu = cpu_arg_p(args, 5);
  if (dk != 128 || 2 * (uint64_t)nk * dk > c)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv1d_prefill_l2norm_qkh: dk = %u (only 128), 2*nk*dk = %llu, C = %u",
                         dk, (unsigned long long)(2 * (uint64_t)nk * dk), c);
  if ((uintptr_t)cpu_arg_p(args, 0) % 16u != 0 || (uintptr_t)cpu_arg_p(args, 1) % 8u != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "conv1d_prefill_l2norm_qkh: needs a 16-byte aligned ws and an 8-byte "
                         "aligned vh");
  const size_t t = s && cu[s] > 0 ? (uint32_t)cu[s] : 0u, qk = 2 * (size_t)nk * dk, nvdv = c - qk;
  float *yf = NULL;
  uint16_t *vh = cpu_arg_p(args, 1);
  const metrale_status st = xh_into_copy("conv1d_prefill_l2norm_qkh", args, t, c, &yf);
  if (st == METRALE_OK) {
    cpu_wh_planes_put(cpu_arg_p(args, 0), yf, c, cu, s, nk);
    for (size_t tok = 0; tok < t; tok++)
      for (size_t j = 0; j < nvdv; j++) vh[tok * nvdv + j] = metrale_f32_to_f16_sat(yf[tok * c + qk + j]);
  }
  free(yf);
  return st;
}
