/* The conformance harness: one suite, instantiated per backend.
 *
 * METRALE_TEST_BACKEND names the backend under test (default cpu).  A test opens it
 * with cf_open (an unavailable backend skips the test with the reason), describes one
 * kernel launch as a cf_launch (guarded buffers + arguments in signature order), runs
 * it with cf_run, and compares the downloaded results with a double-precision
 * reference written in the test itself.  When the backend is not cpu, cf_run also runs
 * the launch on the cpu backend (the oracle) and compares the two. */
#ifndef METRALE_TEST_HARNESS_H
#define METRALE_TEST_HARNESS_H

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>

#include "conformance_util.h"
#include "metrale/device.h"

#define CF_MAX_BUF 12

/* CF_F16: IEEE half storage (uint16_t), compared with the oracle like CF_BF16 (NMSE after
 * widening, or bit-exact when oracle_tol is 0). */
typedef enum cf_type { CF_BF16 = 1, CF_F32, CF_I32, CF_F16 } cf_type;
/* CF_SCRATCH: device scratch a launch may use freely (starts as all 0xff bytes, or as init
 * where given; its contents are never compared). */
typedef enum cf_dir { CF_IN = 1, CF_OUT, CF_INOUT, CF_SCRATCH } cf_dir;

typedef struct cf_ctx {
  const char *backend;
  metrale_device *dev;    /* backend under test */
  metrale_device *oracle; /* cpu, when the backend under test is not cpu */
  uint64_t seed;
  mt_rng rng;
  char shape[160]; /* the case being run, for failure messages */
} cf_ctx;

typedef struct cf_buf {
  const char *name;
  cf_type type;
  cf_dir dir;
  size_t count;      /* elements */
  const void *init;  /* IN/INOUT: initial contents; OUT buffers start as all 0xff bytes */
  void *result;      /* after cf_run: contents after the launch (owned by the launch) */
  uint64_t guard;    /* guard band bytes, 0 = MT_GUARD_BYTES */
  uint32_t misalign; /* the buffer starts this many bytes (< 256) past a 256-byte boundary */
  double oracle_tol; /* NMSE tolerance against the oracle; 0 = bit-exact */
  const double *scale; /* f32 only, optional [count]: each value's scale, for the oracle's NMSE
                          as in cf_check_f32_scaled */
} cf_buf;

typedef struct cf_launch {
  metrale_kernel_id id;
  gpu_dim3 grid;
  uint32_t nbuf, nargs;
  cf_buf buf[CF_MAX_BUF];
  int arg_buf[METRALE_MAX_KERNEL_ARGS]; /* buffer index, or -1 for a scalar */
  gpu_arg arg[METRALE_MAX_KERNEL_ARGS];
  /* A kernel whose op is several launches in order (a phase argument): with nphase > 0,
   * cf_run launches it nphase times, launch p with phase_grid[p] and scalar argument
   * phase_arg set to p, before anything is checked; launch p runs kernel phase_id[p]
   * (cf_launch_init sets them all to id; a kernel whose phases pair with another's) with the
   * first phase_nargs[p] arguments (0: all of them; for a pair whose kernel of one phase takes
   * the other's arguments and more after them). */
  uint32_t nphase, phase_arg;
  gpu_dim3 phase_grid[4];
  metrale_kernel_id phase_id[4];
  uint32_t phase_nargs[4];
} cf_launch;

/* Opens the backend under test (and the oracle); skips the test when it is
 * unavailable.  Seeds ctx->rng with a fresh seed. */
void cf_open(cf_ctx *ctx);
void cf_close(cf_ctx *ctx);

/* The kernel's handle, or 0 when the backend lacks it: then prints why, and fails the
 * test when the kernel is REQUIRED. */
gpu_kernel cf_kernel(cf_ctx *ctx, metrale_kernel_id id);

/* Building a launch: buffers (returning their index) and arguments in order. */
void cf_launch_init(cf_launch *l, metrale_kernel_id id, gpu_dim3 grid);
int cf_buf_add(cf_launch *l, const char *name, cf_type type, cf_dir dir, size_t count,
               const void *init, double oracle_tol);
void cf_arg_buf(cf_launch *l, int buf);
/* a pointer argument of 0 (a contract's "no list") */
void cf_arg_null(cf_launch *l);
void cf_arg_u32(cf_launch *l, uint32_t v);
void cf_arg_i32(cf_launch *l, int32_t v);
void cf_arg_f32(cf_launch *l, float v);
void cf_launch_free(cf_launch *l);

/* Runs the launch on the backend under test: checks the launch status, every guard
 * band, that IN buffers were not written, and (with an oracle) every OUT/INOUT buffer
 * against the cpu backend.  Returns 1 when results are available in buf[].result. */
int cf_run(cf_ctx *ctx, cf_launch *l, gpu_kernel kernel);

/* Result checks against the test's own reference. */
void cf_check_bf16(cf_ctx *ctx, const char *what, const metrale_bf16 *got, const double *ref,
                   size_t n, double tol);
/* As cf_check_bf16, for IEEE half values (widened exactly with metrale_f16_to_f32). */
void cf_check_f16(cf_ctx *ctx, const char *what, const uint16_t *got, const double *ref, size_t n,
                  double tol);
/* As cf_check_f32, with the error taken against per-value scales instead of the values
 * (mt_nmse_scaled; scale NULL: cf_check_f32).  For sums whose terms can cancel (a value near
 * zero made of terms of size 1 carries their f32 rounding, not its own): scale = the sum of
 * the terms' magnitudes. */
void cf_check_f32_scaled(cf_ctx *ctx, const char *what, const float *got, const double *ref,
                         const double *scale, size_t n, double tol);
void cf_check_f32(cf_ctx *ctx, const char *what, const float *got, const double *ref, size_t n,
                  double tol);
void cf_check_exact(cf_ctx *ctx, const char *what, const void *got, const void *want,
                    size_t elem_bytes, size_t n);
/* For rounding tests on inputs built for them: each got[i] must be exact[i] (an f32 value the
 * kernel's arithmetic reaches exactly) rounded to the nearest bf16, as bf16.h rounds it.  Where
 * exact[i] lies halfway between two bf16 values either one passes: an ulp of error before the
 * rounding (a SiLU by a fast exp and division) moves such a tie across, and no other value. */
void cf_check_bf16_nearest(cf_ctx *ctx, const char *what, const metrale_bf16 *got, const float *exact, size_t n);

/* A launch of kernel id with args (grid 2) that its contract refuses: expects INVALID_ARGUMENT (a
 * launch that went ahead on the stand-in addresses would crash the test). */
void cf_expect_refused(cf_ctx *ctx, metrale_kernel_id id, gpu_kernel kern, const gpu_arg *args, uint32_t nargs,
                       const char *what);

/* Typed views of a result. */
static inline metrale_bf16 *cf_bf16(cf_launch *l, int b) {
  return (metrale_bf16 *)l->buf[b].result;
}
static inline uint16_t *cf_f16(cf_launch *l, int b) { return (uint16_t *)l->buf[b].result; }
static inline float *cf_f32(cf_launch *l, int b) { return (float *)l->buf[b].result; }
static inline int32_t *cf_i32(cf_launch *l, int b) { return (int32_t *)l->buf[b].result; }

/* calloc that fails the test instead of returning NULL. */
void *cf_alloc(size_t count, size_t size);

/* Tolerances (NMSE) shared by the kernels' tests. */
#define CF_TOL_BF16 2e-4
#define CF_TOL_F32 1e-10

/* Opens the backend and looks the kernel up; ends the test early (passing unless the
 * kernel is REQUIRED) when the backend lacks it. */
#define CF_BEGIN(ctx, kernel, id)          \
  cf_ctx ctx;                              \
  cf_open(&ctx);                           \
  gpu_kernel kernel = cf_kernel(&ctx, id); \
  if (!kernel) {                           \
    cf_close(&ctx);                        \
    return;                                \
  }

#define CF_EXPECT(ctx, cond, fmt, ...)                                                         \
  cr_expect((cond), "[%s seed=%llu %s] " fmt, (ctx)->backend, (unsigned long long)(ctx)->seed, \
            (ctx)->shape, __VA_ARGS__)

/* ---- recurrent-state helpers (gdn and conv tests) ------------------------------------ */

/* count distinct slot ids drawn from [0, n_slots); when pad, one entry in three (and at
 * least one when count > 1) is -1, the padding slot. */
void cf_pick_slots(mt_rng *rng, int32_t *slots, uint32_t count, uint32_t n_slots, int pad);

/* Checks a state buffer [n_slots, per] after a call that named slots[0..count): named
 * slots against ref (NMSE <= tol, or bit-exact against (float)ref when tol is 0), every
 * other slot bit-identical to init. */
void cf_check_state(cf_ctx *ctx, const char *what, const float *got, const float *init,
                    const double *ref, size_t per, uint32_t n_slots, const int32_t *slots,
                    uint32_t count, double tol);

#endif
