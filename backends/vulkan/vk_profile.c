/* METRALE_VULKAN_PROFILE=1: GPU time per kernel.  Every launch is bracketed by two
 * timestamps (after the barrier that orders it behind the work before, and after its last
 * dispatch); the backend sums them per manifest kernel (and per phase, for a kernel with a
 * `phase` argument) and prints the table to stderr when
 * it is destroyed.  Slots are read back when the pool is full (after every stream is
 * finished) and at the end, so profiling changes the timing it measures only there.
 *
 * It needs timestamps on the compute queue and Vulkan 1.2's hostQueryReset; a device
 * without them says so once on stderr and runs unprofiled.  Callers hold be->lock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

int vk_profile_wanted(void) {
  const char *e = getenv("METRALE_VULKAN_PROFILE");
  return e && *e && strcmp(e, "0") != 0;
}

void vk_profile_init(vk_backend *be) {
  vk_profile *p = &be->profile;
  memset(p, 0, sizeof *p);
  if (!vk_profile_wanted()) return;
  VkQueueFamilyProperties qf[32];
  uint32_t nq = 32;
  be->fn.vkGetPhysicalDeviceQueueFamilyProperties(be->phys, &nq, qf);
  const uint32_t bits = be->queue_family < nq ? qf[be->queue_family].timestampValidBits : 0;
  if (!bits || !be->host_query_reset || be->props.limits.timestampPeriod <= 0.0f) {
    fprintf(stderr, "metrale vulkan: METRALE_VULKAN_PROFILE: %s has no %s; not profiling\n",
            be->props.deviceName, bits ? "host query reset" : "timestamps on its compute queue");
    return;
  }
  VkQueryPoolCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
      .queryType = VK_QUERY_TYPE_TIMESTAMP,
      .queryCount = VK_PROFILE_SLOTS,
  };
  if (be->fn.vkCreateQueryPool(be->device, &info, NULL, &p->pool) != VK_SUCCESS) {
    p->pool = VK_NULL_HANDLE;
    fprintf(stderr, "metrale vulkan: METRALE_VULKAN_PROFILE: no query pool; not profiling\n");
    return;
  }
  be->fn.vkResetQueryPool(be->device, p->pool, 0, VK_PROFILE_SLOTS);
  p->mask = bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
  p->ns_per_tick = be->props.limits.timestampPeriod;
}

/* Reads the written slots into the per-kernel sums and resets the pool.  The streams must
 * be finished. */
static metrale_status collect(vk_backend *be) {
  vk_profile *p = &be->profile;
  if (!p->used) return METRALE_OK;
  uint64_t *ticks = p->ticks;
  VK_TRY(be->fn.vkGetQueryPoolResults(be->device, p->pool, 0, p->used, sizeof p->ticks, ticks,
                                      sizeof ticks[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
         "vkGetQueryPoolResults");
  for (uint32_t i = 0; i + 1 < p->used; i += 2) {
    const uint64_t dt = (ticks[i + 1] - ticks[i]) & p->mask;
    p->total_ns[p->row[i / 2]] += (double)dt * p->ns_per_tick;
    p->launches[p->row[i / 2]]++;
  }
  be->fn.vkResetQueryPool(be->device, p->pool, 0, VK_PROFILE_SLOTS);
  p->used = 0;
  return METRALE_OK;
}

metrale_status vk_profile_make_room(vk_backend *be) {
  if (!be->profile.pool || be->profile.used + 2 <= VK_PROFILE_SLOTS) return METRALE_OK;
  METRALE_RETURN_IF_ERROR(vk_streams_finish_all(be));
  return collect(be);
}

void vk_profile_begin(vk_backend *be, VkCommandBuffer cb, const metrale_kernel_info *info,
                      const gpu_arg *args) {
  vk_profile *p = &be->profile;
  if (!p->pool) return;
  const int iphase = metrale_kernel_arg_index(info, "phase");
  const uint32_t phase = iphase >= 0 && args[iphase].v.u32 < VK_PROFILE_PHASES ? args[iphase].v.u32 : 0;
  p->row[p->used / 2] = (uint32_t)info->id * VK_PROFILE_PHASES + phase;
  be->fn.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, p->pool, p->used);
}

void vk_profile_end(vk_backend *be, VkCommandBuffer cb) {
  vk_profile *p = &be->profile;
  if (!p->pool) return;
  be->fn.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, p->used + 1);
  p->used += 2;
}

void vk_profile_finish(vk_backend *be) {
  vk_profile *p = &be->profile;
  if (!p->pool) return;
  metrale_status s = collect(be);
  if (s) {
    fprintf(stderr, "metrale vulkan: profile: ");
    metrale_status_fprint(stderr, s);
    metrale_status_free(s);
  }
  enum { ROWS = METRALE_K_COUNT * VK_PROFILE_PHASES };
  int order[ROWS], n = 0;
  double all = 0.0;
  for (int r = 0; r < ROWS; r++)
    if (p->launches[r]) {
      order[n++] = r;
      all += p->total_ns[r];
    }
  for (int i = 1; i < n; i++) /* by total time, largest first */
    for (int j = i; j > 0 && p->total_ns[order[j]] > p->total_ns[order[j - 1]]; j--) {
      const int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  fprintf(stderr, "metrale vulkan profile (%s): GPU time a launch, between timestamps around it\n"
          "%-40s %10s %12s %10s %6s\n", be->props.deviceName, "kernel", "launches", "total ms",
          "mean us", "%");
  for (int i = 0; i < n; i++) {
    const int r = order[i];
    const metrale_kernel_info *k = metrale_kernel_info_get((metrale_kernel_id)(r / VK_PROFILE_PHASES));
    char name[80];
    if (metrale_kernel_arg_index(k, "phase") >= 0)
      snprintf(name, sizeof name, "%s.%s phase %d", k->module, k->name, r % (int)VK_PROFILE_PHASES);
    else
      snprintf(name, sizeof name, "%s.%s", k->module, k->name);
    fprintf(stderr, "%-40s %10llu %12.3f %10.2f %6.1f\n", name, (unsigned long long)p->launches[r],
            p->total_ns[r] / 1e6, p->total_ns[r] / 1e3 / (double)p->launches[r],
            all > 0 ? 100.0 * p->total_ns[r] / all : 0.0);
  }
  be->fn.vkDestroyQueryPool(be->device, p->pool, NULL);
  p->pool = VK_NULL_HANDLE;
}
