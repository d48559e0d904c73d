/* The CPU reference backend: host memory, kernels from kernels/cpu, run synchronously.
 *
 * Kernel handles are manifest ids + 1.  The dispatch table is generated from
 * kernels.def, naming cpu_k_<id> for every row, so the library does not link while a
 * manifest kernel lacks its CPU implementation. */
#define _GNU_SOURCE /* _SC_PHYS_PAGES */
#include "cpu_backend.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cpu_kernels.h"
#include "cpu_memory.h"
#include "metrale/manifest.h"

typedef struct cpu_backend {
  gpu_backend base; /* first: a gpu_backend* is a cpu_backend* */
  cpu_heap heap;
} cpu_backend;

static const cpu_kernel_fn dispatch[METRALE_K_COUNT] = {
#define METRALE_KERNEL(id, module, block, sig, req, fallback, contract) \
  [METRALE_K_##id] = cpu_k_##id,
#include "metrale/kernels.def"
#undef METRALE_KERNEL
};

cpu_heap *cpu_backend_heap(gpu_backend *be) { return &((cpu_backend *)be)->heap; }

static void cpu_destroy(gpu_backend *be) {
  if (!be) return;
  cpu_heap_release(cpu_backend_heap(be));
  free(be);
}

static metrale_status cpu_kernel(gpu_backend *be, const char *module, const char *name,
                                 gpu_kernel *out_kernel) {
  const metrale_kernel_info *info = metrale_kernel_info_find(module, name);
  if (!info || !dispatch[info->id])
    return METRALE_ERROR(NOT_FOUND, "cpu backend has no kernel %s.%s", module ? module : "(null)",
                         name ? name : "(null)");
  *out_kernel = (gpu_kernel)info->id + 1;
  return METRALE_OK;
}

static metrale_status cpu_launch(gpu_backend *be, gpu_kernel kernel, gpu_dim3 grid, gpu_dim3 block,
                                 uint32_t shared_bytes, gpu_stream stream, const gpu_arg *args,
                                 uint32_t nargs) {
  if (kernel == 0 || kernel > METRALE_K_COUNT)
    return METRALE_ERROR(INVALID_ARGUMENT, "cpu backend: invalid kernel handle %llu",
                         (unsigned long long)kernel);
  const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)(kernel - 1));
  /* core checks too, but a backend must not trust its caller with memory safety */
  METRALE_RETURN_IF_ERROR(metrale_kernel_check_args(info, args, nargs));
  return dispatch[kernel - 1](args);
}

static metrale_status cpu_sync(gpu_backend *be) { return METRALE_OK; }

/* Work runs when it is enqueued, so whatever the signaler was given is done already. */
static metrale_status cpu_stream_wait(gpu_backend *be, gpu_stream waiter, gpu_stream signaler) {
  (void)be, (void)waiter, (void)signaler;
  return METRALE_OK;
}

static const gpu_backend_vtable cpu_vtable = {
    .destroy = cpu_destroy,
    .kernel = cpu_kernel,
    .launch = cpu_launch,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset = cpu_memset,
    .copy_h2d = cpu_copy_h2d,
    .copy_d2h = cpu_copy_d2h,
    .copy_d2d = cpu_copy_d2d,
    .stream_create = cpu_stream_create,
    .stream_sync = cpu_stream_sync,
    .stream_destroy = cpu_stream_destroy,
    .sync = cpu_sync,
    .stream_wait = cpu_stream_wait,
};

/* "model name" of /proc/cpuinfo, or "CPU". */
static void cpu_model_name(char *buf, size_t cap) {
  snprintf(buf, cap, "CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    char *colon = strchr(line, ':');
    if (!colon) continue;
    char *s = colon + 1;
    while (*s == ' ' || *s == '\t') s++;
    size_t len = strcspn(s, "\r\n");
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    if (len > 0) snprintf(buf, cap, "%.*s", (int)len, s);
    break;
  }
  fclose(f);
}

static void fill_caps(gpu_caps *caps) {
  memset(caps, 0, sizeof *caps);
  cpu_model_name(caps->device_name, sizeof caps->device_name);
  struct utsname u;
  if (uname(&u) == 0)
    snprintf(caps->arch, sizeof caps->arch, "%.31s", u.machine);
  else
    snprintf(caps->arch, sizeof caps->arch, "x86_64");
  int threads = omp_get_max_threads();
  caps->sm_count = threads > 0 ? (uint32_t)threads : 1;
  caps->subgroup_size = 1;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  caps->memory_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  caps->flags = GPU_CAP_HOST_MEMORY;
  /* METRALE_CPU_AS_GPU=N: report N compute units and fp16 products at the bf16 rate, so that the
   * layer's path rules (ops.c) pick what a GPU of N multiprocessors picks (132: the H200) while
   * the kernels stay this backend's; the tests run so to reach the GPU paths' launches on CI */
  const char *as = getenv("METRALE_CPU_AS_GPU");
  if (as && *as) {
    char *end = NULL;
    const unsigned long n = strtoul(as, &end, 10);
    if (end && *end == '\0' && n >= 1 && n <= 4096) {
      caps->sm_count = (uint32_t)n;
      caps->flags |= GPU_CAP_F16_TENSOR;
    }
  }
}

static metrale_status cpu_create(const gpu_backend_options *options, gpu_backend **out_backend) {
  if (options && options->device_index != 0)
    return METRALE_ERROR(UNAVAILABLE, "cpu backend has only device 0, not %d",
                         options->device_index);
  cpu_backend *cb = calloc(1, sizeof *cb);
  if (!cb) return METRALE_ERROR(OUT_OF_MEMORY, "cpu backend object");
  cb->base.vt = &cpu_vtable;
  cb->base.name = "cpu";
  fill_caps(&cb->base.caps);
  cpu_heap_init(&cb->heap);
  *out_backend = &cb->base;
  return METRALE_OK;
}

static const gpu_backend_module cpu_module = {
    .api_version = METRALE_BACKEND_API_VERSION,
    .name = "cpu",
    .score = 100,
    .create = cpu_create,
    .describe = NULL,
};

const gpu_backend_module *cpu_backend_module(void) { return &cpu_module; }
