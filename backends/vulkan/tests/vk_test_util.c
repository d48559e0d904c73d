#include "vk_test_util.h"
#include "test_skip.h"

#include <stdio.h>

metrale_device *vkt_open(void) {
  metrale_device_options opts = {.backend = "vulkan"};
  metrale_device *dev = NULL;
  metrale_status s = metrale_device_open(&opts, &dev);
  if (s) {
    char reason[600];
    snprintf(reason, sizeof reason, "%s", metrale_status_message(s));
    metrale_code code = metrale_status_consume(s);
    if (code == METRALE_CODE_UNAVAILABLE) MT_SKIP_UNAVAILABLE("vulkan unavailable: %s", reason);
    cr_assert_fail("cannot open vulkan: %s: %s", metrale_code_name(code), reason);
  }
  return dev;
}

metrale_status vkt_open_fails(void) {
  metrale_device_options opts = {.backend = "vulkan"};
  metrale_device *dev = NULL;
  metrale_status s = metrale_device_open(&opts, &dev);
  if (!s) metrale_device_destroy(dev);
  cr_assert(s != METRALE_OK, "the vulkan backend opened where it should not");
  return s;
}
