#include "harness.h"
#include "test_skip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *cf_alloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  cr_assert(p != NULL, "out of host memory (%zu x %zu bytes)", count, size);
  return p;
}

static size_t type_size(cf_type t) { return t == CF_BF16 || t == CF_F16 ? 2 : 4; }

void cf_open(cf_ctx *ctx) {
  memset(ctx, 0, sizeof *ctx);
  const char *name = getenv("METRALE_TEST_BACKEND");
  ctx->backend = name && *name ? name : "cpu";
  ctx->dev = mt_open_backend(ctx->backend);
  /* METRALE_TEST_FORCE_ORACLE exercises the oracle path on cpu itself */
  const char *force = getenv("METRALE_TEST_FORCE_ORACLE");
  if (strcmp(ctx->backend, "cpu") != 0 || (force && *force && strcmp(force, "0") != 0)) {
    metrale_device_options cpu = {.backend = "cpu", .device_index = 0};
    metrale_status s = metrale_device_open(&cpu, &ctx->oracle);
    if (s) {
      char reason[600];
      snprintf(reason, sizeof reason, "%s", metrale_status_message(s));
      metrale_status_free(s);
      cr_assert_fail("cannot open the cpu oracle: %s", reason);
    }
  }
  ctx->seed = mt_fresh_seed();
  mt_rng_init(&ctx->rng, ctx->seed);
  snprintf(ctx->shape, sizeof ctx->shape, "-");
}

void cf_close(cf_ctx *ctx) {
  metrale_device_destroy(ctx->dev);
  metrale_device_destroy(ctx->oracle);
  ctx->dev = ctx->oracle = NULL;
}

gpu_kernel cf_kernel(cf_ctx *ctx, metrale_kernel_id id) {
  const metrale_kernel_info *info = metrale_kernel_info_get(id);
  cr_assert(info != NULL, "kernel id %d not in the manifest", (int)id);
  gpu_kernel k = metrale_try_kernel(ctx->dev, id);
  if (k) return k;
  /* ask the backend again, to report its own reason */
  gpu_backend *be = metrale_device_backend(ctx->dev);
  gpu_kernel h = 0;
  metrale_status s = be->vt->kernel(be, info->module, info->name, &h);
  fprintf(stderr, "%s: %s.%s not provided: %s\n", ctx->backend, info->module, info->name,
          s ? metrale_status_message(s) : "lookup succeeded on the second try");
  metrale_status_free(s);
  cr_expect(info->requirement == METRALE_OPTIONAL, "%s lacks REQUIRED kernel %s.%s", ctx->backend,
            info->module, info->name);
  return 0;
}

void cf_launch_init(cf_launch *l, metrale_kernel_id id, gpu_dim3 grid) {
  memset(l, 0, sizeof *l);
  l->id = id;
  l->grid = grid;
  for (size_t p = 0; p < sizeof l->phase_id / sizeof l->phase_id[0]; p++) l->phase_id[p] = id;
}

int cf_buf_add(cf_launch *l, const char *name, cf_type type, cf_dir dir, size_t count,
               const void *init, double oracle_tol) {
  cr_assert(l->nbuf < CF_MAX_BUF, "too many buffers in one launch");
  cf_buf *b = &l->buf[l->nbuf];
  b->name = name;
  b->type = type;
  b->dir = dir;
  b->count = count;
  b->init = init;
  b->oracle_tol = oracle_tol;
  return (int)l->nbuf++;
}

static void push(cf_launch *l, int buf, gpu_arg a) {
  cr_assert(l->nargs < METRALE_MAX_KERNEL_ARGS, "too many arguments");
  l->arg_buf[l->nargs] = buf;
  l->arg[l->nargs++] = a;
}

void cf_arg_buf(cf_launch *l, int buf) { push(l, buf, gpu_arg_ptr(0)); }
void cf_arg_null(cf_launch *l) { push(l, -1, gpu_arg_ptr(0)); }
void cf_arg_u32(cf_launch *l, uint32_t v) { push(l, -1, gpu_arg_u32(v)); }
void cf_arg_i32(cf_launch *l, int32_t v) { push(l, -1, gpu_arg_i32(v)); }
void cf_arg_f32(cf_launch *l, float v) { push(l, -1, gpu_arg_f32(v)); }

void cf_launch_free(cf_launch *l) {
  for (uint32_t i = 0; i < l->nbuf; i++) {
    free(l->buf[i].result);
    l->buf[i].result = NULL;
  }
}

#define CF_CHECK_STATUS(ctx, expr, what)                              \
  do {                                                                \
    metrale_status st_ = (expr);                                      \
    if (st_) {                                                        \
      CF_EXPECT(ctx, 0, "%s: %s", what, metrale_status_message(st_)); \
      metrale_status_free(st_);                                       \
      ok = 0;                                                         \
      goto done;                                                      \
    }                                                                 \
  } while (0)

/* One launch on one device; results[i] receives buffer i's contents afterwards. */
static int run_on(cf_ctx *ctx, metrale_device *dev, const char *label, cf_launch *l,
                  gpu_kernel kernel, void **results) {
  gpu_backend *be = metrale_device_backend(dev);
  mt_buffer bufs[CF_MAX_BUF];
  memset(bufs, 0, sizeof bufs);
  gpu_arg args[METRALE_MAX_KERNEL_ARGS];
  int ok = 1;
  for (uint32_t i = 0; i < l->nbuf; i++) {
    cf_buf *b = &l->buf[i];
    size_t bytes = b->count * type_size(b->type);
    results[i] = cf_alloc(bytes ? bytes : 1, 1);
    CF_CHECK_STATUS(ctx, mt_buffer_alloc(be, bytes, b->guard, b->misalign, &bufs[i]), label);
    if (b->dir == CF_OUT || (b->dir == CF_SCRATCH && !b->init)) {
      memset(results[i], 0xff, bytes); /* NaN in bf16/f16/f32, -1 in i32: unwritten shows */
      CF_CHECK_STATUS(ctx, mt_upload(be, &bufs[i], results[i]), label);
    } else {
      CF_CHECK_STATUS(ctx, mt_upload(be, &bufs[i], b->init), label);
    }
  }
  for (uint32_t a = 0; a < l->nargs; a++) {
    args[a] = l->arg[a];
    if (l->arg_buf[a] >= 0) args[a].v.ptr = bufs[l->arg_buf[a]].ptr;
  }
  {
    const metrale_kernel_info *info = metrale_kernel_info_get(l->id);
    char what[160];
    snprintf(what, sizeof what, "%s: launch of %s.%s", label, info->module, info->name);
    for (uint32_t p = 0; p < (l->nphase ? l->nphase : 1); p++) {
      gpu_dim3 grid = l->grid;
      metrale_kernel_id id = l->id;
      gpu_kernel k = kernel;
      uint32_t nargs = l->nargs;
      if (l->nphase) {
        grid = l->phase_grid[p];
        if (l->phase_nargs[p]) nargs = l->phase_nargs[p] < nargs ? l->phase_nargs[p] : nargs;
        args[l->phase_arg] = gpu_arg_u32(p);
        if (l->phase_id[p] != l->id) { /* the other kernel of a pair, looked up here */
          id = l->phase_id[p];
          k = metrale_try_kernel(dev, id);
          CF_EXPECT(ctx, k != 0, "%s: phase %u's kernel %s is missing", label, p,
                    metrale_kernel_info_get(id)->name);
          if (!k) {
            ok = 0;
            goto done;
          }
        }
      }
      CF_CHECK_STATUS(ctx, metrale_launch(dev, id, k, grid, NULL, args, nargs), what);
    }
    CF_CHECK_STATUS(ctx, be->vt->sync(be), what);
  }
  for (uint32_t i = 0; i < l->nbuf; i++) {
    cf_buf *b = &l->buf[i];
    CF_CHECK_STATUS(ctx, mt_download(be, results[i], &bufs[i]), label);
    char where[96];
    int guards = mt_guard_check(be, &bufs[i], where, sizeof where);
    CF_EXPECT(ctx, guards, "%s: guard band of %s written (%s)", label, b->name, where);
    if (!guards) ok = 0;
    if (b->dir == CF_IN && b->count) {
      int same = memcmp(results[i], b->init, b->count * type_size(b->type)) == 0;
      CF_EXPECT(ctx, same, "%s: input %s was modified", label, b->name);
      if (!same) ok = 0;
    }
  }
done:
  for (uint32_t i = 0; i < l->nbuf; i++) mt_buffer_free(be, &bufs[i]);
  return ok;
}

static void compare_with_oracle(cf_ctx *ctx, cf_buf *b, const void *oracle) {
  size_t n = b->count;
  if (b->oracle_tol == 0.0 || b->type == CF_I32) {
    cf_check_exact(ctx, b->name, b->result, oracle, type_size(b->type), n);
    return;
  }
  double *ref = cf_alloc(n, sizeof *ref);
  if (b->type == CF_BF16)
    mt_bf16_to_double(ref, oracle, n);
  else if (b->type == CF_F16)
    mt_f16_to_double(ref, oracle, n);
  else
    mt_f32_to_double(ref, oracle, n);
  char what[96];
  snprintf(what, sizeof what, "%s vs cpu oracle", b->name);
  if (b->type == CF_BF16)
    cf_check_bf16(ctx, what, b->result, ref, n, b->oracle_tol);
  else if (b->type == CF_F16)
    cf_check_f16(ctx, what, b->result, ref, n, b->oracle_tol);
  else
    cf_check_f32_scaled(ctx, what, b->result, ref, b->scale, n, b->oracle_tol);
  free(ref);
}

int cf_run(cf_ctx *ctx, cf_launch *l, gpu_kernel kernel) {
  void *results[CF_MAX_BUF] = {0};
  int ok = run_on(ctx, ctx->dev, ctx->backend, l, kernel, results);
  for (uint32_t i = 0; i < l->nbuf; i++) l->buf[i].result = results[i];
  if (!ok || !ctx->oracle) return ok;

  gpu_kernel ok_kernel = 0;
  metrale_status s = metrale_kernel(ctx->oracle, l->id, &ok_kernel);
  if (s) {
    CF_EXPECT(ctx, 0, "cpu oracle: %s", metrale_status_message(s));
    metrale_status_free(s);
    return ok;
  }
  void *oracle[CF_MAX_BUF] = {0};
  if (run_on(ctx, ctx->oracle, "cpu oracle", l, ok_kernel, oracle)) {
    for (uint32_t i = 0; i < l->nbuf; i++)
      if (l->buf[i].dir != CF_IN && l->buf[i].dir != CF_SCRATCH)
        compare_with_oracle(ctx, &l->buf[i], oracle[i]);
  }
  for (uint32_t i = 0; i < l->nbuf; i++) free(oracle[i]);
  return ok;
}

/* METRALE_CF_LOG_NMSE=1: every NMSE checked against a tolerance, logged (to set and
 * document tolerances from measured errors). */
static void log_nmse(const cf_ctx *ctx, const char *what, double e, double tol) {
  static int on = -1;
  if (on < 0) on = getenv("METRALE_CF_LOG_NMSE") != NULL;
  if (on) cr_log_info("nmse %s | %s: %.3g (tolerance %.3g)", ctx->shape, what, e, tol);
}

void cf_check_bf16(cf_ctx *ctx, const char *what, const metrale_bf16 *got, const double *ref,
                   size_t n, double tol) {
  size_t bad = 0;
  double e = mt_nmse_bf16(got, ref, n, &bad);
  log_nmse(ctx, what, e, tol);
  CF_EXPECT(ctx, bad == 0, "%s: %zu of %zu values are NaN/inf", what, bad, n);
  CF_EXPECT(ctx, e <= tol, "%s: NMSE %.3g > %.3g over %zu values", what, e, tol, n);
}

void cf_check_f16(cf_ctx *ctx, const char *what, const uint16_t *got, const double *ref, size_t n,
                  double tol) {
  size_t bad = 0;
  double e = mt_nmse_f16(got, ref, n, &bad);
  log_nmse(ctx, what, e, tol);
  CF_EXPECT(ctx, bad == 0, "%s: %zu of %zu values are NaN/inf", what, bad, n);
  CF_EXPECT(ctx, e <= tol, "%s: NMSE %.3g > %.3g over %zu values", what, e, tol, n);
}

void cf_check_f32(cf_ctx *ctx, const char *what, const float *got, const double *ref, size_t n,
                  double tol) {
  cf_check_f32_scaled(ctx, what, got, ref, NULL, n, tol);
}

void cf_check_f32_scaled(cf_ctx *ctx, const char *what, const float *got, const double *ref,
                         const double *scale, size_t n, double tol) {
  size_t bad = 0;
  double e = mt_nmse_f32_scaled(got, ref, scale, n, &bad);
  log_nmse(ctx, what, e, tol);
  CF_EXPECT(ctx, bad == 0, "%s: %zu of %zu values are NaN/inf", what, bad, n);
  CF_EXPECT(ctx, e <= tol, "%s: %s %.3g > %.3g over %zu values", what,
            scale ? "error relative to the terms' scale" : "NMSE", e, tol, n);
}

void cf_check_exact(cf_ctx *ctx, const char *what, const void *got, const void *want,
                    size_t elem_bytes, size_t n) {
  const uint8_t *g = got, *w = want;
  size_t first = n, count = 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(g + i * elem_bytes, w + i * elem_bytes, elem_bytes) != 0) {
      if (first == n) first = i;
      count++;
    }
  }
  CF_EXPECT(ctx, count == 0, "%s: %zu of %zu values differ, first at index %zu", what, count, n,
            first);
}

void cf_check_bf16_nearest(cf_ctx *ctx, const char *what, const metrale_bf16 *got, const float *exact, size_t n) {
  size_t first = n, count = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &exact[i], sizeof u);
    const metrale_bf16 down = (metrale_bf16)(u >> 16), up = (metrale_bf16)(down + 1u); /* a tie's neighbours */
    const int ok = (u & 0xffffu) == 0x8000u ? got[i] == down || got[i] == up : got[i] == metrale_f32_to_bf16(exact[i]);
    if (!ok) {
      if (first == n) first = i;
      count++;
    }
  }
  CF_EXPECT(ctx, count == 0, "%s: %zu of %zu values not rounded to nearest, first at index %zu (got %g, exact %.9g)",
            what, count, n, first, first < n ? (double)metrale_bf16_to_f32(got[first]) : 0.0,
            first < n ? (double)exact[first] : 0.0);
}

void cf_pick_slots(mt_rng *rng, int32_t *slots, uint32_t count, uint32_t n_slots, int pad) {
  cr_assert(count <= n_slots, "more slots asked for than exist");
  int32_t *perm = cf_alloc(n_slots, sizeof *perm);
  for (uint32_t i = 0; i < n_slots; i++) perm[i] = (int32_t)i;
  for (uint32_t i = n_slots; i > 1; i--) { /* Fisher-Yates */
    uint32_t j = mt_below(rng, i);
    int32_t t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
  for (uint32_t i = 0; i < count; i++) slots[i] = perm[i];
  if (pad && count > 1) {
    uint32_t first = mt_below(rng, count);
    for (uint32_t i = 0; i < count; i++)
      if (i == first || mt_below(rng, 3) == 0) slots[i] = -1;
  }
  free(perm);
}

void cf_check_state(cf_ctx *ctx, const char *what, const float *got, const float *init,
                    const double *ref, size_t per, uint32_t n_slots, const int32_t *slots,
                    uint32_t count, double tol) {
  for (uint32_t s = 0; s < n_slots; s++) {
    int named = 0;
    for (uint32_t i = 0; i < count; i++) named |= slots[i] == (int32_t)s;
    const float *g = got + (size_t)s * per;
    char label[128];
    if (!named) {
      snprintf(label, sizeof label, "%s: slot %u (not named in the call)", what, s);
      cf_check_exact(ctx, label, g, init + (size_t)s * per, sizeof(float), per);
    } else if (tol == 0.0) {
      float *want = cf_alloc(per, sizeof *want);
      for (size_t i = 0; i < per; i++) want[i] = (float)ref[(size_t)s * per + i];
      snprintf(label, sizeof label, "%s: slot %u", what, s);
      cf_check_exact(ctx, label, g, want, sizeof(float), per);
      free(want);
    } else {
      snprintf(label, sizeof label, "%s: slot %u", what, s);
      cf_check_f32(ctx, label, g, ref + (size_t)s * per, per, tol);
    }
  }
}

void cf_expect_refused(cf_ctx *ctx, metrale_kernel_id id, gpu_kernel kern, const gpu_arg *args, uint32_t nargs,
                       const char *what) {
  metrale_status st = metrale_launch(ctx->dev, id, kern, (gpu_dim3){2, 1, 1}, NULL, args, nargs);
  CF_EXPECT(ctx, metrale_status_code(st) == METRALE_CODE_INVALID_ARGUMENT, "%s gave %s: %s", what,
            metrale_code_name(metrale_status_code(st)), metrale_status_message(st));
  metrale_status_free(st);
}
