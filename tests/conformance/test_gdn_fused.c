/* gdn_decode module: the fused decode mixer (split -> conv1d_update -> l2norm_qk -> gates
 * -> delta_rule_decode -> gated_rmsnorm) against a double-precision reference of that
 * composition, rounding to bf16 where the contracts do (o, the normalised o, y). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct {
  uint32_t nk, nv, dk, dv, kw;
} fshape;

/* r = nv/nk of 1, 2, 3, 4; odd head dims; the Qwen head (dk = dv = 128) with r = 2 and 3
 * and conv widths 4 and 3; conv widths 2, 3, 4 elsewhere. */
static const fshape shapes[] = {{1, 1, 16, 16, 4},  {1, 2, 24, 16, 3},   {2, 8, 16, 24, 4},
                                {2, 4, 128, 128, 4}, {1, 3, 128, 128, 4}, {1, 2, 128, 96, 2},
                                {3, 3, 40, 128, 4},  {2, 4, 128, 128, 3}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static const float eps = 1e-6f;

static double silu_d(double x) { return x / (1.0 + exp(-x)); }
static double softplus_d(double x) { return x > 20.0 ? x : log1p(exp(x)); }

/* Offsets of token row pieces in p [P] for key head kh / value head h. */
typedef struct {
  size_t q, k, v, z, b, a; /* start of q, k of key head kh; v, z, b, a of value head h */
} pieces;

/* p rows are [q | k | v | z | b | a] (kernels.def split_qkvzba35). */
static pieces where(const fshape *s, uint32_t kh, uint32_t h) {
  const size_t c = 2 * (size_t)s->nk * s->dk + (size_t)s->nv * s->dv;
  pieces o;
  o.q = (size_t)kh * s->dk;
  o.k = (size_t)(s->nk + kh) * s->dk;
  o.v = 2 * (size_t)s->nk * s->dk + (size_t)h * s->dv;
  o.z = c + (size_t)h * s->dv;
  o.b = c + (size_t)s->nv * s->dv + h;
  o.a = o.b + s->nv;
  return o;
}

/* The composition for one token in double.  conv_ref [C, K-1] and state_ref [nv, dk, dv]
 * are the slot's states (NULL for padding: zeros, not stored); y [nv*dv]. */
static void ref_token(double *y, double *conv_ref, double *state_ref, const float *row,
                      const metrale_bf16 *cw, const float *a_log, const metrale_bf16 *dt_bias,
                      const metrale_bf16 *nw, const fshape *s) {
  const uint32_t r = s->nv / s->nk, hist = s->kw - 1;
  const size_t c = 2 * (size_t)s->nk * s->dk + (size_t)s->nv * s->dv;
  /* the conv input row mixed [C] = [q | k | v] */
  double *mixed = cf_alloc(c, sizeof(double)), *qkv = cf_alloc(c, sizeof(double));
  for (uint32_t kh = 0; kh < s->nk; kh++) {
    pieces pc = where(s, kh, kh * r);
    for (uint32_t i = 0; i < s->dk; i++) {
      mixed[(size_t)kh * s->dk + i] = row[pc.q + i];
      mixed[(size_t)(s->nk + kh) * s->dk + i] = row[pc.k + i];
    }
  }
  for (uint32_t h = 0; h < s->nv; h++) {
    pieces pc = where(s, h / r, h);
    for (uint32_t j = 0; j < s->dv; j++) mixed[2 * (size_t)s->nk * s->dk + (size_t)h * s->dv + j] = row[pc.v + j];
  }
  for (size_t ch = 0; ch < c; ch++) {
    double acc = 0.0;
    for (uint32_t j = 0; j < s->kw; j++) {
      double win = j < hist ? (conv_ref ? conv_ref[ch * hist + j] : 0.0) : mixed[ch];
      acc += mt_bf(cw[ch * s->kw + j]) * win;
    }
    qkv[ch] = silu_d(acc);
    if (conv_ref && hist) {
      for (uint32_t j = 0; j + 1 < hist; j++) conv_ref[ch * hist + j] = conv_ref[ch * hist + j + 1];
      conv_ref[ch * hist + hist - 1] = mixed[ch];
    }
  }
  for (uint32_t hh = 0; hh < 2 * s->nk; hh++) { /* l2norm q and k heads */
    double *v = qkv + (size_t)hh * s->dk, ss = 0.0;
    for (uint32_t i = 0; i < s->dk; i++) ss += v[i] * v[i];
    double sc = 1.0 / sqrt(ss + 1e-6) * (hh < s->nk ? 1.0 / sqrt((double)s->dk) : 1.0);
    for (uint32_t i = 0; i < s->dk; i++) v[i] *= sc;
  }
  const size_t per = (size_t)s->dk * s->dv;
  double *S = cf_alloc(per, sizeof(double)), *o = cf_alloc(s->dv, sizeof(double));
  for (uint32_t h = 0; h < s->nv; h++) {
    const uint32_t kh = h / r;
    pieces pc = where(s, kh, h);
    const double g = -exp((double)a_log[h]) * softplus_d((double)row[pc.a] + mt_bf(dt_bias[h]));
    const double beta = 1.0 / (1.0 + exp(-(double)row[pc.b]));
    const double *q = qkv + (size_t)kh * s->dk, *k = qkv + (size_t)(s->nk + kh) * s->dk;
    const double *v = qkv + 2 * (size_t)s->nk * s->dk + (size_t)h * s->dv;
    if (state_ref)
      memcpy(S, state_ref + h * per, per * sizeof *S);
    else
      memset(S, 0, per * sizeof *S);
    for (size_t i = 0; i < per; i++) S[i] *= exp(g);
    for (uint32_t j = 0; j < s->dv; j++) {
      double kv = 0.0;
      for (uint32_t i = 0; i < s->dk; i++) kv += k[i] * S[(size_t)i * s->dv + j];
      double d = beta * (v[j] - kv);
      for (uint32_t i = 0; i < s->dk; i++) S[(size_t)i * s->dv + j] += k[i] * d;
    }
    double ss = 0.0;
    for (uint32_t j = 0; j < s->dv; j++) {
      double acc = 0.0;
      for (uint32_t i = 0; i < s->dk; i++) acc += q[i] * S[(size_t)i * s->dv + j];
      o[j] = mt_round_bf16(acc); /* o is bf16 between the recurrence and the norm */
      ss += o[j] * o[j];
    }
    if (state_ref) memcpy(state_ref + h * per, S, per * sizeof *S);
    const double inv = 1.0 / sqrt(ss / s->dv + (double)eps);
    for (uint32_t j = 0; j < s->dv; j++) {
      const double z = row[pc.z + j];
      y[(size_t)h * s->dv + j] = mt_round_bf16(o[j] * inv) * mt_bf(nw[j]) * silu_d(z);
    }
  }
  free(mixed), free(qkv), free(S), free(o);
}

/* grid.x of the kernel (kernels.def) */
static uint32_t grid_of(metrale_kernel_id id, const fshape *s, uint32_t bsz) {
  if (id == METRALE_K_gdn_decode_cluster35) return 8 * ((bsz * s->nv + 1) / 2);
  if (id == METRALE_K_gdn_decode_pair35) return 2 * ((bsz * s->nv + 1) / 2);
  if (id == METRALE_K_gdn_decode_pair35_r4) return bsz * s->nv;
  return bsz * s->nk;
}

static void run_case(cf_ctx *ctx, gpu_kernel kern, metrale_kernel_id id, const fshape *s,
                     uint32_t bsz, uint32_t n_slots) {
  const size_t c = 2 * (size_t)s->nk * s->dk + (size_t)s->nv * s->dv, vw = (size_t)s->nv * s->dv;
  const size_t P = c + vw + 2 * (size_t)s->nv, hist = s->kw - 1;
  const size_t cper = c * hist, sper = (size_t)s->nv * s->dk * s->dv;
  const size_t np = bsz * P, ny = bsz * vw, ncs = n_slots * cper, nst = n_slots * sper;
  float *p = cf_alloc(np, sizeof(float)), *a_log = cf_alloc(s->nv, sizeof(float));
  float *conv_state = cf_alloc(ncs ? ncs : 1, sizeof(float)), *state = cf_alloc(nst, sizeof(float));
  metrale_bf16 *cw = cf_alloc(c * s->kw, 2), *dt_bias = cf_alloc(s->nv, 2), *nw = cf_alloc(s->dv, 2);
  int32_t *slots = cf_alloc(bsz, sizeof(int32_t));
  mt_fill_f32(&ctx->rng, p, np, -1.5, 1.5);
  mt_fill_f32(&ctx->rng, a_log, s->nv, -1, 1);
  mt_fill_f32(&ctx->rng, conv_state, ncs, -1, 1);
  mt_fill_f32(&ctx->rng, state, nst, -0.5, 0.5);
  mt_fill_bf16(&ctx->rng, cw, c * s->kw, -0.6, 0.6);
  mt_fill_bf16(&ctx->rng, dt_bias, s->nv, -1, 1);
  mt_fill_bf16(&ctx->rng, nw, s->dv, 0.5, 1.5);
  cf_pick_slots(&ctx->rng, slots, bsz, n_slots, 1);

  double *y_ref = cf_alloc(ny, sizeof(double)), *conv_ref = cf_alloc(ncs ? ncs : 1, sizeof(double));
  double *state_ref = cf_alloc(nst, sizeof(double));
  mt_f32_to_double(conv_ref, conv_state, ncs);
  mt_f32_to_double(state_ref, state, nst);
  for (uint32_t b = 0; b < bsz; b++) {
    const int32_t slot = slots[b];
    ref_token(y_ref + b * vw, slot < 0 ? NULL : conv_ref + (size_t)slot * cper,
              slot < 0 ? NULL : state_ref + (size_t)slot * sper, p + b * P, cw, a_log, dt_bias, nw, s);
  }

  cf_launch l;
  cf_launch_init(&l, id, (gpu_dim3){grid_of(id, s, bsz), 1, 1});
  int by = cf_buf_add(&l, "y", CF_BF16, CF_OUT, ny, NULL, CF_TOL_BF16);
  int bp = cf_buf_add(&l, "p", CF_F32, CF_IN, np, p, 0);
  int bcw = cf_buf_add(&l, "conv_w", CF_BF16, CF_IN, c * s->kw, cw, 0);
  int bcs = cf_buf_add(&l, "conv_state", CF_F32, CF_INOUT, ncs, conv_state, 0); /* exact copies */
  l.buf[bcs].guard = cper * sizeof(float); /* a write to slot -1 lands in the guard */
  int bal = cf_buf_add(&l, "a_log", CF_F32, CF_IN, s->nv, a_log, 0);
  int bdt = cf_buf_add(&l, "dt_bias", CF_BF16, CF_IN, s->nv, dt_bias, 0);
  int bnw = cf_buf_add(&l, "norm_w", CF_BF16, CF_IN, s->dv, nw, 0);
  int bst = cf_buf_add(&l, "state", CF_F32, CF_INOUT, nst, state, CF_TOL_F32);
  l.buf[bst].guard = sper * sizeof(float);
  int bsl = cf_buf_add(&l, "slots", CF_I32, CF_IN, bsz, slots, 0);
  cf_arg_buf(&l, by);
  cf_arg_buf(&l, bp);
  cf_arg_buf(&l, bcw);
  cf_arg_buf(&l, bcs);
  cf_arg_buf(&l, bal);
  cf_arg_buf(&l, bdt);
  cf_arg_buf(&l, bnw);
  cf_arg_buf(&l, bst);
  cf_arg_buf(&l, bsl);
  cf_arg_u32(&l, bsz);
  cf_arg_u32(&l, s->nk);
  cf_arg_u32(&l, s->nv);
  cf_arg_u32(&l, s->dk);
  cf_arg_u32(&l, s->dv);
  cf_arg_u32(&l, s->kw);
  cf_arg_f32(&l, eps);
  if (cf_run(ctx, &l, kern)) {
    cf_check_bf16(ctx, "y", cf_bf16(&l, by), y_ref, ny, CF_TOL_BF16);
    cf_check_state(ctx, "conv_state", cf_f32(&l, bcs), conv_state, conv_ref, cper, n_slots, slots,
                   bsz, 0.0);
    cf_check_state(ctx, "state", cf_f32(&l, bst), state, state_ref, sper, n_slots, slots, bsz,
                   CF_TOL_F32);
  }
  cf_launch_free(&l);
  free(p), free(a_log), free(conv_state), free(state), free(cw), free(dt_bias), free(nw);
  free(slots), free(y_ref), free(conv_ref), free(state_ref);
}

static void run_shapes(metrale_kernel_id id, const fshape *list, size_t n) {
  CF_BEGIN(ctx, kern, id);
  static const uint32_t batches[] = {1, 3, 5};
  for (size_t si = 0; si < n; si++)
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
      const fshape *s = &list[si];
      snprintf(ctx.shape, sizeof ctx.shape, "B=%u nk=%u nv=%u dk=%u dv=%u K=%u", batches[bi], s->nk,
               s->nv, s->dk, s->dv, s->kw);
      run_case(&ctx, kern, id, s, batches[bi], batches[bi] + 2);
    }
  cf_close(&ctx);
}

Test(gdn_decode, gdn_decode_fused35) { run_shapes(METRALE_K_gdn_decode_fused35, shapes, NSHAPES); }

/* The cluster kernel takes dk = dv = 128 with r = 1 or 2: r = 1 with an odd nv and an odd
 * batch leaves the last cluster half empty; r = 2 puts a key head's two value heads in one
 * cluster; conv widths 4 (the unrolled path), 3 and 2. */
static const fshape cluster_shapes[] = {{2, 4, 128, 128, 4}, {1, 1, 128, 128, 4}, {3, 3, 128, 128, 3},
                                        {3, 6, 128, 128, 2}, {1, 2, 128, 128, 4}};

Test(gdn_decode, gdn_decode_cluster35) {
  run_shapes(METRALE_K_gdn_decode_cluster35, cluster_shapes, sizeof cluster_shapes / sizeof cluster_shapes[0]);
}

/* The pair kernel takes the cluster kernel's shapes (r = 1 pairs two key heads, r = 2 the
 * two value heads of one; odd nv at an odd batch leaves the last pair half empty). */
Test(gdn_decode, gdn_decode_pair35) {
  run_shapes(METRALE_K_gdn_decode_pair35, cluster_shapes, sizeof cluster_shapes / sizeof cluster_shapes[0]);
}

/* Its r = 4 form (a cluster of 4 is a key head): one key head, two and three (clusters of other key
 * heads and, at batches 3 and 5, of other tokens), conv widths 4, 3 and 2. */
static const fshape r4_shapes[] = {{1, 4, 128, 128, 4}, {2, 8, 128, 128, 4}, {3, 12, 128, 128, 3}, {2, 8, 128, 128, 2}};

Test(gdn_decode, gdn_decode_pair35_r4) {
  run_shapes(METRALE_K_gdn_decode_pair35_r4, r4_shapes, sizeof r4_shapes / sizeof r4_shapes[0]);
}

/* Other head sizes and ratios (r > 2 for the r <= 2 kernels, r != 4 for the r = 4 one) are an
 * invalid argument, not a launch that computes something else. */
/* Launches id at batch 1 on shape s with every pointer 0 but the state's (state_at) and
 * expects INVALID_ARGUMENT: a launch that went ahead would crash the test. */
static void expect_refused(cf_ctx *ctx, gpu_kernel kern, metrale_kernel_id id, const fshape *s,
                           uint64_t state_at) {
  gpu_arg args[16];
  for (int a = 0; a < 9; a++) args[a] = gpu_arg_ptr(a == 7 ? state_at : 0);
  args[9] = gpu_arg_u32(1);
  args[10] = gpu_arg_u32(s->nk);
  args[11] = gpu_arg_u32(s->nv);
  args[12] = gpu_arg_u32(s->dk);
  args[13] = gpu_arg_u32(s->dv);
  args[14] = gpu_arg_u32(s->kw);
  args[15] = gpu_arg_f32(eps);
  metrale_status st = metrale_launch(ctx->dev, id, kern, (gpu_dim3){grid_of(id, s, 1), 1, 1}, NULL, args, 16);
  CF_EXPECT(ctx, metrale_status_code(st) == METRALE_CODE_INVALID_ARGUMENT, "expected INVALID_ARGUMENT, got %s",
            metrale_code_name(metrale_status_code(st)));
  metrale_status_free(st);
}

static void run_rejects(metrale_kernel_id id, const fshape *bad, size_t n) {
  CF_BEGIN(ctx, kern, id);
  for (size_t i = 0; i < n; i++) {
    const fshape *s = &bad[i];
    snprintf(ctx.shape, sizeof ctx.shape, "nk=%u nv=%u dk=%u dv=%u", s->nk, s->nv, s->dk, s->dv);
    expect_refused(&ctx, kern, id, s, 0);
  }
  cf_close(&ctx);
}

/* r <= 2 kernels: other head sizes, r = 3 and r = 4; the r = 4 one: other head sizes, r = 1, 2, 3 */
static const fshape bad_r2[] = {{1, 1, 96, 128, 4}, {1, 1, 128, 64, 4}, {1, 3, 128, 128, 4}, {2, 8, 128, 128, 4}};
static const fshape bad_r4[] = {{1, 4, 96, 128, 4}, {1, 4, 128, 64, 4}, {1, 1, 128, 128, 4}, {2, 4, 128, 128, 4},
                                {1, 3, 128, 128, 4}, {2, 16, 128, 128, 4}};
Test(gdn_decode, gdn_decode_cluster35_rejects_other_shapes) {
  run_rejects(METRALE_K_gdn_decode_cluster35, bad_r2, sizeof bad_r2 / sizeof bad_r2[0]);
}
Test(gdn_decode, gdn_decode_pair35_rejects_other_shapes) {
  run_rejects(METRALE_K_gdn_decode_pair35, bad_r2, sizeof bad_r2 / sizeof bad_r2[0]);
}
Test(gdn_decode, gdn_decode_pair35_r4_rejects_other_shapes) {
  run_rejects(METRALE_K_gdn_decode_pair35_r4, bad_r4, sizeof bad_r4 / sizeof bad_r4[0]);
}

/* The pair kernels copy a head's state with the bulk engine: an unaligned state is an invalid
 * argument (the launch would otherwise go ahead and fault on the pointer 4). */
static void run_unaligned(metrale_kernel_id id, const fshape *ok) {
  CF_BEGIN(ctx, kern, id);
  snprintf(ctx.shape, sizeof ctx.shape, "nk=%u nv=%u dk=dv=128, state at byte 4", ok->nk, ok->nv);
  expect_refused(&ctx, kern, id, ok, 4);
  cf_close(&ctx);
}

Test(gdn_decode, gdn_decode_pair35_rejects_unaligned_state) {
  static const fshape ok = {1, 2, 128, 128, 4};
  run_unaligned(METRALE_K_gdn_decode_pair35, &ok);
}
Test(gdn_decode, gdn_decode_pair35_r4_rejects_unaligned_state) {
  static const fshape ok = {1, 4, 128, 128, 4};
  run_unaligned(METRALE_K_gdn_decode_pair35_r4, &ok);
}
