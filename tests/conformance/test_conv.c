/* conv module: causal depthwise conv1d + SiLU with a K-1 state per slot and channel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const uint32_t channels[] = {1, 7, 48, 300};
static const uint32_t widths[] = {2, 4, 6};

/* One sequence of tokens [t0, t1) from state slot (zeros for -1): y_ref [T,C] and,
 * unless -1, the new state into state_ref [n_slots, C, K-1] (exact values); y_mag [T,C]
 * each output's scale for cf_check_f32_scaled: the sum of its K terms' magnitudes (the
 * f32 sum's rounding is relative to them, not to a sum that cancels) plus |y|. */
static void ref_conv(double *y_ref, double *y_mag, double *state_ref, const float *x, const metrale_bf16 *w,
                     int32_t slot, uint32_t t0, uint32_t t1, uint32_t c, uint32_t kw) {
  uint32_t hist = kw - 1, len = t1 - t0;
  double *win = cf_alloc(hist + len, sizeof *win);
  for (uint32_t ch = 0; ch < c; ch++) {
    for (uint32_t i = 0; i < hist; i++)
      win[i] = slot < 0 ? 0.0 : state_ref[((size_t)slot * c + ch) * hist + i];
    for (uint32_t t = 0; t < len; t++) win[hist + t] = (double)x[(size_t)(t0 + t) * c + ch];
    for (uint32_t t = 0; t < len; t++) {
      double acc = 0.0, mag = 0.0;
      for (uint32_t j = 0; j < kw; j++) {
        const double term = mt_bf(w[(size_t)ch * kw + j]) * win[t + j];
        acc += term;
        mag += fabs(term);
      }
      const double y = acc / (1.0 + exp(-acc));
      y_ref[(size_t)(t0 + t) * c + ch] = y;
      y_mag[(size_t)(t0 + t) * c + ch] = mag + fabs(y);
    }
    if (slot >= 0)
      for (uint32_t i = 0; i < hist; i++)
        state_ref[((size_t)slot * c + ch) * hist + i] = win[len + i];
  }
  free(win);
}

/* l2norm_qk of the reference output in place: the first 2*nk heads of dk channels of each
 * token's row [C], q heads (the first nk) also scaled by dk^-1/2. */
static void ref_l2norm(double *y, uint32_t t, uint32_t c, uint32_t nk, uint32_t dk) {
  for (uint32_t tok = 0; tok < t; tok++)
    for (uint32_t h = 0; h < 2 * nk; h++) {
      double *v = y + (size_t)tok * c + (size_t)h * dk, ss = 0.0;
      for (uint32_t i = 0; i < dk; i++) ss += v[i] * v[i];
      double scale = 1.0 / sqrt(ss + 1e-6) / (h < nk ? sqrt((double)dk) : 1.0);
      for (uint32_t i = 0; i < dk; i++) v[i] *= scale;
    }
}

/* x is drawn from [-2, 2] times this (1 but in conv1d_prefill_l2norm_xhv's saturating case) */
static float x_scale = 1.0f;
/* vh (IEEE half) against the exact outputs: each rounded once, at most 2^-11 relative (NMSE at
 * most 2.4e-7); against the cpu oracle: where the two f32 outputs straddle a rounding midpoint
 * the halves differ by a step, 2^-10 relative (as gemm_f16_ws_cols3q's y0, test_gemm.c). */
#define TOL_HALF 3e-7
#define TOL_HALF_ORACLE 1e-6

/* conv1d_prefill_l2norm_qkh's q/k planes (kernel_bounds.h's layout) against y_ref's q and k: each
 * token's halves (NMSE, TOL_HALF), the rows of a sequence's last chunk past its end exactly zero,
 * and the chunk indices no sequence has exactly as they started (half 1.0). */
static void planes_check(cf_ctx *ctx, const uint16_t *got, const double *y_ref, const int32_t *cu, uint32_t nseq,
                         uint32_t c, uint32_t nk) {
  const size_t nc = mt_wh_first_chunk(cu, nseq), per = METRALE_WH_QK_BYTES / 2; /* halves a (chunk, key head) */
  unsigned char *used = cf_alloc(nc ? nc : 1, 1);
  size_t n = 0, bad_tail = 0, bad_gap = 0;
  for (uint32_t q = 0; q < nseq; q++) n += (size_t)(cu[q + 1] - cu[q]) * 2 * nk * 128;
  uint16_t *vals = cf_alloc(n ? n : 1, 2);
  double *refs = cf_alloc(n ? n : 1, sizeof(double));
  n = 0;
  for (uint32_t q = 0; q < nseq; q++) {
    const size_t len = (size_t)(cu[q + 1] - cu[q]), j0 = mt_wh_first_chunk(cu, q);
    for (size_t r = 0; r < (len + 63) / 64 * 64; r++) {
      used[j0 + r / 64] = 1;
      for (uint32_t hh = 0; hh < 2 * nk; hh++)
        for (uint32_t d = 0; d < 128; d++) {
          const size_t at = mt_wh_plane_at(j0 + r / 64, nk, hh % nk, hh / nk, (uint32_t)(r % 64), d);
          if (r < len) {
            vals[n] = got[at];
            refs[n++] = y_ref[((size_t)cu[q] + r) * c + (size_t)hh * 128 + d];
          } else {
            bad_tail += got[at] != 0u;
          }
        }
    }
  }
  for (size_t j = 0; j < nc; j++)
    for (size_t i = 0; !used[j] && i < nk * per; i++) bad_gap += got[j * nk * per + i] != 0x3c00u;
  cf_check_f16(ctx, "q/k planes", vals, refs, n, TOL_HALF);
  CF_EXPECT(ctx, bad_tail == 0, "%zu halves past the sequences' ends in their last chunks are not zero", bad_tail);
  CF_EXPECT(ctx, bad_gap == 0, "%zu halves of chunks no sequence has were written", bad_gap);
  free(used), free(vals), free(refs);
}

/* prefill when cu != NULL (nseq sequences), else decode (nseq slots, one token each).
 * tiled: 1 conv1d_prefill_tiled, whose grid runs over blocks of 64 tokens; 2
 * conv1d_prefill_l2norm (1024 channels a block, T / gy tokens: gy blocks along the tokens,
 * 0 for ceil(T/64)), which also normalises the nk q and nk k heads of dk channels; 3
 * conv1d_prefill_l2norm_xh, the same on x in IEEE half (the reference takes the halves' values,
 * and the state, which holds widened inputs, stays exact); 4 conv1d_prefill_l2norm_xhv, which
 * writes the value channels to vh in IEEE half (checked against the reference rounded to half's
 * range) and must leave y's value channels as they were (y starts as random values); 5
 * conv1d_prefill_l2norm_qkh, vh as 4 and q and k in half into the whole-head core's q/k planes
 * (planes_check) instead of a y. */
static void run_case_qk(cf_ctx *ctx, gpu_kernel kern, uint32_t c, uint32_t kw, uint32_t nseq,
                        const int32_t *cu, uint32_t n_slots, int tiled, uint32_t nk, uint32_t dk, uint32_t gy) {
  int prefill = cu != NULL;
  uint32_t t = prefill ? (uint32_t)cu[nseq] : nseq;
  size_t per = (size_t)c * (kw - 1), ns = n_slots * per, nx = (size_t)t * c;
  float *x = cf_alloc(nx, sizeof(float));
  metrale_bf16 *w = cf_alloc((size_t)c * kw, 2);
  float *state = cf_alloc(ns, sizeof(float));
  int32_t *slots = cf_alloc(nseq, sizeof(int32_t));
  mt_fill_f32(&ctx->rng, x, nx, -2 * x_scale, 2 * x_scale); /* not bf16 values: x, y and state stay f32 */
  uint16_t *xh = NULL;
  if (tiled >= 3) { /* x in half; the reference reads the halves' values */
    xh = cf_alloc(nx, 2);
    for (size_t i = 0; i < nx; i++) xh[i] = metrale_f32_to_f16(x[i]), x[i] = metrale_f16_to_f32(xh[i]);
  }
  mt_fill_bf16(&ctx->rng, w, (size_t)c * kw, -1, 1);
  mt_fill_f32(&ctx->rng, state, ns, -2, 2); /* f32 values that are not bf16: kept exactly */
  cf_pick_slots(&ctx->rng, slots, nseq, n_slots, 1);
  double *y_ref = cf_alloc(nx, sizeof(double)), *state_ref = cf_alloc(ns, sizeof(double));
  double *y_mag = cf_alloc(nx, sizeof(double));
  mt_f32_to_double(state_ref, state, ns);
  for (uint32_t s = 0; s < nseq; s++)
    ref_conv(y_ref, y_mag, state_ref, x, w, slots[s], prefill ? (uint32_t)cu[s] : s,
             prefill ? (uint32_t)cu[s + 1] : s + 1, c, kw);

  if (tiled >= 2) ref_l2norm(y_ref, t, c, nk, dk);
  /* xhv: y's value channels stay as they start; vh's reference is theirs in half's range */
  const size_t qk = 2 * (size_t)nk * dk, nvh = (size_t)t * (c - qk);
  float *y_init = tiled >= 4 ? cf_alloc(nx, sizeof(float)) : NULL;
  double *vh_ref = tiled >= 4 ? cf_alloc(nvh, sizeof(double)) : NULL;
  if (y_init) {
    mt_fill_f32(&ctx->rng, y_init, nx, -1, 1);
    for (size_t tok = 0; tok < t; tok++)
      for (size_t j = qk; j < c; j++) {
        const double v = y_ref[tok * c + j];
        vh_ref[tok * (c - qk) + j - qk] = v > 65504.0 ? 65504.0 : v < -65504.0 ? -65504.0 : v;
        y_ref[tok * c + j] = y_init[tok * c + j];
      }
  }

  static const metrale_kernel_id l2_ids[] = {METRALE_K_conv1d_prefill_l2norm, METRALE_K_conv1d_prefill_l2norm_xh,
                                             METRALE_K_conv1d_prefill_l2norm_xhv, METRALE_K_conv1d_prefill_l2norm_qkh};
  /* qkh: the planes start as half 1.0 (which the chunks' unused indices keep) */
  const size_t nc = prefill ? mt_wh_first_chunk(cu, nseq) : 0, nplane = nc * nk * (METRALE_WH_QK_BYTES / 2);
  uint16_t *planes_init = tiled == 5 ? cf_alloc(nplane ? nplane : 1, 2) : NULL;
  for (size_t i = 0; planes_init && i < nplane; i++) planes_init[i] = 0x3c00u;
  cf_launch l;
  if (tiled >= 2)
    cf_launch_init(&l, l2_ids[tiled - 2], (gpu_dim3){(c + 1023) / 1024, gy ? gy : (t + 63) / 64, 1});
  else if (tiled)
    cf_launch_init(&l, METRALE_K_conv1d_prefill_tiled, (gpu_dim3){(c + 255) / 256, (t + 63) / 64, 1});
  else
    cf_launch_init(&l, prefill ? METRALE_K_conv1d_prefill : METRALE_K_conv1d_update,
                   (gpu_dim3){(c + 255) / 256, nseq, 1});
  int by = planes_init ? cf_buf_add(&l, "planes", CF_F16, CF_INOUT, nplane, planes_init, TOL_HALF_ORACLE)
           : y_init   ? cf_buf_add(&l, "y", CF_F32, CF_INOUT, nx, y_init, CF_TOL_F32)
                      : cf_buf_add(&l, "y", CF_F32, CF_OUT, nx, NULL, CF_TOL_F32);
  const double *y_scale = tiled >= 2 ? NULL : y_mag; /* the l2norm's outputs are normalised: plain NMSE */
  if (!planes_init) l.buf[by].scale = y_scale;
  int bvh = y_init ? cf_buf_add(&l, "vh", CF_F16, CF_OUT, nvh, NULL, TOL_HALF_ORACLE) : -1;
  int bx = xh ? cf_buf_add(&l, "x", CF_F16, CF_IN, nx, xh, 0) : cf_buf_add(&l, "x", CF_F32, CF_IN, nx, x, 0);
  int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, (size_t)c * kw, w, 0);
  int bs = cf_buf_add(&l, "state", CF_F32, CF_INOUT, ns, state, 0);
  l.buf[bs].guard = per * sizeof(float); /* a write to slot -1 lands in the guard */
  int bcu = prefill ? cf_buf_add(&l, "cu_seqlens", CF_I32, CF_IN, nseq + 1, cu, 0) : -1;
  int bsl = cf_buf_add(&l, "slots", CF_I32, CF_IN, nseq, slots, 0);
  cf_arg_buf(&l, by);
  if (bvh >= 0) cf_arg_buf(&l, bvh);
  cf_arg_buf(&l, bx);
  cf_arg_buf(&l, bw);
  cf_arg_buf(&l, bs);
  if (prefill) cf_arg_buf(&l, bcu);
  cf_arg_buf(&l, bsl);
  cf_arg_u32(&l, nseq);
  cf_arg_u32(&l, c);
  cf_arg_u32(&l, kw);
  if (tiled >= 2) {
    cf_arg_u32(&l, nk);
    cf_arg_u32(&l, dk);
  }
  if (cf_run(ctx, &l, kern)) {
    if (planes_init)
      planes_check(ctx, cf_f16(&l, by), y_ref, cu, nseq, c, nk);
    else
      cf_check_f32_scaled(ctx, "y", cf_f32(&l, by), y_ref, y_scale, nx, CF_TOL_F32);
    if (bvh >= 0) {
      cf_check_f16(ctx, "vh", cf_f16(&l, bvh), vh_ref, nvh, TOL_HALF);
      for (size_t i = 0; i < nvh; i++)
        if (fabs(vh_ref[i]) == 65504.0)
          CF_EXPECT(ctx, metrale_f16_to_f32(cf_f16(&l, bvh)[i]) == (float)vh_ref[i], "vh[%zu] = %g, not saturated to %g",
                    i, metrale_f16_to_f32(cf_f16(&l, bvh)[i]), vh_ref[i]);
      for (size_t tok = 0; tok < t && !planes_init; tok++) /* y's value channels exactly as they started */
        CF_EXPECT(ctx, memcmp(cf_f32(&l, by) + tok * c + qk, y_init + tok * c + qk, (c - qk) * sizeof(float)) == 0,
                  "y's value channels of token %zu were written", tok);
    }
    /* the state only ever holds copies of inputs and old state: exact */
    cf_check_state(ctx, "conv state", cf_f32(&l, bs), state, state_ref, per, n_slots, slots, nseq,
                   0.0);
  }
  cf_launch_free(&l);
  free(x), free(xh), free(w), free(state), free(slots), free(y_ref), free(y_mag), free(state_ref);
  free(y_init), free(vh_ref), free(planes_init);
}

static void run_case(cf_ctx *ctx, gpu_kernel kern, uint32_t c, uint32_t kw, uint32_t nseq,
                     const int32_t *cu, uint32_t n_slots, int tiled) {
  run_case_qk(ctx, kern, c, kw, nseq, cu, n_slots, tiled, 0, 4, 0);
}

Test(conv, conv1d_prefill) {
  CF_BEGIN(ctx, kern, METRALE_K_conv1d_prefill);
  static const int32_t lens_a[] = {0, 1, 2, 5, 33}, lens_b[] = {3, 1, 1}, lens_c[] = {6};
  static const struct {
    const int32_t *lens;
    uint32_t n;
  } cases[] = {{lens_a, 5}, {lens_b, 3}, {lens_c, 1}};
  for (size_t ci = 0; ci < sizeof channels / sizeof channels[0]; ci++)
    for (size_t ki = 0; ki < sizeof widths / sizeof widths[0]; ki++)
      for (size_t si = 0; si < sizeof cases / sizeof cases[0]; si++) {
        int32_t cu[8] = {0};
        for (uint32_t s = 0; s < cases[si].n; s++) cu[s + 1] = cu[s] + cases[si].lens[s];
        snprintf(ctx.shape, sizeof ctx.shape, "C=%u K=%u S=%u T=%d", channels[ci], widths[ki],
                 cases[si].n, cu[cases[si].n]);
        run_case(&ctx, kern, channels[ci], widths[ki], cases[si].n, cu, cases[si].n + 2, 0);
      }
  cf_close(&ctx);
}

/* Sequences of tens of thousands of tokens, several in one call, padding slots among them.
 * (llvmpipe ends a shader invocation's loops after 65535 iterations in all; the Vulkan conv
 * prefill loops K + 1 times a token, so on such a driver it runs long sequences in windows:
 * backends/vulkan/README.md.) */
Test(conv, conv1d_prefill_long, .timeout = 600) {
  CF_BEGIN(ctx, kern, METRALE_K_conv1d_prefill);
  static const int32_t lens[] = {25000, 3, 12000, 0, 11000};
  int32_t cu[6] = {0};
  for (uint32_t s = 0; s < 5; s++) cu[s + 1] = cu[s] + lens[s];
  snprintf(ctx.shape, sizeof ctx.shape, "C=40 K=4 S=5 T=%d", cu[5]);
  run_case(&ctx, kern, 40, 4, 5, cu, 7, 0);
  cf_close(&ctx);
}

Test(conv, conv1d_update) {
  CF_BEGIN(ctx, kern, METRALE_K_conv1d_update);
  static const uint32_t batches[] = {1, 2, 5};
  for (size_t ci = 0; ci < sizeof channels / sizeof channels[0]; ci++)
    for (size_t ki = 0; ki < sizeof widths / sizeof widths[0]; ki++)
      for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
        snprintf(ctx.shape, sizeof ctx.shape, "C=%u K=%u B=%u", channels[ci], widths[ki],
                 batches[bi]);
        run_case(&ctx, kern, channels[ci], widths[ki], batches[bi], NULL, batches[bi] + 2, 0);
      }
  cf_close(&ctx);
}

/* Blocks of 64 tokens: sequences that cross tile boundaries, start just before one (the
 * first K-1 outputs, which read the old state, then lie in two tiles), are shorter than
 * K-1 there, or are empty where a tile begins. */
Test(conv, conv1d_prefill_tiled) {
  CF_BEGIN(ctx, kern, METRALE_K_conv1d_prefill_tiled);
  static const uint32_t tiled_widths[] = {2, 4, 6};
  static const int32_t lens_a[] = {0, 1, 2, 3, 130, 0, 70, 1}, lens_b[] = {62, 5, 200},
                       lens_c[] = {63, 2, 0, 1, 64, 0}, lens_d[] = {1000}, lens_e[] = {64, 0, 64, 3},
                       lens_f[] = {5, 1, 1, 1, 1, 60, 4, 2};
  static const struct {
    const int32_t *lens;
    uint32_t n;
  } cases[] = {{lens_a, 8}, {lens_b, 3}, {lens_c, 6}, {lens_d, 1}, {lens_e, 4}, {lens_f, 8}};
  for (size_t ci = 0; ci < sizeof channels / sizeof channels[0]; ci++)
    for (size_t ki = 0; ki < sizeof tiled_widths / sizeof tiled_widths[0]; ki++)
      for (size_t si = 0; si < sizeof cases / sizeof cases[0]; si++) {
        int32_t cu[9] = {0};
        for (uint32_t s = 0; s < cases[si].n; s++) cu[s + 1] = cu[s] + cases[si].lens[s];
        snprintf(ctx.shape, sizeof ctx.shape, "tiled C=%u K=%u S=%u T=%d", channels[ci],
                 tiled_widths[ki], cases[si].n, cu[cases[si].n]);
        run_case(&ctx, kern, channels[ci], tiled_widths[ki], cases[si].n, cu, cases[si].n + 2, 1);
      }
  cf_close(&ctx);
}

/* The tiled conv on 4 channels a thread with the q/k l2norm on the way out: heads of 4 to
 * 128 channels (a warp's lanes in groups of dk/4), q/k heads sharing a warp with value
 * channels, a last block past C, K of 2 to 6 (the general path) and the tiled test's
 * sequence layouts (tiles crossed, sequences shorter than K-1, empty ones, padding slots),
 * on blocks of 64 tokens and on one block, 7 blocks (shares that end inside sequences and
 * inside the first K-1 tokens of one) and more blocks than tokens (empty shares). */
static void run_conv_l2norm(metrale_kernel_id id) {
  CF_BEGIN(ctx, kern, id);
  static const struct {
    uint32_t nk, dk, c;
  } heads[] = {{2, 128, 1100}, {1, 32, 100}, {3, 64, 2052}, {4, 16, 136}, {1, 4, 12}, {2, 8, 36}, {3, 128, 2052}};
  static const uint32_t kws[] = {2, 4, 6};
  static const int32_t lens_a[] = {0, 1, 2, 3, 130, 0, 70, 1}, lens_b[] = {63, 2, 0, 1, 64, 0},
                       lens_c[] = {300}, lens_d[] = {5, 1, 1, 1, 1, 60, 4, 2};
  static const struct {
    const int32_t *lens;
    uint32_t n;
  } cases[] = {{lens_a, 8}, {lens_b, 6}, {lens_c, 1}, {lens_d, 8}};
  for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++)
    for (size_t ki = 0; ki < sizeof kws / sizeof kws[0]; ki++)
      for (size_t si = 0; si < sizeof cases / sizeof cases[0]; si++) {
        if (id == METRALE_K_conv1d_prefill_l2norm_qkh && heads[hi].dk != 128) continue; /* its contract: dk 128 */
        int32_t cu[9] = {0};
        for (uint32_t s = 0; s < cases[si].n; s++) cu[s + 1] = cu[s] + cases[si].lens[s];
        const uint32_t T = (uint32_t)cu[cases[si].n], gys[] = {0, 1, 7, T + 3};
        for (size_t gi = 0; gi < sizeof gys / sizeof gys[0]; gi++) {
          snprintf(ctx.shape, sizeof ctx.shape, "nk=%u dk=%u C=%u K=%u S=%u T=%u grid.y=%u", heads[hi].nk,
                   heads[hi].dk, heads[hi].c, kws[ki], cases[si].n, T, gys[gi] ? gys[gi] : (T + 63) / 64);
          run_case_qk(&ctx, kern, heads[hi].c, kws[ki], cases[si].n, cu, cases[si].n + 2,
                      id == METRALE_K_conv1d_prefill_l2norm_qkh   ? 5
                      : id == METRALE_K_conv1d_prefill_l2norm_xhv ? 4
                      : id == METRALE_K_conv1d_prefill_l2norm_xh  ? 3
                                                                  : 2,
                      heads[hi].nk, heads[hi].dk, gys[gi]);
        }
      }
  cf_close(&ctx);
}

Test(conv, conv1d_prefill_l2norm) { run_conv_l2norm(METRALE_K_conv1d_prefill_l2norm); }

/* The same cases on x in IEEE half (conv1d_prefill_l2norm_xh: 8-byte loads of 4 halves, widened) */
Test(conv, conv1d_prefill_l2norm_xh) { run_conv_l2norm(METRALE_K_conv1d_prefill_l2norm_xh); }

/* The same cases with the value channels to vh in IEEE half (conv1d_prefill_l2norm_xhv); then
 * x up to 2^15, whose value outputs pass +-65504 and must come back saturated, finite */
Test(conv, conv1d_prefill_l2norm_xhv) {
  run_conv_l2norm(METRALE_K_conv1d_prefill_l2norm_xhv);
  x_scale = 16384.0f;
  CF_BEGIN(ctx, kern, METRALE_K_conv1d_prefill_l2norm_xhv);
  const int32_t cu[3] = {0, 130, 200};
  snprintf(ctx.shape, sizeof ctx.shape, "x up to 2^15: nk=1 dk=32 C=100 K=4 S=2 T=200");
  run_case_qk(&ctx, kern, 100, 4, 2, cu, 4, 4, 1, 32, 0);
  cf_close(&ctx);
  x_scale = 1.0f;
}

/* The same cases (heads of 128: two and three key heads, value channels past them and a last block
 * past C) with q and k in IEEE half into the whole-head core's q/k planes (conv1d_prefill_l2norm_qkh);
 * then the launches its contract refuses: dk 64 and a ws 8 bytes off 16-byte alignment. */
Test(conv, conv1d_prefill_l2norm_qkh) {
  run_conv_l2norm(METRALE_K_conv1d_prefill_l2norm_qkh);
  CF_BEGIN(ctx, kern, METRALE_K_conv1d_prefill_l2norm_qkh);
  for (uint32_t bad = 0; bad < 2; bad++) {
    const gpu_arg args[] = {gpu_arg_ptr(4096 + 8 * bad), gpu_arg_ptr(8192),  gpu_arg_ptr(12288), gpu_arg_ptr(16384),
                            gpu_arg_ptr(20480),          gpu_arg_ptr(24576), gpu_arg_ptr(28672), gpu_arg_u32(1),
                            gpu_arg_u32(1024),           gpu_arg_u32(4),     gpu_arg_u32(2),     gpu_arg_u32(bad ? 128 : 64)};
    cf_expect_refused(&ctx, METRALE_K_conv1d_prefill_l2norm_qkh, kern, args, sizeof args / sizeof args[0],
                   bad ? "a misaligned ws" : "dk 64");
  }
  cf_close(&ctx);
}
