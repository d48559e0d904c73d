/* Helpers of the Vulkan backend tests. */
#ifndef VK_TEST_UTIL_H
#define VK_TEST_UTIL_H

#include <criterion/criterion.h>

#include "metrale/device.h"

/* Opens the vulkan backend: mt_open_backend (tests/common/test_skip.h). */
metrale_device *vkt_open(void);
/* Opens it expecting failure; returns the status (never NULL: fails the test instead). */
metrale_status vkt_open_fails(void);

#define VKT_OK(expr)                                                                   \
  do {                                                                                 \
    metrale_status vkt_s_ = (expr);                                                    \
    cr_assert(vkt_s_ == METRALE_OK, "%s: %s", #expr, metrale_status_message(vkt_s_));  \
  } while (0)

/* Asserts that expr fails with CODE and frees the status. */
#define VKT_FAILS(expr, CODE)                                                          \
  do {                                                                                 \
    metrale_status vkt_s_ = (expr);                                                    \
    cr_assert(metrale_status_code(vkt_s_) == METRALE_CODE_##CODE, "%s gave %s (%s), not %s", \
              #expr, metrale_code_name(metrale_status_code(vkt_s_)),                   \
              metrale_status_message(vkt_s_), #CODE);                                  \
    metrale_status_free(vkt_s_);                                                       \
  } while (0)

#endif
