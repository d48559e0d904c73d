#include "vk_test_util.h"
#include "test_skip.h"

#include <stdio.h>

metrale_device *vkt_open(void) {
  return mt_open_backend("vulkan");
}

metrale_status vkt_open_fails(void) {
  metrale_device_options opts = {.backend = "vulkan"};
  metrale_device *dev = NULL;
  metrale_status s = metrale_device_open(&opts, &dev);
  if (!s) metrale_device_destroy(dev);
  cr_assert(s != METRALE_OK, "the vulkan backend opened where it should not");
  return s;
}
