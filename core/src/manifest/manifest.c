/* The manifest table, built from kernels.def, with its signatures parsed once. */
#include "metrale/manifest.h"

#include <pthread.h>
#include <string.h>

static metrale_kernel_info table[METRALE_K_COUNT] = {
#define METRALE_KERNEL(id_, module_, block_, sig_, req_, fallback_, contract_) \
  {.id = METRALE_K_##id_, .module = #module_, .name = #id_, .block = block_,   \
   .signature = sig_, .requirement = METRALE_##req_, .fallback = fallback_,    \
   .contract = contract_},
#include "metrale/kernels.def"
#undef METRALE_KERNEL
};

/* METRALE_KERNEL_SHARED rows, and an end mark (C has no empty initialisers). */
static const struct {
  metrale_kernel_id id;
  uint32_t bytes;
} shared_rows[] = {
#define METRALE_KERNEL(id_, module_, block_, sig_, req_, fallback_, contract_)
#define METRALE_KERNEL_SHARED(id_, bytes_) {METRALE_K_##id_, bytes_},
#include "metrale/kernels.def"
#undef METRALE_KERNEL_SHARED
#undef METRALE_KERNEL
    {METRALE_K_COUNT, 0},
};

/* METRALE_KERNEL_EARLY_START rows, and an end mark. */
static const metrale_kernel_id early_rows[] = {
#define METRALE_KERNEL(id_, module_, block_, sig_, req_, fallback_, contract_)
#define METRALE_KERNEL_EARLY_START(id_) METRALE_K_##id_,
#include "metrale/kernels.def"
#undef METRALE_KERNEL_EARLY_START
#undef METRALE_KERNEL
    METRALE_K_COUNT,
};

/* METRALE_KERNEL_CLUSTER rows, and an end mark. */
static const struct {
  metrale_kernel_id id;
  uint32_t x;
} cluster_rows[] = {
#define METRALE_KERNEL(id_, module_, block_, sig_, req_, fallback_, contract_)
#define METRALE_KERNEL_CLUSTER(id_, x_) {METRALE_K_##id_, x_},
#include "metrale/kernels.def"
#undef METRALE_KERNEL_CLUSTER
#undef METRALE_KERNEL
    {METRALE_K_COUNT, 0},
};

/* METRALE_KERNEL_SAME_OP rows, and an end mark. */
static const struct {
  metrale_kernel_id id, as;
} same_op_rows[] = {
#define METRALE_KERNEL(id_, module_, block_, sig_, req_, fallback_, contract_)
#define METRALE_KERNEL_SAME_OP(id_, as_) {METRALE_K_##id_, METRALE_K_##as_},
#include "metrale/kernels.def"
#undef METRALE_KERNEL_SAME_OP
#undef METRALE_KERNEL
    {METRALE_K_COUNT, METRALE_K_COUNT},
};

static pthread_once_t parse_once = PTHREAD_ONCE_INIT;
static int parse_failed; /* a malformed kernels.def row; caught by the unit tests */

static gpu_arg_kind kind_of(char c) {
  switch (c) {
    case 'p': return GPU_ARG_PTR;
    case 'u': return GPU_ARG_U32;
    case 'i': return GPU_ARG_I32;
    case 'f': return GPU_ARG_F32;
    case 'q': return GPU_ARG_U64;
    default: return (gpu_arg_kind)0;
  }
}

static void parse_all(void) {
  for (int k = 0; k < METRALE_K_COUNT; k++) {
    metrale_kernel_info *info = &table[k];
    const char *s = info->signature;
    uint32_t n = 0;
    while (*s) {
      while (*s == ' ') s++;
      if (!*s) break;
      const char *colon = strchr(s, ':');
      if (!colon || n >= METRALE_MAX_KERNEL_ARGS || (size_t)(colon - s) >= sizeof info->arg_names[0]) {
        parse_failed = 1;
        break;
      }
      memcpy(info->arg_names[n], s, (size_t)(colon - s));
      info->arg_names[n][colon - s] = '\0';
      gpu_arg_kind kind = kind_of(colon[1]);
      if (!kind || (colon[2] != ' ' && colon[2] != '\0')) {
        parse_failed = 1;
        break;
      }
      info->arg_kinds[n++] = kind;
      s = colon + 2;
    }
    info->nargs = n;
  }
  for (size_t i = 0; shared_rows[i].id != METRALE_K_COUNT; i++) table[shared_rows[i].id].shared_bytes = shared_rows[i].bytes;
  for (size_t i = 0; early_rows[i] != METRALE_K_COUNT; i++) table[early_rows[i]].early_start = 1;
  for (int k = 0; k < METRALE_K_COUNT; k++) table[k].cluster_x = 1;
  for (size_t i = 0; cluster_rows[i].id != METRALE_K_COUNT; i++) table[cluster_rows[i].id].cluster_x = cluster_rows[i].x;
  for (int k = 0; k < METRALE_K_COUNT; k++) table[k].same_op = METRALE_K_COUNT;
  for (size_t i = 0; same_op_rows[i].id != METRALE_K_COUNT; i++) table[same_op_rows[i].id].same_op = same_op_rows[i].as;
}

const metrale_kernel_info *metrale_kernel_info_get(metrale_kernel_id id) {
  if ((int)id < 0 || id >= METRALE_K_COUNT) return NULL;
  pthread_once(&parse_once, parse_all);
  return parse_failed ? NULL : &table[id];
}

const metrale_kernel_info *metrale_kernel_info_find(const char *module, const char *name) {
  if (!module || !name) return NULL;
  for (int k = 0; k < METRALE_K_COUNT; k++) {
    if (strcmp(table[k].module, module) == 0 && strcmp(table[k].name, name) == 0)
      return metrale_kernel_info_get((metrale_kernel_id)k);
  }
  return NULL;
}

const char *metrale_arg_kind_name(gpu_arg_kind kind) {
  switch (kind) {
    case GPU_ARG_PTR: return "ptr";
    case GPU_ARG_U32: return "u32";
    case GPU_ARG_I32: return "i32";
    case GPU_ARG_F32: return "f32";
    case GPU_ARG_U64: return "u64";
  }
  return "invalid";
}

int metrale_kernel_arg_index(const metrale_kernel_info *info, const char *name) {
  for (uint32_t i = 0; info && name && i < info->nargs; i++)
    if (strcmp(info->arg_names[i], name) == 0) return (int)i;
  return -1;
}

metrale_status metrale_kernel_check_args(const metrale_kernel_info *info, const gpu_arg *args,
                                         uint32_t nargs) {
  if (!info) return METRALE_ERROR(INVALID_ARGUMENT, "unknown kernel");
  if (nargs != info->nargs || (nargs && !args))
    return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s takes %u arguments (%s), got %u", info->module,
                         info->name, info->nargs, info->signature, nargs);
  for (uint32_t i = 0; i < nargs; i++) {
    if (args[i].kind != info->arg_kinds[i])
      return METRALE_ERROR(INVALID_ARGUMENT, "%s.%s argument %u (%s) must be %s, got %s",
                           info->module, info->name, i, info->arg_names[i],
                           metrale_arg_kind_name(info->arg_kinds[i]),
                           metrale_arg_kind_name(args[i].kind));
  }
  return METRALE_OK;
}
