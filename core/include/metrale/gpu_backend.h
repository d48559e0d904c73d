/* The gpu_backend vtable: everything the layer may ask of a device.
 *
 * A driver (cpu, cuda, hip, vulkan) implements this table; core/ calls nothing else.
 * Device memory is a gpu_ptr: a 64-bit address that may be offset arithmetically on
 * every backend (CPU: host address; CUDA/HIP: device address; Vulkan: buffer device
 * address).  Every entry returns a metrale_status; none aborts.
 *
 * A backend is a shared module libmetrale-backend-<name>.so exporting
 * metrale_backend_entry() (see gpu_backend_module below); the vendor runtime it needs
 * is opened with dlopen inside the module, so a machine without the driver gets an
 * UNAVAILABLE status with the reason instead of a failed start.  The CPU backend is
 * built into libmetrale. */
#ifndef METRALE_GPU_BACKEND_H
#define METRALE_GPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "metrale/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t gpu_ptr;    /* device address; 0 is the null pointer */
typedef uint64_t gpu_kernel; /* backend-defined kernel handle; 0 is the null handle */
typedef struct gpu_stream_s *gpu_stream; /* NULL is the backend's default stream */
typedef struct gpu_graph_s *gpu_graph;   /* recorded launches (see graph_begin) */

typedef struct gpu_dim3 {
  uint32_t x, y, z;
} gpu_dim3;

typedef enum gpu_arg_kind {
  GPU_ARG_PTR = 1, /* gpu_ptr, 8 bytes */
  GPU_ARG_U32 = 2,
  GPU_ARG_I32 = 3,
  GPU_ARG_F32 = 4,
  GPU_ARG_U64 = 5,
} gpu_arg_kind;

typedef struct gpu_arg {
  gpu_arg_kind kind;
  union {
    gpu_ptr ptr;
    uint32_t u32;
    int32_t i32;
    float f32;
    uint64_t u64;
  } v;
} gpu_arg;

static inline gpu_arg gpu_arg_ptr(gpu_ptr p) { gpu_arg a; a.kind = GPU_ARG_PTR; a.v.u64 = 0; a.v.ptr = p; return a; }
static inline gpu_arg gpu_arg_u32(uint32_t x) { gpu_arg a; a.kind = GPU_ARG_U32; a.v.u64 = 0; a.v.u32 = x; return a; }
static inline gpu_arg gpu_arg_i32(int32_t x) { gpu_arg a; a.kind = GPU_ARG_I32; a.v.u64 = 0; a.v.i32 = x; return a; }
static inline gpu_arg gpu_arg_f32(float x) { gpu_arg a; a.kind = GPU_ARG_F32; a.v.u64 = 0; a.v.f32 = x; return a; }
static inline gpu_arg gpu_arg_u64(uint64_t x) { gpu_arg a; a.kind = GPU_ARG_U64; a.v.u64 = x; return a; }

/* Capability flags. */
enum {
  GPU_CAP_HOPPER = 1u << 0,       /* sm_90a instructions (wgmma, TMA) */
  GPU_CAP_HOST_MEMORY = 1u << 1,  /* gpu_ptr is a host address (cpu backend) */
  GPU_CAP_UNIFIED_ADDR = 1u << 2, /* device pointers usable from every stream */
  /* Matrix products of IEEE half operands at the bf16 rate (tensor cores): the layer may keep
   * fp16 copies of weights for them (the prefill's gemm_f16_ws).  The cpu backend has the
   * kernels, as the oracle, but not the speed, so it leaves this clear. */
  GPU_CAP_F16_TENSOR = 1u << 3,
  /* The backend may start a kernel of the manifest's early-start rows while the kernel before it
   * on the stream still runs (kernels.def METRALE_KERNEL_EARLY_START; CUDA: programmatic
   * dependent launch, sm_90 and later).  Clear, the same kernels run one after the other. */
  GPU_CAP_EARLY_START = 1u << 4,
};

typedef struct gpu_caps {
  char device_name[128];
  char arch[32];          /* "sm_90", "gfx90a", "x86_64", ... */
  uint32_t sm_count;      /* compute units (CPU: threads used) */
  uint32_t subgroup_size; /* warp / wavefront / subgroup width (CPU: 1) */
  uint64_t memory_bytes;  /* device memory (CPU: physical RAM) */
  uint32_t cc_major, cc_minor; /* compute capability where it applies, else 0 */
  uint32_t flags;         /* GPU_CAP_* */
} gpu_caps;

typedef struct gpu_backend gpu_backend;

typedef struct gpu_backend_vtable {
  /* Releases every resource of the backend.  Memory not freed is freed with it. */
  void (*destroy)(gpu_backend *be);

  /* Kernel lookup by manifest module + name.  Unknown kernel: NOT_FOUND naming both.
   * Handles stay valid until destroy. */
  metrale_status (*kernel)(gpu_backend *be, const char *module, const char *name,
                           gpu_kernel *out_kernel);
  /* Enqueues a kernel on a stream.  args follow the manifest signature of the kernel
   * (checked by core before this is called); block is the manifest's block size. */
  metrale_status (*launch)(gpu_backend *be, gpu_kernel kernel, gpu_dim3 grid,
                           gpu_dim3 block, uint32_t shared_bytes, gpu_stream stream,
                           const gpu_arg *args, uint32_t nargs);

  /* Memory.  alloc of 0 bytes returns a valid, unique, non-zero pointer. */
  metrale_status (*alloc)(gpu_backend *be, uint64_t bytes, gpu_ptr *out_ptr);
  void (*free)(gpu_backend *be, gpu_ptr ptr); /* free(0) does nothing */
  metrale_status (*memset)(gpu_backend *be, gpu_ptr dst, uint8_t value, uint64_t bytes,
                           gpu_stream stream);
  metrale_status (*copy_h2d)(gpu_backend *be, gpu_ptr dst, const void *src, uint64_t bytes,
                             gpu_stream stream);
  metrale_status (*copy_d2h)(gpu_backend *be, void *dst, gpu_ptr src, uint64_t bytes,
                             gpu_stream stream);
  metrale_status (*copy_d2d)(gpu_backend *be, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                             gpu_stream stream);

  /* Streams: work on one stream runs in order.  Copies are asynchronous: a host
   * buffer handed to copy_h2d/copy_d2h must stay valid until the stream is synced. */
  metrale_status (*stream_create)(gpu_backend *be, gpu_stream *out_stream);
  metrale_status (*stream_sync)(gpu_backend *be, gpu_stream stream);
  void (*stream_destroy)(gpu_backend *be, gpu_stream stream);
  metrale_status (*sync)(gpu_backend *be); /* waits for all streams */
  /* Optional (NULL where the backend has none: callers then keep the work on one stream).
   * Work enqueued on `waiter` after this call starts only once all work enqueued on
   * `signaler` before it has finished; neither stream waits for the host.  Two calls fork a
   * second stream off a first and join it back; recorded between graph_begin and graph_end
   * on the first stream, the second stream's launches join the recording as a branch, and
   * it must be joined back before graph_end. */
  metrale_status (*stream_wait)(gpu_backend *be, gpu_stream waiter, gpu_stream signaler);

  /* Graphs: optional, all four NULL where the backend has none (callers then launch the
   * same work eagerly).  Between graph_begin and graph_end, launches on `stream` are
   * recorded instead of run; nothing but launches may be enqueued there meanwhile.
   * graph_end stops the recording whatever happened and, when the recording is usable,
   * returns it as a graph; with out_graph NULL it only stops and discards it.
   * graph_launch runs a graph's launches in order on a stream, with the arguments they
   * were recorded with (the memory they point to is read when they run). */
  metrale_status (*graph_begin)(gpu_backend *be, gpu_stream stream);
  metrale_status (*graph_end)(gpu_backend *be, gpu_stream stream, gpu_graph *out_graph);
  metrale_status (*graph_launch)(gpu_backend *be, gpu_graph graph, gpu_stream stream);
  void (*graph_destroy)(gpu_backend *be, gpu_graph graph); /* graph_destroy(NULL) does nothing */
} gpu_backend_vtable;

/* Every backend object starts with this header. */
struct gpu_backend {
  const gpu_backend_vtable *vt;
  const char *name; /* "cpu", "cuda", ... (static storage) */
  gpu_caps caps;
};

/* ---- backend modules (plugins) ---------------------------------------------------- */

#define METRALE_BACKEND_API_VERSION 3u /* 2: graph entries; 3: stream_wait */

typedef struct gpu_backend_options {
  int device_index; /* which device of the driver, default 0 */
} gpu_backend_options;

typedef struct gpu_backend_module {
  uint32_t api_version; /* METRALE_BACKEND_API_VERSION the module was built against */
  const char *name;     /* "cuda" */
  int score;            /* higher wins under --backend auto */
  /* Opens the driver and the device.  No driver or no device: UNAVAILABLE with the
   * reason.  The module outlives every backend it creates. */
  metrale_status (*create)(const gpu_backend_options *options, gpu_backend **out_backend);
  /* Optional (may be NULL): writes, per compiled target ("sm_90a", "gfx90a", ...), the
   * manifest kernels the module carries, one "target: k1 k2 ..." line per target.  Lets
   * `metrale audit` tell what a module holds on a machine without its device. */
  metrale_status (*describe)(char *buffer, size_t capacity);
} gpu_backend_module;

/* The symbol every backend module exports. */
#define METRALE_BACKEND_ENTRY_SYMBOL "metrale_backend_entry"
typedef const gpu_backend_module *(*metrale_backend_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
