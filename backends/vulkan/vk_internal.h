/* The Vulkan backend's private state, shared by its files:
 *   vk_loader.c    libvulkan entry points (dlopen)
 *   vk_device.c    instance, device choice, validation messenger
 *   vk_memory.c    the sub-allocator behind gpu_ptr (buffer device addresses)
 *   vk_stream.c    command buffers, barriers, timeline-semaphore submission
 *   vk_transfer.c  copies and memset
 *   vk_pipeline.c  one compute pipeline per manifest kernel, launches
 *   vk_backend.c   the module entry, create/destroy, caps */
#ifndef VK_INTERNAL_H
#define VK_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "metrale/gpu_backend.h"
#include "metrale/manifest.h"
#include "vk_loader.h"

/* VkResult -> metrale_status at the boundary, with file and line. */
metrale_status vk_status_from(VkResult r, const char *file, int line, const char *what);
const char *vk_result_name(VkResult r);
#define VK_STATUS(r, what) vk_status_from((r), __FILE__, __LINE__, (what))
#define VK_TRY(call, what)                                                    \
  do {                                                                        \
    VkResult vk_try_r_ = (call);                                              \
    if (vk_try_r_ < 0) return vk_status_from(vk_try_r_, __FILE__, __LINE__, (what)); \
  } while (0)

/* ---- memory ------------------------------------------------------------------------ */

#define VK_ALIGNMENT 256u
#define VK_BLOCK_BYTES (256ull << 20)

typedef struct vk_range {
  uint64_t offset, size;
} vk_range;

/* One VkBuffer with its memory; sub-allocations are ranges of it. */
typedef struct vk_block {
  VkBuffer buffer;
  VkDeviceMemory memory;
  uint64_t address; /* buffer device address of offset 0 */
  uint64_t size;
  void *mapped;     /* host pointer when the memory is host-visible and coherent */
  int dedicated;    /* holds one allocation larger than a block */
  vk_range *free;   /* free ranges sorted by offset, coalesced */
  uint32_t n_free, cap_free;
} vk_block;

typedef struct vk_allocation {
  uint64_t address;
  uint64_t size;  /* of the range taken from the block (a multiple of VK_ALIGNMENT) */
  uint64_t bytes; /* asked for: copies and fills must stay inside these */
  vk_block *block;
} vk_allocation;

typedef struct vk_memory {
  vk_block **blocks; /* sorted by address */
  uint32_t n_blocks, cap_blocks;
  vk_allocation *allocs; /* sorted by address */
  uint32_t n_allocs, cap_allocs;
  uint32_t type_index;   /* memory type of the blocks */
  int host_mapped;       /* blocks are mapped: copies are memcpy (UMA devices, lavapipe) */
  uint64_t max_allocation;
} vk_memory;

/* Where a device address range lives. */
typedef struct vk_span {
  vk_block *block;
  uint64_t offset;
} vk_span;

/* ---- streams ----------------------------------------------------------------------- */

#define VK_STREAM_RING 2
#define VK_STREAM_MAX_COMMANDS 4096 /* a command buffer is submitted once this full */

struct gpu_stream_s {
  VkCommandPool pool;
  VkCommandBuffer cbs[VK_STREAM_RING];
  uint64_t cb_value[VK_STREAM_RING]; /* timeline value that signals cbs[i] done */
  uint32_t current;   /* index of the command buffer being recorded */
  int recording;
  uint32_t commands;  /* commands recorded into the current one */
  VkSemaphore timeline;
  uint64_t submitted; /* last value a submission will signal */
  struct gpu_stream_s *next;
};

/* ---- kernels ----------------------------------------------------------------------- */

typedef struct vk_pipeline {
  VkShaderModule module;
  VkPipelineLayout layout;
  VkPipeline pipeline;
} vk_pipeline;

/* ---- the backend ------------------------------------------------------------------- */

typedef struct vk_staging {
  VkBuffer buffer;
  VkDeviceMemory memory;
  void *mapped;
  uint64_t size;
  int coherent;
} vk_staging;

typedef struct vk_validation {
  pthread_mutex_t lock;
  int enabled;
  uint64_t errors;   /* counted by the debug messenger */
  uint64_t reported; /* errors already returned by a sync */
  char first[512];   /* the first error not yet reported */
} vk_validation;

/* METRALE_VULKAN_PROFILE=1 (vk_profile.c): timestamps around every launch, summed per kernel,
 * and per phase for a kernel with a `phase` argument (the chunked core's two passes are one
 * kernel). */
#define VK_PROFILE_SLOTS 4096u
#define VK_PROFILE_PHASES 2u
typedef struct vk_profile {
  VkQueryPool pool; /* VK_NULL_HANDLE: not profiling */
  uint32_t used;    /* slots written since the last read-back, two a launch */
  double ns_per_tick;
  uint64_t mask;                           /* the timestamps' valid bits */
  uint32_t row[VK_PROFILE_SLOTS / 2];      /* kernel id * VK_PROFILE_PHASES + phase */
  uint64_t ticks[VK_PROFILE_SLOTS];
  double total_ns[METRALE_K_COUNT * VK_PROFILE_PHASES];
  uint64_t launches[METRALE_K_COUNT * VK_PROFILE_PHASES];
} vk_profile;

typedef struct vk_backend {
  gpu_backend base;
  vk_fns fn;
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice phys;
  VkDevice device;
  VkQueue queue;
  uint32_t queue_family;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties memprops;
  /* Loop iterations a shader invocation may run in all before the driver ends its loops
   * (llvmpipe: 65535, shared by every loop; we budget VK_LLVMPIPE_LOOP_BUDGET of them); 0:
   * no such cap.  Where set, delta_rule_prefill and conv1d_prefill run long sequences in
   * windows of tokens, and delta_rule_prefill_chunked's phase 1 in windows of chunks, one
   * dispatch each (vk_pipeline.c). */
  uint32_t loop_cap;
  pthread_mutex_t lock; /* guards everything below and the queue */
  vk_memory mem;
  vk_staging staging;
  vk_block *pattern_block; /* 1 KiB: byte v repeated 4 times at offset 4v, for memset edges */
  uint64_t pattern_offset;
  struct gpu_stream_s default_stream;
  struct gpu_stream_s *streams; /* created streams */
  vk_pipeline pipelines[METRALE_K_COUNT];
  vk_validation validation;
  int host_query_reset; /* enabled at device creation (asked only when profiling) */
  int exec_stats;       /* pipelines capture their statistics (profiling, where the driver can) */
  vk_profile profile;
} vk_backend;

#define VK_LLVMPIPE_LOOP_BUDGET 60000u

/* Tokens of a sequence one delta_rule_prefill dispatch runs under a loop cap: the shader
 * loops about 3 dk times around a window and 2 dk + 4 times a token, for each of its
 * ceil(dv / block) column passes.  delta_rule_prefill.comp computes the same. */
static inline uint32_t vk_delta_window(uint32_t cap, uint32_t dk, uint32_t dv, uint32_t block) {
  const uint32_t passes = (dv + block - 1) / block;
  const uint32_t per_pass = cap / (passes ? passes : 1u);
  const uint32_t fixed = 3u * dk, per_token = 2u * dk + 4u;
  return per_pass > fixed + per_token ? (per_pass - fixed) / per_token : 1u;
}

/* Tokens of a sequence one conv1d_prefill dispatch runs under a loop cap: the shader loops
 * kw + 1 times a token and kw - 1 times to store the state.  conv1d_prefill.comp computes the
 * same. */
static inline uint32_t vk_conv_window(uint32_t cap, uint32_t kw) {
  return cap > 2u * kw + 2u ? (cap - kw) / (kw + 2u) : 1u;
}

/* Chunks of 64 tokens one delta_rule_prefill_chunked phase-1 dispatch runs under a loop cap,
 * for s sequences and V value columns a block: the shader loops about s + 2 dk V / block + 8
 * times around a window and (V/16) (dk + 64) + ceil(dk / (8 block/V)) 64 + 8 times a chunk.
 * delta_rule_prefill_chunked.comp computes the same; 0 where not even two chunks fit (a
 * window hands its state on through its last two records, so it needs two). */
static inline uint32_t vk_chunk_window(uint32_t cap, uint32_t s, uint32_t dk, uint32_t v, uint32_t block) {
  const uint32_t groups = block / v, fixed = s + 2u * ((dk * v + block - 1) / block) + 8u;
  const uint32_t per_chunk = (v / 16u) * (dk + 64u) + ((dk + 8u * groups - 1) / (8u * groups)) * 64u + 8u;
  if (cap <= fixed || (cap - fixed) / per_chunk < 2u) return 0;
  return (cap - fixed) / per_chunk;
}

static inline vk_backend *vk_cast(gpu_backend *be) { return (vk_backend *)be; }

/* vk_device.c */
metrale_status vk_device_open(vk_backend *be, const gpu_backend_options *options);
void vk_device_close(vk_backend *be);
/* Whether the chosen physical device offers the extension (0 also where it cannot be asked). */
int vk_has_device_extension(vk_backend *be, const char *name);
/* INTERNAL "N Vulkan validation errors: first: ..." for errors not yet reported. */
metrale_status vk_validation_check(vk_backend *be);

/* vk_profile.c (callers hold be->lock) */
int vk_profile_wanted(void);
void vk_profile_init(vk_backend *be);
/* Before recording a launch: reads the slots back when the pool is full (finishing every
 * stream first). */
metrale_status vk_profile_make_room(vk_backend *be);
/* the launch's row: its kernel, and its `phase` argument where it has one (looked up only
 * while profiling) */
void vk_profile_begin(vk_backend *be, VkCommandBuffer cb, const metrale_kernel_info *info,
                      const gpu_arg *args);
void vk_profile_end(vk_backend *be, VkCommandBuffer cb);
/* Reads the rest back, prints the per-kernel table to stderr, destroys the pool. */
void vk_profile_finish(vk_backend *be);

/* vk_memory.c (callers hold be->lock) */
metrale_status vk_memory_init(vk_backend *be);
void vk_memory_destroy(vk_backend *be);
metrale_status vk_memory_alloc(vk_backend *be, uint64_t bytes, gpu_ptr *out_ptr);
void vk_memory_free(vk_backend *be, gpu_ptr ptr);
/* The block and offset of [address, address + bytes): INVALID_ARGUMENT when the range is
 * not inside one live allocation. */
metrale_status vk_memory_resolve(vk_backend *be, gpu_ptr address, uint64_t bytes,
                                 vk_span *out_span);
/* Memory type with all of `want` among `allowed`, or UINT32_MAX. */
uint32_t vk_memory_type(const vk_backend *be, uint32_t allowed, VkMemoryPropertyFlags want);

/* vk_stream.c (callers hold be->lock) */
metrale_status vk_stream_init(vk_backend *be, struct gpu_stream_s *s);
void vk_stream_release(vk_backend *be, struct gpu_stream_s *s);
struct gpu_stream_s *vk_stream_of(vk_backend *be, gpu_stream stream);
/* The command buffer to record the next command into, after a barrier that orders it
 * behind everything recorded or submitted before on the queue. */
metrale_status vk_stream_record(vk_backend *be, struct gpu_stream_s *s, VkCommandBuffer *out_cb);
/* Submits what was recorded and waits until the stream is idle. */
metrale_status vk_stream_finish(vk_backend *be, struct gpu_stream_s *s);
metrale_status vk_streams_finish_all(vk_backend *be);
metrale_status vk_stream_create(gpu_backend *be, gpu_stream *out_stream);
metrale_status vk_stream_sync(gpu_backend *be, gpu_stream stream);
void vk_stream_destroy(gpu_backend *be, gpu_stream stream);
metrale_status vk_sync(gpu_backend *be);

/* vk_transfer.c */
metrale_status vk_transfer_init(vk_backend *be);
void vk_transfer_destroy(vk_backend *be);
void vk_transfer_destroy_staging(vk_backend *be);
metrale_status vk_memset(gpu_backend *be, gpu_ptr dst, uint8_t value, uint64_t bytes,
                         gpu_stream stream);
metrale_status vk_copy_h2d(gpu_backend *be, gpu_ptr dst, const void *src, uint64_t bytes,
                           gpu_stream stream);
metrale_status vk_copy_d2h(gpu_backend *be, void *dst, gpu_ptr src, uint64_t bytes,
                           gpu_stream stream);
metrale_status vk_copy_d2d(gpu_backend *be, gpu_ptr dst, gpu_ptr src, uint64_t bytes,
                           gpu_stream stream);

/* vk_pipeline.c */
metrale_status vk_kernel(gpu_backend *be, const char *module, const char *name,
                         gpu_kernel *out_kernel);
metrale_status vk_launch(gpu_backend *be, gpu_kernel kernel, gpu_dim3 grid, gpu_dim3 block,
                         uint32_t shared_bytes, gpu_stream stream, const gpu_arg *args,
                         uint32_t nargs);
void vk_pipelines_destroy(vk_backend *be);
/* "spirv-vulkan1.2: k1 k2 ..." */
metrale_status vk_describe(char *buffer, size_t capacity);

#endif
