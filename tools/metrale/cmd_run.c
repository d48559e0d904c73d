/* metrale run: one layer of an HF checkpoint on a safetensors input (DESIGN.md section 6). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#include "driver.h"

/* Finds input or input.0, input.1, ...; checks shapes; reads them as bf16. */
static metrale_status read_inputs(run_ctx *c, const char *path, metrale_safetensors *in, int *suffixed) {
  const metrale_tensor_info *single = metrale_safetensors_find(in, "input");
  char name[32];
  c->nseq = 0;
  if (single) {
    *suffixed = 0;
    c->nseq = 1;
    if (metrale_safetensors_find(in, "input.0"))
      fprintf(stderr, "metrale run: note: %s has both 'input' and 'input.0'; running 'input' only\n", path);
  } else {
    *suffixed = 1;
    for (;;) {
      snprintf(name, sizeof name, "input.%u", c->nseq);
      if (!metrale_safetensors_find(in, name)) break;
      if (++c->nseq > MAX_SEQS)
        return METRALE_ERROR(INVALID_ARGUMENT, "%s: more than %d sequences", path, MAX_SEQS);
    }
    if (c->nseq == 0)
      return METRALE_ERROR(NOT_FOUND, "%s has neither 'input' nor 'input.0'", path);
  }
  uint64_t T = 0;
  for (uint32_t i = 0; i < c->nseq; i++) {
    snprintf(name, sizeof name, *suffixed ? "input.%u" : "input", i);
    const metrale_tensor_info *t = metrale_safetensors_find(in, name);
    if (t->ndim != 2 || t->shape[1] != c->H)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: '%s' must be [T, %u] (T tokens of the hidden size)",
                           path, name, c->H);
    if (t->dtype != METRALE_DTYPE_BF16 && t->dtype != METRALE_DTYPE_F32)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: '%s' must be BF16 or F32, not %s", path, name,
                           metrale_dtype_name(t->dtype));
    if (t->shape[0] == 0 || t->shape[0] > (1u << 24))
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: '%s' has %llu tokens (need 1..%u)", path, name,
                           (unsigned long long)t->shape[0], 1u << 24);
    c->first[i] = T;
    c->len[i] = (uint32_t)t->shape[0];
    T += t->shape[0];
  }
  if (T * c->H > (1ull << 32)) return METRALE_ERROR(INVALID_ARGUMENT, "%s: input too large", path);
  c->x = malloc(T * c->H * sizeof *c->x);
  c->y = calloc(T * c->H, sizeof *c->y);
  metrale_status s = (!c->x || !c->y) ? METRALE_ERROR(OUT_OF_MEMORY, "input of %llu tokens",
                                                     (unsigned long long)T)
                                      : METRALE_OK;
  for (uint32_t i = 0; i < c->nseq && !s; i++) {
    snprintf(name, sizeof name, *suffixed ? "input.%u" : "input", i);
    uint64_t count = (uint64_t)c->len[i] * c->H;
    s = metrale_safetensors_read_f32(in, name, c->x + c->first[i] * c->H, count);
  }
  if (!s) s = metrale_alloc(c->dev, T * c->H * 4, &c->dx);
  if (!s) s = metrale_alloc(c->dev, T * c->H * 2, &c->dy);
  return s;
}

static metrale_status write_outputs(run_ctx *c, const char *path, int suffixed) {
  metrale_state_dims d = metrale_state_pool_dims(c->pool);
  uint64_t cf = metrale_state_pool_conv_floats(c->pool), rf = metrale_state_pool_recurrent_floats(c->pool);
  metrale_tensor_out *t = calloc(3ull * c->nseq, sizeof *t);
  char (*names)[32] = calloc(3ull * c->nseq, 32);
  float *conv = malloc(cf * c->nseq * sizeof(float)), *rec = malloc(rf * c->nseq * sizeof(float));
  metrale_status s = (!t || !names || !conv || !rec) ? METRALE_ERROR(OUT_OF_MEMORY, "outputs") : METRALE_OK;
  for (uint32_t i = 0; i < c->nseq && !s; i++) {
    s = metrale_state_pool_read(c->pool, (int32_t)i, conv + cf * i, rec + rf * i);
    const char *sfx_fmt = suffixed ? "%s.%u" : "%s";
    metrale_tensor_out *o = &t[3 * i];
    snprintf(names[3 * i], 32, sfx_fmt, "output", i);
    o[0] = (metrale_tensor_out){names[3 * i], METRALE_DTYPE_F32, 2, {c->len[i], c->H}, c->y + c->first[i] * c->H};
    snprintf(names[3 * i + 1], 32, sfx_fmt, "recurrent_state", i);
    o[1] = (metrale_tensor_out){names[3 * i + 1], METRALE_DTYPE_F32, 3, {d.nv, d.dk, d.dv}, rec + rf * i};
    snprintf(names[3 * i + 2], 32, sfx_fmt, "conv_state", i);
    o[2] = (metrale_tensor_out){names[3 * i + 2], METRALE_DTYPE_F32, 2, {d.conv_dim, d.conv_width - 1},
                                conv + cf * i};
  }
  if (!s) s = metrale_safetensors_write(path, t, 3ull * c->nseq);
  free(t);
  free(names);
  free(conv);
  free(rec);
  return s;
}

static metrale_status parse_mode(const char *text, run_mode *mode, uint32_t *split) {
  if (!text || strcmp(text, "prefill") == 0) *mode = MODE_PREFILL;
  else if (strcmp(text, "decode") == 0) *mode = MODE_DECODE;
  else if (strncmp(text, "split:", 6) == 0) {
    *mode = MODE_SPLIT;
    METRALE_RETURN_IF_ERROR(cli_parse_u32("--mode split:N", text + 6, split));
  } else
    return METRALE_ERROR(INVALID_ARGUMENT, "--mode must be prefill, decode or split:N, not '%s'", text);
  return METRALE_OK;
}

int cmd_run(int argc, char **argv) {
  cli_opt opts[] = {
      {"--model", 1, NULL, "HF checkpoint folder (config.json + safetensors)"},
      {"--layer", 1, NULL, "layer index N (weights under model.layers.N.)"},
      {"--input", 1, NULL, "safetensors with input [T, hidden] or input.0, input.1, ..."},
      {"--output", 1, NULL, "safetensors to write (output, recurrent_state, conv_state)"},
      {"--backend", 1, NULL, "auto|cpu|cuda|hip|vulkan (default: METRALE_BACKEND or auto)"},
      {"--part", 1, NULL, "mixer|layer (default layer)"},
      {"--mode", 1, NULL, "prefill|decode|split:N (default prefill)"},
      {"--no-graphs", 0, NULL, "launch decode steps eagerly even where the backend replays graphs"},
  };
  int rc = cli_parse("run", "--model DIR --layer N --input IN --output OUT [options]", opts, 8, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  for (int i = 0; i < 4; i++)
    if (!opts[i].value) {
      fprintf(stderr, "metrale run: %s is required (see metrale run --help)\n", opts[i].name);
      return CLI_ERROR;
    }
  run_ctx c;
  memset(&c, 0, sizeof c);
  run_mode mode = MODE_PREFILL;
  uint32_t split = 0, layer_index = 0;
  metrale_status s = parse_mode(opts[6].value, &mode, &split);
  if (!s) s = cli_parse_u32("--layer", opts[1].value, &layer_index);
  c.part = METRALE_PART_LAYER;
  if (!s && opts[5].value) {
    if (strcmp(opts[5].value, "mixer") == 0) c.part = METRALE_PART_MIXER;
    else if (strcmp(opts[5].value, "layer") != 0)
      s = METRALE_ERROR(INVALID_ARGUMENT, "--part must be mixer or layer, not '%s'", opts[5].value);
  }
  if (s) return cli_fail("run", s);

  char cfg_path[4096];
  snprintf(cfg_path, sizeof cfg_path, "%s/config.json", opts[0].value);
  metrale_qwen3_config cfg;
  metrale_checkpoint *ckpt = NULL;
  metrale_safetensors *in = NULL;
  int suffixed = 0;
  s = metrale_config_load(cfg_path, &cfg);
  if (!s) s = metrale_checkpoint_open(opts[0].value, &ckpt);
  if (!s) s = metrale_safetensors_open(opts[2].value, &in);
  if (!s) {
    metrale_device_options dopts = {.backend = opts[4].value};
    s = metrale_device_open(&dopts, &c.dev);
  }
  if (!s) {
    c.be = metrale_device_backend(c.dev);
    c.H = cfg.hidden_size;
    metrale_checkpoint_source src = {ckpt, layer_index};
    s = metrale_qwen3_ssm_layer_create(c.dev, &cfg, layer_index, metrale_weight_source_checkpoint(&src), &c.layer);
  }
  if (!s) s = read_inputs(&c, opts[2].value, in, &suffixed);
  if (!s) s = metrale_state_pool_create(c.dev, metrale_state_dims_of(&cfg), c.nseq, &c.pool);
  if (!s && opts[7].value) metrale_qwen3_ssm_layer_set_graphs(c.layer, 0);
  if (!s) s = driver_run(&c, mode, split);
  if (!s) s = write_outputs(&c, opts[3].value, suffixed);

  if (c.dev) {
    metrale_free(c.dev, c.dx);
    metrale_free(c.dev, c.dy);
  }
  metrale_state_pool_destroy(c.pool);
  metrale_qwen3_ssm_layer_destroy(c.layer);
  metrale_device_destroy(c.dev);
  metrale_safetensors_close(in);
  metrale_checkpoint_close(ckpt);
  free(c.x);
  free(c.y);
  if (s) return cli_fail("run", s);
  return CLI_OK;
}
