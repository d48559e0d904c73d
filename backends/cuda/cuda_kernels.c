/* Kernel modules and launches.
 *
 * One CUmodule per kernels.def module, loaded from its embedded fatbin the first time
 * one of its kernels is asked for; the driver picks the image that fits the GPU (sm_80
 * machine code on 8.x, sm_90a on 9.0, the compute_90 PTX, compiled at load, on newer
 * GPUs).  A gpu_kernel handle is a pointer to a cuda_kernel, kept until destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "launch_rules.h"
#include "cuda_images.h"
#include "tma_templates.h"

static int image_index(const char *module) {
  for (unsigned i = 0; i < cuda_image_count; i++)
    if (strcmp(cuda_images[i]->module, module) == 0) return (int)i;
  return -1;
}

/* Parses "sm_90a" / "compute_80": *ptx, the version (90) and whether it is arch-specific. */
static int parse_target(const char *t, int *ptx, unsigned *version, int *specific) {
  const char *digits;
  if (strncmp(t, "sm_", 3) == 0) {
    *ptx = 0;
    digits = t + 3;
  } else if (strncmp(t, "compute_", 8) == 0) {
    *ptx = 1;
    digits = t + 8;
  } else {
    return 0;
  }
  char *end;
  unsigned long v = strtoul(digits, &end, 10);
  if (end == digits) return 0;
  *version = (unsigned)v;
  *specific = *end == 'a';
  return 1;
}

const char *cuda_target_for(uint32_t cc_major, uint32_t cc_minor) {
  if (cuda_image_count == 0) return NULL;
  const cuda_image *img = cuda_images[0]; /* every module is built for the same targets */
  unsigned cc = 10 * cc_major + cc_minor;
  const char *best_sass = NULL, *best_ptx = NULL;
  unsigned sass_v = 0, ptx_v = 0;
  for (size_t i = 0; i < img->ntargets; i++) {
    int ptx, specific;
    unsigned v;
    if (!parse_target(img->targets[i].target, &ptx, &v, &specific)) continue;
    /* machine code runs within its major version; PTX on anything at least as new;
     * an "a" target only on exactly its version */
    int fits = specific ? v == cc : ptx ? v <= cc : v / 10 == cc / 10 && v <= cc;
    if (!fits) continue;
    if (!ptx && (!best_sass || v >= sass_v)) {
      best_sass = img->targets[i].target;
      sass_v = v;
    } else if (ptx && (!best_ptx || v >= ptx_v)) {
      best_ptx = img->targets[i].target;
      ptx_v = v;
    }
  }
  return best_sass ? best_sass : best_ptx;
}

/* "sm_90a compute_90": the targets whose image holds the kernel. */
static void targets_with(const cuda_image *img, const char *name, char *buf, size_t cap) {
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

static void all_targets(const cuda_image *img, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < img->ntargets; i++) {
    int n = snprintf(buf + used, cap - used, "%s%s", used ? " " : "", img->targets[i].target);
    if (n > 0 && (size_t)n < cap - used) used += (size_t)n;
  }
}

/* Whether the image of `img` that the driver loads on this GPU defines the TMA templates
 * (asking the driver for an absent symbol would be an API error that compute-sanitizer
 * reports). */
static int image_has_tma(const cuda_backend *be, const cuda_image *img) {
  const char *target = cuda_target_for(be->base.caps.cc_major, be->base.caps.cc_minor);
  for (size_t t = 0; target && t < img->ntargets; t++)
    if (strcmp(img->targets[t].target, target) == 0) return img->targets[t].tma;
  return 0;
}

/* Writes the TMA templates (kernels/cuda/tma_templates.h) into a module whose loaded image
 * defines the symbol (image_has_tma): its kernels read them, so a missing symbol or a failed
 * encoding fails the module's load.  Each template is a valid 2D tiled map of its row's
 * geometry over the symbol's own address (the kernels replace address and extents).
 * L2 promotion of 128 bytes: on the H200 the 128x256 GEMM tiles ran 10-18 % faster with it
 * than with 256 bytes, and 0-3 % faster than with none (docs/perf-gemm.md, "TMA"). */
static cuda_result install_tma_templates(const cuda_driver *drv, cuda_module m) {
  cuda_deviceptr at = 0;
  size_t bytes = 0;
  cuda_result r = drv->ModuleGetGlobal(&at, &bytes, m, METRALE_TMA_SYMBOL);
  if (r != CUDA_DRV_SUCCESS) return r;
  if (bytes != (size_t)METRALE_TMA_COUNT * METRALE_TMA_BYTES) return CUDA_DRV_ERROR_INVALID_VALUE;
  cuda_tensor_map maps[METRALE_TMA_COUNT];
  _Static_assert(sizeof maps[0] == METRALE_TMA_BYTES, "one tensor map a template row");
  const unsigned elem_strides[2] = {1, 1};
  int t = 0;
#define METRALE_TMA_ENCODE(name, elem_bytes, box_k, box_rows, swizzle)                                      \
  if (r == CUDA_DRV_SUCCESS) {                                                                          \
    const unsigned long long dims[2] = {box_k, box_rows}, strides[1] = {(box_k) * (elem_bytes)};        \
    const unsigned box[2] = {box_k, box_rows};                                                          \
    r = drv->TensorMapEncodeTiled(                                                                      \
        &maps[t++], (elem_bytes) == 4 ? CUDA_DRV_TMAP_FLOAT32 : CUDA_DRV_TMAP_BFLOAT16, 2,              \
        (void *)(uintptr_t)at, dims, strides, box, elem_strides, CUDA_DRV_TMAP_INTERLEAVE_NONE,         \
        (swizzle) == 128 ? CUDA_DRV_TMAP_SWIZZLE_128B : CUDA_DRV_TMAP_SWIZZLE_64B,                      \
        CUDA_DRV_TMAP_L2_PROMOTION_128B, CUDA_DRV_TMAP_OOB_FILL_ZERO);                                  \
  }
  METRALE_TMA_TEMPLATES(METRALE_TMA_ENCODE)
#undef METRALE_TMA_ENCODE
  if (r != CUDA_DRV_SUCCESS) return r;
  return drv->MemcpyHtoD(at, maps, sizeof maps);
}

/* Called with be->lock held. */
static metrale_status load_module(cuda_backend *be, int i, cuda_module *out) {
  const cuda_image *img = cuda_images[i];
  cuda_result r = be->module_error[i];
  if (!be->modules[i] && r == CUDA_DRV_SUCCESS) {
    r = be->drv->ModuleLoadData(&be->modules[i], img->fatbin);
    if (r == CUDA_DRV_SUCCESS) {
      if (image_has_tma(be, img)) r = install_tma_templates(be->drv, be->modules[i]);
      be->module_tma_failed[i] = r != CUDA_DRV_SUCCESS;
      if (r != CUDA_DRV_SUCCESS) be->drv->ModuleUnload(be->modules[i]);
    }
    if (r != CUDA_DRV_SUCCESS) {
      be->modules[i] = NULL;
      be->module_error[i] = r; /* not retried: the image will not change */
    }
  }
  if (r != CUDA_DRV_SUCCESS) {
    char targets[128];
    all_targets(img, targets, sizeof targets);
    if (be->module_tma_failed[i])
      return cuda_error(be->drv, r, __FILE__, __LINE__,
                        "cuda module %s: its TMA templates (kernels/cuda/tma_templates.h) could not be "
                        "written on %s (%s)", img->module, be->base.caps.device_name, be->base.caps.arch);
    return cuda_error(be->drv, r, __FILE__, __LINE__,
                      "cuda module %s does not load on %s (%s; built for %s)", img->module,
                      be->base.caps.device_name, be->base.caps.arch, targets);
  }
  *out = be->modules[i];
  return METRALE_OK;
}

static metrale_status lookup_locked(cuda_backend *be, const metrale_kernel_info *info,
                                    cuda_kernel **out) {
  if (be->kernels[info->id]) {
    *out = be->kernels[info->id];
    return METRALE_OK;
  }
  int i = image_index(info->module);
  if (i < 0)
    return METRALE_ERROR(NOT_FOUND,
                         "cuda kernel %s.%s: module %s was not built into this backend "
                         "(no kernels/cuda/%s.cu)",
                         info->module, info->name, info->module, info->module);
  cuda_module m = NULL;
  metrale_status s = load_module(be, i, &m);
  if (s) {
    metrale_status n = METRALE_ERROR(NOT_FOUND, "cuda kernel %s.%s unavailable: %s", info->module,
                                     info->name, metrale_status_message(s));
    metrale_status_free(s);
    return n;
  }
  cuda_function fn = NULL;
  cuda_result r = be->drv->ModuleGetFunction(&fn, m, info->name);
  if (r == CUDA_DRV_ERROR_NOT_FOUND) {
    char has[128];
    targets_with(cuda_images[i], info->name, has, sizeof has);
    const char *loaded = cuda_target_for(be->base.caps.cc_major, be->base.caps.cc_minor);
    return METRALE_ERROR(NOT_FOUND,
                         "cuda kernel %s.%s is not in the %s image that %s (%s) loads; the "
                         "module carries it for: %s",
                         info->module, info->name, loaded ? loaded : "?",
                         be->base.caps.device_name, be->base.caps.arch, has);
  }
  if (r != CUDA_DRV_SUCCESS)
    return cuda_error(be->drv, r, __FILE__, __LINE__, "cuModuleGetFunction(%s.%s)", info->module,
                      info->name);
  cuda_kernel *k = calloc(1, sizeof *k);
  if (!k) return METRALE_ERROR(OUT_OF_MEMORY, "cuda kernel handle");
  k->fn = fn;
  k->info = info;
  be->kernels[info->id] = k;
  *out = k;
  return METRALE_OK;
}

metrale_status cuda_kernel_lookup(gpu_backend *base, const char *module, const char *name,
                                  gpu_kernel *out_kernel) {
  cuda_backend *be = cuda_of(base);
  const metrale_kernel_info *info = metrale_kernel_info_find(module, name);
  if (!info)
    return METRALE_ERROR(NOT_FOUND, "cuda: %s.%s is not a kernels.def kernel", module ? module : "(null)",
                         name ? name : "(null)");
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  cuda_kernel *k = NULL;
  pthread_mutex_lock(&be->lock);
  metrale_status s = lookup_locked(be, info, &k);
  pthread_mutex_unlock(&be->lock);
  if (s) return s;
  *out_kernel = (gpu_kernel)(uintptr_t)k;
  return METRALE_OK;
}

/* Kernels needing more than the default 48 KiB of dynamic shared memory must opt in. */
static metrale_status ensure_shared(cuda_backend *be, cuda_kernel *k, uint32_t bytes) {
  if (bytes <= 48u * 1024u) return METRALE_OK;
  if (bytes > be->max_shared_optin)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s: %u bytes of shared memory, %s allows %u",
                         k->info->module, k->info->name, bytes, be->base.caps.device_name,
                         be->max_shared_optin);
  pthread_mutex_lock(&be->lock);
  cuda_result r = CUDA_DRV_SUCCESS;
  if (k->dynamic_shared < bytes) {
    r = be->drv->FuncSetAttribute(k->fn, CUDA_DRV_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
    if (r == CUDA_DRV_SUCCESS) k->dynamic_shared = bytes;
  }
  pthread_mutex_unlock(&be->lock);
  if (r != CUDA_DRV_SUCCESS)
    return cuda_error(be->drv, r, __FILE__, __LINE__, "cuFuncSetAttribute(%s.%s, %u bytes)",
                      k->info->module, k->info->name, bytes);
  return METRALE_OK;
}

metrale_status cuda_launch(gpu_backend *base, gpu_kernel kernel, gpu_dim3 grid, gpu_dim3 block,
                           uint32_t shared_bytes, gpu_stream stream, const gpu_arg *args,
                           uint32_t nargs) {
  cuda_backend *be = cuda_of(base);
  cuda_kernel *k = (cuda_kernel *)(uintptr_t)kernel;
  if (!k) return METRALE_ERROR(INVALID_ARGUMENT, "cuda launch with a null kernel handle");
  const metrale_kernel_info *info = k->info;
  METRALE_RETURN_IF_ERROR(metrale_kernel_check_args(info, args, nargs));
  METRALE_RETURN_IF_ERROR(cuda_kernels_check_block(info, block));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return METRALE_OK; /* no work */
  if (grid.x > be->max_grid[0] || grid.y > be->max_grid[1] || grid.z > be->max_grid[2])
    return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s: grid %ux%ux%u exceeds the limit %ux%ux%u of %s",
                         info->module, info->name, grid.x, grid.y, grid.z, be->max_grid[0],
                         be->max_grid[1], be->max_grid[2], be->base.caps.device_name);
  METRALE_RETURN_IF_ERROR(cuda_kernels_check_launch(info, args));
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  METRALE_RETURN_IF_ERROR(ensure_shared(be, k, shared_bytes));

  cuda_kernel_params kp;
  void **params = cuda_kernels_params(&kp, args, nargs);
  /* early start (kernels.def METRALE_KERNEL_EARLY_START): programmatic dependent launch, the
   * kernel may start while the one before it on the stream still runs and waits for it
   * itself; not where the caps lack GPU_CAP_EARLY_START (before sm_90, METRALE_NO_EARLY_START) */
  cuda_launch_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CUDA_DRV_LAUNCH_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmatic_serialization = 1;
  const int early = info->early_start && (be->base.caps.flags & GPU_CAP_EARLY_START);
  const cuda_launch_config cfg = {.grid_x = grid.x, .grid_y = grid.y, .grid_z = grid.z,
                                  .block_x = block.x, .block_y = block.y, .block_z = block.z,
                                  .shared_bytes = shared_bytes, .stream = cuda_stream_of(be, stream),
                                  .attrs = early ? &attr : NULL, .num_attrs = early ? 1u : 0u};
  CUDA_CHECK(be->drv, be->drv->LaunchKernelEx(&cfg, k->fn, params, NULL),
             "cuLaunchKernelEx(%s.%s, grid %ux%ux%u%s)", info->module, info->name, grid.x, grid.y,
             grid.z, early ? ", early start" : "");
  return METRALE_OK;
}

void cuda_kernels_release(cuda_backend *be) {
  for (int i = 0; i < METRALE_K_COUNT; i++) {
    free(be->kernels[i]);
    be->kernels[i] = NULL;
  }
  for (unsigned i = 0; i < cuda_image_count; i++) {
    if (be->modules[i]) be->drv->ModuleUnload(be->modules[i]);
    be->modules[i] = NULL;
  }
}
