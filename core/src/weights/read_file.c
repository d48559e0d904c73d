/* Whole-file reads of small JSON files (config.json, index.json). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weights_internal.h"

metrale_status metrale_read_small_file(const char *path, size_t max_bytes, char **out_buf,
                                       size_t *out_len) {
  /* O_NONBLOCK: opening a FIFO must not hang; it is refused below as not a regular file. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      return METRALE_ERROR(NOT_FOUND, "%s: no such file", path);
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
  if (st.st_size < 0 || (uint64_t)st.st_size > max_bytes) {
    close(fd);
    return METRALE_ERROR(DATA_LOSS, "%s: %lld bytes, more than the %zu allowed for this file",
                         path, (long long)st.st_size, max_bytes);
  }
  size_t size = (size_t)st.st_size;
  char *buf = malloc(size + 1);
  if (!buf) {
    close(fd);
    return METRALE_ERROR(OUT_OF_MEMORY, "%s: %zu bytes", path, size);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return METRALE_ERROR(IO, "%s: read failed: %s", path, strerror(e));
    }
    if (r == 0) break; /* shrank while reading: parse what is there */
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  *out_buf = buf;
  *out_len = got;
  return METRALE_OK;
}
