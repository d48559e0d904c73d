/* Timing and the device ceilings the benchmark reports against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ops/ops.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

metrale_status bench_time(metrale_device *dev, bench_fn fn, void *ctx, int warmup, int group, int samples,
                          double *out_median, double *out_min) {
  gpu_backend *be = metrale_device_backend(dev);
  if (group < 1) group = 1;
  for (int i = 0; i < warmup; i++) METRALE_RETURN_IF_ERROR(fn(ctx));
  METRALE_RETURN_IF_ERROR(be->vt->sync(be));
  /* calibrate on one group: enough calls per sample that a sample lasts about 2 ms, in whole
   * groups */
  double t0 = cli_now();
  for (int i = 0; i < group; i++) METRALE_RETURN_IF_ERROR(fn(ctx));
  METRALE_RETURN_IF_ERROR(be->vt->sync(be));
  double one = (cli_now() - t0) / group;
  int inner = one > 2e-3 ? 1 : (int)(2e-3 / (one > 1e-7 ? one : 1e-7)) + 1;
  if (inner > 1000) inner = 1000;
  inner = (inner + group - 1) / group * group;
  double *t = malloc(sizeof(double) * (size_t)samples);
  if (!t) return METRALE_ERROR(OUT_OF_MEMORY, "timing samples");
  metrale_status s = METRALE_OK;
  for (int k = 0; k < samples && !s; k++) {
    double a = cli_now();
    for (int i = 0; i < inner && !s; i++) s = fn(ctx);
    if (!s) s = be->vt->sync(be);
    t[k] = (cli_now() - a) / inner;
  }
  if (!s) {
    qsort(t, (size_t)samples, sizeof *t, cmp_double);
    *out_median = t[samples / 2];
    *out_min = t[0];
  }
  free(t);
  return s;
}

/* Appends to buf (of size n, used *at) as snprintf would, never past its end. */
static void append(char *buf, size_t n, size_t *at, const char *fmt, const char *name, unsigned long long k) {
  if (*at >= n) return;
  int w = snprintf(buf + *at, n - *at, fmt, name, k);
  if (w > 0) *at += (size_t)w < n - *at ? (size_t)w : n - *at - 1;
}

metrale_status bench_kernels(metrale_device *dev, bench_fn fn, void *ctx, char *text, size_t text_size, char *json,
                             size_t json_size) {
  gpu_backend *be = metrale_device_backend(dev);
  metrale_device_launches_reset(dev);
  METRALE_RETURN_IF_ERROR(fn(ctx));
  METRALE_RETURN_IF_ERROR(be->vt->sync(be));
  if (text_size < 8 || json_size < 8) return METRALE_ERROR(INVALID_ARGUMENT, "bench_kernels: buffers too small");
  size_t t = 0, j = 0;
  const size_t json_room = json_size - 2; /* the closing brace always fits: the object stays valid */
  text[0] = '\0';
  append(json, json_room, &j, "{", "", 0);
  for (int k = 0; k < METRALE_K_COUNT; k++) {
    const unsigned long long c = metrale_device_launches(dev, (metrale_kernel_id)k);
    if (!c) continue;
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)k);
    char name[96];
    snprintf(name, sizeof name, "%s.%s", info->module, info->name);
    append(text, text_size, &t, t ? ", %s" : "%s", name, 0);
    if (c > 1) append(text, text_size, &t, "%s x%llu", "", c);
    /* whole entries only, or none */
    char entry[160];
    snprintf(entry, sizeof entry, j > 1 ? ", \"%s\": %llu" : "\"%s\": %llu", name, c);
    if (j + strlen(entry) < json_room) append(json, json_room, &j, "%s", entry, 0);
  }
  append(json, json_size, &j, "}", "", 0);
  if (!t) snprintf(text, text_size, "(none)");
  return METRALE_OK;
}

typedef struct copy_ctx {
  gpu_backend *be;
  gpu_ptr a, b;
  uint64_t bytes;
} copy_ctx;

static metrale_status copy_once(void *p) {
  copy_ctx *c = p;
  return c->be->vt->copy_d2d(c->be, c->b, c->a, c->bytes, NULL);
}

metrale_status bench_copy_bandwidth(metrale_device *dev, uint64_t bytes, double *out_gbps) {
  copy_ctx c = {metrale_device_backend(dev), 0, 0, bytes};
  metrale_status s = metrale_alloc(dev, bytes, &c.a);
  if (!s) s = metrale_alloc(dev, bytes, &c.b);
  if (!s) s = c.be->vt->memset(c.be, c.a, 1, bytes, NULL);
  if (!s) s = c.be->vt->memset(c.be, c.b, 2, bytes, NULL);
  double med = 0, mn = 0;
  if (!s) s = bench_time(dev, copy_once, &c, 2, 1, 9, &med, &mn);
  if (!s) *out_gbps = 2.0 * (double)bytes / med / 1e9;
  metrale_free(dev, c.a);
  metrale_free(dev, c.b);
  return s;
}

typedef struct gemm_ctx {
  metrale_ops ops;
  gpu_ptr x, w, y;
  uint32_t n;
} gemm_ctx;

static metrale_status gemm_once(void *p) {
  gemm_ctx *g = p;
  return op_gemm(&g->ops, NULL, g->y, g->x, g->w, g->n, g->n, g->n);
}

metrale_status bench_gemm_rate(metrale_device *dev, uint32_t n, double *out_tflops) {
  gemm_ctx g = {.n = n};
  uint64_t bytes = (uint64_t)n * n * 2;
  gpu_backend *be = metrale_device_backend(dev);
  metrale_status s = metrale_ops_init(&g.ops, dev);
  if (!s) s = metrale_alloc(dev, bytes, &g.x);
  if (!s) s = metrale_alloc(dev, bytes, &g.w);
  if (!s) s = metrale_alloc(dev, bytes, &g.y);
  /* 0x3c3c is a small normal bf16 (about 0.0115): no denormals, no overflow */
  if (!s) s = be->vt->memset(be, g.x, 0x3c, bytes, NULL);
  if (!s) s = be->vt->memset(be, g.w, 0x3c, bytes, NULL);
  double med = 0, mn = 0;
  if (!s) s = bench_time(dev, gemm_once, &g, 1, 1, 5, &med, &mn);
  if (!s) *out_tflops = 2.0 * n * (double)n * n / med / 1e12;
  metrale_free(dev, g.x);
  metrale_free(dev, g.w);
  metrale_free(dev, g.y);
  return s;
}
