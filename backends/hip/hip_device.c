/* Opening an AMD GPU through HIP: attributes, the architecture, streams, teardown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hip_backend.h"
#include "hip_images.h"

metrale_status hip_bind(hip_backend *be) {
  HIP_CHECK(be->api, be->api->SetDevice(be->device), "hipSetDevice(%d)", be->device);
  return METRALE_OK;
}

static metrale_status hip_stream_create(gpu_backend *base, gpu_stream *out_stream) {
  hip_backend *be = hip_of(base);
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  pthread_mutex_lock(&be->lock);
  if (be->nstreams == be->streams_cap) {
    size_t cap = be->streams_cap ? 2 * be->streams_cap : 8;
    hip_stream *grown = realloc(be->streams, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&be->lock);
      return METRALE_ERROR(OUT_OF_MEMORY, "hip stream list");
    }
    be->streams = grown;
    be->streams_cap = cap;
  }
  hip_stream s = NULL;
  hip_error e = be->api->StreamCreateWithFlags(&s, HIP_API_STREAM_NON_BLOCKING);
  if (e == HIP_API_SUCCESS) be->streams[be->nstreams++] = s;
  pthread_mutex_unlock(&be->lock);
  if (e != HIP_API_SUCCESS)
    return hip_error_status(be->api, e, __FILE__, __LINE__, "hipStreamCreateWithFlags");
  *out_stream = (gpu_stream)(void *)s;
  return METRALE_OK;
}

static metrale_status hip_stream_sync(gpu_backend *base, gpu_stream stream) {
  hip_backend *be = hip_of(base);
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  HIP_CHECK(be->api, be->api->StreamSynchronize(hip_stream_of(be, stream)),
            "hipStreamSynchronize (errors of earlier asynchronous work show here)");
  return METRALE_OK;
}

/* An event recorded on the signaler and waited for by the waiter, then released: the
 * runtime keeps it alive until the wait no longer needs it (as CUDA's cuda_stream_wait
 * does).  One event a call, so calls from several threads share nothing.  Never run on an
 * AMD GPU (docs/conformance/hip.md). */
static metrale_status hip_stream_wait(gpu_backend *base, gpu_stream waiter, gpu_stream signaler) {
  hip_backend *be = hip_of(base);
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  hip_event ev = NULL;
  HIP_CHECK(be->api, be->api->EventCreateWithFlags(&ev, HIP_API_EVENT_DISABLE_TIMING),
            "hipEventCreateWithFlags");
  hip_error e = be->api->EventRecord(ev, hip_stream_of(be, signaler));
  const char *what = "hipEventRecord";
  if (e == HIP_API_SUCCESS) {
    e = be->api->StreamWaitEvent(hip_stream_of(be, waiter), ev, 0);
    what = "hipStreamWaitEvent";
  }
  hip_error d = be->api->EventDestroy(ev);
  if (e != HIP_API_SUCCESS) return hip_error_status(be->api, e, __FILE__, __LINE__, "%s", what);
  if (d != HIP_API_SUCCESS) return hip_error_status(be->api, d, __FILE__, __LINE__, "hipEventDestroy");
  return METRALE_OK;
}

static void hip_stream_destroy(gpu_backend *base, gpu_stream stream) {
  hip_backend *be = hip_of(base);
  if (!stream) return; /* the backend's own stream lives until destroy */
  metrale_status s = hip_bind(be);
  if (s) {
    metrale_status_free(s);
    return;
  }
  hip_stream hs = (hip_stream)(void *)stream;
  pthread_mutex_lock(&be->lock);
  for (size_t i = 0; i < be->nstreams; i++) {
    if (be->streams[i] == hs) {
      be->streams[i] = be->streams[--be->nstreams];
      be->api->StreamDestroy(hs); /* pending work still completes */
      break;
    }
  }
  pthread_mutex_unlock(&be->lock);
}

static metrale_status hip_sync(gpu_backend *base) {
  hip_backend *be = hip_of(base);
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  HIP_CHECK(be->api, be->api->DeviceSynchronize(),
            "hipDeviceSynchronize (errors of earlier asynchronous work show here)");
  return METRALE_OK;
}

static void hip_destroy(gpu_backend *base) {
  hip_backend *be = hip_of(base);
  if (!be) return;
  if (be->device_selected) {
    metrale_status s = hip_bind(be);
    if (!s) {
      be->api->DeviceSynchronize();
      hip_free_all(be);
      hip_kernels_release(be);
      for (size_t i = 0; i < be->nstreams; i++) be->api->StreamDestroy(be->streams[i]);
      if (be->stream) be->api->StreamDestroy(be->stream);
    }
    metrale_status_free(s);
  }
  free(be->allocs.slots);
  free(be->streams);
  free(be->modules);
  free(be->module_error);
  pthread_mutex_destroy(&be->lock);
  free(be);
}

static const gpu_backend_vtable hip_vtable = {
    .destroy = hip_destroy,
    .kernel = hip_kernel_lookup,
    .launch = hip_launch,
    .alloc = hip_alloc,
    .free = hip_free,
    .memset = hip_memset,
    .copy_h2d = hip_copy_h2d,
    .copy_d2h = hip_copy_d2h,
    .copy_d2d = hip_copy_d2d,
    .stream_create = hip_stream_create,
    .stream_sync = hip_stream_sync,
    .stream_destroy = hip_stream_destroy,
    .sync = hip_sync,
    .stream_wait = hip_stream_wait,
};

static metrale_status attribute(const hip_api *api, int dev, int attr, const char *what, int *out) {
  HIP_CHECK(api, api->DeviceGetAttribute(out, attr, dev), "hipDeviceGetAttribute(%s)", what);
  return METRALE_OK;
}

/* The device's gcnArchName ("gfx90a:sramecc+:xnack-"), read out of hipDeviceProp_t. */
static metrale_status read_arch(hip_backend *be, char *arch, size_t cap) {
  unsigned char props[HIP_API_PROPS_BUFFER] __attribute__((aligned(16)));
  memset(props, 0, sizeof props);
  HIP_CHECK(be->api, be->api->GetDeviceProperties(props, be->device), "hipGetDeviceProperties(%d)",
            be->device);
  const char *name = (const char *)props + be->api->props_arch_offset;
  size_t len = strnlen(name, HIP_API_PROPS_ARCH_SIZE);
  if (len == HIP_API_PROPS_ARCH_SIZE || strncmp(name, "gfx", 3) != 0)
    return METRALE_ERROR(UNAVAILABLE,
                         "%s: hipGetDeviceProperties gave no gfx architecture name (runtime %s, "
                         "version %d: a hipDeviceProp_t layout this backend does not know?)",
                         be->base.caps.device_name, be->api->library, be->api->runtime_version);
  snprintf(arch, cap, "%.*s", (int)len, name);
  return METRALE_OK;
}

/* Fills caps and limits from the device. */
static metrale_status read_device(hip_backend *be) {
  const hip_api *api = be->api;
  gpu_caps *caps = &be->base.caps;
  char name[sizeof caps->device_name];
  HIP_CHECK(api, api->DeviceGetName(name, (int)sizeof name, be->device), "hipDeviceGetName");
  name[sizeof name - 1] = '\0';
  snprintf(caps->device_name, sizeof caps->device_name, "%s", name);

  int cus, wave, unified, gx, gy, gz, shared;
  METRALE_RETURN_IF_ERROR(attribute(api, be->device, HIP_API_ATTR_MULTIPROCESSOR_COUNT, "compute units", &cus));
  METRALE_RETURN_IF_ERROR(attribute(api, be->device, HIP_API_ATTR_WARP_SIZE, "wavefront size", &wave));
  METRALE_RETURN_IF_ERROR(attribute(api, be->device, HIP_API_ATTR_UNIFIED_ADDRESSING, "unified addressing", &unified));
  METRALE_RETURN_IF_ERROR(attribute(api, be->device, HIP_API_ATTR_MAX_GRID_DIM_X, "grid x", &gx));
  METRALE_RETURN_IF_ERROR(attribute(api, be->device, HIP_API_ATTR_MAX_GRID_DIM_Y, "grid y", &gy));
  METRALE_RETURN_IF_ERROR(attribute(api, be->device, HIP_API_ATTR_MAX_GRID_DIM_Z, "grid z", &gz));
  METRALE_RETURN_IF_ERROR(attribute(api, be->device, HIP_API_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block", &shared));
  size_t mem = 0;
  HIP_CHECK(api, api->DeviceTotalMem(&mem, be->device), "hipDeviceTotalMem");

  char arch[HIP_API_PROPS_ARCH_SIZE];
  METRALE_RETURN_IF_ERROR(read_arch(be, arch, sizeof arch));
  /* the target id without its features ("gfx90a"): code objects are built per target */
  size_t base_len = strcspn(arch, ":");
  snprintf(be->target, sizeof be->target, "%.*s", (int)base_len, arch);
  if (strlen(arch) < sizeof caps->arch)
    snprintf(caps->arch, sizeof caps->arch, "%s", arch);
  else
    snprintf(caps->arch, sizeof caps->arch, "%s", be->target);

  caps->sm_count = (uint32_t)cus;
  caps->subgroup_size = (uint32_t)wave; /* 64 on CDNA, 32 on RDNA */
  caps->memory_bytes = mem;
  caps->cc_major = caps->cc_minor = 0; /* compute capability is NVIDIA's */
  caps->flags = unified ? GPU_CAP_UNIFIED_ADDR : 0u;
  be->max_grid[0] = (uint32_t)gx;
  be->max_grid[1] = (uint32_t)gy;
  be->max_grid[2] = (uint32_t)gz;
  be->max_shared = (uint32_t)shared;
  return METRALE_OK;
}

/* Why the runtime sees no GPU, in words a user can act on. */
static metrale_status no_device(const hip_api *api, hip_error e) {
  char text[256];
  if (e == HIP_API_SUCCESS)
    snprintf(text, sizeof text, "hipGetDeviceCount found 0 devices");
  else
    hip_error_text(api, e, text, sizeof text);
  const char *hint = access("/dev/kfd", F_OK) != 0
                         ? "; /dev/kfd is missing: the amdgpu kernel driver is not loaded, or this "
                           "container was started without --device=/dev/kfd"
                         : access("/dev/kfd", R_OK | W_OK) != 0
                               ? "; /dev/kfd is not readable and writable by this user (join the "
                                 "render and video groups)"
                               : "";
  int v = api->runtime_version; /* 10000000 * major + 100000 * minor + patch */
  return METRALE_ERROR(UNAVAILABLE, "no AMD GPU (HIP %d.%d runtime %s): %s%s", v / 10000000,
                       v / 100000 % 100, api->library, text, hint);
}

/* Everything after the backend object exists; on failure the caller destroys it. */
static metrale_status open_device(hip_backend *be, int index) {
  const hip_api *api = be->api;
  int count = 0;
  hip_error e = api->GetDeviceCount(&count);
  if (e != HIP_API_SUCCESS || count <= 0) return no_device(api, e);
  if (index < 0 || index >= count)
    return METRALE_ERROR(UNAVAILABLE, "HIP device %d requested, but there %s %d (0..%d)", index,
                         count == 1 ? "is" : "are", count, count - 1);
  be->device = index;
  METRALE_RETURN_IF_ERROR(hip_bind(be));
  be->device_selected = 1;
  METRALE_RETURN_IF_ERROR(read_device(be));
  if (!hip_target_built(be->target)) {
    char built[256];
    hip_built_targets(built, sizeof built);
    return METRALE_ERROR(UNAVAILABLE,
                         "%s is %s: this build carries HIP code objects for %s only (configure "
                         "with -DMETRALE_HIP_TARGETS=%s to add it)",
                         be->base.caps.device_name, be->base.caps.arch, built, be->target);
  }
  HIP_CHECK(api, api->StreamCreateWithFlags(&be->stream, HIP_API_STREAM_NON_BLOCKING),
            "hipStreamCreateWithFlags");
  return METRALE_OK;
}

metrale_status hip_create(const gpu_backend_options *options, gpu_backend **out_backend) {
  const hip_api *api = NULL;
  METRALE_RETURN_IF_ERROR(hip_api_get(&api));
  hip_backend *be = calloc(1, sizeof *be);
  if (!be) return METRALE_ERROR(OUT_OF_MEMORY, "hip backend object");
  if (pthread_mutex_init(&be->lock, NULL) != 0) {
    free(be);
    return METRALE_ERROR(INTERNAL, "hip backend: pthread_mutex_init failed");
  }
  be->base.vt = &hip_vtable;
  be->base.name = "hip";
  be->api = api;
  be->modules = calloc(hip_image_count ? hip_image_count : 1, sizeof *be->modules);
  be->module_error = calloc(hip_image_count ? hip_image_count : 1, sizeof *be->module_error);
  metrale_status s = be->modules && be->module_error
                         ? open_device(be, options ? options->device_index : 0)
                         : METRALE_ERROR(OUT_OF_MEMORY, "hip module table");
  if (s) {
    hip_destroy(&be->base);
    /* whatever stopped the device from opening, the backend is unavailable */
    if (metrale_status_code(s) != METRALE_CODE_UNAVAILABLE) {
      metrale_status u = METRALE_ERROR(UNAVAILABLE, "hip device could not be opened: %s",
                                       metrale_status_message(s));
      metrale_status_free(s);
      s = u;
    }
    return s;
  }
  *out_backend = &be->base;
  return METRALE_OK;
}
