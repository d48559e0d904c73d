/* config.json parsing for Qwen3-Next (transformers-made fixtures) and Qwen3.5. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrale/weights.h"

static void ok(metrale_status s) {
  cr_assert_eq(s, METRALE_OK, "%s: %s", metrale_code_name(metrale_status_code(s)),
               metrale_status_message(s));
}

static void expect_error(metrale_status s, metrale_code code, const char *needle) {
  cr_assert_neq(s, METRALE_OK, "expected %s, got OK", metrale_code_name(code));
  cr_expect_eq(metrale_status_code(s), code, "expected %s, got %s: %s", metrale_code_name(code),
               metrale_code_name(metrale_status_code(s)), metrale_status_message(s));
  if (needle)
    cr_expect_not_null(strstr(metrale_status_message(s), needle), "message '%s' lacks '%s'",
                       metrale_status_message(s), needle);
  metrale_status_free(s);
}

static metrale_qwen3_config cfg; /* large: keep it off the stack */

static metrale_status parse(const char *json) { return metrale_config_parse(json, strlen(json), &cfg); }

/* A small valid Qwen3-Next config with one field spliced in (or replaced: later keys
 * would be duplicates, so `extra` must name fields the base lacks). */
static char buf[4096];
static const char *next_with(const char *extra) {
  snprintf(buf, sizeof buf,
           "{\"model_type\":\"qwen3_next\",\"hidden_size\":64,\"num_hidden_layers\":4,"
           "\"linear_num_key_heads\":2,\"linear_num_value_heads\":4,\"linear_key_head_dim\":16,"
           "\"linear_value_head_dim\":8,\"linear_conv_kernel_dim\":4,\"rms_norm_eps\":1e-6,"
           "\"intermediate_size\":96%s%s}",
           extra[0] ? "," : "", extra);
  return buf;
}

Test(config, qwen3_next_moe_fixture) {
  ok(metrale_config_load(METRALE_FIXTURES_DIR "/moe_r2/config.json", &cfg));
  cr_expect_eq(cfg.family, METRALE_QWEN3_NEXT);
  cr_expect_eq(cfg.hidden_size, 128);
  cr_expect_eq(cfg.num_hidden_layers, 2);
  cr_expect_eq(cfg.nk, 2);
  cr_expect_eq(cfg.nv, 4);
  cr_expect_eq(cfg.dk, 32);
  cr_expect_eq(cfg.dv, 32);
  cr_expect_eq(cfg.conv_kernel, 4);
  cr_expect_float_eq(cfg.rms_norm_eps, 1e-6f, 1e-12f);
  cr_expect_eq(cfg.intermediate_size, 128);
  cr_expect_eq(cfg.num_experts, 8);
  cr_expect_eq(cfg.num_experts_per_tok, 2);
  cr_expect_eq(cfg.moe_intermediate_size, 64);
  cr_expect_eq(cfg.shared_expert_intermediate_size, 96);
  cr_expect_eq(cfg.decoder_sparse_step, 1);
  cr_expect_eq(cfg.norm_topk_prob, 1);
  cr_expect(cfg.linear_layer[0] && cfg.linear_layer[1]);
  cr_expect(metrale_config_layer_is_moe(&cfg, 0));
  cr_expect(metrale_config_layer_is_moe(&cfg, 1));
  cr_expect(!metrale_config_layer_is_moe(&cfg, 2), "past the last layer");
}

Test(config, qwen3_next_dense_fixture_is_dense_through_mlp_only_layers) {
  ok(metrale_config_load(METRALE_FIXTURES_DIR "/dense_r1/config.json", &cfg));
  cr_expect_eq(cfg.hidden_size, 192);
  cr_expect_eq(cfg.nk, 3);
  cr_expect_eq(cfg.nv, 3);
  cr_expect_eq(cfg.dk, 16);
  cr_expect_eq(cfg.dv, 48);
  cr_expect_eq(cfg.intermediate_size, 320);
  cr_expect_eq(cfg.num_experts, 4); /* placeholder MoE fields */
  cr_expect_eq(cfg.mlp_only_layer[0], 1);
  cr_expect(!metrale_config_layer_is_moe(&cfg, 0));
}

Test(config, qwen3_next_r4_fixture) {
  ok(metrale_config_load(METRALE_FIXTURES_DIR "/moe_r4/config.json", &cfg));
  cr_expect_eq(cfg.nk, 1);
  cr_expect_eq(cfg.nv, 4);
  cr_expect_eq(cfg.conv_kernel, 3);
  cr_expect_eq(cfg.num_experts, 6);
  cr_expect_eq(cfg.num_experts_per_tok, 3);
  for (uint32_t i = 0; i < 3; i++) cr_expect(metrale_config_layer_is_moe(&cfg, i));
}

Test(config, qwen3_5_text_uses_full_attention_interval) {
  ok(metrale_config_load(METRALE_FIXTURES_DIR "/config/qwen3_5_text.json", &cfg));
  cr_expect_eq(cfg.family, METRALE_QWEN3_5);
  cr_expect_eq(cfg.hidden_size, 1024);
  cr_expect_eq(cfg.num_hidden_layers, 8);
  cr_expect_eq(cfg.intermediate_size, 3584);
  cr_expect_eq(cfg.num_experts, 0);
  for (uint32_t i = 0; i < 8; i++) {
    cr_expect_eq(cfg.linear_layer[i], (i == 3 || i == 7) ? 0 : 1, "layer %u", i);
    cr_expect(!metrale_config_layer_is_moe(&cfg, i));
  }
}

Test(config, qwen3_5_text_config_nested) {
  ok(metrale_config_load(METRALE_FIXTURES_DIR "/config/qwen3_5.json", &cfg));
  cr_expect_eq(cfg.family, METRALE_QWEN3_5);
  cr_expect_eq(cfg.hidden_size, 2560);
  cr_expect_eq(cfg.nk, 16);
  cr_expect_eq(cfg.nv, 32);
  cr_expect_eq(cfg.intermediate_size, 9216);
  const uint8_t want[6] = {1, 1, 0, 1, 1, 0};
  for (uint32_t i = 0; i < 6; i++) cr_expect_eq(cfg.linear_layer[i], want[i], "layer %u", i);
}

Test(config, qwen3_5_moe_without_intermediate_size) {
  ok(metrale_config_load(METRALE_FIXTURES_DIR "/config/qwen3_5_moe.json", &cfg));
  cr_expect_eq(cfg.family, METRALE_QWEN3_5);
  cr_expect_eq(cfg.num_experts, 256);
  cr_expect_eq(cfg.num_experts_per_tok, 8);
  cr_expect_eq(cfg.moe_intermediate_size, 512);
  cr_expect_eq(cfg.shared_expert_intermediate_size, 512);
  cr_expect_eq(cfg.intermediate_size, 0);
  cr_expect_eq(cfg.norm_topk_prob, 1);
  for (uint32_t i = 0; i < 4; i++) cr_expect(metrale_config_layer_is_moe(&cfg, i));
}

Test(config, defaults_when_fields_are_absent) {
  ok(parse(next_with("")));
  cr_expect_eq(cfg.num_experts, 0);
  cr_expect_eq(cfg.shared_expert_intermediate_size, 0);
  cr_expect_eq(cfg.decoder_sparse_step, 1);
  cr_expect_eq(cfg.norm_topk_prob, 1);
  for (uint32_t i = 0; i < 4; i++) {
    cr_expect_eq(cfg.mlp_only_layer[i], 0);
    cr_expect_eq(cfg.linear_layer[i], i != 3, "interval 4: layer 3 is full attention");
  }
}

Test(config, sparse_step_and_mlp_only_layers) {
  ok(parse(next_with("\"num_experts\":8,\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,"
                     "\"decoder_sparse_step\":2,\"mlp_only_layers\":[3],\"norm_topk_prob\":false,"
                     "\"full_attention_interval\":2")));
  cr_expect_eq(cfg.norm_topk_prob, 0);
  cr_expect(!metrale_config_layer_is_moe(&cfg, 0));
  cr_expect(metrale_config_layer_is_moe(&cfg, 1));
  cr_expect(!metrale_config_layer_is_moe(&cfg, 2));
  cr_expect(!metrale_config_layer_is_moe(&cfg, 3), "listed in mlp_only_layers");
  cr_expect_eq(cfg.linear_layer[0], 1);
  cr_expect_eq(cfg.linear_layer[1], 0);
  cr_expect(!metrale_config_layer_is_moe(NULL, 0));
}

Test(config, rejects_with_named_fields) {
  expect_error(parse(next_with("\"num_experts\":4,\"num_experts_per_tok\":5,\"moe_intermediate_size\":8")),
               METRALE_CODE_DATA_LOSS, "num_experts_per_tok");
  expect_error(parse(next_with("\"num_experts\":4,\"num_experts_per_tok\":2")),
               METRALE_CODE_DATA_LOSS, "moe_intermediate_size");
  expect_error(parse(next_with("\"layer_types\":[\"linear_attention\"]")), METRALE_CODE_DATA_LOSS,
               "layer_types");
  expect_error(parse(next_with("\"mlp_only_layers\":[4]")), METRALE_CODE_DATA_LOSS, "mlp_only_layers");
  expect_error(parse(next_with("\"mlp_only_layers\":[\"0\"]")), METRALE_CODE_DATA_LOSS, "mlp_only_layers");
  expect_error(parse(next_with("\"decoder_sparse_step\":0")), METRALE_CODE_DATA_LOSS, "decoder_sparse_step");
  expect_error(parse(next_with("\"full_attention_interval\":0")), METRALE_CODE_DATA_LOSS,
               "full_attention_interval");
  expect_error(parse(next_with("\"num_experts\":-1")), METRALE_CODE_DATA_LOSS, "num_experts");
  expect_error(parse("{\"model_type\":\"qwen3_5\",\"text_config\":[]}"), METRALE_CODE_DATA_LOSS,
               "text_config");
  expect_error(parse("{\"model_type\":\"qwen3_5_text\"}"), METRALE_CODE_DATA_LOSS, "hidden_size");
  expect_error(parse("{\"model_type\":\"qwen3_5\",\"text_config\":{\"hidden_size\":\"x\"}}"),
               METRALE_CODE_DATA_LOSS, "text_config.hidden_size");
  expect_error(parse("{\"model_type\":\"mamba\"}"), METRALE_CODE_INVALID_ARGUMENT, "mamba");
  expect_error(parse("{\"model_type\":7}"), METRALE_CODE_DATA_LOSS, "model_type");
  expect_error(parse(""), METRALE_CODE_DATA_LOSS, "JSON");
  expect_error(parse("null"), METRALE_CODE_DATA_LOSS, NULL);
}

Test(config, failure_leaves_output_untouched) {
  memset(&cfg, 0xab, sizeof cfg);
  metrale_qwen3_config before;
  memcpy(&before, &cfg, sizeof cfg);
  expect_error(parse(next_with("\"num_experts\":4,\"num_experts_per_tok\":5")),
               METRALE_CODE_DATA_LOSS, NULL);
  cr_expect_eq(memcmp(&before, &cfg, sizeof cfg), 0);
}

Test(config, load_errors_name_the_path) {
  expect_error(metrale_config_load("/nonexistent/config.json", &cfg), METRALE_CODE_NOT_FOUND,
               "/nonexistent/config.json");
  expect_error(metrale_config_load(METRALE_FIXTURES_DIR "/config", &cfg), METRALE_CODE_IO,
               METRALE_FIXTURES_DIR "/config");
}
