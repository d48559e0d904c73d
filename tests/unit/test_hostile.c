/* Every file of tests/fixtures/hostile (made by make_corpus.py) through its loader:
 * the expected code, a message naming the file, no crash, no leak under ASan. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "metrale/weights.h"

#define DIR_ METRALE_FIXTURES_DIR "/hostile"

typedef enum loader { ST, CKPT, CFG } loader;

typedef struct hostile_case {
  const char *name;
  loader how;
  metrale_code code;
} hostile_case;

#define DL METRALE_CODE_DATA_LOSS
#define NF METRALE_CODE_NOT_FOUND
#define IA METRALE_CODE_INVALID_ARGUMENT

static const hostile_case cases[] = {
    {"st_empty.safetensors", ST, DL},
    {"st_short.safetensors", ST, DL},
    {"st_header_past_eof.safetensors", ST, DL},
    {"st_header_len_2p63.safetensors", ST, DL},
    {"st_header_100mb_plus1.safetensors", ST, DL},
    {"st_not_utf8.safetensors", ST, DL},
    {"st_array_header.safetensors", ST, DL},
    {"st_bad_json.safetensors", ST, DL},
    {"st_nul_padding.safetensors", ST, DL},
    {"st_dup_tensor.safetensors", ST, DL},
    {"st_dup_metadata.safetensors", ST, DL},
    {"st_metadata_not_string.safetensors", ST, DL},
    {"st_metadata_not_object.safetensors", ST, DL},
    {"st_unknown_dtype.safetensors", ST, DL},
    {"st_dtype_not_string.safetensors", ST, DL},
    {"st_entry_not_object.safetensors", ST, DL},
    {"st_missing_shape.safetensors", ST, DL},
    {"st_extra_field.safetensors", ST, DL},
    {"st_empty_name.safetensors", ST, DL},
    {"st_nul_in_name.safetensors", ST, DL},
    {"st_negative_shape.safetensors", ST, DL},
    {"st_float_shape.safetensors", ST, DL},
    {"st_shape_not_array.safetensors", ST, DL},
    {"st_too_many_dims.safetensors", ST, DL},
    {"st_shape_overflow.safetensors", ST, DL},
    {"st_huge_int.safetensors", ST, DL},
    {"st_offsets_gap.safetensors", ST, DL},
    {"st_offsets_first_not_zero.safetensors", ST, DL},
    {"st_offsets_overlap.safetensors", ST, DL},
    {"st_offsets_out_of_file.safetensors", ST, DL},
    {"st_end_before_begin.safetensors", ST, DL},
    {"st_offsets_negative.safetensors", ST, DL},
    {"st_offsets_three.safetensors", ST, DL},
    {"st_nbytes_mismatch.safetensors", ST, DL},
    {"st_trailing_bytes.safetensors", ST, DL},
    {"ckpt_traversal", CKPT, DL},
    {"ckpt_absolute", CKPT, DL},
    {"ckpt_dotdot", CKPT, DL},
    {"ckpt_missing_tensor", CKPT, NF},
    {"ckpt_missing_shard", CKPT, NF},
    {"ckpt_bad_shard", CKPT, DL},
    {"ckpt_index_array", CKPT, DL},
    {"ckpt_no_weight_map", CKPT, DL},
    {"ckpt_dup_keys", CKPT, DL},
    {"ckpt_shard_not_string", CKPT, DL},
    {"ckpt_index_not_json", CKPT, DL},
    {"cfg_string_int.json", CFG, DL},
    {"cfg_float_int.json", CFG, DL},
    {"cfg_nv_not_multiple.json", CFG, DL},
    {"cfg_negative_size.json", CFG, DL},
    {"cfg_zero_heads.json", CFG, DL},
    {"cfg_huge_layers.json", CFG, DL},
    {"cfg_int_overflow.json", CFG, DL},
    {"cfg_missing_field.json", CFG, DL},
    {"cfg_unknown_model_type.json", CFG, IA},
    {"cfg_no_model_type.json", CFG, DL},
    {"cfg_topk_gt_experts.json", CFG, DL},
    {"cfg_conv_kernel_65.json", CFG, DL},
    {"cfg_head_dim_huge.json", CFG, DL},
    {"cfg_hidden_huge.json", CFG, DL},
    {"cfg_layer_types_len.json", CFG, DL},
    {"cfg_layer_types_bad.json", CFG, DL},
    {"cfg_mlp_only_out_of_range.json", CFG, DL},
    {"cfg_eps_string.json", CFG, DL},
    {"cfg_eps_negative.json", CFG, DL},
    {"cfg_norm_topk_string.json", CFG, DL},
    {"cfg_no_intermediate.json", CFG, DL},
    {"cfg_not_object.json", CFG, DL},
    {"cfg_dup_keys.json", CFG, DL},
    {"cfg_not_utf8.json", CFG, DL},
    {"cfg_empty.json", CFG, DL},
    {"cfg_qwen3_5_no_text_config.json", CFG, DL},
};
#define NCASES (sizeof cases / sizeof cases[0])

static metrale_status run_case(const hostile_case *c, const char *path) {
  switch (c->how) {
    case ST: {
      metrale_safetensors *f = NULL;
      metrale_status s = metrale_safetensors_open(path, &f);
      metrale_safetensors_close(f);
      return s;
    }
    case CKPT: {
      metrale_checkpoint *k = NULL;
      metrale_status s = metrale_checkpoint_open(path, &k);
      metrale_checkpoint_close(k);
      return s;
    }
    case CFG: {
      static metrale_qwen3_config cfg;
      return metrale_config_load(path, &cfg);
    }
  }
  return METRALE_OK;
}

Test(hostile, every_case_is_refused_with_its_code_and_names_the_file) {
  cr_assert_geq(NCASES, 25);
  for (size_t i = 0; i < NCASES; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", DIR_, cases[i].name);
    metrale_status s = run_case(&cases[i], path);
    if (s == METRALE_OK) {
      cr_expect_fail("%s: accepted", cases[i].name);
      continue;
    }
    const char *msg = metrale_status_message(s);
    cr_expect_eq(metrale_status_code(s), cases[i].code, "%s: expected %s, got %s: %s",
                 cases[i].name, metrale_code_name(cases[i].code),
                 metrale_code_name(metrale_status_code(s)), msg);
    cr_expect_not_null(strstr(msg, path), "%s: message does not name the file: %s",
                       cases[i].name, msg);
    metrale_status_free(s);
  }
}

/* The table and the folder must agree, so a new corpus file cannot go untested. */
Test(hostile, table_covers_the_whole_folder) {
  DIR *d = opendir(DIR_);
  cr_assert_not_null(d, "%s", DIR_);
  size_t seen = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *n = e->d_name;
    if (n[0] == '.' || strcmp(n, "README.md") == 0 || strcmp(n, "make_corpus.py") == 0) continue;
    int known = 0;
    for (size_t i = 0; i < NCASES; i++) known |= strcmp(cases[i].name, n) == 0;
    cr_expect(known, "%s is in the corpus but not in the test table", n);
    seen++;
  }
  closedir(d);
  cr_expect_eq(seen, NCASES, "table lists %zu cases, folder holds %zu", NCASES, seen);
}
