#include "layer_util.h"
#include "test_skip.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect_ok(metrale_status s, const char *what) {
  if (s) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, metrale_code_name(metrale_status_code(s)),
             metrale_status_message(s));
    metrale_status_free(s);
    cr_assert_fail("%s", msg);
  }
}

metrale_device *lt_open_device(void) {
  const char *name = getenv("METRALE_TEST_BACKEND");
  if (!name || !*name) name = "cpu";
  return mt_open_backend(name);
}

void lt_fixture_open(lt_fixture *f, const char *name, uint32_t layer) {
  memset(f, 0, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "%s/%s", METRALE_FIXTURES_DIR, name);
  f->layer = layer;
  char path[600];
  snprintf(path, sizeof path, "%s/config.json", f->dir);
  expect_ok(metrale_config_load(path, &f->cfg), "config");
  expect_ok(metrale_checkpoint_open(f->dir, &f->ckpt), "checkpoint");
  snprintf(path, sizeof path, "%s/io.safetensors", f->dir);
  expect_ok(metrale_safetensors_open(path, &f->io), "io.safetensors");
}

void lt_fixture_close(lt_fixture *f) {
  metrale_checkpoint_close(f->ckpt);
  metrale_safetensors_close(f->io);
}

float *lt_read(const lt_fixture *f, const char *name, uint64_t *count) {
  const metrale_tensor_info *t = metrale_safetensors_find(f->io, name);
  cr_assert(t, "fixture %s has no tensor %s", f->dir, name);
  uint64_t n = 1;
  for (uint32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
  float *v = malloc(n * sizeof *v);
  cr_assert(v);
  expect_ok(metrale_safetensors_read_f32(f->io, name, v, n), name);
  *count = n;
  return v;
}

void lt_run_init(lt_run *r, metrale_device *dev, const lt_fixture *f, const metrale_qwen3_config *cfg,
                 uint64_t random_seed, metrale_part part, const float *x, const uint32_t *lens,
                 uint32_t nseq, uint32_t n_slots) {
  memset(r, 0, sizeof *r);
  run_ctx *c = &r->c;
  c->dev = dev;
  c->be = metrale_device_backend(dev);
  c->part = part;
  c->H = cfg->hidden_size;
  c->nseq = nseq;
  for (uint32_t i = 0; i < nseq; i++) c->first[i] = r->T, c->len[i] = lens[i], r->T += lens[i];
  metrale_checkpoint_source cs = {f ? f->ckpt : NULL, f ? f->layer : 0};
  metrale_random_source rs = {random_seed};
  metrale_weight_source src = f ? metrale_weight_source_checkpoint(&cs) : metrale_weight_source_random(&rs);
  expect_ok(metrale_qwen3_ssm_layer_create(dev, cfg, f ? f->layer : 0, src, &c->layer), "layer");
  expect_ok(metrale_state_pool_create(dev, metrale_state_dims_of(cfg), n_slots, &c->pool), "pool");
  r->cf = metrale_state_pool_conv_floats(c->pool);
  r->rf = metrale_state_pool_recurrent_floats(c->pool);
  c->x = malloc(r->T * c->H * sizeof *c->x);
  c->y = calloc(r->T * c->H, sizeof *c->y);
  r->conv = calloc(r->cf * nseq, sizeof(float));
  r->rec = calloc(r->rf * nseq, sizeof(float));
  cr_assert(c->x && c->y && r->conv && r->rec);
  for (uint64_t i = 0; i < r->T * c->H; i++) c->x[i] = x[i];
  expect_ok(metrale_alloc(dev, r->T * c->H * 4, &c->dx), "dx");
  expect_ok(metrale_alloc(dev, r->T * c->H * 2, &c->dy), "dy");
}

void lt_run_mode(lt_run *r, run_mode mode, uint32_t split) {
  expect_ok(driver_run(&r->c, mode, split), "running the layer");
}

void lt_run_read_states(lt_run *r) {
  for (uint32_t i = 0; i < r->c.nseq; i++)
    expect_ok(metrale_state_pool_read(r->c.pool, (int32_t)i, r->conv + r->cf * i, r->rec + r->rf * i),
              "reading state");
}

void lt_run_free(lt_run *r) {
  metrale_free(r->c.dev, r->c.dx);
  metrale_free(r->c.dev, r->c.dy);
  metrale_state_pool_destroy(r->c.pool);
  metrale_qwen3_ssm_layer_destroy(r->c.layer);
  free(r->c.x);
  free(r->c.y);
  free(r->conv);
  free(r->rec);
}

double lt_rel_l2(const float *a, const float *b, uint64_t n) {
  double num = 0, den = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (!isfinite(a[i])) return INFINITY;
    double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* METRALE_TEST_PRINT_ERRORS=1 prints every comparison's error, passing or not (numerics work). */
void lt_expect_close(const char *what, const float *got, const float *want, uint64_t n, double tol) {
  double e = lt_rel_l2(got, want, n);
  const char *pe = getenv("METRALE_TEST_PRINT_ERRORS");
  if (pe && *pe == '1') fprintf(stderr, "error %.3e (tolerance %.1e): %s\n", e, tol, what);
  cr_expect(e <= tol, "%s: relative L2 error %.3e exceeds %.1e", what, e, tol);
}

void lt_expect_launched(metrale_device *dev, metrale_kernel_id id, const char *why) {
  if (!metrale_try_kernel(dev, id)) return;
  const metrale_kernel_info *info = metrale_kernel_info_get(id);
  cr_expect(metrale_device_launches(dev, id) > 0, "%s.%s was not launched: %s", info->module, info->name, why);
}

void lt_small_config(metrale_qwen3_config *c, int moe) {
  memset(c, 0, sizeof *c);
  c->family = METRALE_QWEN3_NEXT;
  c->hidden_size = 96;
  c->num_hidden_layers = 1;
  c->nk = 2, c->nv = 4, c->dk = 32, c->dv = 24, c->conv_kernel = 4;
  c->rms_norm_eps = 1e-6f;
  c->num_experts = moe ? 8 : 0, c->num_experts_per_tok = 2, c->moe_intermediate_size = 48;
  c->shared_expert_intermediate_size = 40, c->decoder_sparse_step = 1, c->norm_topk_prob = 1;
  c->intermediate_size = 160;
  c->linear_layer[0] = 1;
}

float *lt_random_x(uint64_t n, uint64_t seed) {
  float *x = malloc(n * sizeof *x);
  cr_assert(x);
  for (uint64_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = ((float)(seed >> 40) / 16777216.0f - 0.5f) * 3.0f;
  }
  return x;
}

int lt_expect_same_bits(const float *a, const float *b, uint64_t n, uint64_t ny, const char *what) {
  for (uint64_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      cr_expect(0, "%s: %s differs at %llu: %g vs %g", what, i < ny ? "a decode output" : "a final state",
                (unsigned long long)(i < ny ? i : i - ny), a[i], b[i]);
      return 1;
    }
  return 0;
}
