/* Copies and memset.
 *
 * Device-to-device copies and fills are recorded into the stream like launches, and so
 * are small host-to-device copies (up to VK_INLINE_H2D_BYTES, 4-byte aligned: a layer's
 * slot lists), whose bytes vkCmdUpdateBuffer takes into the command buffer as it records.
 * Other host copies finish the stream first (so they are ordered after its earlier work),
 * then either memcpy into mapped device memory (UMA devices) or go through a host-visible
 * staging buffer, one chunk per submission.  Either way the host buffer may be reused at
 * once: stronger than the vtable's asynchronous contract asks. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VK_STAGING_BYTES (32ull << 20)
#define VK_PATTERN_BYTES 1024u
#define VK_INLINE_H2D_BYTES 65536u /* vkCmdUpdateBuffer's limit */

static metrale_status staging_create(vk_backend *be) {
  vk_staging *st = &be->staging;
  VkBufferCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = VK_STAGING_BYTES,
      .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VkResult r = be->fn.vkCreateBuffer(be->device, &info, NULL, &st->buffer);
  if (r < 0) {
    st->buffer = VK_NULL_HANDLE;
    return VK_STATUS(r, "vkCreateBuffer (staging)");
  }
  VkMemoryRequirements req;
  be->fn.vkGetBufferMemoryRequirements(be->device, st->buffer, &req);
  const VkMemoryPropertyFlags visible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
  const VkMemoryPropertyFlags coherent = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags cached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  uint32_t type = vk_memory_type(be, req.memoryTypeBits, visible | coherent | cached);
  if (type == UINT32_MAX) type = vk_memory_type(be, req.memoryTypeBits, visible | coherent);
  if (type == UINT32_MAX) type = vk_memory_type(be, req.memoryTypeBits, visible);
  if (type == UINT32_MAX) return METRALE_ERROR(UNAVAILABLE, "Vulkan: no host-visible memory type");
  st->coherent = (be->memprops.memoryTypes[type].propertyFlags & coherent) != 0;
  VkMemoryAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = type,
  };
  r = be->fn.vkAllocateMemory(be->device, &alloc, NULL, &st->memory);
  if (r < 0) {
    st->memory = VK_NULL_HANDLE;
    return VK_STATUS(r, "vkAllocateMemory (staging)");
  }
  VK_TRY(be->fn.vkBindBufferMemory(be->device, st->buffer, st->memory, 0), "vkBindBufferMemory");
  r = be->fn.vkMapMemory(be->device, st->memory, 0, VK_WHOLE_SIZE, 0, &st->mapped);
  if (r < 0) {
    st->mapped = NULL;
    return VK_STATUS(r, "vkMapMemory (staging)");
  }
  st->size = VK_STAGING_BYTES;
  return METRALE_OK;
}

static metrale_status staging(vk_backend *be) {
  if (be->staging.mapped) return METRALE_OK;
  metrale_status s = staging_create(be);
  if (s) vk_transfer_destroy_staging(be);
  return s;
}

void vk_transfer_destroy_staging(vk_backend *be) {
  vk_staging *st = &be->staging;
  if (st->mapped) be->fn.vkUnmapMemory(be->device, st->memory);
  if (st->buffer) be->fn.vkDestroyBuffer(be->device, st->buffer, NULL);
  if (st->memory) be->fn.vkFreeMemory(be->device, st->memory, NULL);
  memset(st, 0, sizeof *st);
}

static metrale_status h2d_locked(vk_backend *be, gpu_ptr dst, const void *src, uint64_t bytes,
                                 struct gpu_stream_s *s) {
  vk_span span;
  METRALE_RETURN_IF_ERROR(vk_memory_resolve(be, dst, bytes, &span));
  if (bytes <= VK_INLINE_H2D_BYTES && bytes % 4 == 0 && span.offset % 4 == 0) {
    VkCommandBuffer cb;
    METRALE_RETURN_IF_ERROR(vk_stream_record(be, s, &cb));
    be->fn.vkCmdUpdateBuffer(cb, span.block->buffer, span.offset, bytes, src);
    return METRALE_OK;
  }
  METRALE_RETURN_IF_ERROR(vk_stream_finish(be, s));
  if (span.block->mapped) {
    memcpy((char *)span.block->mapped + span.offset, src, bytes);
    return METRALE_OK;
  }
  METRALE_RETURN_IF_ERROR(staging(be));
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = bytes - done < be->staging.size ? bytes - done : be->staging.size;
    memcpy(be->staging.mapped, (const char *)src + done, n);
    if (!be->staging.coherent) {
      VkMappedMemoryRange range = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                                   .memory = be->staging.memory, .size = VK_WHOLE_SIZE};
      VK_TRY(be->fn.vkFlushMappedMemoryRanges(be->device, 1, &range), "vkFlushMappedMemoryRanges");
    }
    VkCommandBuffer cb;
    METRALE_RETURN_IF_ERROR(vk_stream_record(be, s, &cb));
    VkBufferCopy region = {.srcOffset = 0, .dstOffset = span.offset + done, .size = n};
    be->fn.vkCmdCopyBuffer(cb, be->staging.buffer, span.block->buffer, 1, &region);
    METRALE_RETURN_IF_ERROR(vk_stream_finish(be, s));
    done += n;
  }
  return METRALE_OK;
}

metrale_status vk_copy_h2d(gpu_backend *base, gpu_ptr dst, const void *src, uint64_t bytes,
                           gpu_stream stream) {
  vk_backend *be = vk_cast(base);
  if (bytes == 0) return METRALE_OK;
  if (!src) return METRALE_ERROR(INVALID_ARGUMENT, "copy_h2d from a NULL host pointer");
  pthread_mutex_lock(&be->lock);
  metrale_status s = h2d_locked(be, dst, src, bytes, vk_stream_of(be, stream));
  pthread_mutex_unlock(&be->lock);
  if (s) return s;
  return vk_validation_check(be);
}

static metrale_status d2h_locked(vk_backend *be, void *dst, gpu_ptr src, uint64_t bytes,
                                 struct gpu_stream_s *s) {
  vk_span span;
  METRALE_RETURN_IF_ERROR(vk_memory_resolve(be, src, bytes, &span));
  METRALE_RETURN_IF_ERROR(vk_stream_finish(be, s));
  if (span.block->mapped) {
    memcpy(dst, (const char *)span.block->mapped + span.offset, bytes);
    return METRALE_OK;
  }
  METRALE_RETURN_IF_ERROR(staging(be));
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = bytes - done < be->staging.size ? bytes - done : be->staging.size;
    VkCommandBuffer cb;
    METRALE_RETURN_IF_ERROR(vk_stream_record(be, s, &cb));
    VkBufferCopy region = {.srcOffset = span.offset + done, .dstOffset = 0, .size = n};
    be->fn.vkCmdCopyBuffer(cb, span.block->buffer, be->staging.buffer, 1, &region);
    METRALE_RETURN_IF_ERROR(vk_stream_finish(be, s));
    if (!be->staging.coherent) {
      VkMappedMemoryRange range = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                                   .memory = be->staging.memory, .size = VK_WHOLE_SIZE};
      VK_TRY(be->fn.vkInvalidateMappedMemoryRanges(be->device, 1, &range),
             "vkInvalidateMappedMemoryRanges");
    }
    memcpy((char *)dst + done, be->staging.mapped, n);
    done += n;
  }
  return METRALE_OK;
}

metrale_status vk_copy_d2h(gpu_backend *base, void *dst, gpu_ptr src, uint64_t bytes,
                           gpu_stream stream) {
  vk_backend *be = vk_cast(base);
  if (bytes == 0) return METRALE_OK;
  if (!dst) return METRALE_ERROR(INVALID_ARGUMENT, "copy_d2h to a NULL host pointer");
  pthread_mutex_lock(&be->lock);
  metrale_status s = d2h_locked(be, dst, src, bytes, vk_stream_of(be, stream));
  pthread_mutex_unlock(&be->lock);
  if (s) return s;
  return vk_validation_check(be);
}

static metrale_status d2d_locked(vk_backend *be, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                                 struct gpu_stream_s *s) {
  vk_span d, from;
  METRALE_RETURN_IF_ERROR(vk_memory_resolve(be, dst, bytes, &d));
  METRALE_RETURN_IF_ERROR(vk_memory_resolve(be, src, bytes, &from));
  if (dst == src) return METRALE_OK;
  if (d.block == from.block && dst < src + bytes && src < dst + bytes)
    return METRALE_ERROR(INVALID_ARGUMENT, "copy_d2d: source and destination overlap");
  VkCommandBuffer cb;
  METRALE_RETURN_IF_ERROR(vk_stream_record(be, s, &cb));
  VkBufferCopy region = {.srcOffset = from.offset, .dstOffset = d.offset, .size = bytes};
  be->fn.vkCmdCopyBuffer(cb, from.block->buffer, d.block->buffer, 1, &region);
  return METRALE_OK;
}

metrale_status vk_copy_d2d(gpu_backend *base, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                           gpu_stream stream) {
  vk_backend *be = vk_cast(base);
  if (bytes == 0) return METRALE_OK;
  pthread_mutex_lock(&be->lock);
  metrale_status s = d2d_locked(be, dst, src, bytes, vk_stream_of(be, stream));
  pthread_mutex_unlock(&be->lock);
  return s;
}

/* vkCmdFillBuffer needs 4-byte aligned offset and size; the (at most 3 + 3) bytes
 * around that come from the pattern buffer, whose bytes 4v..4v+3 all equal v. */
static metrale_status memset_locked(vk_backend *be, gpu_ptr dst, uint8_t value, uint64_t bytes,
                                    struct gpu_stream_s *s) {
  vk_span span;
  METRALE_RETURN_IF_ERROR(vk_memory_resolve(be, dst, bytes, &span));
  uint64_t head = (4 - span.offset % 4) % 4;
  if (head > bytes) head = bytes;
  uint64_t body = (bytes - head) / 4 * 4;
  uint64_t tail = bytes - head - body;
  VkCommandBuffer cb;
  METRALE_RETURN_IF_ERROR(vk_stream_record(be, s, &cb));
  VkBuffer pattern = be->pattern_block->buffer;
  uint64_t from = be->pattern_offset + 4u * value;
  if (head) {
    VkBufferCopy region = {.srcOffset = from, .dstOffset = span.offset, .size = head};
    be->fn.vkCmdCopyBuffer(cb, pattern, span.block->buffer, 1, &region);
  }
  if (body) {
    uint32_t word = value * 0x01010101u;
    be->fn.vkCmdFillBuffer(cb, span.block->buffer, span.offset + head, body, word);
  }
  if (tail) {
    VkBufferCopy region = {.srcOffset = from, .dstOffset = span.offset + head + body, .size = tail};
    be->fn.vkCmdCopyBuffer(cb, pattern, span.block->buffer, 1, &region);
  }
  return METRALE_OK;
}

metrale_status vk_memset(gpu_backend *base, gpu_ptr dst, uint8_t value, uint64_t bytes,
                         gpu_stream stream) {
  vk_backend *be = vk_cast(base);
  if (bytes == 0) return METRALE_OK;
  pthread_mutex_lock(&be->lock);
  metrale_status s = memset_locked(be, dst, value, bytes, vk_stream_of(be, stream));
  pthread_mutex_unlock(&be->lock);
  return s;
}

metrale_status vk_transfer_init(vk_backend *be) {
  gpu_ptr p = 0;
  METRALE_RETURN_IF_ERROR(vk_memory_alloc(be, VK_PATTERN_BYTES, &p));
  vk_span span;
  METRALE_RETURN_IF_ERROR(vk_memory_resolve(be, p, VK_PATTERN_BYTES, &span));
  be->pattern_block = span.block;
  be->pattern_offset = span.offset;
  uint8_t bytes[VK_PATTERN_BYTES];
  for (unsigned i = 0; i < VK_PATTERN_BYTES; i++) bytes[i] = (uint8_t)(i / 4);
  METRALE_RETURN_IF_ERROR(h2d_locked(be, p, bytes, sizeof bytes, &be->default_stream));
  /* memsets on every stream read the pattern: it must be there before any of them is submitted */
  return vk_stream_finish(be, &be->default_stream);
}

void vk_transfer_destroy(vk_backend *be) { vk_transfer_destroy_staging(be); }
