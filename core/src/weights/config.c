/* config.json of Qwen3-Next and Qwen3.5: the fields the SSM decoder layer needs, checked
 * for type and range so that later size arithmetic cannot overflow. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weights_internal.h"

#define MAX_WIDTH 65536u     /* hidden, nk*dk, nv*dv */
#define MAX_HEAD_DIM 4096u   /* also bounds the head counts */
#define MAX_FFN (1u << 20)   /* intermediate sizes */
#define MAX_EXPERTS 65536u

/* Where the model fields sit: the root object, or "text_config" of a multimodal config. */
typedef struct reader {
  const json_t *obj;
  const char *prefix; /* "" or "text_config." */
} reader;

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a non-integer number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
  }
  return "something else";
}

/* An integer field in [lo, hi]; absent (or null) gives def, or an error when required. */
static metrale_status get_u32(const reader *r, const char *key, int required, uint32_t def,
                              uint32_t lo, uint32_t hi, uint32_t *out) {
  const json_t *v = json_object_get(r->obj, key);
  if (!v || json_is_null(v)) {
    if (required)
      return METRALE_ERROR(DATA_LOSS, "config field \"%s%s\" is missing", r->prefix, key);
    *out = def;
    return METRALE_OK;
  }
  if (!json_is_integer(v))
    return METRALE_ERROR(DATA_LOSS, "config field \"%s%s\" must be an integer, found %s",
                         r->prefix, key, type_name(v));
  json_int_t i = json_integer_value(v);
  if (i < (json_int_t)lo || i > (json_int_t)hi)
    return METRALE_ERROR(DATA_LOSS, "config field \"%s%s\" = %lld is out of range [%u, %u]",
                         r->prefix, key, (long long)i, lo, hi);
  *out = (uint32_t)i;
  return METRALE_OK;
}

static metrale_status get_bool(const reader *r, const char *key, int def, int *out) {
  const json_t *v = json_object_get(r->obj, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return METRALE_OK;
  }
  if (!json_is_boolean(v))
    return METRALE_ERROR(DATA_LOSS, "config field \"%s%s\" must be true or false, found %s",
                         r->prefix, key, type_name(v));
  *out = json_is_true(v);
  return METRALE_OK;
}

static metrale_status get_eps(const reader *r, float *out) {
  const json_t *v = json_object_get(r->obj, "rms_norm_eps");
  if (!v) return METRALE_ERROR(DATA_LOSS, "config field \"%srms_norm_eps\" is missing", r->prefix);
  if (!json_is_number(v))
    return METRALE_ERROR(DATA_LOSS, "config field \"%srms_norm_eps\" must be a number, found %s",
                         r->prefix, type_name(v));
  double e = json_number_value(v);
  if (!(e > 0.0 && e < 1.0))
    return METRALE_ERROR(DATA_LOSS, "config field \"%srms_norm_eps\" = %g is not in (0, 1)",
                         r->prefix, e);
  *out = (float)e;
  return METRALE_OK;
}

static metrale_status get_layers(const reader *r, metrale_qwen3_config *c) {
  uint32_t L = c->num_hidden_layers;
  const json_t *types = json_object_get(r->obj, "layer_types");
  if (types && !json_is_null(types)) {
    if (!json_is_array(types))
      return METRALE_ERROR(DATA_LOSS, "config field \"%slayer_types\" must be an array, found %s",
                           r->prefix, type_name(types));
    if (json_array_size(types) != L)
      return METRALE_ERROR(DATA_LOSS,
                           "config field \"%slayer_types\" lists %zu layers, num_hidden_layers is %u",
                           r->prefix, json_array_size(types), L);
    for (uint32_t i = 0; i < L; i++) {
      const char *s = json_string_value(json_array_get(types, i));
      if (s && strcmp(s, "linear_attention") == 0) c->linear_layer[i] = 1;
      else if (s && strcmp(s, "full_attention") == 0) c->linear_layer[i] = 0;
      else
        return METRALE_ERROR(DATA_LOSS,
                             "config field \"%slayer_types[%u]\" must be \"linear_attention\" or "
                             "\"full_attention\"",
                             r->prefix, i);
    }
  } else {
    uint32_t interval = 0;
    METRALE_RETURN_IF_ERROR(get_u32(r, "full_attention_interval", 0, 4, 1, UINT32_MAX, &interval));
    for (uint32_t i = 0; i < L; i++) c->linear_layer[i] = (i + 1) % interval != 0;
  }

  const json_t *mlp_only = json_object_get(r->obj, "mlp_only_layers");
  if (!mlp_only || json_is_null(mlp_only)) return METRALE_OK;
  if (!json_is_array(mlp_only))
    return METRALE_ERROR(DATA_LOSS, "config field \"%smlp_only_layers\" must be an array, found %s",
                         r->prefix, type_name(mlp_only));
  for (size_t i = 0; i < json_array_size(mlp_only); i++) {
    const json_t *v = json_array_get(mlp_only, i);
    json_int_t layer = json_is_integer(v) ? json_integer_value(v) : -1;
    if (layer < 0 || layer >= (json_int_t)L)
      return METRALE_ERROR(DATA_LOSS,
                           "config field \"%smlp_only_layers[%zu]\" is not a layer index in [0, %u)",
                           r->prefix, i, L);
    c->mlp_only_layer[layer] = 1;
  }
  return METRALE_OK;
}

static metrale_status get_moe(const reader *r, metrale_qwen3_config *c) {
  METRALE_RETURN_IF_ERROR(get_u32(r, "num_experts", 0, 0, 0, MAX_EXPERTS, &c->num_experts));
  int moe = c->num_experts > 0;
  METRALE_RETURN_IF_ERROR(get_u32(r, "num_experts_per_tok", moe, 0, moe, MAX_EXPERTS,
                                  &c->num_experts_per_tok));
  if (moe && c->num_experts_per_tok > c->num_experts)
    return METRALE_ERROR(DATA_LOSS,
                         "config: num_experts_per_tok (%u) is larger than num_experts (%u)",
                         c->num_experts_per_tok, c->num_experts);
  METRALE_RETURN_IF_ERROR(get_u32(r, "moe_intermediate_size", moe, 0, moe, MAX_FFN,
                                  &c->moe_intermediate_size));
  METRALE_RETURN_IF_ERROR(get_u32(r, "shared_expert_intermediate_size", 0, 0, 0, MAX_FFN,
                                  &c->shared_expert_intermediate_size));
  METRALE_RETURN_IF_ERROR(get_u32(r, "decoder_sparse_step", 0, 1, 1, UINT32_MAX,
                                  &c->decoder_sparse_step));
  return get_bool(r, "norm_topk_prob", 1, &c->norm_topk_prob);
}

static metrale_status parse_fields(const reader *r, metrale_qwen3_config *c) {
  METRALE_RETURN_IF_ERROR(get_u32(r, "hidden_size", 1, 0, 1, MAX_WIDTH, &c->hidden_size));
  METRALE_RETURN_IF_ERROR(get_u32(r, "num_hidden_layers", 1, 0, 1, METRALE_MAX_LAYERS,
                                  &c->num_hidden_layers));
  METRALE_RETURN_IF_ERROR(get_u32(r, "linear_num_key_heads", 1, 0, 1, MAX_HEAD_DIM, &c->nk));
  METRALE_RETURN_IF_ERROR(get_u32(r, "linear_num_value_heads", 1, 0, 1, MAX_HEAD_DIM, &c->nv));
  METRALE_RETURN_IF_ERROR(get_u32(r, "linear_key_head_dim", 1, 0, 1, MAX_HEAD_DIM, &c->dk));
  METRALE_RETURN_IF_ERROR(get_u32(r, "linear_value_head_dim", 1, 0, 1, MAX_HEAD_DIM, &c->dv));
  METRALE_RETURN_IF_ERROR(get_u32(r, "linear_conv_kernel_dim", 1, 0, 1, 64, &c->conv_kernel));
  METRALE_RETURN_IF_ERROR(get_eps(r, &c->rms_norm_eps));
  if (c->nv % c->nk != 0)
    return METRALE_ERROR(DATA_LOSS,
                         "config: linear_num_value_heads (%u) is not a multiple of "
                         "linear_num_key_heads (%u)",
                         c->nv, c->nk);
  if ((uint64_t)c->nk * c->dk > MAX_WIDTH || (uint64_t)c->nv * c->dv > MAX_WIDTH)
    return METRALE_ERROR(DATA_LOSS, "config: key width nk*dk = %llu or value width nv*dv = %llu "
                                    "is over %u",
                         (unsigned long long)c->nk * c->dk, (unsigned long long)c->nv * c->dv,
                         MAX_WIDTH);
  METRALE_RETURN_IF_ERROR(get_moe(r, c));
  METRALE_RETURN_IF_ERROR(get_layers(r, c));

  /* intermediate_size only matters when some layer is dense (Qwen3.5 MoE has none). */
  uint32_t dense = c->num_hidden_layers; /* first dense layer, if any */
  for (uint32_t i = c->num_hidden_layers; i-- > 0;)
    if (!metrale_config_layer_is_moe(c, i)) dense = i;
  int any_dense = dense < c->num_hidden_layers;
  const json_t *v = json_object_get(r->obj, "intermediate_size");
  if (any_dense && (!v || json_is_null(v)))
    return METRALE_ERROR(DATA_LOSS,
                         "config field \"%sintermediate_size\" is missing (layer %u has a dense MLP)",
                         r->prefix, dense);
  return get_u32(r, "intermediate_size", 0, 0, any_dense, MAX_FFN, &c->intermediate_size);
}

/* Picks the family from model_type and where its fields live. */
static metrale_status locate(const json_t *root, metrale_model_family *family, reader *r) {
  const json_t *mt = json_object_get(root, "model_type");
  if (!mt) return METRALE_ERROR(DATA_LOSS, "config has no \"model_type\"");
  const char *type = json_string_value(mt);
  if (!type) return METRALE_ERROR(DATA_LOSS, "config \"model_type\" is %s, not a string", type_name(mt));
  r->obj = root;
  r->prefix = "";
  if (strcmp(type, "qwen3_next") == 0) {
    *family = METRALE_QWEN3_NEXT;
  } else if (strcmp(type, "qwen3_5_text") == 0 || strcmp(type, "qwen3_5_moe_text") == 0) {
    *family = METRALE_QWEN3_5;
  } else if (strcmp(type, "qwen3_5") == 0 || strcmp(type, "qwen3_5_moe") == 0) {
    *family = METRALE_QWEN3_5;
    r->obj = json_object_get(root, "text_config");
    r->prefix = "text_config.";
    if (!json_is_object(r->obj))
      return METRALE_ERROR(DATA_LOSS, "config of model_type '%s' has no \"text_config\" object",
                           type);
  } else {
    return METRALE_ERROR(INVALID_ARGUMENT,
                         "unsupported model_type '%.100s' (metrale runs qwen3_next, qwen3_5_text, "
                         "qwen3_5 and qwen3_5_moe)",
                         type);
  }
  return METRALE_OK;
}

metrale_status metrale_config_parse(const char *json, size_t len, metrale_qwen3_config *out) {
  if ((!json && len) || !out) return METRALE_ERROR(INVALID_ARGUMENT, "config_parse: NULL argument");
  json_error_t err;
  json_t *root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES, &err);
  if (!root)
    return METRALE_ERROR(DATA_LOSS, "config is not valid JSON (line %d, column %d: %s)", err.line,
                         err.column, err.text);
  metrale_qwen3_config *c = calloc(1, sizeof *c);
  metrale_status s = METRALE_OK;
  reader r = {NULL, ""};
  if (!c) s = METRALE_ERROR(OUT_OF_MEMORY, "config");
  else if (!json_is_object(root)) s = METRALE_ERROR(DATA_LOSS, "config is not a JSON object");
  else s = locate(root, &c->family, &r);
  if (!s) s = parse_fields(&r, c);
  if (!s) memcpy(out, c, sizeof *c);
  free(c);
  json_decref(root);
  return s;
}

metrale_status metrale_config_load(const char *path, metrale_qwen3_config *out) {
  if (!path || !out) return METRALE_ERROR(INVALID_ARGUMENT, "config_load: NULL argument");
  char *text = NULL;
  size_t len = 0;
  METRALE_RETURN_IF_ERROR(metrale_read_small_file(path, METRALE_JSON_MAX_BYTES, &text, &len));
  metrale_status s = metrale_config_parse(text, len, out);
  free(text);
  return metrale_status_annotate(s, "%s", path);
}

int metrale_config_layer_is_moe(const metrale_qwen3_config *cfg, uint32_t layer) {
  if (!cfg || layer >= cfg->num_hidden_layers || layer >= METRALE_MAX_LAYERS) return 0;
  if (cfg->mlp_only_layer[layer] || cfg->num_experts == 0 || cfg->decoder_sparse_step == 0)
    return 0;
  return (layer + 1) % cfg->decoder_sparse_step == 0;
}
