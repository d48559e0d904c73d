/* The Vulkan backend module: entry point, create/destroy, capabilities, vtable. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk_internal.h"

/* Vulkan has no portable "compute units" count: NVIDIA and AMD expose it through
 * vendor extensions; a CPU device (lavapipe) runs on the host's cores; anything else
 * reports 1. */
static uint32_t compute_units(vk_backend *be) {
  if (vk_has_device_extension(be, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                     .pNext = &sm};
    be->fn.vkGetPhysicalDeviceProperties2(be->phys, &p);
    if (sm.shaderSMCount) return sm.shaderSMCount;
  }
  if (vk_has_device_extension(be, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
    VkPhysicalDeviceShaderCorePropertiesAMD core = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                     .pNext = &core};
    be->fn.vkGetPhysicalDeviceProperties2(be->phys, &p);
    uint32_t cus = core.shaderEngineCount * core.shaderArraysPerEngineCount *
                   core.computeUnitsPerShaderArray;
    if (cus) return cus;
  }
  if (be->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n > 0) return (uint32_t)n;
  }
  return 1;
}

static void fill_caps(vk_backend *be) {
  gpu_caps *c = &be->base.caps;
  snprintf(c->device_name, sizeof c->device_name, "%.127s", be->props.deviceName);
  be->loop_cap = strstr(be->props.deviceName, "llvmpipe") ? VK_LLVMPIPE_LOOP_BUDGET : 0u;
  snprintf(c->arch, sizeof c->arch, "vulkan");
  VkPhysicalDeviceSubgroupProperties sg = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                   .pNext = &sg};
  be->fn.vkGetPhysicalDeviceProperties2(be->phys, &p);
  c->subgroup_size = sg.subgroupSize ? sg.subgroupSize : 1;
  c->sm_count = compute_units(be);
  for (uint32_t h = 0; h < be->memprops.memoryHeapCount; h++) {
    const VkMemoryHeap *heap = &be->memprops.memoryHeaps[h];
    if ((heap->flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && heap->size > c->memory_bytes)
      c->memory_bytes = heap->size;
  }
  c->cc_major = c->cc_minor = 0;
  c->flags = GPU_CAP_UNIFIED_ADDR;
}

static void vk_destroy(gpu_backend *base) {
  vk_backend *be = vk_cast(base);
  if (!be) return;
  if (be->device) {
    pthread_mutex_lock(&be->lock);
    metrale_status_free(vk_streams_finish_all(be));
    be->fn.vkDeviceWaitIdle(be->device);
    vk_profile_finish(be);
    while (be->streams) {
      struct gpu_stream_s *s = be->streams;
      be->streams = s->next;
      vk_stream_release(be, s);
      free(s); /* a stream the caller never destroyed dies with the backend */
    }
    vk_stream_release(be, &be->default_stream);
    vk_pipelines_destroy(be);
    vk_transfer_destroy(be);
    vk_memory_destroy(be);
    pthread_mutex_unlock(&be->lock);
  }
  vk_device_close(be);
  if (be->validation.errors > be->validation.reported)
    fprintf(stderr, "metrale vulkan: %llu validation error(s) were not reported by a sync; "
            "first: %s\n", (unsigned long long)(be->validation.errors - be->validation.reported),
            be->validation.first);
  pthread_mutex_destroy(&be->lock);
  pthread_mutex_destroy(&be->validation.lock);
  free(be);
}

static metrale_status vk_alloc(gpu_backend *base, uint64_t bytes, gpu_ptr *out_ptr) {
  vk_backend *be = vk_cast(base);
  if (!out_ptr) return METRALE_ERROR(INVALID_ARGUMENT, "alloc: no out_ptr");
  pthread_mutex_lock(&be->lock);
  metrale_status s = vk_memory_alloc(be, bytes, out_ptr);
  pthread_mutex_unlock(&be->lock);
  return s;
}

/* Like cudaFree, free waits for queued work: a kernel may still use the range. */
static void vk_free(gpu_backend *base, gpu_ptr ptr) {
  vk_backend *be = vk_cast(base);
  if (!ptr) return;
  pthread_mutex_lock(&be->lock);
  metrale_status s = vk_streams_finish_all(be);
  if (s) {
    fprintf(stderr, "metrale vulkan: free(0x%llx) after a failed wait: ", (unsigned long long)ptr);
    metrale_status_fprint(stderr, s);
    metrale_status_free(s);
  }
  vk_memory_free(be, ptr);
  pthread_mutex_unlock(&be->lock);
}

static const gpu_backend_vtable vk_vtable = {
    .destroy = vk_destroy,
    .kernel = vk_kernel,
    .launch = vk_launch,
    .alloc = vk_alloc,
    .free = vk_free,
    .memset = vk_memset,
    .copy_h2d = vk_copy_h2d,
    .copy_d2h = vk_copy_d2h,
    .copy_d2d = vk_copy_d2d,
    .stream_create = vk_stream_create,
    .stream_sync = vk_stream_sync,
    .stream_destroy = vk_stream_destroy,
    .sync = vk_sync,
};

static metrale_status vk_create(const gpu_backend_options *options, gpu_backend **out_backend) {
  if (!out_backend) return METRALE_ERROR(INVALID_ARGUMENT, "create: no out_backend");
  vk_backend *be = calloc(1, sizeof *be);
  if (!be) return METRALE_ERROR(OUT_OF_MEMORY, "Vulkan backend object");
  be->base.vt = &vk_vtable;
  be->base.name = "vulkan";
  pthread_mutex_init(&be->lock, NULL);
  pthread_mutex_init(&be->validation.lock, NULL);
  metrale_status s = vk_device_open(be, options);
  if (!s) {
    fill_caps(be);
    s = vk_memory_init(be);
  }
  if (!s) s = vk_stream_init(be, &be->default_stream);
  if (!s) {
    pthread_mutex_lock(&be->lock);
    s = vk_transfer_init(be);
    pthread_mutex_unlock(&be->lock);
  }
  if (!s) vk_profile_init(be);
  if (!s) s = vk_validation_check(be);
  if (s) {
    vk_destroy(&be->base);
    return s;
  }
  *out_backend = &be->base;
  return METRALE_OK;
}

static const gpu_backend_module vk_module = {
    .api_version = METRALE_BACKEND_API_VERSION,
    .name = "vulkan",
    .score = 200,
    .create = vk_create,
    .describe = vk_describe,
};

__attribute__((visibility("default"))) const gpu_backend_module *metrale_backend_entry(void) {
  return &vk_module;
}
