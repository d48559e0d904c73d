/* Weight sources: a checkpoint's layer, or seeded random weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrale/bf16.h"
#include "metrale/qwen3_ssm.h"

/* ---- checkpoint ------------------------------------------------------------------- */

static metrale_status ckpt_upload(void *ctx, metrale_device *dev, const char *name,
                                  metrale_dtype to, const uint64_t *shape, uint32_t ndim,
                                  gpu_ptr dst) {
  metrale_checkpoint_source *src = ctx;
  char full[256], alt[256];
  snprintf(full, sizeof full, "model.layers.%u.%s", src->layer_index, name);
  snprintf(alt, sizeof alt, "model.language_model.layers.%u.%s", src->layer_index, name);
  const metrale_tensor_info *info = NULL;
  metrale_status s = metrale_checkpoint_find(src->ckpt, full, &info);
  if (s && metrale_status_code(s) == METRALE_CODE_NOT_FOUND) {
    metrale_status s2 = metrale_checkpoint_find(src->ckpt, alt, &info);
    if (!s2) {
      metrale_status_free(s);
      return metrale_checkpoint_upload(src->ckpt, dev, alt, to, shape, ndim, dst);
    }
    metrale_status_free(s2);
  }
  if (s) return s;
  return metrale_checkpoint_upload(src->ckpt, dev, full, to, shape, ndim, dst);
}

metrale_weight_source metrale_weight_source_checkpoint(metrale_checkpoint_source *src) {
  metrale_weight_source w = {ckpt_upload, src};
  return w;
}

/* ---- random ----------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t hash_name(const char *s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

static float uniform01(uint64_t *st) { return (float)(splitmix(st) >> 40) * (1.0f / 16777216.0f); }

/* Unit-variance, zero-mean noise: the sum of four uniforms, rescaled (cheap, and the
 * bench fills gigabytes with it). */
static float noise(uint64_t *st) {
  float s = uniform01(st) + uniform01(st) + uniform01(st) + uniform01(st);
  return (s - 2.0f) * 1.7320508f;
}

enum { CHUNK = 1 << 20 };

static metrale_status rand_upload(void *ctx, metrale_device *dev, const char *name,
                                  metrale_dtype to, const uint64_t *shape, uint32_t ndim,
                                  gpu_ptr dst) {
  metrale_random_source *src = ctx;
  uint64_t n = 1;
  for (uint32_t i = 0; i < ndim; i++) n *= shape[i];
  uint64_t fan_in = ndim ? shape[ndim - 1] : 1;
  size_t esize = to == METRALE_DTYPE_F32 ? 4 : 2;
  gpu_backend *be = metrale_device_backend(dev);
  void *buf = malloc((size_t)CHUNK * esize);
  if (!buf) return METRALE_ERROR(OUT_OF_MEMORY, "random weight buffer");
  const size_t len = strlen(name);
#define ENDS(suffix) (len >= strlen(suffix) && strcmp(name + len - strlen(suffix), suffix) == 0)
  /* the scales make_reference.py uses, so activations stay O(1) */
  enum { LINEAR, A_LOG, DT_BIAS, GNORM, NORM, CONV } kind = LINEAR;
  if (ENDS("A_log")) kind = A_LOG;
  else if (ENDS("dt_bias")) kind = DT_BIAS;
  else if (ENDS("linear_attn.norm.weight")) kind = GNORM;
  else if (ENDS("layernorm.weight")) kind = NORM;
  else if (ENDS("conv1d.weight")) kind = CONV;
  const float scale = (kind == LINEAR && ENDS("mlp.gate.weight")) ? 3.0f : 1.0f;
#undef ENDS
  const float inv_sqrt_fan = 1.0f / sqrtf((float)fan_in);
  metrale_status s = METRALE_OK;
  for (uint64_t at = 0; at < n && !s; at += CHUNK) {
    uint64_t m = n - at < CHUNK ? n - at : CHUNK;
    uint64_t base_seed = hash_name(name, src->seed) + at;
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < (int64_t)((m + 4095) / 4096); blk++) {
      uint64_t st = base_seed * 0x100000001b3ull + (uint64_t)blk;
      uint64_t end = (uint64_t)(blk + 1) * 4096 < m ? (uint64_t)(blk + 1) * 4096 : m;
      for (uint64_t i = (uint64_t)blk * 4096; i < end; i++) {
        float v;
        switch (kind) {
          case A_LOG: v = logf(1.0f + 15.0f * uniform01(&st)); break;
          case DT_BIAS: v = -1.0f + 2.5f * uniform01(&st); break;
          case GNORM: v = 1.0f + 0.2f * noise(&st); break;
          case NORM: v = 0.2f * noise(&st); break;
          default: v = scale * noise(&st) * inv_sqrt_fan; break;
        }
        if (esize == 4) ((float *)buf)[i] = metrale_bf16_to_f32(metrale_f32_to_bf16(v));
        else ((metrale_bf16 *)buf)[i] = metrale_f32_to_bf16(v);
      }
    }
    s = be->vt->copy_h2d(be, dst + at * esize, buf, m * esize, NULL);
    if (!s) s = be->vt->stream_sync(be, NULL);
  }
  free(buf);
  return s;
}

metrale_weight_source metrale_weight_source_random(metrale_random_source *src) {
  metrale_weight_source w = {rand_upload, src};
  return w;
}
