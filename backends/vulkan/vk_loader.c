/* libvulkan is opened at run time so that the module loads on machines without it. */
#include "vk_loader.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

metrale_status vk_load_global(vk_fns *fns) {
  memset(fns, 0, sizeof *fns);
  const char *override = getenv("METRALE_VULKAN_LOADER");
  const char *names[] = {"libvulkan.so.1", "libvulkan.so"};
  char first_error[256] = "";
  size_t n_names = override && *override ? 1 : 2;
  for (size_t i = 0; i < n_names && !fns->library; i++) {
    const char *name = n_names == 1 ? override : names[i];
    fns->library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!fns->library && !first_error[0]) {
      const char *e = dlerror();
      snprintf(first_error, sizeof first_error, "%s", e ? e : name);
    }
  }
  if (!fns->library)
    return METRALE_ERROR(UNAVAILABLE, "no Vulkan loader (libvulkan.so.1): %s", first_error);
  fns->vkGetInstanceProcAddr =
      (PFN_vkGetInstanceProcAddr)(uintptr_t)dlsym(fns->library, "vkGetInstanceProcAddr");
  if (!fns->vkGetInstanceProcAddr) {
    vk_unload(fns);
    return METRALE_ERROR(UNAVAILABLE, "the Vulkan loader does not export vkGetInstanceProcAddr");
  }
#define VK_FN_GLOBAL(name) \
  fns->name = (PFN_##name)(uintptr_t)fns->vkGetInstanceProcAddr(VK_NULL_HANDLE, #name);
  VK_GLOBAL_FNS(VK_FN_GLOBAL)
#undef VK_FN_GLOBAL
  if (!fns->vkCreateInstance || !fns->vkEnumerateInstanceVersion ||
      !fns->vkEnumerateInstanceLayerProperties || !fns->vkEnumerateInstanceExtensionProperties) {
    vk_unload(fns);
    return METRALE_ERROR(UNAVAILABLE, "the Vulkan loader is older than Vulkan 1.1");
  }
  return METRALE_OK;
}

metrale_status vk_load_instance(vk_fns *fns, VkInstance instance, int with_debug_utils) {
  const char *missing = NULL;
#define VK_FN_INSTANCE(name)                                                         \
  fns->name = (PFN_##name)(uintptr_t)fns->vkGetInstanceProcAddr(instance, #name);    \
  if (!fns->name && !missing) missing = #name;
  VK_INSTANCE_FNS(VK_FN_INSTANCE)
#undef VK_FN_INSTANCE
  if (missing) return METRALE_ERROR(UNAVAILABLE, "the Vulkan instance lacks %s", missing);
  if (with_debug_utils) {
    fns->vkCreateDebugUtilsMessengerEXT = (PFN_vkCreateDebugUtilsMessengerEXT)(uintptr_t)
        fns->vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
    fns->vkDestroyDebugUtilsMessengerEXT = (PFN_vkDestroyDebugUtilsMessengerEXT)(uintptr_t)
        fns->vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT");
  }
  return METRALE_OK;
}

metrale_status vk_load_device(vk_fns *fns, VkDevice device) {
  const char *missing = NULL;
#define VK_FN_DEVICE(name)                                                        \
  fns->name = (PFN_##name)(uintptr_t)fns->vkGetDeviceProcAddr(device, #name);     \
  if (!fns->name && !missing) missing = #name;
  VK_DEVICE_FNS(VK_FN_DEVICE)
#undef VK_FN_DEVICE
  if (missing) return METRALE_ERROR(UNAVAILABLE, "the Vulkan device lacks %s", missing);
  return METRALE_OK;
}

void vk_unload(vk_fns *fns) {
  if (fns->library) dlclose(fns->library);
  memset(fns, 0, sizeof *fns);
}
