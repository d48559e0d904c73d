/* metrale demo: needs no files.  Seeds a small Qwen3-Next MoE layer, runs three
 * sequences through prefill and through token-by-token decode on the chosen backend,
 * and checks decode against prefill and both against the CPU reference backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

#define TOL 1.5e-2 /* relative L2, the tolerance of every bf16 path (DESIGN.md section 7) */

static void demo_config(metrale_qwen3_config *c) {
  memset(c, 0, sizeof *c);
  c->family = METRALE_QWEN3_NEXT;
  c->hidden_size = 256;
  c->num_hidden_layers = 1;
  c->nk = 2, c->nv = 4, c->dk = 64, c->dv = 64, c->conv_kernel = 4;
  c->rms_norm_eps = 1e-6f;
  c->num_experts = 16, c->num_experts_per_tok = 4, c->moe_intermediate_size = 128;
  c->shared_expert_intermediate_size = 128, c->decoder_sparse_step = 1, c->norm_topk_prob = 1;
  c->intermediate_size = 512;
  c->linear_layer[0] = 1;
}

typedef struct demo_run {
  float *y, *conv, *rec; /* outputs and final states of all sequences */
  double seconds;
} demo_run;

static double rel_l2(const float *a, const float *b, uint64_t n) {
  double num = 0, den = 0;
  for (uint64_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static metrale_status run_on(const char *backend, const metrale_qwen3_config *cfg, const float *x,
                             const uint32_t *lens, uint32_t nseq, run_mode mode, demo_run *out,
                             char *device_name, size_t name_cap) {
  run_ctx c;
  memset(&c, 0, sizeof c);
  c.H = cfg->hidden_size;
  c.nseq = nseq;
  c.part = METRALE_PART_LAYER;
  uint64_t T = 0;
  for (uint32_t i = 0; i < nseq; i++) c.first[i] = T, c.len[i] = lens[i], T += lens[i];
  metrale_device_options o = {.backend = backend};
  metrale_status s = metrale_device_open(&o, &c.dev);
  if (s) return s;
  c.be = metrale_device_backend(c.dev);
  if (device_name) snprintf(device_name, name_cap, "%s (%s)", c.be->name, c.be->caps.device_name);
  metrale_random_source rs = {.seed = 2026};
  metrale_state_dims dims = metrale_state_dims_of(cfg);
  s = metrale_qwen3_ssm_layer_create(c.dev, cfg, 0, metrale_weight_source_random(&rs), &c.layer);
  if (!s) s = metrale_state_pool_create(c.dev, dims, nseq, &c.pool);
  c.x = (float *)x;
  c.y = out->y;
  if (!s) s = metrale_alloc(c.dev, T * c.H * 4, &c.dx);
  if (!s) s = metrale_alloc(c.dev, T * c.H * 2, &c.dy);
  double t0 = cli_now();
  if (!s) s = driver_run(&c, mode, 0);
  out->seconds = cli_now() - t0;
  uint64_t cf = (uint64_t)dims.conv_dim * (dims.conv_width - 1), rf = (uint64_t)dims.nv * dims.dk * dims.dv;
  for (uint32_t i = 0; i < nseq && !s; i++)
    s = metrale_state_pool_read(c.pool, (int32_t)i, out->conv + cf * i, out->rec + rf * i);
  metrale_free(c.dev, c.dx);
  metrale_free(c.dev, c.dy);
  metrale_state_pool_destroy(c.pool);
  metrale_qwen3_ssm_layer_destroy(c.layer);
  metrale_device_destroy(c.dev);
  return s;
}

static int check(const char *what, double err) {
  int ok = err <= TOL && !isnan(err);
  printf("  %-44s rel L2 %.2e  %s\n", what, err, ok ? "ok" : "FAIL");
  return ok;
}

int cmd_demo(int argc, char **argv) {
  cli_opt opts[] = {
      {"--backend", 1, NULL, "auto|cpu|cuda|hip|vulkan (default: METRALE_BACKEND or auto)"},
  };
  int rc = cli_parse("demo", "[--backend NAME]", opts, 1, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;

  metrale_qwen3_config cfg;
  demo_config(&cfg);
  const uint32_t lens[] = {37, 5, 20}, nseq = 3;
  uint64_t T = 0;
  for (uint32_t i = 0; i < nseq; i++) T += lens[i];
  const uint64_t H = cfg.hidden_size;
  metrale_state_dims dims = metrale_state_dims_of(&cfg);
  uint64_t cf = (uint64_t)dims.conv_dim * (dims.conv_width - 1), rf = (uint64_t)dims.nv * dims.dk * dims.dv;

  float *x = malloc(T * H * sizeof *x);
  demo_run runs[3];
  int alloc_ok = x != NULL;
  for (int r = 0; r < 3; r++) {
    runs[r].y = calloc(T * H, sizeof(float));
    runs[r].conv = calloc(cf * nseq, sizeof(float));
    runs[r].rec = calloc(rf * nseq, sizeof(float));
    alloc_ok = alloc_ok && runs[r].y && runs[r].conv && runs[r].rec;
  }
  metrale_status s = alloc_ok ? METRALE_OK : METRALE_ERROR(OUT_OF_MEMORY, "demo buffers");
  uint64_t st = 7;
  for (uint64_t i = 0; !s && i < T * H; i++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = metrale_bf16_to_f32(metrale_f32_to_bf16(((float)(st >> 40) / 16777216.0f - 0.5f) * 3.0f));
  }
  char device[256] = "";
  if (!s) s = run_on(opts[0].value, &cfg, x, lens, nseq, MODE_PREFILL, &runs[0], device, sizeof device);
  if (!s) s = run_on(opts[0].value, &cfg, x, lens, nseq, MODE_DECODE, &runs[1], NULL, 0);
  if (!s) s = run_on("cpu", &cfg, x, lens, nseq, MODE_PREFILL, &runs[2], NULL, 0);
  int ok = 1;
  if (!s) {
    printf("metrale demo on %s\n", device);
    printf("  layer: Qwen3-Next GDN mixer + MoE (%u experts, top %u), hidden %u, %u/%u heads of %u\n",
           cfg.num_experts, cfg.num_experts_per_tok, cfg.hidden_size, cfg.nk, cfg.nv, cfg.dk);
    printf("  sequences of %u, %u and %u tokens: prefill %.1f ms, decode token by token %.1f ms\n",
           lens[0], lens[1], lens[2], runs[0].seconds * 1e3, runs[1].seconds * 1e3);
    ok &= check("decode output vs prefill output", rel_l2(runs[1].y, runs[0].y, T * H));
    ok &= check("decode recurrent state vs prefill", rel_l2(runs[1].rec, runs[0].rec, rf * nseq));
    ok &= check("decode conv state vs prefill", rel_l2(runs[1].conv, runs[0].conv, cf * nseq));
    ok &= check("prefill output vs CPU reference backend", rel_l2(runs[0].y, runs[2].y, T * H));
    ok &= check("recurrent state vs CPU reference backend", rel_l2(runs[0].rec, runs[2].rec, rf * nseq));
    double sum = 0;
    for (uint64_t i = 0; i < T * H; i++) sum += fabs(runs[0].y[i]);
    printf("  mean |output| %.4f\n", sum / (double)(T * H));
    printf("%s\n", ok ? "demo: all checks passed" : "demo: CHECKS FAILED");
  }
  free(x);
  for (int r = 0; r < 3; r++) free(runs[r].y), free(runs[r].conv), free(runs[r].rec);
  if (s) return cli_fail("demo", s);
  return ok ? CLI_OK : CLI_CHECK_FAILED;
}
