/* Kernel modules and launches.
 *
 * One hipModule per kernels.def module, loaded from its embedded offload bundle the first
 * time one of its kernels is asked for; the runtime takes the code object built for the
 * GPU's target out of the bundle.  A gpu_kernel handle is a pointer to a hip_kernel, kept
 * until destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_backend.h"
#include "launch_rules.h"
#include "hip_images.h"

int hip_target_built(const char *target) {
  for (unsigned i = 0; i < hip_target_count; i++)
    if (strcmp(hip_targets[i], target) == 0) return 1;
  return 0;
}

void hip_built_targets(char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (unsigned i = 0; i < hip_target_count; i++) {
    int n = snprintf(buf + used, cap - used, "%s%s", used ? " " : "", hip_targets[i]);
    if (n < 0 || (size_t)n >= cap - used) break;
    used += (size_t)n;
  }
}

static int image_index(const char *module) {
  for (unsigned i = 0; i < hip_image_count; i++)
    if (strcmp(hip_images[i]->module, module) == 0) return (int)i;
  return -1;
}

static const char *excluded_reason(const char *module) {
  for (unsigned i = 0; i < hip_excluded_module_count; i++)
    if (strcmp(hip_excluded_modules[i].module, module) == 0) return hip_excluded_modules[i].reason;
  return NULL;
}

/* "gfx90a gfx940": the targets whose code object holds the kernel. */
static void targets_with(const hip_image *img, const char *name, char *buf, size_t cap) {
  size_t used = 0, len = strlen(name);
  buf[0] = '\0';
  for (size_t i = 0; i < img->ntargets; i++) {
    const char *list = img->targets[i].kernels;
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name)) {
      if ((p == list || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) {
        int n = snprintf(buf + used, cap - used, "%s%s", used ? " " : "", img->targets[i].target);
        if (n > 0 && (size_t)n < cap - used) used += (size_t)n;
        break;
      }
    }
  }
  if (!used) snprintf(buf, cap, "no target");
}

/* Called with be->lock held. */
static metrale_status load_module(hip_backend *be, int i, hip_module *out) {
  const hip_image *img = hip_images[i];
  hip_error e = be->module_error[i];
  if (!be->modules[i] && e == HIP_API_SUCCESS) {
    e = be->api->ModuleLoadData(&be->modules[i], img->bundle);
    if (e != HIP_API_SUCCESS) {
      be->modules[i] = NULL;
      be->module_error[i] = e; /* not retried: the bundle will not change */
    }
  }
  if (e != HIP_API_SUCCESS) {
    char built[256];
    hip_built_targets(built, sizeof built);
    return hip_error_status(be->api, e, __FILE__, __LINE__,
                            "hip module %s does not load on %s (%s; built for %s)", img->module,
                            be->base.caps.device_name, be->base.caps.arch, built);
  }
  *out = be->modules[i];
  return METRALE_OK;
}

static metrale_status lookup_locked(hip_backend *be, const metrale_kernel_info *info,
                                    hip_kernel **out) {
  if (be->kernels[info->id]) {
    *out = be->kernels[info->id];
    return METRALE_OK;
  }
  int i = image_index(info->module);
  if (i < 0) {
    const char *why = excluded_reason(info->module);
    return METRALE_ERROR(NOT_FOUND, "hip kernel %s.%s: module %s is not in the HIP build (%s)",
                         info->module, info->name, info->module,
                         why ? why : "no kernels/cuda source for it");
  }
  hip_module m = NULL;
  metrale_status s = load_module(be, i, &m);
  if (s) {
    metrale_status n = METRALE_ERROR(NOT_FOUND, "hip kernel %s.%s unavailable: %s", info->module,
                                     info->name, metrale_status_message(s));
    metrale_status_free(s);
    return n;
  }
  hip_function fn = NULL;
  hip_error e = be->api->ModuleGetFunction(&fn, m, info->name);
  if (e == HIP_API_ERROR_NOT_FOUND) {
    char has[256];
    targets_with(hip_images[i], info->name, has, sizeof has);
    return METRALE_ERROR(NOT_FOUND,
                         "hip kernel %s.%s is not in the %s code object that %s loads; the "
                         "module carries it for: %s",
                         info->module, info->name, be->target, be->base.caps.device_name, has);
  }
  if (e != HIP_API_SUCCESS)
    return hip_error_status(be->api, e, __FILE__, __LINE__, "hipModuleGetFunction(%s.%s)",
                            info->module, info->name);
  hip_kernel *k = calloc(1, sizeof *k);
  if (!k) return METRALE_ERROR(OUT_OF_MEMORY, "hip kernel handle");
  k->fn = fn;
  k->info = info;
  be->kernels[info->id] = k;
  *out = k;
  return METRALE_OK;
}

metrale_status hip_kernel_lookup(gpu_backend *base, const char *module, const char *name,
                                 gpu_kernel *out_kernel) {
  hip_backend *be = hip_of(base);
  const metrale_kernel_info *info = metrale_kernel_info_find(module, name);
  if (!info)
    return METRALE_ERROR(NOT_FOUND, "hip: %s.%s is not a kernels.def kernel",
                         module ? module : "(null)", name ? name : "(null)");
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  hip_kernel *k = NULL;
  pthread_mutex_lock(&be->lock);
  metrale_status s = lookup_locked(be, info, &k);
  pthread_mutex_unlock(&be->lock);
  if (s) return s;
  *out_kernel = (gpu_kernel)(uintptr_t)k;
  return METRALE_OK;
}

/* Kernels whose HIP build declares its shared memory statically, unlike the CUDA kernels of the
 * same row whose dynamic amount the manifest gives (METRALE_KERNEL_SHARED): they are launched
 * with none.  delta_rule_prefill_chunked: gdn_chunked.cu's portable form, 25 KB; the mma.sync
 * kernels' 70912 bytes would exceed the 64 KiB an AMD workgroup may have. */
static int static_shared_here(metrale_kernel_id id) { return id == METRALE_K_delta_rule_prefill_chunked; }

metrale_status hip_launch(gpu_backend *base, gpu_kernel kernel, gpu_dim3 grid, gpu_dim3 block,
                          uint32_t shared_bytes, gpu_stream stream, const gpu_arg *args,
                          uint32_t nargs) {
  hip_backend *be = hip_of(base);
  hip_kernel *k = (hip_kernel *)(uintptr_t)kernel;
  if (!k) return METRALE_ERROR(INVALID_ARGUMENT, "hip launch with a null kernel handle");
  const metrale_kernel_info *info = k->info;
  METRALE_RETURN_IF_ERROR(metrale_kernel_check_args(info, args, nargs));
  METRALE_RETURN_IF_ERROR(cuda_kernels_check_block(info, block));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return METRALE_OK; /* no work */
  /* AMD also limits the work-items of a dimension (grid * block) to 2^32 - 1 */
  if (grid.x > be->max_grid[0] || grid.y > be->max_grid[1] || grid.z > be->max_grid[2] ||
      (uint64_t)grid.x * block.x > UINT32_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT,
                         "%s.%s: grid %ux%ux%u of %u-thread blocks exceeds the limits of %s "
                         "(%ux%ux%u blocks, 2^32 - 1 threads a dimension)",
                         info->module, info->name, grid.x, grid.y, grid.z, block.x,
                         be->base.caps.device_name, be->max_grid[0], be->max_grid[1],
                         be->max_grid[2]);
  if (static_shared_here(info->id)) shared_bytes = 0;
  if (shared_bytes > be->max_shared)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s: %u bytes of shared memory, %s allows %u",
                         info->module, info->name, shared_bytes, be->base.caps.device_name,
                         be->max_shared);
  METRALE_RETURN_IF_ERROR(cuda_kernels_check_launch(info, args));
  METRALE_RETURN_IF_ERROR(hip_bind(be));

  /* the runtime lays the arguments out from the code object's argument metadata */
  cuda_kernel_params kp;
  void **params = cuda_kernels_params(&kp, args, nargs);
  HIP_CHECK(be->api,
            be->api->ModuleLaunchKernel(k->fn, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                        shared_bytes, hip_stream_of(be, stream), params, NULL),
            "hipModuleLaunchKernel(%s.%s, grid %ux%ux%u)", info->module, info->name, grid.x,
            grid.y, grid.z);
  return METRALE_OK;
}

void hip_kernels_release(hip_backend *be) {
  for (int i = 0; i < METRALE_K_COUNT; i++) {
    free(be->kernels[i]);
    be->kernels[i] = NULL;
  }
  for (unsigned i = 0; i < hip_image_count; i++) {
    if (be->modules[i]) be->api->ModuleUnload(be->modules[i]);
    be->modules[i] = NULL;
  }
}
