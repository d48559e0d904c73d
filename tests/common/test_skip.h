/* Opening the backend under test.  One that cannot be opened (no driver, no GPU, module not
 * built) skips the test, so that a machine without that GPU runs the rest.  Where the GPU is
 * known to be there (a device run, a CI job with a GPU), METRALE_TEST_REQUIRE_BACKEND=1 turns
 * that skip into a failure: otherwise a missing driver passes as "Tested: 0". */
#ifndef METRALE_TEST_SKIP_H
#define METRALE_TEST_SKIP_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrale/device.h"

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

/* Opens backend `name`: skips the test where it is unavailable (fails under
 * METRALE_TEST_REQUIRE_BACKEND), fails it on any other error. */
static inline metrale_device *mt_open_backend(const char *name) {
  metrale_device_options opts = {.backend = name, .device_index = 0};
  metrale_device *dev = NULL;
  metrale_status s = metrale_device_open(&opts, &dev);
  if (s) {
    char reason[600];
    snprintf(reason, sizeof reason, "%s", metrale_status_message(s));
    metrale_code code = metrale_status_consume(s);
    if (code == METRALE_CODE_UNAVAILABLE) {
      if (!mt_backend_required()) fprintf(stderr, "%s: backend unavailable, skipping: %s\n", name, reason);
      MT_SKIP_UNAVAILABLE("%s", reason); /* "backend NAME unavailable: why" */
    }
    cr_assert_fail("cannot open backend %s: %s: %s", name, metrale_code_name(code), reason);
  }
  return dev;
}

#endif
