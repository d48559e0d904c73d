/* Mode equivalence and slot semantics of the layer on a seeded random layer:
 * decode == prefill == split, a batch == each sequence alone, a reused slot == a fresh
 * one, slot -1 is never touched, a failed call leaves every slot unchanged, and decode steps
 * give the same bits replayed from graphs, on two streams and queued without syncs, also on a
 * new slot list every step. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_util.h"
#include "layers/qwen3_ssm/layer.h" /* the scratch layout (white box) */

#define CHECK(expr)                                                                   \
  do {                                                                                \
    metrale_status s_ = (expr);                                                       \
    cr_assert(s_ == METRALE_OK, "%s: %s", #expr, metrale_status_message(s_));         \
  } while (0)

/* A layer of cfg with random weights from seed. */
static metrale_qwen3_ssm_layer *random_layer(metrale_device *dev, const metrale_qwen3_config *cfg, uint64_t seed) {
  metrale_random_source rs = {seed};
  metrale_qwen3_ssm_layer *L = NULL;
  CHECK(metrale_qwen3_ssm_layer_create(dev, cfg, 0, metrale_weight_source_random(&rs), &L));
  return L;
}

/* Runs the sequences (one slot each) as one prefill, token by token through decode, and as a
 * split at `split` tokens, and expects the final states to agree within 5e-3 and the outputs
 * within tol_y. */
static void expect_modes_agree_tol(metrale_device *dev, const metrale_qwen3_config *cfg, uint64_t seed,
                                   metrale_part part, const float *x, const uint32_t *lens, uint32_t nseq,
                                   uint32_t split, double tol_y) {
  lt_run ref, dec, spl;
  lt_run_init(&ref, dev, NULL, cfg, seed, part, x, lens, nseq, nseq);
  lt_run_init(&dec, dev, NULL, cfg, seed, part, x, lens, nseq, nseq);
  lt_run_init(&spl, dev, NULL, cfg, seed, part, x, lens, nseq, nseq);
  lt_run_mode(&ref, MODE_PREFILL, 0);
  lt_run_mode(&dec, MODE_DECODE, 0);
  lt_run_mode(&spl, MODE_SPLIT, split);
  lt_run_read_states(&ref), lt_run_read_states(&dec), lt_run_read_states(&spl);
  const uint64_t n = ref.T * cfg->hidden_size;
  lt_expect_close("decode output", dec.c.y, ref.c.y, n, tol_y);
  lt_expect_close("decode recurrent state", dec.rec, ref.rec, ref.rf * nseq, 5e-3);
  lt_expect_close("decode conv state", dec.conv, ref.conv, ref.cf * nseq, 5e-3);
  lt_expect_close("split output", spl.c.y, ref.c.y, n, tol_y);
  lt_expect_close("split recurrent state", spl.rec, ref.rec, ref.rf * nseq, 5e-3);
  lt_run_free(&ref), lt_run_free(&dec), lt_run_free(&spl);
}

/* ... outputs within 5e-3 too */
static void expect_modes_agree(metrale_device *dev, const metrale_qwen3_config *cfg, uint64_t seed,
                               metrale_part part, const float *x, const uint32_t *lens, uint32_t nseq,
                               uint32_t split) {
  expect_modes_agree_tol(dev, cfg, seed, part, x, lens, nseq, split, 5e-3);
}

Test(modes, decode_and_split_equal_prefill) {
  metrale_device *dev = lt_open_device();
  for (int moe = 0; moe < 2; moe++) {
    metrale_qwen3_config cfg;
    lt_small_config(&cfg, moe);
    const uint32_t lens[] = {23, 1, 9};
    float *x = lt_random_x(33ull * cfg.hidden_size, 11 + moe);
    expect_modes_agree(dev, &cfg, 5, METRALE_PART_LAYER, x, lens, 3, 4);
    free(x);
  }
  metrale_device_destroy(dev);
}

/* lt_small_config with the models' heads: dk = dv = 128, two value heads a key head */
static void heads128_config(metrale_qwen3_config *c, int moe) {
  lt_small_config(c, moe);
  c->hidden_size = 256;
  c->nk = 2, c->nv = 4, c->dk = 128, c->dv = 128;
}

/* The models' heads (dk = dv = 128, two value heads a key head), which no fixture has: on CUDA
 * they take the cluster decode kernel up to batch 4 and the pair kernel from 5 (ops.c,
 * op_gdn_decode_fused; the fixtures' heads take gdn_decode_fused35), each between the layer's
 * early-start gemvs and norms.  Decoded, the whole layer agrees with a prefill of the same
 * tokens; the lengths walk the batch down from 7 to 1. */
Test(modes, heads_of_128_decode_equals_prefill, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  for (int moe = 0; moe < 2; moe++) {
    metrale_qwen3_config cfg;
    heads128_config(&cfg, moe);
    const uint32_t lens[] = {7, 6, 5, 4, 3, 2, 1};
    float *x = lt_random_x(28ull * cfg.hidden_size, 61 + moe);
    metrale_device_launches_reset(dev);
    expect_modes_agree(dev, &cfg, 13, METRALE_PART_LAYER, x, lens, 7, 3);
    lt_expect_launched(dev, METRALE_K_gdn_decode_cluster35, "decode batches 1 to 4 of heads of 128");
    lt_expect_launched(dev, METRALE_K_gdn_decode_pair35, "decode batches 5 to 7 of heads of 128");
    free(x);
  }
  metrale_device_destroy(dev);
}

/* Four value heads a key head of 128 (Qwen3.5-397B-A17B's and -122B-A10B's ratio, 2 key / 8 value
 * heads here): on CUDA the fused kernel up to batch 4, the pair kernel's r = 4 form above.  Decoded,
 * the layer agrees with a prefill of the same tokens; the batch walks down from 6 to 1. */
Test(modes, heads_of_128_r4_decode_equals_prefill, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  metrale_qwen3_config cfg;
  heads128_config(&cfg, 1);
  cfg.nk = 2, cfg.nv = 8;
  const uint32_t lens[] = {6, 5, 4, 3, 2, 1};
  float *x = lt_random_x(21ull * cfg.hidden_size, 67);
  metrale_device_launches_reset(dev);
  expect_modes_agree(dev, &cfg, 17, METRALE_PART_LAYER, x, lens, 6, 3);
  lt_expect_launched(dev, METRALE_K_gdn_decode_fused35, "decode batches 1 to 4 of four value heads a key head");
  lt_expect_launched(dev, METRALE_K_gdn_decode_pair35_r4, "decode batches 5 and 6 of four value heads a key head");
  free(x);
  metrale_device_destroy(dev);
}

/* lt_small_config with the bench's mixer: hidden 2048, 16 key / 32 value heads of 128 */
static void bench_mixer_config(metrale_qwen3_config *c, int moe) {
  lt_small_config(c, moe);
  c->hidden_size = 2048;
  c->nk = 16, c->nv = 32, c->dk = 128, c->dv = 128;
}

/* The bench's layer (hidden 2048, 16 key / 32 value heads of 128, experts 512 wide, top 10, a
 * shared expert 512 wide), with 64 experts instead of 512 to keep the weights at 0.5 GB: the
 * shapes every issue-6 figure is measured at, which no fixture has.  Decoded, the layer agrees
 * with a prefill of the same tokens and with prefill calls of a few tokens.
 * The outputs within the layer's bound against transformers (LAYER_TOL), not 5e-3: at this width
 * the prefill's z projection rounds x to bf16 (gemm_f32in_hi_ws, docs/numerics.md) and its routed
 * experts' outputs are bf16 (op_moe_experts) where decode keeps f32, and a router's near tie can
 * pick another expert (on the cpu the mixer alone differs by 3.4e-3, the layer by 4-8e-3). */
Test(bench_shape, decode_equals_prefill, .timeout = 1200) {
  metrale_device *dev = lt_open_device();
  metrale_qwen3_config cfg;
  bench_mixer_config(&cfg, 1);
  cfg.num_experts = 64, cfg.num_experts_per_tok = 10, cfg.moe_intermediate_size = 512;
  cfg.shared_expert_intermediate_size = 512;
  metrale_device_launches_reset(dev);
  /* two of 64 tokens: the chunked core in the prefill, then decode batch 2; eight short ones:
   * decode batches 8, 8, 8, 5, 2 */
  const uint32_t long_lens[] = {64, 64}, short_lens[] = {5, 5, 4, 4, 4, 3, 3, 3};
  float *x = lt_random_x(128ull * cfg.hidden_size, 83);
  expect_modes_agree_tol(dev, &cfg, 19, METRALE_PART_LAYER, x, long_lens, 2, 48, LAYER_TOL);
  expect_modes_agree_tol(dev, &cfg, 23, METRALE_PART_LAYER, x, short_lens, 8, 3, LAYER_TOL);
  free(x);
  lt_expect_launched(dev, METRALE_K_gdn_decode_cluster35, "decode batch 2 at the bench's heads");
  lt_expect_launched(dev, METRALE_K_gdn_decode_pair35, "decode batches 8 and 5 at the bench's heads");
  lt_expect_launched(dev, METRALE_K_moe_router_topk_rows, "the router of decode batches 8 and 5");
  metrale_device_destroy(dev);
}

/* The bench's mixer at decode batch 8 (one token of each of eight sequences): in_proj (12352 x
 * 2048) and out_proj (2048 x 4096) are large weights.  On a GPU without matrix units (no
 * GPU_CAP_F16_TENSOR, device memory: Vulkan's and HIP's portable shaders) both take the gemv up
 * to 8 rows (ops.c gemv_max_m): the 64x64 tile there is FMAs too, and Vulkan's decode 8 took 491
 * us with it against 158 by gemv on an H100 (docs/bench/h100-2026-12-05-libs/).  Elsewhere 8 rows
 * of these weights go to tiles, never the gemv. */
Test(paths, decode_8_by_gemv_only_without_matrix_units, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  metrale_qwen3_config cfg;
  bench_mixer_config(&cfg, 0);
  const uint32_t flags = metrale_device_backend(dev)->caps.flags;
  const int simt = !(flags & (GPU_CAP_F16_TENSOR | GPU_CAP_HOST_MEMORY));
  const uint32_t lens[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  float *x = lt_random_x(8ull * cfg.hidden_size, 97);
  lt_run r;
  lt_run_init(&r, dev, NULL, &cfg, 29, METRALE_PART_MIXER, x, lens, 8, 8);
  metrale_device_launches_reset(dev);
  lt_run_mode(&r, MODE_DECODE, 0);
  const uint64_t gemv_in = metrale_device_launches(dev, METRALE_K_gemv_f32in);
  if (simt) {
    cr_expect(gemv_in > 0, "in_proj at 8 rows not by gemv_f32in on a GPU without matrix units");
    cr_expect(metrale_device_launches(dev, METRALE_K_gemv_bf16) > 0,
              "out_proj at 8 rows not by gemv_bf16 on a GPU without matrix units");
    cr_expect_eq(metrale_device_launches(dev, METRALE_K_gemm_f32in), 0, "in_proj by the 64x64 tile");
    cr_expect_eq(metrale_device_launches(dev, METRALE_K_gemm_bf16), 0, "out_proj by the 64x64 tile");
  } else {
    cr_expect_eq(gemv_in, 0, "in_proj at 8 rows by gemv where the backend has matrix units or host memory");
  }
  lt_run_free(&r);
  free(x);
  metrale_device_destroy(dev);
}

/* A prefill long and wide enough for the GEMMs' large tiles (on CUDA sm_90a: q|k|v and z on
 * the 128x256 warp-specialised tiles of fp16 x and in_proj, gemm_f16_ws, where the backend
 * has it, else z from bf16(x); 34 tile rows) and for the conv with
 * the l2norm in one pass (C = 2304: 3 x 68 blocks, over 1.5 an SM on 132 SMs) agrees with
 * decoding the same tokens one at a time (gemv, f32 x throughout, the l2norm apart) and with a
 * split of the two.  (On lavapipe it also runs the Vulkan prefill in windows:
 * backends/vulkan/README.md.) */
Test(modes, prefill_on_large_tiles_equals_decode, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 0);
  cfg.hidden_size = 256;
  cfg.nk = 2, cfg.nv = 16, cfg.dk = 64, cfg.dv = 128; /* z: 2048 columns, q|k|v: 2304 */
  const uint32_t lens[] = {34 * 128};
  float *x = lt_random_x((uint64_t)lens[0] * cfg.hidden_size, 29);
  expect_modes_agree(dev, &cfg, 7, METRALE_PART_MIXER, x, lens, 1, 4000);
  free(x);
  metrale_device_destroy(dev);
}

/* Sequences of 32 to 63 tokens on average take the chunked core where its fp16 kernel runs
 * (ops.c CHUNKED_F16_MIN_AVG_TOKENS: on the H200 it beat the sequential kernel from 10-30 tokens
 * a sequence, docs/perf-prefill.md part 22); below 64 they took the sequential kernel before.
 * The cpu serves the fp16 rows with its exact code, so the flag makes it take the same path. */
Test(modes, prefill_of_40_token_sequences_takes_the_fp16_core) {
  metrale_device *dev = lt_open_device();
  metrale_device_backend(dev)->caps.flags |= GPU_CAP_F16_TENSOR; /* as in_proj_beyond_half_range_keeps_f32_x */
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 0);
  const uint32_t lens[] = {40, 41};
  float *x = lt_random_x(81ull * cfg.hidden_size, 53);
  metrale_device_launches_reset(dev);
  expect_modes_agree(dev, &cfg, 29, METRALE_PART_MIXER, x, lens, 2, 1);
  lt_expect_launched(dev, METRALE_K_delta_rule_prefill_chunked_f16, "a prefill of sequences averaging 40 tokens");
  free(x);
  metrale_device_destroy(dev);
}

/* A prefill of the models' heads (dk = dv = 128) on v in half takes the whole-head core where
 * sequences x value heads reach a third of the SMs (ops.c chunked_wh: on the H100 it beat the
 * fp16 kernel from two sequences of 32 heads, not at one), below that the whole-head core with
 * each sequence in segments where they pay (ops.c wh_segments: from 12 chunks a segment; one
 * sequence of 4 heads and 75 chunks on 24 SMs takes 4, a wave of 20 blocks then one of 12), else
 * the fp16 kernel: here 2400 tokens (enough for the half conv's rule at 24 SMs, ops.c
 * conv_l2norm_shape_fits) as two sequences of 4 heads on a backend claiming 24 SMs (8 blocks,
 * 3 x 8 >= 24), then 4800 as one (4 blocks); the launches say which path the ops took (and that
 * the conv hands q and k to the whole-head core's planes, and only to it).  Each again with the whole-head kernel or the segments taken out of
 * the layer's ops (white box) takes the fp16 kernel: outputs and states within the two
 * fp16-class kernels' difference (on the cpu, which serves the rows with one exact code, the
 * same). */
Test(modes, prefill_takes_the_whole_head_core_from_a_third_of_the_sms) {
  metrale_device *dev = lt_open_device();
  gpu_backend *be = metrale_device_backend(dev);
  be->caps.flags |= GPU_CAP_F16_TENSOR; /* as in_proj_beyond_half_range_keeps_f32_x */
  be->caps.sm_count = 24;
  metrale_qwen3_config cfg;
  heads128_config(&cfg, 0);
  float *x = lt_random_x(4800ull * cfg.hidden_size, 61);
  const uint32_t lens2[] = {1300, 1100}, lens1[] = {4800};
  lt_run r[4]; /* two sequences, one; each with the whole-head path taken out */
  static const char *const what[] = {"two sequences of 4 heads on 24 SMs", "one sequence of 4 heads on 24 SMs",
                                     "two sequences, the whole-head kernel taken out",
                                     "one sequence, the segments taken out"};
  const metrale_kernel_id wh = METRALE_K_delta_rule_prefill_chunked_wh, seg = METRALE_K_delta_rule_prefill_chunked_wh_seg,
                          f16 = METRALE_K_delta_rule_prefill_chunked_f16;
  const metrale_kernel_id want[] = {wh, seg, f16, f16};
  for (int i = 0; i < 4; i++) {
    const int one = i % 2;
    lt_run_init(&r[i], dev, NULL, &cfg, 31, METRALE_PART_MIXER, x, one ? lens1 : lens2, one ? 1 : 2, one ? 1 : 2);
    if (i == 2) r[i].c.layer->ops.k[wh] = 0;
    if (i == 3) r[i].c.layer->ops.wh_nseg = 0;
    metrale_device_launches_reset(dev);
    lt_run_mode(&r[i], MODE_PREFILL, 0);
    lt_run_read_states(&r[i]);
    lt_expect_launched(dev, want[i], what[i]);
    const metrale_kernel_id others[] = {wh, seg, f16};
    for (int k = 0; k < 3; k++)
      if (others[k] != want[i])
        cr_expect(metrale_device_launches(dev, others[k]) == 0, "%s launched: %s",
                  metrale_kernel_info_get(others[k])->name, what[i]);
    /* q and k to the core's planes by the conv (metrale_ops_qk_planes_fits) only where the whole-head
     * core reads them; the fp16 kernel's phase 0 reads them from qkv */
    const metrale_kernel_id planes[] = {METRALE_K_conv1d_prefill_l2norm_qkh,
                                        METRALE_K_delta_rule_prefill_chunked_wh_prep_qkh};
    for (int k = 0; k < 2; k++) {
      if (want[i] != f16)
        lt_expect_launched(dev, planes[k], what[i]);
      else
        cr_expect(metrale_device_launches(dev, planes[k]) == 0, "%s launched: %s",
                  metrale_kernel_info_get(planes[k])->name, what[i]);
    }
  }
  for (int i = 0; i < 2; i++) {
    lt_expect_close(i ? "segments' output" : "whole-head output", r[i].c.y, r[i + 2].c.y, r[i].T * cfg.hidden_size,
                    1e-2);
    lt_expect_close(i ? "segments' recurrent state" : "whole-head recurrent state", r[i].rec, r[i + 2].rec,
                    r[i].rf * (i ? 1 : 2), 2e-3); /* a state a sequence */
  }
  for (int i = 0; i < 4; i++) lt_run_free(&r[i]);
  free(x);
  metrale_device_destroy(dev);
}

/* A wide hidden size over few, narrow heads (H = 2048 > 2 P): the prefill's fp16 copy of x
 * (H halves a token) is larger than the decode projection's scratch it borrows (P floats a
 * token).  Prefill agrees with decode, and (white box: the cpu's GEMM copies x before it
 * writes, so an overlap would not show in its results) the copy ends before every other
 * scratch buffer that starts after it. */
Test(modes, wide_hidden_few_heads_prefill_equals_decode) {
  metrale_device *dev = lt_open_device();
  metrale_device_backend(dev)->caps.flags |= GPU_CAP_F16_TENSOR; /* as in_proj_beyond_half_range_keeps_f32_x */
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 0);
  cfg.hidden_size = 2048;
  cfg.nk = 1, cfg.nv = 1, cfg.dk = 128, cfg.dv = 128; /* q|k|v 384 columns: the ws rule on the cpu */
  const uint32_t lens[] = {150, 40};
  float *x = lt_random_x(190ull * cfg.hidden_size, 47);
  expect_modes_agree(dev, &cfg, 17, METRALE_PART_MIXER, x, lens, 2, 1);

  metrale_qwen3_ssm_layer *L = random_layer(dev, &cfg, 17);
  metrale_state_pool *pool = NULL;
  CHECK(metrale_state_pool_create(dev, metrale_state_dims_of(&cfg), 1, &pool));
  const uint32_t T = 190;
  gpu_ptr xd = 0, yd = 0;
  CHECK(metrale_alloc(dev, (uint64_t)T * cfg.hidden_size * 4, &xd));
  CHECK(metrale_alloc(dev, (uint64_t)T * cfg.hidden_size * 2, &yd));
  gpu_backend *be = metrale_device_backend(dev);
  CHECK(be->vt->memset(be, xd, 0, (uint64_t)T * cfg.hidden_size * 4, NULL));
  int32_t slot = 0, cu[2] = {0, (int32_t)T};
  CHECK(metrale_qwen3_ssm_prefill(L, pool, METRALE_PART_MIXER, cu, &slot, 1, xd, yd, NULL));
  CHECK(be->vt->stream_sync(be, NULL));
  const gpu_ptr *buf = (const gpu_ptr *)&L->s, end16 = L->s.x16 + (uint64_t)T * cfg.hidden_size * 2;
  for (size_t i = 0; i < sizeof L->s / sizeof(gpu_ptr); i++)
    cr_expect(buf[i] <= L->s.x16 || buf[i] >= end16, "scratch buffer %zu starts inside the fp16 x of %u tokens", i, T);
  metrale_free(dev, xd);
  metrale_free(dev, yd);
  metrale_state_pool_destroy(pool);
  metrale_qwen3_ssm_layer_destroy(L);
  free(x);
  metrale_device_destroy(dev);
}

/* A weight source that plants one in_proj weight beyond IEEE half's range (bf16(70000) = 70144) into the
 * seeded random weights. */
typedef struct huge_source {
  metrale_weight_source inner;
} huge_source;

static metrale_status huge_upload(void *ctx, metrale_device *dev, const char *name, metrale_dtype to,
                                  const uint64_t *shape, uint32_t ndim, gpu_ptr dst) {
  huge_source *h = ctx;
  METRALE_RETURN_IF_ERROR(h->inner.upload(h->inner.ctx, dev, name, to, shape, ndim, dst));
  if (strcmp(name, "linear_attn.in_proj_qkvz.weight") != 0) return METRALE_OK;
  gpu_backend *be = metrale_device_backend(dev);
  const metrale_bf16 big = metrale_f32_to_bf16(70000.0f);
  METRALE_RETURN_IF_ERROR(be->vt->copy_h2d(be, dst + 2 * 5, &big, 2, NULL)); /* row 0 (q), element 5 */
  return be->vt->stream_sync(be, NULL);
}

/* The layer's description, as a string (free it). */
static char *describe(const metrale_qwen3_ssm_layer *L) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert(f);
  metrale_qwen3_ssm_layer_describe(L, f);
  fclose(f);
  return text;
}

/* A layer of cfg (random weights from seed): where the backend has gemm_f16_ws, the audit must
 * name an fp16 decode projection from at most `most` tokens; else none.  Returns whether the
 * backend has it. */
static int expect_f16_decode_from(metrale_device *dev, const metrale_qwen3_config *cfg, uint64_t seed, unsigned most) {
  gpu_backend *be = metrale_device_backend(dev);
  metrale_qwen3_ssm_layer *L = random_layer(dev, cfg, seed);
  gpu_kernel k16 = 0;
  metrale_status s = be->vt->kernel(be, "gemm", "gemm_f16_ws", &k16);
  const int has16 = s == NULL;
  metrale_status_free(s);
  char *text = describe(L);
  const char *at = strstr(text, "(decode from ");
  if (has16) {
    cr_assert(at != NULL, "the audit names no fp16 decode projection:\n%s", text);
    const unsigned from = (unsigned)strtoul(at + strlen("(decode from "), NULL, 10);
    cr_expect(from >= 1 && from <= most, "the fp16 decode projection starts at %u tokens, past %u:\n%s", from, most,
              text);
  } else {
    cr_expect(at == NULL, "the audit names an fp16 decode projection without gemm_f16_ws:\n%s", text);
    cr_log_info("this backend has no gemm.gemm_f16_ws: decode keeps f32 x");
  }
  free(text);
  metrale_qwen3_ssm_layer_destroy(L);
  return has16;
}

/* Rows of got [n, h] whose relative L2 error against want exceeds tol. */
static uint64_t rows_off(const float *got, const float *want, uint64_t n, uint64_t h, double tol) {
  uint64_t off = 0;
  for (uint64_t i = 0; i < n; i++) off += lt_rel_l2(got + i * h, want + i * h, h) > tol;
  return off;
}

/* The layer's FFN runs in chunks of tokens (ffn.c qwen3_ssm_ffn_chunk), and the audit
 * names the size.  A prefill of a few tokens more than one chunk, in one call, agrees with the same
 * tokens split so that neither call spans two chunks: the second chunk's rows come from and go to
 * their own tokens (no test had taken a prefill past one chunk).  Dense: within 5e-3.  MoE: row by
 * row, since the two runs' mixers differ by roundings, and where a token's router has a near tie
 * that is enough to route it elsewhere (one such row of ~4000 is ~1.5e-2 of the whole output's L2
 * under the H200's fp16 rules); a chunk read or written at the wrong rows moves them all. */
Test(modes, prefill_longer_than_an_ffn_chunk_equals_split, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  for (int moe = 0; moe < 2; moe++) {
    metrale_qwen3_config cfg;
    lt_small_config(&cfg, moe);
    metrale_qwen3_ssm_layer *L = random_layer(dev, &cfg, 31);
    char *text = describe(L);
    const char *at = strstr(text, "in chunks of ");
    cr_assert(at != NULL, "the audit names no FFN chunk:\n%s", text);
    const uint32_t chunk = (uint32_t)strtoul(at + strlen("in chunks of "), NULL, 10);
    cr_assert(chunk >= 1024, "an FFN chunk of %u tokens:\n%s", chunk, text);
    free(text);
    metrale_qwen3_ssm_layer_destroy(L);
    const uint32_t lens[] = {chunk + 100};
    const uint64_t H = cfg.hidden_size;
    float *x = lt_random_x(lens[0] * H, 37 + moe);
    lt_run ref, spl;
    lt_run_init(&ref, dev, NULL, &cfg, 31, METRALE_PART_LAYER, x, lens, 1, 1);
    lt_run_init(&spl, dev, NULL, &cfg, 31, METRALE_PART_LAYER, x, lens, 1, 1);
    lt_run_mode(&ref, MODE_PREFILL, 0);
    lt_run_mode(&spl, MODE_SPLIT, chunk - 50);
    lt_run_read_states(&ref), lt_run_read_states(&spl);
    if (!moe) {
      lt_expect_close("split output", spl.c.y, ref.c.y, ref.T * H, 5e-3);
    } else {
      const uint64_t all = rows_off(spl.c.y, ref.c.y, ref.T, H, 5e-2);
      const uint64_t past = rows_off(spl.c.y + chunk * H, ref.c.y + chunk * H, 100, H, 5e-2);
      cr_log_info("MoE layer: %llu of %llu rows differ by more than 5e-2 (%llu past the first chunk)",
                  (unsigned long long)all, (unsigned long long)ref.T, (unsigned long long)past);
      cr_expect(all <= ref.T / 100 && past <= 5, "MoE layer: %llu of %llu rows, %llu of the 100 past the first "
                "chunk of %u, differ by more than 5e-2", (unsigned long long)all, (unsigned long long)ref.T,
                (unsigned long long)past, chunk);
    }
    lt_expect_close("split recurrent state", spl.rec, ref.rec, ref.rf, 5e-3);
    lt_run_free(&ref), lt_run_free(&spl);
    free(x);
  }
  metrale_device_destroy(dev);
}

/* The scratch sizes the routed experts' y and gu for the largest row count of a chunk
 * (metrale_ops_moe_bytes: bf16 y and no gu where the grouped kernels run), yet smaller calls on
 * the same scratch may take other paths (the per-row kernels below the grouped threshold write
 * f32 y).  White box: for the backend's ops and for the same ops without each kernel that picks a
 * path, every row count up to rmax needs no more than the size for rmax, at the a3b shape (E =
 * 512, threshold 410 rows; the ws kernels' 65535-slot limit lies near 4 M rows, far above) and at
 * E = 8 across its threshold of 7 rows. */
Test(slots, moe_scratch_holds_every_row_count_below_its_own) {
  metrale_device *dev = lt_open_device();
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 1);
  metrale_qwen3_ssm_layer *L = random_layer(dev, &cfg, 3);
  static const metrale_kernel_id drop[] = {METRALE_K_COUNT, METRALE_K_moe_gate_up_silu_sorted_ws,
                                           METRALE_K_moe_down_sorted_ws_bf16, METRALE_K_moe_combine_wide_bf16,
                                           METRALE_K_moe_sort, METRALE_K_moe_gate_up_silu_rows};
  static const uint32_t shapes[][4] = {{512, 10, 2048, 512}, {8, 2, 96, 48}}; /* e, k, h, mi */
  static const uint32_t rmaxes[] = {1, 5, 6, 7, 64, 409, 410, 411, 2000, 40960};
  unsigned checked = 0, bf16_seen = 0;
  for (size_t v = 0; v < sizeof drop / sizeof drop[0]; v++) {
    metrale_ops o = L->ops;
    if (drop[v] != METRALE_K_COUNT) o.k[drop[v]] = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
      const uint32_t e = shapes[sh][0], k = shapes[sh][1], h = shapes[sh][2], mi = shapes[sh][3];
      for (size_t i = 0; i < sizeof rmaxes / sizeof rmaxes[0]; i++) {
        const metrale_moe_bytes most = metrale_ops_moe_bytes(&o, rmaxes[i], k, e, h, mi);
        for (uint32_t r = 1; r <= rmaxes[i]; r++) {
          const metrale_moe_bytes need = metrale_ops_moe_need(&o, r, k, e, h, mi);
          cr_assert(need.y <= most.y && need.gu <= most.gu,
                    "drop %zu, E = %u: %u rows need y %llu / gu %llu bytes, more than the %llu / %llu of %u rows", v,
                    e, r, (unsigned long long)need.y, (unsigned long long)need.gu, (unsigned long long)most.y,
                    (unsigned long long)most.gu, rmaxes[i]);
          bf16_seen += need.y == (uint64_t)r * h * 2u;
          checked++;
        }
      }
    }
  }
  cr_log_info("%u row counts checked, %u of them with bf16 y", checked, bf16_seen);
  metrale_qwen3_ssm_layer_destroy(L);
  metrale_device_destroy(dev);
}

/* A decode batch that fills gemm_f16_ws's 128x256 tiles for all of in_proj (P = 4640 columns,
 * 19 tiles wide: from 385 tokens on an H200's 132 SMs) projects on fp16 x (mixer.c), b and a
 * included; it agrees with the prefill and the split as the f32-x decode does, and the audit
 * names the path from a batch no larger than this one (the test claims GPU_CAP_F16_TENSOR, as
 * in_proj_beyond_half_range_keeps_f32_x does).  dv = 16 keeps 385 slots of state small; it
 * also keeps the fused decode kernels out, so the split, which writes the bytes the fp16 x
 * borrowed, runs after the projection. */
Test(modes, large_decode_batch_on_f16_proj, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  gpu_backend *be = metrale_device_backend(dev);
  be->caps.flags |= GPU_CAP_F16_TENSOR;
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 0);
  cfg.hidden_size = 256;
  cfg.nk = 16, cfg.nv = 16, cfg.dk = 128, cfg.dv = 16; /* C = 4352, z = 256, P = 4640 */
  enum { NSEQ = 385 };
  uint32_t lens[NSEQ];
  for (uint32_t i = 0; i < NSEQ; i++) lens[i] = 2;

  const int has16 = expect_f16_decode_from(dev, &cfg, 53, NSEQ);

  float *x = lt_random_x(2ull * NSEQ * cfg.hidden_size, 59);
  expect_modes_agree(dev, &cfg, 61, METRALE_PART_MIXER, x, lens, NSEQ, 1);
  /* The conv state holds the projections' q|k|v rows as they were: a prefill of these 770
   * tokens projects them on fp16 x too (white box: q|k|v alone is 17 tiles wide), by the same
   * sums, so the decode's equal it bit for bit on the fp16 path and differ on f32 x.  Where
   * the prefill hands mixed to the conv in IEEE half (gemm_f16_ws_cols3q: the cpu, whose few
   * "SMs" the conv's pass fills), its state holds those sums rounded to half: the decode's,
   * rounded so, equal it on the fp16 path (on f32 x most still differ). */
  lt_run pre, dec;
  lt_run_init(&pre, dev, NULL, &cfg, 61, METRALE_PART_MIXER, x, lens, NSEQ, NSEQ);
  lt_run_init(&dec, dev, NULL, &cfg, 61, METRALE_PART_MIXER, x, lens, NSEQ, NSEQ);
  lt_run_mode(&pre, MODE_PREFILL, 0);
  lt_run_mode(&dec, MODE_DECODE, 0);
  lt_run_read_states(&pre), lt_run_read_states(&dec);
  const metrale_qwen3_ssm_layer *PL = pre.c.layer;
  const uint32_t T = 2 * NSEQ, C = 2 * cfg.nk * cfg.dk + cfg.nv * cfg.dv;
  const int half = PL->w.in_proj16 && qwen3_ssm_one_in_proj(&PL->ops, &PL->d, T) &&
                   metrale_ops_mixed_half_fits(&PL->ops, 0, 0, T, C, cfg.dk);
  int same = 1;
  for (uint64_t i = 0; i < pre.cf * NSEQ && same; i++)
    same = pre.conv[i] == (half ? metrale_f16_to_f32(metrale_f32_to_f16(dec.conv[i])) : dec.conv[i]);
  if (has16) cr_expect(same, "the decode's conv state is not the fp16 prefill's: its projection did not run on fp16 x");
  lt_run_free(&pre), lt_run_free(&dec);
  free(x);
  metrale_device_destroy(dev);
}

/* Decode batches below the 128x256 pairs project on fp16 x too, by the 2-slice split forms
 * (gemm_f16_ws64_splitk2 to 64 rows, gemm_f16_ws_splitk2 to 128; mixer.c, docs/numerics.md),
 * and agree with the prefill and the split as the f32-x decode does.  P = 6176 columns (25
 * tiles wide) and K = 1024 give an H200's 132 SMs 50 blocks at either size; the audit must put
 * the fp16 projection's start at or below the smaller batch (the test claims
 * GPU_CAP_F16_TENSOR, as the tests above do).  72 sequences: the first step decodes 72 tokens,
 * the next two 40. */
Test(modes, small_decode_batches_on_f16_proj, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  gpu_backend *be = metrale_device_backend(dev);
  be->caps.flags |= GPU_CAP_F16_TENSOR;
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 0);
  cfg.hidden_size = 1024;
  cfg.nk = 16, cfg.nv = 16, cfg.dk = 128, cfg.dv = 64; /* C = 5120, z = 1024, P = 6176 */
  enum { NSEQ = 72, NLONG = 40 };
  uint32_t lens[NSEQ];
  for (uint32_t i = 0; i < NSEQ; i++) lens[i] = i < NLONG ? 3 : 1;

  expect_f16_decode_from(dev, &cfg, 67, NLONG);

  uint64_t T = 0;
  for (uint32_t i = 0; i < NSEQ; i++) T += lens[i];
  float *x = lt_random_x(T * cfg.hidden_size, 71);
  expect_modes_agree(dev, &cfg, 73, METRALE_PART_MIXER, x, lens, NSEQ, 2);
  free(x);
  metrale_device_destroy(dev);
}

/* Where the backend runs the prefill's in_proj on IEEE half operands (gemm_f16_ws_cols3, or
 * q|k|v and z on gemm_f16_ws; the
 * test claims GPU_CAP_F16_TENSOR for the backend, so that the cpu, which has the kernels but
 * not their speed, takes that path too), a
 * layer whose in_proj holds a weight past half's range must keep f32 x there (the audit says
 * why) instead of projecting through an infinity: its prefill stays finite.  The same layer
 * without that weight takes the half path, so the check is not vacuous.  4352 tokens: enough
 * 128x256 tiles for the ws rule on an H200 as on the cpu. */
Test(modes, in_proj_beyond_half_range_keeps_f32_x, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  gpu_backend *be = metrale_device_backend(dev);
  be->caps.flags |= GPU_CAP_F16_TENSOR; /* the cpu has the kernels but leaves this clear: the paths are the point here */
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 0);
  cfg.hidden_size = 256;
  /* q|k|v: 1024 columns, z: 512.  q|k|v needs 2 x 32 x 4 >= sm_count 128x256 tiles at 4096 rows to
   * take the wgmma tiles at all (ops.c use_ws; H200: 132 SMs): 512 columns stayed on the t128 tile
   * there, and the test failed on the H200 for that reason alone. */
  cfg.nk = 4, cfg.nv = 4, cfg.dk = 64, cfg.dv = 128;
  metrale_random_source rs = {41};
  huge_source hs = {metrale_weight_source_random(&rs)};
  metrale_weight_source huge = {huge_upload, &hs};
  metrale_qwen3_ssm_layer *plain = NULL, *odd = NULL;
  CHECK(metrale_qwen3_ssm_layer_create(dev, &cfg, 0, metrale_weight_source_random(&rs), &plain));
  CHECK(metrale_qwen3_ssm_layer_create(dev, &cfg, 0, huge, &odd));
  gpu_kernel k16 = 0, k3 = 0, kba = 0;
  metrale_status s = be->vt->kernel(be, "gemm", "gemm_f16_ws", &k16);
  const int has16 = s == NULL;
  metrale_status_free(s);
  s = be->vt->kernel(be, "gemm", "gemm_f16_ws_cols3", &k3);
  const int has3 = s == NULL;
  metrale_status_free(s);
  s = be->vt->kernel(be, "gdn", "gates_ba", &kba);
  const int hasba = s == NULL;
  metrale_status_free(s);
  /* with gemm_f16_ws_cols3 (and gates_ba) the whole in_proj is one launch on fp16 x (its
   * cols3q form, mixed in half, where the half conv takes the 4096 tokens the audit names) */
  const char *path16 = has3 && hasba ? "gemm_f16_ws_cols3 (one launch" : "gemm_f16_ws (fp16 x";
  char *dp = describe(plain), *dodd = describe(odd);
  if (has16) {
    cr_expect(strstr(dp, path16) != NULL || (has3 && hasba && strstr(dp, "gemm_f16_ws_cols3q (one launch") != NULL),
              "the plain layer does not take %s:\n%s", path16, dp);
    cr_expect(strstr(dodd, "no fp16 in_proj in this layer: in_proj row 0 holds 70144") != NULL,
              "the layer with 70000 in in_proj does not say it keeps f32 x:\n%s", dodd);
    cr_expect(strstr(dodd, "gemm_f16_ws") == NULL, "the layer with 70000 in in_proj takes an fp16 GEMM:\n%s", dodd);
  } else {
    cr_log_info("this backend has no gemm.gemm_f16_ws: both layers keep f32 x");
  }
  free(dp), free(dodd);

  const uint32_t T = 4352;
  const uint64_t n = (uint64_t)T * cfg.hidden_size;
  metrale_state_pool *pool = NULL;
  CHECK(metrale_state_pool_create(dev, metrale_state_dims_of(&cfg), 1, &pool));
  gpu_ptr x = 0, y = 0;
  CHECK(metrale_alloc(dev, n * 2, &x));
  CHECK(metrale_alloc(dev, n * 2, &y));
  float *fx = lt_random_x(n, 43);
  metrale_bf16 *hx = malloc(n * 2);
  cr_assert(hx);
  for (uint64_t i = 0; i < n; i++) hx[i] = metrale_f32_to_bf16(fx[i]);
  CHECK(be->vt->copy_h2d(be, x, hx, n * 2, NULL));
  int32_t slot = 0, cu[2] = {0, (int32_t)T};
  CHECK(metrale_qwen3_ssm_prefill(odd, pool, METRALE_PART_LAYER, cu, &slot, 1, x, y, NULL));
  CHECK(be->vt->copy_d2h(be, hx, y, n * 2, NULL));
  CHECK(be->vt->stream_sync(be, NULL));
  uint64_t bad = 0;
  for (uint64_t i = 0; i < n; i++) bad += !isfinite(metrale_bf16_to_f32(hx[i]));
  cr_expect_eq(bad, 0, "%llu of %llu outputs are not finite", (unsigned long long)bad, (unsigned long long)n);
  const uint64_t cf = metrale_state_pool_conv_floats(pool), rf = metrale_state_pool_recurrent_floats(pool);
  float *st = malloc((cf + rf) * sizeof *st);
  cr_assert(st);
  CHECK(metrale_state_pool_read(pool, 0, st, st + cf));
  bad = 0;
  for (uint64_t i = 0; i < cf + rf; i++) bad += !isfinite(st[i]);
  cr_expect_eq(bad, 0, "%llu of the state's %llu values are not finite", (unsigned long long)bad,
               (unsigned long long)(cf + rf));
  free(st), free(fx), free(hx);
  metrale_free(dev, x);
  metrale_free(dev, y);
  metrale_state_pool_destroy(pool);
  metrale_qwen3_ssm_layer_destroy(plain);
  metrale_qwen3_ssm_layer_destroy(odd);
  metrale_device_destroy(dev);
}

/* Two layers of the same weights prefill the same 12800 tokens in two sequences, one with kernel
 * `drop` taken out of its kernel table (white box).  Both layers' mixed and qkv scratch start as
 * NaN, so a conv that reads mixed as f32 where the GEMM wrote halves (its second half of bytes
 * is never written), a core that reads unwritten q, k or v, or one that reads vh where the conv
 * did not write it, fails outright.  The fp16 tiles are claimed (as
 * in_proj_beyond_half_range_keeps_f32_x does) so that the cpu takes the paths too.  200 blocks
 * of 64 tokens of the 512 channels, enough for 132 SMs.  conv_rounded: each conv state value of
 * the first layer is the second's rounded to half (else equal).  Returns 0 (with a log line)
 * where the backend does not take the first layer's path (taken(), on a layer). */
/* The layer shape of the fp16-path tests below: C = 512 channels, hidden 256 (heads of dk: 64; 128,
 * C = 1024, for the whole-head core's paths). */
static void fp16_path_config(metrale_qwen3_config *cfg, uint32_t dk) {
  lt_small_config(cfg, 0);
  cfg->hidden_size = 256;
  cfg->nk = 2, cfg->nv = 4, cfg->dk = dk, cfg->dv = dk;
}

typedef int (*path_taken)(const metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S);
static int half_pair_dk(metrale_kernel_id drop, path_taken taken, const char *what, int conv_rounded, double tol_y,
                        double tol_state, uint32_t dk) {
  metrale_device *dev = lt_open_device();
  gpu_backend *be = metrale_device_backend(dev);
  const uint32_t flags = be->caps.flags;
  be->caps.flags |= GPU_CAP_F16_TENSOR;
  metrale_qwen3_config cfg;
  fp16_path_config(&cfg, dk);
  const uint32_t lens[] = {9000, 3800}, C = 2 * cfg.nk * cfg.dk + cfg.nv * cfg.dv, T = lens[0] + lens[1];
  float *x = lt_random_x((uint64_t)T * cfg.hidden_size, 47);
  lt_run half, full;
  lt_run_init(&half, dev, NULL, &cfg, 17, METRALE_PART_MIXER, x, lens, 2, 2);
  lt_run_init(&full, dev, NULL, &cfg, 17, METRALE_PART_MIXER, x, lens, 2, 2);
  CHECK(qwen3_ssm_scratch_reserve(half.c.layer, T, 2));
  CHECK(qwen3_ssm_delta_ws_reserve(half.c.layer, T, 2));
  const int ran = taken(half.c.layer, T, 2);
  if (!ran) {
    cr_log_info("this backend does not take %s here: nothing to check", what);
  } else {
    full.c.layer->ops.k[drop] = 0;
    CHECK(qwen3_ssm_scratch_reserve(full.c.layer, T, 2));
    CHECK(qwen3_ssm_delta_ws_reserve(full.c.layer, T, 2));
    cr_expect(!taken(full.c.layer, T, 2), "without %s the layer still takes %s", metrale_kernel_info_get(drop)->name,
              what);
    const uint64_t bytes = (uint64_t)T * C * 4;
    unsigned char *nan = malloc(bytes);
    cr_assert(nan);
    memset(nan, 0xff, bytes); /* f32 NaN (and half NaN) */
    lt_run *runs[] = {&half, &full};
    for (int i = 0; i < 2; i++) {
      CHECK(be->vt->copy_h2d(be, runs[i]->c.layer->s.qkv, nan, bytes, NULL));
      CHECK(be->vt->copy_h2d(be, runs[i]->c.layer->s.mixed, nan, bytes, NULL));
    }
    CHECK(be->vt->sync(be));
    free(nan);
    lt_run_mode(&half, MODE_PREFILL, 0);
    lt_run_mode(&full, MODE_PREFILL, 0);
    lt_run_read_states(&half), lt_run_read_states(&full);
    lt_expect_close("output", half.c.y, full.c.y, (uint64_t)T * cfg.hidden_size, tol_y);
    lt_expect_close("recurrent state", half.rec, full.rec, half.rf * 2, tol_state);
    uint64_t off = 0;
    for (uint64_t i = 0; i < half.cf * 2; i++)
      off += half.conv[i] != (conv_rounded ? metrale_f16_to_f32(metrale_f32_to_f16(full.conv[i])) : full.conv[i]);
    cr_expect_eq(off, 0, "%llu of %llu conv state values are not the other path's%s", (unsigned long long)off,
                 (unsigned long long)(half.cf * 2), conv_rounded ? " rounded to half" : "");
  }
  be->caps.flags = flags;
  lt_run_free(&half), lt_run_free(&full);
  free(x);
  metrale_device_destroy(dev);
  return ran;
}
static int half_pair(metrale_kernel_id drop, path_taken taken, const char *what, int conv_rounded, double tol_y,
                     double tol_state) {
  return half_pair_dk(drop, taken, what, conv_rounded, tol_y, tol_state, 64);
}

/* the layer's own choices (mixer.c), for its scratch and workspace */
static int mixed_half_taken(const metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S) {
  (void)S;
  return L->w.in_proj16 && qwen3_ssm_one_in_proj(&L->ops, &L->d, T) &&
         metrale_ops_mixed_half_fits(&L->ops, L->s.qkv, L->s.mixed, T, L->d.C, L->d.dk);
}
static int v_half_taken(const metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S) {
  return mixed_half_taken(L, T, S) && metrale_ops_v_half_fits(&L->ops, L->s.vh, L->delta_ws, T, S, L->d.dk, L->d.dv);
}
static int qk_planes_taken(const metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S) {
  return v_half_taken(L, T, S) &&
         metrale_ops_qk_planes_fits(&L->ops, L->s.o, L->s.vh, L->delta_ws, T, S, L->d.nv, L->d.dk, L->d.dv);
}

/* A prefill long enough for the conv's pass at 1.5 blocks an SM takes mixed from in_proj to the
 * conv in IEEE half (gemm_f16_ws_cols3q, then conv1d_prefill_l2norm_xh or _xhv; ops
 * metrale_ops_mixed_half_fits).  Without the half conv (conv1d_prefill_l2norm_xh taken out) the
 * layer runs mixed in f32 through gemm_f16_ws_cols3 and conv1d_prefill_l2norm, and v in f32 to
 * the core: the two differ by mixed's rounding to half (2^-12 relative), v's where the first
 * hands v to the core in half too, and the core's own rounding of what follows.  The conv states,
 * which hold the last inputs widened from half, must equal the f32 path's rounded to half. */
Test(modes, prefill_mixed_half_equals_f32_mixed, .timeout = 600) {
  half_pair(METRALE_K_conv1d_prefill_l2norm_xh, mixed_half_taken, "half mixed", 1, 1e-2, 2e-3);
}

/* Where the prefill's mixed is half and the core is the fp16 chunked kernel, the conv hands v to
 * the core's phase 0 in IEEE half (conv1d_prefill_l2norm_xhv, then
 * delta_rule_prefill_chunked_f16_prep_vh; ops metrale_ops_v_half_fits).  Without the xhv conv the
 * same layer writes v in f32 to qkv and phase 0 reads it there: the two differ by v's rounding
 * to half (2^-12 relative) and what follows from it; their conv states are the same inputs. */
Test(modes, prefill_v_half_equals_f32_v, .timeout = 600) {
  half_pair(METRALE_K_conv1d_prefill_l2norm_xhv, v_half_taken, "v in half to the fp16 core", 0, 1e-2, 2e-3);
}

/* Where the core is the whole-head kernel (heads of 128), the conv writes q and k in IEEE half
 * straight into its q/k planes (conv1d_prefill_l2norm_qkh, then
 * delta_rule_prefill_chunked_wh_prep_qkh; ops metrale_ops_qk_planes_fits), where without the qkh conv
 * it writes them in f32 to qkv and phase 0 rounds them to half into the same planes: the same halves
 * from the same f32 values, so the two layers' outputs and states are the same bits. */
Test(modes, prefill_qk_planes_equal_f32_qk, .timeout = 600) {
  half_pair_dk(METRALE_K_conv1d_prefill_l2norm_qkh, qk_planes_taken, "q and k in half to the whole-head core's planes",
               0, 0.0, 0.0, 128);
}

/* Where the mixer reads its input only as fp16 (the prefill's one in_proj; a decode batch's
 * in_proj on fp16 x), the layer's input norm writes it straight in fp16 (norm.rmsnorm_f16,
 * layer.c).  Its values are rmsnorm_f32's rounded as f32_to_f16 rounds them, so the layer's
 * outputs and states are the same bits as with the kernel taken out of the layer's table
 * (white box: rmsnorm_f32, then f32_to_f16 in the mixer).  A 12800-token prefill in two
 * sequences, and the smallest decode batch (up to 4096) the mixer projects on fp16 x, two
 * steps; the fp16 tiles claimed as in in_proj_beyond_half_range_keeps_f32_x. */
static int same_bits(const float *a, const float *b, uint64_t n) { return memcmp(a, b, n * sizeof *a) == 0; }
Test(modes, input_norm_f16_equals_norm_then_f16, .timeout = 600) {
  metrale_device *dev = lt_open_device();
  gpu_backend *be = metrale_device_backend(dev);
  const uint32_t flags = be->caps.flags;
  be->caps.flags |= GPU_CAP_F16_TENSOR;
  metrale_qwen3_config cfg;
  fp16_path_config(&cfg, 64);
  static uint32_t lens[4096];
  for (int decode = 0; decode < 2; decode++) {
    uint32_t nseq = 2, T = 12800;
    lens[0] = 9000, lens[1] = 3800;
    if (decode) { /* the smallest batch on fp16 x, found on a layer of this shape */
      metrale_qwen3_ssm_layer *probe = random_layer(dev, &cfg, 23);
      for (T = 1; T <= 4096 && !qwen3_ssm_mixer_takes_x16(probe, T, 1); T++) {
      }
      metrale_qwen3_ssm_layer_destroy(probe);
      if (T > 4096) {
        cr_log_info("this backend projects no decode batch up to 4096 on fp16 x here: decode not checked");
        break;
      }
      nseq = T;
      for (uint32_t i = 0; i < nseq; i++) lens[i] = 2;
      T = 2 * nseq;
    }
    float *x = lt_random_x((uint64_t)T * cfg.hidden_size, 29 + decode);
    lt_run fused, plain;
    lt_run_init(&fused, dev, NULL, &cfg, 23, METRALE_PART_LAYER, x, lens, nseq, nseq);
    lt_run_init(&plain, dev, NULL, &cfg, 23, METRALE_PART_LAYER, x, lens, nseq, nseq);
    const uint32_t call_tokens = decode ? nseq : T;
    if (!metrale_ops_has_rmsnorm_f16(&fused.c.layer->ops) ||
        !qwen3_ssm_mixer_takes_x16(fused.c.layer, call_tokens, decode)) {
      cr_log_info("this backend does not take norm.rmsnorm_f16 for the %s here: nothing to check",
                  decode ? "decode" : "prefill");
    } else {
      plain.c.layer->ops.k[METRALE_K_rmsnorm_f16] = 0;
      cr_expect(!metrale_ops_has_rmsnorm_f16(&plain.c.layer->ops), "the kernel is still in the table");
      lt_run_mode(&fused, decode ? MODE_DECODE : MODE_PREFILL, 0);
      lt_run_mode(&plain, decode ? MODE_DECODE : MODE_PREFILL, 0);
      lt_run_read_states(&fused), lt_run_read_states(&plain);
      const char *what = decode ? "decode" : "prefill";
      cr_expect(same_bits(fused.c.y, plain.c.y, (uint64_t)T * cfg.hidden_size), "%s outputs differ", what);
      cr_expect(same_bits(fused.conv, plain.conv, fused.cf * nseq), "%s conv states differ", what);
      cr_expect(same_bits(fused.rec, plain.rec, fused.rf * nseq), "%s recurrent states differ", what);
    }
    lt_run_free(&fused), lt_run_free(&plain);
    free(x);
  }
  be->caps.flags = flags;
  metrale_device_destroy(dev);
}

/* Decode batches wide and deep enough for the projections' split-K and narrow tiles (on CUDA
 * sm_90a with 132 SMs, as for the 80B-A3B mixer: in_proj 9280 x 2048, out_proj 2048 x 2560;
 * batch 8: both on 64x256 tiles with K in 2 / 8 slices, batch 100: 128x256 tiles with K in 2 /
 * 8, batch 200: in_proj on 128x192 tiles, out_proj with K in 4 (the test prints the paths); the
 * prefills of the same tokens take other kernels) agree with prefill and with a split,
 * sequence by sequence and in the states.  dv 80 keeps 200 slots at 1.3 MB each.  (No
 * Criterion .timeout: with it, LeakSanitizer found 48 bytes of Criterion's own lost in the
 * runner of the ASAN pass's full layer suite, reproducibly; ctest's timeout bounds it.) */
Test(modes, decode_batches_on_split_tiles_equal_prefill) {
  metrale_device *dev = lt_open_device();
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 0);
  cfg.hidden_size = 2048;
  cfg.nk = 16, cfg.nv = 32, cfg.dk = 128, cfg.dv = 80;
  static const uint32_t batches[] = {8, 100, 200};
  static uint32_t lens[200];
  for (uint32_t i = 0; i < 200; i++) lens[i] = 2;
  float *x = lt_random_x(400ull * cfg.hidden_size, 31);
  CHECK(metrale_qwen3_ssm_describe_shape(dev, &cfg, 0, stderr)); /* which kernels the batches take */
  for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
    expect_modes_agree(dev, &cfg, 13, METRALE_PART_MIXER, x, lens, batches[b], 1);
  free(x);
  metrale_device_destroy(dev);
}

Test(modes, batch_equals_each_sequence_alone) {
  metrale_device *dev = lt_open_device();
  metrale_qwen3_config cfg;
  lt_small_config(&cfg, 1);
  const uint32_t lens[] = {7, 30, 2, 12};
  const uint64_t H = cfg.hidden_size;
  float *x = lt_random_x(51 * H, 3);
  for (int mode = 0; mode < 2; mode++) {
    run_mode m = mode ? MODE_DECODE : MODE_PREFILL;
    lt_run all;
    lt_run_init(&all, dev, NULL, &cfg, 9, METRALE_PART_LAYER, x, lens, 4, 4);
    lt_run_mode(&all, m, 0);
    lt_run_read_states(&all);
    uint64_t at = 0;
    for (uint32_t i = 0; i < 4; i++) {
      lt_run one;
      lt_run_init(&one, dev, NULL, &cfg, 9, METRALE_PART_LAYER, x + at * H, &lens[i], 1, 1);
      lt_run_mode(&one, m, 0);
      lt_run_read_states(&one);
      /* GPU GEMMs pick their kernel by M (gemv below 17 rows, tensor-core tiles above), so a
       * sequence alone and the same sequence in a batch are summed in different orders;
       * 5e-3 is the same bound as decode vs prefill (the CPU is bit-identical) */
      lt_expect_close("batched output vs alone", all.c.y + at * H, one.c.y, lens[i] * H, 5e-3);
      lt_expect_close("batched state vs alone", all.rec + all.rf * i, one.rec, one.rf, 5e-3);
      lt_expect_close("batched conv state vs alone", all.conv + all.cf * i, one.conv, one.cf, 5e-3);
      lt_run_free(&one);
      at += lens[i];
    }
    lt_run_free(&all);
  }
  free(x);
  metrale_device_destroy(dev);
}

/* Direct library calls with explicit slots (the driver uses slot i for sequence i). */
typedef struct slot_env {
  metrale_device *dev;
  gpu_backend *be;
  metrale_qwen3_config cfg;
  metrale_qwen3_ssm_layer *layer;
  metrale_state_pool *pool;
  gpu_ptr x, y;
  uint64_t cf, rf;
  uint32_t n_slots;
} slot_env;

/* cfg: the layer's shape, NULL for lt_small_config's MoE layer */
static void env_init_shape(slot_env *e, uint32_t n_slots, uint32_t max_tokens, const metrale_qwen3_config *cfg) {
  memset(e, 0, sizeof *e);
  e->dev = lt_open_device();
  e->be = metrale_device_backend(e->dev);
  if (cfg)
    e->cfg = *cfg;
  else
    lt_small_config(&e->cfg, 1);
  metrale_random_source rs = {21};
  CHECK(metrale_qwen3_ssm_layer_create(e->dev, &e->cfg, 0, metrale_weight_source_random(&rs), &e->layer));
  CHECK(metrale_state_pool_create(e->dev, metrale_state_dims_of(&e->cfg), n_slots, &e->pool));
  e->n_slots = n_slots;
  e->cf = metrale_state_pool_conv_floats(e->pool);
  e->rf = metrale_state_pool_recurrent_floats(e->pool);
  uint64_t bytes = (uint64_t)max_tokens * e->cfg.hidden_size * 2;
  CHECK(metrale_alloc(e->dev, bytes, &e->x));
  CHECK(metrale_alloc(e->dev, bytes, &e->y));
  metrale_bf16 *hx = malloc(bytes);
  float *fx = lt_random_x(bytes / 2, 77);
  for (uint64_t i = 0; i < bytes / 2; i++) hx[i] = metrale_f32_to_bf16(fx[i]);
  CHECK(e->be->vt->copy_h2d(e->be, e->x, hx, bytes, NULL));
  CHECK(e->be->vt->stream_sync(e->be, NULL));
  free(hx);
  free(fx);
}

static void env_init(slot_env *e, uint32_t n_slots, uint32_t max_tokens) { env_init_shape(e, n_slots, max_tokens, NULL); }

static void env_free(slot_env *e) {
  metrale_free(e->dev, e->x);
  metrale_free(e->dev, e->y);
  metrale_state_pool_destroy(e->pool);
  metrale_qwen3_ssm_layer_destroy(e->layer);
  metrale_device_destroy(e->dev);
}

/* Fills every slot with a distinct pattern, so untouched slots can be checked bit for bit. */
static void fill_pattern(slot_env *e) {
  uint64_t n = (e->cf + e->rf) * e->n_slots;
  float *v = lt_random_x(n, 1234);
  for (uint64_t i = 0; i < n; i++) v[i] *= 0.05f;
  CHECK(e->be->vt->copy_h2d(e->be, metrale_state_pool_conv(e->pool), v, e->cf * e->n_slots * 4, NULL));
  CHECK(e->be->vt->copy_h2d(e->be, metrale_state_pool_recurrent(e->pool), v + e->cf * e->n_slots,
                            e->rf * e->n_slots * 4, NULL));
  CHECK(e->be->vt->stream_sync(e->be, NULL));
  free(v);
}

/* Snapshot of all slots: conv then recurrent, slot after slot. */
static float *snapshot(slot_env *e) {
  float *v = malloc((e->cf + e->rf) * e->n_slots * sizeof *v);
  for (uint32_t s = 0; s < e->n_slots; s++)
    CHECK(metrale_state_pool_read(e->pool, (int32_t)s, v + (e->cf + e->rf) * s, v + (e->cf + e->rf) * s + e->cf));
  return v;
}

static int slot_equal(slot_env *e, const float *a, const float *b, uint32_t s) {
  uint64_t per = e->cf + e->rf;
  return memcmp(a + per * s, b + per * s, per * sizeof(float)) == 0;
}

Test(slots, reused_slot_behaves_as_fresh) {
  slot_env e;
  env_init(&e, 3, 64);
  const uint64_t row = e.cfg.hidden_size * 2;
  /* sequence A (rows 0..19) in slot 2, then slot 2 reset and sequence B (rows 20..39) */
  int32_t slot2 = 2, slot0 = 0, cu[2] = {0, 20};
  CHECK(metrale_qwen3_ssm_prefill(e.layer, e.pool, METRALE_PART_LAYER, cu, &slot2, 1, e.x, e.y, NULL));
  CHECK(metrale_state_pool_reset(e.pool, &slot2, 1));
  CHECK(metrale_qwen3_ssm_prefill(e.layer, e.pool, METRALE_PART_LAYER, cu, &slot2, 1, e.x + 20 * row, e.y, NULL));
  float *reused = snapshot(&e);
  /* sequence B in slot 0, never used before */
  CHECK(metrale_qwen3_ssm_prefill(e.layer, e.pool, METRALE_PART_LAYER, cu, &slot0, 1, e.x + 20 * row,
                                  e.y + 20 * row, NULL));
  float *fresh = snapshot(&e);
  uint64_t per = e.cf + e.rf;
  cr_expect(memcmp(reused + per * 2, fresh + per * 0, per * sizeof(float)) == 0,
            "a reset, reused slot must end exactly like a fresh one");
  metrale_bf16 *ya = malloc(20 * row), *yb = malloc(20 * row);
  CHECK(e.be->vt->copy_d2h(e.be, ya, e.y, 20 * row, NULL));
  CHECK(e.be->vt->copy_d2h(e.be, yb, e.y + 20 * row, 20 * row, NULL));
  CHECK(e.be->vt->stream_sync(e.be, NULL));
  cr_expect(memcmp(ya, yb, 20 * row) == 0, "outputs of the reused and the fresh slot differ");
  free(ya), free(yb), free(reused), free(fresh);
  env_free(&e);
}

Test(slots, padding_slot_is_never_touched) {
  slot_env e;
  env_init(&e, 3, 64);
  fill_pattern(&e);
  float *before = snapshot(&e);
  int32_t dec_slots[3] = {-1, 1, -1};
  CHECK(metrale_qwen3_ssm_decode(e.layer, e.pool, METRALE_PART_LAYER, dec_slots, 3, e.x, e.y, NULL));
  int32_t pre_slots[2] = {-1, 2}, cu[3] = {0, 5, 9};
  CHECK(metrale_qwen3_ssm_prefill(e.layer, e.pool, METRALE_PART_LAYER, cu, pre_slots, 2, e.x, e.y, NULL));
  float *after = snapshot(&e);
  cr_expect(slot_equal(&e, before, after, 0), "slot 0 was not named but changed");
  cr_expect(!slot_equal(&e, before, after, 1), "slot 1 was decoded but did not change");
  cr_expect(!slot_equal(&e, before, after, 2), "slot 2 was prefilled but did not change");
  free(before), free(after);
  env_free(&e);
}

Test(slots, failed_call_leaves_every_slot_unchanged) {
  slot_env e;
  env_init(&e, 3, 64);
  fill_pattern(&e);
  float *before = snapshot(&e);
  int32_t dup[2] = {1, 1}, out_of_range[2] = {0, 3}, negative[1] = {-2};
  int32_t ok_slots[2] = {0, 1}, bad_cu[3] = {0, 6, 4}, bad_start[3] = {1, 3, 6};
  metrale_status s;
  s = metrale_qwen3_ssm_decode(e.layer, e.pool, METRALE_PART_LAYER, dup, 2, e.x, e.y, NULL);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT, "duplicate slot accepted");
  s = metrale_qwen3_ssm_decode(e.layer, e.pool, METRALE_PART_MIXER, out_of_range, 2, e.x, e.y, NULL);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT, "slot out of range accepted");
  s = metrale_qwen3_ssm_decode(e.layer, e.pool, METRALE_PART_LAYER, negative, 1, e.x, e.y, NULL);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT, "slot -2 accepted");
  s = metrale_qwen3_ssm_prefill(e.layer, e.pool, METRALE_PART_LAYER, bad_cu, ok_slots, 2, e.x, e.y, NULL);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT, "decreasing cu_seqlens accepted");
  s = metrale_qwen3_ssm_prefill(e.layer, e.pool, METRALE_PART_LAYER, bad_start, ok_slots, 2, e.x, e.y, NULL);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT, "cu_seqlens[0] != 0 accepted");
  s = metrale_qwen3_ssm_decode(e.layer, e.pool, METRALE_PART_LAYER, ok_slots, 2, e.x, e.x, NULL);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT, "aliased input/output accepted");
  /* a pool made for another shape */
  metrale_qwen3_config other = e.cfg;
  other.dv = 16;
  metrale_state_pool *wrong = NULL;
  CHECK(metrale_state_pool_create(e.dev, metrale_state_dims_of(&other), 3, &wrong));
  s = metrale_qwen3_ssm_decode(e.layer, wrong, METRALE_PART_LAYER, ok_slots, 2, e.x, e.y, NULL);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT, "mismatched pool accepted");
  metrale_state_pool_destroy(wrong);
  float *after = snapshot(&e);
  for (uint32_t k = 0; k < 3; k++) cr_expect(slot_equal(&e, before, after, k), "slot %u changed by a failed call", k);
  free(before), free(after);
  env_free(&e);
}

/* The outputs y [ny] (bf16, host) as f32, then every slot's state: what a run of steps gives
 * for comparison bit for bit; frees y. */
static float *outputs_and_states(slot_env *e, metrale_bf16 *y, uint64_t ny, uint64_t *out_n) {
  float *states = snapshot(e);
  const uint64_t ns = (e->cf + e->rf) * e->n_slots;
  float *all = malloc((ny + ns) * sizeof *all);
  cr_assert(all);
  for (uint64_t i = 0; i < ny; i++) all[i] = metrale_bf16_to_f32(y[i]);
  memcpy(all + ny, states, ns * sizeof *states);
  free(y), free(states);
  *out_n = ny + ns;
  return all;
}

/* Every slot's final state (`states`, as outputs_and_states lays them) differs from the fill
 * pattern: else comparing runs would say nothing. */
static void expect_every_slot_moved(slot_env *e, const float *states) {
  fill_pattern(e);
  float *initial = snapshot(e);
  int moved = 0;
  for (uint32_t s = 0; s < e->n_slots; s++) moved += !slot_equal(e, initial, states, s);
  cr_expect_eq(moved, (int)e->n_slots, "only %d of %u slots changed over the steps", moved, e->n_slots);
  free(initial);
}

/* Decode steps replayed from recorded graphs (where the backend has them) must give
 * exactly what eager launches give: the same (part, x, y, batch) with another slot list
 * replays a recording that reads the new list; another batch or buffer records anew. */
typedef struct graph_step {
  metrale_part part;
  int32_t slots[2];
  uint32_t batch, x_row, y_row;
} graph_step;

static const graph_step graph_steps[] = {
    {METRALE_PART_LAYER, {0, 1}, 2, 0, 0}, {METRALE_PART_LAYER, {2, 3}, 2, 2, 2},
    {METRALE_PART_LAYER, {3, 2}, 2, 0, 0}, /* same key as the first step, other slots */
    {METRALE_PART_LAYER, {1, -1}, 2, 0, 0}, {METRALE_PART_LAYER, {2, 0}, 1, 4, 4},
    {METRALE_PART_MIXER, {0, 3}, 2, 8, 6}, {METRALE_PART_LAYER, {0, 1}, 2, 0, 0},
    {METRALE_PART_MIXER, {1, 2}, 2, 8, 6},
};
#define GRAPH_STEPS (sizeof graph_steps / sizeof graph_steps[0])

/* Runs the steps from the fill pattern; returns every step's output rows, then the slots. */
static float *run_graph_steps(slot_env *e, uint64_t *out_n) {
  fill_pattern(e);
  const uint64_t row = e->cfg.hidden_size;
  metrale_bf16 *y = malloc(GRAPH_STEPS * 2 * row * sizeof *y);
  cr_assert(y);
  for (size_t i = 0; i < GRAPH_STEPS; i++) {
    const graph_step *g = &graph_steps[i];
    CHECK(metrale_qwen3_ssm_decode(e->layer, e->pool, g->part, g->slots, g->batch, e->x + g->x_row * row * 2,
                                   e->y + g->y_row * row * 2, NULL));
    CHECK(e->be->vt->copy_d2h(e->be, y + i * 2 * row, e->y + g->y_row * row * 2, g->batch * row * 2, NULL));
    CHECK(e->be->vt->stream_sync(e->be, NULL));
    if (g->batch == 1) memset(y + i * 2 * row + row, 0, row * sizeof *y);
  }
  return outputs_and_states(e, y, GRAPH_STEPS * 2 * row, out_n);
}

Test(slots, graph_replay_equals_eager_launches) {
  slot_env e;
  env_init(&e, 4, 16);
  uint64_t n1 = 0, n2 = 0;
  float *replayed = run_graph_steps(&e, &n1); /* graphs on: the default */
  metrale_qwen3_ssm_layer_set_graphs(e.layer, 0);
  float *eager = run_graph_steps(&e, &n2);
  cr_assert_eq(n1, n2);
  const uint64_t ny = GRAPH_STEPS * 2 * e.cfg.hidden_size;
  lt_expect_same_bits(replayed, eager, n1, ny, "graphs vs eager");
  expect_every_slot_moved(&e, eager + ny);
  free(replayed), free(eager);
  env_free(&e);
}

/* A MoE layer whose backend has stream_wait runs its shared expert on a second stream; with
 * it turned off everything runs on one stream, and the outputs and states must be the same
 * bits (the branches write disjoint buffers and the combine waits for both).  Recorded as
 * graphs and launched eagerly. */
Test(slots, second_stream_equals_one_stream) {
  slot_env e;
  env_init(&e, 4, 16);
  const int forks = metrale_qwen3_ssm_layer_uses_second_stream(e.layer);
  cr_expect_eq(forks, e.be->vt->stream_wait != NULL, "a MoE layer forks exactly where the backend has stream_wait");
  for (int graphs = 1; graphs >= 0; graphs--) {
    metrale_qwen3_ssm_layer_set_graphs(e.layer, graphs);
    metrale_qwen3_ssm_layer_set_second_stream(e.layer, 1);
    uint64_t n1 = 0, n2 = 0;
    float *two = run_graph_steps(&e, &n1);
    metrale_qwen3_ssm_layer_set_second_stream(e.layer, 0);
    cr_expect_eq(metrale_qwen3_ssm_layer_uses_second_stream(e.layer), 0);
    float *one = run_graph_steps(&e, &n2);
    cr_assert_eq(n1, n2);
    lt_expect_same_bits(two, one, n1, GRAPH_STEPS * 2 * e.cfg.hidden_size,
                     graphs ? "graphs, second stream vs one stream" : "eager, second stream vs one stream");
    free(two), free(one);
  }
  metrale_qwen3_ssm_layer_set_second_stream(e.layer, 1);
  cr_expect_eq(metrale_qwen3_ssm_layer_uses_second_stream(e.layer), forks);
  env_free(&e);
}

/* ---- queued steps and repeated runs -------------------------------------------------------
 * The steps above sync after each one.  A serving loop does not: it queues step after step
 * and reads the outputs at the end, so each step's launches (and, on a backend with graphs,
 * its replay or recording) are issued while the steps before it still run.  The outputs and
 * the states must be the very bits of the synced steps, and a run repeated from the same
 * start must give the same bits every time: a race between a kernel and the one before it
 * (docs/perf-decode.md section 30) shows as a difference in one of these comparisons.
 * METRALE_TEST_REPEAT (default 2) sets how many times each form runs; the device scripts
 * raise it. */
#define QUEUED_SEGMENTS 4u
#define QUEUED_STEPS 6u /* a segment's */

static unsigned test_repeats(void) {
  const char *s = getenv("METRALE_TEST_REPEAT");
  const long n = s && *s ? strtol(s, NULL, 10) : 2;
  return n < 1 ? 1u : n > 10000 ? 10000u : (unsigned)n;
}

/* Decode steps from the fill pattern in segments of one slot list each (a new list is a copy
 * and a sync, layer.c upload_lists; a serving loop keeps its batch for many steps): batches 2,
 * 1, 6 and 2 (with a padding row) over rotated slots.  In a segment the steps alternate between
 * two (x, y) pairs, so that from the third step on each replays a recording, and the last step
 * runs the mixer alone; its outputs land in the segment's own rows of y.  synced: a stream sync
 * after every step, else none within a segment.  Returns the final outputs, then every slot's
 * state; ny receives the outputs' count. */
static float *run_queued_steps(slot_env *e, int synced, uint64_t *out_n, uint64_t *out_ny) {
  static const uint32_t batches[QUEUED_SEGMENTS] = {2, 1, 6, 2};
  fill_pattern(e);
  const uint64_t row = e->cfg.hidden_size;
  uint32_t at = 0; /* the segment's first row of y */
  for (uint32_t sg = 0; sg < QUEUED_SEGMENTS; sg++) {
    const uint32_t batch = batches[sg];
    int32_t slots[6];
    for (uint32_t b = 0; b < batch; b++) slots[b] = (int32_t)((sg + b) % e->n_slots);
    if (sg == QUEUED_SEGMENTS - 1) slots[batch - 1] = -1;
    for (uint32_t j = 0; j < QUEUED_STEPS; j++) {
      const metrale_part part = j == QUEUED_STEPS - 1 ? METRALE_PART_MIXER : METRALE_PART_LAYER;
      const uint64_t xr = (j % 2u) * 3u, yr = at + (j % 2u) * batch;
      CHECK(metrale_qwen3_ssm_decode(e->layer, e->pool, part, slots, batch, e->x + xr * row * 2, e->y + yr * row * 2,
                                     NULL));
      if (synced) CHECK(e->be->vt->stream_sync(e->be, NULL));
    }
    at += 2u * batch;
  }
  const uint64_t ny = (uint64_t)at * row;
  metrale_bf16 *y = malloc(ny * sizeof *y);
  cr_assert(y);
  CHECK(e->be->vt->copy_d2h(e->be, y, e->y, ny * sizeof *y, NULL));
  CHECK(e->be->vt->stream_sync(e->be, NULL));
  *out_ny = ny;
  return outputs_and_states(e, y, ny, out_n);
}

/* heads128: 0 lt_small_config's MoE layer (the fused decode kernel on CUDA), 1 the same with the
 * models' heads of 128 (the cluster kernel at batches 1 and 2, the pair kernel at 6) */
static void expect_queued_equal_synced(int heads128) {
  metrale_qwen3_config cfg;
  if (heads128)
    heads128_config(&cfg, 1);
  else
    lt_small_config(&cfg, 1);
  slot_env e;
  env_init_shape(&e, 6, 24, &cfg);
  metrale_device_launches_reset(e.dev);
  uint64_t n0 = 0, ny = 0;
  metrale_qwen3_ssm_layer_set_graphs(e.layer, 0);
  float *want = run_queued_steps(&e, 1, &n0, &ny); /* eager, synced: the plainest form */
  expect_every_slot_moved(&e, want + ny);
  const unsigned reps = test_repeats();
  int bad = 0;
  for (unsigned r = 0; r < reps && !bad; r++)
    for (int graphs = 1; graphs >= 0 && !bad; graphs--)
      for (int synced = 1; synced >= 0 && !bad; synced--) {
        metrale_qwen3_ssm_layer_set_graphs(e.layer, graphs);
        uint64_t n = 0, nyr = 0;
        float *got = run_queued_steps(&e, synced, &n, &nyr);
        cr_assert_eq(n, n0);
        char what[128];
        snprintf(what, sizeof what, "heads of %u, run %u of %u, %s, %s", cfg.dk, r + 1, reps,
                 graphs ? "graphs" : "eager", synced ? "a sync after each step" : "queued");
        bad = lt_expect_same_bits(got, want, n, ny, what);
        free(got);
      }
  if (heads128) {
    lt_expect_launched(e.dev, METRALE_K_gdn_decode_cluster35, "queued decode batches 1 and 2 of heads of 128");
    lt_expect_launched(e.dev, METRALE_K_gdn_decode_pair35, "queued decode batches of 6 of heads of 128");
  } else {
    lt_expect_launched(e.dev, METRALE_K_gdn_decode_fused35, "queued decode steps of heads of 32");
  }
  free(want);
  env_free(&e);
}

Test(slots, queued_steps_equal_synced_steps, .timeout = 600) {
  expect_queued_equal_synced(0);
  expect_queued_equal_synced(1);
}

/* The device syncs a backend is asked for, counted through a copy of its vtable with both sync
 * entries wrapped (white box). */
static const gpu_backend_vtable *counted_inner;
static unsigned counted_syncs;

static metrale_status counted_stream_sync(gpu_backend *be, gpu_stream st) {
  counted_syncs++;
  return counted_inner->stream_sync(be, st);
}

static metrale_status counted_sync(gpu_backend *be) {
  counted_syncs++;
  return counted_inner->sync(be);
}

/* Decode steps whose slot list differs from the last one every step (batches 1, 2, 3 in turn,
 * over rotated slots), past the host ring twice (layer.c upload_lists), as a serving loop whose
 * batch changes every step; the caller overwrites its list after each call, as it may.  synced:
 * a stream sync after every step.  syncs receives how many syncs the backend was asked for
 * during the steps (the test's own included).  Returns the last outputs, then every slot's
 * state; ny receives the outputs' count. */
#define NEW_LIST_STEPS (2u * QWEN3_SSM_LIST_RING + 5u)

static float *run_new_list_steps(slot_env *e, int synced, unsigned *syncs, uint64_t *out_n, uint64_t *out_ny) {
  const uint64_t row = e->cfg.hidden_size;
  int32_t slots[3] = {0, 1, 2};
  /* scratch for the widest batch first: growing it syncs (scratch.c) */
  CHECK(metrale_qwen3_ssm_decode(e->layer, e->pool, METRALE_PART_LAYER, slots, 3, e->x, e->y, NULL));
  fill_pattern(e);
  gpu_backend_vtable counted = *e->be->vt;
  counted.stream_sync = counted_stream_sync;
  counted.sync = counted_sync;
  counted_inner = e->be->vt;
  counted_syncs = 0;
  e->be->vt = &counted;
  for (uint32_t j = 0; j < NEW_LIST_STEPS; j++) {
    const uint32_t batch = 1 + j % 3;
    for (uint32_t b = 0; b < batch; b++) slots[b] = (int32_t)((j + 2 * b) % e->n_slots);
    metrale_status s = metrale_qwen3_ssm_decode(e->layer, e->pool, METRALE_PART_LAYER, slots, batch,
                                                e->x + (j % 2u) * 3u * row * 2, e->y + (j % 4u) * 3u * row * 2, NULL);
    for (uint32_t b = 0; b < 3; b++) slots[b] = INT32_MAX; /* the caller reuses its list */
    if (!s && synced) s = e->be->vt->stream_sync(e->be, NULL);
    if (s) e->be->vt = counted_inner;
    CHECK(s);
  }
  e->be->vt = counted_inner;
  *syncs = counted_syncs;
  const uint64_t ny = 12 * row;
  metrale_bf16 *y = malloc(ny * sizeof *y);
  cr_assert(y);
  CHECK(e->be->vt->copy_d2h(e->be, y, e->y, ny * sizeof *y, NULL));
  CHECK(e->be->vt->stream_sync(e->be, NULL));
  *out_ny = ny;
  return outputs_and_states(e, y, ny, out_n);
}

Test(slots, new_list_every_step_queues_without_a_sync_each, .timeout = 600) {
  slot_env e;
  env_init(&e, 6, 24);
  unsigned synced_syncs = 0, queued_syncs = 0;
  uint64_t n0 = 0, ny = 0;
  float *want = run_new_list_steps(&e, 1, &synced_syncs, &n0, &ny);
  expect_every_slot_moved(&e, want + ny);
  cr_expect_geq(synced_syncs, NEW_LIST_STEPS, "the synced run counted %u syncs over %u steps", synced_syncs,
                NEW_LIST_STEPS);
  const unsigned reps = test_repeats();
  for (unsigned r = 0; r < reps; r++)
    for (int graphs = 1; graphs >= 0; graphs--) {
      metrale_qwen3_ssm_layer_set_graphs(e.layer, graphs);
      uint64_t n = 0, nyr = 0;
      float *got = run_new_list_steps(&e, 0, &queued_syncs, &n, &nyr);
      cr_assert_eq(n, n0);
      /* one sync each time the ring comes round: at most 3 over 37 lists, wherever in the ring the
       * run starts (one sync a step before the ring: 37) */
      cr_expect_leq(queued_syncs, (NEW_LIST_STEPS + QWEN3_SSM_LIST_RING - 1) / QWEN3_SSM_LIST_RING,
                    "%u syncs over %u decode steps on a new slot list each (%s); the host ring of %u lists "
                    "should sync once a ring",
                    queued_syncs, NEW_LIST_STEPS, graphs ? "graphs" : "eager", QWEN3_SSM_LIST_RING);
      char what[96];
      snprintf(what, sizeof what, "run %u of %u, %s, a new list each step, queued", r + 1, reps,
               graphs ? "graphs" : "eager");
      const int bad = lt_expect_same_bits(got, want, n, ny, what);
      free(got);
      if (bad) break;
    }
  free(want);
  env_free(&e);
}
