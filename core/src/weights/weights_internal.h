/* Private pieces shared by the weight loaders (not installed). */
#ifndef METRALE_WEIGHTS_INTERNAL_H
#define METRALE_WEIGHTS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "metrale/weights.h"

/* Largest JSON text read whole (index.json, config.json, a safetensors header): what the
 * reference safetensors implementation allows for a header. */
#define METRALE_JSON_MAX_BYTES 100000000u

struct metrale_safetensors {
  char *path;
  const uint8_t *map; /* whole file, read-only, MAP_PRIVATE */
  size_t map_len;
  const uint8_t *data; /* map + 8 + header length */
  uint64_t data_len;
  size_t count;
  metrale_tensor_info *tensors; /* offset order */
  uint64_t *begin;              /* byte offset of tensors[i] inside data */
  const metrale_tensor_info **by_name; /* into tensors, sorted by name */
  char *names;                  /* one block holding every name */
};

/* Checked arithmetic: 0 on overflow, 1 otherwise. */
static inline int metrale_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a) return 0;
  *out = a * b;
  return 1;
}
static inline int metrale_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  if (b > UINT64_MAX - a) return 0;
  *out = a + b;
  return 1;
}

/* "BF16" -> METRALE_DTYPE_BF16; 0 when unknown. */
metrale_dtype metrale_dtype_parse(const char *name);
/* Element count of a tensor (its nbytes / dtype size). */
uint64_t metrale_tensor_elements(const metrale_tensor_info *t);
/* "[2, 3, 4]" into buf (always terminated). */
void metrale_shape_format(const uint64_t *shape, uint32_t ndim, char *buf, size_t cap);

/* Reads a whole regular file of at most max_bytes: NOT_FOUND when missing, IO when it
 * cannot be read or is not a regular file, DATA_LOSS when larger than max_bytes.  The
 * buffer is NUL-terminated (not counted in *out_len); free() it. */
metrale_status metrale_read_small_file(const char *path, size_t max_bytes, char **out_buf,
                                       size_t *out_len);

/* Parses and validates the JSON header of f (f->path, f->data, f->data_len set) and fills
 * f->count, tensors, begin, by_name, names.  Errors do not name the file (the caller
 * prefixes it). */
metrale_status metrale_safetensors_parse_header(struct metrale_safetensors *f,
                                                const char *json, size_t len);

/* Converts count elements from src (dtype from, possibly unaligned) to dst (dtype to,
 * BF16 or F32).  from must be BF16, F16 or F32. */
void metrale_convert(metrale_dtype from, const void *src, metrale_dtype to, void *dst,
                     size_t count);

/* madvise(MADV_DONTNEED) over the pages covering [p, p + len) of f's mapping. */
void metrale_safetensors_release_range(const metrale_safetensors *f, const void *p,
                                       uint64_t len);

#endif
