/* The sub-allocator behind gpu_ptr.
 *
 * Device memory comes in large VkBuffers (VK_BLOCK_BYTES, or one dedicated buffer for a
 * request above a quarter of that), created with SHADER_DEVICE_ADDRESS usage so that a
 * gpu_ptr is a buffer device address and kernels may offset it freely.  Each block
 * hands out 256-byte aligned ranges first-fit from a sorted, coalesced free list.  Live
 * allocations are kept sorted by address so that free() and the copy routines find the
 * block (and offset) behind any address in O(log n).
 *
 * On devices whose memory is host-visible and coherent and that share memory with the
 * host (integrated GPUs, lavapipe), blocks stay mapped and copies are plain memcpy;
 * METRALE_VULKAN_STAGING=1 turns that off (to test the staging path there). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VK_DEDICATED_ABOVE (VK_BLOCK_BYTES / 4)

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

uint32_t vk_memory_type(const vk_backend *be, uint32_t allowed, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < be->memprops.memoryTypeCount; i++) {
    if ((allowed & (1u << i)) && (be->memprops.memoryTypes[i].propertyFlags & want) == want)
      return i;
  }
  return UINT32_MAX;
}

static void decide_host_mapping(vk_backend *be);

metrale_status vk_memory_init(vk_backend *be) {
  vk_memory *m = &be->mem;
  memset(m, 0, sizeof *m);
  VkPhysicalDeviceMaintenance3Properties m3 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &m3};
  be->fn.vkGetPhysicalDeviceProperties2(be->phys, &p2);
  m->max_allocation = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : UINT64_MAX;
  decide_host_mapping(be);
  return METRALE_OK;
}

static int grow(void **array, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return 0;
  uint32_t n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void *p = realloc(*array, (size_t)n * elem);
  if (!p) return -1;
  *array = p;
  *cap = n;
  return 0;
}

static void block_release(vk_backend *be, vk_block *b) {
  if (b->mapped) be->fn.vkUnmapMemory(be->device, b->memory);
  if (b->buffer) be->fn.vkDestroyBuffer(be->device, b->buffer, NULL);
  if (b->memory) be->fn.vkFreeMemory(be->device, b->memory, NULL);
  free(b->free);
  free(b);
}

/* A new block of `bytes` (plus slack to align its first range to VK_ALIGNMENT). */
static metrale_status block_create(vk_backend *be, uint64_t bytes, int dedicated,
                                   vk_block **out_block) {
  vk_memory *m = &be->mem;
  uint64_t size = bytes + VK_ALIGNMENT;
  if (size > m->max_allocation)
    return METRALE_ERROR(OUT_OF_MEMORY,
                         "Vulkan: %llu bytes exceed the largest allocation %s allows (%llu)",
                         (unsigned long long)bytes, be->props.deviceName,
                         (unsigned long long)m->max_allocation);
  vk_block *b = calloc(1, sizeof *b);
  if (!b) return METRALE_ERROR(OUT_OF_MEMORY, "Vulkan block bookkeeping");
  b->size = size;
  b->dedicated = dedicated;
  metrale_status s = METRALE_OK;
  VkBufferCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VkResult r = be->fn.vkCreateBuffer(be->device, &info, NULL, &b->buffer);
  if (r < 0) {
    b->buffer = VK_NULL_HANDLE;
    s = VK_STATUS(r, "vkCreateBuffer");
    goto fail;
  }
  VkMemoryRequirements req;
  be->fn.vkGetBufferMemoryRequirements(be->device, b->buffer, &req);
  uint32_t type = vk_memory_type(be, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type == UINT32_MAX) type = vk_memory_type(be, req.memoryTypeBits, 0);
  if (type == UINT32_MAX) {
    s = METRALE_ERROR(INTERNAL, "Vulkan: no memory type for a storage buffer");
    goto fail;
  }
  VkMemoryAllocateFlagsInfo flags = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
      .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
  };
  VkMemoryAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .pNext = &flags,
      .allocationSize = req.size,
      .memoryTypeIndex = type,
  };
  r = be->fn.vkAllocateMemory(be->device, &alloc, NULL, &b->memory);
  if (r < 0) {
    b->memory = VK_NULL_HANDLE;
    s = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
            ? METRALE_ERROR(OUT_OF_MEMORY, "Vulkan: out of device memory allocating %llu bytes "
                            "on %s", (unsigned long long)size, be->props.deviceName)
            : VK_STATUS(r, "vkAllocateMemory");
    goto fail;
  }
  r = be->fn.vkBindBufferMemory(be->device, b->buffer, b->memory, 0);
  if (r < 0) {
    s = VK_STATUS(r, "vkBindBufferMemory");
    goto fail;
  }
  VkBufferDeviceAddressInfo addr = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                    .buffer = b->buffer};
  b->address = be->fn.vkGetBufferDeviceAddress(be->device, &addr);
  if (b->address == 0) {
    s = METRALE_ERROR(INTERNAL, "Vulkan: buffer device address is 0");
    goto fail;
  }
  VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if (m->host_mapped && (be->memprops.memoryTypes[type].propertyFlags & host) == host) {
    r = be->fn.vkMapMemory(be->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped);
    if (r < 0) {
      b->mapped = NULL;
      s = VK_STATUS(r, "vkMapMemory");
      goto fail;
    }
  } else if (m->host_mapped) {
    s = METRALE_ERROR(INTERNAL, "Vulkan: device memory type %u is not host-coherent", type);
    goto fail;
  }
  b->free = malloc(sizeof *b->free);
  if (!b->free) {
    s = METRALE_ERROR(OUT_OF_MEMORY, "Vulkan block bookkeeping");
    goto fail;
  }
  uint64_t pad = (VK_ALIGNMENT - b->address % VK_ALIGNMENT) % VK_ALIGNMENT;
  b->free[0] = (vk_range){pad, (size - pad) / VK_ALIGNMENT * VK_ALIGNMENT};
  b->n_free = 1;
  b->cap_free = 1;
  m->type_index = type;
  *out_block = b;
  return METRALE_OK;
fail:
  block_release(be, b);
  return s;
}

/* Decides once, from the first block's memory type, whether blocks are host-mapped. */
static void decide_host_mapping(vk_backend *be) {
  static const VkPhysicalDeviceType uma[] = {VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
                                             VK_PHYSICAL_DEVICE_TYPE_CPU};
  const char *staging = getenv("METRALE_VULKAN_STAGING");
  if (staging && *staging && strcmp(staging, "0") != 0) return;
  int shared = be->props.deviceType == uma[0] || be->props.deviceType == uma[1];
  if (!shared) return;
  /* every device-local type must be host-coherent, or blocks could land elsewhere */
  VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < be->memprops.memoryTypeCount; i++) {
    VkMemoryPropertyFlags f = be->memprops.memoryTypes[i].propertyFlags;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (f & host) != host) return;
  }
  be->mem.host_mapped = 1;
}

static metrale_status add_block(vk_backend *be, vk_block *b) {
  vk_memory *m = &be->mem;
  if (grow((void **)&m->blocks, &m->cap_blocks, m->n_blocks + 1, sizeof *m->blocks) != 0)
    return METRALE_ERROR(OUT_OF_MEMORY, "Vulkan block list");
  uint32_t i = m->n_blocks;
  while (i > 0 && m->blocks[i - 1]->address > b->address) {
    m->blocks[i] = m->blocks[i - 1];
    i--;
  }
  m->blocks[i] = b;
  m->n_blocks++;
  return METRALE_OK;
}

static void remove_block(vk_backend *be, vk_block *b) {
  vk_memory *m = &be->mem;
  for (uint32_t i = 0; i < m->n_blocks; i++) {
    if (m->blocks[i] != b) continue;
    memmove(&m->blocks[i], &m->blocks[i + 1], (m->n_blocks - i - 1) * sizeof *m->blocks);
    m->n_blocks--;
    break;
  }
  block_release(be, b);
}

/* First fit in one block; UINT64_MAX when it has no room. */
static uint64_t block_take(vk_block *b, uint64_t size) {
  for (uint32_t i = 0; i < b->n_free; i++) {
    vk_range *r = &b->free[i];
    if (r->size < size) continue;
    uint64_t offset = r->offset;
    r->offset += size;
    r->size -= size;
    if (r->size == 0) {
      memmove(r, r + 1, (b->n_free - i - 1) * sizeof *r);
      b->n_free--;
    }
    return offset;
  }
  return UINT64_MAX;
}

static int block_give(vk_block *b, uint64_t offset, uint64_t size) {
  uint32_t i = 0;
  while (i < b->n_free && b->free[i].offset < offset) i++;
  int joins_prev = i > 0 && b->free[i - 1].offset + b->free[i - 1].size == offset;
  int joins_next = i < b->n_free && offset + size == b->free[i].offset;
  if (joins_prev && joins_next) {
    b->free[i - 1].size += size + b->free[i].size;
    memmove(&b->free[i], &b->free[i + 1], (b->n_free - i - 1) * sizeof *b->free);
    b->n_free--;
  } else if (joins_prev) {
    b->free[i - 1].size += size;
  } else if (joins_next) {
    b->free[i].offset = offset;
    b->free[i].size += size;
  } else {
    if (grow((void **)&b->free, &b->cap_free, b->n_free + 1, sizeof *b->free) != 0) return -1;
    memmove(&b->free[i + 1], &b->free[i], (b->n_free - i) * sizeof *b->free);
    b->free[i] = (vk_range){offset, size};
    b->n_free++;
  }
  return 0;
}

static int block_empty(const vk_block *b) {
  uint64_t pad = (VK_ALIGNMENT - b->address % VK_ALIGNMENT) % VK_ALIGNMENT;
  return b->n_free == 1 && b->free[0].offset == pad &&
         b->free[0].size == (b->size - pad) / VK_ALIGNMENT * VK_ALIGNMENT;
}

/* Index of the last allocation with address <= a, or -1. */
static int64_t alloc_floor(const vk_memory *m, uint64_t a) {
  int64_t lo = 0, hi = (int64_t)m->n_allocs - 1, found = -1;
  while (lo <= hi) {
    int64_t mid = (lo + hi) / 2;
    if (m->allocs[mid].address <= a) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
}

metrale_status vk_memory_alloc(vk_backend *be, uint64_t bytes, gpu_ptr *out_ptr) {
  vk_memory *m = &be->mem;
  if (bytes > UINT64_MAX - 2 * VK_ALIGNMENT)
    return METRALE_ERROR(OUT_OF_MEMORY, "Vulkan: %llu bytes cannot be allocated",
                         (unsigned long long)bytes);
  uint64_t size = bytes ? round_up(bytes, VK_ALIGNMENT) : VK_ALIGNMENT;
  if (grow((void **)&m->allocs, &m->cap_allocs, m->n_allocs + 1, sizeof *m->allocs) != 0)
    return METRALE_ERROR(OUT_OF_MEMORY, "Vulkan allocation list");

  vk_block *b = NULL;
  uint64_t offset = UINT64_MAX;
  if (size <= VK_DEDICATED_ABOVE) {
    for (uint32_t i = 0; i < m->n_blocks && offset == UINT64_MAX; i++) {
      if (m->blocks[i]->dedicated) continue;
      offset = block_take(m->blocks[i], size);
      if (offset != UINT64_MAX) b = m->blocks[i];
    }
    if (!b) {
      uint64_t block_bytes = VK_BLOCK_BYTES;
      if (block_bytes + VK_ALIGNMENT > m->max_allocation) block_bytes = m->max_allocation - VK_ALIGNMENT;
      metrale_status s = block_create(be, block_bytes, 0, &b);
      if (s && metrale_status_code(s) == METRALE_CODE_OUT_OF_MEMORY) {
        /* no room for a whole block: try just this request */
        metrale_status_free(s);
        s = block_create(be, size, 1, &b);
      }
      if (s) return s;
      s = add_block(be, b);
      if (s) {
        block_release(be, b);
        return s;
      }
      offset = block_take(b, size);
    }
  } else {
    METRALE_RETURN_IF_ERROR(block_create(be, size, 1, &b));
    metrale_status s = add_block(be, b);
    if (s) {
      block_release(be, b);
      return s;
    }
    offset = block_take(b, size);
  }
  if (offset == UINT64_MAX) return METRALE_ERROR(INTERNAL, "Vulkan sub-allocator: fresh block too small");

  vk_allocation a = {b->address + offset, size, bytes, b};
  int64_t at = alloc_floor(m, a.address) + 1;
  memmove(&m->allocs[at + 1], &m->allocs[at], (m->n_allocs - (uint64_t)at) * sizeof *m->allocs);
  m->allocs[at] = a;
  m->n_allocs++;
  *out_ptr = a.address;
  return METRALE_OK;
}

void vk_memory_free(vk_backend *be, gpu_ptr ptr) {
  vk_memory *m = &be->mem;
  int64_t i = alloc_floor(m, ptr);
  if (i < 0 || m->allocs[i].address != ptr) return; /* not an allocation: nothing to do */
  vk_allocation a = m->allocs[i];
  memmove(&m->allocs[i], &m->allocs[i + 1], (m->n_allocs - (uint64_t)i - 1) * sizeof *m->allocs);
  m->n_allocs--;
  vk_block *b = a.block;
  if (block_give(b, a.address - b->address, a.size) != 0) return; /* leaks the range only */
  if (!block_empty(b)) return;
  if (!b->dedicated) {
    uint32_t shared_blocks = 0;
    for (uint32_t k = 0; k < m->n_blocks; k++) shared_blocks += !m->blocks[k]->dedicated;
    if (shared_blocks <= 1) return; /* keep one block to avoid churn */
  }
  remove_block(be, b);
}

metrale_status vk_memory_resolve(vk_backend *be, gpu_ptr address, uint64_t bytes,
                                 vk_span *out_span) {
  vk_memory *m = &be->mem;
  int64_t i = alloc_floor(m, address);
  if (i < 0 || address - m->allocs[i].address >= m->allocs[i].bytes ||
      bytes > m->allocs[i].address + m->allocs[i].bytes - address)
    return METRALE_ERROR(INVALID_ARGUMENT,
                         "Vulkan: [0x%llx, +%llu) is not inside one live allocation",
                         (unsigned long long)address, (unsigned long long)bytes);
  out_span->block = m->allocs[i].block;
  out_span->offset = address - m->allocs[i].block->address;
  return METRALE_OK;
}

void vk_memory_destroy(vk_backend *be) {
  vk_memory *m = &be->mem;
  for (uint32_t i = 0; i < m->n_blocks; i++) block_release(be, m->blocks[i]);
  free(m->blocks);
  free(m->allocs);
  memset(m, 0, sizeof *m);
}
