/* norm module: rmsnorm, rmsnorm_f32, add_rmsnorm, gated_rmsnorm against double references. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

static const struct {
  uint32_t rows, n;
} shapes[] = {{1, 1}, {3, 7}, {5, 129}, {2, 1000}, {17, 64}, {1, 2048}, {2, 2049}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static const float eps = 1e-6f;

/* y = x * rsqrt(mean(x^2) + eps) * (1 + w) over rows of x [rows, n] (doubles). */
static void ref_rmsnorm(double *y, const double *x, const metrale_bf16 *w, uint32_t rows,
                        uint32_t n) {
  for (uint32_t r = 0; r < rows; r++) {
    const double *xr = x + (size_t)r * n;
    double ss = 0.0;
    for (uint32_t i = 0; i < n; i++) ss += xr[i] * xr[i];
    double inv = 1.0 / sqrt(ss / n + (double)eps);
    for (uint32_t i = 0; i < n; i++) y[(size_t)r * n + i] = xr[i] * inv * (1.0 + mt_bf(w[i]));
  }
}

/* IEEE half output (rmsnorm_f16) against the exact values: each rounded once to 11 significant
 * bits (NMSE at most 2^-22); against the cpu oracle, where the two f32 values straddle a
 * rounding midpoint the halves differ by a step (as test_gemm.c's TOL_HALF). */
#define TOL_HALF 3e-7
#define TOL_HALF_ORACLE 1e-6

/* out_f32: 1 rmsnorm_f32 (the mixer input, not rounded), 2 rmsnorm_f16 (that input in half). */
static void run_rmsnorm(metrale_kernel_id id, int out_f32) {
  CF_BEGIN(ctx, k, id);
  for (size_t si = 0; si < NSHAPES; si++) {
    uint32_t rows = shapes[si].rows, n = shapes[si].n;
    size_t cnt = (size_t)rows * n;
    snprintf(ctx.shape, sizeof ctx.shape, "rows=%u n=%u", rows, n);
    metrale_bf16 *x = cf_alloc(cnt, 2), *w = cf_alloc(n, 2);
    mt_fill_bf16(&ctx.rng, x, cnt, -2, 2);
    mt_fill_bf16(&ctx.rng, w, n, -0.5, 0.5);
    double *xd = cf_alloc(cnt, sizeof(double)), *ref = cf_alloc(cnt, sizeof(double));
    mt_bf16_to_double(xd, x, cnt);
    ref_rmsnorm(ref, xd, w, rows, n);

    cf_launch l;
    cf_launch_init(&l, id, (gpu_dim3){rows, 1, 1});
    double tol = out_f32 == 2 ? TOL_HALF_ORACLE : out_f32 ? CF_TOL_F32 : CF_TOL_BF16;
    int by = cf_buf_add(&l, "y", out_f32 == 2 ? CF_F16 : out_f32 ? CF_F32 : CF_BF16, CF_OUT, cnt, NULL, tol);
    int bx = cf_buf_add(&l, "x", CF_BF16, CF_IN, cnt, x, 0);
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, n, w, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, bx);
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, rows);
    cf_arg_u32(&l, n);
    cf_arg_f32(&l, eps);
    if (cf_run(&ctx, &l, k)) {
      if (out_f32 == 2)
        cf_check_f16(&ctx, "y", cf_f16(&l, by), ref, cnt, TOL_HALF);
      else if (out_f32)
        cf_check_f32(&ctx, "y", cf_f32(&l, by), ref, cnt, tol);
      else
        cf_check_bf16(&ctx, "y", cf_bf16(&l, by), ref, cnt, tol);
    }
    cf_launch_free(&l);
    free(x), free(w), free(xd), free(ref);
  }
  cf_close(&ctx);
}

Test(norm, rmsnorm) { run_rmsnorm(METRALE_K_rmsnorm, 0); }

Test(norm, rmsnorm_f32) { run_rmsnorm(METRALE_K_rmsnorm_f32, 1); }
Test(norm, rmsnorm_f16) { run_rmsnorm(METRALE_K_rmsnorm_f16, 2); }

/* rmsnorm's bf16 rounding is to nearest (its NMSE check cannot see a rounding mode): rows of one
 * value +-0.5, so x rsqrt(mean(x^2) + eps) = +-(1 - 2e-6), times 1 + w with w = i/1024, i =
 * 0..127, which lies on, between and halfway between bf16 values; the product then sits at
 * least ~2e-6 from every rounding boundary, where the backends' rsqrt cannot move it across
 * (its f32 value is exact enough for cf_check_bf16_nearest).  Rounding toward zero or down
 * gives another value for most of them. */
Test(norm, rmsnorm_rounds_to_nearest) {
  CF_BEGIN(ctx, k, METRALE_K_rmsnorm);
  const uint32_t rows = 2, n = 128;
  const size_t cnt = (size_t)rows * n;
  snprintf(ctx.shape, sizeof ctx.shape, "rows=%u n=%u", rows, n);
  metrale_bf16 *x = cf_alloc(cnt, 2), *w = cf_alloc(n, 2);
  float *exact = cf_alloc(cnt, sizeof(float));
  const double inv = 1.0 / sqrt(0.25 + (double)eps);
  for (uint32_t i = 0; i < n; i++) w[i] = metrale_f32_to_bf16((float)i / 1024.0f); /* exact */
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t i = 0; i < n; i++) {
      const double xv = r ? -0.5 : 0.5;
      x[(size_t)r * n + i] = metrale_f32_to_bf16((float)xv);
      exact[(size_t)r * n + i] = (float)(xv * inv * (1.0 + i / 1024.0));
    }
  cf_launch l;
  cf_launch_init(&l, METRALE_K_rmsnorm, (gpu_dim3){rows, 1, 1});
  int by = cf_buf_add(&l, "y", CF_BF16, CF_OUT, cnt, NULL, CF_TOL_BF16);
  cf_arg_buf(&l, by);
  cf_arg_buf(&l, cf_buf_add(&l, "x", CF_BF16, CF_IN, cnt, x, 0));
  cf_arg_buf(&l, cf_buf_add(&l, "w", CF_BF16, CF_IN, n, w, 0));
  cf_arg_u32(&l, rows);
  cf_arg_u32(&l, n);
  cf_arg_f32(&l, eps);
  if (cf_run(&ctx, &l, k)) cf_check_bf16_nearest(&ctx, "y", cf_bf16(&l, by), exact, cnt);
  cf_launch_free(&l);
  free(x), free(w), free(exact);
  cf_close(&ctx);
}

Test(norm, add_rmsnorm) {
  CF_BEGIN(ctx, k, METRALE_K_add_rmsnorm);
  for (size_t si = 0; si < NSHAPES; si++) {
    uint32_t rows = shapes[si].rows, n = shapes[si].n;
    size_t cnt = (size_t)rows * n;
    snprintf(ctx.shape, sizeof ctx.shape, "rows=%u n=%u", rows, n);
    metrale_bf16 *a = cf_alloc(cnt, 2), *b = cf_alloc(cnt, 2), *w = cf_alloc(n, 2);
    metrale_bf16 *h_ref = cf_alloc(cnt, 2);
    mt_fill_bf16(&ctx.rng, a, cnt, -2, 2);
    mt_fill_bf16(&ctx.rng, b, cnt, -2, 2);
    mt_fill_bf16(&ctx.rng, w, n, -0.5, 0.5);
    double *hd = cf_alloc(cnt, sizeof(double)), *ref = cf_alloc(cnt, sizeof(double));
    for (size_t i = 0; i < cnt; i++) {
      /* the exact sum, rounded once to f32 (as an f32 add) and then to bf16 */
      h_ref[i] = metrale_f32_to_bf16((float)(mt_bf(a[i]) + mt_bf(b[i])));
      hd[i] = mt_bf(h_ref[i]);
    }
    ref_rmsnorm(ref, hd, w, rows, n);

    cf_launch l;
    cf_launch_init(&l, METRALE_K_add_rmsnorm, (gpu_dim3){rows, 1, 1});
    int bh = cf_buf_add(&l, "h", CF_BF16, CF_OUT, cnt, NULL, 0);
    int by = cf_buf_add(&l, "y", CF_BF16, CF_OUT, cnt, NULL, CF_TOL_BF16);
    int ba = cf_buf_add(&l, "a", CF_BF16, CF_IN, cnt, a, 0);
    int bb = cf_buf_add(&l, "b", CF_BF16, CF_IN, cnt, b, 0);
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, n, w, 0);
    cf_arg_buf(&l, bh);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, ba);
    cf_arg_buf(&l, bb);
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, rows);
    cf_arg_u32(&l, n);
    cf_arg_f32(&l, eps);
    if (cf_run(&ctx, &l, k)) {
      cf_check_exact(&ctx, "h", cf_bf16(&l, bh), h_ref, 2, cnt);
      cf_check_bf16(&ctx, "y", cf_bf16(&l, by), ref, cnt, CF_TOL_BF16);
    }
    cf_launch_free(&l);
    free(a), free(b), free(w), free(h_ref), free(hd), free(ref);
  }
  cf_close(&ctx);
}

/* The gated norm's shapes add rows of dv = 128 (partial last block of the rows kernel),
 * n a multiple of 4 above 128 (several vectors a thread) and below 32. */
static const struct {
  uint32_t rows, n;
} gated_shapes[] = {{1, 1}, {3, 7}, {5, 129}, {2, 1000}, {17, 64}, {9, 128}, {33, 132}, {3, 260}, {8, 4}, {18, 128}, {31, 128}};

/* One launch of a gated norm on o, z [rows, n] and w [n] (rows_kernel: gated_rmsnorm_rows, 16
 * rows a block, kernels.def; else gated_rmsnorm, a block a row); y's buffer in l, or -1 where
 * the run did not happen. */
static int gated_run(cf_ctx *ctx, gpu_kernel k, cf_launch *l, metrale_kernel_id id, int rows_kernel, uint32_t rows,
                     uint32_t n, const metrale_bf16 *o, const float *z, const metrale_bf16 *w) {
  const size_t cnt = (size_t)rows * n;
  cf_launch_init(l, id, (gpu_dim3){rows_kernel ? (rows + 15) / 16 : rows, 1, 1});
  const int by = cf_buf_add(l, "y", CF_BF16, CF_OUT, cnt, NULL, CF_TOL_BF16);
  cf_arg_buf(l, by);
  cf_arg_buf(l, cf_buf_add(l, "o", CF_BF16, CF_IN, cnt, o, 0));
  cf_arg_buf(l, cf_buf_add(l, "z", CF_F32, CF_IN, cnt, z, 0)); /* f32 gate (kernels.def, "Precision") */
  cf_arg_buf(l, cf_buf_add(l, "w", CF_BF16, CF_IN, n, w, 0));
  cf_arg_u32(l, rows);
  cf_arg_u32(l, n);
  cf_arg_f32(l, eps);
  return cf_run(ctx, l, k) ? by : -1;
}

static void run_gated(metrale_kernel_id id, int rows_kernel) {
  CF_BEGIN(ctx, k, id);
  for (size_t si = 0; si < sizeof gated_shapes / sizeof gated_shapes[0]; si++) {
    uint32_t rows = gated_shapes[si].rows, n = gated_shapes[si].n;
    size_t cnt = (size_t)rows * n;
    snprintf(ctx.shape, sizeof ctx.shape, "rows=%u n=%u", rows, n);
    metrale_bf16 *o = cf_alloc(cnt, 2), *w = cf_alloc(n, 2);
    float *z = cf_alloc(cnt, sizeof(float)); /* f32 gate (kernels.def, "Precision") */
    mt_fill_bf16(&ctx.rng, o, cnt, -2, 2);
    mt_fill_f32(&ctx.rng, z, cnt, -4, 4);
    mt_fill_bf16(&ctx.rng, w, n, 0.5, 1.5);
    double *ref = cf_alloc(cnt, sizeof(double));
    for (uint32_t r = 0; r < rows; r++) {
      double ss = 0.0;
      for (uint32_t i = 0; i < n; i++)
        ss += mt_bf(o[(size_t)r * n + i]) * mt_bf(o[(size_t)r * n + i]);
      double inv = 1.0 / sqrt(ss / n + (double)eps);
      for (uint32_t i = 0; i < n; i++) {
        size_t j = (size_t)r * n + i;
        double normed = mt_round_bf16(mt_bf(o[j]) * inv); /* rounded before the gate */
        double zz = (double)z[j];
        ref[j] = normed * mt_bf(w[i]) * (zz / (1.0 + exp(-zz)));
      }
    }

    cf_launch l;
    const int by = gated_run(&ctx, k, &l, id, rows_kernel, rows, n, o, z, w);
    if (by >= 0) cf_check_bf16(&ctx, "y", cf_bf16(&l, by), ref, cnt, CF_TOL_BF16);
    cf_launch_free(&l);
    free(o), free(z), free(w), free(ref);
  }
  cf_close(&ctx);
}

Test(norm, gated_rmsnorm) { run_gated(METRALE_K_gated_rmsnorm, 0); }
Test(norm, gated_rmsnorm_rows) { run_gated(METRALE_K_gated_rmsnorm_rows, 1); }

/* The gated norm's two bf16 roundings are to nearest, bit for bit, on inputs where nothing
 * else can move the result: each row of o is one value +-0.5, so o * rsqrt(mean(o^2) + eps) is
 * 1 - 2e-6 (a bf16 rounding toward zero gives 0.99609375, to nearest 1.0); w is 1; z from 20 up
 * in steps of 1/64, where silu(z) = z in f32 (e^-20 is below half an ulp of 1), so y is
 * bf16(+-z): eight values on each 0.125 step of bf16, ties included (z = 20.0625, ...; either
 * neighbour passes there, since a SiLU an ulp off, CUDA's fast one or GLSL's, moves a tie:
 * cf_check_bf16_nearest).  NMSE checks cannot see a rounding mode (toward zero costs ~1e-5
 * against a tolerance of 2e-4); this can. */
static void run_gated_rounding(metrale_kernel_id id, int rows_kernel) {
  CF_BEGIN(ctx, k, id);
  const uint32_t rows = 4, n = 128;
  const size_t cnt = (size_t)rows * n;
  snprintf(ctx.shape, sizeof ctx.shape, "rows=%u n=%u", rows, n);
  metrale_bf16 *o = cf_alloc(cnt, 2), *w = cf_alloc(n, 2);
  float *z = cf_alloc(cnt, sizeof(float)), *exact = cf_alloc(cnt, sizeof(float));
  for (uint32_t i = 0; i < n; i++) w[i] = metrale_f32_to_bf16(1.0f);
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t i = 0; i < n; i++) {
      const size_t j = (size_t)r * n + i;
      const float sign = r % 2 ? -1.0f : 1.0f;
      o[j] = metrale_f32_to_bf16(0.5f * sign);
      z[j] = 20.0f + (float)(r / 2 * n + i) / 64.0f; /* 20 .. 24, exact in f32 */
      exact[j] = sign * z[j];
    }
  cf_launch l;
  const int by = gated_run(&ctx, k, &l, id, rows_kernel, rows, n, o, z, w);
  if (by >= 0) cf_check_bf16_nearest(&ctx, "y", cf_bf16(&l, by), exact, cnt);
  cf_launch_free(&l);
  free(o), free(w), free(z), free(exact);
  cf_close(&ctx);
}

Test(norm, gated_rmsnorm_rounds_to_nearest) { run_gated_rounding(METRALE_K_gated_rmsnorm, 0); }
Test(norm, gated_rmsnorm_rows_rounds_to_nearest) { run_gated_rounding(METRALE_K_gated_rmsnorm_rows, 1); }
