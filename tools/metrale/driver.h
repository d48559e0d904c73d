/* Feeds sequences through a layer in the three modes of `metrale run` (prefill, decode
 * token by token, split:N), staging rows between host and device. */
#ifndef METRALE_CLI_DRIVER_H
#define METRALE_CLI_DRIVER_H

#include "cli.h"

#define MAX_SEQS 4096

typedef enum { MODE_PREFILL, MODE_DECODE, MODE_SPLIT } run_mode;

typedef struct run_ctx {
  metrale_device *dev;
  gpu_backend *be;
  metrale_qwen3_ssm_layer *layer;
  metrale_state_pool *pool;
  metrale_part part;
  uint32_t H, nseq;
  uint32_t len[MAX_SEQS];
  uint64_t first[MAX_SEQS]; /* first row of sequence i in x/y */
  float *x;                 /* [T, H] all sequences, back to back */
  float *y;                 /* [T, H] */
  gpu_ptr dx, dy;           /* device staging: dx f32 [T, H] (room for either input dtype), dy bf16 [T, H] */
} run_ctx;

/* One call of the layer over rows [from[i], from[i] + n[i]) of each sequence i; decode
 * calls skip sequences with n[i] == 0.  Results land in c->y. */
metrale_status driver_step(run_ctx *c, const uint32_t *from, const uint32_t *n, int decode);
/* All tokens of every sequence in one mode (split: the first `split` tokens, then the rest). */
metrale_status driver_run(run_ctx *c, run_mode mode, uint32_t split);

#endif
