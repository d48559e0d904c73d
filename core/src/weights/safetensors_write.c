/* Atomic safetensors writer: a temporary file beside the target, renamed when complete. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weights_internal.h"

#define JSON_INT_MAX ((uint64_t)INT64_MAX) /* jansson integers are signed 64-bit */

static metrale_status add_entry(json_t *root, const metrale_tensor_out *t, size_t i,
                                uint64_t *offset) {
  if (!t->name || !t->name[0])
    return METRALE_ERROR(INVALID_ARGUMENT, "tensor #%zu has no name", i);
  if (strcmp(t->name, "__metadata__") == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "tensor #%zu: \"__metadata__\" is a reserved name", i);
  if (json_object_get(root, t->name))
    return METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s' is given twice", t->name);
  size_t es = metrale_dtype_size(t->dtype);
  if (!es) return METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s': unknown dtype %d", t->name, (int)t->dtype);
  if (t->ndim > METRALE_MAX_DIMS)
    return METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s': %u dimensions, at most %d", t->name,
                         t->ndim, METRALE_MAX_DIMS);
  json_t *shape = json_array();
  json_t *offs = json_array();
  json_t *obj = json_object();
  metrale_status s = METRALE_OK;
  if (!shape || !offs || !obj) {
    s = METRALE_ERROR(OUT_OF_MEMORY, "header for tensor '%s'", t->name);
    goto fail;
  }
  uint64_t nbytes = es, end = 0;
  int built = 0; /* jansson calls that failed (out of memory) */
  for (uint32_t d = 0; d < t->ndim; d++) {
    if (!metrale_mul_u64(nbytes, t->shape[d], &nbytes) || t->shape[d] > JSON_INT_MAX) {
      s = METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s': shape overflows 64-bit byte counts",
                        t->name);
      goto fail;
    }
    built |= json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
  }
  if (!metrale_add_u64(*offset, nbytes, &end) || end > JSON_INT_MAX) {
    s = METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s': file size overflows 64 bits", t->name);
    goto fail;
  }
  if (nbytes && !t->data) {
    s = METRALE_ERROR(INVALID_ARGUMENT, "tensor '%s': no data", t->name);
    goto fail;
  }
  built |= json_array_append_new(offs, json_integer((json_int_t)*offset));
  built |= json_array_append_new(offs, json_integer((json_int_t)end));
  built |= json_object_set_new(obj, "dtype", json_string(metrale_dtype_name(t->dtype)));
  built |= json_object_set_new(obj, "shape", shape); /* these steal even on failure */
  built |= json_object_set_new(obj, "data_offsets", offs);
  shape = offs = NULL;
  if (built) {
    s = METRALE_ERROR(OUT_OF_MEMORY, "header for tensor '%s'", t->name);
    goto fail;
  }
  if (json_object_set_new(root, t->name, obj) != 0) /* steals obj even on failure */
    return METRALE_ERROR(INVALID_ARGUMENT, "tensor #%zu: name is not valid UTF-8", i);
  *offset = end;
  return METRALE_OK;
fail:
  json_decref(shape);
  json_decref(offs);
  json_decref(obj);
  return s;
}

/* Header text padded with spaces so the data starts 8-byte aligned. */
static metrale_status make_header(const metrale_tensor_out *tensors, size_t count,
                                  char **out_text, size_t *out_len) {
  json_t *root = json_object();
  if (!root) return METRALE_ERROR(OUT_OF_MEMORY, "header");
  uint64_t offset = 0;
  for (size_t i = 0; i < count; i++) {
    metrale_status s = add_entry(root, &tensors[i], i, &offset);
    if (s) {
      json_decref(root);
      return s;
    }
  }
  char *text = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!text) return METRALE_ERROR(OUT_OF_MEMORY, "header text");
  size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
  char *out = malloc(padded);
  if (!out) {
    free(text);
    return METRALE_ERROR(OUT_OF_MEMORY, "header text");
  }
  memcpy(out, text, len);
  memset(out + len, ' ', padded - len);
  free(text);
  *out_text = out;
  *out_len = padded;
  return METRALE_OK;
}

static int write_all(int fd, const void *buf, uint64_t len) {
  const uint8_t *p = buf;
  while (len > 0) {
    size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
    ssize_t w = write(fd, p, chunk);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    len -= (uint64_t)w;
  }
  return 0;
}

static metrale_status write_body(int fd, const char *tmp, const char *header, size_t hlen,
                                 const metrale_tensor_out *tensors, size_t count) {
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  if (write_all(fd, le, 8) || write_all(fd, header, hlen))
    return METRALE_ERROR(IO, "%s: write failed: %s", tmp, strerror(errno));
  for (size_t i = 0; i < count; i++) {
    const metrale_tensor_out *t = &tensors[i];
    uint64_t n = metrale_dtype_size(t->dtype); /* overflow already ruled out by the header */
    for (uint32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
    if (n && write_all(fd, t->data, n))
      return METRALE_ERROR(IO, "%s: write failed: %s", tmp, strerror(errno));
  }
  if (fchmod(fd, 0644) != 0 || fsync(fd) != 0)
    return METRALE_ERROR(IO, "%s: cannot finish the file: %s", tmp, strerror(errno));
  return METRALE_OK;
}

/* Makes the rename durable; a folder that cannot be synced is not an error. */
static void sync_dir(const char *dir) {
  int dfd = open(dir, O_RDONLY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

metrale_status metrale_safetensors_write(const char *path, const metrale_tensor_out *tensors,
                                         size_t count) {
  if (!path || !path[0] || (!tensors && count))
    return METRALE_ERROR(INVALID_ARGUMENT, "safetensors_write: NULL argument");
  char *header = NULL;
  size_t hlen = 0;
  metrale_status s = make_header(tensors, count, &header, &hlen);
  if (s) return metrale_status_annotate(s, "%s", path);

  const char *slash = strrchr(path, '/');
  size_t dlen = slash ? (size_t)(slash - path) : 0;
  const char *base = slash ? slash + 1 : path;
  size_t cap = strlen(path) + 32;
  char *tmp = malloc(cap), *dir = malloc(dlen + 2);
  if (!tmp || !dir) {
    free(tmp);
    free(dir);
    free(header);
    return METRALE_ERROR(OUT_OF_MEMORY, "%s: path", path);
  }
  if (slash) {
    memcpy(dir, path, dlen ? dlen : 1); /* "/x" lives in "/" */
    dir[dlen ? dlen : 1] = '\0';
  } else {
    strcpy(dir, ".");
  }
  snprintf(tmp, cap, "%s%s.%s.tmp-XXXXXX", slash ? dir : "", slash && dlen ? "/" : "", base);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    s = METRALE_ERROR(IO, "%s: cannot create a temporary file in %s: %s", path, dir,
                      strerror(errno));
  } else {
    s = write_body(fd, tmp, header, hlen, tensors, count);
    if (close(fd) != 0 && !s) s = METRALE_ERROR(IO, "%s: close failed: %s", tmp, strerror(errno));
    if (!s && rename(tmp, path) != 0)
      s = METRALE_ERROR(IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (s)
      unlink(tmp);
    else
      sync_dir(dir);
  }
  free(tmp);
  free(dir);
  free(header);
  return s;
}
