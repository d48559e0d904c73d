/* elementwise module: add, silu_mul, f32_to_f16. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

Test(elementwise, add) {
  CF_BEGIN(ctx, k, METRALE_K_add);
  static const uint32_t sizes[] = {1, 7, 129, 1000, 4097};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    uint32_t n = sizes[si];
    snprintf(ctx.shape, sizeof ctx.shape, "n=%u", n);
    metrale_bf16 *a = cf_alloc(n, 2), *b = cf_alloc(n, 2), *want = cf_alloc(n, 2);
    mt_fill_bf16(&ctx.rng, a, n, -8, 8);
    mt_fill_bf16(&ctx.rng, b, n, -8, 8);
    /* exact sum rounded to f32 then bf16: what an f32 add followed by rounding gives */
    for (uint32_t i = 0; i < n; i++)
      want[i] = metrale_f32_to_bf16((float)(mt_bf(a[i]) + mt_bf(b[i])));

    cf_launch l;
    cf_launch_init(&l, METRALE_K_add, (gpu_dim3){(n + 255) / 256, 1, 1});
    int by = cf_buf_add(&l, "y", CF_BF16, CF_OUT, n, NULL, 0);
    int ba = cf_buf_add(&l, "a", CF_BF16, CF_IN, n, a, 0);
    int bb = cf_buf_add(&l, "b", CF_BF16, CF_IN, n, b, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, ba);
    cf_arg_buf(&l, bb);
    cf_arg_u32(&l, n);
    if (cf_run(&ctx, &l, k)) cf_check_exact(&ctx, "y", cf_bf16(&l, by), want, 2, n);
    cf_launch_free(&l);
    free(a), free(b), free(want);
  }
  cf_close(&ctx);
}

/* silu_mul (a block a row) and silu_mul_rows (2048 outputs a block, 8 a thread: rows of 8k
 * outputs take 16-byte vectors, others element by element; a thread's 8 across a row end) */
static void check_silu_mul(metrale_kernel_id id) {
  CF_BEGIN(ctx, k, id);
  static const struct { uint32_t rows, n; } shapes[] = {{1, 1}, {3, 7}, {2, 129}, {5, 1000}, {9, 512}, {3, 2056}, {70, 13}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    uint32_t rows = shapes[si].rows, n = shapes[si].n;
    size_t cnt = (size_t)rows * n;
    snprintf(ctx.shape, sizeof ctx.shape, "rows=%u n=%u", rows, n);
    metrale_bf16 *gu = cf_alloc(2 * cnt, 2);
    mt_fill_bf16(&ctx.rng, gu, 2 * cnt, -6, 6);
    double *ref = cf_alloc(cnt, sizeof(double));
    for (uint32_t r = 0; r < rows; r++)
      for (uint32_t i = 0; i < n; i++) {
        double g = mt_bf(gu[(size_t)r * 2 * n + i]), u = mt_bf(gu[(size_t)r * 2 * n + n + i]);
        ref[(size_t)r * n + i] = g / (1.0 + exp(-g)) * u;
      }

    cf_launch l;
    cf_launch_init(&l, id, (gpu_dim3){id == METRALE_K_silu_mul ? rows : (uint32_t)((cnt + 2047) / 2048), 1, 1});
    int by = cf_buf_add(&l, "y", CF_BF16, CF_OUT, cnt, NULL, CF_TOL_BF16);
    int bg = cf_buf_add(&l, "gu", CF_BF16, CF_IN, 2 * cnt, gu, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, bg);
    cf_arg_u32(&l, rows);
    cf_arg_u32(&l, n);
    if (cf_run(&ctx, &l, k)) cf_check_bf16(&ctx, "y", cf_bf16(&l, by), ref, cnt, CF_TOL_BF16);
    cf_launch_free(&l);
    free(gu), free(ref);
  }
  cf_close(&ctx);
}

Test(elementwise, silu_mul) { check_silu_mul(METRALE_K_silu_mul); }

Test(elementwise, silu_mul_rows) { check_silu_mul(METRALE_K_silu_mul_rows); }

/* silu_mul's bf16 rounding is to nearest, bit for bit (its NMSE check above cannot see a
 * rounding mode): g on bf16's grid from 20, where silu(g) = g in f32, times u = +-(1 + k/128),
 * k = 0..127, so g u is exact in f32 and lands on, between and halfway between bf16 values,
 * for both signs (at a tie either neighbour passes: cf_check_bf16_nearest). */
static void check_silu_mul_rounding(metrale_kernel_id id) {
  CF_BEGIN(ctx, k, id);
  const uint32_t rows = 2, n = 256;
  const size_t cnt = (size_t)rows * n;
  snprintf(ctx.shape, sizeof ctx.shape, "rows=%u n=%u", rows, n);
  metrale_bf16 *gu = cf_alloc(2 * cnt, 2);
  float *exact = cf_alloc(cnt, sizeof(float));
  for (uint32_t r = 0; r < rows; r++)
    for (uint32_t i = 0; i < n; i++) {
      const float g = 20.0f + (float)(i % 32) * 0.125f, u = (r ? -1.0f : 1.0f) * (1.0f + (float)(i % 128) / 128.0f);
      gu[(size_t)r * 2 * n + i] = metrale_f32_to_bf16(g); /* exact: on bf16's grid */
      gu[(size_t)r * 2 * n + n + i] = metrale_f32_to_bf16(u);
      exact[(size_t)r * n + i] = g * u; /* exact in f32 */
    }
  cf_launch l;
  cf_launch_init(&l, id, (gpu_dim3){id == METRALE_K_silu_mul ? rows : (uint32_t)((cnt + 2047) / 2048), 1, 1});
  int by = cf_buf_add(&l, "y", CF_BF16, CF_OUT, cnt, NULL, CF_TOL_BF16);
  cf_arg_buf(&l, by);
  cf_arg_buf(&l, cf_buf_add(&l, "gu", CF_BF16, CF_IN, 2 * cnt, gu, 0));
  cf_arg_u32(&l, rows);
  cf_arg_u32(&l, n);
  if (cf_run(&ctx, &l, k)) cf_check_bf16_nearest(&ctx, "y", cf_bf16(&l, by), exact, cnt);
  cf_launch_free(&l);
  free(gu), free(exact);
  cf_close(&ctx);
}

Test(elementwise, silu_mul_rounds_to_nearest) { check_silu_mul_rounding(METRALE_K_silu_mul); }

Test(elementwise, silu_mul_rows_rounds_to_nearest) { check_silu_mul_rounding(METRALE_K_silu_mul_rows); }

/* f32_to_f16: exact, against bf16.h's conversion (itself checked against the compiler's
 * _Float16 in tests/unit/test_half.c).  Values across the whole half range and past it:
 * ties at 1 + 2^-11 steps, subnormals, overflow to infinity, infinities.  Not NaN: its
 * payload is each backend's own, and the oracle comparison is bit for bit. */
Test(elementwise, f32_to_f16) {
  CF_BEGIN(ctx, k, METRALE_K_f32_to_f16);
  static const uint32_t sizes[] = {1, 7, 1024, 1025, 70000};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    const uint32_t n = sizes[si];
    snprintf(ctx.shape, sizeof ctx.shape, "n=%u", n);
    float *x = cf_alloc(n, 4);
    uint16_t *want = cf_alloc(n, 2);
    for (uint32_t i = 0; i < n; i++) {
      const double u = mt_uniform(&ctx.rng, -1, 1);
      switch (i % 6) {
        case 0: x[i] = (float)(u * 70000.0); break;                               /* past 65504 too */
        case 1: x[i] = (float)(u * 1e-6); break;                                  /* subnormal halves */
        case 2: x[i] = (float)(1.0 + ((int)(u * 1000)) * 0x1p-11); break;          /* ties between halves */
        case 3: x[i] = (float)ldexp(u, (int)mt_below(&ctx.rng, 40) - 30); break;  /* any exponent */
        case 4: x[i] = i % 12 == 4 ? INFINITY : -INFINITY; break;
        default: x[i] = (float)u; break;
      }
      want[i] = metrale_f32_to_f16(x[i]);
    }
    cf_launch l;
    cf_launch_init(&l, METRALE_K_f32_to_f16, (gpu_dim3){(n + 1023) / 1024, 1, 1});
    int by = cf_buf_add(&l, "y", CF_BF16, CF_OUT, n, NULL, 0); /* 16-bit words, compared bit for bit */
    int bx = cf_buf_add(&l, "x", CF_F32, CF_IN, n, x, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, bx);
    cf_arg_u32(&l, n);
    if (cf_run(&ctx, &l, k)) cf_check_exact(&ctx, "y", cf_bf16(&l, by), want, 2, n);
    cf_launch_free(&l);
    free(x), free(want);
  }
  cf_close(&ctx);
}
