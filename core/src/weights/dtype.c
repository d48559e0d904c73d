/* Element types of tensor files and the conversions between them. */
#include <stdio.h>
#include <string.h>

#include "metrale/bf16.h"
#include "weights_internal.h"

size_t metrale_dtype_size(metrale_dtype dt) {
  switch (dt) {
    case METRALE_DTYPE_BF16: return 2;
    case METRALE_DTYPE_F16: return 2;
    case METRALE_DTYPE_F32: return 4;
    case METRALE_DTYPE_I32: return 4;
  }
  return 0;
}

const char *metrale_dtype_name(metrale_dtype dt) {
  switch (dt) {
    case METRALE_DTYPE_BF16: return "BF16";
    case METRALE_DTYPE_F16: return "F16";
    case METRALE_DTYPE_F32: return "F32";
    case METRALE_DTYPE_I32: return "I32";
  }
  return "?";
}

metrale_dtype metrale_dtype_parse(const char *name) {
  static const metrale_dtype all[] = {METRALE_DTYPE_BF16, METRALE_DTYPE_F16, METRALE_DTYPE_F32,
                                      METRALE_DTYPE_I32};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(name, metrale_dtype_name(all[i])) == 0) return all[i];
  return (metrale_dtype)0;
}

uint64_t metrale_tensor_elements(const metrale_tensor_info *t) {
  size_t es = metrale_dtype_size(t->dtype);
  return es ? t->nbytes / es : 0;
}

void metrale_shape_format(const uint64_t *shape, uint32_t ndim, char *buf, size_t cap) {
  if (cap == 0) return;
  size_t n = 0;
  buf[0] = '\0';
  n += (size_t)snprintf(buf + n, cap - n, "[");
  for (uint32_t i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Source elements are read with memcpy: tensor data inside a file need not be aligned. */
static float load_f32(metrale_dtype from, const uint8_t *p) {
  switch (from) {
    case METRALE_DTYPE_BF16: {
      uint16_t h;
      memcpy(&h, p, 2);
      return metrale_bf16_to_f32(h);
    }
    case METRALE_DTYPE_F16: {
      uint16_t h;
      memcpy(&h, p, 2);
      return metrale_f16_to_f32(h);
    }
    default: {
      float f;
      memcpy(&f, p, 4);
      return f;
    }
  }
}

void metrale_convert(metrale_dtype from, const void *src, metrale_dtype to, void *dst,
                     size_t count) {
  const uint8_t *s = src;
  size_t es = metrale_dtype_size(from);
  if (from == to) {
    memcpy(dst, src, count * es);
    return;
  }
  if (to == METRALE_DTYPE_F32) {
    float *d = dst;
    for (size_t i = 0; i < count; i++) d[i] = load_f32(from, s + i * es);
  } else {
    metrale_bf16 *d = dst;
    for (size_t i = 0; i < count; i++) d[i] = metrale_f32_to_bf16(load_f32(from, s + i * es));
  }
}
