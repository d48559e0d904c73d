/* Streaming a checkpoint tensor into device memory, converted on the way.
 * Peak host memory stays at the bounce buffer plus the pages of the chunk in flight:
 * source pages are released as soon as their bytes have left for the device. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"

#define BOUNCE_BYTES (4u << 20) /* two halves: one is converted while the other is copied */
#define DIRECT_CHUNK (64u << 20) /* same dtype: straight from the mapping, in these steps */

static metrale_status check_request(const metrale_tensor_info *t, const char *path,
                                    metrale_dtype to, const uint64_t *shape, uint32_t ndim) {
  int same = ndim == t->ndim;
  for (uint32_t d = 0; same && d < ndim; d++) same = shape[d] == t->shape[d];
  if (!same) {
    char want[256], have[256];
    metrale_shape_format(shape, ndim > METRALE_MAX_DIMS ? METRALE_MAX_DIMS : ndim, want,
                         sizeof want);
    metrale_shape_format(t->shape, t->ndim, have, sizeof have);
    return METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s' in %s: expected shape %s%s, found %s",
                         t->name, path, want, ndim > METRALE_MAX_DIMS ? "..." : "", have);
  }
  if (t->dtype == METRALE_DTYPE_I32)
    return METRALE_ERROR(INVALID_ARGUMENT,
                         "tensor '%s' in %s is I32; only BF16, F16 and F32 tensors convert to %s",
                         t->name, path, metrale_dtype_name(to));
  return METRALE_OK;
}

static metrale_status copy_direct(gpu_backend *be, const metrale_safetensors *f,
                                  const uint8_t *src, uint64_t nbytes, gpu_ptr dst) {
  for (uint64_t off = 0; off < nbytes; off += DIRECT_CHUNK) {
    uint64_t len = nbytes - off < DIRECT_CHUNK ? nbytes - off : DIRECT_CHUNK;
    METRALE_RETURN_IF_ERROR(be->vt->copy_h2d(be, dst + off, src + off, len, NULL));
    METRALE_RETURN_IF_ERROR(be->vt->stream_sync(be, NULL));
    metrale_safetensors_release_range(f, src + off, len);
  }
  return METRALE_OK;
}

static metrale_status copy_converted(gpu_backend *be, const metrale_safetensors *f,
                                     uint8_t *bounce, metrale_dtype from, const uint8_t *src,
                                     uint64_t count, metrale_dtype to, gpu_ptr dst) {
  size_t ses = metrale_dtype_size(from), des = metrale_dtype_size(to);
  size_t half = BOUNCE_BYTES / 2;
  uint64_t per = half / (ses > des ? ses : des);
  int pending[2] = {0, 0}, h = 0;
  for (uint64_t i = 0; i < count; i += per, h ^= 1) {
    size_t n = (size_t)(count - i < per ? count - i : per);
    if (pending[h]) { /* this half may still be read by its copy */
      METRALE_RETURN_IF_ERROR(be->vt->stream_sync(be, NULL));
      pending[0] = pending[1] = 0;
    }
    uint8_t *buf = bounce + (size_t)h * half;
    metrale_convert(from, src + i * ses, to, buf, n);
    metrale_safetensors_release_range(f, src + i * ses, (uint64_t)n * ses);
    METRALE_RETURN_IF_ERROR(be->vt->copy_h2d(be, dst + i * des, buf, (uint64_t)n * des, NULL));
    pending[h] = 1;
  }
  return be->vt->stream_sync(be, NULL);
}

metrale_status metrale_checkpoint_upload(metrale_checkpoint *c, metrale_device *dev,
                                         const char *name, metrale_dtype to,
                                         const uint64_t *shape, uint32_t ndim, gpu_ptr dst) {
  if (!c || !dev || !name || (!shape && ndim))
    return METRALE_ERROR(INVALID_ARGUMENT, "checkpoint_upload: NULL argument");
  if (to != METRALE_DTYPE_BF16 && to != METRALE_DTYPE_F32)
    return METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s': upload target must be BF16 or F32, not %s",
                         name, metrale_dtype_name(to));
  metrale_safetensors *f = NULL;
  const metrale_tensor_info *t = NULL;
  METRALE_RETURN_IF_ERROR(metrale_checkpoint_lookup(c, name, &f, &t));
  METRALE_RETURN_IF_ERROR(check_request(t, f->path, to, shape, ndim));
  if (t->nbytes == 0) return METRALE_OK;
  if (dst == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s': destination is the null pointer", name);

  gpu_backend *be = metrale_device_backend(dev);
  const uint8_t *src = metrale_safetensors_data(f, t);
  metrale_status s;
  if (t->dtype == to) {
    s = copy_direct(be, f, src, t->nbytes, dst);
  } else {
    if (!c->bounce) c->bounce = malloc(BOUNCE_BYTES);
    if (!c->bounce) return METRALE_ERROR(OUT_OF_MEMORY, "upload bounce buffer");
    s = copy_converted(be, f, c->bounce, t->dtype, src, metrale_tensor_elements(t), to, dst);
  }
  if (s) {
    /* no copy may still read the bounce buffer or the pages once we return */
    metrale_status_free(be->vt->stream_sync(be, NULL));
    return metrale_status_annotate(s, "uploading tensor '%s' from %s", name, f->path);
  }
  metrale_safetensors_release(f, t);
  return METRALE_OK;
}
