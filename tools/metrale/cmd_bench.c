/* metrale bench: the Qwen3-Next-80B-A3B layer shape (hidden 2048, 16 key / 32 value
 * heads of 128, conv 4; MoE 512 experts, top 10, width 512, shared expert 512) timed
 * for decode and prefill, against the device's copy bandwidth and GEMM rate measured in
 * the same process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void a3b_config(metrale_qwen3_config *c) {
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

typedef struct case_ctx {
  metrale_qwen3_ssm_layer *layer;
  metrale_state_pool *pool;
  metrale_part part;
  int decode;
  uint32_t n; /* batch (decode) or tokens (prefill) */
  int32_t *slots, cu[2];
  gpu_ptr x, y;
} case_ctx;

static metrale_status case_once(void *p) {
  case_ctx *c = p;
  if (c->decode) return metrale_qwen3_ssm_decode(c->layer, c->pool, c->part, c->slots, c->n, c->x, c->y, NULL);
  return metrale_qwen3_ssm_prefill(c->layer, c->pool, c->part, c->cu, c->slots, 1, c->x, c->y, NULL);
}

/* Bytes a call must move and FLOPs it must do, counted from the shapes. */
static void count(const metrale_qwen3_config *g, metrale_part part, int decode, uint32_t n,
                  double *bytes, double *flops) {
  const double H = g->hidden_size, nv = g->nv, dk = g->dk, dv = g->dv;
  const double C = 2.0 * g->nk * dk + nv * dv, P = C + nv * dv + 2 * nv, K = g->conv_kernel;
  double wbytes = 2 * (P * H + H * nv * dv + C * K) + 4 * nv + 2 * nv + 2 * dv;
  double state = 4 * (nv * dk * dv + C * (K - 1)); /* per sequence */
  double seqs = decode ? n : 1;
  double act = 2 * n * (2 * H); /* input read, output written */
  *flops = 2 * n * (P * H + H * nv * dv) + n * nv * dk * dv * 8.0;
  if (part == METRALE_PART_LAYER) {
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
} result;

int cmd_bench(int argc, char **argv) {
  cli_opt opts[] = {
      {"--backend", 1, NULL, "auto|cpu|cuda|hip|vulkan (default: METRALE_BACKEND or auto)"},
      {"--part", 1, NULL, "mixer|layer (default mixer)"},
      {"--decode", 1, NULL, "decode batch sizes, e.g. 1,8,64,256 (default: 1 on cpu, else 1,8,64,256)"},
      {"--prefill", 1, NULL, "prefill token counts, e.g. 4096,16384 (default: 256 on cpu, else 4096,16384)"},
      {"--samples", 1, NULL, "timed samples per case, median reported (default 15)"},
      {"--warmup", 1, NULL, "untimed calls before timing (default 3)"},
      {"--json", 0, NULL, "print one JSON object instead of the table"},
  };
  int rc = cli_parse("bench", "[options]", opts, 7, argc, argv);
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

  metrale_qwen3_config cfg;
  a3b_config(&cfg);
  double bw = 0, tf = 0;
  fprintf(info, "metrale bench on %s (%s), part %s\n", be->name, be->caps.device_name,
          part == METRALE_PART_MIXER ? "mixer" : "layer (mixer + MoE)");
  fprintf(stderr, "measuring ceilings...\n");
  if (!s) s = bench_copy_bandwidth(dev, is_cpu ? (256u << 20) : (1ull << 30), &bw);
  if (!s) s = bench_gemm_rate(dev, is_cpu ? 512 : 8192, &tf);

  metrale_qwen3_ssm_layer *layer = NULL;
  metrale_random_source rs = {.seed = 80};
  uint64_t rss_before = cli_current_rss();
  cli_reset_peak_rss();
  double t_load = cli_now();
  if (!s) {
    fprintf(stderr, "creating the layer (random weights)...\n");
    if (part == METRALE_PART_MIXER) {
      /* the mixer alone needs no experts: a dense FFN of minimal width keeps memory low */
      cfg.num_experts = 0;
      cfg.intermediate_size = 1;
    }
    s = metrale_qwen3_ssm_layer_create(dev, &cfg, 0, metrale_weight_source_random(&rs), &layer);
  }
  t_load = cli_now() - t_load;
  uint64_t rss_peak = cli_peak_rss();
  uint64_t wbytes = layer ? metrale_qwen3_ssm_layer_weight_bytes(layer) : 0;

  uint32_t maxn = 1, maxb = 1;
  for (int i = 0; i < ndec; i++) maxb = dec[i] > maxb ? dec[i] : maxb, maxn = dec[i] > maxn ? dec[i] : maxn;
  for (int i = 0; i < npre; i++) maxn = pre[i] > maxn ? pre[i] : maxn;
  metrale_state_pool *pool = NULL;
  case_ctx c = {.layer = layer, .part = part};
  int32_t *slots = calloc(maxb, sizeof *slots);
  if (!s && !slots) s = METRALE_ERROR(OUT_OF_MEMORY, "slots");
  for (uint32_t i = 0; slots && i < maxb; i++) slots[i] = (int32_t)i;
  c.slots = slots;
  if (!s) s = metrale_state_pool_create(dev, metrale_state_dims_of(&cfg), maxb, &pool);
  c.pool = pool;
  if (!s) s = metrale_alloc(dev, (uint64_t)maxn * cfg.hidden_size * 4, &c.x); /* f32 room: the mixer part takes f32 */
  if (!s) s = metrale_alloc(dev, (uint64_t)maxn * cfg.hidden_size * 2, &c.y);
  if (!s) s = be->vt->memset(be, c.x, 0x3e, (uint64_t)maxn * cfg.hidden_size * 4, NULL); /* ~0.19 as bf16 and as f32 */

  result res[32];
  int nres = 0;
  for (int i = 0; i < ndec + npre && !s; i++) {
    c.decode = i < ndec;
    c.n = c.decode ? dec[i] : pre[i - ndec];
    c.cu[0] = 0, c.cu[1] = (int32_t)c.n;
    fprintf(stderr, "timing %s %u...\n", c.decode ? "decode batch" : "prefill tokens", c.n);
    result *r = &res[nres];
    r->kind = c.decode ? "decode" : "prefill";
    r->n = c.n;
    s = bench_time(dev, case_once, &c, (int)warmup, (int)samples, &r->median, &r->min);
    if (s) break;
    double bytes, flops;
    count(&cfg, part, c.decode, c.n, &bytes, &flops);
    r->gbps = bytes / r->median / 1e9;
    r->tflops = flops / r->median / 1e12;
    nres++;
  }
  if (!s) {
    if (json) {
      printf("{\"backend\": \"%s\", \"device\": \"%s\", \"part\": \"%s\", \"copy_gbps\": %.2f, "
             "\"gemm_tflops\": %.4f, \"weight_bytes\": %llu, \"load_seconds\": %.3f, "
             "\"load_peak_rss_delta_bytes\": %llu, \"results\": [",
             be->name, be->caps.device_name, part == METRALE_PART_MIXER ? "mixer" : "layer", bw, tf,
             (unsigned long long)wbytes, t_load,
             (unsigned long long)(rss_peak > rss_before ? rss_peak - rss_before : 0));
      for (int i = 0; i < nres; i++)
        printf("%s{\"kind\": \"%s\", \"n\": %u, \"median_us\": %.2f, \"min_us\": %.2f, \"gbps\": %.2f, "
               "\"pct_copy_bw\": %.1f, \"tflops\": %.4f}", i ? ", " : "", res[i].kind, res[i].n,
               res[i].median * 1e6, res[i].min * 1e6, res[i].gbps, 100 * res[i].gbps / bw, res[i].tflops);
      printf("]}\n");
    } else {
      printf("ceilings measured here: copy %.1f GB/s (read + write), gemm_bf16 %.3f TFLOP/s\n", bw, tf);
      printf("layer weights %.1f MB, created in %.2f s; peak host RSS growth while creating %.1f MB\n",
             (double)wbytes / 1e6, t_load, (double)(rss_peak > rss_before ? rss_peak - rss_before : 0) / 1e6);
      printf("%-8s %7s %12s %12s %10s %9s %10s\n", "case", "n", "median us", "min us", "GB/s",
             "% copy", "TFLOP/s");
      for (int i = 0; i < nres; i++)
        printf("%-8s %7u %12.1f %12.1f %10.1f %8.1f%% %10.3f\n", res[i].kind, res[i].n, res[i].median * 1e6,
               res[i].min * 1e6, res[i].gbps, 100 * res[i].gbps / bw, res[i].tflops);
    }
  }
  if (dev) {
    metrale_free(dev, c.x);
    metrale_free(dev, c.y);
  }
  free(slots);
  metrale_state_pool_destroy(pool);
  metrale_qwen3_ssm_layer_destroy(layer);
  metrale_device_destroy(dev);
  if (s) return cli_fail("bench", s);
  return CLI_OK;
}
