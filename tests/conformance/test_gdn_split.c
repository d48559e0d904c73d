/* gdn module, data movement: split_qkvzba35 (the in_proj order of both families, see
 * kernels.def), l2norm_qk, gates.  All of these work on f32 activations (kernels.def, "Precision"):
 * inputs are f32 values that are not bf16, so a kernel rounding through bf16 fails. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct {
  uint32_t t, nk, nv, dk, dv;
} heads;

static const heads split_shapes[] = {{1, 1, 1, 16, 16},
                                     {3, 2, 4, 16, 24},
                                     {5, 1, 2, 24, 16},
                                     {2, 2, 8, 16, 16},
                                     {2, 2, 2, 128, 128}};
#define NSPLIT (sizeof split_shapes / sizeof split_shapes[0])

/* p [T, C + nv*dv + 2nv] = [q | k | v | z | b | a], copied exactly into its pieces. */
static void run_split(metrale_kernel_id id) {
  CF_BEGIN(ctx, kern, id);
  for (size_t si = 0; si < NSPLIT; si++) {
    const heads *s = &split_shapes[si];
    snprintf(ctx.shape, sizeof ctx.shape, "T=%u nk=%u nv=%u dk=%u dv=%u", s->t, s->nk, s->nv, s->dk,
             s->dv);
    size_t c = 2 * (size_t)s->nk * s->dk + (size_t)s->nv * s->dv;
    size_t zw = (size_t)s->nv * s->dv;
    size_t width = c + zw + 2 * (size_t)s->nv;
    float *p = cf_alloc(s->t * width, sizeof(float));
    mt_fill_f32(&ctx.rng, p, s->t * width, -4, 4);
    float *mixed = cf_alloc(s->t * c, sizeof(float)), *z = cf_alloc(s->t * zw, sizeof(float));
    float *b = cf_alloc((size_t)s->t * s->nv, sizeof(float));
    float *a = cf_alloc((size_t)s->t * s->nv, sizeof(float));
    for (uint32_t t = 0; t < s->t; t++) {
      const float *row = p + t * width;
      float *m = mixed + t * c;
      memcpy(m, row, c * sizeof(float));
      memcpy(z + t * zw, row + c, zw * sizeof(float));
      memcpy(b + (size_t)t * s->nv, row + c + zw, s->nv * sizeof(float));
      memcpy(a + (size_t)t * s->nv, row + c + zw + s->nv, s->nv * sizeof(float));
    }

    cf_launch l;
    cf_launch_init(&l, id, (gpu_dim3){s->t, 1, 1});
    int bm = cf_buf_add(&l, "mixed", CF_F32, CF_OUT, s->t * c, NULL, 0);
    int bz = cf_buf_add(&l, "z", CF_F32, CF_OUT, s->t * zw, NULL, 0);
    int bb = cf_buf_add(&l, "b", CF_F32, CF_OUT, (size_t)s->t * s->nv, NULL, 0);
    int ba = cf_buf_add(&l, "a", CF_F32, CF_OUT, (size_t)s->t * s->nv, NULL, 0);
    int bp = cf_buf_add(&l, "p", CF_F32, CF_IN, s->t * width, p, 0);
    cf_arg_buf(&l, bm);
    cf_arg_buf(&l, bz);
    cf_arg_buf(&l, bb);
    cf_arg_buf(&l, ba);
    cf_arg_buf(&l, bp);
    cf_arg_u32(&l, s->t);
    cf_arg_u32(&l, s->nk);
    cf_arg_u32(&l, s->nv);
    cf_arg_u32(&l, s->dk);
    cf_arg_u32(&l, s->dv);
    if (cf_run(&ctx, &l, kern)) {
      cf_check_exact(&ctx, "mixed", cf_f32(&l, bm), mixed, 4, s->t * c);
      cf_check_exact(&ctx, "z", cf_f32(&l, bz), z, 4, s->t * zw);
      cf_check_exact(&ctx, "b", cf_f32(&l, bb), b, 4, (size_t)s->t * s->nv);
      cf_check_exact(&ctx, "a", cf_f32(&l, ba), a, 4, (size_t)s->t * s->nv);
    }
    cf_launch_free(&l);
    free(p), free(mixed), free(z), free(b), free(a);
  }
  cf_close(&ctx);
}

Test(gdn, split_qkvzba35) { run_split(METRALE_K_split_qkvzba35); }

/* rows: l2norm_qk_rows, 8 heads a block; else l2norm_qk, a block a head.  The shapes take
 * both of the rows kernel's paths (4-vectors when dk and ld are multiples of 4, scalar
 * otherwise), one to several vectors a thread, and a last block with heads to spare. */
static void run_l2norm(metrale_kernel_id id, int rows) {
  CF_BEGIN(ctx, kern, id);
  static const struct {
    uint32_t t, nk, dk, extra; /* ld = 2*nk*dk + extra */
  } shapes[] = {{1, 1, 16, 0},  {3, 2, 24, 40}, {4, 4, 128, 64}, {7, 1, 16, 7},
                {5, 3, 256, 4}, {9, 1, 20, 2},  {3, 2, 130, 0},  {2, 1, 1, 3}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    uint32_t t = shapes[si].t, nk = shapes[si].nk, dk = shapes[si].dk;
    uint32_t ld = 2 * nk * dk + shapes[si].extra;
    snprintf(ctx.shape, sizeof ctx.shape, "T=%u nk=%u dk=%u ld=%u", t, nk, dk, ld);
    size_t n = (size_t)t * ld;
    float *x = cf_alloc(n, sizeof(float));
    mt_fill_f32(&ctx.rng, x, n, -3, 3);
    double *ref = cf_alloc(n, sizeof(double));
    mt_f32_to_double(ref, x, n);
    size_t nh = (size_t)t * 2 * nk * dk; /* normalised values, compared as one vector */
    double *ref_heads = cf_alloc(nh, sizeof(double));
    size_t h = 0;
    for (uint32_t tok = 0; tok < t; tok++)
      for (uint32_t hh = 0; hh < 2 * nk; hh++) {
        double *v = ref + (size_t)tok * ld + (size_t)hh * dk;
        double ss = 0.0;
        for (uint32_t j = 0; j < dk; j++) ss += v[j] * v[j];
        double sc = 1.0 / sqrt(ss + 1e-6) * (hh < nk ? 1.0 / sqrt((double)dk) : 1.0);
        for (uint32_t j = 0; j < dk; j++) ref_heads[h++] = v[j] * sc;
      }

    cf_launch l;
    cf_launch_init(&l, id, (gpu_dim3){rows ? (t * 2 * nk + 7) / 8 : t * 2 * nk, 1, 1});
    int bx = cf_buf_add(&l, "x", CF_F32, CF_INOUT, n, x, CF_TOL_F32);
    cf_arg_buf(&l, bx);
    cf_arg_u32(&l, t);
    cf_arg_u32(&l, nk);
    cf_arg_u32(&l, dk);
    cf_arg_u32(&l, ld);
    if (cf_run(&ctx, &l, kern)) {
      const float *got = cf_f32(&l, bx);
      float *qk = cf_alloc(nh, sizeof(float));
      for (uint32_t tok = 0; tok < t; tok++) {
        memcpy(qk + (size_t)tok * 2 * nk * dk, got + (size_t)tok * ld,
               2 * (size_t)nk * dk * sizeof(float));
        /* the rest of the row (v, or whatever follows) is not the kernel's */
        cf_check_exact(&ctx, "row tail", got + (size_t)tok * ld + 2 * nk * dk,
                       x + (size_t)tok * ld + 2 * nk * dk, 4, shapes[si].extra);
      }
      cf_check_f32(&ctx, "q/k heads", qk, ref_heads, nh, CF_TOL_F32);
      free(qk);
    }
    cf_launch_free(&l);
    free(x), free(ref), free(ref_heads);
  }
  cf_close(&ctx);
}

Test(gdn, l2norm_qk) { run_l2norm(METRALE_K_l2norm_qk, 0); }
Test(gdn, l2norm_qk_rows) { run_l2norm(METRALE_K_l2norm_qk_rows, 1); }

/* gates, or (ba) gates_ba: b and a side by side in each token's row [b | a]. */
static void run_gates(metrale_kernel_id id, int ba_rows) {
  CF_BEGIN(ctx, kern, id);
  static const struct { uint32_t t, nv; } shapes[] = {{1, 1}, {7, 3}, {33, 32}, {2, 129}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    uint32_t t = shapes[si].t, nv = shapes[si].nv, n = t * nv;
    snprintf(ctx.shape, sizeof ctx.shape, "T=%u nv=%u", t, nv);
    float *a = cf_alloc(n, sizeof(float)), *b = cf_alloc(n, sizeof(float));
    metrale_bf16 *dt = cf_alloc(nv, 2);
    float *alog = cf_alloc(nv, sizeof(float));
    mt_fill_f32(&ctx.rng, a, n, -8, 26); /* crosses the softplus threshold at 20 */
    mt_fill_f32(&ctx.rng, b, n, -6, 6);
    mt_fill_bf16(&ctx.rng, dt, nv, -1, 1);
    mt_fill_f32(&ctx.rng, alog, nv, -2, 1.5);
    double *g_ref = cf_alloc(n, sizeof(double)), *beta_ref = cf_alloc(n, sizeof(double));
    for (uint32_t i = 0; i < n; i++) {
      uint32_t h = i % nv;
      double x = (double)a[i] + mt_bf(dt[h]);
      double sp = x > 20.0 ? x : log1p(exp(x));
      g_ref[i] = -exp((double)alog[h]) * sp;
      beta_ref[i] = 1.0 / (1.0 + exp(-(double)b[i]));
    }

    float *rows = cf_alloc(2 * (size_t)n, sizeof(float)); /* [T, 2nv]: [b | a] per token */
    for (uint32_t i = 0; i < n; i++) {
      rows[(size_t)(i / nv) * 2 * nv + i % nv] = b[i];
      rows[(size_t)(i / nv) * 2 * nv + nv + i % nv] = a[i];
    }

    cf_launch l;
    cf_launch_init(&l, id, (gpu_dim3){(n + 255) / 256, 1, 1});
    int bg = cf_buf_add(&l, "g", CF_F32, CF_OUT, n, NULL, CF_TOL_F32);
    int bbeta = cf_buf_add(&l, "beta", CF_F32, CF_OUT, n, NULL, CF_TOL_F32);
    int bba = ba_rows ? cf_buf_add(&l, "ba", CF_F32, CF_IN, 2 * (size_t)n, rows, 0) : -1;
    int ba = ba_rows ? -1 : cf_buf_add(&l, "a", CF_F32, CF_IN, n, a, 0);
    int bb = ba_rows ? -1 : cf_buf_add(&l, "b", CF_F32, CF_IN, n, b, 0);
    int bl = cf_buf_add(&l, "a_log", CF_F32, CF_IN, nv, alog, 0);
    int bd = cf_buf_add(&l, "dt_bias", CF_BF16, CF_IN, nv, dt, 0);
    cf_arg_buf(&l, bg);
    cf_arg_buf(&l, bbeta);
    if (ba_rows) {
      cf_arg_buf(&l, bba);
    } else {
      cf_arg_buf(&l, ba);
      cf_arg_buf(&l, bb);
    }
    cf_arg_buf(&l, bl);
    cf_arg_buf(&l, bd);
    cf_arg_u32(&l, n);
    cf_arg_u32(&l, nv);
    if (cf_run(&ctx, &l, kern)) {
      cf_check_f32(&ctx, "g", cf_f32(&l, bg), g_ref, n, CF_TOL_F32);
      cf_check_f32(&ctx, "beta", cf_f32(&l, bbeta), beta_ref, n, CF_TOL_F32);
    }
    cf_launch_free(&l);
    free(a), free(b), free(rows), free(dt), free(alog), free(g_ref), free(beta_ref);
  }
  cf_close(&ctx);
}

Test(gdn, gates) { run_gates(METRALE_K_gates, 0); }
Test(gdn, gates_ba) { run_gates(METRALE_K_gates_ba, 1); }
