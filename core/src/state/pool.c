/* The state pool: two device arrays indexed by slot. */
#include <stdlib.h>
#include <string.h>

#include "metrale/state.h"

struct metrale_state_pool {
  metrale_device *dev;
  metrale_state_dims dims;
  uint32_t n_slots;
  gpu_ptr conv;      /* f32 [n_slots, C, K-1] */
  gpu_ptr recurrent; /* f32 [n_slots, nv, dk, dv] */
};

metrale_state_dims metrale_state_dims_of(const metrale_qwen3_config *cfg) {
  metrale_state_dims d = {
      .conv_dim = 2 * cfg->nk * cfg->dk + cfg->nv * cfg->dv,
      .conv_width = cfg->conv_kernel,
      .nv = cfg->nv,
      .dk = cfg->dk,
      .dv = cfg->dv,
  };
  return d;
}

static uint64_t conv_floats(metrale_state_dims d) {
  return (uint64_t)d.conv_dim * (d.conv_width > 0 ? d.conv_width - 1 : 0);
}
static uint64_t rec_floats(metrale_state_dims d) { return (uint64_t)d.nv * d.dk * d.dv; }

metrale_status metrale_state_pool_create(metrale_device *dev, metrale_state_dims dims,
                                         uint32_t n_slots, metrale_state_pool **out_pool) {
  if (n_slots == 0 || n_slots > (1u << 24))
    return METRALE_ERROR(INVALID_ARGUMENT, "state pool needs 1..%u slots, got %u", 1u << 24, n_slots);
  if (dims.conv_width < 1 || dims.conv_dim == 0 || dims.nv == 0 || dims.dk == 0 || dims.dv == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "state pool dimensions must be positive");
  metrale_state_pool *p = calloc(1, sizeof *p);
  if (!p) return METRALE_ERROR(OUT_OF_MEMORY, "state pool object");
  p->dev = dev;
  p->dims = dims;
  p->n_slots = n_slots;
  gpu_backend *be = metrale_device_backend(dev);
  uint64_t cb = conv_floats(dims) * n_slots * sizeof(float);
  uint64_t rb = rec_floats(dims) * n_slots * sizeof(float);
  metrale_status s = metrale_alloc(dev, cb, &p->conv);
  if (!s) s = metrale_alloc(dev, rb, &p->recurrent);
  if (!s) s = be->vt->memset(be, p->conv, 0, cb, NULL);
  if (!s) s = be->vt->memset(be, p->recurrent, 0, rb, NULL);
  if (!s) s = be->vt->stream_sync(be, NULL);
  if (s) {
    metrale_state_pool_destroy(p);
    return metrale_status_annotate(s, "state pool of %u slots (%.1f MB)", n_slots,
                                   (double)(cb + rb) / 1e6);
  }
  *out_pool = p;
  return METRALE_OK;
}

void metrale_state_pool_destroy(metrale_state_pool *pool) {
  if (!pool) return;
  metrale_free(pool->dev, pool->conv);
  metrale_free(pool->dev, pool->recurrent);
  free(pool);
}

uint32_t metrale_state_pool_slots(const metrale_state_pool *p) { return p->n_slots; }
metrale_state_dims metrale_state_pool_dims(const metrale_state_pool *p) { return p->dims; }
gpu_ptr metrale_state_pool_conv(const metrale_state_pool *p) { return p->conv; }
gpu_ptr metrale_state_pool_recurrent(const metrale_state_pool *p) { return p->recurrent; }
uint64_t metrale_state_pool_conv_floats(const metrale_state_pool *p) { return conv_floats(p->dims); }
uint64_t metrale_state_pool_recurrent_floats(const metrale_state_pool *p) { return rec_floats(p->dims); }

metrale_status metrale_state_pool_check_slots(const metrale_state_pool *pool, const int32_t *slots,
                                              uint32_t count) {
  if (count && !slots) return METRALE_ERROR(INVALID_ARGUMENT, "slot list is missing");
  for (uint32_t i = 0; i < count; i++) {
    int32_t s = slots[i];
    if (s == -1) continue;
    if (s < 0 || (uint32_t)s >= pool->n_slots)
      return METRALE_ERROR(INVALID_ARGUMENT, "slot %d (entry %u) is outside the pool's %u slots",
                           s, i, pool->n_slots);
    for (uint32_t j = 0; j < i; j++)
      if (slots[j] == s)
        return METRALE_ERROR(INVALID_ARGUMENT, "slot %d is named twice (entries %u and %u)", s, j, i);
  }
  return METRALE_OK;
}

metrale_status metrale_state_pool_reset(metrale_state_pool *pool, const int32_t *slots,
                                        uint32_t count) {
  METRALE_RETURN_IF_ERROR(metrale_state_pool_check_slots(pool, slots, count));
  gpu_backend *be = metrale_device_backend(pool->dev);
  uint64_t cb = conv_floats(pool->dims) * sizeof(float);
  uint64_t rb = rec_floats(pool->dims) * sizeof(float);
  for (uint32_t i = 0; i < count; i++) {
    if (slots[i] < 0) continue;
    uint64_t s = (uint64_t)slots[i];
    METRALE_RETURN_IF_ERROR(be->vt->memset(be, pool->conv + s * cb, 0, cb, NULL));
    METRALE_RETURN_IF_ERROR(be->vt->memset(be, pool->recurrent + s * rb, 0, rb, NULL));
  }
  return be->vt->stream_sync(be, NULL);
}

metrale_status metrale_state_pool_read(metrale_state_pool *pool, int32_t slot, float *conv,
                                       float *recurrent) {
  if (slot < 0 || (uint32_t)slot >= pool->n_slots)
    return METRALE_ERROR(INVALID_ARGUMENT, "slot %d is outside the pool's %u slots", slot,
                         pool->n_slots);
  gpu_backend *be = metrale_device_backend(pool->dev);
  uint64_t cb = conv_floats(pool->dims) * sizeof(float);
  uint64_t rb = rec_floats(pool->dims) * sizeof(float);
  if (conv) METRALE_RETURN_IF_ERROR(be->vt->copy_d2h(be, conv, pool->conv + (uint64_t)slot * cb, cb, NULL));
  if (recurrent)
    METRALE_RETURN_IF_ERROR(
        be->vt->copy_d2h(be, recurrent, pool->recurrent + (uint64_t)slot * rb, rb, NULL));
  return be->vt->stream_sync(be, NULL);
}
