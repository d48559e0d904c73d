/* Launch argument checking and kernel lookup: mistakes are INVALID_ARGUMENT or
 * NOT_FOUND statuses, never crashes.  No argument here points at memory, so a launch
 * that wrongly went ahead would crash the test. */
#include <string.h>

#include "harness.h"

/* An argument of every kind other than want. */
static gpu_arg other_kind(gpu_arg_kind want) {
  return want == GPU_ARG_PTR ? gpu_arg_u32(0) : gpu_arg_ptr(0);
}

static gpu_arg zero_of(gpu_arg_kind kind) {
  switch (kind) {
    case GPU_ARG_PTR:
      return gpu_arg_ptr(0);
    case GPU_ARG_U32:
      return gpu_arg_u32(0);
    case GPU_ARG_I32:
      return gpu_arg_i32(0);
    case GPU_ARG_F32:
      return gpu_arg_f32(0);
    case GPU_ARG_U64:
      return gpu_arg_u64(0);
  }
  return gpu_arg_u64(0);
}

static void expect_code(cf_ctx *ctx, metrale_status s, metrale_code want, const char *what) {
  metrale_code got = metrale_status_code(s);
  CF_EXPECT(ctx, got == want, "%s: expected %s, got %s (%s)", what, metrale_code_name(want),
            metrale_code_name(got), metrale_status_message(s));
  metrale_status_free(s);
}

Test(launch, wrong_arguments_are_rejected) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_dim3 grid = {1, 1, 1};
  for (int id = 0; id < METRALE_K_COUNT; id++) {
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)id);
    gpu_kernel k = metrale_try_kernel(ctx.dev, (metrale_kernel_id)id);
    if (!k) continue; /* reported by the kernel's own test */
    snprintf(ctx.shape, sizeof ctx.shape, "%s.%s", info->module, info->name);
    gpu_arg args[METRALE_MAX_KERNEL_ARGS + 1];
    for (uint32_t a = 0; a < info->nargs; a++) args[a] = zero_of(info->arg_kinds[a]);
    args[info->nargs] = gpu_arg_u32(0);

    if (info->nargs > 0)
      expect_code(
          &ctx,
          metrale_launch(ctx.dev, (metrale_kernel_id)id, k, grid, NULL, args, info->nargs - 1),
          METRALE_CODE_INVALID_ARGUMENT, "one argument too few");
    expect_code(
        &ctx, metrale_launch(ctx.dev, (metrale_kernel_id)id, k, grid, NULL, args, info->nargs + 1),
        METRALE_CODE_INVALID_ARGUMENT, "one argument too many");
    expect_code(&ctx,
                metrale_launch(ctx.dev, (metrale_kernel_id)id, k, grid, NULL, NULL, info->nargs),
                info->nargs ? METRALE_CODE_INVALID_ARGUMENT : METRALE_CODE_OK, "no argument array");
    for (uint32_t a = 0; a < info->nargs; a++) {
      gpu_arg saved = args[a];
      args[a] = other_kind(info->arg_kinds[a]);
      char what[96];
      snprintf(what, sizeof what, "argument %u (%s) of the wrong kind", a, info->arg_names[a]);
      expect_code(&ctx,
                  metrale_launch(ctx.dev, (metrale_kernel_id)id, k, grid, NULL, args, info->nargs),
                  METRALE_CODE_INVALID_ARGUMENT, what);
      args[a] = saved;
    }
    expect_code(&ctx,
                metrale_launch(ctx.dev, (metrale_kernel_id)id, 0, grid, NULL, args, info->nargs),
                METRALE_CODE_INVALID_ARGUMENT, "null kernel handle");
    if (info->cluster_x > 1) /* kernels.def METRALE_KERNEL_CLUSTER: whole clusters along x */
      expect_code(&ctx,
                  metrale_launch(ctx.dev, (metrale_kernel_id)id, k, (gpu_dim3){info->cluster_x + 1, 1, 1}, NULL,
                                 args, info->nargs),
                  METRALE_CODE_INVALID_ARGUMENT, "grid.x not a multiple of the kernel's clusters");
  }
  expect_code(&ctx, metrale_launch(ctx.dev, METRALE_K_COUNT, 1, grid, NULL, NULL, 0),
              METRALE_CODE_INVALID_ARGUMENT, "kernel id outside the manifest");
  cf_close(&ctx);
}

Test(launch, unknown_kernels_are_not_found) {
  cf_ctx ctx;
  cf_open(&ctx);
  gpu_backend *be = metrale_device_backend(ctx.dev);
  static const char *const names[][2] = {
      {"gemm", "no_such_kernel"}, {"no_such_module", "rmsnorm"}, {"norm", "gemm_bf16"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(ctx.shape, sizeof ctx.shape, "%s.%s", names[i][0], names[i][1]);
    gpu_kernel k = 12345;
    metrale_status s = be->vt->kernel(be, names[i][0], names[i][1], &k);
    const char *msg = metrale_status_message(s);
    CF_EXPECT(&ctx, metrale_status_code(s) == METRALE_CODE_NOT_FOUND, "lookup gave %s",
              metrale_code_name(metrale_status_code(s)));
    CF_EXPECT(&ctx, strstr(msg, names[i][0]) && strstr(msg, names[i][1]),
              "message does not name the kernel: %s", msg);
    CF_EXPECT(&ctx, k == 12345, "out_kernel written on failure (%llu)", (unsigned long long)k);
    metrale_status_free(s);
  }
  cf_close(&ctx);
}

Test(launch, empty_grid_is_a_no_op) {
  CF_BEGIN(ctx, k, METRALE_K_add);
  gpu_arg args[4] = {gpu_arg_ptr(0), gpu_arg_ptr(0), gpu_arg_ptr(0), gpu_arg_u32(0)};
  metrale_status s = metrale_launch(ctx.dev, METRALE_K_add, k, (gpu_dim3){0, 1, 1}, NULL, args, 4);
  CF_EXPECT(&ctx, s == METRALE_OK, "%s", metrale_status_message(s));
  metrale_status_free(s);
  cf_close(&ctx);
}
