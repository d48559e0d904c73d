/* metrale_device: an opened backend, its kernel handles and the kernel audit. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrale/device.h"
#include "registry.h"

struct metrale_device {
  gpu_backend *be;
  gpu_kernel handles[METRALE_K_COUNT];
  uint8_t lookup[METRALE_K_COUNT];           /* metrale_lookup */
  _Atomic uint64_t launches[METRALE_K_COUNT]; /* metrale_device_launches */
};

static metrale_status open_named(const char *name, const gpu_backend_options *opts,
                                 gpu_backend **out_be) {
  const gpu_backend_module *m = NULL;
  METRALE_RETURN_IF_ERROR(metrale_backend_module_get(name, &m, NULL));
  gpu_backend *be = NULL;
  metrale_status s = m->create(opts, &be);
  if (s) return metrale_status_annotate(s, "backend %s unavailable", name);
  *out_be = be;
  return METRALE_OK;
}

/* "1" (any value but "" and "0") */
static int env_on(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

/* METRALE_NO_FP16=1: no fp16 products, whatever the backend can do (the layer then keeps
 * f32 x for the projections and the split-product chunked core: docs/numerics.md).
 * METRALE_NO_EARLY_START=1: every kernel waits for the one before it to end (to tell whether
 * a wrong result comes from a kernel started early: docs/perf-decode.md section 30). */
void metrale_caps_apply_env(gpu_caps *caps) {
  if (env_on("METRALE_NO_FP16")) caps->flags &= ~(uint32_t)GPU_CAP_F16_TENSOR;
  if (env_on("METRALE_NO_EARLY_START")) caps->flags &= ~(uint32_t)GPU_CAP_EARLY_START;
}

metrale_status metrale_device_open(const metrale_device_options *options,
                                   metrale_device **out_device) {
  const char *name = options ? options->backend : NULL;
  if (!name || !*name) name = getenv("METRALE_BACKEND");
  if (!name || !*name) name = "auto";
  gpu_backend_options bopts = {.device_index = options ? options->device_index : 0};

  gpu_backend *be = NULL;
  if (strcmp(name, "auto") == 0) {
    /* highest score among the modules that open a device */
    const size_t n = metrale_backend_count();
    int best_score = -1;
    for (size_t i = 0; i < n; i++) {
      const gpu_backend_module *m = NULL;
      metrale_status s = metrale_backend_module_get(metrale_backend_name(i), &m, NULL);
      if (s) {
        metrale_status_free(s);
        continue;
      }
      if (m->score <= best_score) continue;
      gpu_backend *cand = NULL;
      s = m->create(&bopts, &cand);
      if (s) {
        metrale_status_free(s);
        continue;
      }
      if (be) be->vt->destroy(be);
      be = cand;
      best_score = m->score;
    }
    if (!be) return METRALE_ERROR(UNAVAILABLE, "no backend is available (not even cpu)");
  } else {
    METRALE_RETURN_IF_ERROR(open_named(name, &bopts, &be));
  }

  metrale_caps_apply_env(&be->caps);

  metrale_device *dev = calloc(1, sizeof *dev);
  if (!dev) {
    be->vt->destroy(be);
    return METRALE_ERROR(OUT_OF_MEMORY, "device object");
  }
  dev->be = be;
  for (int k = 0; k < METRALE_K_COUNT; k++) atomic_init(&dev->launches[k], 0);
  *out_device = dev;
  return METRALE_OK;
}

int metrale_device_has_graphs(const metrale_device *dev) {
  const gpu_backend_vtable *vt = dev->be->vt;
  return vt->graph_begin && vt->graph_end && vt->graph_launch && vt->graph_destroy;
}

/* METRALE_LAUNCH_LOG=FILE: at destroy, one line a launched kernel appended to FILE, "backend
 * module.name count" (which kernels a program or a test suite reached; DEVELOPERS.md). */
static void log_launches(const metrale_device *dev) {
  const char *path = getenv("METRALE_LAUNCH_LOG");
  if (!path || !*path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  for (int k = 0; k < METRALE_K_COUNT; k++) {
    const uint64_t c = metrale_device_launches(dev, (metrale_kernel_id)k);
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)k);
    if (c) fprintf(f, "%s %s.%s %llu\n", dev->be->name, info->module, info->name, (unsigned long long)c);
  }
  fclose(f);
}

void metrale_device_destroy(metrale_device *dev) {
  if (!dev) return;
  log_launches(dev);
  if (dev->be) dev->be->vt->destroy(dev->be);
  free(dev);
}

gpu_backend *metrale_device_backend(metrale_device *dev) { return dev->be; }

static metrale_status lookup(metrale_device *dev, metrale_kernel_id id, gpu_kernel *out) {
  const metrale_kernel_info *info = metrale_kernel_info_get(id);
  if (!info) return METRALE_ERROR(INVALID_ARGUMENT, "kernel id %d is not in the manifest", (int)id);
  if (dev->lookup[id] == METRALE_LOOKUP_PRESENT) {
    *out = dev->handles[id];
    return METRALE_OK;
  }
  gpu_kernel k = 0;
  metrale_status s = dev->be->vt->kernel(dev->be, info->module, info->name, &k);
  if (!s && k == 0) s = METRALE_ERROR(INTERNAL, "backend %s returned a null handle for %s.%s",
                                      dev->be->name, info->module, info->name);
  if (s) {
    dev->lookup[id] = METRALE_LOOKUP_MISSING;
    return s;
  }
  dev->lookup[id] = METRALE_LOOKUP_PRESENT;
  dev->handles[id] = k;
  *out = k;
  return METRALE_OK;
}

metrale_status metrale_kernel(metrale_device *dev, metrale_kernel_id id, gpu_kernel *out_kernel) {
  gpu_kernel k = 0;
  metrale_status s = lookup(dev, id, &k);
  if (s) {
    const metrale_kernel_info *info = metrale_kernel_info_get(id);
    return metrale_status_annotate(s, "backend %s lacks required kernel %s.%s", dev->be->name,
                                   info ? info->module : "?", info ? info->name : "?");
  }
  *out_kernel = k;
  return METRALE_OK;
}

gpu_kernel metrale_try_kernel(metrale_device *dev, metrale_kernel_id id) {
  gpu_kernel k = 0;
  metrale_status s = lookup(dev, id, &k);
  if (s) {
    metrale_status_free(s);
    return 0;
  }
  return k;
}

metrale_lookup metrale_device_lookup(const metrale_device *dev, metrale_kernel_id id) {
  if ((int)id < 0 || id >= METRALE_K_COUNT) return METRALE_LOOKUP_NONE;
  return (metrale_lookup)dev->lookup[id];
}

metrale_status metrale_launch(metrale_device *dev, metrale_kernel_id id, gpu_kernel kernel,
                              gpu_dim3 grid, gpu_stream stream, const gpu_arg *args,
                              uint32_t nargs) {
  const metrale_kernel_info *info = metrale_kernel_info_get(id);
  METRALE_RETURN_IF_ERROR(metrale_kernel_check_args(info, args, nargs));
  if (kernel == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "launch of %s.%s with a null kernel handle",
                         info->module, info->name);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return METRALE_OK; /* empty work */
  if (grid.x % info->cluster_x)
    return METRALE_ERROR(INVALID_ARGUMENT, "launch of %s.%s: grid.x %u is not a multiple of its clusters' %u blocks",
                         info->module, info->name, grid.x, info->cluster_x);
  gpu_dim3 block = {info->block, 1, 1};
  metrale_status s =
      dev->be->vt->launch(dev->be, kernel, grid, block, info->shared_bytes, stream, args, nargs);
  if (s) return metrale_status_annotate(s, "launch of %s.%s", info->module, info->name);
  atomic_fetch_add_explicit(&dev->launches[id], 1, memory_order_relaxed);
  return METRALE_OK;
}

uint64_t metrale_device_launches(const metrale_device *dev, metrale_kernel_id id) {
  if ((int)id < 0 || id >= METRALE_K_COUNT) return 0;
  return atomic_load_explicit(&dev->launches[id], memory_order_relaxed);
}

void metrale_device_launches_reset(metrale_device *dev) {
  for (int k = 0; k < METRALE_K_COUNT; k++) atomic_store_explicit(&dev->launches[k], 0, memory_order_relaxed);
}

int metrale_device_audit(metrale_device *dev, FILE *out) {
  int missing_required = 0;
  fprintf(out, "  %-12s %-20s %-9s %-8s %s\n", "module", "kernel", "need", "status", "without it");
  for (int k = 0; k < METRALE_K_COUNT; k++) {
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)k);
    gpu_kernel h = metrale_try_kernel(dev, (metrale_kernel_id)k);
    int req = info->requirement == METRALE_REQUIRED;
    if (!h && req) missing_required++;
    fprintf(out, "  %-12s %-20s %-9s %-8s %s\n", info->module, info->name,
            req ? "required" : "optional", h ? "present" : "MISSING",
            h ? "" : (req ? "layer creation fails" : info->fallback));
  }
  return missing_required;
}

metrale_status metrale_alloc(metrale_device *dev, uint64_t bytes, gpu_ptr *out_ptr) {
  return dev->be->vt->alloc(dev->be, bytes, out_ptr);
}

void metrale_free(metrale_device *dev, gpu_ptr ptr) {
  if (ptr) dev->be->vt->free(dev->be, ptr);
}
