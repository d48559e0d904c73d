/* The Qwen3 SSM decoder layer (Gated DeltaNet mixer + dense or MoE FFN), written once
 * against the gpu_backend vtable.  DESIGN.md section 4 is its numerical contract.
 *
 * The layer's input and output are bf16 [T, H] device buffers (the residual stream).
 * With METRALE_PART_MIXER the input is the mixer's own input, which metrale keeps in f32
 * (docs/numerics.md): x is then f32 [T, H].  State lives in a metrale_state_pool. */
#ifndef METRALE_QWEN3_SSM_H
#define METRALE_QWEN3_SSM_H

#include <stdint.h>
#include <stdio.h>

#include "metrale/device.h"
#include "metrale/state.h"
#include "metrale/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct metrale_qwen3_ssm_layer metrale_qwen3_ssm_layer;

typedef enum metrale_part {
  METRALE_PART_MIXER = 1, /* input goes straight to linear_attn; output = mixer output */
  METRALE_PART_LAYER = 2, /* the whole decoder layer, residuals included */
} metrale_part;

/* Where the layer's weights come from: a checkpoint, or seeded random values. */
typedef struct metrale_weight_source {
  /* Uploads the tensor `name` (checkpoint naming, e.g. "linear_attn.A_log" relative to
   * the layer prefix) converted to `to`, after checking its shape. */
  metrale_status (*upload)(void *ctx, metrale_device *dev, const char *name, metrale_dtype to,
                           const uint64_t *shape, uint32_t ndim, gpu_ptr dst);
  void *ctx;
} metrale_weight_source;

/* A checkpoint's layer `layer_index` as a weight source (names are looked up under
 * "model.layers.N." and, for Qwen3.5 multimodal checkpoints, "model.language_model.layers.N."). */
typedef struct metrale_checkpoint_source {
  metrale_checkpoint *ckpt;
  uint32_t layer_index;
} metrale_checkpoint_source;
metrale_weight_source metrale_weight_source_checkpoint(metrale_checkpoint_source *src);

/* Seeded random weights with the scales make_reference.py uses (for demo and bench). */
typedef struct metrale_random_source {
  uint64_t seed;
} metrale_random_source;
metrale_weight_source metrale_weight_source_random(metrale_random_source *src);

/* Creates the layer: checks the config, looks up its kernels (a missing required one is
 * an error naming it; optional ones decide the paths once, here) and uploads its
 * weights.  Fails for a full-attention layer or a layer index out of range. */
metrale_status metrale_qwen3_ssm_layer_create(metrale_device *dev, const metrale_qwen3_config *cfg,
                                              uint32_t layer_index, metrale_weight_source weights,
                                              metrale_qwen3_ssm_layer **out_layer);
void metrale_qwen3_ssm_layer_destroy(metrale_qwen3_ssm_layer *layer);

/* Bytes of device weights the layer holds. */
uint64_t metrale_qwen3_ssm_layer_weight_bytes(const metrale_qwen3_ssm_layer *layer);
int metrale_qwen3_ssm_layer_is_moe(const metrale_qwen3_ssm_layer *layer);
/* Decode steps are recorded once and replayed as graphs where the backend has graphs
 * (default on; the result is the same either way).  0 turns that off and drops the
 * recordings, 1 turns it back on.  A step is recorded once per (part, pool, x, y, batch,
 * stream) it meets, and a layer keeps 32 recordings.  With all 32 in use, a new key's steps
 * run eagerly until the least recently replayed recording has gone 64 decode steps unused,
 * which it then replaces: a serving loop that goes round more batch sizes than 32 replays 32
 * of them and launches the others.  A CUDA recording holds about 0.12-0.14 MB of device
 * memory (docs/perf-decode.md, section 33), so up to ~4.5 MB a layer. */
void metrale_qwen3_ssm_layer_set_graphs(metrale_qwen3_ssm_layer *layer, int on);
/* A MoE layer runs its shared expert on a second stream beside the routed experts where the
 * backend has stream_wait (default on; the result is the same bits either
 * way).  0 keeps all of the layer's work on the caller's stream and drops the recordings, 1
 * turns the second stream back on. */
void metrale_qwen3_ssm_layer_set_second_stream(metrale_qwen3_ssm_layer *layer, int on);
/* Whether the layer's FFN forks onto that second stream now (a MoE layer, a backend with
 * stream_wait, not turned off). */
int metrale_qwen3_ssm_layer_uses_second_stream(const metrale_qwen3_ssm_layer *layer);
/* Prints which kernel each step uses (and which fallbacks were taken). */
void metrale_qwen3_ssm_layer_describe(const metrale_qwen3_ssm_layer *layer, FILE *out);
/* The same for the shape-dependent choices (projection kernels by batch, the decode and
 * prefill kernels) of layer `layer_index` of `cfg` on `dev`, without creating the layer. */
metrale_status metrale_qwen3_ssm_describe_shape(metrale_device *dev, const metrale_qwen3_config *cfg,
                                                uint32_t layer_index, FILE *out);

/* Prefill: S sequences packed in x [T, H] (bf16, or f32 for the mixer part), T = cu_seqlens[S]; sequence s
 * continues from state slot slots[s] (reset a slot first for a fresh sequence) and
 * leaves its final state there.  y bf16 [T, H] may not alias x.  Everything is checked
 * before any slot is touched: a failed call leaves every slot as it was. */
metrale_status metrale_qwen3_ssm_prefill(metrale_qwen3_ssm_layer *layer, metrale_state_pool *pool,
                                         metrale_part part, const int32_t *cu_seqlens,
                                         const int32_t *slots, uint32_t n_seqs, gpu_ptr x,
                                         gpu_ptr y, gpu_stream stream);

/* Decode: one token for each of B slots, x [B, H] (as for prefill) and y bf16 [B, H].
 *
 * Both calls are queued on `stream` and return without waiting for the device, slot lists
 * and cu_seqlens included: the layer keeps its own copy of them, so the caller may reuse its
 * arrays at once.  A list that differs from the layer's last one is queued from a ring of 16
 * host copies; the host waits for the device only when that ring comes round (once every 16
 * new lists), when the layer's scratch or prefill workspace has to grow, and where the
 * backend's own copies wait (Vulkan's). */
metrale_status metrale_qwen3_ssm_decode(metrale_qwen3_ssm_layer *layer, metrale_state_pool *pool,
                                        metrale_part part, const int32_t *slots, uint32_t batch,
                                        gpu_ptr x, gpu_ptr y, gpu_stream stream);

#ifdef __cplusplus
}
#endif
#endif
