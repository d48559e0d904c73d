/* The kernel manifest: every row parses, names are unique, lookups and argument checks. */
#include <criterion/criterion.h>
#include <string.h>

#include "metrale/manifest.h"

Test(manifest, every_row_parses_with_sane_fields) {
  for (int i = 0; i < METRALE_K_COUNT; i++) {
    const metrale_kernel_info *k = metrale_kernel_info_get((metrale_kernel_id)i);
    cr_assert_not_null(k, "row %d of kernels.def does not parse", i);
    cr_expect_eq((int)k->id, i);
    cr_expect(k->nargs > 0 && k->nargs <= METRALE_MAX_KERNEL_ARGS, "%s: %u args", k->name, k->nargs);
    cr_expect(k->block > 0 && k->block <= 1024 && (k->block & 31) == 0, "%s: block %u", k->name, k->block);
    cr_expect(k->contract[0] != '\0', "%s has no contract", k->name);
    if (k->requirement == METRALE_OPTIONAL)
      cr_expect(k->fallback[0] != '\0', "optional %s names no fallback", k->name);
    else
      cr_expect_eq(k->requirement, METRALE_REQUIRED);
    for (int j = 0; j < i; j++)
      cr_expect(strcmp(metrale_kernel_info_get((metrale_kernel_id)j)->name, k->name) != 0,
                "kernel name %s appears twice", k->name);
  }
}

/* Dynamic shared memory is only for optional rows (a required kernel must not depend on
 * more than the 48 KiB every device has); 227 KiB is the most any GPU gives a block. */
Test(manifest, dynamic_shared_memory_rows) {
  int rows = 0;
  for (int i = 0; i < METRALE_K_COUNT; i++) {
    const metrale_kernel_info *k = metrale_kernel_info_get((metrale_kernel_id)i);
    if (!k->shared_bytes) continue;
    rows++;
    cr_expect_eq(k->requirement, METRALE_OPTIONAL, "required %s asks for dynamic shared memory", k->name);
    cr_expect(k->shared_bytes <= 227u * 1024u && k->shared_bytes % 16u == 0, "%s: %u bytes", k->name,
              k->shared_bytes);
  }
  cr_expect(metrale_kernel_info_get(METRALE_K_gemm_f32in_t128)->shared_bytes > 48u * 1024u,
            "the METRALE_KERNEL_SHARED rows did not reach the table");
  cr_expect(rows >= 2);
}

/* Early start is for optional rows only: a backend's required kernels must not need the
 * discipline (wait before any memory access) to be correct. */
Test(manifest, early_start_rows) {
  int rows = 0;
  for (int i = 0; i < METRALE_K_COUNT; i++) {
    const metrale_kernel_info *k = metrale_kernel_info_get((metrale_kernel_id)i);
    if (!k->early_start) continue;
    rows++;
    cr_expect_eq(k->requirement, METRALE_OPTIONAL, "required %s is marked early start", k->name);
  }
  cr_expect(metrale_kernel_info_get(METRALE_K_gemv_bf16)->early_start,
            "the METRALE_KERNEL_EARLY_START rows did not reach the table");
  cr_expect(!metrale_kernel_info_get(METRALE_K_gemm_bf16)->early_start);
  cr_expect(rows >= 3);
}

/* A kernel that computes another's op under another launch shape takes the same arguments;
 * the other one is a kernel with an op of its own (no chains), and most rows have none. */
Test(manifest, same_op_rows) {
  int rows = 0;
  for (int i = 0; i < METRALE_K_COUNT; i++) {
    const metrale_kernel_info *k = metrale_kernel_info_get((metrale_kernel_id)i);
    if (k->same_op == METRALE_K_COUNT) continue;
    rows++;
    const metrale_kernel_info *as = metrale_kernel_info_get(k->same_op);
    cr_assert_not_null(as, "%s: same op as kernel %d, which is not a row", k->name, (int)k->same_op);
    cr_expect_neq((int)as->id, i, "%s names itself", k->name);
    cr_expect_str_eq(k->signature, as->signature, "%s and %s (its op) take different arguments", k->name, as->name);
    cr_expect_eq(as->same_op, METRALE_K_COUNT, "%s: %s is itself another kernel's op", k->name, as->name);
  }
  cr_expect_eq(metrale_kernel_info_get(METRALE_K_gemv_f32in)->same_op, METRALE_K_gemm_f32in,
               "the METRALE_KERNEL_SAME_OP rows did not reach the table");
  cr_expect_eq(metrale_kernel_info_get(METRALE_K_gemm_f32in_hi_ws)->same_op, METRALE_K_COUNT,
               "gemm_f32in_hi_ws rounds x: an op of its own");
  cr_expect(rows >= 3 && rows < METRALE_K_COUNT / 2);
}

Test(manifest, find_by_module_and_name) {
  const metrale_kernel_info *k = metrale_kernel_info_find("gdn", "delta_rule_decode");
  cr_assert_not_null(k);
  cr_expect_eq(k->id, METRALE_K_delta_rule_decode);
  cr_expect_null(metrale_kernel_info_find("norm", "delta_rule_decode"), "wrong module must not match");
  cr_expect_null(metrale_kernel_info_find("gdn", "nope"));
  cr_expect_null(metrale_kernel_info_get(METRALE_K_COUNT));
}

Test(manifest, argument_index_by_name) {
  const metrale_kernel_info *k = metrale_kernel_info_get(METRALE_K_add); /* y:p a:p b:p n:u */
  cr_expect_eq(metrale_kernel_arg_index(k, "y"), 0);
  cr_expect_eq(metrale_kernel_arg_index(k, "b"), 2);
  cr_expect_eq(metrale_kernel_arg_index(k, "n"), 3);
  cr_expect_eq(metrale_kernel_arg_index(k, "m"), -1);
  cr_expect_eq(metrale_kernel_arg_index(k, "ny"), -1, "a name is matched whole");
  cr_expect_eq(metrale_kernel_arg_index(NULL, "y"), -1);
}

Test(manifest, argument_checks) {
  const metrale_kernel_info *k = metrale_kernel_info_get(METRALE_K_add); /* y:p a:p b:p n:u */
  gpu_arg ok[4] = {gpu_arg_ptr(1), gpu_arg_ptr(2), gpu_arg_ptr(3), gpu_arg_u32(4)};
  cr_expect_null(metrale_kernel_check_args(k, ok, 4));
  metrale_status s = metrale_kernel_check_args(k, ok, 3);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_INVALID_ARGUMENT);
  metrale_status_free(s);
  gpu_arg wrong[4] = {gpu_arg_ptr(1), gpu_arg_ptr(2), gpu_arg_f32(3), gpu_arg_u32(4)};
  s = metrale_kernel_check_args(k, wrong, 4);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_INVALID_ARGUMENT);
  cr_expect(strstr(metrale_status_message(s), "argument 2 (b) must be ptr") != NULL, "%s",
            metrale_status_message(s));
  metrale_status_free(s);
}

Test(manifest, every_optional_fallback_names_existing_kernels) {
  for (int i = 0; i < METRALE_K_COUNT; i++) {
    const metrale_kernel_info *k = metrale_kernel_info_get((metrale_kernel_id)i);
    if (k->requirement != METRALE_OPTIONAL) continue;
    /* fallbacks are written "module.kernel" (optionally "then module.kernel") */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", k->fallback);
    int named = 0;
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
      char *dot = strchr(tok, '.');
      if (!dot) continue;
      *dot = '\0';
      const metrale_kernel_info *f = metrale_kernel_info_find(tok, dot + 1);
      cr_expect_not_null(f, "%s falls back to unknown %s.%s", k->name, tok, dot + 1);
      if (f) cr_expect_eq(f->requirement, METRALE_REQUIRED, "%s falls back to optional %s", k->name, f->name);
      named++;
    }
    cr_expect(named > 0, "%s's fallback names no kernel", k->name);
  }
}
