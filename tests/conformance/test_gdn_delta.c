/* gdn module: the gated delta rule, decode (one token per slot) and prefill (sequences
 * given by cu_seqlens), on state [n_slots, nv, dk, dv]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct {
  uint32_t nk, nv, dk, dv;
} heads;

/* ratios nv/nk of 1, 2 and 4; head dims 16, 24, 128 */
static const heads head_shapes[] = {
    {1, 1, 16, 16}, {1, 2, 24, 16}, {2, 8, 16, 24}, {1, 1, 128, 128}};
#define NHEADS (sizeof head_shapes / sizeof head_shapes[0])

static size_t conv_dim(const heads *h) { return 2 * (size_t)h->nk * h->dk + (size_t)h->nv * h->dv; }

/* Rows of qkv f32 [T, C] as l2norm_qk leaves them: unit q (times dk^-1/2) and k, v in
 * [-1,1]; not bf16 values, so a kernel that rounds qkv through bf16 fails. */
static void fill_qkv(mt_rng *rng, float *qkv, uint32_t t, const heads *h) {
  size_t c = conv_dim(h);
  for (uint32_t tok = 0; tok < t; tok++) {
    float *row = qkv + tok * c;
    for (uint32_t hh = 0; hh < 2 * h->nk; hh++) {
      double v[128], ss = 0.0;
      for (uint32_t j = 0; j < h->dk; j++) {
        v[j] = mt_normal(rng);
        ss += v[j] * v[j];
      }
      double sc = 1.0 / sqrt(ss) * (hh < h->nk ? 1.0 / sqrt((double)h->dk) : 1.0);
      for (uint32_t j = 0; j < h->dk; j++)
        row[hh * h->dk + j] = (float)(v[j] * sc);
    }
    mt_fill_f32(rng, row + 2 * (size_t)h->nk * h->dk, (size_t)h->nv * h->dv, -1, 1);
  }
}

/* g = -e^u, u uniform in [log gate_lo, log gate_hi]: by default g in [-2, -0.01] (as
 * -exp(A_log)*softplus gives; a chunk of 64 tokens keeps ~e^-24 of the state), other bounds in
 * wh_seg's slow and middle cases; beta in (0, 1). */
static double gate_lo = 0.01, gate_hi = 2.0;
/* where not 0, value heads h with h % gate_mixed == 1 take slow gates (g in -[1e-4, 1e-3]) */
static uint32_t gate_mixed = 0;

static void fill_gates(mt_rng *rng, float *g, float *beta, size_t n, uint32_t nv) {
  for (size_t i = 0; i < n; i++) {
    const int slow = gate_mixed && i % nv % gate_mixed == 1;
    g[i] = (float)-exp(mt_uniform(rng, log(slow ? 1e-4 : gate_lo), log(slow ? 1e-3 : gate_hi)));
    beta[i] = (float)mt_uniform(rng, 0.02, 0.98);
  }
}

/* One token, value head vh, on S [dk,dv] (double): writes o [dv]. */
static void ref_step(double *S, double *o, const float *row, double g, double beta, uint32_t vh,
                     const heads *h) {
  uint32_t kh = vh / (h->nv / h->nk);
  const float *q = row + (size_t)kh * h->dk;
  const float *k = row + (size_t)h->nk * h->dk + (size_t)kh * h->dk;
  const float *v = row + 2 * (size_t)h->nk * h->dk + (size_t)vh * h->dv;
  mt_delta_step(S, o, q, k, v, g, beta, h->dk, h->dv);
}

/* Runs a sequence of tokens [t0, t1) for every value head from state slot (or zeros
 * for -1), writing o_ref [T, nv, dv] and the final state into state_ref unless -1. */
static void ref_sequence(double *o_ref, double *state_ref, const float *qkv, const float *g,
                         const float *beta, int32_t slot, uint32_t t0, uint32_t t1,
                         const heads *h) {
  size_t per = (size_t)h->dk * h->dv, c = conv_dim(h);
  double *S = cf_alloc(per, sizeof *S);
  for (uint32_t vh = 0; vh < h->nv; vh++) {
    if (slot >= 0)
      memcpy(S, state_ref + ((size_t)slot * h->nv + vh) * per, per * sizeof *S);
    else
      memset(S, 0, per * sizeof *S);
    for (uint32_t t = t0; t < t1; t++)
      ref_step(S, o_ref + ((size_t)t * h->nv + vh) * h->dv, qkv + t * c, g[(size_t)t * h->nv + vh],
               beta[(size_t)t * h->nv + vh], vh, h);
    if (slot >= 0) memcpy(state_ref + ((size_t)slot * h->nv + vh) * per, S, per * sizeof *S);
  }
  free(S);
}

/* The chunked prefill sums in another order than the token recurrence, and on GPUs its
 * products run on tensor cores with operands split in two parts (split tf32, or hi + lo
 * bf16 pairs: about 2^-17 relative per product): an emulation of the cuda kernel gave state
 * NMSE up to about 3e-11 (bf16 pairs; 1e-12 with split tf32), so 1e-9 is ten times
 * CF_TOL_F32 for the reordering, still far below anything wrong (NMSE near 1).  The bf16
 * output keeps CF_TOL_BF16: its rounding dominates. */
#define TOL_STATE_CHUNKED 1e-9
/* delta_rule_prefill_chunked_f16: one rounding to IEEE half per operand (2^-11 relative) in
 * the chunk step; about 1e-7 to 1e-6 state NMSE expected (docs/numerics.md), 1e-5 allowed,
 * still five orders below a wrong kernel's. */
#define TOL_STATE_CHUNKED_F16 1e-5
#define CHUNK 64u
#define CHUNK_REC_FLOATS (147584u / 4u) /* kernels.def: workspace bytes per (chunk, value head) */

/* v and the initial states are scaled by this (1 but in the range cases of the fp16 build) */
static float v_range = 1.0f;
static uint32_t v_from = 0;
/* and v of token tok times 2^(v_ramp (tok - T/2) / 64): its magnitude, and the states', change
 * by 2^v_ramp a chunk (0 but in the fp16 build's ramp cases) */
static float v_ramp = 0.0f;
/* delta_rule_prefill_chunked_wh_seg's segments a sequence and segment 0's weight (its test sets them) */
static uint32_t seg_n = 3, seg_w0 = 16;

/* A workspace of n floats for delta_rule_prefill_chunked_wh_prep_qkh: the q/k planes (kernels.def
 * delta_rule_prefill_chunked_wh_prep) from the q and k of qkv [T, c] (dk = 128) in IEEE half, zero past
 * each sequence in its last chunk, as conv1d_prefill_l2norm_qkh leaves them; the rest all 0xff bytes. */
static float *wh_planes_of(const float *qkv, size_t c, const int32_t *cu, uint32_t nseq, uint32_t nk, size_t n) {
  float *ws = cf_alloc(n, sizeof(float));
  memset(ws, 0xff, n * sizeof(float));
  uint16_t *half = (uint16_t *)ws;
  for (uint32_t q = 0; q < nseq; q++) {
    const size_t len = (size_t)(cu[q + 1] - cu[q]), j0 = mt_wh_first_chunk(cu, q);
    for (size_t r = 0; r < (len + 63) / 64 * 64; r++)
      for (uint32_t hh = 0; hh < 2 * nk; hh++)
        for (uint32_t d = 0; d < 128; d++)
          half[mt_wh_plane_at(j0 + r / 64, nk, hh % nk, hh / nk, (uint32_t)(r % 64), d)] =
              r < len ? metrale_f32_to_f16(qkv[((size_t)cu[q] + r) * c + (size_t)hh * 128 + d]) : 0u;
  }
  return ws;
}

/* decode: cu == NULL, one token per slot; prefill: cu [S+1], one slot per sequence, with
 * delta_rule_prefill_chunked (two phases and a workspace) when chunked, its phase-1 blocks
 * taking `chunked` (16 or 32) value columns each. */
static void run_case_as(cf_ctx *ctx, metrale_kernel_id id, metrale_kernel_id id1, gpu_kernel kern,
                        const heads *h, uint32_t nseq, const int32_t *cu, uint32_t n_slots,
                        uint32_t chunked) {
  int prefill = cu != NULL;
  uint32_t t = prefill ? (uint32_t)cu[nseq] : nseq;
  size_t c = conv_dim(h), per = (size_t)h->nv * h->dk * h->dv;
  size_t no = (size_t)t * h->nv * h->dv, ng = (size_t)t * h->nv, ns = n_slots * per;
  float *qkv = cf_alloc(t * c, sizeof(float));
  float *g = cf_alloc(ng, sizeof(float)), *beta = cf_alloc(ng, sizeof(float));
  float *state = cf_alloc(ns, sizeof(float));
  int32_t *slots = cf_alloc(nseq, sizeof(int32_t));
  fill_qkv(&ctx->rng, qkv, t, h);
  fill_gates(&ctx->rng, g, beta, ng, h->nv);
  mt_fill_f32(&ctx->rng, state, ns, -0.5, 0.5);
  if (v_range != 1.0f) { /* v from token v_from on, and the state unless v_from, times v_range */
    for (uint32_t tok = v_from; tok < t; tok++)
      for (size_t j = 2 * (size_t)h->nk * h->dk; j < c; j++) qkv[tok * c + j] *= v_range;
    for (size_t i = 0; i < ns && !v_from; i++) state[i] *= v_range;
  }
  for (uint32_t tok = 0; tok < t && v_ramp != 0.0f; tok++) {
    float f = (float)exp2(v_ramp * ((double)tok - t / 2.0) / CHUNK);
    for (size_t j = 2 * (size_t)h->nk * h->dk; j < c; j++) qkv[tok * c + j] *= f;
  }
  cf_pick_slots(&ctx->rng, slots, nseq, n_slots, 1);
  /* _prep_vh: v from vh in IEEE half (the reference takes the halves' values) and qkv's value
   * columns NaN, which the kernel must not read */
  /* _prep_qkh: q and k from the q/k planes at the start of ws (the test writes them from qkv's, as the
   * conv would: rounded to half, zero past each sequence), all of qkv NaN */
  const int qkh = id == METRALE_K_delta_rule_prefill_chunked_wh_prep_qkh;
  const int vhalf = id == METRALE_K_delta_rule_prefill_chunked_f16_prep_vh ||
                    id == METRALE_K_delta_rule_prefill_chunked_wh_prep || qkh;
  const size_t qk = 2 * (size_t)h->nk * h->dk, nvdv = (size_t)h->nv * h->dv;
  uint16_t *vh = vhalf ? cf_alloc(t * nvdv, 2) : NULL;
  float *qkv_dev = vhalf ? cf_alloc(t * c, sizeof(float)) : qkv;
  for (size_t tok = 0; vhalf && tok < t; tok++)
    for (size_t j = 0; j < c; j++) {
      float *x = &qkv[tok * c + j];
      if (j >= qk) vh[tok * nvdv + j - qk] = metrale_f32_to_f16_sat(*x), *x = metrale_f16_to_f32(vh[tok * nvdv + j - qk]);
      qkv_dev[tok * c + j] = j >= qk || qkh ? NAN : *x;
    }

  double *o_ref = cf_alloc(no, sizeof(double)), *state_ref = cf_alloc(ns, sizeof(double));
  mt_f32_to_double(state_ref, state, ns);
  for (uint32_t s = 0; s < nseq; s++)
    ref_sequence(o_ref, state_ref, qkv, g, beta, slots[s], prefill ? (uint32_t)cu[s] : s,
                 prefill ? (uint32_t)cu[s + 1] : s + 1, h);

  cf_launch l;
  cf_launch_init(&l, id, (gpu_dim3){nseq * h->nv, 1, 1});
  double tol_state = !chunked                                       ? CF_TOL_F32
                     : id1 == METRALE_K_delta_rule_prefill_chunked_f16 ||
                               id1 == METRALE_K_delta_rule_prefill_chunked_wh ||
                               id1 == METRALE_K_delta_rule_prefill_chunked_wh_seg
                         ? TOL_STATE_CHUNKED_F16
                         : TOL_STATE_CHUNKED;
  int bo = cf_buf_add(&l, "o", CF_BF16, CF_OUT, no, NULL, CF_TOL_BF16);
  int bq = cf_buf_add(&l, "qkv", CF_F32, CF_IN, t * c, qkv_dev, 0);
  int bg = cf_buf_add(&l, "g", CF_F32, CF_IN, ng, g, 0);
  int bb = cf_buf_add(&l, "beta", CF_F32, CF_IN, ng, beta, 0);
  int bs = cf_buf_add(&l, "state", CF_F32, CF_INOUT, ns, state, tol_state);
  l.buf[bs].guard = per * sizeof(float); /* a write to slot -1 lands in the guard */
  int bcu = prefill ? cf_buf_add(&l, "cu_seqlens", CF_I32, CF_IN, nseq + 1, cu, 0) : -1;
  int bsl = cf_buf_add(&l, "slots", CF_I32, CF_IN, nseq, slots, 0);
  int bws = -1;
  float *ws_init = NULL;
  if (chunked) {
    uint64_t nc = ((uint64_t)t + (CHUNK - 1) * (uint64_t)nseq) / CHUNK;
    if (nc > t) nc = t;
    const int seg = id1 == METRALE_K_delta_rule_prefill_chunked_wh_seg; /* kernels.def: its phases and matrices */
    const size_t seg_floats = seg ? (size_t)nseq * h->nv * (2 * seg_n - 3) * 16384 : 0;
    const size_t ws_floats = nc * h->nv * CHUNK_REC_FLOATS + seg_floats;
    if (qkh) ws_init = wh_planes_of(qkv, c, cu, nseq, h->nk, ws_floats);
    bws = cf_buf_add(&l, "ws", CF_F32, CF_SCRATCH, ws_floats, ws_init, 0);
    l.nphase = seg ? 4 : 2;
    l.phase_arg = 13;
    l.phase_grid[0] = (gpu_dim3){(uint32_t)nc * h->nv, 1, 1};
    l.phase_grid[1] = (gpu_dim3){nseq * h->nv * (seg ? 2 * seg_n - 3 : (h->dv + chunked - 1) / chunked), 1, 1};
    l.phase_grid[2] = (gpu_dim3){nseq * h->nv * 4, 1, 1};
    l.phase_grid[3] = (gpu_dim3){nseq * h->nv * (seg_n - 1), 1, 1};
    for (uint32_t p = 1; p < l.nphase; p++) l.phase_id[p] = id1;
  }
  cf_arg_buf(&l, bo);
  cf_arg_buf(&l, bq);
  cf_arg_buf(&l, bg);
  cf_arg_buf(&l, bb);
  cf_arg_buf(&l, bs);
  if (prefill) cf_arg_buf(&l, bcu);
  cf_arg_buf(&l, bsl);
  if (chunked) cf_arg_buf(&l, bws);
  cf_arg_u32(&l, nseq);
  cf_arg_u32(&l, h->nk);
  cf_arg_u32(&l, h->nv);
  cf_arg_u32(&l, h->dk);
  cf_arg_u32(&l, h->dv);
  if (chunked) cf_arg_u32(&l, 0); /* phase: set per launch */
  if (vhalf) { /* after the phase: the f16 kernel's phase 1 takes the arguments before it, _wh all */
    if (id1 == METRALE_K_delta_rule_prefill_chunked_f16) l.phase_nargs[1] = l.nargs;
    cf_arg_buf(&l, cf_buf_add(&l, "vh", CF_F16, CF_IN, t * nvdv, vh, 0));
    if (id1 == METRALE_K_delta_rule_prefill_chunked_wh_seg) { /* phase 0 (_prep) takes the arguments before nseg */
      l.phase_nargs[0] = l.nargs;
      cf_arg_u32(&l, seg_n);
      cf_arg_u32(&l, seg_w0);
    }
  }
  if (cf_run(ctx, &l, kern)) {
    cf_check_bf16(ctx, "o", cf_bf16(&l, bo), o_ref, no, CF_TOL_BF16);
    cf_check_state(ctx, "state", cf_f32(&l, bs), state, state_ref, per, n_slots, slots, nseq,
                   tol_state);
  }
  cf_launch_free(&l);
  free(ws_init);
  if (vhalf) free(qkv_dev);
  free(qkv), free(vh), free(g), free(beta), free(state), free(slots), free(o_ref), free(state_ref);
}

static void run_case(cf_ctx *ctx, gpu_kernel kern, const heads *h, uint32_t nseq, const int32_t *cu,
                     uint32_t n_slots, uint32_t chunked) {
  metrale_kernel_id id = chunked ? METRALE_K_delta_rule_prefill_chunked
                         : cu    ? METRALE_K_delta_rule_prefill
                                 : METRALE_K_delta_rule_decode;
  run_case_as(ctx, id, id, kern, h, nseq, cu, n_slots, chunked);
}

Test(gdn, delta_rule_decode) {
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_decode);
  static const uint32_t batches[] = {1, 3, 5};
  for (size_t hi = 0; hi < NHEADS; hi++)
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
      const heads *h = &head_shapes[hi];
      uint32_t bsz = batches[bi];
      snprintf(ctx.shape, sizeof ctx.shape, "B=%u nk=%u nv=%u dk=%u dv=%u", bsz, h->nk, h->nv,
               h->dk, h->dv);
      run_case(&ctx, kern, h, bsz, NULL, bsz + 2, 0);
    }
  cf_close(&ctx);
}

/* Long sequences: thousands of tokens through one state.  (llvmpipe ends a shader
 * invocation's loops after 65535 iterations in all, which the Vulkan prefill passed at
 * tokens x dk ~ 33000 until it ran long sequences in windows: backends/vulkan/README.md.)
 * One sequence a case, so no padding slot: on such a driver a padding sequence restarts
 * from zero every window. */
Test(gdn, delta_rule_prefill_long) {
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill);
  static const heads hs[] = {{1, 1, 128, 16}, {1, 1, 32, 256}, {2, 4, 64, 128}};
  static const int32_t lens[] = {2400, 600, 600};
  for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; hi++) {
    int32_t cu[2] = {0, lens[hi]};
    snprintf(ctx.shape, sizeof ctx.shape, "S=1 T=%d nk=%u nv=%u dk=%u dv=%u", lens[hi], hs[hi].nk,
             hs[hi].nv, hs[hi].dk, hs[hi].dv);
    run_case(&ctx, kern, &hs[hi], 1, cu, 3, 0);
  }
  cf_close(&ctx);
}

Test(gdn, delta_rule_prefill) {
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill);
  static const int32_t lens_a[] = {0, 1, 2, 5, 33}, lens_b[] = {3, 1}, lens_c[] = {7};
  static const struct {
    const int32_t *lens;
    uint32_t n;
  } cases[] = {{lens_a, 5}, {lens_b, 2}, {lens_c, 1}};
  for (size_t hi = 0; hi < NHEADS; hi++)
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
      const heads *h = &head_shapes[hi];
      if (h->dk == 128 && ci == 0) continue; /* keep the big heads to short sequences */
      int32_t cu[8] = {0};
      for (uint32_t s = 0; s < cases[ci].n; s++) cu[s + 1] = cu[s] + cases[ci].lens[s];
      snprintf(ctx.shape, sizeof ctx.shape, "S=%u T=%d nk=%u nv=%u dk=%u dv=%u", cases[ci].n,
               cu[cases[ci].n], h->nk, h->nv, h->dk, h->dv);
      run_case(&ctx, kern, h, cases[ci].n, cu, cases[ci].n + 2, 0);
    }
  cf_close(&ctx);
}

/* Sequences ending before, at and after chunk boundaries, empty ones, padding slots and
 * random initial states; for delta_rule_prefill_chunked and its other builds (the same op):
 * delta_rule_prefill_chunked_prep (more blocks per multiprocessor) and
 * delta_rule_prefill_chunked_wg (phase 1 on warpgroup MMAs, 32 value columns a block only).
 * Phase 0 by id, phase 1 by id1, with cols_min..32 value columns per phase-1 block. */
/* The chunked cases' sequence sets */
static const int32_t lens_a[] = {0, 1, 63, 64, 65, 200}, lens_b[] = {130}, lens_c[] = {1, 2, 1},
                     lens_d[] = {128, 0, 191};
typedef struct {
  const int32_t *lens;
  uint32_t n;
} seq_set;
static const seq_set chunked_seqs[] = {{lens_a, 6}, {lens_b, 1}, {lens_c, 3}, {lens_d, 3}};
#define N_CHUNKED_SEQS (sizeof chunked_seqs / sizeof chunked_seqs[0])

static void chunked_cases_cols(metrale_kernel_id id, metrale_kernel_id id1, uint32_t cols_min) {
  CF_BEGIN(ctx, kern, id);
  const seq_set *cases = chunked_seqs;
  for (size_t hi = 0; hi < NHEADS; hi++)
    for (size_t ci = 0; ci < N_CHUNKED_SEQS; ci++)
      for (uint32_t cols = cols_min; cols <= 32; cols += 16) { /* kernels.def: columns per block */
        const heads *h = &head_shapes[hi];
        int32_t cu[8] = {0};
        for (uint32_t s = 0; s < cases[ci].n; s++) cu[s + 1] = cu[s] + cases[ci].lens[s];
        snprintf(ctx.shape, sizeof ctx.shape, "chunked/%u S=%u T=%d nk=%u nv=%u dk=%u dv=%u", cols,
                 cases[ci].n, cu[cases[ci].n], h->nk, h->nv, h->dk, h->dv);
        run_case_as(&ctx, id, id1, kern, h, cases[ci].n, cu, cases[ci].n + 2, cols);
      }
  cf_close(&ctx);
}

static void chunked_cases(metrale_kernel_id id, metrale_kernel_id id1) { chunked_cases_cols(id, id1, 16); }

Test(gdn, delta_rule_prefill_chunked) {
  chunked_cases(METRALE_K_delta_rule_prefill_chunked, METRALE_K_delta_rule_prefill_chunked);
}

/* Sequences of thousands of tokens (up to 188 chunks) at dk 128, at 16 and 32 value columns a
 * block, one of them at least a padding sequence.  On a driver that caps a shader
 * invocation's loops (llvmpipe) the Vulkan kernel runs phase 1 in windows of chunks, each
 * handing its state to the next through the workspace (backends/vulkan/README.md): here two
 * or three windows at either width. */
Test(gdn, delta_rule_prefill_chunked_long) {
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill_chunked);
  static const heads h = {1, 1, 128, 32};
  static const int32_t lens[] = {12000, 100, 7000};
  int32_t cu[4] = {0};
  for (uint32_t s = 0; s < 3; s++) cu[s + 1] = cu[s] + lens[s];
  for (uint32_t cols = 16; cols <= 32; cols += 16) {
    snprintf(ctx.shape, sizeof ctx.shape, "chunked/%u S=3 T=%d nk=1 nv=1 dk=128 dv=32", cols, cu[3]);
    run_case_as(&ctx, METRALE_K_delta_rule_prefill_chunked, METRALE_K_delta_rule_prefill_chunked, kern, &h, 3,
                cu, 5, cols);
  }
  cf_close(&ctx);
}

/* both phases by the _prep build, and its phase 0 before delta_rule_prefill_chunked's
 * phase 1 (the pair the ops launch) */
Test(gdn, delta_rule_prefill_chunked_prep) {
  chunked_cases(METRALE_K_delta_rule_prefill_chunked_prep, METRALE_K_delta_rule_prefill_chunked_prep);
  chunked_cases(METRALE_K_delta_rule_prefill_chunked_prep, METRALE_K_delta_rule_prefill_chunked);
}

/* both phases by the _wg build, and the _prep build's phase 0 before its phase 1 (the pair
 * the ops launch) */
Test(gdn, delta_rule_prefill_chunked_wg) {
  chunked_cases_cols(METRALE_K_delta_rule_prefill_chunked_wg, METRALE_K_delta_rule_prefill_chunked_wg, 32);
  chunked_cases_cols(METRALE_K_delta_rule_prefill_chunked_prep, METRALE_K_delta_rule_prefill_chunked_wg, 32);
}

/* the fp16 build: its own phases only (its records are its own), 32 value columns a block;
 * then v and the states at 2^15 (U, D and S past half's 65504 unless the kernel scales
 * them), at 2^-20 (v below half's normal range: ~6% rounding unless scaled), v jumping
 * to 2^15 times itself at token 100 (D past 65504 unless the block rescales within a chunk
 * step: the states, chosen before that chunk's U is seen, are near 1), and v growing and
 * shrinking 16-fold a chunk (with these gates S follows v's last tokens: each S plane put
 * with the last plane's exponent lands above [2^3, 2^7), or below, and is put again) */
static const struct {
  float range;
  uint32_t from;
  float ramp;
} f16_ranges[] = {{1.0f, 0, 0.0f}, {32768.0f, 0, 0.0f}, {0x1p-20f, 0, 0.0f}, {32768.0f, 100, 0.0f},
                  {1.0f, 0, 4.0f}, {1.0f, 0, -4.0f}};
#define N_F16_RANGES (sizeof f16_ranges / sizeof f16_ranges[0])
static void set_range(size_t i) {
  v_range = f16_ranges[i].range;
  v_from = f16_ranges[i].from;
  v_ramp = f16_ranges[i].ramp;
}

static void f16_cases(metrale_kernel_id id0) {
  for (size_t i = 0; i < N_F16_RANGES; i++) {
    set_range(i);
    chunked_cases_cols(id0, METRALE_K_delta_rule_prefill_chunked_f16, 32);
  }
  v_ramp = 0.0f;
  v_range = 1.0f;
  v_from = 0;
}
Test(gdn, delta_rule_prefill_chunked_f16) { f16_cases(METRALE_K_delta_rule_prefill_chunked_f16); }

/* the same cases with phase 0 by the _prep entry of the fp16 build (the pair the ops launch);
 * and a phase 1 launch of that entry is refused */
Test(gdn, delta_rule_prefill_chunked_f16_prep) {
  f16_cases(METRALE_K_delta_rule_prefill_chunked_f16_prep);
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill_chunked_f16_prep);
  const gpu_arg args[] = {gpu_arg_ptr(4096),  gpu_arg_ptr(8192), gpu_arg_ptr(12288), gpu_arg_ptr(16384),
                          gpu_arg_ptr(20480), gpu_arg_ptr(24576), gpu_arg_ptr(28672), gpu_arg_ptr(32768),
                          gpu_arg_u32(1),     gpu_arg_u32(1),    gpu_arg_u32(2),     gpu_arg_u32(64),
                          gpu_arg_u32(64),    gpu_arg_u32(1)};
  cf_expect_refused(&ctx, METRALE_K_delta_rule_prefill_chunked_f16_prep, kern, args, sizeof args / sizeof args[0],
                 "phase 1");
  cf_close(&ctx);
}

/* the same cases with v from vh in IEEE half, qkv's value columns NaN (the pair the ops launch
 * after conv1d_prefill_l2norm_xhv); and a phase 1 launch, and a vh 8 bytes off 16-byte
 * alignment, are refused */
Test(gdn, delta_rule_prefill_chunked_f16_prep_vh) {
  f16_cases(METRALE_K_delta_rule_prefill_chunked_f16_prep_vh);
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill_chunked_f16_prep_vh);
  for (uint32_t bad = 0; bad < 2; bad++) {
    const gpu_arg args[] = {gpu_arg_ptr(4096),  gpu_arg_ptr(8192),  gpu_arg_ptr(12288),   gpu_arg_ptr(16384),
                            gpu_arg_ptr(20480), gpu_arg_ptr(24576), gpu_arg_ptr(28672),   gpu_arg_ptr(32768),
                            gpu_arg_u32(1),     gpu_arg_u32(1),     gpu_arg_u32(2),       gpu_arg_u32(64),
                            gpu_arg_u32(64),    gpu_arg_u32(1 - bad), gpu_arg_ptr(36864 + 8 * bad)};
    cf_expect_refused(&ctx, METRALE_K_delta_rule_prefill_chunked_f16_prep_vh, kern, args, sizeof args / sizeof args[0],
                   bad ? "a misaligned vh" : "phase 1");
  }
  cf_close(&ctx);
}

/* delta_rule_prefill_chunked_wh (a whole value head a phase-1 block, grid.x = S*nv) after its
 * phase 0, delta_rule_prefill_chunked_wh_prep, on v in IEEE half (qkv's value columns NaN):
 * dk = dv = 128 only, so the head shapes are its own (one, two and four value heads a key head
 * of two); the sequences of the chunked cases; and the fp16 build's range cases (v and the
 * states at 2^15 and 2^-20, v jumping 2^15-fold at token 100, v growing and shrinking 16-fold
 * a chunk), which exercise the block's exponent: chosen from S after each chunk, lowered where
 * R or D reaches 2^15.  Then the launches its contract refuses. */
Test(gdn, delta_rule_prefill_chunked_wh) {
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill_chunked_wh_prep);
  static const heads hs[] = {{1, 1, 128, 128}, {1, 2, 128, 128}, {2, 4, 128, 128}};
  const seq_set *cases = chunked_seqs;
  for (size_t ri = 0; ri < N_F16_RANGES; ri++) {
    set_range(ri);
    for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; hi++)
      for (size_t ci = 0; ci < N_CHUNKED_SEQS; ci++) {
        if (ri > 0 && (hi > 0 || ci > 1)) continue; /* the range cases on one head, two sequence sets */
        int32_t cu[8] = {0};
        for (uint32_t s = 0; s < cases[ci].n; s++) cu[s + 1] = cu[s] + cases[ci].lens[s];
        snprintf(ctx.shape, sizeof ctx.shape, "wh range=%g from=%u ramp=%g S=%u T=%d nk=%u nv=%u", v_range, v_from,
                 v_ramp, cases[ci].n, cu[cases[ci].n], hs[hi].nk, hs[hi].nv);
        run_case_as(&ctx, METRALE_K_delta_rule_prefill_chunked_wh_prep, METRALE_K_delta_rule_prefill_chunked_wh,
                    kern, &hs[hi], cases[ci].n, cu, cases[ci].n + 2, 128);
      }
  }
  v_ramp = 0.0f;
  v_range = 1.0f;
  v_from = 0;
  cf_close(&ctx);
  /* refused: either kernel in the other's phase, dk 64, a vh (either phase) or an o 8 bytes off 16-byte alignment */
  static const struct {
    metrale_kernel_id id;
    uint32_t phase, dk;
    uint64_t vh, o;
    const char *what;
  } bad[] = {{METRALE_K_delta_rule_prefill_chunked_wh_prep, 1, 128, 36864, 4096, "_prep in phase 1"},
             {METRALE_K_delta_rule_prefill_chunked_wh, 0, 128, 36864, 4096, "phase 0"},
             {METRALE_K_delta_rule_prefill_chunked_wh_prep, 0, 64, 36864, 4096, "dk 64"},
             {METRALE_K_delta_rule_prefill_chunked_wh, 1, 64, 36864, 4096, "dk 64"},
             {METRALE_K_delta_rule_prefill_chunked_wh_prep, 0, 128, 36872, 4096, "a misaligned vh"},
             {METRALE_K_delta_rule_prefill_chunked_wh, 1, 128, 36864, 4104, "a misaligned o"},
             {METRALE_K_delta_rule_prefill_chunked_wh, 1, 128, 36872, 4096, "a misaligned vh in phase 1"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CF_BEGIN(c2, k2, bad[i].id);
    const gpu_arg args[] = {gpu_arg_ptr(bad[i].o),  gpu_arg_ptr(8192),      gpu_arg_ptr(12288),
                            gpu_arg_ptr(16384),     gpu_arg_ptr(20480),     gpu_arg_ptr(24576),
                            gpu_arg_ptr(28672),     gpu_arg_ptr(32768),     gpu_arg_u32(1),
                            gpu_arg_u32(1),         gpu_arg_u32(2),         gpu_arg_u32(bad[i].dk),
                            gpu_arg_u32(128),       gpu_arg_u32(bad[i].phase), gpu_arg_ptr(bad[i].vh)};
    cf_expect_refused(&c2, bad[i].id, k2, args, sizeof args / sizeof args[0], bad[i].what);
    cf_close(&c2);
  }
}

/* delta_rule_prefill_chunked_wh_seg: the same op with each sequence cut into 3, 5 and 8 segments
 * (phase 0 by delta_rule_prefill_chunked_wh_prep, then its phases 1 to 3): sequences of 16 and 11
 * chunks and shorter ones, whose segments are partly empty (the chunked cases' sets), on 1, 2 and
 * 4 value heads a key head, segment 0 as long as the others (w0 = 16), 1/16 of them (often
 * empty), 22/16 (the ops' choice at 32 heads on 132 SMs) and 4 times; the fp16 build's range cases
 * on one head, 300 tokens in 3 and 5 segments (of one or two chunks, so that F, M and the chaining
 * see each range); slower gates (below); then the launches its contract refuses. */
Test(gdn, delta_rule_prefill_chunked_wh_seg) {
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill_chunked_wh_prep);
  static const heads hs[] = {{1, 1, 128, 128}, {1, 2, 128, 128}, {2, 4, 128, 128}};
  static const int32_t long_a[] = {1000}, long_b[] = {700, 0, 129, 300}, mid[] = {300};
  static const seq_set sets[] = {{long_a, 1}, {long_b, 4}, {lens_a, 6}, {lens_d, 3}, {mid, 1}};
  static const uint32_t nsegs[] = {3, 5, 8}, w0s[] = {16, 22, 1, 64};
  for (size_t ri = 0; ri < N_F16_RANGES; ri++) {
    set_range(ri);
    for (size_t ni = 0; ni < 3; ni++)
      for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; hi++)
        for (size_t ci = 0; ci < sizeof sets / sizeof sets[0]; ci++) {
          if (ri > 0 && (hi > 0 || ci != 4 || ni == 2)) continue; /* the range cases: one head, 300 tokens */
          if (ri == 0 && ci == 4) continue;
          seg_n = nsegs[ni];
          seg_w0 = ri > 0 ? 22 : w0s[(ci + ni + hi) % 4];
          int32_t cu[8] = {0};
          for (uint32_t q = 0; q < sets[ci].n; q++) cu[q + 1] = cu[q] + sets[ci].lens[q];
          snprintf(ctx.shape, sizeof ctx.shape,
                   "wh_seg nseg=%u w0=%u range=%g from=%u ramp=%g S=%u T=%d nk=%u nv=%u", seg_n, seg_w0, v_range,
                   v_from, v_ramp, sets[ci].n, cu[sets[ci].n], hs[hi].nk, hs[hi].nv);
          run_case_as(&ctx, METRALE_K_delta_rule_prefill_chunked_wh_prep, METRALE_K_delta_rule_prefill_chunked_wh_seg,
                      kern, &hs[hi], sets[ci].n, cu, sets[ci].n + 2, 128);
        }
  }
  v_ramp = 0.0f;
  v_range = 1.0f;
  v_from = 0;
  /* At the default gates a segment of two chunks or more forgets its start (F_j runs from a later
   * chunk, M_j is zero) and the kernel takes w0 = 1 for the sequences long enough, so the cases
   * above check the boundaries of other w0 only on short ones.  Here: gates that forget slowly,
   * where the passes must carry F_j and M_j whole and the boundaries are w0's (16, 22, 64, 1); every
   * other head slow (mixed: w0's boundaries, the fast heads' M zero); and gates in between, 9000
   * tokens whose state forgets 2^-64 of itself over ~38 chunks: in 3 segments (w0 = 1 taken: a
   * segment of 68 chunks, F from ~38 chunks before its end, M zero) and 5 (w0 = 1 would cut
   * segments of 35 chunks, which do not forget: w0 = 16, segments of 28, F and M whole).  A pass that
   * left out more than kernels.def allows moves the state by far more than its tolerance here. */
  static const int32_t longest[] = {9000};
  static const struct {
    double lo, hi;
    uint32_t mixed;
    seq_set set;
    uint32_t nseg, w0, hi_shape;
  } gated[] = {{1e-4, 1e-3, 0, {long_a, 1}, 3, 16, 1},    {1e-4, 1e-3, 0, {long_b, 4}, 5, 22, 1},
               {1e-4, 1e-3, 0, {long_a, 1}, 8, 64, 2},    {1e-4, 1e-3, 0, {long_b, 4}, 3, 1, 0},
               {0.01, 2.0, 2, {long_a, 1}, 5, 16, 2},     {0.01, 2.0, 4, {long_b, 4}, 3, 22, 2},
               {0.01, 0.03, 0, {longest, 1}, 3, 16, 0},   {0.01, 0.03, 0, {longest, 1}, 5, 16, 0}};
  for (size_t gi = 0; gi < sizeof gated / sizeof gated[0]; gi++) {
    gate_lo = gated[gi].lo, gate_hi = gated[gi].hi, gate_mixed = gated[gi].mixed;
    seg_n = gated[gi].nseg, seg_w0 = gated[gi].w0;
    const seq_set *st = &gated[gi].set;
    int32_t cu[8] = {0};
    for (uint32_t q = 0; q < st->n; q++) cu[q + 1] = cu[q] + st->lens[q];
    const heads *hh = &hs[gated[gi].hi_shape];
    snprintf(ctx.shape, sizeof ctx.shape, "wh_seg nseg=%u w0=%u g in -[%g, %g] mixed=%u S=%u T=%d nk=%u nv=%u", seg_n,
             seg_w0, gate_lo, gate_hi, gate_mixed, st->n, cu[st->n], hh->nk, hh->nv);
    run_case_as(&ctx, METRALE_K_delta_rule_prefill_chunked_wh_prep, METRALE_K_delta_rule_prefill_chunked_wh_seg, kern,
                hh, st->n, cu, st->n + 2, 128);
  }
  gate_lo = 0.01, gate_hi = 2.0, gate_mixed = 0;
  seg_n = 3;
  seg_w0 = 16;
  cf_close(&ctx);
  /* refused: phase 0 and 4, 2 and 9 segments, w0 0 and 65, dk 64, a misaligned vh or o */
  static const struct {
    uint32_t phase, nseg, w0, dk;
    uint64_t vh, o;
    const char *what;
  } bad[] = {{0, 3, 16, 128, 36864, 4096, "phase 0"},    {4, 3, 16, 128, 36864, 4096, "phase 4"},
             {1, 2, 16, 128, 36864, 4096, "2 segments"}, {3, 9, 16, 128, 36864, 4096, "9 segments"},
             {1, 3, 0, 128, 36864, 4096, "w0 0"},        {3, 5, 65, 128, 36864, 4096, "w0 65"},
             {1, 3, 16, 64, 36864, 4096, "dk 64"},       {2, 3, 16, 128, 36872, 4096, "a misaligned vh"},
             {3, 3, 16, 128, 36864, 4104, "a misaligned o"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CF_BEGIN(c2, k2, METRALE_K_delta_rule_prefill_chunked_wh_seg);
    const gpu_arg args[] = {gpu_arg_ptr(bad[i].o), gpu_arg_ptr(8192),       gpu_arg_ptr(12288),
                            gpu_arg_ptr(16384),    gpu_arg_ptr(20480),      gpu_arg_ptr(24576),
                            gpu_arg_ptr(28672),    gpu_arg_ptr(32768),      gpu_arg_u32(1),
                            gpu_arg_u32(1),        gpu_arg_u32(2),          gpu_arg_u32(bad[i].dk),
                            gpu_arg_u32(128),      gpu_arg_u32(bad[i].phase), gpu_arg_ptr(bad[i].vh),
                            gpu_arg_u32(bad[i].nseg), gpu_arg_u32(bad[i].w0)};
    cf_expect_refused(&c2, METRALE_K_delta_rule_prefill_chunked_wh_seg, k2, args, sizeof args / sizeof args[0],
                   bad[i].what);
    cf_close(&c2);
  }
}

/* delta_rule_prefill_chunked_wh_prep_qkh: phase 0 on q and k from the q/k planes at the start of ws
 * (as conv1d_prefill_l2norm_qkh leaves them; all of qkv NaN, which it must not read), then
 * delta_rule_prefill_chunked_wh's phase 1 on the chunked cases' sequences and heads, and
 * delta_rule_prefill_chunked_wh_seg's phases on sequences of 16 and 11 chunks in 3 and 5 segments, at
 * the default and at slow gates; then the launches its contract refuses. */
Test(gdn, delta_rule_prefill_chunked_wh_prep_qkh) {
  CF_BEGIN(ctx, kern, METRALE_K_delta_rule_prefill_chunked_wh_prep_qkh);
  static const heads hs[] = {{1, 1, 128, 128}, {1, 2, 128, 128}, {2, 4, 128, 128}};
  const seq_set *cases = chunked_seqs;
  for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; hi++)
    for (size_t ci = 0; ci < N_CHUNKED_SEQS; ci++) {
      int32_t cu[8] = {0};
      for (uint32_t s = 0; s < cases[ci].n; s++) cu[s + 1] = cu[s] + cases[ci].lens[s];
      snprintf(ctx.shape, sizeof ctx.shape, "wh_prep_qkh S=%u T=%d nk=%u nv=%u", cases[ci].n, cu[cases[ci].n],
               hs[hi].nk, hs[hi].nv);
      run_case_as(&ctx, METRALE_K_delta_rule_prefill_chunked_wh_prep_qkh, METRALE_K_delta_rule_prefill_chunked_wh,
                  kern, &hs[hi], cases[ci].n, cu, cases[ci].n + 2, 128);
    }
  static const int32_t long_a[] = {1000}, long_b[] = {700, 0, 129, 300};
  static const seq_set sets[] = {{long_a, 1}, {long_b, 4}};
  for (uint32_t slow = 0; slow < 2; slow++)
    for (size_t ci = 0; ci < 2; ci++) {
      if (slow) gate_lo = 1e-4, gate_hi = 1e-3;
      seg_n = ci ? 5 : 3, seg_w0 = ci ? 22 : 16;
      int32_t cu[8] = {0};
      for (uint32_t q = 0; q < sets[ci].n; q++) cu[q + 1] = cu[q] + sets[ci].lens[q];
      const heads *hh = &hs[ci ? 2 : 1];
      snprintf(ctx.shape, sizeof ctx.shape, "wh_prep_qkh, wh_seg nseg=%u w0=%u g in -[%g, %g] S=%u T=%d nk=%u nv=%u",
               seg_n, seg_w0, gate_lo, gate_hi, sets[ci].n, cu[sets[ci].n], hh->nk, hh->nv);
      run_case_as(&ctx, METRALE_K_delta_rule_prefill_chunked_wh_prep_qkh,
                  METRALE_K_delta_rule_prefill_chunked_wh_seg, kern, hh, sets[ci].n, cu, sets[ci].n + 2, 128);
    }
  gate_lo = 0.01, gate_hi = 2.0;
  seg_n = 3;
  seg_w0 = 16;
  /* refused: phase 1, dk 64, a vh 8 bytes off 16-byte alignment */
  static const struct {
    uint32_t phase, dk;
    uint64_t vh;
    const char *what;
  } bad[] = {{1, 128, 36864, "phase 1"}, {0, 64, 36864, "dk 64"}, {0, 128, 36872, "a misaligned vh"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const gpu_arg args[] = {gpu_arg_ptr(4096),       gpu_arg_ptr(8192),  gpu_arg_ptr(12288),          gpu_arg_ptr(16384),
                            gpu_arg_ptr(20480),      gpu_arg_ptr(24576), gpu_arg_ptr(28672),          gpu_arg_ptr(32768),
                            gpu_arg_u32(1),          gpu_arg_u32(1),     gpu_arg_u32(2),              gpu_arg_u32(bad[i].dk),
                            gpu_arg_u32(128),        gpu_arg_u32(bad[i].phase), gpu_arg_ptr(bad[i].vh)};
    cf_expect_refused(&ctx, METRALE_K_delta_rule_prefill_chunked_wh_prep_qkh, kern, args, sizeof args / sizeof args[0],
                      bad[i].what);
  }
  cf_close(&ctx);
}
