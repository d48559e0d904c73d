/* One status type for the whole library (IREE style).
 *
 * A metrale_status is a pointer: NULL (== METRALE_OK) means success, anything else is
 * an owned error object carrying a code and a message.  Whoever receives a non-OK
 * status either returns it upward or frees it with metrale_status_free().  Library
 * code never aborts or exits; native errors are converted at the boundary with
 * metrale_status_make(), which records file and line. */
#ifndef METRALE_STATUS_H
#define METRALE_STATUS_H

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum metrale_code {
  METRALE_CODE_OK = 0,
  METRALE_CODE_INVALID_ARGUMENT = 1, /* bad shapes, wrong argument kinds, bad slot ids */
  METRALE_CODE_NOT_FOUND = 2,        /* unknown kernel, tensor, layer, file */
  METRALE_CODE_UNAVAILABLE = 3,      /* backend not built, no driver, no device */
  METRALE_CODE_OUT_OF_MEMORY = 4,
  METRALE_CODE_DATA_LOSS = 5,        /* corrupt or hostile file contents */
  METRALE_CODE_IO = 6,               /* open/read/write/mmap failed */
  METRALE_CODE_UNIMPLEMENTED = 7,
  METRALE_CODE_FAILED_PRECONDITION = 8, /* e.g. wrong API version of a backend module */
  METRALE_CODE_INTERNAL = 9,         /* a driver error or a broken invariant */
} metrale_code;

typedef struct metrale_status_s *metrale_status;
#define METRALE_OK ((metrale_status)0)

/* Creates an error status.  code must not be OK.  Never returns NULL: when memory for
 * the message cannot be had, a static out-of-memory status is returned instead. */
metrale_status metrale_status_make(metrale_code code, const char *file, int line,
                                   const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
metrale_status metrale_status_makev(metrale_code code, const char *file, int line,
                                    const char *fmt, va_list ap);

/* Prepends context ("while loading layer 3: ") to an error; OK passes through. */
metrale_status metrale_status_annotate(metrale_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

metrale_code metrale_status_code(metrale_status s);
/* The message without location; "OK" for success.  Valid until the status is freed. */
const char *metrale_status_message(metrale_status s);
/* "file:line" where the error was made, or "" */
const char *metrale_status_where(metrale_status s);
const char *metrale_code_name(metrale_code code);
void metrale_status_free(metrale_status s);
/* Frees s and returns its code: for callers that only need the verdict. */
metrale_code metrale_status_consume(metrale_status s);
/* Writes "CODE: message" and a newline. */
void metrale_status_fprint(FILE *f, metrale_status s);

#define METRALE_ERROR(code, ...) \
  metrale_status_make(METRALE_CODE_##code, __FILE__, __LINE__, __VA_ARGS__)

#define METRALE_RETURN_IF_ERROR(expr)          \
  do {                                         \
    metrale_status metrale_s_ = (expr);        \
    if (metrale_s_ != METRALE_OK) return metrale_s_; \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
