/* Loading a layer from a checkpoint keeps peak resident memory under 1.25x the layer's
 * weight bytes (issue: loaders).  The checkpoint is written here, ~110 MB, MoE shaped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "metrale/metrale.h"

#define CHECK(expr)                                                                 \
  do {                                                                              \
    metrale_status s_ = (expr);                                                     \
    cr_assert(s_ == METRALE_OK, "%s: %s", #expr, metrale_status_message(s_));       \
  } while (0)

/* The bound.  Under AddressSanitizer every allocation carries shadow memory (1/8 of its
 * bytes) and redzones, and freed blocks wait in a quarantine, all counted in the resident
 * set: the same loader measures 1.26-1.32x there (1.01x in the Release build, which runs this
 * test too), so the sanitizer build checks a looser bound that still catches a second copy
 * of the weights. */
#if defined(__SANITIZE_ADDRESS__)
#define PEAK_LIMIT 1.45
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PEAK_LIMIT 1.45
#endif
#endif
#ifndef PEAK_LIMIT
#define PEAK_LIMIT 1.25
#endif

enum { H = 1024, NK = 4, NV = 8, DK = 128, DV = 128, KW = 4, E = 32, TOPK = 4, MI = 512, SI = 512 };

static const char config_json[] =
    "{\"model_type\": \"qwen3_next\", \"hidden_size\": 1024, \"num_hidden_layers\": 1,"
    " \"linear_num_key_heads\": 4, \"linear_num_value_heads\": 8, \"linear_key_head_dim\": 128,"
    " \"linear_value_head_dim\": 128, \"linear_conv_kernel_dim\": 4, \"rms_norm_eps\": 1e-6,"
    " \"intermediate_size\": 2048, \"num_experts\": 32, \"num_experts_per_tok\": 4,"
    " \"moe_intermediate_size\": 512, \"shared_expert_intermediate_size\": 512,"
    " \"decoder_sparse_step\": 1, \"norm_topk_prob\": true, \"mlp_only_layers\": [],"
    " \"layer_types\": [\"linear_attention\"]}";

typedef struct tensor_list {
  metrale_tensor_out t[160];
  char names[160][96];
  size_t n;
} tensor_list;

static void add(tensor_list *l, const char *name, metrale_dtype dt, uint32_t ndim, uint64_t d0,
                uint64_t d1, uint64_t d2) {
  cr_assert(l->n < 160);
  metrale_tensor_out *o = &l->t[l->n];
  snprintf(l->names[l->n], sizeof l->names[0], "model.layers.0.%s", name);
  o->name = l->names[l->n];
  o->dtype = dt;
  o->ndim = ndim;
  o->shape[0] = d0, o->shape[1] = d1, o->shape[2] = d2;
  uint64_t n = d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
  size_t bytes = n * (dt == METRALE_DTYPE_F32 ? 4 : 2);
  uint16_t *v = malloc(bytes);
  cr_assert(v);
  for (size_t i = 0; i < bytes / 2; i++) v[i] = (uint16_t)(0x3c00u + (i * 2654435761u >> 24 & 0xff));
  o->data = v;
  l->n++;
}

static void write_checkpoint(const char *dir) {
  tensor_list *l = calloc(1, sizeof *l);
  const uint64_t C = 2 * NK * DK + NV * DV, NQ = NK * (2 * DK + 2 * (NV / NK) * DV);
  add(l, "input_layernorm.weight", METRALE_DTYPE_BF16, 1, H, 0, 0);
  add(l, "post_attention_layernorm.weight", METRALE_DTYPE_BF16, 1, H, 0, 0);
  add(l, "linear_attn.in_proj_qkvz.weight", METRALE_DTYPE_BF16, 2, NQ, H, 0);
  add(l, "linear_attn.in_proj_ba.weight", METRALE_DTYPE_BF16, 2, 2 * NV, H, 0);
  add(l, "linear_attn.conv1d.weight", METRALE_DTYPE_BF16, 3, C, 1, KW);
  add(l, "linear_attn.A_log", METRALE_DTYPE_F32, 1, NV, 0, 0);
  add(l, "linear_attn.dt_bias", METRALE_DTYPE_BF16, 1, NV, 0, 0);
  add(l, "linear_attn.norm.weight", METRALE_DTYPE_BF16, 1, DV, 0, 0);
  add(l, "linear_attn.out_proj.weight", METRALE_DTYPE_BF16, 2, H, NV * DV, 0);
  add(l, "mlp.gate.weight", METRALE_DTYPE_BF16, 2, E, H, 0);
  add(l, "mlp.shared_expert_gate.weight", METRALE_DTYPE_BF16, 2, 1, H, 0);
  add(l, "mlp.shared_expert.gate_proj.weight", METRALE_DTYPE_BF16, 2, SI, H, 0);
  add(l, "mlp.shared_expert.up_proj.weight", METRALE_DTYPE_BF16, 2, SI, H, 0);
  add(l, "mlp.shared_expert.down_proj.weight", METRALE_DTYPE_BF16, 2, H, SI, 0);
  char name[96];
  for (int e = 0; e < E; e++) {
    snprintf(name, sizeof name, "mlp.experts.%d.gate_proj.weight", e);
    add(l, name, METRALE_DTYPE_BF16, 2, MI, H, 0);
    snprintf(name, sizeof name, "mlp.experts.%d.up_proj.weight", e);
    add(l, name, METRALE_DTYPE_BF16, 2, MI, H, 0);
    snprintf(name, sizeof name, "mlp.experts.%d.down_proj.weight", e);
    add(l, name, METRALE_DTYPE_BF16, 2, H, MI, 0);
  }
  char path[600];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  CHECK(metrale_safetensors_write(path, l->t, l->n));
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs(config_json, f);
  fclose(f);
  for (size_t i = 0; i < l->n; i++) free((void *)l->t[i].data);
  free(l);
}

Test(load_memory, peak_rss_under_1_25x_weight_bytes, .timeout = 300) {
  char dir[] = "/tmp/metrale-load-XXXXXX";
  cr_assert(mkdtemp(dir));
  write_checkpoint(dir);
  metrale_device_options o = {.backend = "cpu"}; /* device memory is host memory: the strict case */
  metrale_device *dev = NULL;
  CHECK(metrale_device_open(&o, &dev));
  char path[600];
  snprintf(path, sizeof path, "%s/config.json", dir);
  metrale_qwen3_config cfg;
  CHECK(metrale_config_load(path, &cfg));
  metrale_checkpoint *ckpt = NULL;
  CHECK(metrale_checkpoint_open(dir, &ckpt));

  uint64_t before = cli_current_rss();
  cli_reset_peak_rss();
  metrale_checkpoint_source src = {ckpt, 0};
  metrale_qwen3_ssm_layer *layer = NULL;
  CHECK(metrale_qwen3_ssm_layer_create(dev, &cfg, 0, metrale_weight_source_checkpoint(&src), &layer));
  uint64_t peak = cli_peak_rss();
  uint64_t weights = metrale_qwen3_ssm_layer_weight_bytes(layer);
  double ratio = (double)(peak - before) / (double)weights;
  cr_log_info("layer weights %.1f MB, peak RSS growth while loading %.1f MB (%.2fx)", weights / 1e6,
              (peak - before) / 1e6, ratio);
  cr_expect(weights > 100000000ull, "the test layer should be over 100 MB, is %llu", (unsigned long long)weights);
  cr_expect(ratio <= PEAK_LIMIT, "loading took %.2fx the weight bytes of peak memory (limit %.2fx)", ratio,
            PEAK_LIMIT);

  metrale_qwen3_ssm_layer_destroy(layer);
  metrale_checkpoint_close(ckpt);
  metrale_device_destroy(dev);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/config.json", dir);
  unlink(path);
  rmdir(dir);
}
