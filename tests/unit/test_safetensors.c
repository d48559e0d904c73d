/* safetensors reader and writer: round trips, committed fixtures, conversions, atomicity. */
#define _DEFAULT_SOURCE /* mkdtemp, setrlimit */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metrale/bf16.h"
#include "metrale/weights.h"

#include "test_tmpdir.h"

static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/* Asserts s has the code and a message containing `needle`; frees s. */
static void expect_error(metrale_status s, metrale_code code, const char *needle) {
  cr_assert_neq(s, METRALE_OK, "expected %s, got OK", metrale_code_name(code));
  cr_expect_eq(metrale_status_code(s), code, "expected %s, got %s: %s", metrale_code_name(code),
               metrale_code_name(metrale_status_code(s)), metrale_status_message(s));
  if (needle)
    cr_expect_not_null(strstr(metrale_status_message(s), needle), "message '%s' lacks '%s'",
                       metrale_status_message(s), needle);
  metrale_status_free(s);
}

static void ok(metrale_status s) {
  cr_assert_eq(s, METRALE_OK, "%s: %s", metrale_code_name(metrale_status_code(s)),
               metrale_status_message(s));
}

TestSuite(safetensors, .init = make_tmpdir, .fini = remove_tmpdir);

Test(safetensors, dtype_names_and_sizes) {
  cr_expect_eq(metrale_dtype_size(METRALE_DTYPE_BF16), 2);
  cr_expect_eq(metrale_dtype_size(METRALE_DTYPE_F16), 2);
  cr_expect_eq(metrale_dtype_size(METRALE_DTYPE_F32), 4);
  cr_expect_eq(metrale_dtype_size(METRALE_DTYPE_I32), 4);
  cr_expect_eq(metrale_dtype_size((metrale_dtype)77), 0);
  cr_expect_str_eq(metrale_dtype_name(METRALE_DTYPE_BF16), "BF16");
  cr_expect_str_eq(metrale_dtype_name(METRALE_DTYPE_F16), "F16");
  cr_expect_str_eq(metrale_dtype_name(METRALE_DTYPE_F32), "F32");
  cr_expect_str_eq(metrale_dtype_name(METRALE_DTYPE_I32), "I32");
}

Test(safetensors, round_trip_every_dtype) {
  metrale_bf16 bf[6];
  uint16_t f16[4] = {0x3c00, 0xc000, 0x3800, 0x0001}; /* 1, -2, 0.5, smallest subnormal */
  float f32[8], scalar = 3.25f;
  int32_t i32[3] = {-7, 0, 1 << 30};
  for (int i = 0; i < 6; i++) bf[i] = metrale_f32_to_bf16((float)i - 2.5f);
  for (int i = 0; i < 8; i++) f32[i] = (float)i * 0.125f - 1.0f;
  metrale_tensor_out t[] = {
      {"b.bf16", METRALE_DTYPE_BF16, 2, {2, 3}, bf},
      {"a.f16", METRALE_DTYPE_F16, 1, {4}, f16},
      {"c.f32", METRALE_DTYPE_F32, 3, {2, 2, 2}, f32},
      {"d.i32", METRALE_DTYPE_I32, 1, {3}, i32},
      {"scalar", METRALE_DTYPE_F32, 0, {0}, &scalar},
      {"empty", METRALE_DTYPE_BF16, 2, {0, 5}, NULL},
  };
  char path[128];
  snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir);
  ok(metrale_safetensors_write(path, t, 6));
  cr_expect_eq(dir_entries(tmpdir), 1, "only the target file remains");

  /* layout: 8-byte length, space-padded header, data starting 8-byte aligned */
  FILE *fp = fopen(path, "rb");
  cr_assert_not_null(fp);
  uint8_t le[8];
  cr_assert_eq(fread(le, 1, 8, fp), 8);
  fclose(fp);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | le[i];
  cr_expect_eq(hlen % 8, 0);

  metrale_safetensors *f = NULL;
  ok(metrale_safetensors_open(path, &f));
  cr_assert_eq(metrale_safetensors_count(f), 6);
  /* offset order is the written order */
  for (size_t i = 0; i < 6; i++) cr_expect_str_eq(metrale_safetensors_at(f, i)->name, t[i].name);
  cr_expect_null(metrale_safetensors_at(f, 6));
  for (size_t i = 0; i < 6; i++) {
    const metrale_tensor_info *info = metrale_safetensors_find(f, t[i].name);
    cr_assert_not_null(info, "%s", t[i].name);
    cr_expect_eq(info->dtype, t[i].dtype);
    cr_expect_eq(info->ndim, t[i].ndim);
    uint64_t n = metrale_dtype_size(t[i].dtype);
    for (uint32_t d = 0; d < info->ndim; d++) {
      cr_expect_eq(info->shape[d], t[i].shape[d]);
      n *= t[i].shape[d];
    }
    cr_expect_eq(info->nbytes, n, "%s nbytes", t[i].name);
    if (n) cr_expect_eq(memcmp(metrale_safetensors_data(f, info), t[i].data, n), 0, "%s", t[i].name);
  }
  cr_expect_null(metrale_safetensors_find(f, "absent"));

  float got[8];
  ok(metrale_safetensors_read_f32(f, "b.bf16", got, 6));
  for (int i = 0; i < 6; i++) cr_expect_eq(got[i], (float)i - 2.5f);
  ok(metrale_safetensors_read_f32(f, "a.f16", got, 4));
  cr_expect_eq(got[0], 1.0f);
  cr_expect_eq(got[1], -2.0f);
  cr_expect_eq(got[2], 0.5f);
  cr_expect_eq(got[3], ldexpf(1.0f, -24));
  ok(metrale_safetensors_read_f32(f, "c.f32", got, 8));
  cr_expect_eq(memcmp(got, f32, sizeof f32), 0);
  ok(metrale_safetensors_read_f32(f, "scalar", got, 1));
  cr_expect_eq(got[0], 3.25f);
  ok(metrale_safetensors_read_f32(f, "empty", NULL, 0));
  expect_error(metrale_safetensors_read_f32(f, "d.i32", got, 3), METRALE_CODE_INVALID_ARGUMENT, "d.i32");
  expect_error(metrale_safetensors_read_f32(f, "c.f32", got, 7), METRALE_CODE_INVALID_ARGUMENT, "c.f32");
  expect_error(metrale_safetensors_read_f32(f, "nope", got, 1), METRALE_CODE_NOT_FOUND, "nope");
  metrale_safetensors_close(f);
}

Test(safetensors, empty_file_list_round_trip) {
  char path[128];
  snprintf(path, sizeof path, "%s/none.safetensors", tmpdir);
  ok(metrale_safetensors_write(path, NULL, 0));
  metrale_safetensors *f = NULL;
  ok(metrale_safetensors_open(path, &f));
  cr_expect_eq(metrale_safetensors_count(f), 0);
  cr_expect_null(metrale_safetensors_find(f, "x"));
  metrale_safetensors_close(f);
}

Test(safetensors, overwrite_replaces_whole_file) {
  char path[128];
  snprintf(path, sizeof path, "%s/ow.safetensors", tmpdir);
  float a[4] = {1, 2, 3, 4}, b = 9;
  metrale_tensor_out ta = {"a", METRALE_DTYPE_F32, 1, {4}, a};
  metrale_tensor_out tb = {"b", METRALE_DTYPE_F32, 1, {1}, &b};
  ok(metrale_safetensors_write(path, &ta, 1));
  ok(metrale_safetensors_write(path, &tb, 1));
  metrale_safetensors *f = NULL;
  ok(metrale_safetensors_open(path, &f));
  cr_expect_eq(metrale_safetensors_count(f), 1);
  cr_expect_not_null(metrale_safetensors_find(f, "b"));
  metrale_safetensors_close(f);
  cr_expect_eq(dir_entries(tmpdir), 1);
}

Test(safetensors, writer_refuses_bad_requests_and_leaves_nothing) {
  char path[128];
  snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
  float x[2] = {0};
  metrale_tensor_out dup[2] = {{"w", METRALE_DTYPE_F32, 1, {2}, x}, {"w", METRALE_DTYPE_F32, 1, {2}, x}};
  expect_error(metrale_safetensors_write(path, dup, 2), METRALE_CODE_INVALID_ARGUMENT, "'w'");
  metrale_tensor_out unk = {"u", (metrale_dtype)42, 1, {2}, x};
  expect_error(metrale_safetensors_write(path, &unk, 1), METRALE_CODE_INVALID_ARGUMENT, "dtype");
  metrale_tensor_out big = {"big", METRALE_DTYPE_F32, 2, {1ull << 40, 1ull << 40}, x};
  expect_error(metrale_safetensors_write(path, &big, 1), METRALE_CODE_INVALID_ARGUMENT, "overflow");
  metrale_tensor_out noname = {"", METRALE_DTYPE_F32, 1, {2}, x};
  expect_error(metrale_safetensors_write(path, &noname, 1), METRALE_CODE_INVALID_ARGUMENT, NULL);
  metrale_tensor_out meta = {"__metadata__", METRALE_DTYPE_F32, 1, {2}, x};
  expect_error(metrale_safetensors_write(path, &meta, 1), METRALE_CODE_INVALID_ARGUMENT, NULL);
  metrale_tensor_out nodata = {"nd", METRALE_DTYPE_F32, 1, {2}, NULL};
  expect_error(metrale_safetensors_write(path, &nodata, 1), METRALE_CODE_INVALID_ARGUMENT, "nd");
  metrale_tensor_out dims = {"dims", METRALE_DTYPE_F32, METRALE_MAX_DIMS + 1, {1}, x};
  expect_error(metrale_safetensors_write(path, &dims, 1), METRALE_CODE_INVALID_ARGUMENT, "dims");
  metrale_tensor_out utf = {"bad\xff", METRALE_DTYPE_F32, 1, {2}, x};
  expect_error(metrale_safetensors_write(path, &utf, 1), METRALE_CODE_INVALID_ARGUMENT, "UTF-8");
  cr_expect_eq(dir_entries(tmpdir), 0, "a refused write leaves no file");
}

Test(safetensors, failed_write_keeps_the_old_file) {
  char path[128];
  snprintf(path, sizeof path, "%s/keep.safetensors", tmpdir);
  float x[2] = {5, 6};
  metrale_tensor_out good = {"good", METRALE_DTYPE_F32, 1, {2}, x};
  ok(metrale_safetensors_write(path, &good, 1));
  metrale_tensor_out dup[2] = {{"w", METRALE_DTYPE_F32, 1, {2}, x}, {"w", METRALE_DTYPE_F32, 1, {2}, x}};
  expect_error(metrale_safetensors_write(path, dup, 2), METRALE_CODE_INVALID_ARGUMENT, NULL);
  metrale_safetensors *f = NULL;
  ok(metrale_safetensors_open(path, &f));
  cr_expect_not_null(metrale_safetensors_find(f, "good"));
  metrale_safetensors_close(f);
  cr_expect_eq(dir_entries(tmpdir), 1);
}

Test(safetensors, unwritable_folder_is_io_and_leaves_nothing) {
  /* /proc refuses new files even to root, unlike a chmod-ed folder */
  float x = 1;
  metrale_tensor_out t = {"x", METRALE_DTYPE_F32, 0, {0}, &x};
  expect_error(metrale_safetensors_write("/proc/metrale-test.safetensors", &t, 1), METRALE_CODE_IO,
               "/proc/metrale-test.safetensors");
  cr_expect_neq(access("/proc/metrale-test.safetensors", F_OK), 0);
  char path[160];
  snprintf(path, sizeof path, "%s/no/such/folder/x.safetensors", tmpdir);
  expect_error(metrale_safetensors_write(path, &t, 1), METRALE_CODE_IO, path);
}

Test(safetensors, write_failing_midway_removes_the_temporary) {
  /* A file size limit makes the data write fail after the header went out. */
  char path[128];
  snprintf(path, sizeof path, "%s/big.safetensors", tmpdir);
  static float data[1 << 16];
  metrale_tensor_out t = {"big", METRALE_DTYPE_F32, 1, {1 << 16}, data};
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
  expect_error(metrale_safetensors_write(path, &t, 1), METRALE_CODE_IO, NULL);
  cr_expect_eq(dir_entries(tmpdir), 0, "the temporary file was removed");
}

Test(safetensors, reads_committed_io_fixture) {
  metrale_safetensors *f = NULL;
  ok(metrale_safetensors_open(METRALE_FIXTURES_DIR "/moe_r2/io.safetensors", &f));
  const metrale_tensor_info *in = metrale_safetensors_find(f, "input");
  cr_assert_not_null(in);
  cr_expect_eq(in->dtype, METRALE_DTYPE_BF16);
  cr_expect_eq(in->ndim, 2);
  cr_expect_eq(in->shape[0], 40);
  cr_expect_eq(in->shape[1], 128);
  const metrale_tensor_info *st = metrale_safetensors_find(f, "recurrent_state.1");
  cr_assert_not_null(st);
  cr_expect_eq(st->dtype, METRALE_DTYPE_F32);
  cr_expect_eq(st->ndim, 3);
  cr_expect_eq(st->shape[0], 4);
  cr_expect_eq(st->shape[1], 32);
  cr_expect_eq(st->shape[2], 32);
  /* at() walks offsets upwards, back to back */
  const uint8_t *prev = NULL;
  for (size_t i = 0; i < metrale_safetensors_count(f); i++) {
    const metrale_tensor_info *t = metrale_safetensors_at(f, i);
    const uint8_t *p = metrale_safetensors_data(f, t);
    if (prev) cr_expect_eq(p, prev);
    prev = p + t->nbytes;
  }
  float *x = malloc(40 * 128 * sizeof *x);
  ok(metrale_safetensors_read_f32(f, "input", x, 40 * 128));
  const uint16_t *raw = metrale_safetensors_data(f, in);
  double sum = 0;
  for (int i = 0; i < 40 * 128; i++) {
    uint16_t h;
    memcpy(&h, raw + i, 2);
    cr_assert_eq(x[i], metrale_bf16_to_f32(h));
    sum += fabs(x[i]);
  }
  cr_expect_gt(sum, 0.0);
  /* released pages come back from the file unchanged */
  metrale_safetensors_release(f, in);
  float *y = malloc(40 * 128 * sizeof *y);
  ok(metrale_safetensors_read_f32(f, "input", y, 40 * 128));
  cr_expect_eq(memcmp(x, y, 40 * 128 * sizeof *x), 0);
  free(x);
  free(y);
  metrale_safetensors_close(f);
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

Test(safetensors, release_drops_the_pages_of_a_tensor) {
  enum { MIB = 32 };
  uint8_t *buf = malloc(MIB << 20);
  cr_assert_not_null(buf);
  for (size_t i = 0; i < (size_t)MIB << 20; i++) buf[i] = (uint8_t)(i * 2654435761u >> 24);
  char path[128];
  snprintf(path, sizeof path, "%s/pages.safetensors", tmpdir);
  metrale_tensor_out t = {"w", METRALE_DTYPE_BF16, 1, {(uint64_t)MIB << 19}, buf};
  ok(metrale_safetensors_write(path, &t, 1));
  metrale_safetensors *f = NULL;
  ok(metrale_safetensors_open(path, &f));
  const metrale_tensor_info *w = metrale_safetensors_find(f, "w");
  long before = rss_file_kib();
  const volatile uint8_t *p = metrale_safetensors_data(f, w);
  unsigned sum = 0;
  for (size_t i = 0; i < w->nbytes; i += 4096) sum += p[i];
  long touched = rss_file_kib();
  cr_expect_geq(touched - before, (MIB - 2) * 1024, "touching maps the pages (%ld -> %ld KiB)", before,
                touched);
  metrale_safetensors_release(f, w);
  long after = rss_file_kib();
  cr_expect_leq(after - before, 1024, "release unmaps them (%ld -> %ld -> %ld KiB)", before, touched,
                after);
  cr_expect_eq(memcmp((const void *)p, buf, w->nbytes), 0, "contents come back from the file");
  (void)sum;
  metrale_safetensors_close(f);
  free(buf);
}

Test(safetensors, data_of_a_foreign_tensor_is_null) {
  metrale_safetensors *a = NULL, *b = NULL;
  ok(metrale_safetensors_open(METRALE_FIXTURES_DIR "/moe_r2/io.safetensors", &a));
  ok(metrale_safetensors_open(METRALE_FIXTURES_DIR "/moe_r4/io.safetensors", &b));
  const metrale_tensor_info *t = metrale_safetensors_at(b, 0);
  cr_expect_null(metrale_safetensors_data(a, t));
  metrale_safetensors_release(a, t); /* must not touch a's mapping */
  metrale_safetensors_close(a);
  metrale_safetensors_close(b);
}

Test(safetensors, missing_folder_fifo_short_files) {
  metrale_safetensors *f = (metrale_safetensors *)0x1;
  expect_error(metrale_safetensors_open("/nonexistent/x.safetensors", &f), METRALE_CODE_NOT_FOUND,
               "/nonexistent/x.safetensors");
  expect_error(metrale_safetensors_open(tmpdir, &f), METRALE_CODE_IO, tmpdir);
  char path[128];
  snprintf(path, sizeof path, "%s/fifo.safetensors", tmpdir);
  cr_assert_eq(mkfifo(path, 0600), 0);
  expect_error(metrale_safetensors_open(path, &f), METRALE_CODE_IO, path); /* no hang */
  cr_expect_eq(f, (metrale_safetensors *)0x1, "out_file untouched on failure");
}
