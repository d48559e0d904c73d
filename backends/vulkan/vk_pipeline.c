/* Kernels: one compute pipeline per manifest kernel, made at first lookup from the
 * SPIR-V embedded at build time.  Launch arguments travel as push constants packed
 * with the offsets that tools/gen/vk_push_constants.c generated from kernels.def (the
 * same generator wrote each shader's `Args` block). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"
#include "vk_push_table.h"
#include "vk_shaders.h"

#ifndef VK_DELTA_DK_MAX
#error "VK_DELTA_DK_MAX comes from backends/vulkan/CMakeLists.txt (shared with the shaders)"
#endif

/* Shape limits of shaders that keep per-thread arrays (the delta rule keeps one column
 * of the [dk, dv] state per invocation).  A launch beyond one is refused, not run. */
static const struct vk_limit {
  metrale_kernel_id id;
  const char *arg;
  uint32_t max;
} limits[] = {
    {METRALE_K_delta_rule_decode, "dk", VK_DELTA_DK_MAX},
    {METRALE_K_delta_rule_prefill, "dk", VK_DELTA_DK_MAX},
    {METRALE_K_gdn_decode_fused35, "dk", VK_DELTA_DK_MAX},
    {METRALE_K_gdn_decode_fused35, "dv", VK_DELTA_DK_MAX}, /* its q, k and v rows in shared memory */
};

/* The kernels that run long sequences in windows under a loop cap, one dispatch a window:
 * delta_rule_prefill (windows of tokens, window = workgroup row y, grid.y is 1),
 * conv1d_prefill (windows of tokens, workgroup layer z, grid.z is 1) and
 * delta_rule_prefill_chunked's phase 1 (windows of chunks, workgroup row y). */
static int windowed(metrale_kernel_id id) {
  return id == METRALE_K_delta_rule_prefill || id == METRALE_K_conv1d_prefill ||
         id == METRALE_K_delta_rule_prefill_chunked;
}

static const vk_shader_blob *find_blob(const char *name) {
  for (const vk_shader_blob *b = vk_shader_blobs; b->name; b++)
    if (strcmp(b->name, name) == 0) return b;
  return NULL;
}

static void pipeline_release(vk_backend *be, vk_pipeline *p) {
  if (p->pipeline) be->fn.vkDestroyPipeline(be->device, p->pipeline, NULL);
  if (p->layout) be->fn.vkDestroyPipelineLayout(be->device, p->layout, NULL);
  if (p->module) be->fn.vkDestroyShaderModule(be->device, p->module, NULL);
  memset(p, 0, sizeof *p);
}

static metrale_status pipeline_create(vk_backend *be, const metrale_kernel_info *info,
                                      const vk_shader_blob *blob, vk_pipeline *p) {
  const vk_push_layout *pl = &vk_push_layouts[info->id];
  VkShaderModuleCreateInfo mi = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = blob->bytes,
      .pCode = blob->code,
  };
  VK_TRY(be->fn.vkCreateShaderModule(be->device, &mi, NULL, &p->module), "vkCreateShaderModule");
  VkPushConstantRange range = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0,
                               .size = pl->size};
  VkPipelineLayoutCreateInfo li = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .pushConstantRangeCount = pl->size ? 1u : 0u,
      .pPushConstantRanges = &range,
  };
  VK_TRY(be->fn.vkCreatePipelineLayout(be->device, &li, NULL, &p->layout), "vkCreatePipelineLayout");
  /* the windowed kernels' constant 0: the driver's loop cap (vk_internal.h), 0 for none */
  const VkSpecializationMapEntry cap_entry = {.constantID = 0, .offset = 0, .size = sizeof(uint32_t)};
  const VkSpecializationInfo cap_spec = {
      .mapEntryCount = 1, .pMapEntries = &cap_entry, .dataSize = sizeof be->loop_cap, .pData = &be->loop_cap};
  VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      /* grids beyond maxComputeWorkGroupCount; the statistics for METRALE_VULKAN_PROFILE */
      .flags = VK_PIPELINE_CREATE_DISPATCH_BASE_BIT |
               (be->exec_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0u),
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = p->module,
                .pName = "main",
                .pSpecializationInfo = windowed(info->id) ? &cap_spec : NULL},
      .layout = p->layout,
  };
  VK_TRY(be->fn.vkCreateComputePipelines(be->device, VK_NULL_HANDLE, 1, &ci, NULL, &p->pipeline),
         "vkCreateComputePipelines");
  return METRALE_OK;
}

metrale_status vk_kernel(gpu_backend *base, const char *module, const char *name,
                         gpu_kernel *out_kernel) {
  vk_backend *be = vk_cast(base);
  const metrale_kernel_info *info = metrale_kernel_info_find(module, name);
  if (!info)
    return METRALE_ERROR(NOT_FOUND, "kernel %s.%s is not in the manifest", module ? module : "?",
                         name ? name : "?");
  const vk_shader_blob *blob = find_blob(info->name);
  if (!blob) return METRALE_ERROR(NOT_FOUND, "no Vulkan shader for %s.%s", info->module, info->name);
  const vk_push_layout *pl = &vk_push_layouts[info->id];
  if (pl->nargs != info->nargs || pl->block != info->block)
    return METRALE_ERROR(INTERNAL, "%s.%s: the Vulkan shaders were built from another kernels.def",
                         info->module, info->name);
  pthread_mutex_lock(&be->lock);
  vk_pipeline *p = &be->pipelines[info->id];
  metrale_status s = METRALE_OK;
  if (!p->pipeline) {
    s = pipeline_create(be, info, blob, p);
    if (s) {
      pipeline_release(be, p);
      s = metrale_status_annotate(s, "Vulkan pipeline of %s.%s", info->module, info->name);
    }
  }
  pthread_mutex_unlock(&be->lock);
  if (s) return s;
  *out_kernel = (gpu_kernel)info->id + 1;
  return METRALE_OK;
}

static metrale_status check_limits(const metrale_kernel_info *info, const gpu_arg *args) {
  for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
    if (limits[l].id != info->id) continue;
    const int i = metrale_kernel_arg_index(info, limits[l].arg);
    if (i >= 0 && args[i].v.u32 > limits[l].max)
      return METRALE_ERROR(INVALID_ARGUMENT, "the Vulkan %s.%s supports %s <= %u, got %u", info->module,
                           info->name, limits[l].arg, limits[l].max, args[i].v.u32);
  }
  return METRALE_OK;
}

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* The launch argument of `info` named `name` (kernels.def), or NULL. */
static const gpu_arg *arg_named(const metrale_kernel_info *info, const gpu_arg *args, const char *name) {
  const int i = metrale_kernel_arg_index(info, name);
  return i < 0 ? NULL : &args[i];
}

/* Under a loop cap (llvmpipe): the windows a windowed kernel needs for its longest sequence,
 * read from its cu_seqlens.  Reading it waits for the stream; only drivers with the cap pay
 * that. */
static metrale_status count_windows(vk_backend *be, const metrale_kernel_info *info, gpu_stream stream,
                                    const gpu_arg *args, uint32_t chunk_cols, uint32_t *out) {
  const int delta = info->id == METRALE_K_delta_rule_prefill || chunk_cols;
  const gpu_arg *a_s = arg_named(info, args, "s"), *a_cu = arg_named(info, args, "cu_seqlens");
  const gpu_arg *a_dk = arg_named(info, args, "dk"), *a_dv = arg_named(info, args, "dv");
  const gpu_arg *a_kw = arg_named(info, args, "kw");
  if (!a_s || !a_cu || (delta ? !a_dk || !a_dv : !a_kw))
    return METRALE_ERROR(INTERNAL, "%s.%s: the windowed launch lacks its sequence arguments", info->module,
                         info->name);
  const uint32_t block = vk_push_layouts[info->id].block;
  const uint32_t chunk_win =
      chunk_cols ? vk_chunk_window(be->loop_cap, a_s->v.u32, a_dk->v.u32, chunk_cols, block) : 0;
  if (chunk_cols && !chunk_win)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s: %u sequences at dk %u do not fit this driver's loop cap "
                         "(%u iterations a shader invocation)", info->module, info->name, a_s->v.u32,
                         a_dk->v.u32, be->loop_cap);
  const uint32_t nseq = a_s->v.u32;
  const gpu_ptr cu_ptr = a_cu->v.ptr;
  *out = 1;
  if (nseq == 0) return METRALE_OK;
  if (nseq > (1u << 24)) return METRALE_ERROR(INVALID_ARGUMENT, "windowed prefill: %u sequences", nseq);
  int32_t *cu = malloc(((size_t)nseq + 1) * sizeof *cu);
  if (!cu) return METRALE_ERROR(OUT_OF_MEMORY, "prefill windows: %u sequence bounds", nseq + 1);
  metrale_status s = vk_copy_d2h(&be->base, cu, cu_ptr, ((size_t)nseq + 1) * sizeof *cu, stream);
  if (!s) {
    const uint32_t win = chunk_cols ? chunk_win
                         : delta    ? vk_delta_window(be->loop_cap, a_dk->v.u32, a_dv->v.u32, block)
                                    : vk_conv_window(be->loop_cap, a_kw->v.u32);
    uint32_t longest = 0; /* tokens, or chunks of 64 tokens */
    for (uint32_t i = 0; i < nseq; i++)
      if (cu[i + 1] > cu[i] && (uint32_t)(cu[i + 1] - cu[i]) > longest) longest = (uint32_t)(cu[i + 1] - cu[i]);
    if (chunk_cols) longest = (longest + 63) / 64;
    *out = longest ? (longest + win - 1) / win : 1;
  }
  free(cu);
  return s;
}

metrale_status vk_launch(gpu_backend *base, gpu_kernel kernel, gpu_dim3 grid, gpu_dim3 block,
                         uint32_t shared_bytes, gpu_stream stream, const gpu_arg *args,
                         uint32_t nargs) {
  vk_backend *be = vk_cast(base);
  if (kernel == 0 || kernel > METRALE_K_COUNT || !be->pipelines[kernel - 1].pipeline)
    return METRALE_ERROR(INVALID_ARGUMENT, "Vulkan launch of an unknown kernel handle %llu",
                         (unsigned long long)kernel);
  const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)(kernel - 1));
  METRALE_RETURN_IF_ERROR(metrale_kernel_check_args(info, args, nargs));
  const vk_push_layout *pl = &vk_push_layouts[info->id];
  if (block.x != pl->block || block.y != 1 || block.z != 1)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s is compiled for blocks of (%u,1,1), launched "
                         "with (%u,%u,%u)", info->module, info->name, pl->block, block.x,
                         block.y, block.z);
  /* The shaders declare their workgroup memory statically (checked against the device's
   * limit when the pipeline is made); the manifest's dynamic amount (METRALE_KERNEL_SHARED),
   * which the CUDA kernels of the same row take, is accepted and unused.  Any other amount
   * is a caller's mistake. */
  if (shared_bytes && shared_bytes != info->shared_bytes)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s: %u bytes of dynamic shared memory; the Vulkan "
                         "kernels take none beyond the manifest's %u", info->module, info->name,
                         shared_bytes, info->shared_bytes);
  METRALE_RETURN_IF_ERROR(check_limits(info, args));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return METRALE_OK;

  uint8_t push[128] = {0};
  for (uint32_t i = 0; i < nargs; i++) {
    size_t size = args[i].kind == GPU_ARG_PTR || args[i].kind == GPU_ARG_U64 ? 8 : 4;
    if (pl->offsets[i] + size > pl->size || pl->size > sizeof push)
      return METRALE_ERROR(INTERNAL, "%s.%s: push-constant table out of range", info->module,
                           info->name);
    switch (args[i].kind) {
      case GPU_ARG_PTR: memcpy(push + pl->offsets[i], &args[i].v.ptr, 8); break;
      case GPU_ARG_U64: memcpy(push + pl->offsets[i], &args[i].v.u64, 8); break;
      case GPU_ARG_U32: memcpy(push + pl->offsets[i], &args[i].v.u32, 4); break;
      case GPU_ARG_I32: memcpy(push + pl->offsets[i], &args[i].v.i32, 4); break;
      case GPU_ARG_F32: memcpy(push + pl->offsets[i], &args[i].v.f32, 4); break;
    }
  }

  /* delta_rule_prefill_chunked's phase 1 takes 16 or 32 value columns a block, told apart by
   * grid.x (kernels.def).  A grid split over several dispatches (below) has no whole grid.x
   * to read in the shader, so it is told here: phase 2 in the push constants for 32. */
  uint32_t chunk_cols = 0;
  if (info->id == METRALE_K_delta_rule_prefill_chunked) {
    const int ip = metrale_kernel_arg_index(info, "phase");
    const uint32_t phase = args[ip].v.u32, nseq = arg_named(info, args, "s")->v.u32;
    if (phase > 1)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s: phase %u (0 or 1)", info->module, info->name, phase);
    /* phase 0 loops over the sequences to find its chunk, then ~4000 times (unwindowed) */
    if (phase == 0 && be->loop_cap && nseq > be->loop_cap - 8192u)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s: %u sequences do not fit this driver's loop cap (%u "
                           "iterations a shader invocation)", info->module, info->name, nseq, be->loop_cap);
    if (phase == 1) {
      const uint64_t heads = (uint64_t)nseq * arg_named(info, args, "nv")->v.u32;
      const uint32_t dv = arg_named(info, args, "dv")->v.u32;
      chunk_cols = grid.x == heads * ((dv + 15) / 16) ? 16 : grid.x == heads * ((dv + 31) / 32) ? 32 : 0;
      if (!chunk_cols)
        return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s: phase 1 on a grid of %u blocks, which is neither 16 "
                             "nor 32 value columns a block", info->module, info->name, grid.x);
      const uint32_t pushed = chunk_cols == 32 ? 2u : 1u;
      memcpy(push + pl->offsets[ip], &pushed, 4);
    }
  }

  uint32_t windows = 1;
  if (be->loop_cap && windowed(info->id) && (info->id != METRALE_K_delta_rule_prefill_chunked || chunk_cols))
    METRALE_RETURN_IF_ERROR(count_windows(be, info, stream, args, chunk_cols, &windows));
  const int window_on_z = info->id == METRALE_K_conv1d_prefill;

  pthread_mutex_lock(&be->lock);
  VkCommandBuffer cb;
  metrale_status s = vk_profile_make_room(be);
  if (!s) s = vk_stream_record(be, vk_stream_of(be, stream), &cb);
  if (!s) {
    vk_profile_begin(be, cb, info, args);
    const vk_pipeline *p = &be->pipelines[info->id];
    be->fn.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    if (pl->size)
      be->fn.vkCmdPushConstants(cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pl->size, push);
    const uint32_t *max = be->props.limits.maxComputeWorkGroupCount;
    for (uint32_t w = 0; w < windows; w++) { /* window w: workgroup row or layer w (grid 1 there) */
      if (w > 0) { /* window w starts from the state window w - 1 stored */
        const VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                    .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                                    .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
        be->fn.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
      }
      for (uint32_t z = 0; z < grid.z; z += min_u32(max[2], grid.z - z))
        for (uint32_t y = 0; y < grid.y; y += min_u32(max[1], grid.y - y))
          for (uint32_t x = 0; x < grid.x; x += min_u32(max[0], grid.x - x))
            be->fn.vkCmdDispatchBase(cb, x, window_on_z ? y : y + w, window_on_z ? z + w : z,
                                     min_u32(max[0], grid.x - x),
                                     min_u32(max[1], grid.y - y), min_u32(max[2], grid.z - z));
    }
    vk_profile_end(be, cb);
  }
  pthread_mutex_unlock(&be->lock);
  return s;
}

void vk_pipelines_destroy(vk_backend *be) {
  for (int k = 0; k < METRALE_K_COUNT; k++) pipeline_release(be, &be->pipelines[k]);
}

metrale_status vk_describe(char *buffer, size_t capacity) {
  if (!buffer || capacity == 0) return METRALE_ERROR(INVALID_ARGUMENT, "describe: no buffer");
  size_t used = (size_t)snprintf(buffer, capacity, "spirv-vulkan1.2:");
  for (const vk_shader_blob *b = vk_shader_blobs; b->name && used < capacity; b++)
    used += (size_t)snprintf(buffer + used, capacity - used, " %s", b->name);
  if (used >= capacity) return METRALE_ERROR(INVALID_ARGUMENT, "describe: buffer too small");
  return METRALE_OK;
}
