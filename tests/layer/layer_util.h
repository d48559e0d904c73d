/* Helpers of the layer tests: fixtures, the backend under test, comparisons. */
#ifndef METRALE_LAYER_UTIL_H
#define METRALE_LAYER_UTIL_H

#include "driver.h"

#define LAYER_TOL 1.5e-2 /* relative L2 against transformers (DESIGN.md section 7) */

/* Opens the backend named by METRALE_TEST_BACKEND (default cpu); skips the test with
 * the reason when it is unavailable. */
metrale_device *lt_open_device(void);

typedef struct lt_fixture {
  char dir[512];
  uint32_t layer;
  metrale_qwen3_config cfg;
  metrale_checkpoint *ckpt;
  metrale_safetensors *io;
} lt_fixture;

void lt_fixture_open(lt_fixture *f, const char *name, uint32_t layer);
void lt_fixture_close(lt_fixture *f);
/* Reads a fixture tensor as f32 (malloc'ed); count receives the element count. */
float *lt_read(const lt_fixture *f, const char *name, uint64_t *count);

/* A run of the layer over sequences held on the host. */
typedef struct lt_run {
  run_ctx c;
  uint64_t T;
  float *conv, *rec; /* final state per sequence */
  uint64_t cf, rf;   /* floats per slot */
} lt_run;

/* Sets up c (device, layer from the fixture or random seed, pool of n_slots) for the
 * given sequences: x bf16 rows back to back. */
void lt_run_init(lt_run *r, metrale_device *dev, const lt_fixture *f, const metrale_qwen3_config *cfg,
                 uint64_t random_seed, metrale_part part, const float *x, const uint32_t *lens,
                 uint32_t nseq, uint32_t n_slots);
void lt_run_mode(lt_run *r, run_mode mode, uint32_t split);
void lt_run_read_states(lt_run *r);
void lt_run_free(lt_run *r);

/* Expects the kernel to have been launched on dev since the last metrale_device_launches_reset,
 * where the backend has it (a test that means to reach a path says so with this). */
void lt_expect_launched(metrale_device *dev, metrale_kernel_id id, const char *why);

/* A small Qwen3-Next layer's shape (hidden 96, 2 key / 4 value heads of 32/24), with 8 experts
 * where moe, else a dense MLP. */
void lt_small_config(metrale_qwen3_config *c, int moe);

/* n floats from seed, uniform in [-1.5, 1.5) (one sequence of a 64-bit LCG; malloc'ed). */
float *lt_random_x(uint64_t n, uint64_t seed);
/* 0 where a and b hold the same bits; else a failed expectation naming what and the first
 * differing index, and 1 (the first ny values are outputs, the rest final states). */
int lt_expect_same_bits(const float *a, const float *b, uint64_t n, uint64_t ny, const char *what);

double lt_rel_l2(const float *a, const float *b, uint64_t n);
/* Asserts rel_l2(got, want) <= tol, with a message naming what. */
void lt_expect_close(const char *what, const float *got, const float *want, uint64_t n, double tol);

#endif
