/* The kernel manifest (kernels.def) as C data: ids, signatures, requirements. */
#ifndef METRALE_MANIFEST_H
#define METRALE_MANIFEST_H

#include <stdint.h>

#include "metrale/gpu_backend.h"
#include "metrale/kernel_bounds.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum metrale_kernel_id {
#define METRALE_KERNEL(id, module, block, sig, req, fallback, contract) METRALE_K_##id,
#include "metrale/kernels.def"
#undef METRALE_KERNEL
  METRALE_K_COUNT
} metrale_kernel_id;

/* The most arguments a kernel's signature takes (the Vulkan generator checks the 128 bytes of push
 * constants separately) */
#define METRALE_MAX_KERNEL_ARGS 20

typedef enum metrale_requirement {
  METRALE_REQUIRED = 1,
  METRALE_OPTIONAL = 2,
} metrale_requirement;

typedef struct metrale_kernel_info {
  metrale_kernel_id id;
  const char *module;
  const char *name;
  uint32_t block;
  const char *signature; /* "y:p x:p n:u" */
  metrale_requirement requirement;
  const char *fallback;
  const char *contract;
  uint32_t shared_bytes; /* dynamic shared memory of every launch (METRALE_KERNEL_SHARED) */
  int early_start;       /* may start before its predecessor ends (METRALE_KERNEL_EARLY_START) */
  uint32_t cluster_x;    /* blocks a cluster along grid.x (METRALE_KERNEL_CLUSTER), 1 for none */
  metrale_kernel_id same_op; /* the kernel whose op this one computes (METRALE_KERNEL_SAME_OP),
                                or METRALE_K_COUNT */
  /* parsed signature */
  uint32_t nargs;
  gpu_arg_kind arg_kinds[METRALE_MAX_KERNEL_ARGS];
  char arg_names[METRALE_MAX_KERNEL_ARGS][16];
} metrale_kernel_info;

/* The manifest row of a kernel; NULL for an id out of range. */
const metrale_kernel_info *metrale_kernel_info_get(metrale_kernel_id id);
/* Finds a row by module + name; NULL when the manifest has no such kernel. */
const metrale_kernel_info *metrale_kernel_info_find(const char *module, const char *name);
/* The position of the argument named `name` in the kernel's signature; -1 when it has none. */
int metrale_kernel_arg_index(const metrale_kernel_info *info, const char *name);
/* Checks args against the kernel's signature: count and kinds. */
metrale_status metrale_kernel_check_args(const metrale_kernel_info *info, const gpu_arg *args,
                                         uint32_t nargs);
const char *metrale_arg_kind_name(gpu_arg_kind kind);

/* kernels.def moe_sort: the routed rows' lists in tiles of 64, S = ceil(R/64) + E + 1 slots of
 * 3 ints (every backend's kernels and the layer's buffers size them by this). */
#define METRALE_MOE_TILE_ROWS 64u
static inline uint64_t metrale_moe_slots(uint32_t r, uint32_t e) {
  return ((uint64_t)r + METRALE_MOE_TILE_ROWS - 1) / METRALE_MOE_TILE_ROWS + e + 1;
}

#ifdef __cplusplus
}
#endif
#endif
