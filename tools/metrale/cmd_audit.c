/* metrale audit: every backend's availability, and per available backend the kernel
 * audit (DESIGN.md section 3) plus the paths the layer takes on it. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

/* A small MoE layer shape, only to show which kernels the layer picks. */
static void tiny_config(metrale_qwen3_config *c) {
  memset(c, 0, sizeof *c);
  c->family = METRALE_QWEN3_NEXT;
  c->hidden_size = 64;
  c->num_hidden_layers = 1;
  c->nk = 1, c->nv = 2, c->dk = 16, c->dv = 16, c->conv_kernel = 4;
  c->rms_norm_eps = 1e-6f;
  c->num_experts = 4, c->num_experts_per_tok = 2, c->moe_intermediate_size = 16;
  c->shared_expert_intermediate_size = 16, c->decoder_sparse_step = 1, c->norm_topk_prob = 1;
  c->intermediate_size = 32;
  c->linear_layer[0] = 1;
}

/* --config: the config read once, its path and the layer whose paths are described */
typedef struct audit_config {
  const char *path;
  metrale_qwen3_config cfg;
  uint32_t layer;
} audit_config;

static int audit_one(const char *name, int verbose, const audit_config *config) {
  metrale_backend_report r;
  metrale_backend_probe(name, &r);
  printf("%-7s %s: %s\n", r.name, r.available ? "available" : "unavailable", r.reason);
  if (r.module_path[0]) printf("        module: %s\n", r.module_path);
  if (r.targets[0]) {
    printf("        kernels carried per target:\n");
    const char *line = r.targets;
    while (*line) {
      const char *nl = strchr(line, '\n');
      int len = nl ? (int)(nl - line) : (int)strlen(line);
      printf("          %.*s\n", len, line);
      line += len + (nl ? 1 : 0);
    }
  }
  if (!r.available || !verbose) return r.available ? CLI_OK : CLI_ERROR;

  metrale_device_options o = {.backend = name};
  metrale_device *dev = NULL;
  metrale_status s = metrale_device_open(&o, &dev);
  if (s) return cli_fail("audit", s);
  gpu_caps *caps = &metrale_device_backend(dev)->caps;
  printf("        device: %s, arch %s, %u compute units, subgroup %u, %.1f GB\n", caps->device_name,
         caps->arch, caps->sm_count, caps->subgroup_size, (double)caps->memory_bytes / 1e9);
  printf("        fp16 products at the bf16 rate: %s; early start of the manifest's early-start rows: %s\n",
         caps->flags & GPU_CAP_F16_TENSOR ? "yes" : "no (or METRALE_NO_FP16)",
         caps->flags & GPU_CAP_EARLY_START ? "yes" : "no (or METRALE_NO_EARLY_START)");
  int missing = metrale_device_audit(dev, stdout);
  int rc = CLI_OK;
  if (missing) {
    printf("        %d required kernel(s) missing: the layer cannot run on %s\n", missing, name);
    rc = CLI_CHECK_FAILED;
  } else {
    metrale_qwen3_config cfg;
    tiny_config(&cfg);
    metrale_random_source rs = {.seed = 1};
    metrale_qwen3_ssm_layer *layer = NULL;
    s = metrale_qwen3_ssm_layer_create(dev, &cfg, 0, metrale_weight_source_random(&rs), &layer);
    if (s) {
      rc = cli_fail("audit", s);
    } else {
      printf("        paths the layer takes:\n");
      metrale_qwen3_ssm_layer_describe(layer, stdout);
      metrale_qwen3_ssm_layer_destroy(layer);
      printf("        at the Qwen3-Next-80B-A3B shape (what `metrale bench` times):\n");
      bench_a3b_config(&cfg);
      s = metrale_qwen3_ssm_describe_shape(dev, &cfg, 0, stdout);
      if (!s && config) {
        printf("        at the shape of %s, layer %u:\n", config->path, config->layer);
        s = metrale_qwen3_ssm_describe_shape(dev, &config->cfg, config->layer, stdout);
      }
      if (s) rc = cli_fail("audit", s);
    }
  }
  metrale_device_destroy(dev);
  return rc;
}

int cmd_audit(int argc, char **argv) {
  cli_opt opts[] = {
      {"--backend", 1, NULL, "only this backend (cpu, cuda, hip, vulkan); default: all"},
      {"--config", 1, NULL,
       "also the paths at the shape of this config.json (Qwen3-Next or Qwen3.5), its first linear-attention layer"},
  };
  int rc = cli_parse("audit", "[--backend NAME] [--config FILE]", opts, 2, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  audit_config ac;
  const audit_config *config = NULL;
  if (opts[1].value) { /* a bad file fails once, before any backend's lines */
    ac.path = opts[1].value;
    metrale_status s = metrale_config_load(ac.path, &ac.cfg);
    if (!s) s = bench_config_layer(&ac.cfg, ac.path, 0, &ac.layer);
    if (s) return cli_fail("audit", s);
    config = &ac;
  }
  if (opts[0].value && strcmp(opts[0].value, "auto") != 0) return audit_one(opts[0].value, 1, config);
  const size_t n = metrale_backend_count();
  rc = CLI_OK;
  for (size_t i = 0; i < n; i++) {
    int r = audit_one(metrale_backend_name(i), 1, config);
    if (r == CLI_CHECK_FAILED) rc = r;
    printf("\n");
  }
  return rc;
}
