/* A test whose backend cannot be opened (no driver, no GPU, module not built) is skipped, so
 * that a machine without that GPU runs the rest.  Where the GPU is known to be there (a device
 * run, a CI job with a GPU), METRALE_TEST_REQUIRE_BACKEND=1 turns that skip into a failure:
 * otherwise a missing driver passes as "Tested: 0". */
#ifndef METRALE_TEST_SKIP_H
#define METRALE_TEST_SKIP_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static inline int mt_backend_required(void) {
  const char *e = getenv("METRALE_TEST_REQUIRE_BACKEND");
  return e && *e && strcmp(e, "0") != 0;
}

#define MT_SKIP_UNAVAILABLE(...)                                               \
  do {                                                                         \
    if (mt_backend_required())                                                 \
      cr_assert_fail("METRALE_TEST_REQUIRE_BACKEND is set: " __VA_ARGS__);     \
    cr_skip_test(__VA_ARGS__);                                                 \
  } while (0)

#endif
