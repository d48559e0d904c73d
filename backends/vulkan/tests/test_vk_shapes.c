/* Shapes that reach branches of the Vulkan shaders the shared conformance shapes do
 * not: delta rule with dv > 128 (several column groups per workgroup) and dk at the
 * VK_DELTA_DK_MAX limit, top-k over more experts than invocations (strided scans, ties
 * across invocations), the three gemv kernels over more rows than one 8-row pass, the gemv
 * kernels and the 128x128 GEMM tiles on buffers not 16-byte aligned.  Each launch runs
 * through the conformance harness: guard bands, inputs left intact, and a comparison
 * with the cpu backend (METRALE_TEST_BACKEND=vulkan is set by the build). */
#include <stdlib.h>

#include "harness.h"

static void delta_case(cf_ctx *ctx, gpu_kernel kern, int prefill, uint32_t nk, uint32_t nv,
                       uint32_t dk, uint32_t dv, const int32_t *lens, uint32_t nseq) {
  int32_t cu[8] = {0};
  for (uint32_t s = 0; s < nseq; s++) cu[s + 1] = cu[s] + (prefill ? lens[s] : 1);
  uint32_t t = (uint32_t)cu[nseq], n_slots = nseq + 1;
  size_t c = 2 * (size_t)nk * dk + (size_t)nv * dv, per = (size_t)nv * dk * dv;
  snprintf(ctx->shape, sizeof ctx->shape, "%s S=%u T=%u nk=%u nv=%u dk=%u dv=%u",
           prefill ? "prefill" : "decode", nseq, t, nk, nv, dk, dv);
  float *qkv = cf_alloc(t * c, 4);
  float *g = cf_alloc((size_t)t * nv, 4), *beta = cf_alloc((size_t)t * nv, 4);
  float *state = cf_alloc(n_slots * per, 4);
  int32_t *slots = cf_alloc(nseq, 4);
  /* unit-norm-ish q, k so the recurrence stays bounded */
  mt_fill_f32(&ctx->rng, qkv, t * c, -1.0 / 8, 1.0 / 8);
  mt_fill_f32(&ctx->rng, g, (size_t)t * nv, -1.0, -0.01);
  mt_fill_f32(&ctx->rng, beta, (size_t)t * nv, 0.0, 1.0);
  mt_fill_f32(&ctx->rng, state, n_slots * per, -0.5, 0.5);
  cf_pick_slots(&ctx->rng, slots, nseq, n_slots, 1);

  cf_launch l;
  cf_launch_init(&l, prefill ? METRALE_K_delta_rule_prefill : METRALE_K_delta_rule_decode,
                 (gpu_dim3){nseq * nv, 1, 1});
  int bo = cf_buf_add(&l, "o", CF_BF16, CF_OUT, (size_t)t * nv * dv, NULL, CF_TOL_BF16);
  int bq = cf_buf_add(&l, "qkv", CF_F32, CF_IN, t * c, qkv, 0);
  int bg = cf_buf_add(&l, "g", CF_F32, CF_IN, (size_t)t * nv, g, 0);
  int bb = cf_buf_add(&l, "beta", CF_F32, CF_IN, (size_t)t * nv, beta, 0);
  int bs = cf_buf_add(&l, "state", CF_F32, CF_INOUT, n_slots * per, state, CF_TOL_F32);
  l.buf[bs].guard = per * 4; /* a write to slot -1 would land in the guard */
  int bcu = prefill ? cf_buf_add(&l, "cu_seqlens", CF_I32, CF_IN, nseq + 1, cu, 0) : -1;
  int bsl = cf_buf_add(&l, "slots", CF_I32, CF_IN, nseq, slots, 0);
  cf_arg_buf(&l, bo);
  cf_arg_buf(&l, bq);
  cf_arg_buf(&l, bg);
  cf_arg_buf(&l, bb);
  cf_arg_buf(&l, bs);
  if (prefill) cf_arg_buf(&l, bcu);
  cf_arg_buf(&l, bsl);
  cf_arg_u32(&l, nseq);
  cf_arg_u32(&l, nk);
  cf_arg_u32(&l, nv);
  cf_arg_u32(&l, dk);
  cf_arg_u32(&l, dv);
  cf_run(ctx, &l, kern);
  cf_launch_free(&l);
  free(qkv), free(g), free(beta), free(state), free(slots);
}

Test(vulkan_shapes, delta_rule_wide_heads, .timeout = 900) {
  static const int32_t lens[] = {4, 1, 0, 3};
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill);
  delta_case(&ctx, kern, 1, 2, 4, 24, 300, lens, 4); /* dv = 128 + 128 + 44 */
  delta_case(&ctx, kern, 1, 1, 1, 256, 129, lens, 2);
  cf_close(&ctx);
  CF_BEGIN(dctx, dkern, METRALE_K_delta_rule_decode);
  delta_case(&dctx, dkern, 0, 1, 2, 256, 200, NULL, 3);
  delta_case(&dctx, dkern, 0, 3, 6, 7, 257, NULL, 4);
  cf_close(&dctx);
}

Test(vulkan_shapes, moe_topk_many_experts) {
  CF_BEGIN(ctx, kern, METRALE_K_moe_topk);
  static const struct {
    uint32_t t, e, ld, k, norm;
  } shapes[] = {{3, 600, 601, 10, 1}, {2, 257, 260, 8, 0}, {4, 1000, 1000, 3, 1}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    uint32_t t = shapes[si].t, e = shapes[si].e, ld = shapes[si].ld, k = shapes[si].k;
    snprintf(ctx.shape, sizeof ctx.shape, "T=%u E=%u k=%u", t, e, k);
    float *logits = cf_alloc((size_t)t * ld, 4);
    /* a coarse grid gives many exact ties, spread over different invocations */
    for (size_t i = 0; i < (size_t)t * ld; i++) logits[i] = (float)mt_below(&ctx.rng, 12) / 4.0f;
    cf_launch l;
    cf_launch_init(&l, METRALE_K_moe_topk, (gpu_dim3){t, 1, 1});
    int bi = cf_buf_add(&l, "idx", CF_I32, CF_OUT, (size_t)t * k, NULL, 0);
    int bw = cf_buf_add(&l, "w", CF_F32, CF_OUT, (size_t)t * k, NULL, CF_TOL_F32);
    int bl = cf_buf_add(&l, "logits", CF_F32, CF_IN, (size_t)t * ld, logits, 0);
    cf_arg_buf(&l, bi);
    cf_arg_buf(&l, bw);
    cf_arg_buf(&l, bl);
    cf_arg_u32(&l, t);
    cf_arg_u32(&l, e);
    cf_arg_u32(&l, ld);
    cf_arg_u32(&l, k);
    cf_arg_u32(&l, shapes[si].norm);
    if (cf_run(&ctx, &l, kern)) {
      /* ties go to the lower id: equal logits must come out in increasing id order */
      const int32_t *idx = cf_i32(&l, bi);
      for (uint32_t tok = 0; tok < t; tok++)
        for (uint32_t j = 1; j < k; j++) {
          int32_t a = idx[tok * k + j - 1], b = idx[tok * k + j];
          float la = logits[(size_t)tok * ld + (uint32_t)a], lb = logits[(size_t)tok * ld + (uint32_t)b];
          CF_EXPECT(&ctx, la > lb || (la == lb && a < b), "token %u picks %d then %d", tok, a, b);
        }
    }
    cf_launch_free(&l);
    free(logits);
  }
  cf_close(&ctx);
}

/* y = x . w^T in double; x is bf16, or f32 when xf is given. */
static double *ref_gemv(const metrale_bf16 *x, const float *xf, const metrale_bf16 *w, uint32_t m,
                        uint32_t n, uint32_t k) {
  double *y = cf_alloc((size_t)m * n, sizeof(double));
  for (uint32_t i = 0; i < m; i++)
    for (uint32_t j = 0; j < n; j++) {
      double acc = 0.0;
      for (uint32_t q = 0; q < k; q++)
        acc += (xf ? (double)xf[(size_t)i * k + q] : mt_bf(x[(size_t)i * k + q])) *
               mt_bf(w[(size_t)j * k + q]);
      y[(size_t)i * n + j] = acc;
    }
  return y;
}

/* One y = x . w^T launch on `grid`, checked against the double reference.  out_f32: y f32,
 * else bf16.  in_f32: x f32, filled with values bf16 cannot hold: the f32 tolerance then also
 * catches a shader that rounds x (NMSE ~1e-6).  misalign: x and w start that many bytes past a
 * 16-byte boundary (y by one element). */
static void gemm_case(cf_ctx *ctx, gpu_kernel kern, metrale_kernel_id id, uint32_t m, uint32_t n,
                      uint32_t k, int out_f32, int in_f32, gpu_dim3 grid, uint32_t misalign) {
  snprintf(ctx->shape, sizeof ctx->shape, "M=%u N=%u K=%u misalign=%u", m, n, k, misalign);
  metrale_bf16 *x = cf_alloc((size_t)m * k, 2), *w = cf_alloc((size_t)n * k, 2);
  float *xf = in_f32 ? cf_alloc((size_t)m * k, 4) : NULL;
  if (in_f32)
    mt_fill_f32(&ctx->rng, xf, (size_t)m * k, -1, 1);
  else
    mt_fill_bf16(&ctx->rng, x, (size_t)m * k, -1, 1);
  mt_fill_bf16(&ctx->rng, w, (size_t)n * k, -1, 1);
  double *ref = ref_gemv(x, xf, w, m, n, k);
  double tol = out_f32 ? CF_TOL_F32 : CF_TOL_BF16;
  cf_launch l;
  cf_launch_init(&l, id, grid);
  int by = cf_buf_add(&l, "y", out_f32 ? CF_F32 : CF_BF16, CF_OUT, (size_t)m * n, NULL, tol);
  int bx = in_f32 ? cf_buf_add(&l, "x", CF_F32, CF_IN, (size_t)m * k, xf, 0)
                  : cf_buf_add(&l, "x", CF_BF16, CF_IN, (size_t)m * k, x, 0);
  int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, (size_t)n * k, w, 0);
  l.buf[bx].misalign = l.buf[bw].misalign = misalign;
  l.buf[by].misalign = misalign ? (out_f32 ? 4u : 2u) : 0u;
  cf_arg_buf(&l, by);
  cf_arg_buf(&l, bx);
  cf_arg_buf(&l, bw);
  cf_arg_u32(&l, m);
  cf_arg_u32(&l, n);
  cf_arg_u32(&l, k);
  if (cf_run(ctx, &l, kern)) {
    if (out_f32)
      cf_check_f32(ctx, "y", cf_f32(&l, by), ref, (size_t)m * n, tol);
    else
      cf_check_bf16(ctx, "y", cf_bf16(&l, by), ref, (size_t)m * n, tol);
  }
  cf_launch_free(&l);
  free(x), free(xf), free(w), free(ref);
}

/* the gemv kernels (gemv_bf16: y bf16; gemv_bf16_f32: y f32; gemv_f32in: x and y f32) over
 * more rows than one pass of 8, by elements (K % 8 != 0) and by 16-byte loads (K = 2048),
 * then on buffers 8 bytes past a 16-byte boundary (by elements again) */
static void gemv_many_rows(metrale_kernel_id id, int out_f32, int in_f32) {
  CF_BEGIN(ctx, kern, id);
  static const uint32_t mnk[][4] = {{20, 13, 77, 0}, {9, 8, 300, 0}, {33, 1, 5, 0}, {17, 9, 2048, 0},
                                    {3, 17, 2048, 8}, {9, 5, 64, 8}};
  for (size_t si = 0; si < sizeof mnk / sizeof mnk[0]; si++)
    gemm_case(&ctx, kern, id, mnk[si][0], mnk[si][1], mnk[si][2], out_f32, in_f32,
              (gpu_dim3){(mnk[si][1] + 7) / 8, 1, 1}, mnk[si][3]);
  cf_close(&ctx);
}

Test(vulkan_shapes, gemv_many_rows) { gemv_many_rows(METRALE_K_gemv_bf16, 0, 0); }

Test(vulkan_shapes, gemv_f32_many_rows) { gemv_many_rows(METRALE_K_gemv_bf16_f32, 1, 0); }

Test(vulkan_shapes, gemv_f32in_many_rows) { gemv_many_rows(METRALE_K_gemv_f32in, 1, 1); }

/* The 128x128 tiles load 16 bytes at a time only where K % 8 == 0 and x and w start
 * 16-byte aligned (gemm_tile.glsl); the shared suite's buffers always do.  Here they
 * start 8 bytes past, with K a multiple of 8 (one tile and partial ones, a K tail). */
static void gemm_t128_misaligned(metrale_kernel_id id, int in_f32) {
  CF_BEGIN(ctx, kern, id);
  static const uint32_t mnk[][3] = {{130, 200, 64}, {129, 257, 1000}};
  for (size_t si = 0; si < sizeof mnk / sizeof mnk[0]; si++) {
    const uint32_t m = mnk[si][0], n = mnk[si][1], k = mnk[si][2];
    gemm_case(&ctx, kern, id, m, n, k, in_f32, in_f32, (gpu_dim3){(n + 127) / 128, (m + 127) / 128, 1}, 8);
  }
  cf_close(&ctx);
}

Test(vulkan_shapes, gemm_bf16_t128_misaligned) { gemm_t128_misaligned(METRALE_K_gemm_bf16_t128, 0); }

Test(vulkan_shapes, gemm_f32in_t128_misaligned) { gemm_t128_misaligned(METRALE_K_gemm_f32in_t128, 1); }
