#include "metrale/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct metrale_status_s {
  metrale_code code;
  char *message;
  char where[160];
};

/* Returned when the error object itself cannot be allocated; never freed. */
static struct metrale_status_s oom_status = {METRALE_CODE_OUT_OF_MEMORY,
                                             (char *)"out of memory (while reporting an error)", ""};

const char *metrale_code_name(metrale_code code) {
  switch (code) {
    case METRALE_CODE_OK: return "OK";
    case METRALE_CODE_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case METRALE_CODE_NOT_FOUND: return "NOT_FOUND";
    case METRALE_CODE_UNAVAILABLE: return "UNAVAILABLE";
    case METRALE_CODE_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case METRALE_CODE_DATA_LOSS: return "DATA_LOSS";
    case METRALE_CODE_IO: return "IO";
    case METRALE_CODE_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case METRALE_CODE_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case METRALE_CODE_INTERNAL: return "INTERNAL";
  }
  return "UNKNOWN";
}

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *buf = malloc((size_t)n + 1);
  if (!buf) return NULL;
  vsnprintf(buf, (size_t)n + 1, fmt, ap);
  return buf;
}

metrale_status metrale_status_makev(metrale_code code, const char *file, int line,
                                    const char *fmt, va_list ap) {
  if (code == METRALE_CODE_OK) code = METRALE_CODE_INTERNAL; /* an error must be an error */
  metrale_status s = calloc(1, sizeof *s);
  if (!s) return &oom_status;
  s->code = code;
  s->message = vformat(fmt, ap);
  if (!s->message) {
    free(s);
    return &oom_status;
  }
  if (file) {
    const char *base = strrchr(file, '/');
    snprintf(s->where, sizeof s->where, "%s:%d", base ? base + 1 : file, line);
  }
  return s;
}

metrale_status metrale_status_make(metrale_code code, const char *file, int line,
                                   const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  metrale_status s = metrale_status_makev(code, file, line, fmt, ap);
  va_end(ap);
  return s;
}

metrale_status metrale_status_annotate(metrale_status s, const char *fmt, ...) {
  if (s == METRALE_OK || s == &oom_status) return s;
  va_list ap;
  va_start(ap, fmt);
  char *prefix = vformat(fmt, ap);
  va_end(ap);
  if (!prefix) return s;
  size_t n = strlen(prefix) + strlen(s->message) + 3;
  char *joined = malloc(n);
  if (joined) {
    snprintf(joined, n, "%s: %s", prefix, s->message);
    free(s->message);
    s->message = joined;
  }
  free(prefix);
  return s;
}

metrale_code metrale_status_code(metrale_status s) { return s ? s->code : METRALE_CODE_OK; }
const char *metrale_status_message(metrale_status s) { return s ? s->message : "OK"; }
const char *metrale_status_where(metrale_status s) { return s ? s->where : ""; }

void metrale_status_free(metrale_status s) {
  if (!s || s == &oom_status) return;
  free(s->message);
  free(s);
}

metrale_code metrale_status_consume(metrale_status s) {
  metrale_code c = metrale_status_code(s);
  metrale_status_free(s);
  return c;
}

void metrale_status_fprint(FILE *f, metrale_status s) {
  if (!s) {
    fprintf(f, "OK\n");
    return;
  }
  fprintf(f, "%s: %s\n", metrale_code_name(s->code), s->message);
}
