/* The backend registry: module loading refuses what is not ours, and every known
 * backend is reported as available or not, with the reason. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrale/device.h"
#include "registry.h"

static metrale_status load(const char *file, const gpu_backend_module **m) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", FAKE_MODULE_DIR, file);
  return metrale_backend_module_load(path, m);
}

Test(registry, wrong_api_version_is_refused) {
  const gpu_backend_module *m = NULL;
  metrale_status s = load("libfake_module_wrong_version.so", &m);
  cr_assert_eq(metrale_status_code(s), METRALE_CODE_FAILED_PRECONDITION);
  cr_expect(strstr(metrale_status_message(s), "API version") != NULL, "message: %s", metrale_status_message(s));
  cr_expect_null(m, "a refused module must not be handed out");
  metrale_status_free(s);
}

Test(registry, module_without_entry_is_refused) {
  const gpu_backend_module *m = NULL;
  metrale_status s = load("libfake_module_no_entry.so", &m);
  cr_assert_eq(metrale_status_code(s), METRALE_CODE_FAILED_PRECONDITION);
  cr_expect(strstr(metrale_status_message(s), "metrale_backend_entry") != NULL, "message: %s",
            metrale_status_message(s));
  metrale_status_free(s);
}

Test(registry, missing_module_file_is_reported) {
  const gpu_backend_module *m = NULL;
  metrale_status s = load("libmetrale-backend-nonexistent.so", &m);
  cr_assert_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE);
  cr_expect(strstr(metrale_status_message(s), "nonexistent") != NULL, "message: %s", metrale_status_message(s));
  metrale_status_free(s);
}

Test(registry, good_module_loads_and_reports_no_device) {
  const gpu_backend_module *m = NULL;
  metrale_status s = load("libfake_module_good.so", &m);
  cr_assert_eq(s, METRALE_OK, "%s", metrale_status_message(s));
  cr_assert_str_eq(m->name, "fake");
  gpu_backend_options o = {0};
  gpu_backend *be = NULL;
  s = m->create(&o, &be);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE);
  cr_expect_null(be);
  metrale_status_free(s);
}

Test(registry, every_backend_is_reported_with_a_reason) {
  const size_t n = metrale_backend_count();
  cr_assert_eq(n, 4);
  int saw_cpu = 0;
  for (size_t i = 0; i < n; i++) {
    metrale_backend_report r;
    metrale_backend_probe(metrale_backend_name(i), &r);
    cr_expect_str_eq(r.name, metrale_backend_name(i));
    cr_expect(r.reason[0] != '\0', "%s has no reason/device name", metrale_backend_name(i));
    if (strcmp(metrale_backend_name(i), "cpu") == 0) {
      saw_cpu = 1;
      cr_expect(r.available && r.built, "cpu must always be available");
    }
  }
  cr_expect(saw_cpu);
  cr_expect_null(metrale_backend_name(n), "past the end there is no backend");
}

Test(registry, unknown_backend_name_is_invalid) {
  metrale_device_options o = {.backend = "tpu"};
  metrale_device *dev = NULL;
  metrale_status s = metrale_device_open(&o, &dev);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_INVALID_ARGUMENT);
  cr_expect(strstr(metrale_status_message(s), "tpu") != NULL);
  cr_expect_null(dev);
  metrale_status_free(s);
}

Test(registry, auto_and_environment_select_a_backend) {
  metrale_device_options o = {.backend = "auto"};
  metrale_device *dev = NULL;
  metrale_status s = metrale_device_open(&o, &dev);
  cr_assert_eq(s, METRALE_OK, "%s", metrale_status_message(s));
  cr_expect(metrale_device_backend(dev)->name != NULL);
  metrale_device_destroy(dev);
  setenv("METRALE_BACKEND", "cpu", 1);
  metrale_device_options none = {0};
  s = metrale_device_open(&none, &dev);
  cr_assert_eq(s, METRALE_OK, "%s", metrale_status_message(s));
  cr_expect_str_eq(metrale_device_backend(dev)->name, "cpu");
  metrale_device_destroy(dev);
}

Test(registry, required_kernel_missing_is_named) {
  /* kernel lookup of a name outside the manifest: NOT_FOUND naming it */
  metrale_device_options o = {.backend = "cpu"};
  metrale_device *dev = NULL;
  cr_assert_eq(metrale_device_open(&o, &dev), METRALE_OK);
  gpu_backend *be = metrale_device_backend(dev);
  gpu_kernel k = 0;
  metrale_status s = be->vt->kernel(be, "gdn", "no_such_kernel", &k);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_NOT_FOUND);
  cr_expect(strstr(metrale_status_message(s), "no_such_kernel") != NULL);
  cr_expect_eq(k, 0, "out_ parameters are written only on success");
  metrale_status_free(s);
  metrale_device_destroy(dev);
}

/* Each of these variables clears its flag alone when set to anything but "" or "0", and leaves
 * the backend's caps alone otherwise: METRALE_NO_FP16 the fp16 rate (the layer's fp16 paths
 * follow it), METRALE_NO_EARLY_START early start. */
Test(registry, environment_clears_one_flag_each) {
  static const struct {
    const char *var;
    uint32_t flag;
  } vars[] = {{"METRALE_NO_FP16", GPU_CAP_F16_TENSOR}, {"METRALE_NO_EARLY_START", GPU_CAP_EARLY_START}};
  const uint32_t all = GPU_CAP_HOPPER | GPU_CAP_UNIFIED_ADDR | GPU_CAP_F16_TENSOR | GPU_CAP_EARLY_START;
  for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) unsetenv(vars[v].var);
  for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
    gpu_caps c = {.flags = all};
    metrale_caps_apply_env(&c);
    cr_expect_eq(c.flags, all, "%s unset: flags %#x", vars[v].var, c.flags);
    setenv(vars[v].var, "0", 1);
    metrale_caps_apply_env(&c);
    cr_expect_eq(c.flags, all, "%s=0: flags %#x", vars[v].var, c.flags);
    setenv(vars[v].var, "1", 1);
    metrale_caps_apply_env(&c);
    cr_expect_eq(c.flags, all & ~vars[v].flag, "%s=1: flags %#x", vars[v].var, c.flags);
    unsetenv(vars[v].var);
  }
}

/* metrale_device_launches counts what metrale_launch issued, per kernel: not an empty grid,
 * not a launch refused for its arguments; reset starts again from 0. */
Test(registry, launches_are_counted_per_kernel) {
  metrale_device_options o = {.backend = "cpu"};
  metrale_device *dev = NULL;
  cr_assert_eq(metrale_device_open(&o, &dev), METRALE_OK);
  gpu_kernel add = 0;
  cr_assert_eq(metrale_kernel(dev, METRALE_K_add, &add), METRALE_OK);
  gpu_ptr buf = 0;
  cr_assert_eq(metrale_alloc(dev, 3 * 64 * 2, &buf), METRALE_OK);
  const gpu_arg args[] = {gpu_arg_ptr(buf), gpu_arg_ptr(buf + 128), gpu_arg_ptr(buf + 256), gpu_arg_u32(64)};
  const gpu_dim3 one = {1, 1, 1}, none = {0, 1, 1};
  for (int i = 0; i < 2; i++) cr_expect_eq(metrale_launch(dev, METRALE_K_add, add, one, NULL, args, 4), METRALE_OK);
  cr_expect_eq(metrale_launch(dev, METRALE_K_add, add, none, NULL, args, 4), METRALE_OK);
  metrale_status s = metrale_launch(dev, METRALE_K_add, add, one, NULL, args, 3);
  cr_expect_eq(metrale_status_consume(s), METRALE_CODE_INVALID_ARGUMENT, "three arguments of four accepted");
  cr_expect_eq(metrale_device_launches(dev, METRALE_K_add), 2);
  cr_expect_eq(metrale_device_launches(dev, METRALE_K_rmsnorm), 0);
  cr_expect_eq(metrale_device_launches(dev, METRALE_K_COUNT), 0, "an id past the manifest counts nothing");
  metrale_device_launches_reset(dev);
  cr_expect_eq(metrale_device_launches(dev, METRALE_K_add), 0);
  cr_expect_eq(metrale_launch(dev, METRALE_K_add, add, one, NULL, args, 4), METRALE_OK);
  cr_expect_eq(metrale_device_launches(dev, METRALE_K_add), 1);
  cr_expect_eq(metrale_device_backend(dev)->vt->stream_sync(metrale_device_backend(dev), NULL), METRALE_OK);
  metrale_free(dev, buf);
  /* METRALE_LAUNCH_LOG: the counts, a line a launched kernel, appended at destroy */
  char path[64];
  snprintf(path, sizeof path, "/tmp/metrale-launch-log-%d.txt", (int)getpid());
  remove(path);
  setenv("METRALE_LAUNCH_LOG", path, 1);
  metrale_device_destroy(dev);
  unsetenv("METRALE_LAUNCH_LOG");
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "METRALE_LAUNCH_LOG wrote no file");
  char line[128] = "";
  cr_expect_not_null(fgets(line, sizeof line, f));
  cr_expect_str_eq(line, "cpu elementwise.add 1\n");
  cr_expect_null(fgets(line, sizeof line, f), "a second line: %s", line);
  fclose(f);
  remove(path);
}

/* METRALE_CPU_AS_GPU=N: the cpu reports N compute units and the fp16 rate (a GPU's path rules
 * over the cpu's kernels); a value that is not 1..4096 leaves its own caps. */
Test(registry, cpu_as_gpu_reports_its_compute_units) {
  static const struct {
    const char *value;
    uint32_t sms; /* 0: the cpu's own */
  } cases[] = {{"132", 132}, {"1", 1}, {"0", 0}, {"4097", 0}, {"12x", 0}, {"", 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv("METRALE_CPU_AS_GPU", cases[i].value, 1);
    metrale_device_options o = {.backend = "cpu"};
    metrale_device *dev = NULL;
    cr_assert_eq(metrale_device_open(&o, &dev), METRALE_OK);
    const gpu_caps *c = &metrale_device_backend(dev)->caps;
    if (cases[i].sms) {
      cr_expect_eq(c->sm_count, cases[i].sms, "\"%s\": %u compute units", cases[i].value, c->sm_count);
      cr_expect(c->flags & GPU_CAP_F16_TENSOR, "\"%s\": no fp16 rate", cases[i].value);
    } else {
      cr_expect(!(c->flags & GPU_CAP_F16_TENSOR), "\"%s\" taken: flags %#x", cases[i].value, c->flags);
    }
    metrale_device_destroy(dev);
  }
  unsetenv("METRALE_CPU_AS_GPU");
}
