/* METRALE_VULKAN_PROFILE=1: GPU time per kernel.  Every launch is bracketed by two
 * timestamps (after the barrier that orders it behind the work before, and after its last
 * dispatch); the backend sums them per manifest kernel (and per phase, for a kernel with a
 * `phase` argument) and prints the table to stderr when
 * it is destroyed.  Slots are read back when the pool is full (after every stream is
 * finished) and at the end, so profiling changes the timing it measures only there.
 *
 * It needs timestamps on the compute queue and Vulkan 1.2's hostQueryReset; a device
 * without them says so once on stderr and runs unprofiled.  Below the table, a line for each
 * profiled kernel with its pipeline's statistics (registers, local memory, ...) where the
 * driver has VK_KHR_pipeline_executable_properties (NVIDIA's has; Debian 12's lavapipe does
 * not), or a line saying it has not.  Callers hold be->lock. */
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

/* One line a profiled kernel: what the driver reports of its pipeline (registers, local or
 * spill memory, instructions, ...: VK_KHR_pipeline_executable_properties), names as the
 * driver gives them.  rows: the profile's rows in print order. */
static void print_statistics(vk_backend *be, const int *rows, int n) {
  if (!be->exec_stats) {
    fprintf(stderr, "metrale vulkan profile: %s reports no pipeline statistics "
            "(VK_KHR_pipeline_executable_properties)\n", be->props.deviceName);
    return;
  }
  fprintf(stderr, "pipeline statistics (the driver's names and values), a line a kernel:\n");
  for (int i = 0; i < n; i++) {
    const metrale_kernel_id id = (metrale_kernel_id)(rows[i] / VK_PROFILE_PHASES);
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= (metrale_kernel_id)(rows[j] / VK_PROFILE_PHASES) == id;
    const VkPipeline pipeline = be->pipelines[id].pipeline;
    if (seen || !pipeline) continue; /* a kernel's phases share one pipeline */
    const metrale_kernel_info *k = metrale_kernel_info_get(id);
    fprintf(stderr, "%s.%s:", k->module, k->name);
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipeline};
    VkPipelineExecutablePropertiesKHR ex[4];
    uint32_t nex = 4;
    for (uint32_t e = 0; e < nex; e++)
      ex[e] = (VkPipelineExecutablePropertiesKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
    if (be->fn.vkGetPipelineExecutablePropertiesKHR(be->device, &pi, &nex, ex) < 0) nex = 0;
    for (uint32_t e = 0; e < nex; e++) {
      VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                        .pipeline = pipeline, .executableIndex = e};
      VkPipelineExecutableStatisticKHR st[32];
      uint32_t nst = 32;
      for (uint32_t t = 0; t < nst; t++)
        st[t] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
      if (be->fn.vkGetPipelineExecutableStatisticsKHR(be->device, &ei, &nst, st) < 0) nst = 0;
      if (nex > 1) fprintf(stderr, " [%s]", ex[e].name);
      for (uint32_t t = 0; t < nst; t++) {
        fprintf(stderr, " %s=", st[t].name);
        switch (st[t].format) {
          case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
            fprintf(stderr, "%s", st[t].value.b32 ? "yes" : "no");
            break;
          case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
            fprintf(stderr, "%lld", (long long)st[t].value.i64);
            break;
          case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
            fprintf(stderr, "%llu", (unsigned long long)st[t].value.u64);
            break;
          default:
            fprintf(stderr, "%g", st[t].value.f64);
        }
        fprintf(stderr, "%s", t + 1 < nst ? ";" : "");
      }
    }
    fprintf(stderr, "%s\n", nex ? "" : " none reported");
  }
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
  print_statistics(be, order, n);
  be->fn.vkDestroyQueryPool(be->device, p->pool, NULL);
  p->pool = VK_NULL_HANDLE;
}
