/* Checkpoint and tensor-file access: safetensors (single or sharded) read through mmap,
 * a small safetensors writer, and config.json for Qwen3-Next / Qwen3.5.
 *
 * Every parser here treats its input as hostile: sizes are checked with overflow-safe
 * arithmetic before use, and every refusal is a DATA_LOSS (corrupt contents),
 * NOT_FOUND (missing file or tensor), IO or INVALID_ARGUMENT (wrong shape) status whose
 * message names the file and, where there is one, the tensor. */
#ifndef METRALE_WEIGHTS_H
#define METRALE_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "metrale/device.h"
#include "metrale/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum metrale_dtype {
  METRALE_DTYPE_BF16 = 1,
  METRALE_DTYPE_F16 = 2,
  METRALE_DTYPE_F32 = 3,
  METRALE_DTYPE_I32 = 4, /* readable, never converted */
} metrale_dtype;

size_t metrale_dtype_size(metrale_dtype dt);
const char *metrale_dtype_name(metrale_dtype dt); /* "BF16", ... as in safetensors */

#define METRALE_MAX_DIMS 8

typedef struct metrale_tensor_info {
  const char *name; /* owned by the file object */
  metrale_dtype dtype;
  uint32_t ndim;
  uint64_t shape[METRALE_MAX_DIMS];
  uint64_t nbytes;
} metrale_tensor_info;

/* ---- one safetensors file --------------------------------------------------------- */

typedef struct metrale_safetensors metrale_safetensors;

/* Maps and validates a file: 8-byte little-endian header length, header <= 100 MB, a
 * UTF-8 JSON object without duplicate keys, every tensor with a known dtype, a shape of
 * non-negative integers, data_offsets [begin, end] laid back to back from 0 in file
 * order, end - begin == product(shape) * dtype size (checked arithmetic), and no bytes
 * after the last tensor.  "__metadata__" must map strings to strings. */
metrale_status metrale_safetensors_open(const char *path, metrale_safetensors **out_file);
void metrale_safetensors_close(metrale_safetensors *f);
size_t metrale_safetensors_count(const metrale_safetensors *f);
/* i-th tensor in offset order. */
const metrale_tensor_info *metrale_safetensors_at(const metrale_safetensors *f, size_t i);
/* NULL when absent. */
const metrale_tensor_info *metrale_safetensors_find(const metrale_safetensors *f, const char *name);
/* Pointer to the tensor's bytes inside the mapping. */
const void *metrale_safetensors_data(const metrale_safetensors *f, const metrale_tensor_info *t);
/* Copies a tensor to host memory as f32 (from BF16, F16 or F32); count = element count. */
metrale_status metrale_safetensors_read_f32(const metrale_safetensors *f, const char *name,
                                            float *dst, uint64_t count);
/* Tells the kernel the pages of a tensor are no longer needed (keeps RSS bounded). */
void metrale_safetensors_release(const metrale_safetensors *f, const metrale_tensor_info *t);

/* ---- writing ---------------------------------------------------------------------- */

typedef struct metrale_tensor_out {
  const char *name;
  metrale_dtype dtype;
  uint32_t ndim;
  uint64_t shape[METRALE_MAX_DIMS];
  const void *data; /* product(shape) elements of dtype */
} metrale_tensor_out;

/* Writes a safetensors file atomically: a temporary file in the same folder, renamed
 * over path only when complete.  On failure nothing is left at path. */
metrale_status metrale_safetensors_write(const char *path, const metrale_tensor_out *tensors,
                                         size_t count);

/* ---- a checkpoint folder ---------------------------------------------------------- */

typedef struct metrale_checkpoint metrale_checkpoint;

/* dir holds model.safetensors, or model.safetensors.index.json naming its shards (each
 * shard must sit in dir; a weight_map entry must name a tensor its shard has). */
metrale_status metrale_checkpoint_open(const char *dir, metrale_checkpoint **out_ckpt);
void metrale_checkpoint_close(metrale_checkpoint *c);
/* Finds a tensor; NOT_FOUND naming it when absent. */
metrale_status metrale_checkpoint_find(metrale_checkpoint *c, const char *name,
                                       const metrale_tensor_info **out_info);
/* Uploads a tensor into device memory at dst, converted to `to` (BF16 or F32), after
 * checking its shape equals shape[0..ndim) (INVALID_ARGUMENT naming the tensor and both
 * shapes otherwise).  Streams through a bounded bounce buffer and releases the mapped
 * pages afterwards, so loading stays within a small constant above the weight bytes. */
metrale_status metrale_checkpoint_upload(metrale_checkpoint *c, metrale_device *dev,
                                         const char *name, metrale_dtype to,
                                         const uint64_t *shape, uint32_t ndim, gpu_ptr dst);

/* ---- config.json ------------------------------------------------------------------ */

typedef enum metrale_model_family {
  METRALE_QWEN3_NEXT = 1, /* model_type qwen3_next: in_proj_qkvz + in_proj_ba */
  METRALE_QWEN3_5 = 2,    /* qwen3_5_text, or qwen3_5(_moe) with text_config: split projections */
} metrale_model_family;

#define METRALE_MAX_LAYERS 1024

typedef struct metrale_qwen3_config {
  metrale_model_family family;
  uint32_t hidden_size;
  uint32_t num_hidden_layers;
  uint32_t nk, nv, dk, dv; /* linear_num_{key,value}_heads, linear_{key,value}_head_dim */
  uint32_t conv_kernel;    /* linear_conv_kernel_dim */
  float rms_norm_eps;
  uint32_t intermediate_size;      /* dense MLP */
  uint32_t num_experts;            /* 0: no MoE */
  uint32_t num_experts_per_tok;
  uint32_t moe_intermediate_size;
  uint32_t shared_expert_intermediate_size; /* 0: no shared expert */
  uint32_t decoder_sparse_step;
  int norm_topk_prob;
  uint8_t linear_layer[METRALE_MAX_LAYERS]; /* 1 where layer_types[i] == "linear_attention" */
  uint8_t mlp_only_layer[METRALE_MAX_LAYERS];
} metrale_qwen3_config;

/* Parses config.json text (len bytes).  Checks types and ranges: positive sizes, nv a
 * multiple of nk, num_experts_per_tok <= num_experts, layer count <= METRALE_MAX_LAYERS. */
metrale_status metrale_config_parse(const char *json, size_t len, metrale_qwen3_config *out);
metrale_status metrale_config_load(const char *path, metrale_qwen3_config *out);
/* DESIGN section 4: MoE when i is not in mlp_only_layers, num_experts > 0 and
 * (i + 1) % decoder_sparse_step == 0. */
int metrale_config_layer_is_moe(const metrale_qwen3_config *cfg, uint32_t layer);

#ifdef __cplusplus
}
#endif
#endif
