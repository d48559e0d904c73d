/* moe module: router top-k, routed gate/up and down projections, combine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The top-k of softmax(l[tok, 0:e]) for every token in double: idx_ref, w_ref [t, k] (empty
 * picks -1 and 0), divided by the picks' sum when norm; ties go to the lower expert id. */
static void ref_topk(int32_t *idx_ref, double *w_ref, const float *logits, uint32_t t, uint32_t e, uint32_t ld,
                     uint32_t k, uint32_t norm) {
  double *p = cf_alloc(e, sizeof(double));
  char *taken = cf_alloc(e, 1);
  for (uint32_t tok = 0; tok < t; tok++) {
    const float *l = logits + (size_t)tok * ld;
    double mx = l[0], sum = 0.0, wsum = 0.0;
    for (uint32_t i = 1; i < e; i++) mx = l[i] > mx ? l[i] : mx;
    for (uint32_t i = 0; i < e; i++) sum += p[i] = exp(l[i] - mx);
    memset(taken, 0, e);
    for (uint32_t j = 0; j < k; j++) {
      int best = -1;
      for (uint32_t i = 0; i < e; i++)
        if (!taken[i] && (best < 0 || p[i] > p[best])) best = (int)i; /* strict: lower id wins */
      if (best < 0) { /* k > E: empty picks */
        idx_ref[(size_t)tok * k + j] = -1;
        w_ref[(size_t)tok * k + j] = 0.0;
        continue;
      }
      taken[best] = 1;
      idx_ref[(size_t)tok * k + j] = best;
      w_ref[(size_t)tok * k + j] = p[best] / sum;
      wsum += p[best] / sum;
    }
    if (norm)
      for (uint32_t j = 0; j < k; j++) w_ref[(size_t)tok * k + j] /= wsum;
  }
  free(p), free(taken);
}

/* moe_topk, moe_topk_warp (the same grid) and moe_topk_rows (8 tokens a block).  The router
 * shape (E = 512, k = 10), E beyond the 1024 experts the fast forms keep in registers, odd E
 * and k > E; T not a multiple of 8; k > 32, where the fast forms store their picks in rounds of
 * 32 and divide the earlier rounds by the sum after reading them back (70 picks: two stored
 * rounds and a last of 6; 45 picks of 40 experts: a stored round, a last of 8, 5 empty). */
static void check_topk(metrale_kernel_id id, uint32_t per_block) {
  CF_BEGIN(ctx, kern, id);
  static const struct {
    uint32_t t, e, ld, k, norm;
  } shapes[] = {{1, 4, 4, 1, 1},     {5, 10, 12, 3, 0},    {7, 64, 65, 8, 1},
                {3, 5, 5, 5, 1},     {9, 33, 40, 4, 0},    {4, 512, 513, 10, 1},
                {3, 1500, 1501, 7, 1}, {2, 3, 4, 6, 1},    {3, 257, 260, 300, 0},
                {20, 512, 513, 10, 1}, {2, 100, 101, 70, 1}, {3, 40, 40, 45, 1}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    uint32_t t = shapes[si].t, e = shapes[si].e, ld = shapes[si].ld, k = shapes[si].k;
    uint32_t norm = shapes[si].norm;
    snprintf(ctx.shape, sizeof ctx.shape, "T=%u E=%u ld=%u k=%u norm=%u", t, e, ld, k, norm);
    float *logits = cf_alloc((size_t)t * ld, sizeof(float));
    for (uint32_t tok = 0; tok < t; tok++) {
      float *l = logits + (size_t)tok * ld;
      /* values on a grid of 1/8 so that distinct logits are far apart in p; odd tokens
       * get exact ties, which must go to the lower expert id */
      for (uint32_t i = 0; i < e; i++) l[i] = (float)((int)mt_below(&ctx.rng, 64) - 32) / 8.0f;
      if (tok % 2 == 1 && e > 1) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < e; i++) best = l[i] > l[best] ? i : best;
        l[mt_below(&ctx.rng, e)] = l[best];
      }
      for (uint32_t i = e; i < ld; i++) l[i] = 1000.0f; /* beyond E: must be ignored */
    }
    int32_t *idx_ref = cf_alloc((size_t)t * k, sizeof(int32_t));
    double *w_ref = cf_alloc((size_t)t * k, sizeof(double));
    ref_topk(idx_ref, w_ref, logits, t, e, ld, k, norm);

    cf_launch l;
    cf_launch_init(&l, id, (gpu_dim3){(t + per_block - 1) / per_block, 1, 1});
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
    cf_arg_u32(&l, norm);
    if (cf_run(&ctx, &l, kern)) {
      cf_check_exact(&ctx, "idx", cf_i32(&l, bi), idx_ref, sizeof(int32_t), (size_t)t * k);
      cf_check_f32(&ctx, "w", cf_f32(&l, bw), w_ref, (size_t)t * k, CF_TOL_F32);
    }
    cf_launch_free(&l);
    free(logits), free(idx_ref), free(w_ref);
  }
  cf_close(&ctx);
}

Test(moe, moe_topk) { check_topk(METRALE_K_moe_topk, 1); }
Test(moe, moe_topk_warp) { check_topk(METRALE_K_moe_topk_warp, 1); }
Test(moe, moe_topk_rows) { check_topk(METRALE_K_moe_topk_rows, 8); } /* a warp a token */

/* moe_router_topk_rows: the router's gemv and the top-k in its last block.  x in {-1, 0, 1} and
 * wr multiples of 1/64 up to 1/8, so that every logit is exact in f32 (|sum| <= 256 in steps of
 * 1/64 over h <= 2048 terms) whatever the summation order, and spread little enough (a standard
 * deviation of ~3 at h = 2048) that no chosen p underflows: the top-k's choices then do not
 * depend on the backend, and the grid's many equal logits test the ties.  The count starts at 0 and must end at 0, where the
 * next launch starts (the layer's graph replays reuse one count). */
Test(moe, moe_router_topk_rows) {
  CF_BEGIN(ctx, kern, METRALE_K_moe_router_topk_rows);
  static const struct {
    uint32_t m, n, h, e, k, norm;
  } shapes[] = {{1, 513, 2048, 512, 10, 1}, {8, 513, 2048, 512, 10, 1}, {3, 9, 17, 8, 3, 0},
                {5, 100, 256, 97, 40, 1}, {2, 33, 64, 32, 45, 1},    {7, 1000, 24, 512, 8, 0},
                {16, 513, 2048, 512, 10, 1}, {11, 65, 129, 60, 7, 1}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const uint32_t m = shapes[si].m, n = shapes[si].n, h = shapes[si].h, e = shapes[si].e, k = shapes[si].k;
    const uint32_t norm = shapes[si].norm;
    metrale_bf16 *x = cf_alloc((size_t)m * h, sizeof *x), *wr = cf_alloc((size_t)n * h, sizeof *wr);
    for (size_t i = 0; i < (size_t)m * h; i++) x[i] = metrale_f32_to_bf16((float)((int)mt_below(&ctx.rng, 3) - 1));
    for (size_t i = 0; i < (size_t)n * h; i++)
      wr[i] = metrale_f32_to_bf16((float)((int)mt_below(&ctx.rng, 17) - 8) / 64.0f);
    float *logits = cf_alloc((size_t)m * n, sizeof *logits);
    double *lref = cf_alloc((size_t)m * n, sizeof *lref);
    for (uint32_t r = 0; r < m; r++)
      for (uint32_t c = 0; c < n; c++) {
        double acc = 0.0;
        for (uint32_t q = 0; q < h; q++)
          acc += (double)metrale_bf16_to_f32(x[(size_t)r * h + q]) * metrale_bf16_to_f32(wr[(size_t)c * h + q]);
        lref[(size_t)r * n + c] = acc;
        logits[(size_t)r * n + c] = (float)acc; /* exact */
      }
    int32_t *idx_ref = cf_alloc((size_t)m * k, sizeof(int32_t));
    double *w_ref = cf_alloc((size_t)m * k, sizeof(double));
    ref_topk(idx_ref, w_ref, logits, m, e, n, k, norm);
    const int32_t zero = 0;
    {
      snprintf(ctx.shape, sizeof ctx.shape, "M=%u n=%u h=%u E=%u k=%u norm=%u", m, n, h, e, k, norm);
      cf_launch l;
      cf_launch_init(&l, METRALE_K_moe_router_topk_rows, (gpu_dim3){(n + 7) / 8, m, 1});
      const int bl = cf_buf_add(&l, "logits", CF_F32, CF_OUT, (size_t)m * n, NULL, 0);
      const int bi = cf_buf_add(&l, "idx", CF_I32, CF_OUT, (size_t)m * k, NULL, 0);
      const int bw = cf_buf_add(&l, "w", CF_F32, CF_OUT, (size_t)m * k, NULL, CF_TOL_F32);
      const int bx = cf_buf_add(&l, "x", CF_BF16, CF_IN, (size_t)m * h, x, 0);
      const int br = cf_buf_add(&l, "wr", CF_BF16, CF_IN, (size_t)n * h, wr, 0);
      const int bc = cf_buf_add(&l, "count", CF_I32, CF_INOUT, 1, &zero, 0);
      cf_arg_buf(&l, bl);
      cf_arg_buf(&l, bi);
      cf_arg_buf(&l, bw);
      cf_arg_buf(&l, bx);
      cf_arg_buf(&l, br);
      cf_arg_buf(&l, bc);
      cf_arg_u32(&l, m);
      cf_arg_u32(&l, n);
      cf_arg_u32(&l, h);
      cf_arg_u32(&l, e);
      cf_arg_u32(&l, k);
      cf_arg_u32(&l, norm);
      if (cf_run(&ctx, &l, kern)) {
        cf_check_f32(&ctx, "logits", cf_f32(&l, bl), lref, (size_t)m * n, CF_TOL_F32);
        cf_check_exact(&ctx, "idx", cf_i32(&l, bi), idx_ref, sizeof(int32_t), (size_t)m * k);
        cf_check_f32(&ctx, "w", cf_f32(&l, bw), w_ref, (size_t)m * k, CF_TOL_F32);
        cf_check_exact(&ctx, "count after the launch", cf_i32(&l, bc), &zero, sizeof(int32_t), 1);
      }
      cf_launch_free(&l);
    }
    free(x), free(wr), free(logits), free(lref), free(idx_ref), free(w_ref);
  }
  cf_close(&ctx);
}

typedef struct {
  uint32_t t, k, e, h, n; /* tokens, top-k, experts, hidden, features of the projection */
} moe_shape;

/* The last two reach the projections' two-k-step loads (8 whole rows, K >= 264 and a
 * multiple of 8) with a partial last step, a partial last block and rows past N. */
static const moe_shape moe_shapes[] = {{1, 1, 2, 16, 8},    {3, 2, 4, 129, 70},   {5, 4, 8, 64, 130},
                                       {2, 3, 3, 7, 1},     {1, 10, 12, 264, 512}, {2, 2, 3, 2048, 520}};
#define NMOE (sizeof moe_shapes / sizeof moe_shapes[0])

static void random_experts(mt_rng *rng, int32_t *idx, uint32_t r, uint32_t e) {
  for (uint32_t j = 0; j < r; j++) idx[j] = (int32_t)mt_below(rng, e);
}

/* none: every second shape has a row whose expert is -1 (no expert), which gives zeros
 * (moe_gate_up_silu_rows' contract; moe_gate_up's leaves such rows to the backend). */
static void random_experts_some_none(mt_rng *rng, int32_t *idx, uint32_t r, uint32_t e, size_t si, int none) {
  random_experts(rng, idx, r, e);
  if (none && si % 2 == 1) idx[r - 1] = -1;
}

/* moe_gate_up (gu bf16 [R, N]) and moe_gate_up_silu_rows (silu: act bf16 [R, N/2] = silu(gate) *
 * up of the unrounded sums; one_expert: no list, every row takes expert 0 of a single one, x a row
 * a token, as the shared expert does).  feat: gate_up's output features a block. */
static void check_gate_up(metrale_kernel_id id, int silu, int one_expert, uint32_t feat) {
  CF_BEGIN(ctx, kern, id);
  for (size_t si = 0; si < NMOE; si++) {
    const moe_shape *s = &moe_shapes[si];
    const uint32_t k = one_expert ? 1 : s->k, e = one_expert ? 1 : s->e;
    const uint32_t r = s->t * k, n = 2 * s->n, nact = silu ? s->n : n; /* gate rows then up rows */
    snprintf(ctx.shape, sizeof ctx.shape, "T=%u k=%u E=%u H=%u N=%u%s", s->t, k, e, s->h, n,
             one_expert ? " (no list)" : "");
    size_t nx = (size_t)s->t * s->h, nw = (size_t)e * n * s->h, ny = (size_t)r * nact;
    metrale_bf16 *x = cf_alloc(nx, 2), *w = cf_alloc(nw, 2);
    int32_t *idx = cf_alloc(r, sizeof(int32_t));
    mt_fill_bf16(&ctx.rng, x, nx, -1, 1);
    mt_fill_bf16(&ctx.rng, w, nw, -1, 1);
    if (!one_expert) random_experts_some_none(&ctx.rng, idx, r, e, si, silu);
    double *gu = cf_alloc((size_t)r * n, sizeof(double)), *ref = cf_alloc(ny, sizeof(double));
    for (uint32_t j = 0; j < r; j++)
      for (uint32_t f = 0; f < n; f++) {
        double acc = 0.0;
        if (idx[j] >= 0) {
          const metrale_bf16 *wr = w + ((size_t)idx[j] * n + f) * s->h, *xr = x + (size_t)(j / k) * s->h;
          for (uint32_t i = 0; i < s->h; i++) acc += mt_bf(wr[i]) * mt_bf(xr[i]);
        }
        gu[(size_t)j * n + f] = acc;
      }
    for (uint32_t j = 0; j < r; j++)
      for (uint32_t c = 0; c < nact; c++) {
        const double g = gu[(size_t)j * n + c];
        ref[(size_t)j * nact + c] = silu ? g / (1.0 + exp(-g)) * gu[(size_t)j * n + nact + c] : g;
      }

    cf_launch l;
    cf_launch_init(&l, id, (gpu_dim3){r, (n + feat - 1) / feat, 1});
    const char *yname = silu ? "act" : "gu";
    int bg = cf_buf_add(&l, yname, CF_BF16, CF_OUT, ny, NULL, CF_TOL_BF16);
    int bx = cf_buf_add(&l, "x", CF_BF16, CF_IN, nx, x, 0);
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, nw, w, 0);
    cf_arg_buf(&l, bg);
    cf_arg_buf(&l, bx);
    if (one_expert)
      cf_arg_null(&l);
    else
      cf_arg_buf(&l, cf_buf_add(&l, "idx", CF_I32, CF_IN, r, idx, 0));
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, r);
    cf_arg_u32(&l, k);
    cf_arg_u32(&l, s->h);
    cf_arg_u32(&l, n);
    if (cf_run(&ctx, &l, kern)) cf_check_bf16(&ctx, yname, cf_bf16(&l, bg), ref, ny, CF_TOL_BF16);
    cf_launch_free(&l);
    free(x), free(w), free(idx), free(gu), free(ref);
  }
  cf_close(&ctx);
}

Test(moe, moe_gate_up) { check_gate_up(METRALE_K_moe_gate_up, 0, 0, 64); }
/* a group of 32 lanes an act column (16 gate_up features a block): H a multiple of 8 with its
 * eight loads a row in flight (2048), with a partial last step (264), and element loads (7, 129) */
Test(moe, moe_gate_up_silu_rows) { check_gate_up(METRALE_K_moe_gate_up_silu_rows, 1, 0, 16); }
Test(moe, moe_gate_up_silu_rows_one_expert) { check_gate_up(METRALE_K_moe_gate_up_silu_rows, 1, 1, 16); }
/* an odd n is refused before anything is read or written (the null buffers would fault) */
Test(moe, moe_gate_up_silu_rows_refuses_odd_n) {
  CF_BEGIN(ctx, kern, METRALE_K_moe_gate_up_silu_rows);
  const gpu_arg args[] = {gpu_arg_ptr(0),  gpu_arg_ptr(0), gpu_arg_ptr(0), gpu_arg_ptr(0),
                          gpu_arg_u32(1), gpu_arg_u32(1), gpu_arg_u32(8), gpu_arg_u32(3)};
  metrale_status s = metrale_launch(ctx.dev, METRALE_K_moe_gate_up_silu_rows, kern, (gpu_dim3){1, 1, 1}, NULL, args,
                                    sizeof args / sizeof args[0]);
  CF_EXPECT(&ctx, metrale_status_code(s) == METRALE_CODE_INVALID_ARGUMENT, "n = 3 gave %s: %s",
            metrale_code_name(metrale_status_code(s)), metrale_status_message(s));
  metrale_status_free(s);
  cf_close(&ctx);
}

/* moe_down (64 features a block) and moe_down_rows (32: four a group of 32 lanes) */
static void check_down(metrale_kernel_id id, uint32_t feat) {
  CF_BEGIN(ctx, kern, id);
  for (size_t si = 0; si < NMOE; si++) {
    const moe_shape *s = &moe_shapes[si];
    uint32_t r = s->t * s->k, n = s->n, h = s->h;
    snprintf(ctx.shape, sizeof ctx.shape, "R=%u E=%u H=%u N=%u", r, s->e, h, n);
    size_t na = (size_t)r * n, nw = (size_t)s->e * h * n, ny = (size_t)r * h;
    metrale_bf16 *act = cf_alloc(na, 2), *w = cf_alloc(nw, 2);
    int32_t *idx = cf_alloc(r, sizeof(int32_t));
    mt_fill_bf16(&ctx.rng, act, na, -1, 1);
    mt_fill_bf16(&ctx.rng, w, nw, -1, 1);
    random_experts(&ctx.rng, idx, r, s->e);
    double *ref = cf_alloc(ny, sizeof(double));
    for (uint32_t j = 0; j < r; j++)
      for (uint32_t f = 0; f < h; f++) {
        const metrale_bf16 *wr = w + ((size_t)idx[j] * h + f) * n, *ar = act + (size_t)j * n;
        double acc = 0.0;
        for (uint32_t i = 0; i < n; i++) acc += mt_bf(wr[i]) * mt_bf(ar[i]);
        ref[(size_t)j * h + f] = acc;
      }

    cf_launch l;
    cf_launch_init(&l, id, (gpu_dim3){r, (h + feat - 1) / feat, 1});
    int by = cf_buf_add(&l, "y", CF_F32, CF_OUT, ny, NULL, CF_TOL_F32);
    int ba = cf_buf_add(&l, "act", CF_BF16, CF_IN, na, act, 0);
    int bi = cf_buf_add(&l, "idx", CF_I32, CF_IN, r, idx, 0);
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, nw, w, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, ba);
    cf_arg_buf(&l, bi);
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, r);
    cf_arg_u32(&l, h);
    cf_arg_u32(&l, n);
    if (cf_run(&ctx, &l, kern)) cf_check_f32(&ctx, "y", cf_f32(&l, by), ref, ny, CF_TOL_F32);
    cf_launch_free(&l);
    free(act), free(w), free(idx), free(ref);
  }
  cf_close(&ctx);
}

Test(moe, moe_down) { check_down(METRALE_K_moe_down, 64); }
/* N a multiple of 8 with both loads a row in flight (512), with a partial step (520), element
 * loads (70, 130, 1); H not a multiple of four (7, 129: a group's rows past H) */
Test(moe, moe_down_rows) { check_down(METRALE_K_moe_down_rows, 32); }

/* moe_combine (grid.x = T) and moe_combine_wide (grid = (T, ceil(H/256))): the same op;
 * k past the 16 experts the wide kernel loads ahead. */
static void check_combine(metrale_kernel_id id, uint32_t feat_per_block, int y16) {
  CF_BEGIN(ctx, kern, id);
  static const struct {
    uint32_t t, k, h, ld, col;
  } shapes[] = {{1, 1, 7, 3, 2},   {4, 2, 129, 10, 9},     {6, 8, 64, 65, 64},
                {3, 3, 1000, 1, 0}, {1, 10, 2048, 513, 512}, {2, 5, 257, 4, 1},
                {2, 20, 1028, 21, 20}, {3, 18, 13, 19, 0}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    uint32_t t = shapes[si].t, k = shapes[si].k, h = shapes[si].h, ld = shapes[si].ld;
    uint32_t col = shapes[si].col;
    snprintf(ctx.shape, sizeof ctx.shape, "T=%u k=%u H=%u ld=%u col=%u", t, k, h, ld, col);
    size_t nh = (size_t)t * h, ny = (size_t)t * k * h;
    metrale_bf16 *res = cf_alloc(nh, 2), *shared = cf_alloc(nh, 2);
    float *y = cf_alloc(ny, sizeof(float)), *w = cf_alloc((size_t)t * k, sizeof(float));
    metrale_bf16 *y_bf = cf_alloc(ny, 2);
    float *gate = cf_alloc((size_t)t * ld, sizeof(float));
    mt_fill_bf16(&ctx.rng, res, nh, -4, 4);
    mt_fill_bf16(&ctx.rng, shared, nh, -1, 1);
    mt_fill_f32(&ctx.rng, y, ny, -1, 1);
    if (y16) /* bf16 values, so that a kernel reading y as f32 or dropping bits fails */
      for (size_t i = 0; i < ny; i++) y_bf[i] = metrale_f32_to_bf16(y[i]), y[i] = metrale_bf16_to_f32(y_bf[i]);
    mt_fill_f32(&ctx.rng, w, (size_t)t * k, 0, 1);
    mt_fill_f32(&ctx.rng, gate, (size_t)t * ld, -3, 3);
    double *ref = cf_alloc(nh, sizeof(double));
    for (uint32_t tok = 0; tok < t; tok++) {
      double sg = 1.0 / (1.0 + exp(-(double)gate[(size_t)tok * ld + col]));
      for (uint32_t f = 0; f < h; f++) {
        size_t o = (size_t)tok * h + f;
        double acc = mt_bf(res[o]) + sg * mt_bf(shared[o]);
        for (uint32_t j = 0; j < k; j++)
          acc += (double)w[(size_t)tok * k + j] * y[((size_t)tok * k + j) * h + f];
        ref[o] = acc;
      }
    }

    cf_launch l;
    const uint32_t gy = feat_per_block ? (h + feat_per_block - 1) / feat_per_block : 1;
    cf_launch_init(&l, id, (gpu_dim3){t, gy, 1});
    int bo = cf_buf_add(&l, "out", CF_BF16, CF_OUT, nh, NULL, CF_TOL_BF16);
    int br = cf_buf_add(&l, "res", CF_BF16, CF_IN, nh, res, 0);
    int by = y16 ? cf_buf_add(&l, "y", CF_BF16, CF_IN, ny, y_bf, 0) : cf_buf_add(&l, "y", CF_F32, CF_IN, ny, y, 0);
    int bw = cf_buf_add(&l, "w", CF_F32, CF_IN, (size_t)t * k, w, 0);
    int bs = cf_buf_add(&l, "shared", CF_BF16, CF_IN, nh, shared, 0);
    int bg = cf_buf_add(&l, "gate", CF_F32, CF_IN, (size_t)t * ld, gate, 0);
    cf_arg_buf(&l, bo);
    cf_arg_buf(&l, br);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, bw);
    cf_arg_buf(&l, bs);
    cf_arg_buf(&l, bg);
    cf_arg_u32(&l, t);
    cf_arg_u32(&l, k);
    cf_arg_u32(&l, h);
    cf_arg_u32(&l, ld);
    cf_arg_u32(&l, col);
    if (cf_run(&ctx, &l, kern)) cf_check_bf16(&ctx, "out", cf_bf16(&l, bo), ref, nh, CF_TOL_BF16);
    cf_launch_free(&l);
    free(res), free(shared), free(y), free(y_bf), free(w), free(gate), free(ref);
  }
  cf_close(&ctx);
}

Test(moe, moe_combine) { check_combine(METRALE_K_moe_combine, 0, 0); }
Test(moe, moe_combine_wide) { check_combine(METRALE_K_moe_combine_wide, 256, 0); }
Test(moe, moe_combine_wide_bf16) { check_combine(METRALE_K_moe_combine_wide_bf16, 512, 1); } /* 2 features a thread */

/* ---- grouped projections: moe_sort, moe_gate_up_sorted, moe_down_sorted --------------- */

static uint64_t moe_slots(uint32_t r, uint32_t e) { return ((uint64_t)r + 63) / 64 + e + 1; }

/* kernels.def moe_sort, written out: a stable counting sort by expert, then the slots. */
static void host_sort(int32_t *perm, int32_t *tiles, const int32_t *idx, uint32_t r, uint32_t e) {
  const uint64_t s = moe_slots(r, e);
  for (uint64_t t = 0; t < s; t++) tiles[3 * t] = -1, tiles[3 * t + 1] = 0, tiles[3 * t + 2] = 0;
  uint32_t at = 0;
  for (uint32_t x = 0; x < e; x++) {
    const uint32_t o = at;
    for (uint32_t j = 0; j < r; j++)
      if (idx[j] == (int32_t)x) perm[at++] = (int32_t)j;
    const uint32_t c = at - o;
    for (uint32_t i = 0; 64 * i < c; i++) {
      int32_t *tl = tiles + 3 * ((uint64_t)o / 64 + x + i);
      tl[0] = (int32_t)x, tl[1] = (int32_t)(o + 64 * i), tl[2] = (int32_t)(c - 64 * i < 64 ? c - 64 * i : 64);
    }
  }
  for (; at < r; at++) perm[at] = -1;
}

/* Expert ids: uniform, all on one expert (many full tiles), or uniform with one row in five
 * outside [0, E) (left out of the lists).  The shapes reach 10 of the CUDA kernel's rounds of
 * 4096 rows (a 4096-token prefill's 40960 rows) and one expert with every row of 3. */
typedef enum { IDS_UNIFORM, IDS_ONE, IDS_SOME_INVALID } ids_kind;
static void fill_ids(mt_rng *rng, int32_t *idx, uint32_t r, uint32_t e, ids_kind kind) {
  const uint32_t one = (uint32_t)mt_below(rng, e);
  for (uint32_t j = 0; j < r; j++) {
    idx[j] = kind == IDS_ONE ? (int32_t)one : (int32_t)mt_below(rng, e);
    if (kind == IDS_SOME_INVALID && j % 5 == 2) idx[j] = j % 2 ? -1 : (int32_t)(e + j % 3);
  }
}

Test(moe, moe_sort) {
  CF_BEGIN(ctx, kern, METRALE_K_moe_sort);
  static const struct {
    uint32_t r, e;
    ids_kind kind;
  } shapes[] = {{1, 1, IDS_UNIFORM},   {5, 3, IDS_SOME_INVALID}, {64, 1, IDS_UNIFORM},  {65, 2, IDS_ONE},
                {300, 4, IDS_ONE},     {130, 3, IDS_SOME_INVALID}, {640, 512, IDS_UNIFORM},
                {4001, 16, IDS_SOME_INVALID}, {20480, 512, IDS_UNIFORM}, {7, 9, IDS_SOME_INVALID},
                {9000, 2, IDS_ONE},           {40960, 512, IDS_SOME_INVALID}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const uint32_t r = shapes[si].r, e = shapes[si].e;
    const uint64_t s = moe_slots(r, e);
    snprintf(ctx.shape, sizeof ctx.shape, "R=%u E=%u ids=%d", r, e, (int)shapes[si].kind);
    int32_t *idx = cf_alloc(r, sizeof(int32_t)), *perm = cf_alloc(r, sizeof(int32_t));
    int32_t *tiles = cf_alloc(3 * s, sizeof(int32_t));
    fill_ids(&ctx.rng, idx, r, e, shapes[si].kind);
    host_sort(perm, tiles, idx, r, e);
    cf_launch l;
    cf_launch_init(&l, METRALE_K_moe_sort, (gpu_dim3){e, 1, 1});
    int bp = cf_buf_add(&l, "perm", CF_I32, CF_OUT, r, NULL, 0);
    int bt = cf_buf_add(&l, "tiles", CF_I32, CF_OUT, 3 * s, NULL, 0);
    int bi = cf_buf_add(&l, "idx", CF_I32, CF_IN, r, idx, 0);
    cf_arg_buf(&l, bp);
    cf_arg_buf(&l, bt);
    cf_arg_buf(&l, bi);
    cf_arg_u32(&l, r);
    cf_arg_u32(&l, e);
    if (cf_run(&ctx, &l, kern)) {
      cf_check_exact(&ctx, "perm", cf_i32(&l, bp), perm, sizeof(int32_t), r);
      cf_check_exact(&ctx, "tiles", cf_i32(&l, bt), tiles, sizeof(int32_t), 3 * s);
    }
    cf_launch_free(&l);
    free(idx), free(perm), free(tiles);
  }
  cf_close(&ctx);
}

/* The projections' shapes, and two of tens of rows an expert (full and partial tiles,
 * one expert with several), K past the 32-deep steps, N past the 128-column tiles; the last
 * (all rows to one expert) with K deep enough to wrap the 8-stage ring of the _ws rows. */
static const moe_shape sorted_shapes[] = {{1, 1, 2, 16, 8},     {3, 2, 4, 129, 70},  {5, 4, 8, 64, 130},
                                          {2, 3, 3, 7, 1},      {1, 10, 12, 264, 512}, {2, 2, 3, 2048, 520},
                                          {100, 4, 5, 200, 136}, {300, 2, 3, 96, 64}, {40, 4, 3, 512, 256}};

/* One of the sorted projections: gate_up (x rows j / k, bf16 out; 2: act = silu(gate) * up) or down (act rows j,
 * f32 out, or bf16 where y_bf16), every row routed to a valid expert so that the lists name all of them. */
static void check_sorted(metrale_kernel_id id, int gate_up, int ws, int y_bf16) {
  CF_BEGIN(ctx, kern, id);
  for (size_t si = 0; si < sizeof sorted_shapes / sizeof sorted_shapes[0]; si++) {
    const moe_shape *sh = &sorted_shapes[si];
    const uint32_t r = sh->t * sh->k, e = sh->e;
    const uint32_t kin = gate_up ? sh->h : sh->n, nout = gate_up ? 2 * sh->n : sh->h; /* K, N of the product */
    const uint64_t s = moe_slots(r, e);
    snprintf(ctx.shape, sizeof ctx.shape, "R=%u k=%u E=%u K=%u N=%u", r, sh->k, e, kin, nout);
    const size_t na = gate_up ? (size_t)sh->t * kin : (size_t)r * kin, nw = (size_t)e * nout * kin,
                 ny = (size_t)r * nout;
    metrale_bf16 *a = cf_alloc(na, 2), *w = cf_alloc(nw, 2);
    int32_t *idx = cf_alloc(r, sizeof(int32_t)), *perm = cf_alloc(r, sizeof(int32_t));
    int32_t *tiles = cf_alloc(3 * s, sizeof(int32_t));
    mt_fill_bf16(&ctx.rng, a, na, -1, 1);
    mt_fill_bf16(&ctx.rng, w, nw, -1, 1);
    fill_ids(&ctx.rng, idx, r, e, si % 3 == 2 ? IDS_ONE : IDS_UNIFORM);
    host_sort(perm, tiles, idx, r, e);
    double *ref = cf_alloc(ny, sizeof(double));
    for (uint32_t j = 0; j < r; j++)
      for (uint32_t f = 0; f < nout; f++) {
        const metrale_bf16 *wr = w + ((size_t)idx[j] * nout + f) * kin;
        const metrale_bf16 *ar = a + (size_t)(gate_up ? j / sh->k : j) * kin;
        double acc = 0.0;
        for (uint32_t i = 0; i < kin; i++) acc += mt_bf(wr[i]) * mt_bf(ar[i]);
        ref[(size_t)j * nout + f] = acc;
      }
    const uint32_t nact = gate_up == 2 ? nout / 2 : nout; /* the silu form's act columns */
    if (gate_up == 2) /* act[j, c] = silu(g) * u of the unrounded sums, in place over ref's rows */
      for (uint32_t j = 0; j < r; j++)
        for (uint32_t c = 0; c < nact; c++) {
          const double g = ref[(size_t)j * nout + c], u = ref[(size_t)j * nout + nact + c];
          ref[(size_t)j * nact + c] = g / (1.0 + exp(-g)) * u;
        }
    cf_launch l;
    const gpu_dim3 grid = ws ? (gpu_dim3){(nout + 255) / 256, (uint32_t)s, 1}
                             : (gpu_dim3){(uint32_t)s, (nout + 127) / 128, 1};
    cf_launch_init(&l, id, grid);
    const int out16 = gate_up || y_bf16;
    const size_t nyo = (size_t)r * nact;
    const char *yname = gate_up == 2 ? "act" : gate_up ? "gu" : "y";
    int by = out16 ? cf_buf_add(&l, yname, CF_BF16, CF_OUT, nyo, NULL, CF_TOL_BF16)
                   : cf_buf_add(&l, "y", CF_F32, CF_OUT, nyo, NULL, CF_TOL_F32);
    int ba = cf_buf_add(&l, gate_up ? "x" : "act", CF_BF16, CF_IN, na, a, 0);
    int bp = cf_buf_add(&l, "perm", CF_I32, CF_IN, r, perm, 0);
    int bt = cf_buf_add(&l, "tiles", CF_I32, CF_IN, 3 * s, tiles, 0);
    int bw = cf_buf_add(&l, "w", CF_BF16, CF_IN, nw, w, 0);
    cf_arg_buf(&l, by);
    cf_arg_buf(&l, ba);
    cf_arg_buf(&l, bp);
    cf_arg_buf(&l, bt);
    cf_arg_buf(&l, bw);
    cf_arg_u32(&l, r);
    if (gate_up) cf_arg_u32(&l, sh->k);
    cf_arg_u32(&l, sh->h);
    cf_arg_u32(&l, gate_up ? nout : sh->n);
    cf_arg_u32(&l, e);
    if (cf_run(&ctx, &l, kern)) {
      if (out16)
        cf_check_bf16(&ctx, yname, cf_bf16(&l, by), ref, nyo, CF_TOL_BF16);
      else
        cf_check_f32(&ctx, "y", cf_f32(&l, by), ref, nyo, CF_TOL_F32);
    }
    cf_launch_free(&l);
    free(a), free(w), free(idx), free(perm), free(tiles), free(ref);
  }
  cf_close(&ctx);
}

Test(moe, moe_gate_up_sorted) { check_sorted(METRALE_K_moe_gate_up_sorted, 1, 0, 0); }
Test(moe, moe_down_sorted) { check_sorted(METRALE_K_moe_down_sorted, 0, 0, 0); }
/* the 256-column blocks of two slots (sm_90a): K a multiple of 8 takes the TMA copies, other K
 * the element loads; N past a 256-column tile reads into the next expert's rows (not
 * written); an expert of 1, 2, 3 or more slots */
Test(moe, moe_gate_up_sorted_ws) { check_sorted(METRALE_K_moe_gate_up_sorted_ws, 1, 1, 0); }
Test(moe, moe_down_sorted_ws) { check_sorted(METRALE_K_moe_down_sorted_ws, 0, 1, 0); }
/* gate_up with silu_mul on the way out (gate_up == 2): act [R, N/2] */
Test(moe, moe_gate_up_silu_sorted_ws) { check_sorted(METRALE_K_moe_gate_up_silu_sorted_ws, 2, 1, 0); }
/* gate rows then as many up rows: an odd n is refused before anything is read or written
 * (the null buffers would fault), on every backend that has the kernel */
Test(moe, moe_gate_up_silu_sorted_ws_refuses_odd_n) {
  CF_BEGIN(ctx, kern, METRALE_K_moe_gate_up_silu_sorted_ws);
  const gpu_arg args[] = {gpu_arg_ptr(0), gpu_arg_ptr(0), gpu_arg_ptr(0), gpu_arg_ptr(0), gpu_arg_ptr(0),
                          gpu_arg_u32(1), gpu_arg_u32(1), gpu_arg_u32(8), gpu_arg_u32(3), gpu_arg_u32(1)};
  metrale_status s = metrale_launch(ctx.dev, METRALE_K_moe_gate_up_silu_sorted_ws, kern, (gpu_dim3){1, 3, 1}, NULL,
                                    args, sizeof args / sizeof args[0]);
  CF_EXPECT(&ctx, metrale_status_code(s) == METRALE_CODE_INVALID_ARGUMENT, "n = 3 gave %s: %s",
            metrale_code_name(metrale_status_code(s)), metrale_status_message(s));
  metrale_status_free(s);
  cf_close(&ctx);
}
/* moe_down_sorted_ws with y in bf16 */
Test(moe, moe_down_sorted_ws_bf16) { check_sorted(METRALE_K_moe_down_sorted_ws_bf16, 0, 1, 1); }
