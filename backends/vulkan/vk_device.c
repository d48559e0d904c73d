/* Instance, physical-device choice, logical device and the validation messenger.
 *
 * Device choice: METRALE_VULKAN_DEVICE=<i> forces the i-th device in the loader's
 * enumeration order (as vulkaninfo lists them).  Otherwise the suitable devices are
 * ranked discrete GPU > integrated GPU > virtual GPU > other > CPU (lavapipe), keeping
 * enumeration order among equals, and options->device_index picks in that ranking (0,
 * the default, is the best one). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VK_VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"
#define VK_MAX_DEVICES 16

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  (void)types;
  vk_validation *v = user;
  if (!(severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) return VK_FALSE;
  const char *msg = data && data->pMessage ? data->pMessage : "(no message)";
  pthread_mutex_lock(&v->lock);
  if (v->errors == v->reported) snprintf(v->first, sizeof v->first, "%s", msg);
  uint64_t n = ++v->errors;
  pthread_mutex_unlock(&v->lock);
  if (n <= 8) fprintf(stderr, "metrale vulkan validation error: %s\n", msg);
  return VK_FALSE;
}

metrale_status vk_validation_check(vk_backend *be) {
  vk_validation *v = &be->validation;
  if (!v->enabled) return METRALE_OK;
  pthread_mutex_lock(&v->lock);
  uint64_t fresh = v->errors - v->reported;
  char first[sizeof v->first];
  snprintf(first, sizeof first, "%s", v->first);
  v->reported = v->errors;
  pthread_mutex_unlock(&v->lock);
  if (!fresh) return METRALE_OK;
  return METRALE_ERROR(INTERNAL, "%llu Vulkan validation error%s: first: %s",
                       (unsigned long long)fresh, fresh == 1 ? "" : "s", first);
}

static int has_layer(vk_backend *be, const char *name) {
  uint32_t n = 0;
  if (be->fn.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
  VkLayerProperties *layers = calloc(n, sizeof *layers);
  if (!layers) return 0;
  int found = 0;
  if (be->fn.vkEnumerateInstanceLayerProperties(&n, layers) >= 0)
    for (uint32_t i = 0; i < n && !found; i++) found = strcmp(layers[i].layerName, name) == 0;
  free(layers);
  return found;
}

static metrale_status create_instance(vk_backend *be) {
  uint32_t version = 0;
  VK_TRY(be->fn.vkEnumerateInstanceVersion(&version), "vkEnumerateInstanceVersion");
  if (version < VK_API_VERSION_1_2)
    return METRALE_ERROR(UNAVAILABLE, "the Vulkan loader supports Vulkan %u.%u; metrale needs 1.2",
                         VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));

  const char *validation = getenv("METRALE_VULKAN_VALIDATION");
  int want_validation = validation && *validation && strcmp(validation, "0") != 0;
  if (want_validation && !has_layer(be, VK_VALIDATION_LAYER))
    return METRALE_ERROR(UNAVAILABLE,
                         "METRALE_VULKAN_VALIDATION is set but %s is not installed "
                         "(Debian: vulkan-validationlayers)", VK_VALIDATION_LAYER);

  VkApplicationInfo app = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = "metrale",
      .pEngineName = "metrale",
      .apiVersion = VK_API_VERSION_1_2,
  };
  const char *layers[] = {VK_VALIDATION_LAYER};
  const char *extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = on_debug_message,
      .pUserData = &be->validation,
  };
  /* "sync" adds synchronization validation (hazards between copies, fills, dispatches) */
  VkValidationFeatureEnableEXT sync_feature = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features = {
      .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
      .pNext = &messenger_info,
      .enabledValidationFeatureCount = 1,
      .pEnabledValidationFeatures = &sync_feature,
  };
  int sync = want_validation && strcmp(validation, "sync") == 0;
  VkInstanceCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
      .pNext = want_validation ? (sync ? (const void *)&features : (const void *)&messenger_info) : NULL,
      .pApplicationInfo = &app,
      .enabledLayerCount = want_validation ? 1u : 0u,
      .ppEnabledLayerNames = layers,
      .enabledExtensionCount = want_validation ? 1u : 0u,
      .ppEnabledExtensionNames = extensions,
  };
  be->validation.enabled = want_validation;
  VkResult r = be->fn.vkCreateInstance(&info, NULL, &be->instance);
  if (r < 0) {
    be->instance = VK_NULL_HANDLE;
    return VK_STATUS(r, "vkCreateInstance");
  }
  METRALE_RETURN_IF_ERROR(vk_load_instance(&be->fn, be->instance, want_validation));
  if (want_validation) {
    if (!be->fn.vkCreateDebugUtilsMessengerEXT || !be->fn.vkDestroyDebugUtilsMessengerEXT)
      return METRALE_ERROR(UNAVAILABLE, "validation requested but VK_EXT_debug_utils is missing");
    VK_TRY(be->fn.vkCreateDebugUtilsMessengerEXT(be->instance, &messenger_info, NULL,
                                                 &be->messenger),
           "vkCreateDebugUtilsMessengerEXT");
  }
  return METRALE_OK;
}

/* Why a device cannot run metrale ("" when it can); fills the compute queue family. */
static void check_device(vk_backend *be, VkPhysicalDevice pd, uint32_t *out_family,
                         char *why, size_t cap) {
  why[0] = '\0';
  VkPhysicalDeviceProperties props;
  be->fn.vkGetPhysicalDeviceProperties(pd, &props);
  if (props.apiVersion < VK_API_VERSION_1_2) {
    snprintf(why, cap, "%.200s supports Vulkan %u.%u, metrale needs 1.2", props.deviceName,
             VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion));
    return;
  }
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                          .pNext = &f12};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
  be->fn.vkGetPhysicalDeviceFeatures2(pd, &f);
  const char *missing = !f12.bufferDeviceAddress        ? "bufferDeviceAddress"
                        : !f12.timelineSemaphore        ? "timelineSemaphore"
                        : !f11.storageBuffer16BitAccess ? "storageBuffer16BitAccess"
                        : !f.features.shaderInt64       ? "shaderInt64"
                                                        : NULL;
  if (missing) {
    snprintf(why, cap, "%.200s lacks the Vulkan feature %s", props.deviceName, missing);
    return;
  }
  uint32_t nq = 0;
  be->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
  VkQueueFamilyProperties qf[32];
  if (nq > 32) nq = 32;
  be->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
  for (uint32_t i = 0; i < nq; i++) {
    if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && qf[i].queueCount > 0) {
      *out_family = i;
      return;
    }
  }
  snprintf(why, cap, "%.200s has no compute queue", props.deviceName);
}

static int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 4;
    default: return 3;
  }
}

static metrale_status choose_device(vk_backend *be, const gpu_backend_options *options) {
  VkPhysicalDevice pds[VK_MAX_DEVICES];
  uint32_t n = VK_MAX_DEVICES;
  VkResult r = be->fn.vkEnumeratePhysicalDevices(be->instance, &n, pds);
  if (r < 0) return VK_STATUS(r, "vkEnumeratePhysicalDevices");
  if (n == 0)
    return METRALE_ERROR(UNAVAILABLE,
                         "no Vulkan device: the loader found no driver (install the GPU "
                         "vendor's Vulkan driver, or mesa-vulkan-drivers for lavapipe)");

  char why[VK_MAX_DEVICES][320];
  uint32_t family[VK_MAX_DEVICES] = {0};
  for (uint32_t i = 0; i < n; i++) check_device(be, pds[i], &family[i], why[i], sizeof why[i]);

  int pick = -1;
  const char *forced = getenv("METRALE_VULKAN_DEVICE");
  if (forced && *forced) {
    char *end = NULL;
    long idx = strtol(forced, &end, 10);
    if (*end != '\0' || idx < 0 || idx >= (long)n)
      return METRALE_ERROR(UNAVAILABLE, "METRALE_VULKAN_DEVICE=%s: there are %u Vulkan devices "
                           "(0..%u)", forced, n, n - 1);
    if (why[idx][0])
      return METRALE_ERROR(UNAVAILABLE, "METRALE_VULKAN_DEVICE=%s: %s", forced, why[idx]);
    pick = (int)idx;
  } else {
    int want = options && options->device_index > 0 ? options->device_index : 0;
    int seen = 0;
    for (int rank = 0; rank <= 4 && pick < 0; rank++) {
      for (uint32_t i = 0; i < n && pick < 0; i++) {
        VkPhysicalDeviceProperties p;
        be->fn.vkGetPhysicalDeviceProperties(pds[i], &p);
        if (why[i][0] || type_rank(p.deviceType) != rank) continue;
        if (seen++ == want) pick = (int)i;
      }
    }
    if (pick < 0) {
      if (seen > 0)
        return METRALE_ERROR(UNAVAILABLE, "Vulkan device index %d requested, only %d usable",
                             want, seen);
      return METRALE_ERROR(UNAVAILABLE, "no usable Vulkan device: %s%s", why[0],
                           n > 1 ? " (and others)" : "");
    }
  }
  be->phys = pds[pick];
  be->queue_family = family[pick];
  be->fn.vkGetPhysicalDeviceProperties(be->phys, &be->props);
  be->fn.vkGetPhysicalDeviceMemoryProperties(be->phys, &be->memprops);
  return METRALE_OK;
}

int vk_has_device_extension(vk_backend *be, const char *name) {
  uint32_t n = 0;
  if (be->fn.vkEnumerateDeviceExtensionProperties(be->phys, NULL, &n, NULL) < 0 || n == 0) return 0;
  VkExtensionProperties *ext = calloc(n, sizeof *ext);
  if (!ext) return 0;
  int found = 0;
  if (be->fn.vkEnumerateDeviceExtensionProperties(be->phys, NULL, &n, ext) >= 0)
    for (uint32_t i = 0; i < n && !found; i++) found = strcmp(ext[i].extensionName, name) == 0;
  free(ext);
  return found;
}

/* Whether the device can report its pipelines' statistics (registers, local memory, ...:
 * VK_KHR_pipeline_executable_properties), asked only when profiling. */
static int has_exec_stats(vk_backend *be) {
  if (!vk_has_device_extension(be, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) return 0;
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fe = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &fe};
  be->fn.vkGetPhysicalDeviceFeatures2(be->phys, &f);
  return fe.pipelineExecutableInfo == VK_TRUE;
}

static metrale_status create_device(vk_backend *be) {
  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = be->queue_family,
      .queueCount = 1,
      .pQueuePriorities = &priority,
  };
  /* host query reset only for METRALE_VULKAN_PROFILE (vk_profile.c), where the device has it */
  if (vk_profile_wanted()) {
    VkPhysicalDeviceVulkan12Features have12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have12};
    be->fn.vkGetPhysicalDeviceFeatures2(be->phys, &have);
    be->host_query_reset = have12.hostQueryReset == VK_TRUE;
    be->exec_stats = has_exec_stats(be);
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fexec = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
      .pipelineExecutableInfo = VK_TRUE,
  };
  const char *exec_ext[] = {VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .pNext = be->exec_stats ? &fexec : NULL,
      .bufferDeviceAddress = VK_TRUE,
      .timelineSemaphore = VK_TRUE,
      .hostQueryReset = be->host_query_reset ? VK_TRUE : VK_FALSE,
  };
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
      .pNext = &f12,
      .storageBuffer16BitAccess = VK_TRUE,
  };
  VkPhysicalDeviceFeatures2 features = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
      .pNext = &f11,
      .features = {.shaderInt64 = VK_TRUE},
  };
  VkDeviceCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .pNext = &features,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &queue,
      .enabledExtensionCount = be->exec_stats ? 1u : 0u,
      .ppEnabledExtensionNames = exec_ext,
  };
  VkResult r = be->fn.vkCreateDevice(be->phys, &info, NULL, &be->device);
  if (r < 0) {
    be->device = VK_NULL_HANDLE;
    return VK_STATUS(r, "vkCreateDevice");
  }
  METRALE_RETURN_IF_ERROR(vk_load_device(&be->fn, be->device));
  if (be->exec_stats) {
    be->fn.vkGetPipelineExecutablePropertiesKHR = (PFN_vkGetPipelineExecutablePropertiesKHR)(uintptr_t)
        be->fn.vkGetDeviceProcAddr(be->device, "vkGetPipelineExecutablePropertiesKHR");
    be->fn.vkGetPipelineExecutableStatisticsKHR = (PFN_vkGetPipelineExecutableStatisticsKHR)(uintptr_t)
        be->fn.vkGetDeviceProcAddr(be->device, "vkGetPipelineExecutableStatisticsKHR");
    be->exec_stats = be->fn.vkGetPipelineExecutablePropertiesKHR && be->fn.vkGetPipelineExecutableStatisticsKHR;
  }
  be->fn.vkGetDeviceQueue(be->device, be->queue_family, 0, &be->queue);
  return METRALE_OK;
}

metrale_status vk_device_open(vk_backend *be, const gpu_backend_options *options) {
  METRALE_RETURN_IF_ERROR(vk_load_global(&be->fn));
  METRALE_RETURN_IF_ERROR(create_instance(be));
  METRALE_RETURN_IF_ERROR(choose_device(be, options));
  return create_device(be);
}

void vk_device_close(vk_backend *be) {
  if (be->device) {
    be->fn.vkDestroyDevice(be->device, NULL);
    be->device = VK_NULL_HANDLE;
  }
  if (be->messenger) {
    be->fn.vkDestroyDebugUtilsMessengerEXT(be->instance, be->messenger, NULL);
    be->messenger = VK_NULL_HANDLE;
  }
  if (be->instance) {
    be->fn.vkDestroyInstance(be->instance, NULL);
    be->instance = VK_NULL_HANDLE;
  }
  if (be->fn.library) vk_unload(&be->fn);
}
