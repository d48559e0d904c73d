/* metrale bench: the Qwen3-Next-80B-A3B layer shape (hidden 2048, 16 key / 32 value
 * heads of 128, conv 4; MoE 512 experts, top 10, width 512, shared expert 512) timed
 * for decode and prefill, against the device's copy bandwidth and GEMM rate measured in
 * the same process. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ops/ops.h"

void bench_a3b_config(metrale_qwen3_config *c) {
  memset(c, 0, sizeof *c);
  c->family = METRALE_QWEN3_NEXT;
  c->hidden_size = 2048;
  c->num_hidden_layers = 1;
  c->nk = 16, c->nv = 32, c->dk = 128, c->dv = 128, c->conv_kernel = 4;
  c->rms_norm_eps = 1e-6f;
  c->num_experts = 512, c->num_experts_per_tok = 10, c->moe_intermediate_size = 512;
  c->shared_expert_intermediate_size = 512, c->decoder_sparse_step = 1, c->norm_topk_prob = 1;
  c->intermediate_size = 5120;
  c->linear_layer[0] = 1;
}

metrale_status bench_config_layer(const metrale_qwen3_config *c, const char *path, int given, uint32_t *layer) {
  if (!given) {
    *layer = 0;
    while (*layer < c->num_hidden_layers && !c->linear_layer[*layer]) ++*layer;
    if (*layer == c->num_hidden_layers)
      return METRALE_ERROR(INVALID_ARGUMENT, "--config %s: no linear-attention layer", path);
  }
  if (*layer >= c->num_hidden_layers || !c->linear_layer[*layer])
    return METRALE_ERROR(INVALID_ARGUMENT, "--config %s: layer %u is not a linear-attention layer", path, *layer);
  return METRALE_OK;
}

typedef struct case_ctx {
  metrale_qwen3_ssm_layer *layer;
  metrale_state_pool *pool;
  metrale_part part;
  int decode;
  uint32_t n, seqs; /* batch (decode) or tokens (prefill, in seqs sequences) */
  int32_t *slots, *cu;
  int32_t *other; /* --new-slots: a second slot list, taken every other decode step; else NULL */
  unsigned step;
  const uint32_t *cycle; /* the --cycle case: each decode step takes the next of these batches */
  unsigned ncycle, turn;
  gpu_ptr x, y;
} case_ctx;

static metrale_status case_once(void *p) {
  case_ctx *c = p;
  if (c->decode) {
    const int32_t *slots = c->other && (c->step++ & 1u) ? c->other : c->slots;
    const uint32_t batch = c->ncycle ? c->cycle[c->turn++ % c->ncycle] : c->n;
    return metrale_qwen3_ssm_decode(c->layer, c->pool, c->part, slots, batch, c->x, c->y, NULL);
  }
  return metrale_qwen3_ssm_prefill(c->layer, c->pool, c->part, c->cu, c->slots, c->seqs, c->x, c->y, NULL);
}

/* cu_seqlens [seqs + 1] of t tokens as seqs sequences whose lengths differ by at most one (every
 * --seqs prefill, the core's and the layer's). */
static void even_cu(int32_t *cu, uint32_t t, uint32_t seqs) {
  for (uint32_t q = 0; q <= seqs; q++) cu[q] = (int32_t)((uint64_t)t * q / seqs);
}

/* Bytes a call must move and FLOPs it must do, counted from the shapes. */
static void count(const metrale_qwen3_config *g, metrale_part part, int moe, int decode, uint32_t n,
                  uint32_t nseq, double *bytes, double *flops) {
  const double H = g->hidden_size, nv = g->nv, dk = g->dk, dv = g->dv;
  const double C = 2.0 * g->nk * dk + nv * dv, P = C + nv * dv + 2 * nv, K = g->conv_kernel;
  double wbytes = 2 * (P * H + H * nv * dv + C * K) + 4 * nv + 2 * nv + 2 * dv;
  double state = 4 * (nv * dk * dv + C * (K - 1)); /* per sequence */
  double seqs = decode ? n : nseq;
  double act = 2 * n * (2 * H); /* input read, output written */
  *flops = 2 * n * (P * H + H * nv * dv) + n * nv * dk * dv * 8.0;
  if (part == METRALE_PART_LAYER && !moe) { /* dense SwiGLU MLP */
    double I = g->intermediate_size;
    wbytes += 2 * (3 * I * H + 2 * H);
    *flops += 2 * n * 3 * I * H;
  } else if (part == METRALE_PART_LAYER) {
    double E = g->num_experts, k = g->num_experts_per_tok, mI = g->moe_intermediate_size,
           sI = g->shared_expert_intermediate_size;
    double touched = n * k < E ? n * k : E;
    wbytes += 2 * ((E + 1) * H + touched * 3 * mI * H + 3 * sI * H + 2 * H);
    *flops += 2 * n * ((E + 1) * H + k * 3 * mI * H + 3 * sI * H);
  }
  *bytes = wbytes + 2 * state * seqs + act;
}

typedef struct result {
  const char *kind;
  uint32_t n;
  double median, min, gbps, tflops;
  char kernels[4096], kernels_json[6144]; /* what one call launches: bench_kernels (every manifest row fits) */
} result;

/* ---- --core: the delta-rule prefill alone ------------------------------------------ */

typedef struct core_ctx {
  const metrale_ops *ops;
  gpu_ptr o, qkv, g, beta, state, cu, slots, ws;
  gpu_ptr vh; /* v in IEEE half where the ops take it (metrale_ops_v_half_fits), as the mixer hands it; else 0 */
  int planes; /* q and k in IEEE half in ws's planes where the ops take them (metrale_ops_qk_planes_fits), as the
                 mixer's conv hands them; else from qkv in f32 */
  uint32_t t, s, nk, nv, dk, dv; /* tokens in s sequences */
} core_ctx;

static metrale_status core_once(void *p) {
  core_ctx *c = p;
  return op_delta_rule_prefill(c->ops, NULL, c->o, c->qkv, c->g, c->beta, c->state, c->cu, c->slots,
                               c->ws, c->t, c->s, c->nk, c->nv, c->dk, c->dv, c->vh, c->planes);
}

/* the core bench's gates (--gates), by index into gate_names */
enum { GATES_FAST, GATES_SLOW, GATES_PEER };
static const char *const gate_names[] = {"fast", "slow", "peer"};

static float core_uniform(uint64_t *x, float lo, float hi) { /* xorshift64* */
  *x ^= *x >> 12, *x ^= *x << 25, *x ^= *x >> 27;
  return lo + (hi - lo) * (float)((*x * 2685821657736338717ull) >> 40) / (float)(1u << 24);
}

/* Distinct random rows in [-1, 1) as input (the mixer part reads f32, the layer bf16): every
 * token different, so that the MoE router spreads a batch over many experts, as count()
 * assumes (a constant input sent every token to the same ten). */
static metrale_status fill_inputs(gpu_backend *be, gpu_ptr x, uint64_t n, metrale_part part) {
  const int f32 = part == METRALE_PART_MIXER;
  void *host = malloc(n * (f32 ? 4 : 2) + 1);
  if (!host) return METRALE_ERROR(OUT_OF_MEMORY, "bench: %llu host input values", (unsigned long long)n);
  uint64_t r = 0x2545f4914f6cdd1dull;
  for (uint64_t i = 0; i < n; i++) {
    const float v = core_uniform(&r, -1, 1);
    if (f32)
      ((float *)host)[i] = v;
    else
      ((metrale_bf16 *)host)[i] = metrale_f32_to_bf16(v);
  }
  metrale_status s = be->vt->copy_h2d(be, x, host, n * (f32 ? 4 : 2), NULL);
  if (!s) s = be->vt->sync(be);
  free(host);
  return s;
}

/* FLOPs per token of the chunked algorithm (chunks of 64): K K^T, Q K^T, W, U, W S, Q S,
 * (Q K^T) V' and K^T V' per value head. */
static double core_flops_per_token(const metrale_qwen3_config *g) {
  const double c = 64, dk = g->dk, dv = g->dv;
  return g->nv * (2 * c * (3 * dk + 2 * dv) + 6 * dk * dv);
}

/* rows [0, blk) of dst (row_bytes each, already there) repeated over its rows [blk, T) */
static metrale_status tile_rows(gpu_backend *be, gpu_ptr dst, uint64_t row_bytes, uint64_t blk, uint64_t T) {
  metrale_status s = METRALE_OK;
  for (uint64_t r = blk; !s && r < T; r += blk)
    s = be->vt->copy_d2d(be, dst + r * row_bytes, dst, (T - r < blk ? T - r : blk) * row_bytes, NULL);
  return s;
}

/* Each length's tokens as `seqs` sequences (their lengths differ by at most one; cmd_bench has
 * checked that no length is shorter than seqs), each from a state slot of its own: random v, g,
 * beta and states, q and k random then l2-normalised on the device by l2norm_qk, as the mixer
 * leaves them; v also in IEEE half, which the core reads instead where the mixer's conv would
 * hand it so (metrale_ops_v_half_fits), and q and k in IEEE half in the whole-head core's planes
 * likewise (metrale_ops_qk_planes_fits: the same 2 bytes a value as the peers' bf16 q and k;
 * METRALE_NO_QK_PLANES=1 times the core from f32 q and k instead). */
static metrale_status bench_core(metrale_device *dev, const metrale_qwen3_config *cfg, const uint32_t *lens,
                                 int n, uint32_t seqs, int warmup, int samples, int json, int gates) {
  gpu_backend *be = metrale_device_backend(dev);
  metrale_ops ops;
  METRALE_RETURN_IF_ERROR(metrale_ops_init(&ops, dev));
  const uint32_t nk = cfg->nk, nv = cfg->nv, dk = cfg->dk, dv = cfg->dv;
  const uint64_t C = 2ull * nk * dk + (uint64_t)nv * dv;
  /* whether the ops take v in half (a probe: one long sequence, aligned stand-in addresses) */
  const int vhalf = metrale_ops_v_half_fits(&ops, 256, 256, 65536, 1, dk, dv);
  char seq_text[40];
  if (seqs == 1) snprintf(seq_text, sizeof seq_text, "one sequence");
  else snprintf(seq_text, sizeof seq_text, "%u sequences", seqs);
  if (!json)
    printf("delta-rule prefill core, %u key / %u value heads of %u/%u, %s, %s gates: %s\n"
           "%-8s %12s %12s %10s   %s\n", nk, nv, dk, dv, seq_text, gate_names[gates],
           metrale_ops_delta_rule_prefill_path(&ops, dk, dv, vhalf), "tokens", "median ms", "min ms", "TFLOP/s",
           "kernels one call launches");
  else
    printf("{\"core\": \"%s\", \"gates\": \"%s\", \"sequences\": %u, \"flops_per_token\": %.0f, "
           "\"shape\": {\"nk\": %u, \"nv\": %u, \"dk\": %u, \"dv\": %u}, \"results\": [",
           metrale_ops_delta_rule_prefill_path(&ops, dk, dv, vhalf), gate_names[gates], seqs,
           core_flops_per_token(cfg), nk, nv, dk, dv);
  metrale_status s = METRALE_OK;
  for (int i = 0; i < n && !s; i++) {
    const uint32_t T = lens[i];
    const uint32_t blk = T < 1024 ? T : 1024; /* host-random rows, tiled over T */
    core_ctx c = {.ops = &ops, .t = T, .s = seqs, .nk = nk, .nv = nv, .dk = dk, .dv = dv};
    const uint64_t wsb = metrale_ops_delta_rule_ws_bytes(&ops, T, seqs, nv, dk, dv);
    const uint64_t sb = (uint64_t)nv * dk * dv; /* a slot's state, floats */
    uint64_t hn = blk * C;
    if ((uint64_t)T * nv > hn) hn = (uint64_t)T * nv;
    if (sb * seqs > hn) hn = sb * seqs;
    float *host = malloc(sizeof(float) * hn);
    /* cu_seqlens [seqs + 1], then the slots [seqs] */
    int32_t *lists = malloc(sizeof(int32_t) * (2 * (size_t)seqs + 1));
    if (lists) {
      even_cu(lists, T, seqs);
      for (uint32_t q = 0; q < seqs; q++) lists[seqs + 1 + q] = (int32_t)q;
    }
    uint64_t x = 0x9e3779b97f4a7c15ull + T;
    if (!host || !lists) s = METRALE_ERROR(OUT_OF_MEMORY, "core bench host buffers");
    if (!s) s = metrale_alloc(dev, (uint64_t)T * C * 4, &c.qkv);
    if (!s) s = metrale_alloc(dev, (uint64_t)T * nv * dv * 2, &c.o);
    if (!s) s = metrale_alloc(dev, (uint64_t)T * nv * 4, &c.g);
    if (!s) s = metrale_alloc(dev, (uint64_t)T * nv * 4, &c.beta);
    if (!s) s = metrale_alloc(dev, sb * seqs * 4, &c.state);
    if (!s) s = metrale_alloc(dev, sizeof(int32_t) * (2 * (uint64_t)seqs + 1), &c.cu);
    if (!s && wsb) s = metrale_alloc(dev, wsb, &c.ws);
    gpu_ptr vh = 0;
    const uint64_t nvdv = (uint64_t)nv * dv, qk = 2ull * nk * dk;
    if (!s && vhalf) s = metrale_alloc(dev, (uint64_t)T * nvdv * 2, &vh);
    c.slots = c.cu + 4 * ((uint64_t)seqs + 1);
    if (!s) {
      for (uint64_t j = 0; j < blk * C; j++) host[j] = core_uniform(&x, -1, 1);
      s = be->vt->copy_h2d(be, c.qkv, host, blk * C * 4, NULL);
      if (!s) s = tile_rows(be, c.qkv, C * 4, blk, T);
      if (vh) { /* v's halves in place of the rows' first values (the rows are C >= nv*dv floats) */
        uint16_t *h16 = (uint16_t *)host;
        for (uint64_t r = 0; r < blk; r++)
          for (uint64_t j = 0; j < nvdv; j++) h16[r * nvdv + j] = metrale_f32_to_f16_sat(host[r * C + qk + j]);
        if (!s) s = be->vt->copy_h2d(be, vh, host, blk * nvdv * 2, NULL);
        if (!s) s = tile_rows(be, vh, nvdv * 2, blk, T);
      }
      if (!s) s = be->vt->sync(be);
    }
    if (!s && vh && metrale_ops_v_half_fits(&ops, vh, c.ws, T, seqs, dk, dv)) c.vh = vh;
    if (!s) s = op_l2norm_qk(&ops, NULL, c.qkv, T, nk, dk, (uint32_t)C);
    if (!s) {
      /* fast: g in [-2, -0.01] (-0.375 a token on average: a chunk of 64 tokens scales the state
       * by ~e^-24); slow: g in [-1e-3, -1e-4] (a chunk keeps ~97 % of it); peer: logsigmoid(n)/16,
       * n standard normal (-0.05 a token on average: ~e^-3.2 a chunk), and g = 0 for a quarter of
       * the value heads (h % 4 == 3), the gates FlashQLA's H200 benchmark times its core with */
      for (uint64_t j = 0; j < (uint64_t)T * nv; j++) {
        if (gates == GATES_PEER) {
          const float u1 = core_uniform(&x, 1e-7f, 1.0f), u2 = core_uniform(&x, 0.0f, 6.2831853f);
          const float nz = sqrtf(-2.0f * logf(u1)) * cosf(u2); /* Box-Muller */
          host[j] = j % nv % 4 == 3 ? 0.0f : -log1pf(expf(-nz)) / 16.0f;
        } else {
          host[j] = gates == GATES_SLOW ? -expf(core_uniform(&x, -9.21f, -6.91f)) : -expf(core_uniform(&x, -4.6f, 0.69f));
        }
      }
      s = be->vt->copy_h2d(be, c.g, host, (uint64_t)T * nv * 4, NULL);
      if (!s) s = be->vt->sync(be);
    }
    if (!s) {
      for (uint64_t j = 0; j < (uint64_t)T * nv; j++) host[j] = core_uniform(&x, 0.02f, 0.98f);
      s = be->vt->copy_h2d(be, c.beta, host, (uint64_t)T * nv * 4, NULL);
      if (!s) s = be->vt->sync(be);
    }
    if (!s) {
      for (uint64_t j = 0; j < sb * seqs; j++) host[j] = core_uniform(&x, -0.5f, 0.5f);
      s = be->vt->copy_h2d(be, c.state, host, sb * seqs * 4, NULL);
      if (!s) s = be->vt->copy_h2d(be, c.cu, lists, sizeof(int32_t) * (2 * (uint64_t)seqs + 1), NULL);
      if (!s) s = be->vt->sync(be);
    }
    if (!s && c.vh && metrale_ops_qk_planes_fits(&ops, c.o, c.vh, c.ws, T, seqs, nv, dk, dv)) {
      /* the planes as the conv would leave them: one call from qkv writes them (phase 0 of
       * delta_rule_prefill_chunked_wh_prep), and the timed calls' phase 0 reads them */
      s = core_once(&c);
      if (!s) s = be->vt->sync(be);
      c.planes = 1;
    }
    fprintf(stderr, "timing the delta-rule prefill core at %u tokens in %s...\n", T, seq_text);
    double med = 0, mn = 0;
    char kt[4096], kj[6144];
    if (!s) s = bench_kernels(dev, core_once, &c, kt, sizeof kt, kj, sizeof kj);
    if (!s) s = bench_time(dev, core_once, &c, warmup, 1, samples, &med, &mn);
    if (!s) {
      double tf = core_flops_per_token(cfg) * T / med / 1e12;
      if (json)
        printf("%s{\"n\": %u, \"median_us\": %.2f, \"min_us\": %.2f, \"tflops\": %.3f, \"kernels\": %s}",
               i ? ", " : "", T, med * 1e6, mn * 1e6, tf, kj);
      else
        printf("%-8u %12.3f %12.3f %10.1f   %s\n", T, med * 1e3, mn * 1e3, tf, kt);
    }
    free(host);
    free(lists);
    gpu_ptr bufs[] = {c.qkv, c.o, c.g, c.beta, c.state, c.cu, c.ws, vh};
    for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) metrale_free(dev, bufs[b]);
  }
  if (json && !s) printf("]}\n");
  return s;
}

int cmd_bench(int argc, char **argv) {
  cli_opt opts[] = {
      {"--backend", 1, NULL, "auto|cpu|cuda|hip|vulkan (default: METRALE_BACKEND or auto)"},
      {"--part", 1, NULL, "mixer|layer (default mixer)"},
      {"--decode", 1, NULL, "decode batch sizes, e.g. 1,8,64,256 (default: 1 on cpu, else 1,8,64,256)"},
      {"--prefill", 1, NULL, "prefill token counts, e.g. 4096,16384 (default: 256 on cpu, else 4096,16384)"},
      {"--samples", 1, NULL, "timed samples per case, median reported (default 15)"},
      {"--warmup", 1, NULL, "untimed calls before timing (default 3)"},
      {"--json", 0, NULL, "print one JSON object instead of the table"},
      {"--core", 0, NULL, "time only the delta-rule prefill core, one sequence per --prefill length (or --seqs)"},
      {"--model", 1, NULL, "load layer --layer of this HF checkpoint folder instead of random weights"},
      {"--layer", 1, NULL, "with --model: the layer index (default 0)"},
      {"--no-graphs", 0, NULL, "launch decode steps eagerly even where the backend replays graphs"},
      {"--gates", 1, NULL,
       "with --core: fast (default; g in [-2, -0.01] a token, the state forgets within two chunks), "
       "slow (g in [-1e-3, -1e-4]: it does not) or peer (logsigmoid(n)/16 for n standard normal, and 0 "
       "for a quarter of the value heads: FlashQLA's benchmark's gates)"},
      {"--one-stream", 0, NULL,
       "keep the MoE layer's shared expert on the layer's stream (by default it runs on a second stream "
       "beside the routed experts where the backend can fork and join streams)"},
      {"--seqs", 1, NULL,
       "each --prefill length as this many sequences of (nearly) equal length, each from a state of its "
       "own (default 1)"},
      {"--new-slots", 0, NULL,
       "decode steps alternate between two slot lists of other states, so that each step's list differs "
       "from the last (a serving loop whose batch changes every step); by default every step decodes the "
       "same slots"},
      {"--cycle", 0, NULL,
       "also time decode steps that go round the --decode batches, one step each (a serving loop whose "
       "batch size changes every step)"},
      {"--config", 1, NULL,
       "random weights at the shape of this config.json (Qwen3-Next or Qwen3.5, e.g. a model's own) instead "
       "of the Qwen3-Next-80B-A3B shape; its first linear-attention layer unless --layer names another"},
  };
  int rc = cli_parse("bench", "[options]", opts, 17, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  const int json = opts[6].value != NULL;
  FILE *info = json ? stderr : stdout;
  metrale_part part = METRALE_PART_MIXER;
  metrale_status s = METRALE_OK;
  if (opts[1].value && strcmp(opts[1].value, "layer") == 0) part = METRALE_PART_LAYER;
  else if (opts[1].value && strcmp(opts[1].value, "mixer") != 0)
    s = METRALE_ERROR(INVALID_ARGUMENT, "--part must be mixer or layer");
  uint32_t samples = 15, warmup = 3;
  if (!s && opts[4].value) s = cli_parse_u32("--samples", opts[4].value, &samples);
  if (!s && opts[5].value) s = cli_parse_u32("--warmup", opts[5].value, &warmup);
  if (!s && (samples == 0 || samples > 10000)) s = METRALE_ERROR(INVALID_ARGUMENT, "--samples must be 1..10000");
  int gates = GATES_FAST;
  uint32_t seqs = 1;
  if (!s && opts[13].value) s = cli_parse_u32("--seqs", opts[13].value, &seqs);
  if (!s && (seqs == 0 || seqs > 65536)) s = METRALE_ERROR(INVALID_ARGUMENT, "--seqs must be 1..65536");
  if (!s && opts[11].value && !opts[7].value) s = METRALE_ERROR(INVALID_ARGUMENT, "--gates goes with --core");
  else if (!s && opts[11].value) {
    gates = -1;
    for (int i = 0; i < (int)(sizeof gate_names / sizeof gate_names[0]); i++)
      if (strcmp(opts[11].value, gate_names[i]) == 0) gates = i;
    if (gates < 0) s = METRALE_ERROR(INVALID_ARGUMENT, "--gates must be fast, slow or peer");
  }
  const int new_slots = opts[14].value != NULL;
  if (!s && new_slots && opts[7].value) s = METRALE_ERROR(INVALID_ARGUMENT, "--new-slots goes with decode steps, not --core");
  const int cycle = opts[15].value != NULL;
  if (!s && cycle && opts[7].value) s = METRALE_ERROR(INVALID_ARGUMENT, "--cycle goes with decode steps, not --core");
  metrale_device *dev = NULL;
  metrale_device_options dopts = {.backend = opts[0].value};
  if (!s) s = metrale_device_open(&dopts, &dev);
  if (s) return cli_fail("bench", s);
  gpu_backend *be = metrale_device_backend(dev);
  const int is_cpu = strcmp(be->name, "cpu") == 0;
  uint32_t dec[16] = {1, 8, 64, 256}, pre[16] = {4096, 16384};
  int ndec = is_cpu ? 1 : 4, npre = is_cpu ? 1 : 2;
  if (is_cpu) pre[0] = 256;
  if (opts[2].value) s = cli_parse_u32_list("--decode", opts[2].value, dec, 16, &ndec);
  if (!s && opts[3].value) s = cli_parse_u32_list("--prefill", opts[3].value, pre, 16, &npre);
  for (int i = 0; i < npre && !s; i++)
    if (pre[i] < seqs)
      s = METRALE_ERROR(INVALID_ARGUMENT, "--seqs %u: a prefill of %u tokens leaves a sequence empty", seqs, pre[i]);

  metrale_qwen3_config cfg;
  bench_a3b_config(&cfg);
  metrale_checkpoint *ckpt = NULL;
  uint32_t layer_index = 0;
  const char *shape_file = opts[16].value; /* --config: random weights at that shape */
  if (!s && shape_file && opts[8].value) s = METRALE_ERROR(INVALID_ARGUMENT, "--config and --model: one or the other");
  if (!s && opts[9].value && !opts[8].value && !shape_file)
    s = METRALE_ERROR(INVALID_ARGUMENT, "--layer goes with --model or --config");
  if (!s && opts[9].value) s = cli_parse_u32("--layer", opts[9].value, &layer_index);
  if (!s && opts[8].value) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", opts[8].value);
    s = metrale_config_load(path, &cfg);
    if (!s) s = metrale_checkpoint_open(opts[8].value, &ckpt);
  }
  if (!s && shape_file) {
    s = metrale_config_load(shape_file, &cfg);
    if (!s) s = bench_config_layer(&cfg, shape_file, opts[9].value != NULL, &layer_index);
  }
  if (s) {
    metrale_device_destroy(dev);
    return cli_fail("bench", s);
  }
  if (opts[7].value) {
    s = bench_core(dev, &cfg, pre, npre, seqs, (int)warmup, (int)samples, json, gates);
    metrale_device_destroy(dev);
    return s ? cli_fail("bench", s) : CLI_OK;
  }
  double bw = 0, tf = 0;

  metrale_qwen3_ssm_layer *layer = NULL;
  metrale_random_source rs = {.seed = 80};
  uint64_t rss_before = cli_current_rss();
  cli_reset_peak_rss();
  double t_load = cli_now();
  if (!s && ckpt) {
    metrale_checkpoint_source src = {ckpt, layer_index};
    s = metrale_qwen3_ssm_layer_create(dev, &cfg, layer_index, metrale_weight_source_checkpoint(&src), &layer);
  } else if (!s) {
    if (part == METRALE_PART_MIXER) {
      /* the mixer alone needs no experts: a dense FFN of minimal width keeps memory low */
      cfg.num_experts = 0;
      cfg.intermediate_size = 1;
    }
    s = metrale_qwen3_ssm_layer_create(dev, &cfg, layer_index, metrale_weight_source_random(&rs), &layer);
  }
  t_load = cli_now() - t_load;
  uint64_t rss_peak = cli_peak_rss();
  if (layer && opts[10].value) metrale_qwen3_ssm_layer_set_graphs(layer, 0);
  const int graphs = layer && !opts[10].value && metrale_device_has_graphs(dev);
  if (layer && opts[12].value) metrale_qwen3_ssm_layer_set_second_stream(layer, 0);
  const int second = layer && part == METRALE_PART_LAYER && metrale_qwen3_ssm_layer_uses_second_stream(layer);
  metrale_checkpoint_close(ckpt); /* the weights are on the device now */
  char ckpt_name[300];
  if (opts[8].value) snprintf(ckpt_name, sizeof ckpt_name, "layer %u of %.250s", layer_index, opts[8].value);
  else if (shape_file) snprintf(ckpt_name, sizeof ckpt_name, "random, layer %u of %.250s", layer_index, shape_file);
  else snprintf(ckpt_name, sizeof ckpt_name, "random, Qwen3-Next-80B-A3B shape");
  uint64_t wbytes = layer ? metrale_qwen3_ssm_layer_weight_bytes(layer) : 0;

  /* after the layer, so that a bad --model fails before any progress output */
  if (!s) fprintf(info, "metrale bench on %s (%s), part %s, decode steps %s%s%s, each prefill as %u sequence%s\n",
                  be->name, be->caps.device_name, part == METRALE_PART_MIXER ? "mixer" : "layer (mixer + FFN)",
                  graphs ? "replayed as graphs" : "launched eagerly",
                  new_slots ? " on a new slot list each" : "",
                  second ? ", the shared expert on a second stream" : "", seqs, seqs == 1 ? "" : "s");
  if (!s) fprintf(stderr, "measuring ceilings...\n");
  if (!s) s = bench_copy_bandwidth(dev, is_cpu ? (256u << 20) : (1ull << 30), &bw);
  if (!s) s = bench_gemm_rate(dev, is_cpu ? 512 : 8192, &tf);

  uint32_t maxn = 1, maxb = seqs; /* slots: a decode batch's, or a prefill's sequences */
  for (int i = 0; i < ndec; i++) maxb = dec[i] > maxb ? dec[i] : maxb, maxn = dec[i] > maxn ? dec[i] : maxn;
  for (int i = 0; i < npre; i++) maxn = pre[i] > maxn ? pre[i] : maxn;
  metrale_state_pool *pool = NULL;
  case_ctx c = {.layer = layer, .part = part};
  /* --new-slots: slots [0, maxb) and the other list [maxb, 2 maxb) */
  const uint32_t nslots = new_slots ? 2 * maxb : maxb;
  int32_t *slots = calloc(nslots, sizeof *slots), *cu = calloc((size_t)seqs + 1, sizeof *cu);
  if (!s && (!slots || !cu)) s = METRALE_ERROR(OUT_OF_MEMORY, "slots");
  c.cu = cu;
  for (uint32_t i = 0; slots && i < nslots; i++) slots[i] = (int32_t)i;
  c.slots = slots;
  c.other = new_slots && slots ? slots + maxb : NULL;
  if (!s) s = metrale_state_pool_create(dev, metrale_state_dims_of(&cfg), nslots, &pool);
  c.pool = pool;
  if (!s) s = metrale_alloc(dev, (uint64_t)maxn * cfg.hidden_size * 4, &c.x); /* f32 room: the mixer part takes f32 */
  if (!s) s = metrale_alloc(dev, (uint64_t)maxn * cfg.hidden_size * 2, &c.y);
  if (!s) s = fill_inputs(be, c.x, (uint64_t)maxn * cfg.hidden_size, part);

  result *res = calloc(33, sizeof *res); /* --decode and --prefill take 16 each, --cycle one */
  int nres = 0;
  if (!s && !res) s = METRALE_ERROR(OUT_OF_MEMORY, "bench results");
  const int ncase = ndec + npre + (cycle && ndec > 0);
  for (int i = 0; i < ncase && !s; i++) {
    const int is_cycle = i == ndec + npre; /* the last case */
    c.decode = i < ndec || is_cycle;
    c.ncycle = is_cycle ? (unsigned)ndec : 0;
    c.cycle = dec;
    c.turn = 0;
    c.n = is_cycle ? (unsigned)ndec : c.decode ? dec[i] : pre[i - ndec];
    c.seqs = c.decode ? 1 : seqs;
    if (cu) even_cu(c.cu, c.n, c.seqs);
    fprintf(stderr, "timing %s %u...\n", is_cycle ? "decode steps going round batches:" : c.decode ? "decode batch" : "prefill tokens", c.n);
    result *r = &res[nres];
    r->kind = is_cycle ? "cycle" : c.decode ? "decode" : "prefill";
    r->n = c.n;
    /* the kernels of one call, launched eagerly: a replay would launch none through the device
     * (a recording holds the same launches, graphs.c); the recordings are made again while
     * warming up */
    if (graphs) metrale_qwen3_ssm_layer_set_graphs(layer, 0);
    s = bench_kernels(dev, case_once, &c, r->kernels, sizeof r->kernels, r->kernels_json, sizeof r->kernels_json);
    if (graphs) metrale_qwen3_ssm_layer_set_graphs(layer, 1);
    /* a sample holds whole rounds of the cycle, and both lists of --new-slots equally often */
    const int group = c.ncycle ? (int)c.ncycle : c.other ? 2 : 1;
    if (!s) s = bench_time(dev, case_once, &c, (int)warmup, group, (int)samples, &r->median, &r->min);
    if (s) break;
    double bytes = 0, flops = 0; /* a cycle's steps differ: no rate */
    if (!is_cycle) count(&cfg, part, metrale_qwen3_ssm_layer_is_moe(layer), c.decode, c.n, c.seqs, &bytes, &flops);
    r->gbps = bytes / r->median / 1e9;
    r->tflops = flops / r->median / 1e12;
    nres++;
  }
  if (!s) {
    if (json) {
      printf("{\"backend\": \"%s\", \"device\": \"%s\", \"part\": \"%s\", \"copy_gbps\": %.2f, "
             "\"gemm_tflops\": %.4f, \"weight_bytes\": %llu, \"load_seconds\": %.3f, "
             "\"load_peak_rss_delta_bytes\": %llu, \"decode_graphs\": %s, \"second_stream\": %s, "
             "\"prefill_sequences\": %u, \"new_slots\": %s, \"shape\": {\"hidden\": %u, \"nk\": %u, \"nv\": %u, "
             "\"dk\": %u, \"dv\": %u}, \"results\": [",
             be->name, be->caps.device_name, part == METRALE_PART_MIXER ? "mixer" : "layer", bw, tf,
             (unsigned long long)wbytes, t_load,
             (unsigned long long)(rss_peak > rss_before ? rss_peak - rss_before : 0),
             graphs ? "true" : "false", second ? "true" : "false", seqs, new_slots ? "true" : "false",
             cfg.hidden_size, cfg.nk, cfg.nv, cfg.dk, cfg.dv);
      for (int i = 0; i < nres; i++)
        printf("%s{\"kind\": \"%s\", \"n\": %u, \"median_us\": %.2f, \"min_us\": %.2f, \"gbps\": %.2f, "
               "\"pct_copy_bw\": %.1f, \"tflops\": %.4f, \"kernels\": %s}", i ? ", " : "", res[i].kind, res[i].n,
               res[i].median * 1e6, res[i].min * 1e6, res[i].gbps, 100 * res[i].gbps / bw, res[i].tflops,
               res[i].kernels_json);
      printf("]}\n");
    } else {
      printf("ceilings measured here: copy %.1f GB/s (read + write), gemm_bf16 %.3f TFLOP/s\n", bw, tf);
      double grew = (double)(rss_peak > rss_before ? rss_peak - rss_before : 0);
      printf("layer weights %.1f MB (%s: hidden %u, %u key / %u value heads of %u/%u), created in %.2f s; peak "
             "host RSS growth while creating %.1f MB (%.2fx the weight bytes)\n", (double)wbytes / 1e6, ckpt_name,
             cfg.hidden_size, cfg.nk, cfg.nv, cfg.dk, cfg.dv, t_load, grew / 1e6, wbytes ? grew / (double)wbytes : 0.0);
      printf("%-8s %7s %12s %12s %10s %9s %10s\n", "case", "n", "median us", "min us", "GB/s",
             "% copy", "TFLOP/s");
      for (int i = 0; i < nres; i++)
        printf("%-8s %7u %12.1f %12.1f %10.1f %8.1f%% %10.3f\n", res[i].kind, res[i].n, res[i].median * 1e6,
               res[i].min * 1e6, res[i].gbps, 100 * res[i].gbps / bw, res[i].tflops);
      printf("kernels one call launches (manifest order):\n");
      for (int i = 0; i < nres; i++) printf("  %-7s %5u: %s\n", res[i].kind, res[i].n, res[i].kernels);
    }
  }
  if (dev) {
    metrale_free(dev, c.x);
    metrale_free(dev, c.y);
  }
  free(slots);
  free(cu);
  free(res);
  metrale_state_pool_destroy(pool);
  metrale_qwen3_ssm_layer_destroy(layer);
  metrale_device_destroy(dev);
  if (s) return cli_fail("bench", s);
  return CLI_OK;
}
