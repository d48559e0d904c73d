/* VkResult -> metrale_status, so that every driver error reaches the user with a name
 * and the place it happened. */
#include "vk_internal.h"

const char *vk_result_name(VkResult r) {
  switch (r) {
#define VK_NAME(x) case x: return #x;
    VK_NAME(VK_SUCCESS)
    VK_NAME(VK_NOT_READY)
    VK_NAME(VK_TIMEOUT)
    VK_NAME(VK_EVENT_SET)
    VK_NAME(VK_EVENT_RESET)
    VK_NAME(VK_INCOMPLETE)
    VK_NAME(VK_ERROR_OUT_OF_HOST_MEMORY)
    VK_NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VK_NAME(VK_ERROR_INITIALIZATION_FAILED)
    VK_NAME(VK_ERROR_DEVICE_LOST)
    VK_NAME(VK_ERROR_MEMORY_MAP_FAILED)
    VK_NAME(VK_ERROR_LAYER_NOT_PRESENT)
    VK_NAME(VK_ERROR_EXTENSION_NOT_PRESENT)
    VK_NAME(VK_ERROR_FEATURE_NOT_PRESENT)
    VK_NAME(VK_ERROR_INCOMPATIBLE_DRIVER)
    VK_NAME(VK_ERROR_TOO_MANY_OBJECTS)
    VK_NAME(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VK_NAME(VK_ERROR_FRAGMENTED_POOL)
    VK_NAME(VK_ERROR_UNKNOWN)
    VK_NAME(VK_ERROR_OUT_OF_POOL_MEMORY)
    VK_NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    VK_NAME(VK_ERROR_FRAGMENTATION)
    VK_NAME(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    VK_NAME(VK_ERROR_INVALID_SHADER_NV)
#undef VK_NAME
    default: return "VkResult(unknown)";
  }
}

metrale_status vk_status_from(VkResult r, const char *file, int line, const char *what) {
  metrale_code code;
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTATION:
    case VK_ERROR_TOO_MANY_OBJECTS:
      code = METRALE_CODE_OUT_OF_MEMORY;
      break;
    case VK_ERROR_INITIALIZATION_FAILED:
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
      code = METRALE_CODE_UNAVAILABLE;
      break;
    default:
      code = METRALE_CODE_INTERNAL;
      break;
  }
  return metrale_status_make(code, file, line, "Vulkan: %s failed: %s (%d)", what,
                             vk_result_name(r), (int)r);
}
