/* Streams: command buffers on the one compute queue, ordered by barriers and completed
 * through a timeline semaphore.
 *
 * Launches, device copies and fills are recorded into the stream's open command
 * buffer; each command is preceded by a full memory barrier, which also orders it
 * behind every earlier submission on the queue (a barrier's first scope covers all
 * commands before it in submission order).  A full command buffer is submitted and
 * recording continues in the next one of a small ring; stream_sync submits what is
 * open and waits for the last signalled value.  All streams share the queue, so they
 * run in submission order: stronger than the vtable asks, and simple. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

metrale_status vk_stream_init(vk_backend *be, struct gpu_stream_s *s) {
  memset(s, 0, sizeof *s);
  VkCommandPoolCreateInfo pool = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
      .queueFamilyIndex = be->queue_family,
  };
  VkResult r = be->fn.vkCreateCommandPool(be->device, &pool, NULL, &s->pool);
  if (r < 0) {
    s->pool = VK_NULL_HANDLE;
    return VK_STATUS(r, "vkCreateCommandPool");
  }
  VkCommandBufferAllocateInfo cbs = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = s->pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = VK_STREAM_RING,
  };
  r = be->fn.vkAllocateCommandBuffers(be->device, &cbs, s->cbs);
  if (r < 0) {
    vk_stream_release(be, s);
    return VK_STATUS(r, "vkAllocateCommandBuffers");
  }
  VkSemaphoreTypeCreateInfo type = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
      .initialValue = 0,
  };
  VkSemaphoreCreateInfo sem = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type};
  r = be->fn.vkCreateSemaphore(be->device, &sem, NULL, &s->timeline);
  if (r < 0) {
    s->timeline = VK_NULL_HANDLE;
    vk_stream_release(be, s);
    return VK_STATUS(r, "vkCreateSemaphore");
  }
  return METRALE_OK;
}

void vk_stream_release(vk_backend *be, struct gpu_stream_s *s) {
  if (s->timeline) be->fn.vkDestroySemaphore(be->device, s->timeline, NULL);
  if (s->pool) be->fn.vkDestroyCommandPool(be->device, s->pool, NULL); /* frees the cbs */
  s->timeline = VK_NULL_HANDLE;
  s->pool = VK_NULL_HANDLE;
}

struct gpu_stream_s *vk_stream_of(vk_backend *be, gpu_stream stream) {
  return stream ? stream : &be->default_stream;
}

static metrale_status wait_value(vk_backend *be, struct gpu_stream_s *s, uint64_t value) {
  if (value == 0) return METRALE_OK;
  VkSemaphoreWaitInfo wait = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
      .semaphoreCount = 1,
      .pSemaphores = &s->timeline,
      .pValues = &value,
  };
  VkResult r = be->fn.vkWaitSemaphores(be->device, &wait, UINT64_MAX);
  if (r != VK_SUCCESS) return VK_STATUS(r, "vkWaitSemaphores");
  return METRALE_OK;
}

static metrale_status submit(vk_backend *be, struct gpu_stream_s *s) {
  VkCommandBuffer cb = s->cbs[s->current];
  s->recording = 0;
  VK_TRY(be->fn.vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  uint64_t value = s->submitted + 1;
  VkTimelineSemaphoreSubmitInfo timeline = {
      .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
      .signalSemaphoreValueCount = 1,
      .pSignalSemaphoreValues = &value,
  };
  VkSubmitInfo info = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .pNext = &timeline,
      .commandBufferCount = 1,
      .pCommandBuffers = &cb,
      .signalSemaphoreCount = 1,
      .pSignalSemaphores = &s->timeline,
  };
  VK_TRY(be->fn.vkQueueSubmit(be->queue, 1, &info, VK_NULL_HANDLE), "vkQueueSubmit");
  s->submitted = value;
  s->cb_value[s->current] = value;
  s->current = (s->current + 1) % VK_STREAM_RING;
  return METRALE_OK;
}

static void barrier(vk_backend *be, VkCommandBuffer cb, VkPipelineStageFlags dst_stage,
                    VkAccessFlags dst_access) {
  VkMemoryBarrier mb = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
      .dstAccessMask = dst_access,
  };
  be->fn.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, dst_stage, 0, 1, &mb, 0,
                              NULL, 0, NULL);
}

metrale_status vk_stream_record(vk_backend *be, struct gpu_stream_s *s, VkCommandBuffer *out_cb) {
  if (s->recording && s->commands >= VK_STREAM_MAX_COMMANDS)
    METRALE_RETURN_IF_ERROR(submit(be, s));
  if (!s->recording) {
    /* the ring slot was submitted VK_STREAM_RING rounds ago: it must be done */
    METRALE_RETURN_IF_ERROR(wait_value(be, s, s->cb_value[s->current]));
    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VK_TRY(be->fn.vkBeginCommandBuffer(s->cbs[s->current], &begin), "vkBeginCommandBuffer");
    s->recording = 1;
    s->commands = 0;
  }
  VkCommandBuffer cb = s->cbs[s->current];
  barrier(be, cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
          VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
  s->commands++;
  *out_cb = cb;
  return METRALE_OK;
}

metrale_status vk_stream_finish(vk_backend *be, struct gpu_stream_s *s) {
  if (s->recording) {
    /* device writes must be visible to the host once the semaphore is reached */
    barrier(be, s->cbs[s->current], VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    METRALE_RETURN_IF_ERROR(submit(be, s));
  }
  return wait_value(be, s, s->submitted);
}

metrale_status vk_stream_create(gpu_backend *base, gpu_stream *out_stream) {
  vk_backend *be = vk_cast(base);
  struct gpu_stream_s *s = calloc(1, sizeof *s);
  if (!s) return METRALE_ERROR(OUT_OF_MEMORY, "Vulkan stream");
  pthread_mutex_lock(&be->lock);
  metrale_status st = vk_stream_init(be, s);
  if (!st) {
    s->next = be->streams;
    be->streams = s;
  }
  pthread_mutex_unlock(&be->lock);
  if (st) {
    free(s);
    return st;
  }
  *out_stream = s;
  return METRALE_OK;
}

metrale_status vk_stream_sync(gpu_backend *base, gpu_stream stream) {
  vk_backend *be = vk_cast(base);
  pthread_mutex_lock(&be->lock);
  metrale_status s = vk_stream_finish(be, vk_stream_of(be, stream));
  pthread_mutex_unlock(&be->lock);
  if (s) return s;
  return vk_validation_check(be);
}

void vk_stream_destroy(gpu_backend *base, gpu_stream stream) {
  vk_backend *be = vk_cast(base);
  if (!stream) return;
  pthread_mutex_lock(&be->lock);
  metrale_status_free(vk_stream_finish(be, stream)); /* its work must end before its pool */
  for (struct gpu_stream_s **p = &be->streams; *p; p = &(*p)->next) {
    if (*p == stream) {
      *p = stream->next;
      break;
    }
  }
  vk_stream_release(be, stream);
  pthread_mutex_unlock(&be->lock);
  free(stream);
}

/* Finishes every stream; the first error wins.  Caller holds the lock. */
metrale_status vk_streams_finish_all(vk_backend *be) {
  metrale_status first = vk_stream_finish(be, &be->default_stream);
  for (struct gpu_stream_s *s = be->streams; s; s = s->next) {
    metrale_status st = vk_stream_finish(be, s);
    if (st && !first)
      first = st;
    else
      metrale_status_free(st);
  }
  return first;
}

metrale_status vk_sync(gpu_backend *base) {
  vk_backend *be = vk_cast(base);
  pthread_mutex_lock(&be->lock);
  metrale_status s = vk_streams_finish_all(be);
  pthread_mutex_unlock(&be->lock);
  if (s) return s;
  return vk_validation_check(be);
}
