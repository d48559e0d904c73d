/* Opening a CUDA device: capabilities, the primary context, streams, teardown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_images.h"

metrale_status cuda_bind(cuda_backend *be) {
  CUDA_CHECK(be->drv, be->drv->CtxSetCurrent(be->ctx), "cuCtxSetCurrent");
  return METRALE_OK;
}

static metrale_status cuda_stream_create(gpu_backend *base, gpu_stream *out_stream) {
  cuda_backend *be = cuda_of(base);
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  pthread_mutex_lock(&be->lock);
  if (be->nstreams == be->streams_cap) {
    size_t cap = be->streams_cap ? 2 * be->streams_cap : 8;
    cuda_stream *grown = realloc(be->streams, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&be->lock);
      return METRALE_ERROR(OUT_OF_MEMORY, "cuda stream list");
    }
    be->streams = grown;
    be->streams_cap = cap;
  }
  cuda_stream s = NULL;
  cuda_result r = be->drv->StreamCreate(&s, CUDA_DRV_STREAM_NON_BLOCKING);
  if (r == CUDA_DRV_SUCCESS) be->streams[be->nstreams++] = s;
  pthread_mutex_unlock(&be->lock);
  if (r != CUDA_DRV_SUCCESS) return cuda_error(be->drv, r, __FILE__, __LINE__, "cuStreamCreate");
  *out_stream = (gpu_stream)(void *)s;
  return METRALE_OK;
}

static metrale_status cuda_stream_sync(gpu_backend *base, gpu_stream stream) {
  cuda_backend *be = cuda_of(base);
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  CUDA_CHECK(be->drv, be->drv->StreamSynchronize(cuda_stream_of(be, stream)),
             "cuStreamSynchronize (errors of earlier asynchronous work show here)");
  return METRALE_OK;
}

/* An event recorded on the signaler and waited for by the waiter, then released: the driver
 * frees it once the wait no longer needs it, and stream capture turns the pair into a graph
 * edge.  One event a call, so calls from several threads share nothing. */
static metrale_status cuda_stream_wait(gpu_backend *base, gpu_stream waiter, gpu_stream signaler) {
  cuda_backend *be = cuda_of(base);
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  cuda_event ev = NULL;
  CUDA_CHECK(be->drv, be->drv->EventCreate(&ev, CUDA_DRV_EVENT_DISABLE_TIMING), "cuEventCreate");
  cuda_result r = be->drv->EventRecord(ev, cuda_stream_of(be, signaler));
  const char *what = "cuEventRecord";
  if (r == CUDA_DRV_SUCCESS) {
    r = be->drv->StreamWaitEvent(cuda_stream_of(be, waiter), ev, 0);
    what = "cuStreamWaitEvent";
  }
  cuda_result d = be->drv->EventDestroy(ev);
  if (r != CUDA_DRV_SUCCESS) return cuda_error(be->drv, r, __FILE__, __LINE__, "%s", what);
  if (d != CUDA_DRV_SUCCESS) return cuda_error(be->drv, d, __FILE__, __LINE__, "cuEventDestroy");
  return METRALE_OK;
}

static void cuda_stream_destroy(gpu_backend *base, gpu_stream stream) {
  cuda_backend *be = cuda_of(base);
  if (!stream) return; /* the backend's own stream lives until destroy */
  metrale_status s = cuda_bind(be);
  if (s) {
    metrale_status_free(s);
    return;
  }
  cuda_stream cs = (cuda_stream)(void *)stream;
  pthread_mutex_lock(&be->lock);
  for (size_t i = 0; i < be->nstreams; i++) {
    if (be->streams[i] == cs) {
      be->streams[i] = be->streams[--be->nstreams];
      be->drv->StreamDestroy(cs); /* pending work still completes */
      break;
    }
  }
  pthread_mutex_unlock(&be->lock);
}

static metrale_status cuda_sync(gpu_backend *base) {
  cuda_backend *be = cuda_of(base);
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  CUDA_CHECK(be->drv, be->drv->CtxSynchronize(),
             "cuCtxSynchronize (errors of earlier asynchronous work show here)");
  return METRALE_OK;
}

static void cuda_destroy(gpu_backend *base) {
  cuda_backend *be = cuda_of(base);
  if (!be) return;
  if (be->ctx) {
    metrale_status s = cuda_bind(be);
    if (!s) {
      be->drv->CtxSynchronize();
      cuda_free_all(be);
      cuda_kernels_release(be);
      for (size_t i = 0; i < be->nstreams; i++) be->drv->StreamDestroy(be->streams[i]);
      if (be->stream) be->drv->StreamDestroy(be->stream);
    }
    metrale_status_free(s);
    be->drv->DevicePrimaryCtxRelease(be->dev);
  }
  free(be->allocs.slots);
  free(be->streams);
  free(be->modules);
  free(be->module_error);
  free(be->module_tma_failed);
  pthread_mutex_destroy(&be->lock);
  free(be);
}

static const gpu_backend_vtable cuda_vtable = {
    .destroy = cuda_destroy,
    .kernel = cuda_kernel_lookup,
    .launch = cuda_launch,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memset = cuda_memset,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .stream_create = cuda_stream_create,
    .stream_sync = cuda_stream_sync,
    .stream_destroy = cuda_stream_destroy,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
    .sync = cuda_sync,
    .stream_wait = cuda_stream_wait,
};

static metrale_status attribute(const cuda_driver *drv, cuda_device dev, int attr,
                                const char *what, int *out) {
  CUDA_CHECK(drv, drv->DeviceGetAttribute(out, attr, dev), "cuDeviceGetAttribute(%s)", what);
  return METRALE_OK;
}

/* Fills caps and limits from the device. */
static metrale_status read_device(cuda_backend *be) {
  const cuda_driver *drv = be->drv;
  gpu_caps *caps = &be->base.caps;
  char name[sizeof caps->device_name];
  CUDA_CHECK(drv, drv->DeviceGetName(name, (int)sizeof name, be->dev), "cuDeviceGetName");
  name[sizeof name - 1] = '\0';
  snprintf(caps->device_name, sizeof caps->device_name, "%s", name);

  int sms, warp, major, minor, unified, gx, gy, gz, optin;
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_MULTIPROCESSOR_COUNT, "multiprocessors", &sms));
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_WARP_SIZE, "warp size", &warp));
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_COMPUTE_CAPABILITY_MAJOR, "cc major", &major));
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_COMPUTE_CAPABILITY_MINOR, "cc minor", &minor));
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_UNIFIED_ADDRESSING, "unified addressing", &unified));
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_MAX_GRID_DIM_X, "grid x", &gx));
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_MAX_GRID_DIM_Y, "grid y", &gy));
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_MAX_GRID_DIM_Z, "grid z", &gz));
  METRALE_RETURN_IF_ERROR(attribute(drv, be->dev, CUDA_DRV_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory opt-in", &optin));
  size_t mem = 0;
  CUDA_CHECK(drv, drv->DeviceTotalMem(&mem, be->dev), "cuDeviceTotalMem");

  caps->sm_count = (uint32_t)sms;
  caps->subgroup_size = (uint32_t)warp;
  caps->memory_bytes = mem;
  caps->cc_major = (uint32_t)major;
  caps->cc_minor = (uint32_t)minor;
  snprintf(caps->arch, sizeof caps->arch, "sm_%d%d", major, minor);
  caps->flags = 0;
  if (major == 9 && minor == 0) caps->flags |= GPU_CAP_HOPPER; /* sm_90a runs on 9.0 only */
  if (unified) caps->flags |= GPU_CAP_UNIFIED_ADDR;
  if (major >= 8) caps->flags |= GPU_CAP_F16_TENSOR; /* fp16 mma at the bf16 rate since Ampere */
  if (major >= 9) caps->flags |= GPU_CAP_EARLY_START; /* programmatic dependent launch */
  be->max_grid[0] = (uint32_t)gx;
  be->max_grid[1] = (uint32_t)gy;
  be->max_grid[2] = (uint32_t)gz;
  be->max_shared_optin = (uint32_t)optin;
  return METRALE_OK;
}

/* Everything after the backend object exists; on failure the caller destroys it. */
static metrale_status open_device(cuda_backend *be, int index) {
  const cuda_driver *drv = be->drv;
  int count = 0;
  CUDA_CHECK(drv, drv->DeviceGetCount(&count), "cuDeviceGetCount");
  if (count == 0) return METRALE_ERROR(UNAVAILABLE, "no CUDA device");
  if (index < 0 || index >= count)
    return METRALE_ERROR(UNAVAILABLE, "CUDA device %d requested, but there %s %d (0..%d)", index,
                         count == 1 ? "is" : "are", count, count - 1);
  CUDA_CHECK(drv, drv->DeviceGet(&be->dev, index), "cuDeviceGet(%d)", index);
  METRALE_RETURN_IF_ERROR(read_device(be));
  if (be->base.caps.cc_major < 8)
    return METRALE_ERROR(UNAVAILABLE,
                         "%s is %s: this build carries CUDA kernels for compute capability 8.0 "
                         "and newer only",
                         be->base.caps.device_name, be->base.caps.arch);
  CUDA_CHECK(drv, drv->DevicePrimaryCtxRetain(&be->ctx, be->dev), "cuDevicePrimaryCtxRetain");
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  CUDA_CHECK(drv, drv->StreamCreate(&be->stream, CUDA_DRV_STREAM_NON_BLOCKING), "cuStreamCreate");
  return METRALE_OK;
}

metrale_status cuda_create(const gpu_backend_options *options, gpu_backend **out_backend) {
  const cuda_driver *drv = NULL;
  METRALE_RETURN_IF_ERROR(cuda_driver_get(&drv));
  cuda_backend *be = calloc(1, sizeof *be);
  if (!be) return METRALE_ERROR(OUT_OF_MEMORY, "cuda backend object");
  if (pthread_mutex_init(&be->lock, NULL) != 0) {
    free(be);
    return METRALE_ERROR(INTERNAL, "cuda backend: pthread_mutex_init failed");
  }
  be->base.vt = &cuda_vtable;
  be->base.name = "cuda";
  be->drv = drv;
  be->modules = calloc(cuda_image_count ? cuda_image_count : 1, sizeof *be->modules);
  be->module_error = calloc(cuda_image_count ? cuda_image_count : 1, sizeof *be->module_error);
  be->module_tma_failed = calloc(cuda_image_count ? cuda_image_count : 1, sizeof *be->module_tma_failed);
  metrale_status s = be->modules && be->module_error && be->module_tma_failed
                         ? open_device(be, options ? options->device_index : 0)
                         : METRALE_ERROR(OUT_OF_MEMORY, "cuda module table");
  if (s) {
    cuda_destroy(&be->base);
    /* whatever stopped the device from opening, the backend is unavailable */
    if (metrale_status_code(s) != METRALE_CODE_UNAVAILABLE) {
      metrale_status u = METRALE_ERROR(UNAVAILABLE, "cuda device could not be opened: %s",
                                       metrale_status_message(s));
      metrale_status_free(s);
      s = u;
    }
    return s;
  }
  *out_backend = &be->base;
  return METRALE_OK;
}
