/* Checkpoint folders (sharded and single-file) and uploads into the CPU backend. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrale/bf16.h"
#include "metrale/device.h"
#include "metrale/weights.h"

#include "test_tmpdir.h"

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

static metrale_device *open_cpu(void) {
  metrale_device_options o = {.backend = "cpu", .device_index = 0};
  metrale_device *dev = NULL;
  ok(metrale_device_open(&o, &dev));
  return dev;
}

TestSuite(checkpoint, .init = make_tmpdir, .fini = remove_tmpdir);

#define R2 METRALE_FIXTURES_DIR "/moe_r2"

Test(checkpoint, sharded_fixture_finds_every_tensor_in_its_shard) {
  metrale_checkpoint *c = NULL;
  ok(metrale_checkpoint_open(R2, &c));
  metrale_safetensors *s1 = NULL, *s2 = NULL;
  ok(metrale_safetensors_open(R2 "/model-00001-of-00002.safetensors", &s1));
  ok(metrale_safetensors_open(R2 "/model-00002-of-00002.safetensors", &s2));
  size_t found = 0;
  for (int k = 0; k < 2; k++) {
    metrale_safetensors *s = k ? s2 : s1;
    for (size_t i = 0; i < metrale_safetensors_count(s); i++) {
      const metrale_tensor_info *want = metrale_safetensors_at(s, i);
      const metrale_tensor_info *got = NULL;
      ok(metrale_checkpoint_find(c, want->name, &got));
      cr_expect_str_eq(got->name, want->name);
      cr_expect_eq(got->dtype, want->dtype);
      cr_expect_eq(got->nbytes, want->nbytes);
      found++;
    }
  }
  cr_expect_eq(found, 76, "README: moe_r2 has 76 tensors");
  const metrale_tensor_info *t = NULL;
  ok(metrale_checkpoint_find(c, "model.layers.1.linear_attn.in_proj_qkvz.weight", &t));
  cr_expect_eq(t->dtype, METRALE_DTYPE_BF16);
  cr_expect_eq(t->ndim, 2);
  cr_expect_eq(t->shape[0], 2 * 2 * 32 + 2 * 4 * 32); /* q,k (nk*dk each) + v,z (nv*dv each) */
  cr_expect_eq(t->shape[1], 128);
  ok(metrale_checkpoint_find(c, "model.layers.1.linear_attn.A_log", &t));
  cr_expect_eq(t->dtype, METRALE_DTYPE_F32);
  expect_error(metrale_checkpoint_find(c, "model.layers.9.mlp.gate.weight", &t),
               METRALE_CODE_NOT_FOUND, "model.layers.9.mlp.gate.weight");
  metrale_safetensors_close(s1);
  metrale_safetensors_close(s2);
  metrale_checkpoint_close(c);
}

Test(checkpoint, single_file_folder) {
  char path[128];
  snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
  float w[6] = {1, 2, 3, 4, 5, 6};
  metrale_tensor_out t[2] = {{"w", METRALE_DTYPE_F32, 2, {2, 3}, w},
                             {"b", METRALE_DTYPE_F32, 1, {6}, w}};
  ok(metrale_safetensors_write(path, t, 2));
  metrale_checkpoint *c = NULL;
  ok(metrale_checkpoint_open(tmpdir, &c));
  const metrale_tensor_info *info = NULL;
  ok(metrale_checkpoint_find(c, "w", &info));
  cr_expect_eq(info->shape[1], 3);
  ok(metrale_checkpoint_find(c, "b", &info));
  expect_error(metrale_checkpoint_find(c, "x", &info), METRALE_CODE_NOT_FOUND, tmpdir);
  metrale_checkpoint_close(c);
}

Test(checkpoint, folder_without_weights) {
  metrale_checkpoint *c = (metrale_checkpoint *)0x1;
  metrale_status s = metrale_checkpoint_open(tmpdir, &c);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_NOT_FOUND);
  cr_expect_not_null(strstr(metrale_status_message(s), "model.safetensors.index.json"));
  cr_expect_not_null(strstr(metrale_status_message(s), tmpdir));
  metrale_status_free(s);
  expect_error(metrale_checkpoint_open("/nonexistent/ckpt", &c), METRALE_CODE_NOT_FOUND,
               "/nonexistent/ckpt");
  expect_error(metrale_checkpoint_open(R2 "/config.json", &c), METRALE_CODE_IO, "config.json");
  cr_expect_eq(c, (metrale_checkpoint *)0x1, "out_ckpt untouched on failure");
}

/* Writes tensors of every source dtype, reads them back through uploads. */
Test(checkpoint, upload_converts_into_cpu_memory) {
  enum { N = 12 };
  float f32[N];
  metrale_bf16 bf[N];
  uint16_t f16[N];
  for (int i = 0; i < N; i++) {
    f32[i] = (float)i * 1.0009765625f - 5.0f; /* not bf16-exact: rounding is exercised */
    bf[i] = metrale_f32_to_bf16((float)i * 0.75f - 4.0f);
    f16[i] = (uint16_t)(0x3c00 + i); /* 1 + i/1024 */
  }
  int32_t i32[2] = {1, 2};
  char path[128];
  snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
  metrale_tensor_out t[] = {{"f32", METRALE_DTYPE_F32, 2, {3, 4}, f32},
                            {"bf16", METRALE_DTYPE_BF16, 2, {3, 4}, bf},
                            {"f16", METRALE_DTYPE_F16, 1, {N}, f16},
                            {"i32", METRALE_DTYPE_I32, 1, {2}, i32},
                            {"empty", METRALE_DTYPE_BF16, 1, {0}, NULL}};
  ok(metrale_safetensors_write(path, t, 5));
  metrale_checkpoint *c = NULL;
  ok(metrale_checkpoint_open(tmpdir, &c));
  metrale_device *dev = open_cpu();
  gpu_ptr p = 0;
  ok(metrale_alloc(dev, N * sizeof(float), &p));
  float *out = (float *)(uintptr_t)p;
  metrale_bf16 *outb = (metrale_bf16 *)(uintptr_t)p;
  const uint64_t shape[2] = {3, 4}, flat[1] = {N};

  ok(metrale_checkpoint_upload(c, dev, "bf16", METRALE_DTYPE_F32, shape, 2, p));
  for (int i = 0; i < N; i++) cr_expect_eq(out[i], metrale_bf16_to_f32(bf[i]), "bf16->f32 %d", i);
  ok(metrale_checkpoint_upload(c, dev, "f32", METRALE_DTYPE_BF16, shape, 2, p));
  for (int i = 0; i < N; i++) cr_expect_eq(outb[i], metrale_f32_to_bf16(f32[i]), "f32->bf16 %d", i);
  ok(metrale_checkpoint_upload(c, dev, "f32", METRALE_DTYPE_F32, shape, 2, p));
  cr_expect_eq(memcmp(out, f32, sizeof f32), 0);
  ok(metrale_checkpoint_upload(c, dev, "bf16", METRALE_DTYPE_BF16, shape, 2, p));
  cr_expect_eq(memcmp(outb, bf, sizeof bf), 0);
  ok(metrale_checkpoint_upload(c, dev, "f16", METRALE_DTYPE_F32, flat, 1, p));
  for (int i = 0; i < N; i++) cr_expect_eq(out[i], 1.0f + (float)i / 1024.0f, "f16->f32 %d", i);
  ok(metrale_checkpoint_upload(c, dev, "f16", METRALE_DTYPE_BF16, flat, 1, p));
  for (int i = 0; i < N; i++)
    cr_expect_eq(outb[i], metrale_f32_to_bf16(1.0f + (float)i / 1024.0f), "f16->bf16 %d", i);
  const uint64_t zero[1] = {0};
  ok(metrale_checkpoint_upload(c, dev, "empty", METRALE_DTYPE_F32, zero, 1, p));

  /* refusals name the tensor (and both shapes) */
  const uint64_t wrong[2] = {4, 3};
  metrale_status s = metrale_checkpoint_upload(c, dev, "bf16", METRALE_DTYPE_F32, wrong, 2, p);
  cr_expect_eq(metrale_status_code(s), METRALE_CODE_INVALID_ARGUMENT);
  cr_expect_not_null(strstr(metrale_status_message(s), "'bf16'"), "%s", metrale_status_message(s));
  cr_expect_not_null(strstr(metrale_status_message(s), "[4, 3]"), "%s", metrale_status_message(s));
  cr_expect_not_null(strstr(metrale_status_message(s), "[3, 4]"), "%s", metrale_status_message(s));
  metrale_status_free(s);
  expect_error(metrale_checkpoint_upload(c, dev, "bf16", METRALE_DTYPE_F32, flat, 1, p),
               METRALE_CODE_INVALID_ARGUMENT, "[12]");
  expect_error(metrale_checkpoint_upload(c, dev, "i32", METRALE_DTYPE_F32, (const uint64_t[]){2}, 1, p),
               METRALE_CODE_INVALID_ARGUMENT, "i32");
  expect_error(metrale_checkpoint_upload(c, dev, "f32", METRALE_DTYPE_F16, shape, 2, p),
               METRALE_CODE_INVALID_ARGUMENT, "f32");
  expect_error(metrale_checkpoint_upload(c, dev, "ghost", METRALE_DTYPE_F32, shape, 2, p),
               METRALE_CODE_NOT_FOUND, "ghost");
  expect_error(metrale_checkpoint_upload(c, dev, "f32", METRALE_DTYPE_F32, shape, 2, 0),
               METRALE_CODE_INVALID_ARGUMENT, "f32");

  metrale_free(dev, p);
  metrale_device_destroy(dev);
  metrale_checkpoint_close(c);
}

/* Resident file-backed pages of this process, in KiB. */
static long rss_file_kib(void) {
  FILE *fp = fopen("/proc/self/status", "r");
  cr_assert_not_null(fp);
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, fp))
    if (sscanf(line, "RssFile: %ld", &kib) == 1) break;
  fclose(fp);
  cr_assert_geq(kib, 0, "no RssFile in /proc/self/status");
  return kib;
}

/* Tensors larger than the bounce buffer and than one direct chunk stream in pieces. */
Test(checkpoint, upload_streams_large_tensors) {
  const uint64_t n = (17u << 20) + 3; /* > 64 MiB as F32, many 2 MiB bounce halves */
  float *src = malloc(n * sizeof *src);
  cr_assert_not_null(src);
  for (uint64_t i = 0; i < n; i++) src[i] = (float)(i % 1000) * 0.5f - (float)(i % 7);
  char path[128];
  snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
  metrale_tensor_out t = {"big", METRALE_DTYPE_F32, 2, {n / 3, 3}, src};
  uint64_t m = (n / 3) * 3; /* n is not a multiple of 3: the tail is left out */
  ok(metrale_safetensors_write(path, &t, 1));
  metrale_checkpoint *c = NULL;
  ok(metrale_checkpoint_open(tmpdir, &c));
  metrale_device *dev = open_cpu();
  gpu_ptr p = 0;
  ok(metrale_alloc(dev, m * sizeof(float), &p));
  /* Mapped file pages are dropped as the tensor streams: they never pile up. */
  long rss0 = rss_file_kib();
  ok(metrale_checkpoint_upload(c, dev, "big", METRALE_DTYPE_F32, t.shape, 2, p));
  cr_expect_lt(rss_file_kib() - rss0, 8 * 1024, "file pages left mapped after a direct upload");
  cr_expect_eq(memcmp((void *)(uintptr_t)p, src, m * sizeof(float)), 0);
  ok(metrale_checkpoint_upload(c, dev, "big", METRALE_DTYPE_BF16, t.shape, 2, p));
  cr_expect_lt(rss_file_kib() - rss0, 8 * 1024, "file pages left mapped after a converting upload");
  const metrale_bf16 *b = (const metrale_bf16 *)(uintptr_t)p;
  uint64_t bad = 0;
  for (uint64_t i = 0; i < m; i++) bad += b[i] != metrale_f32_to_bf16(src[i]);
  cr_expect_eq(bad, 0);
  metrale_free(dev, p);
  metrale_device_destroy(dev);
  metrale_checkpoint_close(c);
  free(src);
}

Test(checkpoint, upload_from_sharded_fixture_matches_read_f32) {
  metrale_checkpoint *c = NULL;
  ok(metrale_checkpoint_open(R2, &c));
  metrale_safetensors *s1 = NULL;
  ok(metrale_safetensors_open(R2 "/model-00001-of-00002.safetensors", &s1));
  metrale_safetensors *s2 = NULL;
  ok(metrale_safetensors_open(R2 "/model-00002-of-00002.safetensors", &s2));
  const char *name = "model.layers.1.linear_attn.in_proj_qkvz.weight";
  metrale_safetensors *s = metrale_safetensors_find(s1, name) ? s1 : s2;
  const metrale_tensor_info *t = metrale_safetensors_find(s, name);
  cr_assert_not_null(t);
  uint64_t n = t->shape[0] * t->shape[1];
  float *want = malloc(n * sizeof *want);
  ok(metrale_safetensors_read_f32(s, name, want, n));
  metrale_device *dev = open_cpu();
  gpu_ptr p = 0;
  ok(metrale_alloc(dev, n * sizeof(float), &p));
  ok(metrale_checkpoint_upload(c, dev, name, METRALE_DTYPE_F32, t->shape, 2, p));
  cr_expect_eq(memcmp((void *)(uintptr_t)p, want, n * sizeof(float)), 0);
  metrale_free(dev, p);
  metrale_device_destroy(dev);
  free(want);
  metrale_safetensors_close(s1);
  metrale_safetensors_close(s2);
  metrale_checkpoint_close(c);
}
