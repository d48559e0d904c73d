/* gemm module: gemm_bf16, gemm_bf16_f32, gemv_bf16 (y = x . w^T, HF Linear layout). */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

typedef struct {
  uint32_t m, n, k;
} mnk;

static const mnk gemm_shapes[] = {{1, 1, 1},     {1, 7, 129},   {3, 64, 1000}, {5, 129, 7},
                                  {16, 33, 256}, {17, 70, 130}, {64, 65, 64},  {70, 5, 33}};
static const mnk gemv_shapes[] = {{1, 1, 1},  {1, 7, 129},   {2, 8, 1000},  {3, 129, 64},
                                  {8, 9, 17}, {16, 33, 256}, {1, 300, 2048}};

/* y [M,N] = x [M,K] . w [N,K]^T in double. */
static void ref_gemm(double *y, const metrale_bf16 *x, const metrale_bf16 *w, const mnk *s) {
  for (uint32_t i = 0; i < s->m; i++)
    for (uint32_t j = 0; j < s->n; j++) {
      double acc = 0.0;
      for (uint32_t q = 0; q < s->k; q++)
        acc += mt_bf(x[(size_t)i * s->k + q]) * mt_bf(w[(size_t)j * s->k + q]);
      y[(size_t)i * s->n + j] = acc;
    }
}

/* out_f32: gemm_bf16_f32.  gemv: grid.x = ceil(N/8), else (ceil(N/64), ceil(M/64)). */
static void run_gemm(metrale_kernel_id id, const mnk *shapes, size_t nshapes, int out_f32,
                     int gemv) {
  CF_BEGIN(ctx, kern, id);
  for (size_t si = 0; si < nshapes; si++) {
    const mnk *s = &shapes[si];
    snprintf(ctx.shape, sizeof ctx.shape, "M=%u N=%u K=%u", s->m, s->n, s->k);
    size_t nx = (size_t)s->m * s->k, nw = (size_t)s->n * s->k, ny = (size_t)s->m * s->n;
    metrale_bf16 *x = cf_alloc(nx, 2), *w = cf_alloc(nw, 2);
    mt_fill_bf16(&ctx.rng, x, nx, -1, 1);
    mt_fill_bf16(&ctx.rng, w, nw, -1, 1);
    double *ref = cf_alloc(ny, sizeof(double));
    ref_gemm(ref, x, w, s);

    gpu_dim3 grid =
        gemv ? (gpu_dim3){(s->n + 7) / 8, 1, 1} : (gpu_dim3){(s->n + 63) / 64, (s->m + 63) / 64, 1};
    double tol = out_f32 ? CF_TOL_F32 : CF_TOL_BF16;
    cf_launch l;
    cf_launch_init(&l, id, grid);
    int by = cf_buf_add(&l, "y", out_f32 ? CF_F32 : CF_BF16, CF_OUT, ny, NULL, tol);
    int bx = cf_buf_add(&l, "x", CF_BF16, CF_IN, nx, x, 0);
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, nw, w, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, bx);
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, s->m);
    cf_arg_u32(&l, s->n);
    cf_arg_u32(&l, s->k);
    if (cf_run(&ctx, &l, kern)) {
      if (out_f32)
        cf_check_f32(&ctx, "y", cf_f32(&l, by), ref, ny, tol);
      else
        cf_check_bf16(&ctx, "y", cf_bf16(&l, by), ref, ny, tol);
    }
    cf_launch_free(&l);
    free(x), free(w), free(ref);
  }
  cf_close(&ctx);
}

Test(gemm, gemm_bf16) {
  run_gemm(METRALE_K_gemm_bf16, gemm_shapes, sizeof gemm_shapes / sizeof gemm_shapes[0], 0, 0);
}

Test(gemm, gemm_bf16_f32) {
  run_gemm(METRALE_K_gemm_bf16_f32, gemm_shapes, sizeof gemm_shapes / sizeof gemm_shapes[0], 1, 0);
}

Test(gemm, gemv_bf16) {
  run_gemm(METRALE_K_gemv_bf16, gemv_shapes, sizeof gemv_shapes / sizeof gemv_shapes[0], 0, 1);
}
