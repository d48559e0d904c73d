/* Every GPU backend module built next to the tests loads, speaks the module API, tells
 * honestly what it carries, and either opens a device or says why not.
 *
 * On a machine without the GPU (CI) this proves that the module file is a loadable
 * plugin that reports UNAVAILABLE with a reason instead of failing to start; where the
 * device exists it opens it and checks the basics.  A module that was not built is
 * skipped with that reason. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "metrale/device.h"
#include "metrale/gpu_backend.h"
#include "metrale/manifest.h"
#include "registry.h"

static int is_manifest_kernel(const char *name, size_t len) {
  for (int i = 0; i < METRALE_K_COUNT; i++) {
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)i);
    cr_assert_not_null(info);
    if (strlen(info->name) == len && strncmp(info->name, name, len) == 0) return 1;
  }
  return 0;
}

/* describe(): one "target: k1 k2 ..." line per target, every k a manifest kernel, in the
 * space the registry gives it (metrale_backend_report.targets). */
static void check_describe(const gpu_backend_module *m) {
  char text[sizeof ((metrale_backend_report *)0)->targets];
  metrale_status s = m->describe(text, sizeof text);
  cr_assert_eq(s, METRALE_OK, "%s describe: %s", m->name, metrale_status_message(s));
  cr_assert(text[0] != '\0', "%s describe wrote nothing", m->name);
  int lines = 0;
  for (char *line = text; *line;) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char *colon = memchr(line, ':', len);
    cr_assert_not_null(colon, "%s describe line without 'target:': %.*s", m->name, (int)len, line);
    cr_assert(colon > line, "%s describe line with an empty target", m->name);
    for (const char *p = colon + 1; p < line + len;) {
      while (p < line + len && *p == ' ') p++;
      const char *q = p;
      while (q < line + len && *q != ' ') q++;
      if (q > p)
        cr_expect(is_manifest_kernel(p, (size_t)(q - p)), "%s describes '%.*s', not a kernels.def kernel",
                  m->name, (int)(q - p), p);
      p = q;
    }
    lines++;
    line += len + (end ? 1 : 0);
  }
  cr_expect_gt(lines, 0);

  /* too small a buffer is an error, never an overrun */
  char tiny[8];
  memset(tiny, 'x', sizeof tiny);
  s = m->describe(tiny, 4);
  if (s) {
    metrale_status_free(s);
  } else {
    cr_expect_lt(strlen(tiny), 4u);
  }
  cr_expect_eq(tiny[4], 'x', "%s describe wrote past its capacity", m->name);
}

/* A device opened: the vtable is complete and alloc(0) gives distinct memory. */
static void check_open_device(const gpu_backend_module *m, gpu_backend *be) {
  cr_assert_not_null(be->vt);
  cr_expect_str_eq(be->name, m->name);
  cr_expect(be->caps.device_name[0] != '\0');
  cr_expect_gt(be->caps.sm_count, 0u);
  cr_expect_gt(be->caps.subgroup_size, 0u);
  cr_expect_gt(be->caps.memory_bytes, 0u);
  const gpu_backend_vtable *vt = be->vt;
  cr_assert(vt->destroy && vt->kernel && vt->launch && vt->alloc && vt->free && vt->memset &&
            vt->copy_h2d && vt->copy_d2h && vt->copy_d2d && vt->stream_create && vt->stream_sync &&
            vt->stream_destroy && vt->sync);
  gpu_ptr a = 0, b = 0;
  cr_assert_eq(vt->alloc(be, 0, &a), METRALE_OK);
  cr_assert_eq(vt->alloc(be, 0, &b), METRALE_OK);
  cr_expect_neq(a, 0u);
  cr_expect_neq(b, 0u);
  cr_expect_neq(a, b);
  vt->free(be, a);
  vt->free(be, b);
  gpu_kernel k = 0;
  metrale_status s = vt->kernel(be, "norm", "no_such_kernel", &k);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_NOT_FOUND);
  metrale_status_free(s);
  cr_expect_eq(vt->sync(be), METRALE_OK);
}

static void check_module(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/libmetrale-backend-%s.so", METRALE_BIN_DIR, name);
  if (access(path, F_OK) != 0) {
    cr_skip_test("backend %s was not built (no %s)", name, path);
    return;
  }
  const gpu_backend_module *m = NULL;
  metrale_status s = metrale_backend_module_load(path, &m);
  cr_assert_eq(s, METRALE_OK, "loading %s: %s", path, metrale_status_message(s));
  cr_assert_not_null(m);
  cr_expect_eq(m->api_version, METRALE_BACKEND_API_VERSION);
  cr_assert_not_null(m->name);
  cr_expect_str_eq(m->name, name);
  cr_expect_gt(m->score, 0, "a GPU backend must outrank nothing");
  cr_assert_not_null(m->create);
  if (m->describe) check_describe(m);

  gpu_backend_options opts = {.device_index = 0};
  gpu_backend *be = NULL;
  s = m->create(&opts, &be);
  if (s) {
    cr_expect_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE, "%s create: %s %s", name,
                 metrale_code_name(metrale_status_code(s)), metrale_status_message(s));
    cr_expect_gt(strlen(metrale_status_message(s)), 10u, "%s unavailable without a reason", name);
    cr_log_info("%s unavailable here: %s", name, metrale_status_message(s));
    metrale_status_free(s);
    cr_expect_null(be, "create wrote its out parameter although it failed");
  } else {
    cr_assert_not_null(be);
    check_open_device(m, be);
    /* a device index past the last one is unavailable, not a crash */
    gpu_backend *none = NULL;
    gpu_backend_options far = {.device_index = 4096};
    s = m->create(&far, &none);
    cr_expect_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE);
    metrale_status_free(s);
    be->vt->destroy(be);
  }
}

Test(backend_modules, cuda) { check_module("cuda"); }
Test(backend_modules, hip) { check_module("hip"); }
Test(backend_modules, vulkan) { check_module("vulkan"); }

Test(backend_modules, not_a_module_is_refused) {
  char path[1024];
  snprintf(path, sizeof path, "%s/libmetrale.so", METRALE_BIN_DIR);
  const gpu_backend_module *m = NULL;
  metrale_status s = metrale_backend_module_load(path, &m);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_FAILED_PRECONDITION, "%s",
               metrale_status_message(s));
  metrale_status_free(s);
  s = metrale_backend_module_load("/nonexistent/libmetrale-backend-none.so", &m);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_UNAVAILABLE);
  metrale_status_free(s);
}
