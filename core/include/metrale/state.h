/* The state pool: n_slots sequences' recurrent and conv state in device memory.
 *
 *   conv state       f32 [n_slots, C, K-1]   the last K-1 conv inputs, oldest first
 *   recurrent state  f32 [n_slots, nv, dk, dv]
 *
 * Calls name sequences by slot id; slot -1 is padding and is never read or written. */
#ifndef METRALE_STATE_H
#define METRALE_STATE_H

#include <stdint.h>

#include "metrale/device.h"
#include "metrale/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct metrale_state_pool metrale_state_pool;

typedef struct metrale_state_dims {
  uint32_t conv_dim;   /* C */
  uint32_t conv_width; /* K */
  uint32_t nv, dk, dv;
} metrale_state_dims;

metrale_state_dims metrale_state_dims_of(const metrale_qwen3_config *cfg);

/* Allocates a pool of n_slots zeroed slots. */
metrale_status metrale_state_pool_create(metrale_device *dev, metrale_state_dims dims,
                                         uint32_t n_slots, metrale_state_pool **out_pool);
void metrale_state_pool_destroy(metrale_state_pool *pool);

uint32_t metrale_state_pool_slots(const metrale_state_pool *pool);
metrale_state_dims metrale_state_pool_dims(const metrale_state_pool *pool);
gpu_ptr metrale_state_pool_conv(const metrale_state_pool *pool);      /* f32 [n_slots, C, K-1] */
gpu_ptr metrale_state_pool_recurrent(const metrale_state_pool *pool); /* f32 [n_slots, nv, dk, dv] */
uint64_t metrale_state_pool_conv_floats(const metrale_state_pool *pool);      /* per slot */
uint64_t metrale_state_pool_recurrent_floats(const metrale_state_pool *pool); /* per slot */

/* Checks a list of slot ids: each in [0, n_slots) or -1, no id twice. */
metrale_status metrale_state_pool_check_slots(const metrale_state_pool *pool, const int32_t *slots,
                                              uint32_t count);
/* Zeroes the named slots (a fresh sequence).  -1 entries are skipped. */
metrale_status metrale_state_pool_reset(metrale_state_pool *pool, const int32_t *slots,
                                        uint32_t count);
/* Copies one slot's state to host memory (either pointer may be NULL). */
metrale_status metrale_state_pool_read(metrale_state_pool *pool, int32_t slot, float *conv,
                                       float *recurrent);

#ifdef __cplusplus
}
#endif
#endif
