/* A safetensors file mapped read-only: open, look up, read, release pages. */
#define _DEFAULT_SOURCE /* madvise(MADV_DONTNEED): glibc's posix_madvise ignores DONTNEED */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weights_internal.h"

/* Opens path as a regular file; fd and size on success. */
static metrale_status open_regular(const char *path, int *out_fd, uint64_t *out_size) {
  /* O_NONBLOCK: a FIFO must not hang the open; it is refused below. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) return METRALE_ERROR(NOT_FOUND, "%s: no such file", path);
    return METRALE_ERROR(IO, "%s: cannot open: %s", path, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return METRALE_ERROR(IO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return METRALE_ERROR(IO, "%s: not a regular file%s", path,
                         S_ISDIR(st.st_mode) ? " (it is a folder)" : "");
  }
  *out_fd = fd;
  *out_size = (uint64_t)st.st_size;
  return METRALE_OK;
}

static metrale_status map_and_parse(struct metrale_safetensors *f, int fd, uint64_t size) {
  const char *path = f->path;
  if (size < 8)
    return METRALE_ERROR(DATA_LOSS,
                         "%s: %s (%llu bytes): a safetensors file starts with an 8-byte header "
                         "length",
                         path, size ? "too short" : "empty file", (unsigned long long)size);
  void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) return METRALE_ERROR(IO, "%s: mmap failed: %s", path, strerror(errno));
  f->map = m;
  f->map_len = (size_t)size;

  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | f->map[i];
  if (n > METRALE_JSON_MAX_BYTES)
    return METRALE_ERROR(DATA_LOSS, "%s: header length %llu is over the %u-byte limit", path,
                         (unsigned long long)n, METRALE_JSON_MAX_BYTES);
  if (n > size - 8)
    return METRALE_ERROR(DATA_LOSS,
                         "%s: header length %llu runs past the end of the file (%llu bytes)",
                         path, (unsigned long long)n, (unsigned long long)size);
  f->data = f->map + 8 + n;
  f->data_len = size - 8 - n;
  return metrale_status_annotate(
      metrale_safetensors_parse_header(f, (const char *)f->map + 8, (size_t)n), "%s", path);
}

metrale_status metrale_safetensors_open(const char *path, metrale_safetensors **out_file) {
  if (!path || !out_file) return METRALE_ERROR(INVALID_ARGUMENT, "safetensors_open: NULL argument");
  int fd = -1;
  uint64_t size = 0;
  METRALE_RETURN_IF_ERROR(open_regular(path, &fd, &size));
  metrale_safetensors *f = calloc(1, sizeof *f);
  if (f) f->path = strdup(path);
  if (!f || !f->path) {
    close(fd);
    free(f);
    return METRALE_ERROR(OUT_OF_MEMORY, "%s: file object", path);
  }
  metrale_status s = map_and_parse(f, fd, size);
  close(fd); /* the mapping keeps the file */
  if (s) {
    metrale_safetensors_close(f);
    return s;
  }
  *out_file = f;
  return METRALE_OK;
}

void metrale_safetensors_close(metrale_safetensors *f) {
  if (!f) return;
  if (f->map) munmap((void *)f->map, f->map_len);
  free(f->tensors);
  free(f->begin);
  free(f->by_name);
  free(f->names);
  free(f->path);
  free(f);
}

size_t metrale_safetensors_count(const metrale_safetensors *f) { return f ? f->count : 0; }

const metrale_tensor_info *metrale_safetensors_at(const metrale_safetensors *f, size_t i) {
  return f && i < f->count ? &f->tensors[i] : NULL;
}

static int name_cmp(const void *key, const void *elem) {
  const metrale_tensor_info *const *t = elem;
  return strcmp(key, (*t)->name);
}

const metrale_tensor_info *metrale_safetensors_find(const metrale_safetensors *f,
                                                    const char *name) {
  if (!f || !name || f->count == 0) return NULL;
  const metrale_tensor_info *const *hit =
      bsearch(name, f->by_name, f->count, sizeof *f->by_name, name_cmp);
  return hit ? *hit : NULL;
}

/* Index of t in f, or -1 when t is not one of f's tensors. */
static ptrdiff_t index_of(const metrale_safetensors *f, const metrale_tensor_info *t) {
  if (!f || !t || f->count == 0) return -1;
  uintptr_t lo = (uintptr_t)f->tensors, p = (uintptr_t)t;
  if (p < lo || p >= lo + f->count * sizeof *t || (p - lo) % sizeof *t) return -1;
  return (ptrdiff_t)((p - lo) / sizeof *t);
}

const void *metrale_safetensors_data(const metrale_safetensors *f, const metrale_tensor_info *t) {
  ptrdiff_t i = index_of(f, t);
  return i < 0 ? NULL : f->data + f->begin[i];
}

metrale_status metrale_safetensors_read_f32(const metrale_safetensors *f, const char *name,
                                            float *dst, uint64_t count) {
  if (!f || !name || (!dst && count))
    return METRALE_ERROR(INVALID_ARGUMENT, "safetensors_read_f32: NULL argument");
  const metrale_tensor_info *t = metrale_safetensors_find(f, name);
  if (!t) return METRALE_ERROR(NOT_FOUND, "%s: no tensor '%s'", f->path, name);
  if (t->dtype == METRALE_DTYPE_I32)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: tensor '%s' is I32, not a floating-point type",
                         f->path, name);
  uint64_t n = metrale_tensor_elements(t);
  if (n != count)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: tensor '%s' has %llu elements, not %llu",
                         f->path, name, (unsigned long long)n, (unsigned long long)count);
  metrale_convert(t->dtype, metrale_safetensors_data(f, t), METRALE_DTYPE_F32, dst, (size_t)n);
  return METRALE_OK;
}

void metrale_safetensors_release_range(const metrale_safetensors *f, const void *p,
                                       uint64_t len) {
  if (!f || !f->map || len == 0) return;
  uintptr_t lo = (uintptr_t)f->map, hi = lo + f->map_len;
  uintptr_t a = (uintptr_t)p, b = a + len;
  if (a < lo || b > hi || b < a) return;
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096u;
  /* Rounding outwards is safe: the mapping is never written, so a neighbour's page that
   * is dropped too is simply read again from the file when touched. */
  a &= ~(page - 1);
  b = (b + page - 1) & ~(page - 1);
  madvise((void *)a, b - a, MADV_DONTNEED);
}

void metrale_safetensors_release(const metrale_safetensors *f, const metrale_tensor_info *t) {
  ptrdiff_t i = index_of(f, t);
  if (i >= 0) metrale_safetensors_release_range(f, f->data + f->begin[i], t->nbytes);
}
