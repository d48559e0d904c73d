/* The Vulkan backend's device side: availability with reasons, device choice, caps,
 * the kernel table, launch checks, grids beyond maxComputeWorkGroupCount, the profile. */
#include <stdlib.h>
#include <string.h>

#include "metrale/bf16.h"
#include "vk_test_util.h"
#include "test_skip.h"

#include <criterion/redirect.h>

Test(vulkan_device, unavailable_without_a_loader) {
  setenv("METRALE_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  metrale_status s = vkt_open_fails();
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE, "%s", metrale_status_message(s));
  cr_expect(strstr(metrale_status_message(s), "no Vulkan loader") != NULL, "reason: %s",
            metrale_status_message(s));
  metrale_status_free(s);
}

Test(vulkan_device, unavailable_without_a_driver) {
  /* the loader then finds no ICD at all */
  setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1);
  setenv("VK_DRIVER_FILES", "/nonexistent/icd.json", 1);
  metrale_status s = vkt_open_fails();
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE, "%s", metrale_status_message(s));
  cr_expect(strstr(metrale_status_message(s), "Vulkan") != NULL, "reason: %s",
            metrale_status_message(s));
  metrale_status_free(s);
}

Test(vulkan_device, forced_device_index) {
  metrale_device_destroy(vkt_open()); /* skips when there is no Vulkan at all */
  setenv("METRALE_VULKAN_DEVICE", "0", 1);
  metrale_device_destroy(vkt_open());
  setenv("METRALE_VULKAN_DEVICE", "99", 1);
  metrale_status s = vkt_open_fails();
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE);
  cr_expect(strstr(metrale_status_message(s), "METRALE_VULKAN_DEVICE=99") != NULL, "%s",
            metrale_status_message(s));
  metrale_status_free(s);
  setenv("METRALE_VULKAN_DEVICE", "zero", 1);
  metrale_status_free(vkt_open_fails());
  unsetenv("METRALE_VULKAN_DEVICE");
  metrale_device_options opts = {.backend = "vulkan", .device_index = 64};
  metrale_device *dev = NULL;
  s = metrale_device_open(&opts, &dev);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE, "device_index 64: %s",
               metrale_status_message(s));
  cr_expect(dev == NULL);
  metrale_status_free(s);
}

Test(vulkan_device, caps) {
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  cr_expect_str_eq(be->name, "vulkan");
  cr_expect_str_eq(be->caps.arch, "vulkan");
  cr_expect(be->caps.device_name[0] != '\0');
  cr_expect(be->caps.sm_count >= 1);
  cr_expect(be->caps.subgroup_size >= 1 && be->caps.subgroup_size <= 128, "subgroup %u",
            be->caps.subgroup_size);
  cr_expect(be->caps.memory_bytes > 0);
  cr_expect(be->caps.flags & GPU_CAP_UNIFIED_ADDR);
  cr_expect(!(be->caps.flags & GPU_CAP_HOST_MEMORY));
  metrale_device_destroy(dev);
}

Test(vulkan_device, every_manifest_kernel_is_embedded_and_described) {
  metrale_backend_report r;
  metrale_backend_probe("vulkan", &r);
  if (!r.available) MT_SKIP_UNAVAILABLE("vulkan unavailable: %s", r.reason);
  cr_expect_eq(r.score, 200);
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  gpu_kernel seen[METRALE_K_COUNT] = {0};
  for (int k = 0; k < METRALE_K_COUNT; k++) {
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)k);
    char word[64];
    snprintf(word, sizeof word, " %s", info->name);
    int described = strstr(r.targets, word) != NULL;
    if (info->requirement == METRALE_OPTIONAL && !described) {
      /* an optional kernel without a shader: the lookup must say so, and the layer falls back */
      gpu_kernel absent = 5;
      VKT_FAILS(be->vt->kernel(be, info->module, info->name, &absent), NOT_FOUND);
      cr_expect_eq(absent, 5, "out_kernel written on failure");
      continue;
    }
    cr_expect(described, "describe() lacks required %s: %s", info->name, r.targets);
    VKT_OK(be->vt->kernel(be, info->module, info->name, &seen[k]));
    cr_expect(seen[k] != 0);
    for (int j = 0; j < k; j++) cr_expect(!seen[j] || seen[j] != seen[k], "%s shares a handle", info->name);
    gpu_kernel again = 0; /* the pipeline is made once and kept */
    VKT_OK(be->vt->kernel(be, info->module, info->name, &again));
    cr_expect_eq(again, seen[k]);
  }
  gpu_kernel none = 77;
  metrale_status s = be->vt->kernel(be, "norm", "no_such_kernel", &none);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_NOT_FOUND);
  cr_expect(strstr(metrale_status_message(s), "norm.no_such_kernel") != NULL, "%s",
            metrale_status_message(s));
  cr_expect_eq(none, 77, "out_kernel written on failure");
  metrale_status_free(s);
  VKT_FAILS(be->vt->kernel(be, "gemm", "rmsnorm", &none), NOT_FOUND); /* wrong module */
  metrale_device_destroy(dev);
}

Test(vulkan_device, launch_checks) {
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  gpu_kernel add = 0, delta = 0;
  VKT_OK(be->vt->kernel(be, "elementwise", "add", &add));
  VKT_OK(be->vt->kernel(be, "gdn", "delta_rule_decode", &delta));
  gpu_ptr buf = 0;
  VKT_OK(be->vt->alloc(be, 1024, &buf));
  gpu_arg args[4] = {gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_u32(8)};
  gpu_dim3 one = {1, 1, 1}, block = {256, 1, 1};
  VKT_OK(be->vt->launch(be, add, one, block, 0, NULL, args, 4));
  VKT_FAILS(be->vt->launch(be, add, one, (gpu_dim3){128, 1, 1}, 0, NULL, args, 4), INVALID_ARGUMENT);
  VKT_FAILS(be->vt->launch(be, add, one, block, 64, NULL, args, 4), INVALID_ARGUMENT);
  VKT_FAILS(be->vt->launch(be, add, one, block, 0, NULL, args, 3), INVALID_ARGUMENT);
  VKT_FAILS(be->vt->launch(be, 0, one, block, 0, NULL, args, 4), INVALID_ARGUMENT);
  VKT_FAILS(be->vt->launch(be, 12345, one, block, 0, NULL, args, 4), INVALID_ARGUMENT);
  args[3] = gpu_arg_f32(8.0f);
  VKT_FAILS(be->vt->launch(be, add, one, block, 0, NULL, args, 4), INVALID_ARGUMENT);

  /* a row with dynamic shared memory (for CUDA) launches with the manifest's amount, which
   * the shader does not use (its workgroup memory is static), and with no other; the slot
   * read is (-1, -1, -1): nothing to do */
  gpu_kernel gate_up = 0;
  VKT_OK(be->vt->kernel(be, "moe", "moe_gate_up_sorted", &gate_up));
  const uint32_t gu_shared = metrale_kernel_info_get(METRALE_K_moe_gate_up_sorted)->shared_bytes;
  cr_expect_gt(gu_shared, 0u, "moe_gate_up_sorted has a METRALE_KERNEL_SHARED row");
  VKT_OK(be->vt->memset(be, buf, 0xff, 1024, NULL));
  gpu_arg ga[10] = {gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf),
                    gpu_arg_u32(1), gpu_arg_u32(1), gpu_arg_u32(1), gpu_arg_u32(1), gpu_arg_u32(1)};
  VKT_OK(be->vt->launch(be, gate_up, one, block, gu_shared, NULL, ga, 10));
  VKT_FAILS(be->vt->launch(be, gate_up, one, block, gu_shared + 16, NULL, ga, 10), INVALID_ARGUMENT);

  /* the delta rule keeps a state column per invocation: dk beyond it is refused */
  gpu_arg d[11] = {gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf),
                   gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_u32(1), gpu_arg_u32(1),
                   gpu_arg_u32(1), gpu_arg_u32(100000), gpu_arg_u32(1)};
  metrale_status s = be->vt->launch(be, delta, one, (gpu_dim3){128, 1, 1}, 0, NULL, d, 11);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_INVALID_ARGUMENT);
  cr_expect(strstr(metrale_status_message(s), "dk <=") != NULL, "%s", metrale_status_message(s));
  metrale_status_free(s);
  VKT_OK(be->vt->sync(be));
  be->vt->free(be, buf);
  metrale_device_destroy(dev);
}

/* grid.x beyond maxComputeWorkGroupCount[0] (65535 on lavapipe) is split into several
 * dispatches with a base workgroup; every element must still be written once. */
Test(vulkan_device, grid_beyond_the_dispatch_limit, .timeout = 600) {
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  gpu_kernel add = 0;
  VKT_OK(be->vt->kernel(be, "elementwise", "add", &add));
  const uint32_t n = 65537u * 256u + 77u;
  metrale_bf16 *a = malloc((size_t)n * 2), *b = malloc((size_t)n * 2), *y = malloc((size_t)n * 2);
  cr_assert(a && b && y);
  for (uint32_t i = 0; i < n; i++) {
    a[i] = metrale_f32_to_bf16((float)(i % 251));
    b[i] = metrale_f32_to_bf16((float)(i / 65536u));
  }
  gpu_ptr da = 0, db = 0, dy = 0;
  VKT_OK(be->vt->alloc(be, (uint64_t)n * 2, &da));
  VKT_OK(be->vt->alloc(be, (uint64_t)n * 2, &db));
  VKT_OK(be->vt->alloc(be, (uint64_t)n * 2, &dy));
  VKT_OK(be->vt->copy_h2d(be, da, a, (uint64_t)n * 2, NULL));
  VKT_OK(be->vt->copy_h2d(be, db, b, (uint64_t)n * 2, NULL));
  VKT_OK(be->vt->memset(be, dy, 0xff, (uint64_t)n * 2, NULL));
  gpu_arg args[4] = {gpu_arg_ptr(dy), gpu_arg_ptr(da), gpu_arg_ptr(db), gpu_arg_u32(n)};
  VKT_OK(be->vt->launch(be, add, (gpu_dim3){(n + 255) / 256, 1, 1}, (gpu_dim3){256, 1, 1}, 0,
                        NULL, args, 4));
  VKT_OK(be->vt->copy_d2h(be, y, dy, (uint64_t)n * 2, NULL));
  VKT_OK(be->vt->sync(be));
  uint32_t bad = 0, first = 0;
  for (uint32_t i = 0; i < n; i++) {
    float want = (float)(i % 251) + (float)(i / 65536u); /* < 256 + 251: exact in f32 */
    if (y[i] != metrale_f32_to_bf16(want) && bad++ == 0) first = i;
  }
  cr_expect_eq(bad, 0, "%u of %u elements wrong, first at %u", bad, n, first);
  be->vt->free(be, da);
  be->vt->free(be, db);
  be->vt->free(be, dy);
  free(a), free(b), free(y);
  metrale_device_destroy(dev);
}

/* The two profile tests: the device opened with METRALE_VULKAN_PROFILE=1, the kernel they
 * launch looked up and a zeroed buffer of `bytes`; and their end: the work synced, the buffer
 * freed, the device destroyed (which prints the table) and the redirected stderr that holds
 * the table returned. */
static metrale_device *profiled_open(const char *module, const char *name, uint64_t bytes,
                                     gpu_kernel *kernel, gpu_ptr *buf) {
  setenv("METRALE_VULKAN_PROFILE", "1", 1);
  metrale_device *dev = vkt_open();
  gpu_backend *be = metrale_device_backend(dev);
  VKT_OK(be->vt->kernel(be, module, name, kernel));
  VKT_OK(be->vt->alloc(be, bytes, buf));
  VKT_OK(be->vt->memset(be, *buf, 0, bytes, NULL));
  return dev;
}

static FILE *profile_table(metrale_device *dev, gpu_ptr buf) {
  gpu_backend *be = metrale_device_backend(dev);
  VKT_OK(be->vt->sync(be));
  be->vt->free(be, buf);
  metrale_device_destroy(dev);
  unsetenv("METRALE_VULKAN_PROFILE");
  fflush(stderr);
  return cr_get_redirected_stderr();
}

/* elementwise.add launched n times on a profiled device; the stream with what it printed */
static FILE *profiled_adds(unsigned n) {
  gpu_kernel add = 0;
  gpu_ptr buf = 0;
  metrale_device *dev = profiled_open("elementwise", "add", 1024, &add, &buf);
  gpu_backend *be = metrale_device_backend(dev);
  gpu_arg args[4] = {gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_u32(8)};
  for (unsigned i = 0; i < n; i++)
    VKT_OK(be->vt->launch(be, add, (gpu_dim3){1, 1, 1}, (gpu_dim3){256, 1, 1}, 0, NULL, args, 4));
  return profile_table(dev, buf);
}

/* METRALE_VULKAN_PROFILE=1: every launch is counted under its kernel, past the query pool's
 * size (its slots are read back and reused), and the table goes to stderr at destroy. */
Test(vulkan_device, profile_counts_every_launch, .init = cr_redirect_stderr) {
  const unsigned n = 5000; /* > VK_PROFILE_SLOTS / 2 launches */
  FILE *err = profiled_adds(n);
  char line[512], name[128];
  unsigned long long launches = 0;
  int header = 0, found = 0;
  while (fgets(line, sizeof line, err)) {
    if (strstr(line, "metrale vulkan profile")) header = 1;
    if (sscanf(line, "%127s %llu", name, &launches) == 2 && strcmp(name, "elementwise.add") == 0) {
      found = 1;
      break;
    }
  }
  cr_assert(header, "no profile table on stderr");
  cr_assert(found, "no elementwise.add row in the profile table");
  cr_expect_eq(launches, n, "elementwise.add: %llu launches counted, %u made", launches, n);
}

/* A kernel with a `phase` argument gets a row a phase: the chunked core's two passes are one
 * kernel, and the profile is how their times are told apart.  Every sequence here is empty, so
 * both phases return at once. */
Test(vulkan_device, profile_rows_by_phase, .init = cr_redirect_stderr) {
  gpu_kernel chunked = 0;
  gpu_ptr buf = 0; /* zeros: cu_seqlens {0, 0}, one empty sequence */
  metrale_device *dev = profiled_open("gdn_chunked", "delta_rule_prefill_chunked", 4096, &chunked, &buf);
  gpu_backend *be = metrale_device_backend(dev);
  const unsigned made[2] = {3, 2};
  for (uint32_t phase = 0; phase < 2; phase++)
    for (unsigned i = 0; i < made[phase]; i++) {
      /* o qkv g beta state cu_seqlens slots ws, s nk nv dk dv phase */
      gpu_arg args[14] = {gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf),
                          gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf), gpu_arg_ptr(buf),
                          gpu_arg_u32(1),   gpu_arg_u32(1),   gpu_arg_u32(1),   gpu_arg_u32(8),
                          gpu_arg_u32(8),   gpu_arg_u32(phase)};
      VKT_OK(be->vt->launch(be, chunked, (gpu_dim3){1, 1, 1}, (gpu_dim3){128, 1, 1}, 0, NULL, args, 14));
    }
  FILE *err = profile_table(dev, buf);
  char line[512];
  unsigned long long counted[2] = {0, 0};
  while (fgets(line, sizeof line, err))
    for (int phase = 0; phase < 2; phase++) {
      char row[96];
      snprintf(row, sizeof row, "gdn_chunked.delta_rule_prefill_chunked phase %d ", phase);
      if (strncmp(line, row, strlen(row)) == 0) sscanf(line + strlen(row), "%llu", &counted[phase]);
    }
  for (int phase = 0; phase < 2; phase++)
    cr_expect_eq(counted[phase], made[phase], "phase %d: %llu launches in its row, %u made", phase,
                 counted[phase], made[phase]);
}

/* Below the table, each profiled kernel's pipeline statistics as the driver reports them
 * (VK_KHR_pipeline_executable_properties: registers, local memory, ...), or one line saying
 * the driver has none: what a shader costs where there is no vendor profiler. */
Test(vulkan_device, profile_prints_pipeline_statistics, .init = cr_redirect_stderr) {
  FILE *err = profiled_adds(1);
  char line[4096];
  int stats = 0, none = 0;
  while (fgets(line, sizeof line, err)) {
    if (strncmp(line, "elementwise.add:", 16) == 0 && strchr(line + 16, '=')) stats = 1;
    if (strstr(line, "reports no pipeline statistics")) none = 1;
  }
  cr_assert(stats || none, "neither elementwise.add's pipeline statistics nor a line saying there are none");
  cr_log_info("pipeline statistics %s", stats ? "reported" : "not reported by this driver");
}
